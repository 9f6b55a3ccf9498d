"""``streamjoin bench --cluster``: every engine's child process gets the cluster's master, a
live one too, its session runs there, and a search of the highest rate is refused with the flag
named."""

from __future__ import annotations

import typing as t

import pytest

from benchmarks import engines, harness, harness_process
from benchmarks.workloads import Case
from streamjoin.cli import main


def test_cluster_with_max_rate_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "equi", "--tiny", "--max-rate", "--cluster"])
    assert code != 0
    assert "--cluster goes with a backlog run or --rate, not --max-rate" in capsys.readouterr().err


def test_a_live_engine_process_is_given_the_master(
    monkeypatch: pytest.MonkeyPatch, tmp_path: t.Any
) -> None:
    from benchmarks import rate_run

    given: list[str | None] = []

    def engine_process(*args: t.Any, master: str | None = None, **_: t.Any) -> list[t.Any]:
        given.append(master)
        return [{"engine": args[0], "error": "not run"}]

    monkeypatch.setattr(rate_run, "run_engine_process", engine_process)
    monkeypatch.setattr(rate_run, "ROOT", str(tmp_path))
    monkeypatch.setattr(rate_run, "feed", lambda *a, **k: ([], 0.0, 0.0))
    monkeypatch.setattr(rate_run, "_live_job", lambda case, dirs: "job {out}")
    source = t.cast(t.Any, type("Feed", (), {"streams": ("a",)})())
    case = Case("c", "job {out}", peer="spark-native", backlog=t.cast(t.Any, None))
    for master in ("spark://127.0.0.1:7077", None):
        result, _ = rate_run._run_one(
            case,
            "streamjoin",
            source,
            duration=1.0,
            tick=0.1,
            trigger=1.0,
            in_process=False,
            warmup=False,
            master=master,
        )
        assert result["error"] == "not run"
    assert given == ["spark://127.0.0.1:7077", None]


def test_each_engine_process_is_given_the_master(
    monkeypatch: pytest.MonkeyPatch, tmp_path: t.Any
) -> None:
    seen: list[tuple[str, dict[str, str] | None]] = []

    def child(args: t.Sequence[str], extra_env: dict[str, str] | None = None, **_: t.Any) -> t.Any:
        seen.append((args[1], extra_env))
        return 1, "not run", 0.0

    monkeypatch.setattr(harness_process, "run_child", child)
    monkeypatch.setattr(harness, "ROOT", str(tmp_path))
    monkeypatch.setattr(harness, "figures", lambda run, case: run)
    monkeypatch.setattr(harness, "_checked", lambda case, size, results: results)
    case = Case("c", "job {out}", peer="spark-native", backlog=t.cast(t.Any, None))
    harness.run_cases([case], "full", master="spark://127.0.0.1:7077")
    harness.run_cases([case], "full")
    master = {engines.MASTER_ENV: "spark://127.0.0.1:7077"}
    on, off = ("streamjoin", "spark-native"), (master, None)
    assert seen == [(e, m) for m in off for e in on]


@pytest.mark.parametrize(("env", "expected"), [("spark://h:1", "spark://h:1"), ("", "local[2]")])
def test_the_session_runs_on_the_named_master(
    monkeypatch: pytest.MonkeyPatch, env: str, expected: str
) -> None:
    import streamjoin.runtime.session as session

    masters: list[str | None] = []

    class Conf:
        def set(self, key: str, value: str) -> None:
            pass

    class Spark:
        conf = Conf()

    def get_session(master: str | None = None, **_: t.Any) -> Spark:
        masters.append(master)
        return Spark()

    monkeypatch.setattr(session, "get_session", get_session)
    monkeypatch.setenv(engines.MASTER_ENV, env)
    engines.session("streamjoin")
    assert masters == [expected]


def test_a_cluster_report_names_its_cluster_and_leaves_out_the_drivers_cpu() -> None:
    from benchmarks.report_backlog import long_table, workload_lines
    from benchmarks.report_provenance import commands

    engines_ = {
        "streamjoin": {"throughput": 2.0, "steady_batch_p50_ms": 5.0},
        "spark-native": {"throughput": 1.0, "steady_batch_p50_ms": 10.0},
    }
    case = {
        "case": "long-equi-300s",
        "window_seconds": 300.0,
        "engines": engines_,
        "results_agree": True,
        "ratios": {"throughput": 2.0, "rows_per_cpu_second": 0.5},
    }
    report = {
        "workload": "long",
        "size": "full",
        "commit": "abc",
        "peer_time_limit_s": 300.0,
        "cases": [case],
    }
    on_cluster = report | {"cluster": harness.CLUSTER}
    assert "rows/CPU s" in long_table(report)[-1]
    assert "rows/CPU s" not in long_table(on_cluster)[-1]
    assert "rows/s ×2" in long_table(on_cluster)[-1]
    text = "\n".join(workload_lines({"long": report, "long-cluster": on_cluster}))
    assert f"Every engine on a cluster: {harness.CLUSTER}." in text
    assert "### long, long-cluster\n" in text  # (one table)
    assert "| long-equi-300s on a cluster |" in text
    assert commands({"long-cluster": on_cluster}, {}, {}, {})[0] == (
        "streamjoin bench long --peer-limit 300 --cluster "
        "--out benchmarks/results/long-cluster.json"
    )
