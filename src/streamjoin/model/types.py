"""Column types a job file may declare."""

from __future__ import annotations

import typing as t
from dataclasses import dataclass

TypeName = t.Literal["BIGINT", "INT", "DOUBLE", "STRING", "BOOLEAN", "TIMESTAMP", "DECIMAL"]
"""The declarable type names (DECIMAL takes a precision and a scale)."""

TypeCategory = t.Literal["numeric", "string", "boolean", "timestamp"]
"""What a type can be compared or computed with: values of one category only meet their own."""

TYPE_NAMES: tuple[TypeName, ...] = t.get_args(TypeName)

_CATEGORY: dict[TypeName, TypeCategory] = {
    "BIGINT": "numeric",
    "INT": "numeric",
    "DOUBLE": "numeric",
    "DECIMAL": "numeric",
    "STRING": "string",
    "BOOLEAN": "boolean",
    "TIMESTAMP": "timestamp",
}


@dataclass(frozen=True, slots=True)
class SqlType:
    """A declared column type.

    >>> SqlType("DECIMAL", 10, 2).ddl
    'DECIMAL(10,2)'
    >>> SqlType("BIGINT").category
    'numeric'
    """

    name: TypeName
    precision: int | None = None
    scale: int | None = None

    def __post_init__(self) -> None:
        if self.name not in TYPE_NAMES:
            msg = f"unknown type {self.name!r}; expected one of {', '.join(TYPE_NAMES)}"
            raise ValueError(msg)
        if self.name == "DECIMAL":
            if self.precision is None or self.scale is None:
                msg = "DECIMAL needs a precision and a scale, e.g. DECIMAL(10,2)"
                raise ValueError(msg)
            if not (1 <= self.precision <= 38 and 0 <= self.scale <= self.precision):
                msg = f"DECIMAL({self.precision},{self.scale}): need 1 <= p <= 38 and 0 <= s <= p"
                raise ValueError(msg)
        elif self.precision is not None or self.scale is not None:
            msg = f"{self.name} takes no precision or scale"
            raise ValueError(msg)

    @property
    def ddl(self) -> str:
        """The type as Spark SQL DDL spells it."""
        if self.name == "DECIMAL":
            return f"DECIMAL({self.precision},{self.scale})"
        return self.name

    @property
    def category(self) -> TypeCategory:
        """The comparison category of the type."""
        return _CATEGORY[self.name]
