"""Step 5 for a shared join: the sinks of its members written by one Spark job, not one each.

Each member's sink would be its own Spark job: with many queries a batch's sink jobs, not its
joins, take its time (about 0.1 s of driver and commit work each). Where every member has a
Parquet sink of its own and the join's rows are an RDD's, the tasks that make the rows write
every member's, each through its condition and SELECT, in the batch's one write job
(`MemberPlans`, ``JointWrite.java``). Otherwise the rows are kept for the batch, and members
whose sinks take the same format, options and columns, on the checkpoint's file system, are
written together: a shared join's rows have a query-set bit per member (`SharedGroup.bits`); they
are exploded to one per member whose bit is set, with the member's columns under its names,
written partitioned by member into ``<checkpoint>/staging/<group>``, and each member's part
files are then moved into its sink's batch directory (replacing what an earlier attempt left
there). A member without rows in the batch gets what Spark writes for no rows (a file with the
columns, for Parquet), copied from ``<checkpoint>/templates/``, written once per format, options
and columns. Members that differ fall back to a write each (`sinks.write_outputs`).
"""

from __future__ import annotations

import hashlib
import threading
import typing as t
from collections import Counter
from dataclasses import dataclass

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from streamjoin.plan.shared import BITS
from streamjoin.runtime.batch.indexplans import PLAN_ERRORS, planned_each_batch
from streamjoin.runtime.batch.sinks import (
    Direct,
    direct_rows,
    direct_sink,
    member_frame,
    sink_batch_path,
)
from streamjoin.runtime.threads import metrics

if t.TYPE_CHECKING:
    from streamjoin.model import SinkDef
    from streamjoin.plan.shared import SharedGroup, SharedMember
    from streamjoin.runtime.batch.context import BatchContext
    from streamjoin.runtime.batch.twoway import TwoWay
    from streamjoin.runtime.state.fs import FileStore

_TEMPLATES = threading.Lock()
MEMBER = "_sjm"
STAGING = "staging"
"""Under the checkpoint: where joint writes put their rows before moving them to the sinks."""
FILE_FORMATS = ("json", "parquet", "csv")
ROWS_PER_TASK = 1_000_000
"""Shared rows a task of a joint write takes: each task writes a file per member it meets,
so a small batch written by every core makes cores × members small files."""


