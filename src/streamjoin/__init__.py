"""streamjoin: continuous joins over data streams on Apache Spark.

Theta joins of any predicate (equi, band, inequality, anything Spark SQL can evaluate), over
windows or the full history, exact and exactly-once. Public surface:

- `parse_job` — a job file's text to a `Job`;
- `plan_job` — a job's physical plan (`JobPlan.explain()` is what ``streamjoin explain`` prints);
- `Engine` — runs jobs on a SparkSession (imports pyspark on first use);
- `run_reference` — the brute-force oracle the engine is tested against.
"""

from __future__ import annotations

import typing as t

from streamjoin.errors import JobError, StreamJoinError, UnsupportedError
from streamjoin.model import Job
from streamjoin.plan import JobPlan, plan_job

if t.TYPE_CHECKING:
    from streamjoin.runtime.engine import Engine
    from streamjoin.runtime.progress import Summary

__all__ = [
    "Engine",
    "Job",
    "JobError",
    "JobPlan",
    "StreamJoinError",
    "Summary",
    "UnsupportedError",
    "parse_job",
    "plan_job",
]


def parse_job(text: str, source: str = "<string>") -> Job:
    """Parse a job file (see `streamjoin.sql.parse_job`)."""
    from streamjoin.sql import parse_job as _parse

    return _parse(text, source)


def __getattr__(name: str) -> t.Any:
    # Engine and Summary live in runtime/, which imports pyspark: load it only when asked for.
    if name == "Engine":
        from streamjoin.runtime.engine import Engine

        return Engine
    if name == "Summary":
        from streamjoin.runtime.progress import Summary

        return Summary
    msg = f"module 'streamjoin' has no attribute {name!r}"
    raise AttributeError(msg)
