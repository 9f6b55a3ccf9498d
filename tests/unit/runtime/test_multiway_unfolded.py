"""The cached slices keep no MIR: a plan's step into an MIR becomes steps into its inputs' own
stores (`runtime.multiway.terms.unfolded`), the input the step joins first, every conjunct
still checked once."""

from __future__ import annotations

from streamjoin.plan import plan_job
from streamjoin.plan.multiway import plan_multiway
from streamjoin.runtime.multiway.terms import probe_inputs, unfolded
from streamjoin.sql import parse_job
from tests.spark.streams import stream_ddl

# From d, the MIR of b and c is reached through c (a band); b joins c alone (hash).
QUERY = (
    "B b JOIN C c ON c.k = b.k JOIN D d ON abs(d.x - c.x) <= 1.0 "
    "AND d.ts BETWEEN c.ts - INTERVAL '2' SECOND AND c.ts + INTERVAL '2' SECOND"
)


def test_an_mir_step_becomes_steps_into_its_inputs_the_joined_one_first() -> None:
    text = "\n".join(stream_ddl(s) for s in "BCD")
    text += "\nCREATE SINK o WITH (format = 'json', path = '/out');\n"
    job = parse_job(text + f"INSERT INTO o SELECT b.id AS i FROM {QUERY};")
    (q,) = job.queries
    mp = plan_multiway(job, q, {2: ((0, 1),)})
    (step,) = mp.orders[2].steps
    assert step.mir is not None and step.input == 1 and step.method == "band"
    assert probe_inputs(mp.orders[2]) == (1, 0)
    flat = unfolded(job, mp)
    assert all(s.mir is None for o in flat.orders for s in o.steps)
    into_c, into_b = flat.orders[2].steps
    assert (into_c.input, into_c.method, into_b.input, into_b.method) == (1, "band", 0, "hash")
    # The MIR's own conjunct, which its step left to the MIR, is checked where b joins.
    assert any("_sj_b_k" in c for c in into_b.conditions)
    for order in flat.orders:
        checked = [*order.filters, *(c for s in order.steps for c in s.conditions)]
        assert len(checked) == len(set(checked)) == len(mp.conjuncts)
    # The other starts' orders are the plan's own.
    assert flat.orders[:2] == mp.orders[:2]


def test_a_plan_without_an_mir_step_is_run_as_it_is() -> None:
    text = "\n".join(stream_ddl(s) for s in "BCD")
    text += "\nCREATE SINK o WITH (format = 'json', path = '/out');\n"
    job = parse_job(text + f"INSERT INTO o SELECT b.id AS i FROM {QUERY};")
    plain = plan_multiway(job, job.queries[0])
    assert unfolded(job, plain) is plain
    (mp,) = plan_job(job, groups=()).multiway
    assert all(s.mir is None for o in unfolded(job, mp).orders for s in o.steps)
