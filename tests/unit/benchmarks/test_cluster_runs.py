"""``streamjoin bench --cluster``: every engine's child process gets the cluster's master, its
session runs there, and a live run is refused with the flag named."""

from __future__ import annotations

import typing as t

import pytest

from benchmarks import engines, harness
from benchmarks.workloads import Case
from streamjoin.cli import main


def test_cluster_with_rate_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "equi", "--tiny", "--rate", "100", "--cluster"])
    assert code != 0
    assert "--cluster goes with a backlog run" in capsys.readouterr().err


def test_each_engine_process_is_given_the_master(
    monkeypatch: pytest.MonkeyPatch, tmp_path: t.Any
) -> None:
    seen: list[tuple[str, dict[str, str] | None]] = []

    def child(args: t.Sequence[str], extra_env: dict[str, str] | None = None, **_: t.Any) -> t.Any:
        seen.append((args[1], extra_env))
        return 1, "not run", 0.0

    monkeypatch.setattr(harness, "run_child", child)
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
