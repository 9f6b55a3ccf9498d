"""The indexes of `indexed` on a cluster, whose executors are JVMs of their own: each index
partition lives in the memory of one executor, its owner, and every job that reads or changes
it runs its task there (``PlacedIndex.java``).

A build loads the committed units' rows into new partitions, each on the executor its task ran
on, and records the owners; a batch's probe then prefers each partition's owner (Spark's
process-local placement), drops its expired rows there, and probes and extends it. A probe
task that runs where its partition is not (its owner lost with a worker, or too busy for the
task to wait for it) fails; when Spark's retries of it fail too, the batch fails, and the
processor builds the indexes again from the units and runs the batch again (`lost`). Each
build has a name of its own, so a partition an earlier build left on an executor is never
taken for the new one's. When a query's placement changes, its build drains where it lies
(`drains`, `DrainsOnExecutors`) beside a new, empty one; an outer join's drain sends back the
batch's rows that met its rows, and they veto those rows' decisions in the new one
(``DrainVetoes.java``, kept in the driver's JVM: their rows carry their identities). The jar
reaches the executors through ``spark.jars`` (`runtime.jvm.jar.placed_index_conf`).
"""

from __future__ import annotations

import contextlib
import itertools
import typing as t

from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame

from streamjoin.runtime.jvm.statics import StaticMethods
from streamjoin.runtime.local import LOCAL_MASTER

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamjoin.runtime.batch.context import BatchContext

LOST = "streamjoin: no index for"
"""The start of the error of a probe task that found no partition of its index
(``JoinIndex.part``)."""

_builds = itertools.count()
_LEAST = -(2**63)


def unvetoed(decided: str, side: int, columns: t.Sequence[str]) -> str:
    """SQL of the rows of relation `decided` (`PlacedIndex.decide`'s, of a side whose rows have
    copies on several executors, each marked apart) that no copy's match vetoed, one pair each
    (equal rows share their identity: as many as the deciding copies found)."""
    own = ("_sj_l", "_sj_r")[side]
    kept = [c for c in columns if c != "_sj_id"]
    firsts = ", ".join(f"first({c}, true) AS {c}" for c in kept)
    return (
        f"SELECT inline(array_repeat(struct({', '.join(kept)}), _sj_n)) FROM ("
        f"SELECT {firsts}, CAST(count({own}) AS INT) AS _sj_n FROM {decided} "
        f"GROUP BY _sj_id HAVING count({own}) = count(*))"
    )


def on_cluster(spark: SparkSession) -> bool:
    """Whether `spark`'s executors are JVMs of their own (a cluster's, ``local-cluster`` too)."""
    master = spark.sparkContext.master or ""
    return LOCAL_MASTER.fullmatch(master.strip()) is None


