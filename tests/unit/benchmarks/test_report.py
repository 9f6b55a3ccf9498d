"""RESULTS.md holds results only: the machine, the commit, the commands, the targets met and
missed, a table per workload with every ratio (losses marked), and no development log."""

from __future__ import annotations

import json
import typing as t

from benchmarks import report
from benchmarks.report import render
from benchmarks.report_adhoc import adhoc_lines
from benchmarks.report_backlog import workload_lines
from benchmarks.report_format import ratio_cell
from benchmarks.report_multiquery import multiquery_lines
from benchmarks.report_overload import elastic_lines, overload_lines
from benchmarks.report_pages import FOLDER, PAGES
from benchmarks.report_provenance import commit_line
from benchmarks.report_rate import live_targets, nexmark_live_targets
from benchmarks.report_shapes import (
    PARTS,
    shapes_commands,
    shapes_lines,
    shapes_sources,
    shapes_targets,
    with_parts,
)
from benchmarks.report_soak import soak_lines
from benchmarks.report_targets import long_targets, metrics_overhead_row, other_targets, targets
from benchmarks.skew_keys import skew_targets

if t.TYPE_CHECKING:
    from pathlib import Path

MACHINE = {
    "cores": 2,
    "memory_gib": 8.0,
    "cpu": "x86_64",
    "python": "3.11",
    "pyspark": "4.0",
    "java": "openjdk 17",
}


def _engine(name: str, throughput: float, p99: float) -> dict[str, t.Any]:
    return {"engine": name, "rows": 100, "throughput": throughput, "batch_p99_ms": p99}


def _backlog(ratio: float, p99: float, **extra: object) -> dict[str, t.Any]:
    case = {
        "case": "equi",
        "results_agree": True,
        "ratios": {"throughput": ratio, "batch_p99": p99},
        "engines": {
            "streamjoin": _engine("streamjoin", 100.0 * ratio, 10.0 * p99),
            "spark-native": _engine("spark-native", 100.0, 10.0),
        },
    }
    head = {"workload": "equi", "size": "full", "peer_time_limit_s": 3600.0, "machine": MACHINE}
    return head | {"cases": [case], **extra}


def test_losses_are_bold_whichever_way_a_ratio_wins() -> None:
    cell = ratio_cell({"throughput": 0.61, "batch_p99": 1.29, "rows_per_cpu_second": 1.2})
    assert cell == "rows/s **×0.61** · batch p99 **×1.29** · rows/CPU s ×1.2"
    assert ratio_cell({"throughput": 2.3, "batch_p99": 0.76}) == "rows/s ×2.3 · batch p99 ×0.76"
    assert ratio_cell({}) == "–"


def test_a_missed_target_says_no() -> None:
    rows = {name: met for name, _, met in targets({"equi": _backlog(1.5, 0.8)})}
    assert rows["equi: throughput ≥ 2× Spark's native join, p99 batch time no worse"] is False
    assert rows["band: throughput ≥ 30× the foreachBatch join"] is None  # (no band run)


def test_the_commit_is_named_only_where_a_report_recorded_it() -> None:
    assert commit_line({"equi": {}}) == "Commit: not recorded (the JSON reports carry no commit)."
    line = commit_line({"equi": {"commit": "abc1234"}, "band": {}})
    assert line == "Commit: `abc1234` (equi); not recorded (band)."


def test_workloads_of_the_same_columns_share_a_table_with_every_engine() -> None:
    lines = workload_lines({"equi": _backlog(0.8, 1.2), "band": _backlog(40.0, 0.1)})
    assert [line for line in lines if line.startswith("### ")] == ["### equi, band"]
    (context,) = [line for line in lines if "peer time limit" in line]  # one line of context
    assert context.startswith("equi: ") and ". band: " in context
    assert sum(line.startswith("| case |") for line in lines) == 1
    rows = [line for line in lines if line.startswith("| equi |")]
    assert len(rows) == 4  # (two engines in each of the two workloads)
    assert "rows/s **×0.8** · batch p99 **×1.2**" in rows[0]


