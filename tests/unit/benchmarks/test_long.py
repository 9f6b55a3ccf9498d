"""The `long` workload: many small batches against a growing state. Its cases, its key spaces,
its steady-state figures (warm-up skipped, growth of batch time over the run) and its report."""

from __future__ import annotations

import typing as t

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
import pyarrow.compute as pc  # type: ignore[import-untyped, unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped, unused-ignore]
import pytest

from benchmarks.data import Backlog
from benchmarks.harness import _checked, _engines
from benchmarks.harness_exact import counted
from benchmarks.harness_figures import figures, shed_totals, steady_figures
from benchmarks.report_backlog import long_table, workload_lines
from benchmarks.report_plots import long_plot
from benchmarks.report_provenance import commands
from benchmarks.report_targets import long_targets
from benchmarks.workloads import (
    BAND_KEYS,
    LONG_SHAPES,
    LONG_WARMUP_BATCHES,
    PRODUCT_WINDOW,
    SHAPE_GROWTH_KINDS,
    SHAPE_HISTORY_KINDS,
    SHAPE_KINDS,
    WORKLOADS,
    Case,
)
from streamjoin.sql import parse_job

if t.TYPE_CHECKING:
    from pathlib import Path

NAMES = [
    "long-equi-10s",
    "long-equi-300s",
    "long-equi-3600s",
    "long-equi-full",
    "long-band-300s",
    "long-theta-300s",
    "long-3way-300s",
    "long-groupby-300s",
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Case]:
    cases = WORKLOADS["long"](str(tmp_path_factory.mktemp("long")), "tiny")
    return {c.name: c for c in cases}


def test_the_sizes_are_many_batches_of_five_seconds() -> None:
    for size, shape in LONG_SHAPES.items():
        assert shape.span_seconds / shape.files == 5.0, size
    assert LONG_SHAPES["full"].rows / LONG_SHAPES["full"].files == 2_500
    assert LONG_SHAPES["full"].files == 120
    assert LONG_SHAPES["quick"].files >= 100


def test_the_cases_their_peers_and_windows(tiny: dict[str, Case]) -> None:
    assert list(tiny) == NAMES
    peers = {name: c.peer for name, c in tiny.items()}
    assert {peers[n] for n in NAMES[:4]} == {"spark-native"}
    assert {peers[n] for n in NAMES[4:6]} == {"spark-foreach"}
    assert peers["long-3way-300s"] == "spark-native"  # (Spark's chained stream-stream joins)
    grouped = tiny["long-groupby-300s"]  # (measured against long-equi-300s: its join alone)
    assert grouped.peer is None and grouped.final and "GROUP BY" in (grouped.exact or "")
    assert grouped.predicate == tiny["long-equi-300s"].predicate
    windows = [10.0, 300.0, 3600.0, None, 300.0, 300.0, 300.0, 300.0]
    assert [c.window_seconds for c in tiny.values()] == windows
    assert all(c.warmup_batches == LONG_WARMUP_BATCHES for c in tiny.values())
    assert all(c.backlog.files == LONG_SHAPES["tiny"].files for c in tiny.values())


def test_each_two_way_case_also_runs_sparks_floor(tiny: dict[str, Case]) -> None:
    three = tiny["long-3way-300s"]
    assert _engines(three, None) == ["streamjoin", "spark-native"]
    assert three.exact is not None and "JOIN c s" in three.exact  # (DuckDB's answer)
    assert _engines(tiny["long-groupby-300s"], None) == ["streamjoin"]
    for c in (c for name, c in tiny.items() if name not in (three.name, "long-groupby-300s")):
        assert _engines(c, None) == ["streamjoin", c.peer, "spark-floor"]
        assert _engines(c, ["streamjoin", "spark-floor"]) == ["streamjoin", "spark-floor"]
    assert not _case(None).floor  # (only where a workload asks)


