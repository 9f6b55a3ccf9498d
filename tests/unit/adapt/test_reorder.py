"""CLASH's epochs for probe orders: statistics of epoch e decide the orders of epoch e + 2."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.adapt import Orders, ReorderController


def _by_rate(rates: dict[str, float]) -> Orders:
    """A stand-in optimizer: probe the slower stream first."""
    order = tuple(sorted((1, 2), key=lambda i: (rates.get("bc"[i - 1], 0.0), i)))
    return {"q": {0: order}}


_ROWS = st.lists(st.fixed_dictionaries({"b": st.integers(0, 9), "c": st.integers(0, 9)}))


@given(rows=_ROWS, length=st.integers(1, 3))
@settings(max_examples=80, deadline=None)
def test_orders_follow_the_statistics_of_two_epochs_before(
    rows: list[dict[str, int]], length: int
) -> None:
    c = ReorderController(length, {"q": {0: (1, 2)}})
    seen: list[Orders] = []
    for batch, counts in enumerate(rows):
        seen.append(c.orders_at(batch))
        c.after_batch(batch, counts, _by_rate)
        c.prune(batch)
        # A restart from the manifest continues exactly where the controller was.
        c = ReorderController.from_dict(c.to_dict())
    for batch, orders in enumerate(seen):
        epoch = batch // length
        if epoch < 2:
            assert orders == {"q": {0: (1, 2)}}
            continue
        stats = rows[(epoch - 2) * length : (epoch - 1) * length]
        rates = {s: max(sum(r[s] for r in stats), 1) / length for s in ("b", "c")}
        assert orders == _by_rate(rates), (batch, epoch)


def test_a_replayed_batch_leaves_the_same_state() -> None:
    """A batch replayed after a crash starts from the manifest saved before it."""
    before = ReorderController(1, {"q": {0: (1, 2)}}).to_dict()
    first = ReorderController.from_dict(before)
    note = first.after_batch(0, {"b": 9, "c": 1}, _by_rate)
    replay = ReorderController.from_dict(before)
    assert replay.after_batch(0, {"b": 9, "c": 1}, _by_rate) == note
    assert note == "new probe orders from batch 2 (epoch 2)"
    assert replay.to_dict() == first.to_dict()
    assert first.orders_at(1) == {"q": {0: (1, 2)}}
    assert first.orders_at(2) == {"q": {0: (2, 1)}}


def test_the_same_orders_again_are_no_new_epoch() -> None:
    c = ReorderController(2, {"q": {0: (1, 2)}})
    assert c.after_batch(0, {"b": 1, "c": 9}, _by_rate) == ""  # mid-epoch: nothing yet
    assert c.after_batch(1, {"b": 1, "c": 9}, _by_rate) == ""  # b is slower: (1, 2) again
    assert c.epochs == []