def test_multiquery_and_skew_targets_are_listed_met_or_not() -> None:
    mq = {
        "targets": {
            "global_over_alone": {"10": 2.6, "100": 4.0},
            "at_10_queries_ge_2_5": True,
            "at_100_queries_ge_10": False,
            "global_batch_p50_ms": {"10": 886.8},
            "at_10_queries_p50_le_1s": True,
        }
    }
    skew = {
        "size": "quick",
        "targets": {"z>=1.5: auto >= 1.0x hash": False, "speedups_at_z>=1.5": [0.9, 2.0]},
    }
    cluster = {
        "size": "full",
        "cluster": "standalone",
        "targets": {
            "z>=1.5: auto >= 1.5x hash": True,
            "speedups_at_z>=1.5": [2.1, 3.3],
            "z=0: auto within 20% of hash": True,
            "speedup_at_z=0": [1.2],
        },
    }
    rows = other_targets(
        {"multiquery-quick.json": mq}, {"skew": skew, "skew-cluster-full": cluster}
    )
    assert (
        "multiquery (`multiquery-quick.json`): global ≥ 2.5× alone at 10 queries, ≥ 10× at 100",
        "×2.6 at 10, ×4.0 at 100",
        False,
    ) in rows
    assert (
        "multiquery (`multiquery-quick.json`): global's batch p50 ≤ 1 s at 10 queries",
        "886.8 ms",
        True,
    ) in rows
    assert ("skew (quick): z ≥ 1.5: auto ≥ 1.0× hash", "×0.9 / ×2.0", False) in rows
    assert (
        "skew (full, 2-worker cluster): z ≥ 1.5: auto ≥ 1.5× hash; z = 0: within 20% of hash",
        "×2.1 / ×3.3; ×1.2",
        True,
    ) in rows


def test_the_page_has_no_log_and_points_to_it() -> None:
    text = render({"equi": _backlog(2.3, 0.76)}, plot=False)
    assert "## Targets" in text and "## Machine, commit, command" in text
    assert "streamjoin bench equi --out benchmarks/results/equi.json" in text
    assert "Commit: not recorded" in text
    assert "docs/dev-log.md" in text
    assert "session" not in text.lower()


def test_the_recorded_results_fit_in_two_hundred_lines_with_the_rest_on_linked_pages(
    tmp_path: Path,
) -> None:
    """Every report committed, RESULTS.md within 200 lines; the long sections on their own
    pages, each written, linked from RESULTS.md and linking back, every table row kept."""
    text = report.write(report.RESULTS, plot=False, out=str(tmp_path))
    assert text == (tmp_path / "RESULTS.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    written = {p.name: p.read_text(encoding="utf-8") for p in (tmp_path / FOLDER).iterdir()}
    assert set(written) == set(PAGES)  # (the reports of every page are committed)
    for name, page in written.items():
        assert f"]({FOLDER}/{name})" in text  # (in the targets and in "More results")
        assert "](../RESULTS.md)" in page
    assert f"]({FOLDER}/SKEW.md)" in text  # (the skew table is that page's, not repeated here)
    assert "session" not in "".join([text, *written.values()]).lower()
    folder = report.RESULTS
    adhoc, soak = report._load_prefixed(folder, "adhoc-"), report._load_prefixed(folder, "soak")
    overload = report._load_prefixed(folder, "overload-")
    elastic = report._load_prefixed(folder, "elastic.json")["elastic.json"]
    # (the shapes page: the whole run with the later runs of some cases in place of its own)
    whole = report._load_prefixed(folder, "shapes.json")["shapes.json"]
    shapes = with_parts(whole, report._load_prefixed(folder, PARTS))
    assert shapes is not None
    moved = [
        *multiquery_lines(report.load_multiquery(folder)),
        *adhoc_lines(adhoc),
        *overload_lines(overload),
        *elastic_lines(elastic, report.HERE, plot=False),
        *soak_lines(soak, report.HERE, plot=False),
        *shapes_lines(shapes),
    ]
    rows = [line for line in moved if line.startswith("| ")]
    on_pages = {line for page in written.values() for line in page.splitlines()}
    assert len(rows) > 40 and not [row for row in rows if row not in on_pages]


def test_a_page_whose_reports_are_gone_is_removed(tmp_path: Path) -> None:
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "equi.json").write_text(json.dumps(_backlog(2.3, 0.76)))
    stale = tmp_path / FOLDER / "SOAK.md"
    stale.parent.mkdir()
    stale.write_text("old\n")
    text = report.write(str(tmp_path / "reports"), plot=False, out=str(tmp_path))
    assert not stale.exists() and "## More results" not in text


