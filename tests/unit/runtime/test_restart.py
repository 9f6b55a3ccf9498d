"""A restart with an edited job (`runtime.restart`): which edits a checkpoint can take, the
warning for new queries reaching past the kept state, and saved run state that carries over only
to the query it was saved for (no JVM: manifests and plans are plain data)."""

from __future__ import annotations

import pytest

from streamjoin.adapt.probes import Reorderer
from streamjoin.errors import StreamJoinError, StreamJoinWarning
from streamjoin.plan import JobPlan, MultiwayPlan, plan_job, query_retention
from streamjoin.runtime.restart import check_restart, history_gaps
from streamjoin.runtime.routing.router import QueryRouter
from streamjoin.runtime.state.manifest import Manifest, Totals
from streamjoin.sql import parse_job
from tests.spark.streams import stream_ddl

S = 1_000_000
W = 100 * S
"""The watermark the last run committed (epoch microseconds)."""


def _window(x: str, y: str, seconds: int) -> str:
    within = f"INTERVAL '{seconds}' SECOND"
    return f"{y}.ts BETWEEN {x}.ts - {within} AND {x}.ts + {within}"


def _plan(*queries: str, streams: str = "ABC") -> JobPlan:
    text = "\n".join(stream_ddl(s) for s in streams)
    text += "\nCREATE SINK o WITH (format = 'json', path = '/out');\n"
    text += "\n".join(f"INSERT INTO o SELECT {q};" for q in queries)
    return plan_job(parse_job(text))


AB = f"a.id AS i FROM A a JOIN B b ON a.k = b.k AND {_window('a', 'b', 2)}"
AB_WIDE = f"a.id AS i FROM A a JOIN B b ON a.k = b.k AND {_window('a', 'b', 8)}"
AB_FULL = "a.id AS i FROM A a JOIN B b ON a.k = b.k"
ABC = (
    f"a.id AS i FROM A a JOIN B b ON a.k = b.k AND {_window('a', 'b', 2)} "
    f"JOIN C c ON c.k = b.k AND {_window('b', 'c', 2)}"
)


def _last(streams: list[str], expired: dict[str, int] | None = None, batch: int = 7) -> Manifest:
    totals = Totals(batches=batch + 1, rows_in=dict.fromkeys(streams, 10))
    return Manifest(batch, global_wm=W, totals=totals, streams=streams, expired=dict(expired or {}))


# ------------------------------------------------------------------------- the streams read


def test_a_fresh_checkpoint_takes_any_job() -> None:
    check_restart(_plan(AB), Manifest())


def test_a_stream_no_earlier_run_read_is_an_error_naming_it_and_its_query() -> None:
    with pytest.raises(StreamJoinError) as err:
        check_restart(_plan(AB, ABC), _last(["A", "B"]), "ckpt")
    text = str(err.value)
    assert text.startswith("stream C is read by query q2 but not by the earlier runs of ckpt")
    assert "Leave out the queries that read C, or run the job from a new checkpoint" in text


def test_a_stream_no_longer_read_is_an_error() -> None:
    with pytest.raises(
        StreamJoinError, match=r"stream C is read by the earlier runs of .* but by no"
    ):
        check_restart(_plan(AB), _last(["A", "B", "C"]))
    with pytest.raises(StreamJoinError, match=r"^streams B, C are read by queries q1, q2 but not"):
        check_restart(_plan(AB, ABC), _last(["A"]))


def test_streams_declared_in_another_order_are_an_error() -> None:
    with pytest.raises(StreamJoinError, match=r"another order \(A, B\) than .* \(B, A\)"):
        check_restart(_plan(AB, streams="AB"), _last(["B", "A"]))


def test_a_manifest_from_before_the_stream_list_is_checked_by_its_totals() -> None:
    last = _last(["A", "B"])
    last.streams = []
    check_restart(_plan(AB, streams="BA"), last)  # the order cannot be told; the set can
    with pytest.raises(StreamJoinError, match="stream C is read by query q1"):
        check_restart(_plan(ABC), last)


# ------------------------------------------------------------------------------- history


def test_the_queries_that_dropped_the_state_never_miss_it() -> None:
    plan = _plan(AB, ABC)
    # What those queries' horizons can have dropped: rows older than W - retain, per stream.
    expired = {sp.name: W - (sp.retain_us or 0) - 1 for sp in plan.streams}
    assert all(sp.retain_us for sp in plan.streams)
    assert history_gaps(plan, _last(["A", "B", "C"], expired)) == []


