"""The reference of top-N queries (`reference.aggregate`), on hand-counted cases."""

from __future__ import annotations

import pytest

from streamjoin.reference import run_reference
from streamjoin.sql import parse_job
from tests.reference_cases import BATCHES, JOIN, STREAMS


def _top(part: str, order: str, n: int) -> tuple[list[tuple[object, ...]], list[int]]:
    job = parse_job(
        f"{STREAMS}INSERT INTO s SELECT i, j FROM (SELECT a.id AS i, b.id AS j, ROW_NUMBER() "
        f"OVER (PARTITION BY {part} ORDER BY {order}) AS rn {JOIN}) WHERE rn <= {n};"
    )
    result = run_reference(job, BATCHES, final=True)
    return result.outputs["q1"], result.arrivals["q1"]


def test_the_best_partner_of_each_row() -> None:
    # Pairs (a, b): (1, 10), (2, 10) at a.ts 1 s and 2 s, (3, 11) at 12 s. Per a row (its
    # time): each has one partner. Its group closes once W - 5 s passes a.ts: after batch 1
    # (W 11 s) for a1 and a2, after batch 2 (W 39 s) for a3.
    rows, batches = _top("a.id, a.ts", "b.x DESC, b.id", 1)
    assert sorted(zip(rows, batches, strict=True)) == [((1, 10), 1), ((2, 10), 1), ((3, 11), 2)]


def test_the_first_two_of_a_window_by_an_order_with_nulls() -> None:
    # [0 s, 20 s) of b.ts holds all three pairs; b11's x is NULL: last in DESC, first in ASC.
    rows, _ = _top("window(b.ts, '20 seconds')", "b.x DESC, a.id DESC", 2)
    assert rows == [(2, 10), (1, 10)]
    rows, _ = _top("window(b.ts, '20 seconds')", "b.x ASC, a.id", 2)
    assert rows == [(3, 11), (1, 10)]


def test_a_tie_across_the_cut_is_refused() -> None:
    with pytest.raises(ValueError, match="rows 1 and 2 of a group tie"):
        _top("window(b.ts, '20 seconds')", "b.id", 1)
