"""`ExecutorScaler`'s steps against a fake cluster (no JVM): a scale-out gives units only once
the executors registered, spread over all of them; a scale-in places the units on the
executors that stay at once and gives the others back only when no partition of the operator
lies on them, or once a stabilization period has passed."""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from streamjoin.adapt.executors import ExecutorScaling
from streamjoin.runtime import executors as module
from streamjoin.runtime.executors import ExecutorScaler

HOST = "10.0.0.7"


def place(executor: int) -> str:
    return f"executor_{HOST}_{executor}"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now


@dataclass
class Cluster:
    """The driver's view: executors registered, what was asked of the cluster manager."""

    registered: list[int] = field(default_factory=lambda: [0])
    asked: list[int] = field(default_factory=list)
    killed: list[str] = field(default_factory=list)

    # (SparkContext's calls, as py4j hands them to Python.)
    def getExecutorIds(self) -> t.Any:
        ids = [str(e) for e in self.registered]
        return SimpleNamespace(size=lambda: len(ids), apply=lambda i: ids[i])

    def killExecutor(self, executor: str) -> None:
        self.killed.append(executor)
        self.registered.remove(int(executor))

    def requestTotalExecutors(self, n: int, *_: t.Any) -> None:
        self.asked.append(n)


@dataclass
class Indexes:
    """`PlacedIndexes`' face to the scaler."""

    cluster: Cluster
    held: set[str] = field(default_factory=set)
    """Executors with partitions of a build."""
    drains: dict[str, set[str]] = field(default_factory=dict)
    """Executors with partitions of each index that drains, by name."""
    preferred: list[str] | None = None

    def holders(self, drained: t.Collection[str] | None = None) -> set[str]:
        names = self.drains.keys() if drained is None else drained
        out = set().union(*(self.drains[n] for n in names if n in self.drains))
        return out | (self.held if drained is None else set())

    def executors(self, spark: t.Any) -> list[str]:
        return [place(e) for e in self.cluster.registered]


@dataclass
class Processor:
    joins: Indexes
    levels: Indexes
    units: list[int] = field(default_factory=list)
    ending: list[str] = field(default_factory=list)
    """The indexes that drain and will empty."""

    @property
    def indexed(self) -> t.Any:
        levels = SimpleNamespace(placed=self.levels)
        drains = SimpleNamespace(ending=lambda: self.ending)
        return SimpleNamespace(placed=self.joins, levels=levels, drains=drains)

    def resize(self, units: int) -> None:
        self.units.append(units)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(module, "time", c)
    return c


def _rows(name: str) -> int:
    return 0


def _no_class(name: str) -> int:
    raise RuntimeError("py4j: streamjoin.operator.JoinIndex is a package: no such class")


def scaler_on(
    cluster: Cluster, stabilization: float = 0.0, operator: bool = True, most: int = 2
) -> tuple[ExecutorScaler, Processor]:
    conf = SimpleNamespace(get=lambda key, default=None: "1")
    join_index = SimpleNamespace(rows=_rows if operator else _no_class)
    jvm = SimpleNamespace(
        org=SimpleNamespace(
            apache=SimpleNamespace(
                spark=SimpleNamespace(
                    api=SimpleNamespace(
                        python=SimpleNamespace(PythonUtils=SimpleNamespace(toScalaMap=dict))
                    )
                )
            )
        ),
        java=SimpleNamespace(util=SimpleNamespace(HashMap=dict)),
        streamjoin=SimpleNamespace(operator=SimpleNamespace(JoinIndex=join_index)),
    )
    context = SimpleNamespace(
        _jsc=SimpleNamespace(sc=lambda: cluster), _jvm=jvm, getConf=lambda: conf
    )
    spark = SimpleNamespace(sparkContext=context)
    processor = Processor(Indexes(cluster), Indexes(cluster))
    scaling = ExecutorScaling(1, most, stabilization=stabilization)
    return ExecutorScaler(t.cast(t.Any, spark), scaling, t.cast(t.Any, processor)), processor


def run(scaler: ExecutorScaler, clock: Clock, batch: int, busy: float, every: float) -> None:
    """Batch `batch` of the engine's own loop starts `every` seconds after the one before and
    runs `busy` of them."""
    clock.now += every - busy
    scaler.starting(batch)
    clock.now += busy
    scaler(t.cast(t.Any, SimpleNamespace(batch=batch, seconds=busy)))


