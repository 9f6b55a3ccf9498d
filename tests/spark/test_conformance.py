"""One conformance suite over the runtime's execution paths: every path the engine's heuristics
choose between is forced by a setting (`runtime.settings`) or a query option, the same generated
streams run through each, and each result must equal the reference executor's. Each case also
checks, from the plans Spark ran or the files the run left, that its path was the one taken."""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from streamjoin.reference import normalize, run_reference
from streamjoin.runtime.batch import sinks
from streamjoin.runtime.engine import Engine
from streamjoin.runtime.state.statejob import StateJob
from streamjoin.sql import parse_job
from tests.e2e.files import write_batches
from tests.spark.harness import SLICES, read_sink, settings_set
from tests.spark.streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

EQUI = "a.k = b.k"
BAND = "abs(a.x - b.x) <= 1.5"
WINDOW = "b.ts BETWEEN a.ts - INTERVAL '3' SECOND AND a.ts + INTERVAL '3' SECOND"


@dataclass(frozen=True)
class Path_:
    """One forced path: its settings, the query's ON and WITH, and what its run must show."""

    conf: dict[str, str] = field(default_factory=dict)
    on: str = f"{EQUI} AND {WINDOW}"
    with_: str = ""
    plan_has: tuple[str, ...] = ()
    """Text every sink write's executed plan holds."""
    plan_lacks: tuple[str, ...] = ()
    state_jobs: bool | None = None
    """Whether batches ran the state job (None: either)."""
    copied: bool | None = None
    """Whether the state was copied into the checkpoint (None: either)."""
    multiway: bool = False
    join: str = "JOIN"
    json: bool = False
    """The streams read from JSON files: no footers, so the state job tells each batch's
    statistics."""


INDEXED = ("Scan ExistingRDD",)
"""A plan through the index: an RDD of the probe's rows (its pairs, or the query's rows made of
them in the probe's task), and no join of Spark's (`NO_JOIN`)."""
NO_JOIN = ("InMemoryTableScan", "Join")

