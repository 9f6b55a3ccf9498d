"""Partitioned multi-way stores, the pure half: which probes carry a store's attribute
(`plan.multiway.carries`), and the ILP's partitioning of each epoch (`Reorderer.partitioning`)."""

from __future__ import annotations

import typing as t

from streamjoin.adapt.probes import Reorderer
from streamjoin.plan import plan_job
from streamjoin.plan.multiway import carries
from streamjoin.plan.probeorder import Step
from streamjoin.sql import parse_job
from tests.spark.streams import stream_ddl

if t.TYPE_CHECKING:
    from streamjoin.adapt.reorder import Orders

CHAIN = (
    "A a JOIN B b ON a.k = b.k AND b.ts BETWEEN a.ts - INTERVAL '5' SECOND AND a.ts + INTERVAL "
    "'5' SECOND JOIN C c ON c.s = b.s AND c.x < b.x"
)


def _step(*conditions: str) -> Step:
    return Step(2, "hash", conditions)


def test_a_step_carries_the_attribute_only_through_an_equality_with_the_rows_so_far() -> None:
    assert carries(_step("(_sj_b_s = _sj_c_s)"), ["a", "b"], "c", "s")
    assert carries(_step("_sj_c_s = upper(_sj_a_s) AND _sj_c_x < _sj_b_x"), ["a", "b"], "c", "s")
    # Another column, an inequality, the store's own columns, or rows not bound yet: no.
    assert not carries(_step("_sj_b_s = _sj_c_s"), ["a", "b"], "c", "x")
    assert not carries(_step("_sj_c_x < _sj_b_x"), ["a", "b"], "c", "x")
    assert not carries(_step("_sj_c_s = _sj_c_k"), ["a", "b"], "c", "s")
    assert not carries(_step("_sj_d_s = _sj_c_s"), ["a", "b"], "c", "s")
    assert not carries(_step("_sj_c_s = 'x'"), ["a", "b"], "c", "s")
    # An input read twice (slot b_2) is not its first read's slot b.
    assert not carries(_step("_sj_b_2_s = _sj_b_s"), ["b_2"], "b", "s")


class _Replanned(Reorderer):
    """The ILP replaced: every epoch's plan partitions B on s and probes B last from A."""

    def _optimize(self, rates: dict[str, float]) -> Orders:
        self._proposed = {"B": "s", "C": "s"}
        return {"q1": {0: (2, 1)}}


def test_each_epoch_partitions_as_its_plan_says_and_the_manifest_keeps_it() -> None:
    text = "\n".join(stream_ddl(s) for s in "ABC")
    text += "\nCREATE SINK o WITH (format = 'json', path = '/out');\n"
    text += f"INSERT INTO o SELECT a.id AS i FROM {CHAIN} WITH (epoch = 2);"
    plan = plan_job(parse_job(text))
    reorder = _Replanned(plan, 4)
    reorder.restore(None)
    assert plan.clash is not None
    first = reorder.partitioning(0)
    # The job's plan: each store on an attribute its probes join on.
    assert first == {"A": "k", "B": first["B"], "C": "s"} and first["B"] in ("k", "s")
    rows = {"A": 10, "B": 10, "C": 10}
    reorder.after_batch(0, rows)
    reorder.after_batch(1, rows)  # epoch 0 ends: the new plan starts at batch 4 (epoch 2)
    saved = reorder.state()
    again = Reorderer(plan, 4)
    again.restore(saved)
    for r in (reorder, again):
        assert [r.partitioning(b) for b in (2, 3)] == [first, first]
        assert r.partitioning(4) == {"B": "s", "C": "s"}
    # Greedy orders (simple sharing) probe every partition: no partitioning.
    again.greedy = True
    assert again.partitioning(4) == {}
