"""BiStream's 2PS scaling: confirmations, Eq. 7, clamps, draining vs migration, persistence."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.adapt import ElasticController, ScaleStep


def even(units: tuple[int, ...], load: float) -> dict[int, float]:
    return dict.fromkeys(units, load)


def test_n_minus_one_highs_then_a_low_take_no_step() -> None:
    c = ElasticController("left", 8, max_units=32, confirmations=3)
    assert c.observe(0, even(c.units, 0.9)) is None
    assert c.observe(1, even(c.units, 0.9)) is None
    assert c.observe(2, even(c.units, 0.1)) is None  # the streak of "out" is broken
    assert c.streak == ("in", 1)
    assert c.observe(3, even(c.units, 0.9)) is None
    assert c.observe(4, even(c.units, 0.9)) is None
    assert c.observe(5, even(c.units, 0.5)) is None  # a "hold" breaks it too
    assert c.units == tuple(range(8))
    for batch in (6, 7):
        assert c.observe(batch, even(c.units, 0.9)) is None
    assert c.observe(8, even(c.units, 0.9)) is not None  # third in a row


def test_a_single_confirmation_acts_at_once() -> None:
    c = ElasticController("left", 4, max_units=8, confirmations=1)
    step = c.observe(0, even(c.units, 1.0))
    assert step is not None
    assert step.added == (4, 5, 6)  # ⌈4·1.0/0.6⌉ = 7 units


def test_eq_7_worked_examples_from_the_paper() -> None:
    # Fig. 12: k = 8 at τ = 0.9 adds (0.9/0.6 − 1)·8 = 4; k = 12 below T_l = 0.3 removes 6.
    c = ElasticController("left", 8, max_units=32)
    steps = [c.observe(b, even(c.units, 0.9)) for b in range(3)]
    assert steps[:2] == [None, None]
    assert steps[2] == ScaleStep(
        3, "left", (8, 9, 10, 11), (), tuple(range(12)), migrate=False, load=0.9
    )
    c = ElasticController("right", 12, max_units=32)
    steps = [c.observe(b, even(c.units, 0.29)) for b in range(3)]
    step = steps[2]
    assert step is not None
    assert step.added == ()
    assert len(step.drained) == 6  # ⌈12·0.29/0.6⌉ = ⌈5.8⌉ = 6 remain
    assert len(step.units_after) == 6
    assert set(step.drained).isdisjoint(step.units_after)


def test_eq_7_rounds_up_without_floating_point_noise() -> None:
    c = ElasticController("left", 4, max_units=16, confirmations=1)
    step = c.observe(0, even(c.units, 1.05))  # 4.2/0.6 = 7 exactly, 7.000000000000001 in floats
    assert step is not None
    assert step.added == (4, 5, 6)


def test_load_at_a_threshold_is_not_beyond_it() -> None:
    c = ElasticController("left", 4, max_units=8, confirmations=1)
    assert c.observe(0, even(c.units, 0.8)) is None  # τ > T_h is strict
    assert c.observe(1, even(c.units, 0.3)) is None  # τ < T_l is strict


def test_uneven_loads_use_the_mean_and_drain_the_least_loaded() -> None:
    c = ElasticController("left", 4, max_units=8, confirmations=1)
    step = c.observe(0, {0: 0.2, 1: 0.05, 2: 0.3, 3: 0.05})  # τ = 0.15, keep ⌈0.6/0.6⌉ = 1
    assert step is not None
    assert step.units_after == (2,)
    assert step.drained == (0, 1, 3)


def test_clamps_to_max_and_min_units() -> None:
    c = ElasticController("left", 8, max_units=10, confirmations=1)
    step = c.observe(0, even(c.units, 1.0))  # wants ⌈8/0.6⌉ = 14
    assert step is not None
    assert step.added == (8, 9)
    assert c.observe(1, even(c.units, 1.0)) is None  # at the maximum: nothing to add
    assert c.streak == ("hold", 0)
    c = ElasticController("left", 8, max_units=10, min_units=6, confirmations=1, migrate=True)
    step = c.observe(0, even(c.units, 0.05))  # wants 1
    assert step is not None
    assert len(step.units_after) == 6
    assert c.observe(1, even(c.units, 0.05)) is None  # at the minimum
    assert len(c.units) == 6


def test_windowed_drain_keeps_units_probed_until_their_data_expires() -> None:
    c = ElasticController("left", 4, max_units=8, confirmations=1)
    step = c.observe(0, {0: 0.1, 1: 0.2, 2: 0.25, 3: 0.05})  # τ = 0.15 → keep 1 unit
    assert step is not None
    assert not step.migrate
    assert step.batch_effective == 1
    assert step.drained == (0, 1, 3)
    assert c.units == (2,)
    assert list(c.draining) == [0, 1, 3]
    # The drained data has not aged out: τ counts it over the one storing unit (0.6), which is
    # the load that unit settles at, so no second scale-in follows; nor does an overload.
    for batch in range(1, 5):
        assert c.observe(batch, {0: 0.1, 1: 0.2, 2: 0.25, 3: 0.05}) is None
    # Unit 0 is no longer reported, unit 3 is reported empty: both are released.
    assert c.observe(5, {1: 0.1, 2: 0.5, 3: 0.0}) is None
    assert list(c.draining) == [1]
    c.observe(6, {2: 0.6})
    assert list(c.draining) == []
    with pytest.raises(ValueError, match=r"unknown units \[1\]"):
        c.observe(7, {1: 0.1, 2: 0.6})


def test_draining_units_count_in_the_load_but_not_in_k() -> None:
    c = ElasticController("left", 8, max_units=16, confirmations=1)
    step = c.observe(0, even(c.units, 0.25))  # τ = 0.25: keep ⌈2/0.6⌉ = 4
    assert step is not None
    assert step.drained == (4, 5, 6, 7)
    # The storing units fill up while the drained ones still hold data: τ = (4·0.9 + 4·0.1)/4.
    step = c.observe(1, {**even((0, 1, 2, 3), 0.9), **even((4, 5, 6, 7), 0.1)})
    assert step is not None
    assert step.load == pytest.approx(1.0)
    assert step.added == (8, 9, 10)  # ⌈4.0/0.6⌉ = 7 storing units
    assert c.draining == (4, 5, 6, 7)


def test_full_history_migrates_instead_of_draining() -> None:
    c = ElasticController("right", 4, max_units=8, confirmations=1, migrate=True)
    step = c.observe(0, even(c.units, 0.1))
    assert step is not None
    assert step.migrate
    assert step.drained == (1, 2, 3)  # ties: the highest ids go first
    assert c.draining == ()  # their data moves to the remaining units at once
    with pytest.raises(ValueError, match="unknown units"):
        c.observe(1, {0: 0.4, 1: 0.0})


def test_unit_ids_are_never_reused() -> None:
    c = ElasticController("left", 4, max_units=16, confirmations=1, migrate=True)
    c.observe(0, even(c.units, 0.05))  # down to 1 unit
    step = c.observe(1, even(c.units, 2.0))  # up to ⌈2/0.6⌉ = 4
    assert step is not None
    assert step.added == (4, 5, 6)


def test_bad_reports_and_arguments_are_rejected() -> None:
    c = ElasticController("left", 2, max_units=4)
    with pytest.raises(ValueError, match=r"no load reported for units \[1\]"):
        c.observe(0, {0: 0.5})
    with pytest.raises(ValueError, match="finite"):
        c.observe(0, {0: 0.5, 1: float("nan")})
    c.observe(0, {0: 0.5, 1: 0.5})
    with pytest.raises(ValueError, match="batch 0 observed after batch 0"):
        c.observe(0, {0: 0.5, 1: 0.5})
    with pytest.raises(ValueError, match="low < target < high"):
        ElasticController("left", 2, max_units=4, target=0.9)
    with pytest.raises(ValueError, match="min_units <= units <= max_units"):
        ElasticController("left", 5, max_units=4)
    with pytest.raises(ValueError, match="distinct"):
        ElasticController("left", [1, 1], max_units=4)


loads = st.floats(0.0, 1.5)


@settings(max_examples=40)
@given(
    batches=st.lists(st.tuples(loads, st.floats(0.0, 1.0)), min_size=2, max_size=40),
    cut=st.integers(0, 40),
    migrate=st.booleans(),
)
def test_serialized_state_reproduces_future_steps(
    batches: list[tuple[float, float]], cut: int, migrate: bool
) -> None:
    """Each batch: a load for the storing units, and a fraction of it left on draining units."""

    def report(c: ElasticController, load: float, left: float) -> dict[int, float]:
        return {**even(c.draining, load * left), **even(c.units, load)}

    a = ElasticController("left", 4, max_units=12, confirmations=2, migrate=migrate)
    b: ElasticController | None = None
    for batch, (load, left) in enumerate(batches):
        if batch == cut:
            b = ElasticController.from_dict(json.loads(json.dumps(a.to_dict())))
            assert b.to_dict() == a.to_dict()
        step = a.observe(batch, report(a, load, left))
        if b is not None:
            assert b.observe(batch, report(b, load, left)) == step
        if step is not None:
            assert 1 <= len(step.units_after) <= 12
            assert set(step.added).isdisjoint(step.drained)
    if b is not None:
        assert b.to_dict() == a.to_dict()


def test_from_dict_rejects_a_foreign_state() -> None:
    state = ElasticController("left", 2, max_units=4).to_dict()
    with pytest.raises(ValueError, match="not a 'elastic-controller' state"):
        ElasticController.from_dict({**state, "version": 99})
    with pytest.raises(ValueError, match="streak_verdict"):
        ElasticController.from_dict({**state, "streak_verdict": "sideways"})
