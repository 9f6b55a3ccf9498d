"""What one batch knows (`BatchContext`), what it leaves in Spark (`Scratch`), and what it did
(`BatchReport`)."""

from __future__ import annotations

import re
import typing as t
from dataclasses import dataclass, field

from streamjoin.runtime.session import BATCH_CONF

if t.TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from pyspark.sql import DataFrame, SparkSession

    from streamjoin.adapt.schemestate import UnitStats
    from streamjoin.plan import JobPlan
    from streamjoin.runtime.routing.router import QueryRouter
    from streamjoin.runtime.routing.unitcounts import InputUnitCounts
    from streamjoin.runtime.settings import Settings
    from streamjoin.runtime.state.footers import Footers
    from streamjoin.runtime.state.manifest import Manifest
    from streamjoin.runtime.state.nextmanifest import StreamStats
    from streamjoin.runtime.threads import Waitable


@dataclass
class Scratch:
    """The temp views and cached DataFrames a batch creates, all dropped when it ends."""

    spark: SparkSession
    views: list[str] = field(default_factory=list)
    """Temp views by name; the state's readers append theirs here too."""
    cached: list[DataFrame] = field(default_factory=list)
    running: list[Waitable] = field(default_factory=list)
    """Work started beside the joins that reads the views: waited for before they go."""

    def view(self, df: DataFrame, name: str) -> str:
        """`df` as the temp view `name`, dropped at the batch's end."""
        df.createOrReplaceTempView(name)
        self.views.append(name)
        return name

    def persist(self, df: DataFrame) -> DataFrame:
        """`df` persisted until the batch's end."""
        df = df.persist()
        self.cached.append(df)
        return df

    def release(self) -> None:
        """Wait for the batch's background work, then drop its views and cached DataFrames."""
        for running in self.running:
            running.wait()
        for view in self.views:
            self.spark.catalog.dropTempView(view)
        for df in self.cached:
            df.unpersist()
        self.views, self.cached, self.running = [], [], []


SHUFFLES = "spark.sql.shuffle.partitions"


class SessionConf:
    """The Spark settings the batches put on foreachBatch's session, each set again only when
    it changes: Spark hands over the same clone every batch (a new one after a restart), and
    each setting read or written is a call into the JVM."""

    def __init__(self) -> None:
        self._session: t.Any = None
        self._wrapper: SparkSession | None = None
        """PySpark's handle of the session last seen (a new one each batch)."""
        self._known: dict[str, str | None] = {}
        """The session's settings read or set through this object."""

    def _follow(self, spark: SparkSession) -> None:
        if spark is self._wrapper:
            return
        jsession = spark._jsparkSession
        if self._session is None or not self._session.equals(jsession):
            self._session, self._known = jsession, {}
        self._wrapper = spark

    def apply(self, spark: SparkSession, values: Mapping[str, str]) -> None:
        """Set `values` on `spark`, where it does not have them already."""
        self._follow(spark)
        changed = {k: v for k, v in values.items() if self._known.get(k) != v}
        if changed:
            conf = spark.conf
            for key, value in changed.items():
                conf.set(key, value)
            self._known |= changed

    def start(self, spark: SparkSession, shuffles: int | None = None) -> int:
        """Put a batch's settings (`BATCH_CONF`) on `spark`, and `shuffles` shuffle partitions
        if given; the session's shuffle partitions. (Those stay on foreachBatch's clone for the
        batches after; a restart's new clone takes Spark's from its checkpoint again.)"""
        self.apply(spark, BATCH_CONF)
        if shuffles is not None:
            self.apply(spark, {SHUFFLES: str(shuffles)})
        return int(self.get(spark, SHUFFLES) or "4")

    def get(self, spark: SparkSession, key: str) -> str | None:
        """Setting `key` of `spark`."""
        self._follow(spark)
        if key not in self._known:
            self._known[key] = spark.conf.get(key)
        return self._known[key]


@dataclass(frozen=True)
class BatchContext:
    """One batch's inputs: its session, plan, settings, the manifest it starts from, the files
    its sourced streams read (with their footers), and each two-way query's router."""

    spark: SparkSession
    """foreachBatch's clone of the session: the batch's temp views live there."""
    streaming: SparkSession
    """The session that started the stream (Spark's progress is kept there)."""
    plan: JobPlan
    settings: Settings
    batch_id: int
    prev: Manifest
    classified: Callable[[], DataFrame]
    """The batch's input sorted into ok, late and malformed (`intake.classify`), built at first
    call: a batch whose statistics its files' footers tell never reads it."""
    rows: DataFrame
    """The batch's unified input as foreachBatch handed it: rows Spark has planned."""
    files: Mapping[str, list[str]]
    """Per stream whose state is read back from its input files, the files the batch reads."""
    idle: frozenset[str]
    """Of those streams, the ones the batch is known to read no file of."""
    footers: Mapping[str, Footers]
    routers: Mapping[str, QueryRouter]
    """Each two-way query's router, as the previous batch left it."""
    counted: InputUnitCounts
    """The queries whose rows per unit the state job or the files' keys count."""
    parallelism: int
    """The session's shuffle partitions: the units of a join that names none."""
    scratch: Scratch
    checks_skew: bool = False
    """Whether the batch is one of the skew checks (`adapt.skewcheck`): its rows per unit are
    counted where no index counts them, and a range query's bounds are due."""
    final: bool = False
    """Whether the batch is the last of an input declared finished (``--final``): it has no
    rows, and its watermark passes every row (`nextmanifest.leaving_watermark`)."""

    @property
    def floors(self) -> dict[str, int]:
        """The batch's least event time per sourced stream, by its files' footers."""
        return {n: f.least for n, f in self.footers.items() if f.least is not None}

    @property
    def arrivals(self) -> dict[str, int]:
        """The batch's rows per sourced stream that its files' footers tell, none where it
        reads no file."""
        told = {n: f.total for n, f in self.footers.items()}
        return dict.fromkeys(self.idle, 0) | told

    @property
    def watermark(self) -> int | None:
        """The global watermark the batch started with: rows behind it are late."""
        return self.prev.global_wm


@dataclass(frozen=True)
class BatchReport:
    """What one batch did, for progress lines and summaries."""

    batch: int
    rows_in: int
    late: int
    malformed: int
    out: dict[str, int]
    state_rows: int
    watermark: int | None
    seconds: float
    manifest: Manifest = field(repr=False)
    phases: dict[str, float] = field(default_factory=dict)
    units: dict[str, UnitStats] = field(default_factory=dict)
    """Per query: rows each unit of its join received (routed queries, and forced hash)."""
    routing: dict[str, str] = field(default_factory=dict)
    """Per query: the scheme the batch ran under, and any change decided for the next batch."""
    shed: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per shedding query and direction (``left``, ``right``, or a multi-way query's aliases):
    new rows that did not probe, and (``left.pairs``, …) the pairs they would have found."""
    streams: dict[str, StreamStats] = field(default_factory=dict)
    """Per stream: the batch's rows (on time, late, malformed) and on-time event-time range."""
    parallelism: int = 0
    """The shuffle partitions (parallel tasks) the batch's joins ran with."""
    events: list[str] = field(default_factory=list)
    """What else changed in the batch, in words (an index built on a cluster's executors)."""


def view_tag(name: str, batch_id: int) -> str:
    """A part of a temp view's name from a query's (or buffer's) `name` and the batch: Spark
    takes a view name of one part, word characters only (a served query is named after its
    sink, which may be quoted)."""
    return re.sub(r"\W", "_", name) + f"_{batch_id}"
