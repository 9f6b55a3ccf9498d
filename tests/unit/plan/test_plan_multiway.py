"""Multi-way plans: the delta rule's probe orders, state retention, and the ILP's choices."""

from __future__ import annotations

from dataclasses import replace

import pytest

from streamjoin.errors import UnsupportedError
from streamjoin.plan import plan_job
from streamjoin.plan.chain import chain_choices, chain_order
from streamjoin.plan.probeorder import Mir, Step
from streamjoin.sql import parse_job


def _stream(name: str) -> str:
    return (
        f"CREATE STREAM {name} (id BIGINT, k BIGINT, j BIGINT, x DOUBLE, ts TIMESTAMP, "
        "WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) "
        f"WITH (format = 'json', path = '/in/{name}');"
    )


def _job(*queries: str) -> str:
    sinks = "".join(
        f"CREATE SINK o{i} WITH (format = 'json', path = '/out/{i}');" for i in range(len(queries))
    )
    inserts = "".join(f"INSERT INTO o{i} SELECT a.id AS i {q};" for i, q in enumerate(queries))
    return "\n".join(_stream(s) for s in "abcd") + sinks + inserts


def _w(x: str, y: str, lo: int, hi: int) -> str:
    return f"{y}.ts BETWEEN {x}.ts + INTERVAL '{lo}' SECOND AND {x}.ts + INTERVAL '{hi}' SECOND"


def test_retention_is_the_longest_shortest_window_path() -> None:
    plan = plan_job(
        parse_job(
            _job(
                f"FROM a JOIN b ON a.k = b.k AND {_w('a', 'b', -5, 5)} "
                f"JOIN c ON abs(c.x - b.x) <= 1.5 AND {_w('b', 'c', 0, 3)}"
            )
        )
    )
    (mp,) = plan.multiway
    # a -> b <= 5, b -> c <= 3: a needs 8 s; b needs max(5, 3); c -> b <= 0, then b -> a <= 5.
    assert mp.retain_us == (8_000_000, 5_000_000, 5_000_000)
    assert {s.name: s.retain_us for s in plan.streams} == {
        "a": 8_000_000,
        "b": 5_000_000,
        "c": 5_000_000,
    }
    # Every start probes every other input once, hash before band. c's new rows probe the MIR
    # store of a ⋈ b in one step: it is kept by the a -> b and b -> a steps, which the other
    # two orders run anyway (CLASH's cost model shares them).
    assert [o.describe(mp.aliases) for o in mp.orders] == [
        "Δa -> b (hash) -> c (band)",
        "Δb -> a (hash) -> c (band)",
        "Δc -> (a ⋈ b) (band)",
    ]


def test_an_input_without_a_window_path_keeps_full_history() -> None:
    plan = plan_job(parse_job(_job(f"FROM a JOIN b ON {_w('a', 'b', -1, 1)} JOIN c ON c.k = b.k")))
    assert plan.multiway[0].retain_us == (None, None, None)


def test_probe_orders_are_the_ilps_and_shared_prefixes_are_reported() -> None:
    plan = plan_job(
        parse_job(
            _job(
                "FROM a JOIN b ON a.k = b.k JOIN c ON c.j = b.j",
                "FROM a JOIN b ON a.k = b.k JOIN d ON d.j = b.j",
            )
        )
    )
    assert plan.clash is not None
    for mp in plan.multiway:
        chosen = plan.clash.orders[mp.query.name]
        assert {
            o.start: tuple(s.mir.inputs if s.mir else s.input for s in o.steps) for o in mp.orders
        } == chosen
    # Both queries start a's new rows with the same step a -> b on a.k = b.k: run once.
    assert any(
        set(s.users) >= {"q1/a", "q2/a"} or set(s.users) >= {"q1/b", "q2/b"}
        for s in plan.clash.plan.shared
    )
    text = plan.explain()
    assert "ILP (tight form)" in text and "shared steps" in text