def test_a_shedding_run_lacks_only_the_pairs_its_skipped_probes_counted(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its rows against DuckDB's exact answer: none extra, and as many missing as it counted
    (a wrong row in place of a right one fails, though the sizes add up)."""
    duckdb = pytest.importorskip("duckdb")
    import benchmarks.harness as harness

    root = tmp_path_factory.mktemp("shed")
    monkeypatch.setattr(harness, "ROOT", str(root))
    cases = WORKLOADS["shapes"](str(root / "data"), "tiny")
    shed = next(c for c in cases if c.name == "shapes-shed-300s")
    assert shed.exact is not None
    history: list[dict[str, t.Any]] = [
        {"shed": {"q1": {"left": 3, "left.pairs": 5, "right": 0, "right.pairs": 0}}},
        {"shed": {}},
        {"shed": {"q1": {"left": 0, "left.pairs": 0, "right": 1, "right.pairs": 2}}},
    ]
    totals = shed_totals(history)
    assert totals == {"q1": {"left": 3, "left.pairs": 5, "right": 1, "right.pairs": 2}}
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    for name, path in shed.backlog.streams.items():
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{path}/*.parquet')")
    exact = con.execute(f"{shed.exact} ORDER BY lid, rid").to_arrow_table()
    assert exact.num_rows > 8

    def agree(rows: t.Any, ours: dict[str, t.Any]) -> bool | None:
        for engine, table in (("streamjoin", rows), ("spark-native", exact)):
            out = root / "work" / shed.name / engine / "out"
            out.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, out / "part-0.parquet")
        runs = {"streamjoin": ours, "spark-native": {"out": {"q1": exact.num_rows}}}
        return t.cast("bool | None", _checked(shed, "tiny", runs)["results_agree"])

    short = exact.slice(7)
    assert agree(short, {"out": {"q1": short.num_rows}, "shed": totals}) is True
    assert agree(exact, {"out": {"q1": exact.num_rows}, "shed": totals}) is False
    assert agree(exact.slice(8), {"out": {"q1": short.num_rows - 1}, "shed": totals}) is False
    # (a wrong row in place of a lost one: the sizes add up, the rows do not)
    first = exact.slice(0, 1)
    moved = pc.add(first["dx"], 1.0)
    altered = first.set_column(first.schema.get_field_index("dx"), "dx", moved)
    wrong = pa.concat_tables([exact.slice(8), altered])
    assert agree(wrong, {"out": {"q1": wrong.num_rows}, "shed": totals}) is False


def test_the_full_history_join_has_no_time_range(tiny: dict[str, Case]) -> None:
    assert tiny["long-equi-full"].predicate == "l.k = r.k"
    assert "BETWEEN" in tiny["long-equi-3600s"].predicate
    assert "l.k = r.k" in tiny["long-equi-full"].job


def _equal_key_pairs(backlog: Backlog) -> int:
    keys = [pq.read_table(backlog.streams[s])["k"].to_numpy() for s in ("a", "b")]
    size = int(max(k.max() for k in keys)) + 1
    a, b = (np.bincount(k, minlength=size) for k in keys)
    return int((a * b).sum())


@pytest.mark.parametrize("name", ["long-equi-full", "long-equi-3600s", "long-equi-300s"])
def test_a_window_as_long_as_the_run_still_gives_about_one_match_per_row(
    tiny: dict[str, Case], name: str
) -> None:
    # Every pair is within a window of half the run or more (the 300 s one is, at tiny size):
    # the matches are the pairs of equal keys, about one per row.
    rows = LONG_SHAPES["tiny"].rows
    assert 0.7 * rows <= _equal_key_pairs(tiny[name].backlog) <= 1.3 * rows


def test_steady_figures_skip_the_warm_up_and_compare_the_thirds() -> None:
    warm = [5000.0] * 10
    steady = [100.0] * 10 + [150.0] * 10 + [200.0] * 10
    f = steady_figures(warm + steady, 10)
    assert f["warmup_batches"] == 10 and f["steady_batches"] == 30
    assert (f["steady_batch_p50_ms"], f["steady_batch_p99_ms"]) == (150.0, 200.0)
    assert (f["first_third_p50_ms"], f["last_third_p50_ms"]) == (100.0, 200.0)
    assert f["batch_growth"] == 2.0


def test_too_few_batches_give_no_growth() -> None:
    f = steady_figures([1.0] * 12, 10)
    assert f["steady_batches"] == 2 and f["batch_growth"] is None
    assert f["steady_batch_p50_ms"] == 1.0
    none = steady_figures([1.0] * 6, 10)
    assert none["steady_batches"] == 0
    assert none["steady_batch_p50_ms"] is none["batch_growth"] is None


def _case(warmup: int | None) -> Case:
    backlog = Backlog("/b", {"a": "/b/a", "b": "/b/b"}, 3, {"a": 50, "b": 50}, {"a": 800, "b": 800})
    return Case("c", "", "spark-native", backlog, warmup_batches=warmup)


def test_figures_add_the_steady_state_only_where_the_case_asks() -> None:
    run = {"engine": "streamjoin", "rows_in": 100, "seconds": 2.0, "batch_ms": [9.0, 1.0, 2.0, 3.0]}
    f = figures(run, _case(1))
    assert f["batch_ms"] == [9.0, 1.0, 2.0, 3.0]  # (the series, for the plot)
    assert (f["steady_batches"], f["steady_batch_p99_ms"], f["batch_growth"]) == (3, 3.0, 3.0)
    assert "steady_batches" not in figures(run, _case(None))


def _engine(name: str, p50: float, p99: float, growth: float | None) -> dict[str, t.Any]:
    return {
        "engine": name,
        "throughput": 1000.0,
        "batches": 120,
        "batch_ms": [p50] * 120,
        "warmup_batches": 10,
        "steady_batch_p50_ms": p50,
        "steady_batch_p99_ms": p99,
        "first_third_p50_ms": p50,
        "last_third_p50_ms": None if growth is None else p50 * growth,
        "batch_growth": growth,
    }


def _report() -> dict[str, t.Any]:
    case = {
        "case": "long-equi-full",
        "window_seconds": None,
        "results_agree": True,
        "ratios": {"throughput": 1.5, "steady_batch_p99": 1.2},
        "engines": {
            "streamjoin": _engine("streamjoin", 200.0, 300.0, 1.25),
            "spark-native": _engine("spark-native", 150.0, 250.0, None) | {"stopped_early": True},
        },
    }
    windowed = case | {"case": "long-equi-10s", "window_seconds": 10.0}
    head = {"workload": "long", "size": "full", "peer_time_limit_s": 3600.0}
    return head | {"cases": [windowed, case]}


def test_the_long_table_has_a_row_per_case_with_both_engines() -> None:
    head, rule, *rows = long_table(_report())
    assert len(rows) == 2
    assert head.count("|") == rule.count("|") == rows[0].count("|") == rows[1].count("|")
    windowed, full = rows
    assert windowed.startswith(
        "| long-equi-10s | 10 s | spark-native (stopped at its time limit) |"
    )
    assert full.startswith("| long-equi-full | none (whole run) |")
    assert "| 1,000.0 · 1,000.0 |" in full  # (rows/s, ours · the peer's)
    assert "| 200.0 / 300.0 · 150.0 / 250.0 |" in full
    assert "| ×1.25 (200.0 → 250.0) · – |" in full
    assert full.endswith("| yes | rows/s ×1.5 · steady p99 **×1.2** |")


def test_a_missing_or_failed_engine_leaves_dashes() -> None:
    report = _report()
    engines = report["cases"][0]["engines"]
    engines["streamjoin"] = {"engine": "streamjoin", "error": "boom"}
    del engines["spark-native"]
    row = long_table(report)[2]
    assert "| – | error: boom · – | – · – | – · – |" in row


def test_the_long_report_gets_its_own_table_command_and_plot(tmp_path: Path) -> None:
    lines = workload_lines({"long": _report()})
    assert lines[0] == "### long" and any("steady p50 / p99 ms" in x for x in lines)
    assert any("first 10 (JVM warm-up)" in x for x in lines)
    assert "streamjoin bench long --out benchmarks/results/long.json" in commands(
        {"long": _report()}, {}, {}, {}
    )
    assert long_plot(_report(), str(tmp_path)) == "long_batches.png"
    assert (tmp_path / "long_batches.png").stat().st_size > 0


def test_sparks_floor_has_a_column_of_its_own_and_no_ratio() -> None:
    report = _report()
    for c in report["cases"]:
        c["engines"]["spark-floor"] = _engine("spark-floor", 50.0, 70.0, None) | {
            "throughput": 4000.0
        }
        c["ratios"]["floor_throughput"] = 4.0
    head, rule, *rows = long_table(report)
    assert head.count("|") == rule.count("|") == rows[0].count("|")
    assert "Spark's floor" in head
    windowed, full = rows
    assert windowed.startswith(
        "| long-equi-10s | 10 s | spark-native (stopped at its time limit) |"
    )
    assert "| 4,000.0 · 50 |" in full
    assert full.endswith("| yes | rows/s ×1.5 · steady p99 **×1.2** |")


def test_a_table_without_sparks_floor_has_no_column_for_it() -> None:
    head, rule, row, _ = long_table(_report())
    assert "floor" not in head
    assert head.count("|") == rule.count("|") == row.count("|") == 9


def test_rows_below_a_table_with_sparks_floor_have_its_column() -> None:
    with_floor = _report()
    with_floor["cases"][0]["engines"]["spark-floor"] = _engine("spark-floor", 50.0, 70.0, None)
    cluster = _report() | {"workload": "long-cluster", "cluster": "2 workers"}
    lines = workload_lines({"long": with_floor, "long-cluster": cluster})
    start = next(i for i, line in enumerate(lines) if line.startswith("| case "))
    head, rule, *rows = lines[start : lines.index("", start)]
    assert len(rows) == 4
    assert "floor" in head
    assert all(row.count("|") == head.count("|") for row in [rule, *rows])
    assert rows[-1].startswith("| long-equi-full on a cluster |")
    assert "| – | yes |" in rows[-1]


def test_the_peer_of_a_target_is_never_sparks_floor() -> None:
    report = _report()
    full = report["cases"][1]
    full["engines"]["spark-floor"] = _engine("spark-floor", 50.0, 70.0, None)
    del full["engines"]["spark-native"]  # (failed, say: no peer figure)
    (row,) = [r for r in long_targets({"long": report}) if "full history" in r[0]]
    assert row[1:] == ("p50 ×–, throughput ×–", None)


def test_the_band_and_theta_target_shows_what_sparks_floor_reaches() -> None:
    def case(kind: str, ours: float, floor: float | None) -> dict[str, t.Any]:
        ratios = {"throughput": ours} | ({"floor_throughput": floor} if floor else {})
        return {"case": f"long-{kind}-300s", "engines": {}, "ratios": ratios}

    def row(floor: float | None) -> tuple[str, str, bool | None]:
        cases = [case("band", 18.2, floor), case("theta", 17.4, floor)]
        report = {"workload": "long", "cases": cases}
        (found,) = [r for r in long_targets({"long": report}) if "band / theta" in r[0]]
        return found

    assert row(None)[1:] == ("×18.2 / ×17.4", False)
    assert row(39.5)[1:] == ("×18.2 / ×17.4 (Spark's floor: ×39.5 / ×39.5)", False)


def test_shapes_runs_each_two_way_shape_over_the_long_stream(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    cases = WORKLOADS["shapes"](str(tmp_path_factory.mktemp("shapes")), "tiny")
    assert [c.name for c in cases] == [
        *(f"shapes-{k}-300s" for k in SHAPE_KINDS),
        *(f"shapes-{k}-full" for k in SHAPE_HISTORY_KINDS),
        "shapes-product-10s",
        "shapes-shed-300s",
        *(f"shapes-{k}-10s" for k in SHAPE_GROWTH_KINDS),
        *(f"shapes-{k}-3600s" for k in SHAPE_GROWTH_KINDS),
    ]
    shed = next(c for c in cases if c.name == "shapes-shed-300s")
    equi = next(c for c in cases if c.name == "shapes-equi-300s")
    assert shed.shed and shed.peer == equi.peer == "spark-native"
    [query] = parse_job(shed.job.replace("{out}", "/o")).queries
    assert (query.option("overload"), query.option("shed_count")) == ("shed", "exact")
    assert shed.predicate == equi.predicate and shed.backlog == equi.backlog
    growth = [c for c in cases if c.name.endswith(("-10s", "-3600s")) and "product" not in c.name]
    assert all(c.peer is None for c in growth)
    assert all(_engines(c, ["streamjoin", "flink"]) == ["streamjoin"] for c in growth)
    assert _engines(cases[0], ["streamjoin", "flink"]) == ["streamjoin", "flink"]
    pytest.importorskip("duckdb")
    product = next(c for c in cases if "product" in c.name)
    assert product.peer == "spark-foreach" and product.reached is not None
    assert "l.x * r.x >" in product.predicate and "l.k" not in product.predicate
    # (the pairs its window reaches: DuckDB's count against numpy's over the same files)
    a, b = (pq.read_table(product.backlog.streams[n])["ts"].to_numpy() for n in "ab")
    near = np.abs(a[:, None] - b[None, :]) <= np.timedelta64(int(PRODUCT_WINDOW * 1e6), "us")
    assert counted(product.reached, product.backlog.streams) == int(near.sum())
    bandkey = next(c for c in cases if "bandkey" in c.name)
    assert "LEFT JOIN" in next(c for c in cases if "left-equi" in c.name).job
    assert "FULL JOIN" in next(c for c in cases if "full-band" in c.name).job
    assert "INTERVAL" not in next(c for c in cases if c.name == "shapes-or-full").predicate
    assert bandkey.peer == "spark-native"
    assert "l.k = r.k AND abs(l.x - r.x) <=" in bandkey.predicate
    keys = pq.read_table(bandkey.backlog.streams["a"])["k"].to_numpy()
    assert set(keys.tolist()) <= set(range(BAND_KEYS))
