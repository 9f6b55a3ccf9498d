"""Typed readers for the JSON-able dicts the controllers persist in the runtime's manifest.

A manifest written by one version and read by another must fail loudly, naming the key, rather
than resume a controller from a half-understood state: replays would then decide differently.
"""

from __future__ import annotations

import math
import typing as t

if t.TYPE_CHECKING:
    from collections.abc import Mapping


def check_kind(data: Mapping[str, t.Any], kind: str, version: int) -> None:
    """Reject a dict that is not a `kind` state of this `version`."""
    if data.get("kind") != kind or data.get("version") != version:
        msg = (
            f"not a {kind!r} state of version {version}: "
            f"kind={data.get('kind')!r}, version={data.get('version')!r}"
        )
        raise ValueError(msg)


def get_int(data: Mapping[str, t.Any], key: str) -> int:
    """`data[key]` as an int (bools are rejected: JSON would not have produced them)."""
    value = _get(data, key)
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"state key {key!r} must be an integer, got {value!r}"
        raise ValueError(msg)
    return value


def get_opt_int(data: Mapping[str, t.Any], key: str) -> int | None:
    """`data[key]` as an int or None."""
    return None if _get(data, key) is None else get_int(data, key)


def get_float(data: Mapping[str, t.Any], key: str) -> float:
    """`data[key]` as a finite float (JSON may have written an integral float as an int)."""
    value = _get(data, key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        msg = f"state key {key!r} must be a finite number, got {value!r}"
        raise ValueError(msg)
    return float(value)


def get_bool(data: Mapping[str, t.Any], key: str) -> bool:
    """`data[key]` as a bool."""
    value = _get(data, key)
    if not isinstance(value, bool):
        msg = f"state key {key!r} must be true or false, got {value!r}"
        raise ValueError(msg)
    return value


def get_str(data: Mapping[str, t.Any], key: str) -> str:
    """`data[key]` as a str."""
    value = _get(data, key)
    if not isinstance(value, str):
        msg = f"state key {key!r} must be a string, got {value!r}"
        raise ValueError(msg)
    return value


def get_ints(data: Mapping[str, t.Any], key: str) -> tuple[int, ...]:
    """`data[key]` as a tuple of ints (JSON writes tuples as lists)."""
    value = _get(data, key)
    if not isinstance(value, list | tuple) or any(
        isinstance(v, bool) or not isinstance(v, int) for v in value
    ):
        msg = f"state key {key!r} must be a list of integers, got {value!r}"
        raise ValueError(msg)
    return tuple(value)


def get_list(data: Mapping[str, t.Any], key: str) -> list[t.Any]:
    """`data[key]` as a list of anything (the caller decodes the items)."""
    value = _get(data, key)
    if not isinstance(value, list | tuple):
        msg = f"state key {key!r} must be a list, got {value!r}"
        raise ValueError(msg)
    return list(value)


def get_shape(data: Mapping[str, t.Any], key: str) -> tuple[int, int]:
    """`data[key]` as an (n, m) pair."""
    pair = get_ints(data, key)
    if len(pair) != 2:
        msg = f"state key {key!r} must be an (n, m) pair, got {pair!r}"
        raise ValueError(msg)
    return pair[0], pair[1]


def _get(data: Mapping[str, t.Any], key: str) -> t.Any:
    if key not in data:
        msg = f"state has no key {key!r} (keys: {sorted(data)})"
        raise ValueError(msg)
    return data[key]
