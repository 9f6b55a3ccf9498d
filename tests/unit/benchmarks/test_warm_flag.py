"""``bench --warm``: each engine's measured backlog run follows an untimed run of the same
backlog in its process; refused, naming it, with a live run; the report says which figures are
warm, and RESULTS.md gives the command that made them."""

from __future__ import annotations

import typing as t

import pytest

from benchmarks import harness
from benchmarks.report_nexmark import nexmark_speed_target
from benchmarks.report_provenance import commands
from benchmarks.workloads import Case
from streamjoin.cli import main


@pytest.mark.parametrize(
    "args", [["--rate", "100"], ["--max-rate", "--rate", "100"]], ids=["rate", "max-rate"]
)
def test_warm_with_a_live_run_is_refused(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "equi", "--tiny", *args, "--warm"]) != 0
    assert "--warm goes with a backlog run" in capsys.readouterr().err


def test_each_case_runs_twice_in_one_process_and_the_second_is_measured(
    monkeypatch: pytest.MonkeyPatch, tmp_path: t.Any
) -> None:
    calls: list[tuple[str, list[tuple[str, str]], list[bool]]] = []

    def engine_process(engine: str, jobs: t.Any, limit: t.Any, **kw: t.Any) -> t.Any:
        calls.append((engine, list(jobs), list(kw["final"])))
        return [{"engine": engine, "work": work, "error": "not run"} for _, work in jobs]

    monkeypatch.setattr(harness, "run_engine_process", engine_process)
    monkeypatch.setattr(harness, "ROOT", str(tmp_path))
    monkeypatch.setattr(harness, "figures", lambda run, case: run)
    monkeypatch.setattr(harness, "_checked", lambda case, size, results: results)
    case = Case("c", "job {out}", peer="spark-native", backlog=t.cast(t.Any, None), final=True)
    (cold,) = harness.run_cases([case], "full")
    (warm,) = harness.run_cases([case], "full", warm=True)
    work = {e: f"{tmp_path}/work/c/{e}" for e in ("streamjoin", "spark-native")}
    assert [c[1] for c in calls[:2]] == [[("job {out}", work[e])] for e in work]
    for engine, jobs, final in calls[2:]:  # (in one process: the warm-up, then the one measured)
        assert jobs == [("job {out}", f"{work[engine]}-warmup"), ("job {out}", work[engine])]
        assert final == [True, True]
    assert {e: r["work"] for e, r in cold.items()} == work
    assert {e: r["work"] for e, r in warm.items()} == work
    # (A warm-up that failed leaves the run measured after it cold: the report says so.)
    assert all(r["warmup_error"] == "not run" for r in warm.values())
    assert not any("warmup_error" in r for r in cold.values())


def test_the_report_names_its_warm_figures_and_the_command() -> None:
    def report(warm: bool, ratios: dict[str, float]) -> dict[str, t.Any]:
        cases = [{"case": f"nexmark-{q}", "ratios": {"throughput": r}} for q, r in ratios.items()]
        return {
            "workload": "nexmark",
            "size": "full",
            "peer_time_limit_s": 3600.0,
            "cases": cases,
            **({"warm": True} if warm else {}),
        }

    fast = {"q3": 2.1, "q7": 2.5, "q8": 2.0, "q20": 3.0}
    label, numbers, met = nexmark_speed_target(report(True, fast))
    assert "warm JVMs" in label and met is True and "q8 ×2.0" in numbers
    label, _, met = nexmark_speed_target(report(False, fast | {"q8": 1.07}))
    assert "cold" in label and met is False
    assert nexmark_speed_target(report(False, {"q3": 2.1}))[2] is None  # (q7, q8, q20 not run)
    lines = commands({"nexmark-warm": report(True, fast)}, {}, {}, {})
    assert lines[0] == "streamjoin bench nexmark --warm --out benchmarks/results/nexmark-warm.json"
