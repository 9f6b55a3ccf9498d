"""Flink's page and target line (`benchmarks.report_flink`) from reports of runs with Flink:
ratios from one run's two figures, losses in bold, a stopped Flink run a lower bound."""

from __future__ import annotations

import typing as t

from benchmarks.report import render
from benchmarks.report_flink import flink_lines, flink_targets


def _case(name: str, ours: float, flink: float, **more: t.Any) -> dict[str, t.Any]:
    return {
        "case": name,
        "results_agree": more.pop("agree", True),
        "engines": {
            "streamjoin": {
                "throughput": ours,
                "rows_per_cpu_second": ours / 2,
                "seconds": 10.0,
                "batch_ms": [2500.0, 3000.0, 3000.0],
            },
            "flink": {
                "throughput": flink,
                "rows_per_cpu_second": flink / 2,
                "startup_seconds": 4.2,
                "sql_edits": ["q1: dateTime back-quoted (reserved in Flink's SQL)"],
                **more,
            },
        },
    }


REPORTS = {
    "shapes-flink.json": {
        "workload": "shapes",
        "size": "full",
        "peer_time_limit_s": 120.0,
        "commit": "abc1234",
        "cases": [
            _case("shapes-equi-300s", 60_000.0, 50_000.0),
            _case("shapes-bandkey-300s", 60_000.0, 5_000.0, stopped_early=True, agree=None),
        ],
    },
    "nexmark-flink.json": {
        "workload": "nexmark",
        "size": "full",
        "peer_time_limit_s": 3600.0,
        "cases": [_case("nexmark-q3", 100_000.0, 200_000.0)],
    },
}


def test_the_page_shows_each_ratio_with_losses_in_bold() -> None:
    text = "\n".join(flink_lines(REPORTS))
    # Our 10 s: a first batch of 2.5 s, two of 3 s, 1.5 s outside them.
    rates = "| shapes-equi-300s | 60,000.0 · 50,000.0 | 30,000.0 · 25,000.0 |"
    assert f"{rates} 4.2 | 2.5 + 6.0 (2) + 1.5 | yes |" in text
    assert "rows/s ×1.2 · rows/CPU s ×1.2 |" in text
    # A stopped Flink run: its rows/s an upper bound, its CPU not counted.
    assert "5,000.0 (stopped at its time limit)" in text
    assert "rows/s ×12 |" in text
    assert "rows/s **×0.5** · rows/CPU s **×0.5**" in text
    assert (
        "--engines streamjoin,flink --peer-limit 120 --out benchmarks/results/shapes-flink.json"
        in text
    )
    assert "dateTime back-quoted (reserved in Flink's SQL)" in text
    assert "q4: Flink's AVG of a BIGINT is a BIGINT" in text


def test_one_target_line_names_the_losses_and_the_checked_cases() -> None:
    [(target, numbers, met)] = flink_targets(REPORTS)
    assert "`shapes-flink.json`, `nexmark-flink.json`" in target
    assert numbers == (
        "rows/s ours ÷ Flink's: shapes ×1.2–×12; nexmark ×0.5–×0.5; "
        "**losses: nexmark-q3 ×0.5**; results agree in 2 of 3 cases (1 unchecked)"
    )
    assert met is True
    disagreeing = {"x-flink.json": {**REPORTS["nexmark-flink.json"]}}
    disagreeing["x-flink.json"]["cases"] = [_case("nexmark-q4", 1.0, 1.0, agree=False)]
    assert flink_targets(disagreeing)[0][2] is False
    assert flink_targets({}) == []


def test_results_md_links_the_page_and_keeps_its_target() -> None:
    text = render({}, flink=REPORTS, plot=False)
    assert "[flink](results/FLINK.md) (`shapes-flink.json`, `nexmark-flink.json`)" in text
    assert "- [Flink beside ours](results/FLINK.md)" in text


MAX_RATE = {
    "maxrate-equi-flink.json": {
        "workload": "equi",
        "mode": "max-rate",
        "size": "quick",
        "start_rate": 20_000.0,
        "duration_s": 30.0,
        "commit": "abc1234",
        "cases": [
            {
                "case": "equi",
                "peer": "spark-native",
                "ratio": 2.0,
                "flink_ratio": 0.8,
                "engines": {
                    "streamjoin": {
                        "max_rate": 40_000,
                        "probes": [(20_000, True), (40_000, True), (80_000, False)],
                        "results_agree": [True, True, None],
                    },
                    "spark-native": {
                        "max_rate": 20_000,
                        "probes": [(20_000, True), (40_000, False)],
                        "results_agree": [True, None],
                    },
                    "flink": {
                        "max_rate": 50_000,
                        "probes": [
                            (20_000, True),
                            (40_000, True),
                            (80_000, False),
                            (60_000, False),
                        ],
                        "results_agree": [True, True, None, False],
                    },
                },
            }
        ],
    }
}


def test_the_highest_rates_kept_up_with_are_a_table_and_a_ratio_in_the_target() -> None:
    text = "\n".join(flink_lines(MAX_RATE))
    assert "### Highest rate kept up with, beside Flink" in text
    # Ours, Spark's and Flink's rates; ours lower than Flink's: a loss, in bold.
    assert "| equi | 40,000 · 20,000 · 50,000 | **×0.8** | 2 of 3 · 1 of 2 · 2 of 4 |" in text
    assert "flink: 20000✓, 40000✓, 80000✗, 60000✗ | streamjoin: none; spark-native: none; " in text
    assert (
        "--max-rate --rate 20000 --duration 30 --engines streamjoin,spark-native,flink "
        "--out benchmarks/results/maxrate-equi-flink.json" in text
    )
    [(_, numbers, met)] = flink_targets({**REPORTS, **MAX_RATE})
    assert "highest rate kept up with, ours ÷ Flink's: equi ×0.8" in numbers
    assert "equi highest rate ×0.8" in numbers
    # (Its probes are checked one by one, in its table: not cases of the target's count.)
    assert numbers.endswith("results agree in 2 of 3 cases (1 unchecked)")
    assert met is True