def test_scale_out_asks_ahead_and_spreads_units_once_confirmed_and_registered(
    clock: Clock,
) -> None:
    cluster = Cluster()
    scaler, processor = scaler_on(cluster)
    run(scaler, clock, 0, 1.0, 1.0)
    run(scaler, clock, 1, 1.0, 1.0)  # (its start reads batch 0 behind: the executor asked for)
    assert cluster.asked == [2] and processor.units == []
    cluster.registered.append(1)  # (it registers while the next batches confirm)
    run(scaler, clock, 2, 1.0, 1.0)
    assert processor.units == []  # (two of three batches behind)
    run(scaler, clock, 3, 1.0, 1.0)  # (the third confirms: units at once, none asked again)
    assert processor.units == [2] and cluster.asked == [2]
    assert processor.joins.preferred == processor.levels.preferred == [place(0), place(1)]
    assert cluster.killed == []


def test_scale_out_confirmed_before_the_executor_registered_waits_for_it(clock: Clock) -> None:
    cluster = Cluster()
    scaler, processor = scaler_on(cluster)
    for batch in range(5):
        run(scaler, clock, batch, 1.0, 1.0)
    assert cluster.asked == [2] and processor.units == [] and processor.joins.preferred is None
    cluster.registered.append(1)
    run(scaler, clock, 5, 1.0, 1.0)
    assert processor.units == [2] and cluster.killed == []


def test_an_executor_asked_for_ahead_goes_back_once_the_batches_catch_up(clock: Clock) -> None:
    cluster = Cluster()
    scaler, processor = scaler_on(cluster)
    run(scaler, clock, 0, 1.0, 1.0)
    run(scaler, clock, 1, 1.0, 1.0)
    assert cluster.asked == [2]
    cluster.registered.append(1)
    run(scaler, clock, 2, 0.5, 1.0)  # (its start reads batch 1 ended half a second before)
    assert cluster.killed == ["1"] and cluster.asked[-1] == 1 and processor.units == [1]


def grown(clock: Clock, stabilization: float) -> tuple[ExecutorScaler, Processor, Cluster]:
    """A scaler at two executors, `stabilization` seconds after each change from now on."""
    cluster = Cluster()
    scaler, processor = scaler_on(cluster)
    for batch in range(4):
        run(scaler, clock, batch, 1.0, 1.0)
    cluster.registered.append(1)
    run(scaler, clock, 4, 1.0, 1.0)
    assert processor.units == [2]
    processor.units.clear()
    scaler.scaling.stabilization = stabilization
    return scaler, processor, cluster


def idle_until_asked(scaler: ExecutorScaler, processor: Processor, clock: Clock) -> int:
    batch = 5
    while not processor.units:  # (idle: the third quiet batch shrinks)
        run(scaler, clock, batch, 0.1, 1.0)
        batch += 1
        assert batch < 15
    return batch


def test_scale_in_places_units_at_once_and_gives_back_once_drained(clock: Clock) -> None:
    scaler, processor, cluster = grown(clock, stabilization=30.0)
    processor.joins.held = {place(0), place(1)}  # (the index, built on both)
    batch = idle_until_asked(scaler, processor, clock)
    assert processor.units == [1] and processor.joins.preferred == [place(0)]
    processor.joins.held = {place(0)}  # (the next batch's, on the first only)
    processor.joins.drains = {"old": {place(0), place(1)}}  # (the old one drains on both)
    processor.ending = ["old"]
    for b in range(batch, batch + 40):  # (past the stabilization period: it will empty)
        run(scaler, clock, b, 0.1, 1.0)
    assert cluster.killed == []
    processor.joins.drains = {}
    run(scaler, clock, batch + 40, 0.1, 1.0)
    assert cluster.killed == ["1"] and cluster.asked[-1] == 1 and cluster.registered == [0]


def test_scale_in_waits_for_every_operator_partition(clock: Clock) -> None:
    scaler, processor, cluster = grown(clock, stabilization=30.0)
    processor.levels.held = {place(1)}  # (a multi-way level's build, placed there)
    batch = idle_until_asked(scaler, processor, clock)
    run(scaler, clock, batch, 0.1, 1.0)
    assert cluster.killed == []
    processor.levels.held = set()
    run(scaler, clock, batch + 1, 0.1, 1.0)
    assert cluster.killed == ["1"]


def test_scale_in_gives_back_after_the_period_what_will_not_drain(clock: Clock) -> None:
    scaler, processor, cluster = grown(clock, stabilization=30.0)
    processor.joins.drains = {"old": {place(0), place(1)}}  # (a full-history join's drain)
    batch = idle_until_asked(scaler, processor, clock)
    for b in range(batch, batch + 25):
        run(scaler, clock, b, 0.1, 1.0)
    assert cluster.killed == []
    for b in range(batch + 25, batch + 32):
        run(scaler, clock, b, 0.1, 1.0)
    assert cluster.killed == ["1"]


