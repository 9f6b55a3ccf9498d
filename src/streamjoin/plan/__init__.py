"""The physical plan: how each query's predicate is split and how each stream's state is kept."""

from __future__ import annotations

from streamjoin.plan.classify import classify_predicate
from streamjoin.plan.multiway import MultiwayPlan, plan_multiway
from streamjoin.plan.parts import Band, EquiKey, PredicateParts, TimeWindow
from streamjoin.plan.physical import JobPlan, QueryPlan, plan_job
from streamjoin.plan.probeorder import ProbeOrder, Step
from streamjoin.plan.retention import query_retention
from streamjoin.plan.streams import StreamPlan

__all__ = [
    "Band",
    "EquiKey",
    "JobPlan",
    "MultiwayPlan",
    "PredicateParts",
    "ProbeOrder",
    "QueryPlan",
    "Step",
    "StreamPlan",
    "TimeWindow",
    "classify_predicate",
    "plan_job",
    "plan_multiway",
    "query_retention",
]
