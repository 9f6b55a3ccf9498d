"""The query model: streams, sinks, queries and join predicates. Pure, immutable, no Spark."""

from __future__ import annotations

from streamjoin.model.aggregate import Aggregation, EventWindow, TopN
from streamjoin.model.groups import GroupQuery, StreamGroup, StreamRows
from streamjoin.model.job import (
    Column,
    Job,
    JoinSide,
    OuterJoin,
    Query,
    SelectItem,
    SinkDef,
    StreamDef,
    Watermark,
)
from streamjoin.model.types import SqlType

__all__ = [
    "Aggregation",
    "Column",
    "EventWindow",
    "GroupQuery",
    "Job",
    "JoinSide",
    "OuterJoin",
    "Query",
    "SelectItem",
    "SinkDef",
    "SqlType",
    "StreamDef",
    "StreamGroup",
    "StreamRows",
    "TopN",
    "Watermark",
]
