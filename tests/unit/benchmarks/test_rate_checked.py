"""A live run's result check (`benchmarks.rate._checked`): the engines that drained agree with
one another (and with DuckDB where it counts); one that did not drain is left out, not a
reason to leave the others unchecked."""

from __future__ import annotations

import typing as t

from benchmarks.data import Backlog
from benchmarks.rate import _checked
from benchmarks.workloads import Case

_CASE = Case("equi", "", "spark-native", Backlog("", {}, 0, {}, {}))


def _run(out: int | None, drained: bool = True, error: str | None = None) -> dict[str, t.Any]:
    run: dict[str, t.Any] = {"drained": drained, "out": {"q1": out}, "processed_rate": 1.0}
    return run | ({"error": error} if error else {})


def test_the_engines_that_drained_are_checked_and_one_that_did_not_is_left_out() -> None:
    assert _checked(_CASE, {"streamjoin": _run(7), "spark-native": _run(7)}, {})["results_agree"]
    behind = {"streamjoin": _run(7), "spark-native": _run(3, drained=False)}
    assert _checked(_CASE, behind, {})["results_agree"] is True
    differ = {"streamjoin": _run(7), "spark-native": _run(6)}
    assert _checked(_CASE, differ, {})["results_agree"] is False


def test_an_error_fails_the_check_and_none_drained_leaves_it_unchecked() -> None:
    failed = {"streamjoin": _run(7), "spark-native": _run(None, False, "boom")}
    assert _checked(_CASE, failed, {})["results_agree"] is False
    none = {"streamjoin": _run(7, drained=False), "spark-native": _run(3, drained=False)}
    assert _checked(_CASE, none, {})["results_agree"] is None
