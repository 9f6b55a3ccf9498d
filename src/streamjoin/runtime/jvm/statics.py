"""A JVM class's static methods through py4j, each name looked up once."""

from __future__ import annotations

import typing as t


class StaticMethods:
    """The static methods of JVM class `cls` (a py4j ``JavaClass``), each looked up once.

    py4j asks the JVM what a name of a class is (a method, a field, an inner class) on every
    attribute access, a round trip each time. Only for methods: a field's value would be read
    once and kept."""

    def __init__(self, cls: t.Any) -> None:
        self._cls = cls

    def __getattr__(self, name: str) -> t.Any:
        member = getattr(self._cls, name)
        self.__dict__[name] = member
        return member