def test_the_metrics_overhead_is_judged_by_its_ratio_only_where_the_noise_allows() -> None:
    # (The driver's share of the run bounds only the Python side of the figures' cost: no
    # verdict from it.)
    quiet = {"ratio_on_off": 0.99, "off_spread": 0.01, "driver_share": 0.001}
    noisy = {"ratio_on_off": 0.8, "off_spread": 0.4, "driver_share": 0.001}
    costly = {"ratio_on_off": 1.2, "off_spread": 0.4, "driver_share": 0.05}
    verdicts = [
        metrics_overhead_row({**r, "record_ms_per_batch": 0.5})[2]
        for r in (quiet, {**quiet, "ratio_on_off": 0.9}, noisy, costly)
    ]
    assert verdicts == [True, False, None, None]


def test_a_long_target_is_judged_on_its_figures_not_on_a_ratio_rounded_onto_it() -> None:
    def case(ours: float) -> dict[str, t.Any]:
        figures = {"throughput": ours, "steady_batch_p50_ms": 100.0}
        peer = {"throughput": 1000.0, "steady_batch_p50_ms": 300.0}
        return {
            "case": "long-equi-full",
            "engines": {"streamjoin": figures, "spark-native": peer},
            "ratios": {"throughput": round(ours / 1000.0, 2)},
        }

    rows = {}
    for ours in (1998.0, 2000.0):
        report = {"workload": "long", "cases": [case(ours)]}
        (row,) = [r for r in long_targets({"long": report}) if "full history" in r[0]]
        rows[ours] = row
    assert rows[1998.0][1:] == ("p50 ×0.33, throughput ×1.998", False)
    assert rows[2000.0][1:] == ("p50 ×0.33, throughput ×2", True)


def _shape(kind: str, peer: str, ours: tuple[float, float], theirs: tuple[float, float]) -> t.Any:
    """A `shapes` case: (rows/s, steady p50 ms) for us and the peer."""
    figures = {"streamjoin": ours, peer: theirs}
    engines = {
        name: {"throughput": rate, "steady_batch_p50_ms": p50}
        for name, (rate, p50) in figures.items()
    }
    return {"case": f"shapes-{kind}-300s", "engines": engines}


def test_each_shape_is_judged_against_its_peer_and_against_the_equi_shape() -> None:
    cases = [
        _shape("equi", "spark-native", (30_000.0, 60.0), (6_000.0, 700.0)),
        _shape("left-band", "spark-foreach", (29_000.0, 110.0), (900.0, 4_000.0)),
        _shape("theta", "spark-foreach", (31_000.0, 300.0), (1_000.0, 4_000.0)),
    ]
    rows = {
        name.split(",")[0]: (numbers, met)
        for name, numbers, met in shapes_targets({"cases": cases})
    }
    native, foreach, equi = (
        rows[k]
        for k in (
            "shapes: every shape Spark runs",
            "shapes: every other shape",
            "shapes: every shape with an equality or a band",
        )
    )
    assert native == ("p50 / rows/s: equi-300s ×0.09 / ×5.00", True)
    steady = "steady batch p50, the peer's over ours: ×13.33 at worst"  # (theta's 4,000 / 300)
    assert foreach == (f"×31.00 at worst (theta-300s; 2 shapes); {steady}", True)
    # (theta has neither an equality nor a band: its batch is not held to equi's.)
    assert equi == ("×1.83 at worst (left-band-300s; 1 cases)", True)
    cases[1]["engines"]["streamjoin"]["steady_batch_p50_ms"] = 130.0
    cases[2]["engines"]["streamjoin"]["throughput"] = 29_000.0
    assert [met for _, _, met in shapes_targets({"cases": cases})] == [True, False, False]


