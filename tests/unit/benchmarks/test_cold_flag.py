"""``bench --rate --cold``: a live run without the warm-up job, so that its figures include each
engine's cold start; refused, naming it, where there is no live run to start cold."""

from __future__ import annotations

import typing as t

import pytest

from streamjoin.cli import main


@pytest.mark.parametrize(
    "args",
    [["--cold"], ["--max-rate", "--rate", "100", "--cold"]],
    ids=["backlog", "max-rate"],
)
def test_cold_without_a_single_live_run_is_refused(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "equi", "--tiny", *args]) != 0
    assert "--cold goes with --rate" in capsys.readouterr().err


def test_cold_runs_the_live_feed_without_its_warm_up(monkeypatch: pytest.MonkeyPatch) -> None:
    import benchmarks.rate as rate

    seen: dict[str, t.Any] = {}

    def run_rate(workload: str, per_stream: float, size: str, **kw: t.Any) -> dict[str, t.Any]:
        seen.update(kw, workload=workload, rate=per_stream)
        return {"rate_per_stream": per_stream, "cases": []}

    monkeypatch.setattr(rate, "run_rate", run_rate)
    assert main(["bench", "equi", "--tiny", "--rate", "100", "--cold"]) == 0
    assert seen["warmup"] is False and seen["rate"] == 100.0
    assert main(["bench", "equi", "--tiny", "--rate", "100"]) == 0
    assert seen["warmup"] is True


def _rate_report(
    seconds: float, warmup: bool, p50: float, p99: float, trigger: float = 1.0
) -> dict[str, t.Any]:
    run = {"keeps_up": True, "latency_p50_s": 1.0, "latency_p99_s": 2.0}
    return {
        "workload": "equi",
        "size": "quick",
        "rate_per_stream": 8_000.0,
        "duration_s": seconds,
        "trigger_s": trigger,
        "warmup": warmup,
        "cases": [
            {
                "case": "equi",
                "results_agree": True,
                "engines": {"streamjoin": run, "spark-native": run},
                "ratios": {"latency_p50_s": p50, "latency_p99_s": p99},
            }
        ],
    }


def test_the_cold_start_target_holds_only_if_every_cold_run_meets_it() -> None:
    from benchmarks.report_rate import live_targets, rate_lines

    reports = {
        "rate-equi-8000.json": _rate_report(60, True, 2.0, 2.0),
        "rate-equi-8000-cold-120s.json": _rate_report(120, False, 0.4, 0.9),
        "rate-equi-8000-cold-30s.json": _rate_report(30, False, 0.45, 1.0),
    }
    cold, warm = live_targets(reports, {})
    assert cold[1] == "30 s: p50 ×0.45, p99 ×1; 120 s: p50 ×0.4, p99 ×0.9"
    assert cold[2] is True
    # (The warm run's loss is the other target's: a cold run is not one of its rates.)
    assert warm[1].startswith("p50 ×2.0, p99 ×2.0") and warm[2] is False
    reports["rate-equi-8000-cold-30s.json"] = _rate_report(30, False, 0.55, 0.8)
    assert live_targets(reports, {})[0][2] is False
    table = "\n".join(rate_lines(reports))
    assert "| 8,000.0 | quick, 120, cold | streamjoin |" in table
    assert "| 8,000.0 | quick, 60 | streamjoin |" in table


def test_a_cold_start_target_per_trigger() -> None:
    from benchmarks.report_provenance import _trigger_flag
    from benchmarks.report_rate import cold_targets, rate_lines

    reports = {
        "rate-equi-8000-cold-30s.json": _rate_report(30, False, 0.61, 0.76),
        "rate-equi-8000-cold-30s-t0.json": _rate_report(30, False, 0.11, 0.88, trigger=0.0),
    }
    default, second = cold_targets(reports)
    assert "Spark's default trigger" in default[0] and default[1:] == (
        "30 s: p50 ×0.11, p99 ×0.88",
        True,
    )
    assert "a 1 s trigger" in second[0] and second[2] is False
    table = "\n".join(rate_lines(reports))
    assert "| 8,000.0 | quick, 30, cold, trigger 0 s | streamjoin |" in table
    assert "| 8,000.0 | quick, 30, cold | streamjoin |" in table
    assert _trigger_flag({"trigger_s": 0.0}) == " --trigger 0" and not _trigger_flag({})


@pytest.mark.parametrize("args", [["--trigger", "0"], ["--rate", "100", "--trigger", "-1"]])
def test_a_trigger_without_a_live_run_or_below_zero_is_refused(
    args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import benchmarks.harness as harness
    import benchmarks.rate as rate

    def ran(*_: t.Any, **__: t.Any) -> t.NoReturn:
        raise AssertionError("a run was started")

    monkeypatch.setattr(harness, "run_workload", ran)
    monkeypatch.setattr(rate, "run_rate", ran)
    assert main(["bench", "equi", "--tiny", *args]) != 0
    err = capsys.readouterr().err
    assert "--trigger" in err and "goes with --rate" in err


def test_the_trigger_reaches_the_live_run(monkeypatch: pytest.MonkeyPatch) -> None:
    import benchmarks.rate as rate

    seen: dict[str, t.Any] = {}

    def run_rate(workload: str, per_stream: float, size: str, **kw: t.Any) -> dict[str, t.Any]:
        seen.update(kw)
        return {"rate_per_stream": per_stream, "cases": []}

    monkeypatch.setattr(rate, "run_rate", run_rate)
    assert main(["bench", "equi", "--tiny", "--rate", "100", "--trigger", "0"]) == 0
    assert seen["trigger"] == 0.0
    assert main(["bench", "equi", "--tiny", "--rate", "100"]) == 0
    assert seen["trigger"] == rate.TRIGGER