def test_a_wider_window_than_the_kept_state_is_warned_about_per_stream() -> None:
    plan = _plan(AB, AB_WIDE)
    assert query_retention(plan.queries[1]) == {"A": 8 * S, "B": 8 * S}
    gaps = history_gaps(plan, _last(["A", "B"], {"A": W - 3 * S}))
    assert len(gaps) == 1, gaps
    assert gaps[0].startswith("query q2 joins A's rows from event time 1970-01-01 00:01:32.000")
    assert "dropped its rows up to event time 1970-01-01 00:01:37.000" in gaps[0]
    with pytest.warns(StreamJoinWarning, match="query q2 joins A's rows"):
        check_restart(plan, _last(["A", "B"], {"A": W - 3 * S}))


def test_a_full_history_query_after_any_drop_is_warned_about() -> None:
    gaps = history_gaps(_plan(AB, AB_FULL), _last(["A", "B"], {"B": 0}))
    assert len(gaps) == 1 and "query q2 joins B's rows all of its history" in gaps[0]


def test_nothing_dropped_means_no_warning() -> None:
    assert history_gaps(_plan(AB_FULL, ABC), _last(["A", "B", "C"])) == []


# ------------------------------------------------------------------ saved run state, by query


def test_a_signature_covers_inputs_predicate_and_options_not_sink_or_select() -> None:
    base = _plan(AB).job.queries[0]
    assert _plan(AB.replace("a.id AS i", "b.id AS j")).job.queries[0].signature == base.signature
    assert _plan(AB_WIDE).job.queries[0].signature != base.signature
    assert _plan(AB + " WITH (units = 4)").job.queries[0].signature != base.signature


def test_a_router_starts_afresh_when_its_name_was_saved_by_another_query() -> None:
    old = _plan(AB).queries[0]
    new = _plan(AB.replace("a.k = b.k", "a.k = b.k AND a.s = b.s")).queries[0]
    a, b = old.query.left.stream, old.query.right.stream
    sides = (_plan(AB).job.stream(a), _plan(AB).job.stream(b))
    saved = QueryRouter.restore(old, *sides, None, 4)
    saved.params = {"name": "matrix", "n": 2, "m": 2, "units": 4}
    saved.key_types = ("bigint",)
    state = saved.state()
    same = QueryRouter.restore(old, *sides, state, 4)
    assert same.params["name"] == "matrix" and same.key_types == ("bigint",)
    other = QueryRouter.restore(new, *sides, state, 4)
    assert other.params == {"name": "hash", "units": 4} and other.key_types is None
    del state["signature"]  # a manifest from before signatures: taken as it is
    assert QueryRouter.restore(new, *sides, state, 4).key_types == ("bigint",)


def test_saved_probe_orders_carry_over_only_to_the_query_they_were_saved_for() -> None:
    """Version 1's q1 is a three-way join; version 2 inserts a four-way one before it, so q1
    names another query (of other arity) and the old one is q2."""
    four = (
        f"a.id AS i FROM A a JOIN B b ON a.k = b.k AND {_window('a', 'b', 2)} "
        f"JOIN C c ON c.k = b.k AND {_window('b', 'c', 2)} "
        f"JOIN A d ON d.k = c.k AND {_window('c', 'd', 2)}"
    )
    v1, v2 = _plan(ABC), _plan(four, ABC)
    before = Reorderer(v1, 4)
    before.restore(None)
    chosen: dict[int, tuple[int | tuple[int, ...], ...]] = {
        0: (2, 1),
        1: (2, 0),
        2: (0, 1),
    }  # not the plan's
    before.controller.initial = {"q1": chosen}
    saved = before.state()

    after = Reorderer(v2, 4)
    after.restore(saved)
    plans = {mp.query.name: mp for mp in after.plans(8)}
    # The old query keeps its orders under its new name; the new one gets the plan's.
    assert _orders(plans["q2"]) == chosen
    assert _orders(plans["q1"]) == _orders(v2.multiway[0]) and len(plans["q1"].orders) == 4
    assert _orders(v1.multiway[0]) != chosen
    # A manifest from before signatures: by name, and only orders that fit the query.
    del saved["signatures"]
    after.restore(saved)
    plans = {mp.query.name: mp for mp in after.plans(8)}
    assert _orders(plans["q1"]) == _orders(v2.multiway[0])
    assert _orders(plans["q2"]) == _orders(v2.multiway[1])


def _orders(mp: MultiwayPlan) -> dict[int, tuple[int, ...]]:
    return {o.start: tuple(s.input for s in o.steps) for o in mp.orders}
