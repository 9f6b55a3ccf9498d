"""The query model: streams, sinks, queries and join predicates. Pure, immutable, no Spark."""

from __future__ import annotations

from streamjoin.model.job import (
    Column,
    Job,
    JoinSide,
    Query,
    SelectItem,
    SinkDef,
    StreamDef,
    Watermark,
)
from streamjoin.model.types import SqlType

__all__ = [
    "Column",
    "Job",
    "JoinSide",
    "Query",
    "SelectItem",
    "SinkDef",
    "SqlType",
    "StreamDef",
    "Watermark",
]
