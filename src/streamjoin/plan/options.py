"""The WITH options of a query checked against its plan: a forced partitioning scheme or time
buckets that the predicate cannot run, refused where the job wrote them."""

from __future__ import annotations

import typing as t

from streamjoin.errors import UnsupportedError

if t.TYPE_CHECKING:
    from streamjoin.model import Job, Query
    from streamjoin.plan.parts import Band, PredicateParts


def check_multiway_options(job: Job, q: Query) -> None:
    """A multi-way join runs by probe orders: no partitioning scheme but hash can be forced."""
    forced = q.option("partitioning", "auto")
    if forced not in ("auto", "hash"):
        msg = (
            f"query {q.name}: partitioning '{forced}' is for two-way joins; a join of "
            f"{len(q.sides)} inputs runs by probe orders (leave partitioning out)"
        )
        raise UnsupportedError(
            msg, line=q.line, col=1, text=f"partitioning = '{forced}'", source=job.source
        )


def check_two_way_options(
    job: Job, q: Query, parts: PredicateParts, band: Band | None, time_band: Band | None
) -> None:
    """A forced scheme must fit the predicate: hash routing needs an equality key, range
    routing a band (content-insensitive schemes fit any predicate); forced time buckets need
    an equi join's `time_band`."""
    forced = q.option("partitioning", "auto")
    need = None
    if forced in ("hash", "contrand") and not parts.equi:
        need = "an equality conjunct (a.x = b.y) to hash on"
    elif forced == "range" and band is None:
        need = "a band (abs(a.x - b.y) <= c, a BETWEEN, or an event-time window)"
    if need is not None:
        msg = (
            f"query {q.name}: partitioning '{forced}' needs {need}; "
            "use 'matrix' or 'biclique', which fit any predicate"
        )
        raise UnsupportedError(
            msg, line=q.line, col=1, text=f"partitioning = '{forced}'", source=job.source
        )
    if q.option("time_buckets", "auto") == "true" and time_band is None:
        msg = (
            f"query {q.name}: time_buckets = true needs an equality key and an event-time window "
            "bounded on both sides, and no value band (which is bucketed already)"
        )
        raise UnsupportedError(
            msg, line=q.line, col=1, text="time_buckets = 'true'", source=job.source
        )
