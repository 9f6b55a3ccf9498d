"""Multi-way joins (chains, stars, cycles; equi, band, theta; windows and full history) equal
the brute-force reference over disordered micro-batches with late rows."""

from __future__ import annotations

import math
import shutil
import typing as t

import pytest

from streamjoin.adapt.probes import Reorderer
from streamjoin.plan import plan_job
from streamjoin.reference import normalize, run_reference
from streamjoin.runtime.multiway import joins as multiway_joins
from streamjoin.runtime.multiway import selectivity
from streamjoin.runtime.multiway.terms import batch_terms, unfolded
from streamjoin.sql import parse_job

from .harness import SLICES, read_sink, run_batches, settings_set
from .streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession


def _w(x: str, y: str, lo: int, hi: int) -> str:
    return f"{y}.ts BETWEEN {x}.ts + INTERVAL '{lo}' SECOND AND {x}.ts + INTERVAL '{hi}' SECOND"


# name -> (FROM ... JOIN ... ON ..., SELECT list)
QUERIES: dict[str, tuple[str, str]] = {
    "chain_equi_band": (
        f"A a JOIN B b ON a.k = b.k AND {_w('a', 'b', -3, 3)} "
        f"JOIN C c ON abs(c.x - b.x) <= 1.0 AND {_w('b', 'c', 0, 4)}",
        "a.id AS i1, b.id AS i2, c.id AS i3",
    ),
    "star_hub_b": (
        f"A a JOIN B b ON a.k = b.k AND {_w('a', 'b', -2, 2)} "
        f"JOIN C c ON c.k = b.k AND {_w('b', 'c', -2, 2)} "
        f"JOIN D d ON d.x < b.x AND b.x < d.x + 1.0 AND {_w('b', 'd', -3, 1)}",
        "a.id AS i1, b.id AS i2, c.id AS i3, d.id AS i4",
    ),
    "cycle_equi": (
        f"A a JOIN B b ON a.k = b.k AND {_w('a', 'b', -3, 3)} "
        f"JOIN C c ON c.k = b.k AND {_w('b', 'c', -3, 3)} AND c.s = a.s",
        "a.id AS i1, b.id AS i2, c.id AS i3",
    ),
    "full_history_three": (
        "A a JOIN B b ON a.k = b.k AND a.s = 'p' JOIN C c ON c.k = a.k AND c.x > b.x + 7",
        "a.id AS i1, b.id AS i2, c.id AS i3",
    ),
    "self_chain_theta": (
        f"A a JOIN A b ON a.k = b.k AND a.id < b.id AND {_w('a', 'b', 0, 3)} "
        f"JOIN B c ON c.x > a.x + b.x - 2 AND c.x < a.x + b.x AND {_w('b', 'c', -2, 2)}",
        "a.id AS i1, b.id AS i2, c.x + 0.5 AS i3",
    ),
}


def _job_text(tmp_path: Path) -> str:
    parts = [stream_ddl(s) for s in ("A", "B", "C", "D")]
    for name in QUERIES:
        out = tmp_path / "out" / name
        parts.append(f"CREATE SINK {name} WITH (format = 'parquet', path = '{out}');")
    for name, (joins, select) in QUERIES.items():
        parts.append(f"INSERT INTO {name} SELECT {select} FROM {joins};")
    return "\n".join(parts)


@pytest.mark.parametrize("seed", [3])
def test_multi_way_joins_match_reference(spark: SparkSession, tmp_path: Path, seed: int) -> None:
    job = parse_job(_job_text(tmp_path))
    batches = make_batches(seed, streams=("A", "B", "C", "D"), n_batches=3, keys=3)
    reports = run_batches(spark, job, batches, tmp_path / "ckpt")
    expected = run_reference(job, batches)
    for i, (name, (_, select)) in enumerate(QUERIES.items()):
        columns = [item.rsplit(" AS ", 1)[1] for item in select.split(", ")]
        got = read_sink(spark, job, name, columns)
        want = expected.outputs[f"q{i + 1}"]
        assert want, f"{name}: the input should produce some results"
        assert normalize(got) == normalize(want), f"{name}: {len(got)} rows vs {len(want)}"
    assert sum(r.late for r in reports) == sum(len(v) for v in expected.late.values()) > 0
    # Windowed inputs expire: D is only in a windowed query, so its state is bounded.
    last = reports[-1].manifest.state_rows()
    assert last["D"] < sum(len(b.get("D", ())) for b in batches)