def test_each_shape_grows_from_10s_to_1h_and_the_product_by_its_pairs_tested() -> None:
    def ours(name: str, p50: float, **more: t.Any) -> dict[str, t.Any]:
        engine = {"steady_batch_p50_ms": p50, "cpu_seconds": 20.0}
        return {"case": f"shapes-{name}", "engines": {"streamjoin": engine}, **more}

    cases = [
        ours("equi-10s", 40.0),
        ours("equi-3600s", 50.0),
        ours("left-band-10s", 50.0),
        ours("left-band-3600s", 74.0),
        ours("product-10s", 300.0, reached_pairs=3_000_000_000),
    ]

    def row(part: str) -> tuple[str, bool | None]:
        (found,) = [(n, met) for name, n, met in shapes_targets({"cases": cases}) if part in name]
        return found

    assert row("grows < 1.5×") == ("×1.48 at worst (left-band; 2 shapes)", True)
    cases[4]["engines"]["streamjoin"] |= {"probe_pairs": 3_600_000_000, "probe_cpu_seconds": 12.0}
    product = row("no band of values and no key")
    floor = "reached a CPU s of the whole run 150.0 M"
    shown = "300.0 M (3,600,000,000 pairs, 12.0 CPU s); tested ×1.20 the 3,000,000,000 reached"
    assert product == (f"{shown}; {floor}", True)
    # (each window against equi's of the same window)
    assert row("≤ 2× the equi") == ("×1.48 at worst (left-band-3600s; 2 cases)", True)
    cases[3]["engines"]["streamjoin"]["steady_batch_p50_ms"] = 76.0
    assert row("grows < 1.5×")[1] is False
    cases[4]["engines"]["streamjoin"]["probe_cpu_seconds"] = 40.0
    assert row("no band of values and no key")[1] is False  # (90 M a CPU s)
    cases[4]["engines"]["streamjoin"]["probe_cpu_seconds"] = 12.0
    cases[4]["reached_pairs"] = 2_000_000_000  # (×1.8 tested: more than the window reaches)
    assert row("no band of values and no key")[1] is False
    cases[4]["reached_pairs"] = 4_000_000_000  # (×0.9: some pair reached went untested)
    assert row("no band of values and no key")[1] is False
    del cases[4]["engines"]["streamjoin"]["probe_pairs"]  # (a cluster's run, say)
    assert row("no band of values and no key")[1] is None
    del cases[0]["engines"]["streamjoin"]["steady_batch_p50_ms"]
    assert row("grows < 1.5×") == ("no figure of one run for equi", None)
    cases[0]["engines"]["streamjoin"]["steady_batch_p50_ms"] = 40.0
    cases[0]["source"] = "shapes-cases-1.json"  # (the 10 s case from another run than the 1 h)
    assert row("grows < 1.5×") == ("no figure of one run for equi", None)


def test_the_shedding_shape_shows_what_it_wrote_and_whether_it_lost_only_what_it_counted() -> None:
    shed = _shape("shed", "spark-native", (30_000.0, 70.0), (6_000.0, 700.0))
    shed["engines"]["streamjoin"] |= {
        "out": {"q1": 600},
        "shed": {"q1": {"left": 30, "left.pairs": 250, "right": 20, "right.pairs": 150}},
        "missing_rows": 400,
        "extra_rows": 0,
    }
    equi = _shape("equi", "spark-native", (30_000.0, 50.0), (6_000.0, 700.0))
    cases = [equi, {**shed, "expected": {"exact": 1000}, "results_agree": True}]

    def row() -> tuple[str, bool | None]:
        targets = shapes_targets({"cases": cases})
        (found,) = [(n, met) for name, n, met in targets if name.startswith("shapes: shedding")]
        return found

    wrote = "wrote 600 of 1,000 pairs (60%; about 50 rows did not probe): "
    assert row() == (f"{wrote}0 rows extra, 400 missing against 400 counted", True)
    cases[1]["results_agree"] = False
    assert row()[1] is False
    same = [n for name, n, _ in shapes_targets({"cases": cases}) if "≤ 2× the equi" in name]
    assert same == ["×1.40 at worst (shed-300s; 1 cases)"]  # (held to equi's batch)


def test_live_on_the_cluster_is_judged_apart_from_local_runs() -> None:
    def run(rate: float, p50: float, p99: float, *, cluster: bool) -> dict[str, t.Any]:
        engines = {"streamjoin": {"keeps_up": True}, "spark-native": {"keeps_up": True}}
        ratios = {"latency_p50_s": p50, "latency_p99_s": p99}
        case = {"case": "equi", "engines": engines, "ratios": ratios}
        where = {"cluster": "standalone"} if cluster else {}
        run = {"workload": "equi", "rate_per_stream": rate, "size": "quick", "duration_s": 120.0}
        return {**run, "cases": [case], **where}

    local = {"rate-equi-5000.json": run(5000.0, 0.5, 0.6, cluster=False)}
    on_cluster = {"rate-equi-2000-cluster.json": run(2000.0, 0.8, 1.2, cluster=True)}
    rows = live_targets({**local, **on_cluster}, {})
    (cluster_row,) = [r for r in rows if "cluster" in r[0]]
    assert cluster_row[1:] == ("2,000/s (quick, 120 s) p50 ×0.8, p99 ×1.2", False)
    (local_row,) = [r for r in rows if r[0].startswith("live, equi: latency")]
    assert local_row[1].startswith("p50 ×0.5, p99 ×0.6")  # (the cluster's run not among them)
    on_cluster["rate-equi-2000-cluster.json"]["cases"][0]["ratios"]["latency_p99_s"] = 0.9
    assert next(r for r in live_targets(on_cluster, {}) if "cluster" in r[0])[2] is True