TWO_WAY = {
    "sourced-footers": Path_(
        SLICES, state_jobs=False, copied=False, plan_has=("InMemoryTableScan",)
    ),
    "sourced-state-job": Path_(SLICES, json=True, state_jobs=True, copied=False),
    "copied": Path_(
        {**SLICES, "streamjoin.state.fromSource": "false"},
        state_jobs=True,
        copied=True,
        plan_has=("InMemoryTableScan",),
    ),
    "hash": Path_(with_="partitioning = 'hash', units = 3", plan_has=INDEXED, plan_lacks=NO_JOIN),
    "matrix": Path_(
        with_="partitioning = 'matrix', units = 4", plan_has=INDEXED, plan_lacks=NO_JOIN
    ),
    "biclique": Path_(
        with_="partitioning = 'biclique', units = 4", plan_has=INDEXED, plan_lacks=NO_JOIN
    ),
    "contrand": Path_(
        with_="partitioning = 'contrand', units = 4", plan_has=INDEXED, plan_lacks=NO_JOIN
    ),
    "matrix-band": Path_(
        on=f"{BAND} AND {WINDOW}",
        with_="partitioning = 'matrix', units = 4",
        plan_has=INDEXED,
        plan_lacks=NO_JOIN,
    ),
    "range": Path_(
        on=f"{BAND} AND {WINDOW}",
        with_="partitioning = 'range', units = 3",
        plan_has=INDEXED,
        plan_lacks=NO_JOIN,
    ),
    "range-slices": Path_(
        SLICES,
        on=f"{BAND} AND {WINDOW}",
        with_="partitioning = 'range', units = 3",
        plan_has=("_sj_place",),
    ),
    "time-buckets": Path_(with_="time_buckets = 'true'", plan_has=INDEXED, plan_lacks=NO_JOIN),
    "time-buckets-slices": Path_(SLICES, with_="time_buckets = 'true'"),
    "band-with-key": Path_(
        on=f"{EQUI} AND {BAND} AND {WINDOW}", plan_has=INDEXED, plan_lacks=NO_JOIN
    ),
    "band-with-key-slices": Path_(SLICES, on=f"{EQUI} AND {BAND} AND {WINDOW}"),
    "or-equalities": Path_(
        on=f"(a.k = b.k OR a.id = b.id) AND {WINDOW}", plan_has=INDEXED, plan_lacks=NO_JOIN
    ),
    "or-equalities-slices": Path_(SLICES, on=f"(a.k = b.k OR a.id = b.id) AND {WINDOW}"),
    # (An outer join on the operator: its pairs persisted, then the rows it decided; no join.)
    "outer-left-equi": Path_(
        join="LEFT JOIN", plan_has=("Scan ExistingRDD",), plan_lacks=("Join",)
    ),
    "outer-full-band": Path_(
        join="FULL JOIN",
        on=f"{BAND} AND {WINDOW}",
        plan_has=("Scan ExistingRDD",),
        plan_lacks=("Join",),
    ),
    "outer-left-where": Path_(
        join="LEFT JOIN",
        on=f"{EQUI} AND {WINDOW} WHERE a.x > 2 OR b.x IS NULL",
        plan_has=("Scan ExistingRDD",),
        plan_lacks=("Join",),
    ),
    # (A WHERE with a key and a band of its own: the ON's window finds the pairs that give a
    # row its partner; a row without one has b.k NULL, which coalesce makes a key that meets:
    # a row with a partner in the window but none of its key is not one without a partner.)
    "outer-left-where-key": Path_(
        join="LEFT JOIN",
        on="b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' SECOND WHERE coalesce(b.k, 1) = a.k",
        plan_has=("Scan ExistingRDD",),
        plan_lacks=("Join",),
    ),
    "outer-full-where-band": Path_(
        join="FULL JOIN",
        on=f"{EQUI} AND {WINDOW} WHERE {BAND}",
        plan_has=("Scan ExistingRDD",),
        plan_lacks=("Join",),
    ),
    "outer-left-equi-slices": Path_(SLICES, join="LEFT JOIN"),
    "band-buckets": Path_(SLICES, on=f"{BAND} AND {WINDOW}"),
    "theta": Path_(on=f"a.x < b.x AND {WINDOW}", plan_has=INDEXED, plan_lacks=NO_JOIN),
    "theta-full-history": Path_(on="a.x < b.x", copied=True, plan_has=INDEXED, plan_lacks=NO_JOIN),
    "full-history": Path_(SLICES, on=EQUI, copied=True),
    "indexed": Path_(state_jobs=False, copied=False, plan_has=INDEXED, plan_lacks=NO_JOIN),
    "indexed-state-job": Path_(json=True, state_jobs=True, plan_has=INDEXED, plan_lacks=NO_JOIN),
    "indexed-full-history": Path_(on=EQUI, copied=True, plan_has=INDEXED, plan_lacks=NO_JOIN),
    "indexed-band": Path_(on=f"{BAND} AND {WINDOW}", plan_has=INDEXED, plan_lacks=NO_JOIN),
}

MULTI_WAY = {
    # (The ILP's orders: on the operator, a chain of levels per query, no join of Spark's;
    # without the jar, probe-order terms over the cached slices, each step a broadcast join.)
    "ilp-chain": Path_(multiway=True, plan_lacks=("Join",)),
    "ilp-slices": Path_(SLICES, multiway=True, plan_has=("BroadcastHashJoin",)),
    "greedy": Path_({"streamjoin.multiway.optimizer": "greedy"}, multiway=True),
    "unshared": Path_({"streamjoin.share": "false"}, multiway=True),
}


def _job(root: Path, case: Path_, name: str) -> str:
    streams = "ABC" if case.multiway else "AB"
    form = "json" if case.json else "parquet"
    ddl = [
        stream_ddl(s, str(root / form / s)).replace(
            "WITH (format = 'json', ", f"WITH (format = '{form}', maxFilesPerTrigger = '1', "
        )
        for s in streams
    ]
    out = root / "out" / name
    with_ = f" WITH ({case.with_})" if case.with_ else ""
    if case.multiway:
        # Two queries differing only in a selection: they share their join (a shared core).
        three = (
            "FROM A a JOIN B b ON a.k = b.k AND b.ts BETWEEN a.ts - INTERVAL '4' SECOND "
            "AND a.ts + INTERVAL '4' SECOND JOIN C c ON abs(b.x - c.x) <= 2.0 "
            "AND c.ts BETWEEN b.ts - INTERVAL '4' SECOND AND b.ts + INTERVAL '4' SECOND"
        )
        queries = [
            f"INSERT INTO w SELECT a.id AS aid, b.id AS bid, c.id AS cid {three} WITH (epoch = 2);",
            f"INSERT INTO v SELECT a.id AS aid, b.id AS bid, c.id AS cid {three} "
            "WHERE c.s = 'p' WITH (epoch = 2);",
        ]
        sinks_ = ["w", "v"]
    else:
        queries = [
            f"INSERT INTO w SELECT a.id AS aid, b.id AS bid FROM A a {case.join} B b "
            f"ON {case.on}{with_};"
        ]
        sinks_ = ["w"]
    made = [f"CREATE SINK {s} WITH (format = 'parquet', path = '{out / s}');" for s in sinks_]
    return "\n".join([*ddl, *made, *queries])