@dataclass
class SharedWrite:
    """One Spark job writing several members' sinks, and how to finish it."""

    ctx: BatchContext
    fs: FileStore
    members: list[tuple[SharedMember, SinkDef]]
    shared: DataFrame
    """The shared join's rows (kept for the batch)."""
    frame: DataFrame
    observation: Observation
    staging: str
    template: str
    """Where the files Spark writes for no rows of these columns are kept."""
    targets: dict[str, str]
    """Each member's sink path, qualified."""
    wrote: bool = False

    def run(self) -> None:
        """Write the rows partitioned by member, then move each member's into its sink."""
        sink = self.members[0][1]
        options = {k: v for k, v in sink.options if k != "path"}
        if sink.format == "csv":
            options.setdefault("header", "true")
        fs = self.fs
        kept = self.shared.count()
        written: set[str] = set()
        if kept:  # (no rows: every member's files come from the template)
            tasks = max(1, min(self.ctx.parallelism, -(-kept // ROWS_PER_TASK)))
            self.frame.coalesce(tasks).write.partitionBy(MEMBER).mode("overwrite").format(
                sink.format
            ).options(**options).save(self.staging)
            written = set(fs.list_names(self.staging))
            self.wrote = True
        for m, s in self.members:
            # (The sink's path qualified, "file:/…" on a local disk: the moves stay in Python.)
            target = sink_batch_path(s, self.ctx.batch_id).replace(
                t.cast("str", s.option("path")).rstrip("/"), self.targets[m.name], 1
            )
            fs.delete(target)
            part = f"{MEMBER}={m.bit}"
            if part in written:
                fs.move(f"{self.staging}/{part}", target)
                continue
            with _TEMPLATES:  # (writes of several groups may want the same template)
                if not fs.exists(f"{self.template}/_SUCCESS"):
                    columns = self.frame.drop(MEMBER)
                    empty = self.ctx.spark.createDataFrame([], columns.schema).coalesce(1)
                    empty.write.mode("overwrite").format(sink.format).options(**options).save(
                        self.template
                    )
            fs.copy_data_files(self.template, target)

    def rows(self) -> dict[str, int]:
        """Rows written per member (after `run`)."""
        got = metrics(self.observation) if self.wrote else {}
        return {m.name: int(got.get(f"m{m.bit}", 0)) for m, _ in self.members}

    def run_counted(self) -> dict[str, int]:
        """`run`, then `rows`."""
        self.run()
        return self.rows()


class MemberPlans:
    """Each shared join member's condition and SELECT over its join's rows as a ``BatchInput``
    (`sinks.Direct`), planned once per member and layout of the rows."""

    def __init__(self) -> None:
        self._plans: dict[str, t.Any] = {}
        """Group, member, its digest and the rows' layout → its plan (None: none can be)."""
        self._used: dict[str, t.Any] = {}
        """Those of the batch (a served job's members come and go: the others are dropped)."""

    def end_batch(self) -> None:
        """The batch's members are known: the plans of no member of it go."""
        self._plans, self._used = self._used, {}

    def direct(
        self, ctx: BatchContext, group: SharedGroup[t.Any], rows: DataFrame, writers: Counter[str]
    ) -> list[Direct] | None:
        """The rows of `group`'s members for the tasks that make `rows` to write themselves,
        or None where they cannot, all of them: a member whose sink is not a Parquet sink of
        its own (`writers`: the queries writing each sink), or whose plan cannot be made once,
        or rows the tasks cannot write (`sinks.direct_rows`). (All or none: a member written
        apart would read the rows again.)"""
        job = ctx.plan.job
        sinks = [job.sink(job.outputs[m.name]) for m in group.members]
        if any(writers[s.name] > 1 or not direct_sink(s, rows) for s in sinks):
            return None
        if not direct_rows(rows):
            return None
        layout = rows._jdf.schema().json()
        out = []
        view = None  # (one relation of the rows' layout for every member planned this batch)
        for m in group.members:
            digest = hashlib.sha256(repr(m).encode()).hexdigest()[:12]
            key = f"{group.name}/{m.name}#{digest}@{layout}"
            if key not in self._used and key in self._plans:
                self._used[key] = self._plans[key]
            elif key not in self._used:
                view = view or _placeholder(ctx, rows)
                self._used[key] = _member_plan(ctx, m, view)
            if self._used[key] is None:
                return None
            out.append(Direct(m.name, rows, self._used[key], m))
        return out


def _placeholder(ctx: BatchContext, rows: DataFrame) -> str:
    """A view of no rows in `rows`'s layout (``BatchInput.placeholder``): what the members'
    plans are made over."""
    jvm = ctx.spark.sparkContext._jvm
    assert jvm is not None
    none = DataFrame(jvm.streamjoin.operator.BatchInput.placeholder(rows._jdf), ctx.spark)
    return ctx.scratch.view(none, f"_sj_member_{len(ctx.scratch.views)}")


def _member_plan(ctx: BatchContext, m: SharedMember, view: str) -> t.Any:
    """Member `m`'s condition and SELECT over the rows of placeholder `view`
    (``BatchInput.output``), or None where they cannot be planned once (the current time, a
    Python function)."""
    jvm = ctx.spark.sparkContext._jvm
    assert jvm is not None
    columns = ", ".join(f"{c} AS `{a}`" for c, a in m.columns)
    where = "" if m.predicate is None else f" WHERE {m.predicate}"
    try:
        planned = ctx.spark.sql(f"SELECT {columns} FROM {view}{where}")._jdf
        return jvm.streamjoin.operator.BatchInput.output(planned)
    except PLAN_ERRORS as err:  # (Spark's writer writes the member)
        planned_each_batch(f"query {m.name}: its rows of the shared join", err)
        return None


def shared_outputs(
    ctx: BatchContext, two: TwoWay, staging_root: str, fs: FileStore, plans: MemberPlans
) -> tuple[list[SharedWrite], list[Direct], dict[str, DataFrame]]:
    """How the shared joins' members (`two.shared`) are written: by the tasks that make their
    join's rows (`MemberPlans.direct`), else, the rows kept for the batch (made once for every
    member), together through Spark's writer (`shared_writes`, staged under `staging_root` on
    `fs`), else each alone; returned with the frames of those written alone and of the queries
    of `two` that share nothing."""
    direct: list[Direct] = []
    rest = []
    writers = Counter(ctx.plan.job.outputs.values())  # (a group query's rows go to its sink too)
    for group, rows in two.shared:
        made = plans.direct(ctx, group, rows, writers)
        direct += made or []
        if made is None:
            rest.append((group, ctx.scratch.persist(rows)))
    plans.end_batch()
    joint = shared_writes(ctx, rest, staging_root, fs)
    jointly = {m.name for w in joint for m, _ in w.members}
    alone = {
        m.name: member_frame(rows, m)
        for group, rows in rest
        for m in group.members
        if m.name not in jointly
    }
    return joint, direct, two.frames | alone


def shared_writes(
    ctx: BatchContext,
    groups: t.Sequence[tuple[SharedGroup[t.Any], DataFrame]],
    staging_root: str,
    fs: FileStore,
) -> list[SharedWrite]:
    """The joint writes of the shared joins' members that can be written together, staged
    under `staging_root` (on the checkpoint's file system `fs`)."""
    writes: list[SharedWrite] = []
    if not groups:  # (most batches: no shared join, nothing to look up)
        return writes
    job = ctx.plan.job
    sink_of = {q.name: q.sink for q in job.queries}
    writers: dict[str, int] = {}
    for target in job.outputs.values():  # (a group query's rows go to its sink too)
        writers[target] = writers.get(target, 0) + 1
    templates = staging_root.rsplit("/", 1)[0] + "/templates"
    for group, rows in groups:
        sets: dict[tuple[t.Any, ...], list[tuple[SharedMember, SinkDef]]] = {}
        types = dict(rows.dtypes)
        for m in group.members:
            sink = job.sink(sink_of[m.name])
            path = sink.option("path")
            if sink.format not in FILE_FORMATS or not path or writers[sink.name] > 1:
                continue
            if not fs.same_system(path, staging_root):
                continue
            shape = tuple((alias, types[column]) for column, alias in m.columns)
            key = (sink.format, tuple(o for o in sink.options if o[0] != "path"), shape)
            sets.setdefault(key, []).append((m, sink))
        for n, (key, members) in enumerate((k, s) for k, s in sets.items() if len(s) > 1):
            digest = hashlib.sha256(repr(key).encode()).hexdigest()[:16]
            paths = (f"{staging_root}/{group.name}-{n}", f"{templates}/{digest}")
            writes.append(_write(ctx, fs, group, rows, members, paths))
    return writes


def _write(
    ctx: BatchContext,
    fs: FileStore,
    group: SharedGroup[t.Any],
    rows: DataFrame,
    members: list[tuple[SharedMember, SinkDef]],
    paths: tuple[str, str],
) -> SharedWrite:
    bits = ", ".join(str(m.bit) for m, _ in members)
    picked = F.expr(f"explode(filter(array({bits}), i -> ({BITS} & shiftleft(1L, i)) <> 0))")
    exploded = rows.withColumn(BITS, F.expr(group.bits)).select(picked.alias(MEMBER), "*")
    columns = []
    for position, (_, alias) in enumerate(members[0][0].columns):
        sources = {m.columns[position][0] for m, _ in members}
        if len(sources) == 1:  # (the members select the same expression here)
            columns.append(F.col(sources.pop()).alias(alias))
            continue
        cases = " ".join(f"WHEN {m.bit} THEN {m.columns[position][0]}" for m, _ in members)
        columns.append(F.expr(f"CASE {MEMBER} {cases} END").alias(alias))
    frame = exploded.select(F.col(MEMBER), *columns)
    staging, template = paths
    obs = Observation(f"sj_shared_{staging.rsplit('/', 1)[1]}_{ctx.batch_id}")
    counts = [F.expr(f"count_if({MEMBER} = {m.bit})").alias(f"m{m.bit}") for m, _ in members]
    frame = frame.observe(obs, *counts)
    targets = {m.name: fs.qualify(t.cast("str", s.option("path"))).rstrip("/") for m, s in members}
    return SharedWrite(ctx, fs, members, rows, frame, obs, staging, template, targets)
