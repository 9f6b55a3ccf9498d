"""When a drain of the join operator's state ends (`runtime.batch.drains.Drains.start`): a
placement change while one drains ends it, whether or not a new one may start, since the build
that follows loads its rows too (a shedding query's: its rows would have met twice); where all
its rows are out of reach already, the index drains anew instead of a build."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from streamjoin.runtime.batch import drains as module
from streamjoin.runtime.batch.drains import Drain, Drains


class _Index:
    """The ``JoinIndex`` calls a drain's end makes, recorded."""

    def __init__(self) -> None:
        self.dropped: list[str] = []
        self.renamed: list[tuple[str, str]] = []

    def drop(self, name: str) -> None:
        self.dropped.append(name)

    def rename(self, build: str, to: str, parts: int) -> None:
        self.renamed.append((build, to))


@dataclass
class _Router:
    params: dict[str, object] = field(default_factory=dict)


@pytest.fixture
def reach(monkeypatch: pytest.MonkeyPatch) -> list[int | None]:
    """The least event time the batch reaches on both sides (the drain's rows are at 0)."""
    least: list[int | None] = [0]
    monkeypatch.setattr(module, "_reach", lambda ctx, qp: ((least[0], least[0]), None))
    monkeypatch.setattr(module, "_newest", lambda ctx, qp: (9, 9))
    return least


def _draining(since: int) -> Drains:
    drains = Drains()
    router = SimpleNamespace()
    drains._drains["q1#k"] = Drain("ix~drained@3", 4, router, since, (0, 0), "ix")  # type: ignore[arg-type]
    return drains


@pytest.mark.parametrize("may_drain", [True, False])
@pytest.mark.usefixtures("reach")
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


def test_a_change_once_the_drains_rows_are_out_of_reach_drains_anew(
    reach: list[int | None],
) -> None:
    drains, index = _draining(since=3), _Index()
    reach[0] = 1  # (past its rows: it would go at this batch's probe)
    qp = SimpleNamespace(query=SimpleNamespace(name="q1"))
    ctx = SimpleNamespace(batch_id=5, routers={"q1": _Router()})
    got = drains.start(ctx, qp, "q1#k", "ix", (4, (2, "{}")), index, True)  # type: ignore[arg-type]
    assert got == ("ix~drained@5", 2)
    assert index.dropped == ["ix~drained@3"] and index.renamed == [("ix", "ix~drained@5")]
    assert drains.names() == ["ix~drained@5"] and drains.ending() == ["ix~drained@5"]
