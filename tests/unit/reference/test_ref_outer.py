"""The reference of outer joins (`reference.outer`), on hand-counted cases."""

from __future__ import annotations

import typing as t

import pytest

from streamjoin.reference import run_reference
from streamjoin.sql import parse_job
from tests.reference_cases import BATCHES, STREAMS, _t

ON = "ON a.k = b.k AND b.ts BETWEEN a.ts - INTERVAL '5' SECOND AND a.ts + INTERVAL '5' SECOND"
Emitted = list[tuple[tuple[int | None, int | None], int]]
PAIRS: Emitted = [((1, 10), 0), ((2, 10), 0), ((3, 11), 1)]
"""The pairs of `BATCHES` under `ON`, each with its arrival. The watermark after each batch:
1 s, 11 s, 39 s; a row waits 5 s for a partner either way."""


def _run(kind: str, final: bool, where: str = "") -> list[tuple[object, int]]:
    job = parse_job(
        f"{STREAMS}INSERT INTO s SELECT a.id AS i, b.id AS j FROM A a {kind} B b {ON}{where};"
    )
    result = run_reference(job, BATCHES, final=final)
    return sorted(zip(result.outputs["q1"], result.arrivals["q1"], strict=True), key=repr)


def _sorted(rows: t.Sequence[tuple[object, int]]) -> list[tuple[object, int]]:
    return sorted(rows, key=repr)


@pytest.mark.parametrize("final", [False, True])
def test_left_right_and_full(final: bool) -> None:
    # a4 (k 2, 40 s) matches nothing: W - 5 s never passes 40 s; a final run's extra batch
    # (3) decides it.
    left: Emitted = [((4, None), 3)] if final else []
    # b12 (30 s) is decided after batch 2 (W 39 s); b13 (41 s) only at the end.
    right: Emitted = [((None, 12), 2)]
    right += [((None, 13), 3)] if final else []
    assert _run("LEFT JOIN", final) == _sorted(PAIRS + left)
    assert _run("RIGHT OUTER JOIN", final) == _sorted(PAIRS + right)
    assert _run("FULL JOIN", final) == _sorted(PAIRS + left + right)


def test_where_filters_the_rows_without_a_partner_too() -> None:
    assert _run("FULL JOIN", True, " WHERE b.id IS NULL OR b.id > 10") == _sorted(
        [((3, 11), 1), ((4, None), 3), ((None, 12), 2), ((None, 13), 3)]
    )


def test_a_grouped_outer_join() -> None:
    job = parse_job(
        f"{STREAMS}INSERT INTO s SELECT window.start AS ws, count(*) AS n, count(b.id) AS nb "
        f"FROM A a LEFT JOIN B b {ON} GROUP BY window(a.ts, '20 seconds');"
    )
    result = run_reference(job, BATCHES, final=True)
    # [0 s, 20 s): a1, a2, a3 each matched once; [20 s, 40 s): nothing; [40 s, 60 s): a4.
    assert sorted(zip(result.outputs["q1"], result.arrivals["q1"], strict=True), key=repr) == [
        ((_t(0), 3, 3), 2),
        ((_t(40), 1, 0), 3),
    ]
