"""The reference of GROUP BY window queries (`reference.aggregate`), on hand-counted cases."""

from __future__ import annotations

import dataclasses
import typing as t

import pytest

from streamjoin.reference import run_reference
from streamjoin.sql import parse_job
from tests.reference_cases import BATCHES, JOIN, STREAMS, _t


def test_tumbling_windows_close_by_the_watermark_less_the_lag() -> None:
    job = parse_job(
        STREAMS + "INSERT INTO s SELECT window.start AS ws, window.end AS we, count(*) AS n, "
        "count(b.x) AS nx, sum(a.id) AS sa, avg(b.x) AS ax, min(a.x) AS lo, "
        "count(DISTINCT b.id) AS d\n" + JOIN + "GROUP BY window(b.ts, '10 seconds')"
    )
    result = run_reference(job, BATCHES)
    # [0 s, 10 s) closes when W - 5 s reaches 10 s: after batch 2 (W = 39 s).
    assert result.outputs["q1"] == [(_t(0), _t(10), 3, 2, 6, 0.5, 1.0, 2)]
    assert result.arrivals["q1"] == [2]


def test_hopping_windows_keys_and_having() -> None:
    job = parse_job(
        STREAMS
        + "INSERT INTO s SELECT window.start AS ws, a.k AS k, count(*) AS n\n"
        + JOIN
        + "GROUP BY window(b.ts, '10 seconds', '5 seconds'), a.k HAVING count(*) > 1"
    )
    result = run_reference(job, BATCHES)
    # [-5 s, 5 s) holds the two results at 3 s and closes after batch 1 (W - 5 s = 6 s);
    # [0 s, 10 s) holds all three; [5 s, 15 s) only one, which HAVING drops.
    assert result.outputs["q1"] == [(_t(-5), 1, 2), (_t(0), 1, 3)]
    assert result.arrivals["q1"] == [1, 2]


def test_a_final_run_emits_the_windows_still_open() -> None:
    job = parse_job(
        STREAMS
        + "INSERT INTO s SELECT window.start AS ws, count(*) AS n\n"
        + JOIN
        + "GROUP BY window(b.ts, '4 seconds')"
    )
    open_ = run_reference(job, BATCHES[:2])
    assert open_.outputs["q1"] == [(_t(0), 2)]  # [8 s, 12 s) still open at W - 5 s = 6 s
    final = run_reference(job, BATCHES[:2], final=True)
    assert final.outputs["q1"] == [(_t(0), 2), (_t(8), 1)]
    assert final.arrivals["q1"] == [1, 2]  # (the final batch: one past the input's)


def test_a_window_closed_before_its_last_result_fails_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from streamjoin.plan.aggregate import AggregatePlan, plan_aggregate
    from streamjoin.reference import executor

    def early(*args: t.Any) -> AggregatePlan:
        # (A lag 20 s too short: W - lag passes 4 s after batch 0, before (3, 11) at 9 s.)
        plan = plan_aggregate(*args)
        return dataclasses.replace(plan, lag_us=-20_000_000)

    monkeypatch.setattr(executor, "plan_aggregate", early)
    job = parse_job(
        STREAMS
        + "INSERT INTO s SELECT count(*) AS n\n"
        + JOIN
        + "GROUP BY window(b.ts, '12 seconds')"
    )
    with pytest.raises(AssertionError, match="a result came in"):
        run_reference(job, BATCHES)