def test_probe_orders_change_at_epoch_boundaries_and_results_stay_exact(
    spark: SparkSession, tmp_path: Path
) -> None:
    """B and C take turns being the busy stream, so the ILP's orders from A's new rows swap
    (probe the quieter store first); every change is planned one epoch ahead and exact."""
    job = parse_job(
        "\n".join(stream_ddl(s) for s in ("A", "B", "C"))
        + f"\nCREATE SINK o WITH (format = 'parquet', path = '{tmp_path / 'o'}');\n"
        "INSERT INTO o SELECT a.id AS i1, b.id AS i2, c.id AS i3 "
        f"FROM A a JOIN B b ON a.k = b.k AND {_w('a', 'b', -3, 3)} "
        f"JOIN C c ON c.k = b.k AND c.s = a.s AND {_w('b', 'c', -3, 3)} WITH (epoch = 1);"
    )
    batches = make_batches(5, streams=("A", "B", "C"), n_batches=6, rows_per_batch=16, keys=3)
    for i, batch in enumerate(batches):
        quiet = "C" if (i // 2) % 2 == 0 else "B"
        batch[quiet] = batch[quiet][:2]
    reports = run_batches(spark, job, batches, tmp_path / "ckpt")
    expected = run_reference(job, batches)
    got = read_sink(spark, job, "o", ["i1", "i2", "i3"])
    assert expected.outputs["q1"]
    assert normalize(got) == normalize(expected.outputs["q1"])
    changes = [r.batch for r in reports if "probe orders" in r.routing.get("q1", "")]
    assert len(changes) >= 2, [r.routing for r in reports]


def test_queries_sharing_a_core_or_a_probe_prefix_compute_it_once_and_stay_exact(
    spark: SparkSession, tmp_path: Path
) -> None:
    """o1, o3 and o4 join A, B and C the same way and differ only in their selections (none,
    on c, on a and b): one unfiltered run of that core per batch, which each filters. o2 joins
    A and B the same way, then D: the A ⋈ B prefixes of its terms and the core's are shared
    views. Results equal the reference with and without sharing (which, on, also runs o1, o3
    and o4 as one join by query-set bits, `plan.shared_multiway`)."""
    ab = f"FROM A a JOIN B b ON a.k = b.k AND {_w('a', 'b', -3, 3)} "
    abc = f"{ab}JOIN C c ON c.k = b.k AND {_w('b', 'c', -2, 2)}"
    sinks = ("o1", "o2", "o3", "o4")
    text = "\n".join(stream_ddl(s) for s in ("A", "B", "C", "D")) + "\n"
    for name in sinks:
        text += f"CREATE SINK {name} WITH (format = 'parquet', path = '{tmp_path / name}');\n"
    text += (
        f"INSERT INTO o1 SELECT a.id AS i1, b.id AS i2, c.id AS i3 {abc};\n"
        f"INSERT INTO o2 SELECT a.id AS i1, b.id AS i2, d.id AS i3 {ab}"
        f"JOIN D d ON abs(d.x - a.x) <= 2.0 AND {_w('a', 'd', -2, 2)};\n"
        f"INSERT INTO o3 SELECT c.id AS i1, b.id AS i2, a.id AS i3 {abc} WHERE c.x > 5.0;\n"
        f"INSERT INTO o4 SELECT a.id AS i1, b.id AS i2, c.id AS i3 {abc} "
        "WHERE a.x < 8.0 AND b.x >= 2.0;\n"
    )
    job = parse_job(text)
    plan = plan_job(job, groups=())  # (each query its own multi-way join: CLASH's sharing)
    batches = make_batches(6, streams=("A", "B", "C", "D"), n_batches=3, keys=3)
    views = iter(range(1000))
    built = batch_terms(
        [unfolded(job, mp) for mp in plan.multiway],
        lambda mp: [job.stream(s.stream) for s in mp.query.sides],
        {s: f"delta_{s}" for s in ("A", "B", "C", "D")},
        lambda stream, lo, new: f"store_{stream}_{next(views)}",
        None,
    )
    assert list(built.cores.values()) == [["q1", "q3", "q4"]], built.cores
    core = next(iter(built.cores))
    assert all(built.terms[q] == [built.terms[q][0]] for q in ("q1", "q3", "q4"))
    assert core in built.terms["q4"][0] and "WHERE" in built.terms["q4"][0]
    assert len(built.terms["q2"]) == 3
    prefixes = [v for v in built.shared if v not in built.cores]
    assert prefixes and all(built.users[v] >= 2 for v in prefixes), built.users
    for share in ("true", "false"):
        spark.conf.set("streamjoin.share", share)
        try:
            for name in sinks:
                shutil.rmtree(tmp_path / name, ignore_errors=True)
            run_batches(spark, job, batches, tmp_path / f"ckpt-{share}")
        finally:
            spark.conf.unset("streamjoin.share")
        expected = run_reference(job, batches)
        for i, name in enumerate(sinks):
            got = read_sink(spark, job, name, ["i1", "i2", "i3"])
            want = expected.outputs[f"q{i + 1}"]
            assert want and normalize(got) == normalize(want), (share, name)


@pytest.mark.parametrize(
    ("sample", "rows_per_batch", "tolerance"), [(None, 16, 1e-9), (60, 240, 0.3)]
)
def test_measured_selectivities_give_back_each_pair_joins_new_results(
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sample: int | None,
    rows_per_batch: int,
    tolerance: float,
) -> None:
    """At an epoch's last batch every pair join is counted on a sample of the batch:
    rate x rate x the product of a pair's measured selectivities estimates the number of the
    pair join's results that arrive in that batch (by the reference): exactly when the batch is
    smaller than the sample, closely from a quarter of it. (This chain has one order, which
    no measure changes: the runtime measures it anyway here, `chain_choices`.)"""
    monkeypatch.setattr(multiway_joins, "chain_choices", lambda job, mp: True)
    if sample is not None:
        monkeypatch.setattr(selectivity, "SAMPLE_ROWS", sample)
    ab = f"A a JOIN B b ON a.k = b.k AND {_w('a', 'b', -3, 3)}"
    bc = f"B b JOIN C c ON abs(c.x - b.x) <= 1.0 AND {_w('b', 'c', 0, 4)}"
    three = f"{ab} JOIN C c ON abs(c.x - b.x) <= 1.0 AND {_w('b', 'c', 0, 4)}"
    streams = "\n".join(stream_ddl(s) for s in ("A", "B", "C")) + "\n"
    texts = []
    for name, (joins, ids) in {
        "o": (three, "a.id AS i1, b.id AS i2, c.id AS i3"),
        "ab": (ab, "a.id AS i1, b.id AS i2"),
        "bc": (bc, "b.id AS i1, c.id AS i2"),
    }.items():
        texts.append(
            f"CREATE SINK {name} WITH (format = 'parquet', path = '{tmp_path / name}');\n"
            f"INSERT INTO {name} SELECT {ids} FROM {joins} WITH (epoch = 2);\n"
        )
    job = parse_job(streams + texts[0])
    batches = make_batches(
        11, streams=("A", "B", "C"), n_batches=4, rows_per_batch=rows_per_batch, keys=3
    )
    reports = run_batches(spark, job, batches, tmp_path / "ckpt")
    # The pair joins alone, by brute force (the three-way one too when it is small).
    expected = run_reference(parse_job(streams + texts[1] + texts[2]), batches)
    manifest = reports[-1].manifest
    measured = manifest.multiway["selectivities"]
    measures = Reorderer(plan_job(job), 4).measures
    assert [(m.left, m.right) for m in measures] == [(0, 1), (1, 2)]
    for m, pair, names in zip(measures, ("q1", "q2"), ("AB", "BC"), strict=True):
        rows = [sum(u.rows for u in manifest.live(s) if u.batch == 3) for s in names]
        keys = [*m.equality_keys, *([m.label_key] if m.label_key else [])]
        arrived = sum(1 for b in expected.arrivals[pair] if b == 3)
        assert arrived > 0 and all(rows)
        estimate = rows[0] * rows[1] * math.prod(measured[k] for k in keys)
        assert math.isclose(estimate, arrived, rel_tol=tolerance), (pair, estimate, arrived)
    if sample is None:
        got = read_sink(spark, job, "o", ["i1", "i2", "i3"])
        assert normalize(got) == normalize(run_reference(job, batches).outputs["q1"])


def _within(x: str, y: str, s: int) -> str:
    return f"{y}.ts BETWEEN {x}.ts - INTERVAL '{s}' SECOND AND {x}.ts + INTERVAL '{s}' SECOND"


def test_a_plan_probing_an_mir_runs_on_the_cached_slices_through_its_inputs_stores(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Two queries share the pair join b ⋈ c, and the plan's orders from a (q1) and from d (q2)
    probe it as one MIR. Without the jar (the cached slices, which keep no MIR) those terms
    probe b's and c's stores one at a time, and both queries equal the reference."""
    bc = f"c.k = b.k AND {_within('b', 'c', 2)}"
    joins = {
        "o1": f"A a JOIN B b ON a.k = b.k AND {_within('a', 'b', 2)} JOIN C c ON {bc}",
        "o2": f"B b JOIN C c ON {bc} JOIN D d ON abs(d.x - c.x) <= 1.0 AND {_within('c', 'd', 2)}",
    }
    text = "\n".join(stream_ddl(s) for s in "ABCD") + "\n"
    for name, join in joins.items():
        ids = ", ".join(f"{a}.id AS {a}" for a in ("abc" if name == "o1" else "bcd"))
        text += f"CREATE SINK {name} WITH (format = 'parquet', path = '{tmp_path / name}');\n"
        text += f"INSERT INTO {name} SELECT {ids} FROM {join};\n"
    job = parse_job(text)
    probing = {
        (mp.query.name, o.start): s.mir.inputs
        for mp in plan_job(job).multiway
        for o in mp.orders
        for s in o.steps
        if s.mir is not None
    }
    assert probing == {("q1", 0): (1, 2), ("q2", 2): (0, 1)}, probing
    batches = make_batches(21, streams=tuple("ABCD"), n_batches=4, keys=3)
    with settings_set(spark, SLICES):
        run_batches(spark, job, batches, tmp_path / "ckpt")
    expected = run_reference(job, batches)
    for i, name in enumerate(joins):
        got = read_sink(spark, job, name, list("abc" if name == "o1" else "bcd"))
        want = expected.outputs[f"q{i + 1}"]
        assert want, f"{name}: the input should produce some results"
        assert normalize(got) == normalize(want), f"{name}: {len(got)} rows vs {len(want)}"
