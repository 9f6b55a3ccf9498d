"""Which queries may shed probes under overload (``WITH (overload = 'shed')``, `adapt.overload`).

Shedding skips some rows' probes; every row is still stored, so every pair written is a true
pair and the result is a subset of the exact one. That holds for the pairs of an inner join,
two-way on its engine's own partitioning or multi-way (a term of the delta rule skips some of
its new rows). It does not for what is computed over the pairs: a count, a top-N or a row
written for want of a partner would come out wrong, not short. Those and fixed partitioning
schemes are refused, naming the query.
"""

from __future__ import annotations

from streamjoin.errors import UnsupportedError
from streamjoin.model import Job, Query
from streamjoin.model.intervals import seconds_of


def sheds(query: Query) -> bool:
    """Whether `query` asked to shed probes when overloaded."""
    return query.option("overload", "exact") == "shed"


def counts_shed_pairs(query: Query) -> bool:
    """Whether `query` counts the pairs its skipped probes would have found (``shed_count =
    'exact'``: a count-only join of the skipped rows, which costs the probes shedding saves)
    rather than estimating them from the pairs its probes found."""
    return query.option("shed_count", "estimate") == "exact"


def freshness(query: Query) -> int | None:
    """The oldest, in seconds, an input's row may be in a row `query` writes while it sheds
    (``freshness``: JAQPOT's predicate, the same for every input; None: none asked)."""
    given = query.option("freshness")
    return None if given is None else seconds_of(given)


def check_shedding(job: Job, query: Query) -> None:
    """Refuse ``overload = 'shed'`` where a skipped probe would make a wrong row.

    Raises:
        UnsupportedError: naming the query and what it does over its pairs.
    """
    if not sheds(query):
        for key in ("budget", "shed_count", "shed_policy", "freshness"):
            if query.option(key) is not None:
                msg = f"query {query.name}: {key} applies with overload = 'shed'"
                raise UnsupportedError(msg, line=query.line, col=1, text=key, source=job.source)
        return
    why = None
    if query.windowed is not None or query.rollup is not None:
        why = "its groups' values would be wrong, not short"
    elif query.outer is not None:
        why = "a row would be written without a partner it has"
    elif query.option("partitioning", "auto") != "auto":
        why = "it fixes a partitioning scheme (shedding runs on the default one)"
    if why is not None:
        msg = f"query {query.name}: overload = 'shed' is not supported: {why}"
        raise UnsupportedError(msg, line=query.line, col=1, text="overload", source=job.source)


def check_freshness(job: Job, query: Query, bounded: bool) -> None:
    """Refuse ``freshness`` where an input's rows are kept for good (`bounded` false: a
    full-history join, or an input no window bounds): a row written may then hold one of any
    age, so no split of the budget could meet it.

    Raises:
        UnsupportedError: naming the query.
    """
    if freshness(query) is not None and not bounded:
        msg = (
            f"query {query.name}: freshness needs every input bounded by a time window; an "
            "input kept for its whole history can be in a row written at any age"
        )
        raise UnsupportedError(msg, line=query.line, col=1, text="freshness", source=job.source)