class PlacedIndexes:
    """The indexes of one processor's queries on a cluster's executors, by query key."""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._places: dict[str, tuple[str, list[str], t.Any]] = {}
        """Query key → (the index's name, each partition's owner, those as a Java array)."""
        self._drained: dict[str, tuple[str, list[str], t.Any]] = {}
        """An index that drains (`drains`), by the name it drains under → its build's entry."""
        self._least: dict[str, tuple[int, int]] = {}
        """Per index that drains, the least event times its next probe keeps (left, right)."""
        self._beside: dict[str, tuple[str, int]] = {}
        """An outer join's index that drains, by its name → the query key of the new one beside
        it (whose rows carry their identities while it drains: `probe`), and the sides the join
        preserves (bit 0 left, bit 1 right: those whose rows its pairs veto there)."""
        self._stale: list[tuple[str, t.Any]] = []
        """Builds to forget on their executors (`drop_stale`): those that drained when a batch
        failed (their owners may be gone with it) wait for the next build, commit or close."""
        self.preferred: list[str] | None = None
        """The executors new builds prefer, as ``PlacedIndex.here`` names them, a partition
        each in turn (None: wherever their tasks run): set where executors come and go
        (`runtime.executors`)."""
        self._events: list[str] = []
        self._class: StaticMethods | None = None
        """The JVM's `PlacedIndex` class, looked up once."""

    def __contains__(self, key: str) -> bool:
        return key in self._places

    def __iter__(self) -> t.Iterator[str]:
        return iter(list(self._places))

    def build(
        self,
        spark: SparkSession,
        key: str,
        rows: DataFrame,
        parts: int,
        at: int,
        marker: t.Any,
        decided: t.Sequence[int],
        beside: str | None = None,
        memory: int = -1,
        preserved: int = 0,
    ) -> None:
        """New partitions of `key`'s index at batch `at`, holding `rows` (`JoinIndex`'s input
        layout), each on the executor its task ran on; an earlier build of `key` goes. An outer
        join's `marker` (its ON condition; else None) marks the rows that meet among them, and
        each side's rows below `decided` (left, right) count as decided. `beside`: the index
        that drains beside this one, which starts empty. `memory`: the bytes of rows an
        executor's partitions keep in memory together, beyond which they spill (-1: `auto`).
        `preserved`: an outer join's sides (bit 0 left, bit 1 right) that it keeps."""
        if key in self._places:
            self.drop(spark, key)
        self.drop_stale(spark)
        name = f"{self._prefix}/{key}/{next(_builds)}"
        load, places = self._jvm(spark).load, self.preferred
        prefer = (
            _strings(spark, [places[p % len(places)] for p in range(parts)]) if places else None
        )
        owners = list(load(rows._jdf, name, parts, at, prefer, marker, *decided, memory))
        self._places[key] = (name, owners, _strings(spark, owners))
        if beside is not None and marker is not None:
            self._beside[beside] = (key, preserved)
        held = sorted({o.rsplit("_", 1)[-1] for o in owners})
        query = key.split("#")[0]
        if beside is None:
            self._events.append(f"{query}: index built in {parts} partitions on executors {held}")
        else:
            self._events.append(
                f"{query}: index started empty in {parts} partitions on executors {held}, "
                f"the last one draining where it lies ({beside.rsplit('/', 1)[-1]})"
            )

    def probe(
        self,
        spark: SparkSession,
        key: str,
        delta: DataFrame,
        batch: int,
        least: t.Sequence[int],
        marker: t.Any = None,
        how: tuple[t.Any, str, int] = (None, "", 0),
        alone: tuple[t.Any, int, int] | None = None,
    ) -> DataFrame:
        """The candidate pairs of batch `batch`'s `delta` from `key`'s index (lazy), each
        partition probed on its owner after its rows below `least` (left, right) go; an outer
        join's `marker` marks the rows of the pairs that meet it. `how`: as the driver's probe
        takes them, the query's output made in the probe's tasks (None: the pairs), a shedding
        query's cuts (`indexfit.shed_cuts`) and the units to count the delta's rows in (the
        tasks send their counts back: `name`, ``JoinIndex.unitCounts``). `alone`: an outer
        join's rows without a partner decided by each partition's task after its probe (their
        plan, and the event time below which each side's are decided), where no row has a
        copy in another partition (`indexcluster`); None: `decide` after the probe."""
        name, owners, where = self._places[key]  # (the array made once: a JVM call per item)
        output, cuts, units = how
        parts, probe = len(owners), self._jvm(spark).probe
        identified = any(k == key for k, _ in self._beside.values())
        decided = (None, _LEAST, _LEAST) if alone is None else alone
        args = (output, marker, *decided, cuts, name, parts, batch, units, *least, where)
        args = (*args, identified)
        return DataFrame(probe(delta._jdf, *args), spark)

    def buckets(self, spark: SparkSession, key: str, step: int) -> str:
        """``JoinIndex.buckets`` of `key`'s partitions, each read on its owner (one job)."""
        name, _, where = self._places[key]
        return str(self._jvm(spark).buckets(spark._jsparkSession, name, step, where))

    def name(self, key: str) -> str:
        """The name of `key`'s index on the executors (its build's)."""
        return self._places[key][0]

    def decide(
        self, ctx: BatchContext, key: str, delta: DataFrame, side: int, below: int, batch: int
    ) -> DataFrame:
        """The rows of `side` below event time `below` in `key`'s partitions that no partner
        matched, decided by batch `batch`, as pairs of `delta`'s layout: decided now (call it
        once the batch's probe has marked them) by a task on each partition's owner, and kept
        for the batch. (A sink's write coalesces its input's partitions: a decision left to it
        would run wherever its task runs, mostly not on the owner.)"""
        return self._decide(ctx, self._places[key], delta, side, below, batch)

    def decide_drained(
        self, ctx: BatchContext, name: str, delta: DataFrame, side: int, below: int, batch: int
    ) -> DataFrame:
        """`decide` of the index `name` that drains (`delta`: placed as it placed its rows)."""
        return self._decide(ctx, self._drained[name], delta, side, below, batch)

    def _decide(
        self,
        ctx: BatchContext,
        build: tuple[str, list[str], t.Any],
        delta: DataFrame,
        side: int,
        below: int,
        batch: int,
    ) -> DataFrame:
        name, _, where = build
        jdf = self._jvm(ctx.spark).decide(delta._jdf, name, side, below, batch, where)
        rows = ctx.scratch.persist(DataFrame(jdf, ctx.spark))
        rows.count()
        if "_sj_id" not in rows.columns:
            return rows
        view = ctx.scratch.view(rows, f"_sj_decided_{len(ctx.scratch.views)}")
        return ctx.spark.sql(unvetoed(view, side, rows.columns))

    def drop(self, spark: SparkSession, key: str) -> None:
        """Forget `key`'s index on its executors."""
        name, _, where = self._places.pop(key)
        self._beside = {d: kp for d, kp in self._beside.items() if kp[0] != key}
        self._stale.append((name, where))
        self.drop_stale(spark)

    def detach(self, build: str, to: str) -> None:
        """Keep the partitions of `build` (a query's index) where they lie, as the index `to`
        that drains: the query has none of its own until built again."""
        key = next(k for k, entry in self._places.items() if entry[0] == build)
        self._drained[to] = self._places.pop(key)

    def drain(
        self,
        spark: SparkSession,
        rows: t.Any,
        output: t.Any,
        marker: t.Any,
        name: str,
        parts: int,
        batch: int,
    ) -> t.Any:
        """``PlacedIndex.drain`` of the index `name` that drains: the pairs of `rows` (a Java
        ``Dataset`` placed as the index placed its rows) with its rows, on their owners; an
        outer join's `marker` marks its rows they meet, and sends the batch's rows that meet
        them back to veto their decisions in the new index beside it."""
        build, _, where = self._drained[name]
        least = self._least.pop(name, (_LEAST, _LEAST))
        key, preserved = self._beside.get(name, ("", 0))
        into = self._places[key][0] if key in self._places else None  # (None: an inner join's)
        jvm = self._jvm(spark)
        args = (output, marker, build, parts, batch, *least, where, into, preserved)
        return jvm.drain(rows, *args)

    def expire_drained(self, name: str, left: int, right: int) -> None:
        """The least event times (left, right) the next probe of the index `name` that drains
        keeps: its rows below them go in its tasks first."""
        self._least[name] = (left, right)

    def drop_drained(self, spark: SparkSession, name: str) -> None:
        """Forget the index `name` that drained on its executors."""
        entry = self._drained.pop(name, None)
        self._least.pop(name, None)
        self._beside.pop(name, None)
        if entry is not None:
            self._stale.append((entry[0], entry[2]))
            query = name[len(self._prefix) + 1 :].split("#")[0]
            self._events.append(f"{query}: the index that drained went ({name.rsplit('/', 1)[-1]})")
        self.drop_stale(spark)

    def drop_stale(self, spark: SparkSession) -> None:
        """Forget the stale builds on their executors (an executor lost meanwhile took what it
        held with it)."""
        stale, self._stale = self._stale, []
        for build, where in stale:
            with contextlib.suppress(Py4JJavaError):
                self._jvm(spark).drop(spark._jsparkSession, build, where)

    def forget_drained(self) -> None:
        """A batch failed: no index drains any more (each goes with the next build)."""
        self._stale += [(build, where) for build, _, where in self._drained.values()]
        self._drained.clear()
        self._least.clear()
        self._beside.clear()

    def holders(self, drained: t.Collection[str] | None = None) -> set[str]:
        """The executors that hold partitions of a build or of an index that drains (with
        `drained`: of the indexes of those names that drain only)."""
        if drained is None:
            builds = [*self._places.values(), *self._drained.values()]
        else:
            builds = [b for name, b in self._drained.items() if name in drained]
        return {owner for _, owners, _ in builds for owner in owners}

    def executors(self, spark: SparkSession) -> list[str]:
        """The executors the driver knows now, as ``PlacedIndex.here`` names them."""
        return [str(x) for x in self._jvm(spark).executors(spark._jsparkSession)]

    def lost(self, err: BaseException) -> bool:
        """Whether batch error `err` is a probe that found no partition where it ran: the
        batch is to run again on indexes built again."""
        if not self._places or LOST not in str(err):
            return False
        self._events.append("index partitions lost with an executor: built again")
        return True

    def vetoes_pending(self, spark: SparkSession, key: str) -> bool:
        """Whether a drain's matches of `key`'s rows wait for their decisions (``DrainVetoes``):
        only `decide` applies them."""
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        return bool(jvm.streamjoin.operator.DrainVetoes.pending(self.name(key)))

    def take_events(self) -> list[str]:
        """What happened to the indexes since the last call, in words."""
        events, self._events = self._events, []
        return events

    def _jvm(self, spark: SparkSession) -> t.Any:
        if self._class is None:
            jvm = spark.sparkContext._jvm
            assert jvm is not None
            self._class = StaticMethods(jvm.streamjoin.operator.PlacedIndex)
        return self._class