def test_nexmark_fed_live_is_judged_per_query_spark_keeps_up_with() -> None:
    def case(name: str, p50: float, p99: float, *, spark: bool = True) -> dict[str, object]:
        engines: dict[str, object] = {"streamjoin": {"keeps_up": True}}
        if spark:
            engines["spark-native"] = {"keeps_up": True}
        ratios = {"latency_p50_s": p50, "latency_p99_s": p99}
        return {"case": f"nexmark-{name}", "engines": engines, "ratios": ratios}

    run = {"workload": "nexmark", "rate_per_stream": 5000.0, "duration_s": 120.0, "trigger_s": 0}
    met = {"r": {**run, "cases": [case("q3", 0.3, 0.5), case("q4", 9.0, 9.0, spark=False)]}}
    missed = {"r": {**run, "cases": [case("q3", 0.3, 0.5), case("q7", 0.2, 0.6)]}}
    ((target, shown, ok),) = nexmark_live_targets(met)
    assert ok is True
    assert "q3 p50 ×0.3, p99 ×0.5" in shown
    assert "q4" not in shown  # (Spark refuses it: no ratio)
    assert "120 s" in target
    assert "default trigger" in target
    assert nexmark_live_targets(missed)[0][2] is False


def test_skew_speed_is_judged_at_full_size_only() -> None:
    def case(z: float, speedup: float) -> dict[str, t.Any]:
        return {
            "z": z,
            "ratios": {"throughput_auto_over_hash": speedup},
            "auto": {"skew_after_switch": 1.1},
        }

    cases = [case(0.0, 1.0), case(1.5, 0.9), case(2.0, 1.2)]
    full = skew_targets(cases, cluster=False, size="full")
    quick = skew_targets(cases, cluster=False, size="quick")
    assert full["z>=1.5: auto >= 1.0x hash"] is False
    assert not any(k.startswith("z>=1.5: auto >=") for k in quick)
    assert quick["speedups_at_z>=1.5"] == [0.9, 1.2]
    assert quick["z>=1.5: auto max/mean < 1.5"] is True


def test_a_run_of_some_shapes_takes_the_place_of_the_same_cases() -> None:
    def run(commit: str, cases: list[str], only: list[str] | None = None) -> dict[str, t.Any]:
        made = [{"case": f"shapes-{c}", "engines": {}, "ratios": {}} for c in cases]
        more = {"only": only} if only else {}
        return {
            "workload": "shapes",
            "size": "full",
            "commit": commit,
            "peer_time_limit_s": 600.0,
            "cases": made,
            **more,
        }

    whole = run("aaa", ["equi-300s", "band-300s"])
    part = run("bbb", ["band-300s", "equi-10s"], ["band-300s", "-10s"])
    later = run("ccc", ["equi-10s"], ["equi-10s"])
    merged = with_parts(whole, {"shapes-cases-10.json": later, "shapes-cases-x.json": part})
    assert merged is not None
    assert [(c["case"], c["source"]) for c in merged["cases"]] == [
        ("shapes-equi-300s", "shapes.json"),
        ("shapes-band-300s", "shapes-cases-x.json"),  # (the part's run of it, not the whole's)
        ("shapes-equi-10s", "shapes-cases-x.json"),  # (x after 10: letters after numbers)
    ]
    numbered = with_parts(whole, {"shapes-cases-10.json": later, "shapes-cases-2.json": part})
    assert numbered is not None  # (10 after 2: as numbers, not as text)
    assert [c["source"] for c in numbered["cases"]][1:] == [
        "shapes-cases-2.json",
        "shapes-cases-10.json",
    ]
    merged = with_parts(whole, {"shapes-cases-x.json": part})
    assert merged is not None
    assert list(shapes_sources(merged)) == ["shapes.json", "shapes-cases-x.json"]
    assert shapes_commands(merged) == [
        "streamjoin bench shapes --peer-limit 600 --out benchmarks/results/shapes.json",
        "streamjoin bench shapes --peer-limit 600 --cases=band-300s,-10s "
        "--out benchmarks/results/shapes-cases-x.json",
    ]
    text = " ".join(shapes_lines(merged))
    assert (
        "`shapes-cases-x.json` (commit bbb, peer time limit 600.0 s): band-300s, equi-10s" in text
    )
    assert with_parts(whole, {}) is whole
    alone = with_parts(None, {"shapes-cases-x.json": part})
    assert alone is not None and list(shapes_sources(alone)) == ["shapes-cases-x.json"]
