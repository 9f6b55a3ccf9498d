"""The physical plan: how each query's predicate is split and how each stream's state is kept."""

from __future__ import annotations

from streamjoin.plan.classify import Band, EquiKey, PredicateParts, TimeWindow, classify_predicate
from streamjoin.plan.physical import JobPlan, QueryPlan, StreamPlan, plan_job

__all__ = [
    "Band",
    "EquiKey",
    "JobPlan",
    "PredicateParts",
    "QueryPlan",
    "StreamPlan",
    "TimeWindow",
    "classify_predicate",
    "plan_job",
]
