"""The plan-epoch log: lookups over boundaries, proposals, liveness, persistence, and how the
controllers' outputs become epochs."""

from __future__ import annotations

import json

import pytest

from streamjoin.adapt import ElasticController, Epoch, EpochLog, MatrixController


def three() -> EpochLog:
    return EpochLog(
        [
            Epoch(0, "matrix", {"n": 8, "m": 8}),
            Epoch(5, "matrix", {"n": 4, "m": 16}),
            Epoch(9, "biclique", {"left": [0.0, 1.0], "right": [2, 3, 4]}),
        ]
    )


@pytest.mark.parametrize(("batch", "first"), [(0, 0), (4, 0), (5, 5), (8, 5), (9, 9), (10_000, 9)])
def test_at_finds_the_epoch_in_force(batch: int, first: int) -> None:
    assert three().at(batch).first_batch == first


def test_at_before_the_first_epoch_or_on_an_empty_log_fails() -> None:
    with pytest.raises(LookupError, match="batch 2: the first starts at batch 3"):
        EpochLog([Epoch(3, "hash")]).at(2)
    with pytest.raises(LookupError, match="empty"):
        EpochLog().at(0)


@pytest.mark.parametrize("first", [9, 7, 0])
def test_a_proposal_that_does_not_start_after_the_last_epoch_names_both_batches(
    first: int,
) -> None:
    log = three()
    with pytest.raises(ValueError, match=f"start at batch {first} .* starts at batch 9"):
        log.propose(Epoch(first, "matrix", {"n": 2, "m": 32}))
    assert len(log) == 3


def test_a_proposal_must_start_after_the_last_committed_batch() -> None:
    log = three()
    with pytest.raises(ValueError, match=r"batch 12 .* last committed batch 12"):
        log.propose(Epoch(12, "hash"), committed=12)
    log.propose(Epoch(13, "hash"), committed=12)
    assert log.at(13).scheme_name == "hash"
    assert log.at(12).scheme_name == "biclique"


def test_live_keeps_every_epoch_that_may_own_state() -> None:
    log = three()
    firsts = {b: [e.first_batch for e in log.live(b)] for b in (0, 4, 5, 8, 9, 50)}
    assert firsts == {0: [0, 5, 9], 4: [0, 5, 9], 5: [5, 9], 8: [5, 9], 9: [9], 50: [9]}
    assert [e.first_batch for e in log.prune(6)] == [0]
    assert [e.first_batch for e in log.epochs] == [5, 9]
    with pytest.raises(LookupError):
        log.at(4)


def test_update_merges_changes_that_start_at_the_same_batch() -> None:
    log = EpochLog([Epoch(0, "biclique", {"left": [0, 1], "right": [0, 1]})])
    log.update(7, {"left": [0, 1, 2]}, committed=6)
    merged = log.update(7, {"right": [0]}, committed=6)  # the other side, same batch
    assert len(log) == 2
    assert merged == Epoch(7, "biclique", {"left": [0, 1, 2], "right": [0]})
    assert log.at(6).params == {"left": [0, 1], "right": [0, 1]}
    with pytest.raises(ValueError, match=r"batch 7 .* last committed batch 7"):
        log.update(7, {"right": [1]}, committed=7)


def test_epoch_params_are_copied_and_checked() -> None:
    units = [0.0, 1.0]
    params: dict[str, int | float | list[float]] = {"units": units}
    epoch = Epoch(0, "biclique", params)
    units.append(2.0)
    params["n"] = 3
    assert epoch.params == {"units": [0.0, 1.0]}
    with pytest.raises(ValueError, match="'key'"):
        Epoch(0, "hash", {"key": "price"})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match=">= 0"):
        Epoch(-1, "hash")


def test_json_round_trip() -> None:
    log = three()
    back = EpochLog.from_dict(json.loads(json.dumps(log.to_dict())))
    assert back.epochs == log.epochs
    assert back.to_dict() == log.to_dict()
    with pytest.raises(ValueError, match="not a 'epoch-log' state"):
        EpochLog.from_dict({"kind": "matrix-controller", "version": 1})


def test_controllers_feed_the_log() -> None:
    matrix = MatrixController(64, warmup=0)
    log = EpochLog([Epoch(0, "matrix", {"n": 8, "m": 8})])
    matrix.observe(0, 1000, 1000)
    step = matrix.observe(1, 10, 7000)
    assert step is not None
    log.update(step.batch_effective, step.params(), committed=1)
    assert log.at(1).params == {"n": 8, "m": 8}  # batch 1 was stored under the old shape
    assert log.at(2).params == {"n": 4, "m": 16}

    elastic = ElasticController("left", 2, max_units=8, confirmations=1)
    scale = elastic.observe(2, {0: 1.0, 1: 1.0})
    assert scale is not None
    log.update(scale.batch_effective, {"left_units": list(scale.units_after)}, committed=2)
    assert log.at(3).params == {"n": 4, "m": 16, "left_units": [0, 1, 2, 3]}
