"""Measured selectivities for CLASH's optimizer: each distinct pair join counted on a sample.

At the last batch of an epoch (`Reorderer.measuring`), every pair of inputs that some multi-way
query joins (`plan.clash.pair_measures`) is counted once, in one Spark job beside the batch's
joins: the pair's new joined pairs of the batch, by the two-way delta rule

    sample(Δi) ⋈ (Sj ∪ Δj)   +   sample(Δj) ⋈ Si

where Sx is stream x's stored rows and the sample keeps a fraction f of a delta by a hash of its
columns (deterministic, so a replayed batch measures the same). Each term's counts are divided
by its f. A pair with routable equalities is joined on them and counted twice, all pairs and
those meeting its whole conjunction; any other pair is joined as a probe step of its own
(`plan.multiway.pair_step`: hash, band buckets or nested loop) and counted once.
`plan.clash.measured_selectivities` turns the counts into selectivities.
"""

from __future__ import annotations

import typing as t

from streamjoin.plan.multiway import pair_step, renamed_sql
from streamjoin.runtime.multiway.terms import renamed, step_sql
from streamjoin.runtime.threads import Background

if t.TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from pyspark.sql import SparkSession

    from streamjoin.adapt.probes import Reorderer
    from streamjoin.model import StreamDef
    from streamjoin.plan import MultiwayPlan
    from streamjoin.plan.clash import PairMeasure

SAMPLE_ROWS = 4000
"""Delta rows each term of a measure probes with, at most (more are sampled down)."""

Counts = dict[int, tuple[float | None, float]]
"""Per measure (its index): pairs meeting its equalities (None without any), and pairs meeting
its whole conjunction, scaled up from the samples."""


def fraction(expected_rows: float | None) -> float:
    """The share of a delta to probe with, for `expected_rows` rows (None: unknown, all)."""
    if expected_rows is None or expected_rows <= SAMPLE_ROWS:
        return 1.0
    return SAMPLE_ROWS / expected_rows


def _hashable(stream: StreamDef) -> str:
    """The columns a sample hashes: all but maps (Spark has no hash of a map). The event time
    alone would do, but many rows share one."""
    return ", ".join(f"`{c.name}`" for c in stream.columns if not c.type.ddl.startswith("MAP"))


def _sample(view: str, columns: str, f: float) -> str:
    if f >= 1.0:
        return view
    return f"(SELECT * FROM {view} WHERE pmod(xxhash64({columns}), 1000000) < {int(f * 1e6)})"


def measure_sql(
    mp: MultiwayPlan,
    measure: PairMeasure,
    index: int,
    streams: Sequence[StreamDef],
    deltas: Mapping[str, str],
    store: Callable[[str, bool], str],
    fractions: Mapping[str, float],
) -> str:
    """One SELECT of rows (measure, share, equal, total), one per term.

    Args:
        mp: the plan of the query the measure was taken from (for its column names).
        measure: the pair.
        index: the measure's index (the first column).
        streams: the query's input streams, in written order.
        deltas: stream -> view of the batch's new rows.
        store: ``store(stream, with_new)`` -> every stored row of the stream, plus its new rows
            when `with_new`.
        fractions: stream -> the share of its delta to probe with.
    """
    terms = []
    for probe, other, with_new in (
        (measure.left, measure.right, True),
        (measure.right, measure.left, False),
    ):
        p, s = streams[probe], streams[other]
        columns = _hashable(p)
        f = fractions.get(p.name, 1.0) if columns else 1.0  # (nothing to hash: all rows)
        f = min(1.0, int(f * 1e6) / 1e6)  # the share the hash test keeps, exactly
        rows = renamed(_sample(deltas[p.name], columns, f), mp.slots[probe], p)
        stored = renamed(store(s.name, with_new), mp.slots[other], s)
        step = pair_step(mp, probe, other)
        if measure.equalities:
            on = " AND ".join(f"({renamed_sql(mp.query, e)})" for e in measure.equalities)
            whole = " AND ".join(f"({c})" for c in step.conditions)
            counted = (
                f"SELECT count(*) AS equal, count_if({whole}) AS total FROM ("
                f"SELECT /*+ BROADCAST(_sj_p) */ * FROM ({rows}) AS _sj_p "
                f"JOIN ({stored}) AS _sj_s ON {on})"
            )
        else:
            counted = (
                "SELECT CAST(NULL AS BIGINT) AS equal, count(*) AS total "
                f"FROM ({step_sql(rows, 0, step, stored)})"
            )
        terms.append(f"SELECT {index} AS m, {f!r}D AS f, equal, total FROM ({counted})")
    return " UNION ALL ".join(terms)


def start_measures(
    spark: SparkSession,
    reorder: Reorderer,
    batch: int,
    plans: Sequence[MultiwayPlan],
    streams: Callable[[MultiwayPlan], Sequence[StreamDef]],
    deltas: Mapping[str, str],
    store: Callable[[str, int | None, bool], str],
) -> Background:
    """Count every measure of `reorder` in one Spark job, in the background; its result is
    `Counts`. `store(stream, lo, with_new)` is as `batch_terms` takes it."""
    measures = reorder.measures
    expected = reorder.expected_rows(batch)

    def every(stream: str, with_new: bool) -> str:
        return store(stream, None, with_new)

    by_name = {mp.query.name: mp for mp in plans}
    fractions = {name: fraction(rows) for name, rows in expected.items()}
    parts = []
    for index, measure in enumerate(measures):
        mp = by_name[measure.query]
        parts.append(measure_sql(mp, measure, index, streams(mp), deltas, every, fractions))
    sql = " UNION ALL ".join(parts)

    def run() -> Counts:
        out: Counts = {}
        for row in spark.sql(sql).collect():
            equal, total = out.get(row.m, (None, 0.0))
            if row.equal is not None:
                equal = (equal or 0.0) + row.equal / row.f
            out[row.m] = (equal, total + row.total / row.f)
        return out

    return Background(run)