def test_self_joins_keep_greedy_orders_and_say_why() -> None:
    job = _job("FROM a JOIN a b ON a.k = b.k JOIN c ON c.k = b.k")
    job = job.replace("JOIN a b ON", "JOIN a AS b ON")
    plan = plan_job(parse_job(job))
    assert plan.clash is None or "q1" not in plan.clash.orders
    mp = plan.multiway[0]
    assert mp.orders[0].describe(mp.aliases) == "Δa -> b (hash) -> c (hash)"


def test_two_way_partitioning_schemes_are_refused_on_multi_way_queries() -> None:
    job = _job("FROM a JOIN b ON a.k = b.k JOIN c ON c.k = b.k WITH (partitioning = 'matrix')")
    with pytest.raises(UnsupportedError, match="partitioning 'matrix' is for two-way joins"):
        plan_job(parse_job(job))


def test_queries_differing_only_in_selections_have_one_join_core() -> None:
    """Selections (conjuncts naming one input) are what `join_core` leaves out: they may sit in
    ON or WHERE, on any input; a different join conjunct is a different core."""
    from streamjoin.plan.multiway import join_core, local_filters, without_filters

    core = f"FROM a JOIN b ON a.k = b.k AND {_w('a', 'b', -2, 2)} JOIN c ON c.j = b.j"
    plan = plan_job(
        parse_job(
            _job(
                core,
                f"{core} WHERE c.x > 0.5",
                f"FROM a JOIN b ON a.k = b.k AND a.x < 1.0 AND {_w('a', 'b', -2, 2)} "
                "JOIN c ON c.j = b.j WHERE b.x >= 0.2",
                f"FROM a JOIN b ON a.k = b.k AND {_w('a', 'b', -2, 2)} JOIN c ON c.j = a.j",
            )
        ),
        groups=(),  # (no query-set sharing: each query runs its own multi-way join)
    )
    plain, on_c, on_a_b, other = plan.multiway
    assert join_core(plain) == join_core(on_c) == join_core(on_a_b) != join_core(other)
    assert local_filters(plain) == ()
    assert len(local_filters(on_a_b)) == 2
    for mp in (on_c, on_a_b):
        dropped = set(local_filters(mp))
        stripped = [without_filters(o, dropped) for o in mp.orders]
        # What is left of every order is the unfiltered query's order.
        assert stripped == list(plain.orders)
        kept = {
            c for o in mp.orders for c in (*o.filters, *(x for s in o.steps for x in s.conditions))
        }
        assert dropped <= kept
    text = plan.explain()
    assert "shared join cores" in text and "q1, q2, q3: probe orders of q1" in text


@pytest.mark.parametrize(
    ("joins", "choices"),
    [
        # a chain from its end: b, then c, then d; nothing else is joined to what came before
        ("JOIN b ON a.k = b.k JOIN c ON c.k = b.k JOIN d ON d.k = c.k", False),
        # a star around b: after b, c or d
        ("JOIN b ON a.k = b.k JOIN c ON c.k = b.k JOIN d ON d.k = b.k", True),
        # a cycle: b or c first
        ("JOIN b ON a.k = b.k JOIN c ON c.k = b.k AND c.j = a.j", True),
    ],
)
def test_a_chain_has_a_choice_of_order_where_its_first_input_has_several(
    joins: str, choices: bool
) -> None:
    job = parse_job(_job(f"FROM a {joins}"))
    (mp,) = plan_job(job).multiway
    assert chain_choices(job, mp) is choices


def test_a_chain_joins_first_the_input_of_an_mir_step_that_its_rows_so_far_reach() -> None:
    job = parse_job(_job("FROM a JOIN b ON b.x < a.x JOIN c ON c.k = a.k AND c.j = b.j"))
    (mp,) = plan_job(job).multiway
    # From a, a step into the MIR of b and c by c's key (a reaches c, not b, by an equality).
    first = mp.orders[0]
    into = Step(input=2, method="hash", conditions=first.steps[0].conditions, mir=Mir((1, 2)))
    mp = replace(mp, orders=(replace(first, steps=(into,)), *mp.orders[1:]))
    assert chain_order(mp) == (0, 2, 1)
