"""A live run's result check (`benchmarks.rate._checked`): the engines that drained agree with
one another (and with DuckDB where it counts); one that did not drain is left out, not a
reason to leave the others unchecked."""

from __future__ import annotations

import typing as t

import pytest

from benchmarks import rate
from benchmarks.data import Backlog
from benchmarks.rate import _checked
from benchmarks.workloads import Case

_CASE = Case("equi", "", "spark-native", Backlog("", {}, 0, {}, {}))


def _run(out: int | None, drained: bool = True, error: str | None = None) -> dict[str, t.Any]:
    run: dict[str, t.Any] = {"drained": drained, "out": {"q1": out}, "processed_rate": 1.0}
    return run | ({"error": error} if error else {})


def test_the_engines_that_drained_are_checked_and_one_that_did_not_is_left_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _checked(_CASE, {"streamjoin": _run(7), "spark-native": _run(7)}, {})["results_agree"]
    differ = {"streamjoin": _run(7), "spark-native": _run(6)}
    assert _checked(_CASE, differ, {})["results_agree"] is False
    # One fell behind: the other is checked against DuckDB's count, and left unchecked where
    # there is none (nothing to compare it with).
    behind = {"streamjoin": _run(7), "spark-native": _run(3, drained=False)}
    assert _checked(_CASE, behind, {})["results_agree"] is None
    monkeypatch.setattr(rate, "closes_windows", lambda text: False)
    for exact, agree in ((7, True), (8, False)):
        monkeypatch.setattr(rate, "expected_counts", lambda case, n=exact: {"q1": n})
        assert _checked(_CASE, behind, {"streamjoin": "job"})["results_agree"] is agree


def test_an_error_fails_the_check_and_none_drained_leaves_it_unchecked() -> None:
    failed = {"streamjoin": _run(7), "spark-native": _run(None, False, "boom")}
    assert _checked(_CASE, failed, {})["results_agree"] is False
    none = {"streamjoin": _run(7, drained=False), "spark-native": _run(3, drained=False)}
    assert _checked(_CASE, none, {})["results_agree"] is None
