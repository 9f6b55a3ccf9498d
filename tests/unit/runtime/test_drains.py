"""When a drain of the join operator's state ends (`runtime.batch.drains.Drains.start`): a
placement change while one drains ends it, whether or not a new one may start, since the build
that follows loads its rows too (a shedding query's: its rows would have met twice)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from streamjoin.runtime.batch.drains import Drain, Drains


class _Index:
    """The ``JoinIndex`` calls a drain's end makes, recorded."""

    def __init__(self) -> None:
        self.dropped: list[str] = []

    def drop(self, name: str) -> None:
        self.dropped.append(name)


def _draining(since: int) -> Drains:
    drains = Drains()
    router = SimpleNamespace()
    drains._drains["q1#k"] = Drain("ix~drained@3", 4, router, since, (0, 0), "ix")  # type: ignore[arg-type]
    return drains


@pytest.mark.parametrize("may_drain", [True, False])
def test_a_change_while_one_drains_ends_it(may_drain: bool) -> None:
    drains, index = _draining(since=3), _Index()
    ctx = SimpleNamespace(batch_id=5)
    built = (4, (4, "{}"))
    got = drains.start(ctx, None, "q1#k", "ix", built, index, may_drain)  # type: ignore[arg-type]
    assert got is None
    assert index.dropped == ["ix~drained@3"] and "q1#k" not in drains


def test_a_batch_run_again_finds_the_drain_its_first_attempt_started() -> None:
    drains, index = _draining(since=5), _Index()
    ctx = SimpleNamespace(batch_id=5)
    got = drains.start(ctx, None, "q1#k", "ix", None, index, False)  # type: ignore[arg-type]
    assert got == ("ix~drained@3", 4) and index.dropped == []


def test_no_drain_starts_where_none_may() -> None:
    drains, index = Drains(), _Index()
    ctx = SimpleNamespace(batch_id=5)
    got = drains.start(ctx, None, "q1#k", "ix", (4, (4, "{}")), index, False)  # type: ignore[arg-type]
    assert got is None and index.dropped == [] and not drains.names()