def _strings(spark: SparkSession, items: t.Sequence[str]) -> t.Any:
    """A Java ``String[]`` of `items`."""
    gateway, jvm = spark.sparkContext._gateway, spark.sparkContext._jvm
    assert gateway is not None and jvm is not None
    out = gateway.new_array(jvm.java.lang.String, len(items))
    for i, item in enumerate(items):
        out[i] = item
    return out


class DrainsOnExecutors:
    """The calls `drains.Drains` makes of ``JoinIndex`` in the driver's JVM, for the indexes on
    a cluster's executors (`PlacedIndexes`): an index that drains keeps its build's partitions
    where they lie, under the name `Drains` gives it, and its expiry is applied by its next
    probe's tasks, on the owners. `ctx`: the batch's (None: only `drop` is called)."""

    def __init__(
        self, placed: PlacedIndexes, spark: SparkSession, ctx: BatchContext | None
    ) -> None:
        self._placed = placed
        self._spark = spark
        self._ctx = ctx

    def rename(self, build: str, to: str, parts: int) -> None:
        """Build `build` drains as `to` (`PlacedIndexes.detach`)."""
        self._placed.detach(build, to)

    def drop(self, name: str) -> None:
        """The index `name` drained (`PlacedIndexes.drop_drained`)."""
        self._placed.drop_drained(self._spark, name)

    def unshareMarks(self, name: str) -> None:  # (``JoinIndex``'s name)
        """Nothing: the new index's rows stop carrying identities as its drain goes (`drop`)."""

    def expire(self, name: str, parts: int, left: int, right: int) -> None:
        """Rows below (`left`, `right`) go at the next probe (`PlacedIndexes.expire_drained`)."""
        self._placed.expire_drained(name, left, right)

    def drain(
        self,
        rows: t.Any,
        output: t.Any,
        marker: t.Any,
        name: str,
        parts: int,
        batch: int,
        one_task: bool,
        into: str | None,
    ) -> t.Any:
        """The pairs of `rows` with index `name`'s (`PlacedIndexes.drain`; an outer join's
        `marker` vetoes the matched rows' decisions in the new index: `into` is found there)."""
        return self._placed.drain(self._spark, rows, output, marker, name, parts, batch)

    def decide(
        self, rows: t.Any, name: str, parts: int, side: int, below: int, batch: int
    ) -> t.Any:
        """The rows of side `side` below `below` of index `name` that drains, no partner
        matched (`PlacedIndexes.decide_drained`; `rows` placed as it placed its own)."""
        assert self._ctx is not None
        delta = DataFrame(rows, self._spark)
        return self._placed.decide_drained(self._ctx, name, delta, side, below, batch)._jdf