def test_scale_in_waits_while_the_last_change_drains(clock: Clock) -> None:
    scaler, processor, cluster = grown(clock, stabilization=0.0)
    processor.joins.drains = {"scale-out's": {place(0)}}  # (the old index, on the first)
    processor.ending = ["scale-out's"]
    for b in range(5, 15):  # (idle, but a scale-in now would build the index again)
        run(scaler, clock, b, 0.1, 1.0)
    assert processor.units == [] and cluster.asked == [2]
    processor.joins.drains, processor.ending = {}, []
    for b in range(15, 17):
        run(scaler, clock, b, 0.1, 1.0)
    assert processor.units == []
    run(scaler, clock, 17, 0.1, 1.0)  # (three quiet batches since it drained: 14, 15, 16)
    assert processor.units == [1]


def test_an_executor_the_master_started_beyond_the_fewest_goes_unless_it_holds_the_index(
    clock: Clock,
) -> None:
    cluster = Cluster(registered=[1])  # (the master started two; the second registered first)
    scaler, processor = scaler_on(cluster)
    scaler.start()
    assert cluster.killed == [] and processor.units == [1]
    processor.joins.held = {place(1)}  # (the first batch built the index there)
    cluster.registered.insert(0, 0)  # (the first registers late)
    run(scaler, clock, 0, 0.1, 1.0)
    run(scaler, clock, 1, 0.1, 1.0)
    assert cluster.killed == ["0"] and cluster.registered == [1]


def test_without_the_operators_jar_the_executors_ids_are_the_places(clock: Clock) -> None:
    cluster = Cluster()
    scaler, processor = scaler_on(cluster, operator=False)

    def no_jar(spark: t.Any) -> list[str]:
        raise RuntimeError("py4j: streamjoin.operator.PlacedIndex is a package: no such class")

    processor.joins.executors = processor.levels.executors = no_jar  # type: ignore[method-assign]
    for batch in range(4):
        run(scaler, clock, batch, 1.0, 1.0)
    cluster.registered.append(1)
    run(scaler, clock, 4, 1.0, 1.0)
    assert processor.units == [2] and processor.joins.preferred == ["executor_0", "executor_1"]
    processor.units.clear()
    batch = idle_until_asked(scaler, processor, clock)
    assert processor.units == [1]
    run(scaler, clock, batch, 0.1, 1.0)
    assert cluster.killed == ["1"] and cluster.registered == [0]


def back_to_back(scaler: ExecutorScaler, clock: Clock, batches: range) -> None:
    for batch in batches:
        run(scaler, clock, batch, 1.0, 1.0)


def test_executors_asked_for_ahead_beyond_the_confirmed_step_hold_nothing_and_go(
    clock: Clock,
) -> None:
    cluster = Cluster()
    scaler, processor = scaler_on(cluster, most=3)
    back_to_back(scaler, clock, range(3))  # (after batch 0: ⌈1 · 1.0 / 0.6⌉ = 2 asked ahead)
    assert cluster.asked == [2]
    cluster.registered += [1, 2]  # (say a third registered too: the master's doing)
    back_to_back(scaler, clock, range(3, 4))  # (confirmed: 2)
    assert processor.units == [2] and processor.joins.preferred == [place(0), place(1)]
    processor.joins.held = {place(0), place(1)}
    run(scaler, clock, 4, 0.5, 1.0)
    assert cluster.killed == ["2"] and cluster.registered == [0, 1]


def test_an_idle_batch_while_the_last_change_drains_gives_back_what_was_asked_ahead(
    clock: Clock,
) -> None:
    cluster = Cluster(registered=[0, 1])  # (the one asked for ahead registers at once)
    scaler, processor = scaler_on(cluster, most=3)
    back_to_back(scaler, clock, range(4))  # (1 -> 2)
    assert processor.units == [2]
    processor.joins.held = {place(0), place(1)}
    processor.joins.drains = {"scale-out's": {place(0)}}
    processor.ending = ["scale-out's"]
    run(scaler, clock, 4, 1.0, 1.0)  # (batch 3 behind: a third asked for ahead)
    assert cluster.asked[-1] == 3
    cluster.registered.append(2)
    run(scaler, clock, 5, 0.1, 4.0)  # (batch 4 idle, the index still draining)
    assert cluster.killed == ["2"] and cluster.asked[-1] == 2 and processor.units[-1] == 2