@pytest.fixture(scope="module")
def streams(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[t.Any]]:
    """Generated streams A, B and C as Parquet files, and as JSON files, one a micro-batch:
    disorder, NULL and repeated keys, late rows."""
    root = tmp_path_factory.mktemp("conformance")
    # (Four batches: the first, then three on the path forced, two of them with late rows and
    # a multi-way epoch of their own.)
    batches = make_batches(71, streams=("A", "B", "C"), n_batches=4, rows_per_batch=14)
    write_batches(root / "parquet", batches, parquet=True)
    write_batches(root / "json", batches)
    return root, batches


@pytest.mark.parametrize("name", [*TWO_WAY, *MULTI_WAY])
def test_every_forced_path_gives_the_reference_result(
    spark: SparkSession,
    monkeypatch: pytest.MonkeyPatch,
    streams: tuple[Path, list[t.Any]],
    name: str,
) -> None:
    root, batches = streams
    case = TWO_WAY.get(name) or MULTI_WAY[name]
    job = parse_job(_job(root, case, name), f"<{name}>")
    plans: list[str] = []
    write = sinks.write_sink

    write_direct = sinks.write_direct

    def recording(sink: t.Any, df: DataFrame, batch_id: int) -> None:
        plans.append(str(df._jdf.queryExecution().executedPlan().toString()))
        write(sink, df, batch_id)

    def recording_direct(job: t.Any, outputs: t.Sequence[t.Any], *args: t.Any) -> t.Any:
        # (A probe's rows its tasks write themselves: the plan they come from. Other rows go
        # on to Spark's writer, `recording`.)
        for output in outputs:
            jdf = output.rows._jdf
            if jdf.logicalPlan().getClass().getSimpleName() == "LogicalRDD":
                plans.append(str(jdf.queryExecution().executedPlan().toString()))
        return write_direct(job, outputs, *args)

    ran: list[int] = []
    job_run = StateJob.run

    def counted(self: StateJob, classified: t.Any, batch_id: int, *args: t.Any) -> t.Any:
        ran.append(batch_id)
        return job_run(self, classified, batch_id, *args)

    monkeypatch.setattr(sinks, "write_sink", recording)
    monkeypatch.setattr(sinks, "write_direct", recording_direct)
    monkeypatch.setattr(StateJob, "run", counted)
    checkpoint = root / "ckpt" / name
    with settings_set(spark, case.conf):
        Engine(spark).run(job, checkpoint=str(checkpoint), once=True, progress=False)

    fed = [{s: b[s] for s in ("ABC" if case.multiway else "AB")} for b in batches]
    expected = run_reference(job, fed).outputs
    for q in job.queries:
        columns = [item.alias for item in q.select]
        assert normalize(read_sink(spark, job, q.sink, columns)) == normalize(expected[q.name])
    assert any(expected.values())
    # The path taken is the one forced, in every batch after the first.
    steady = plans[1:]
    assert steady
    for text in case.plan_has:
        assert all(text in p for p in steady), (name, text)
    for text in case.plan_lacks:
        assert not any(text in p for p in steady), (name, text)
    if case.state_jobs:
        assert sorted(ran) == list(range(len(batches)))
    elif case.state_jobs is not None:
        # The footers prove batches 0 and 1 all on time; the late rows of batches 2 on need the
        # state job, which reads the batch's input to tell them.
        assert not {0, 1} & set(ran), ran
    if case.copied is not None:
        copies = list((checkpoint / "state").glob("**/*.parquet"))
        assert bool(copies) is case.copied
