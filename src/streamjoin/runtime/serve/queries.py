"""The query set of a served job: what each batch runs, and the changes waiting for the next one.

A served job (`streamjoin serve`, `Engine.start`) runs the queries of its job file and those
added since, less those dropped. A change is checked when it is asked for, written under
``<checkpoint>/control/`` (so that a crash before it applies does not lose it) and applied at the
start of the next batch. The batch's manifest records the query set it ran (`QuerySet`), and the
change's file goes once that manifest is committed. A replayed batch runs the set its manifest
recorded; a restart continues from the newest manifest's set and the changes still in the
control directory. Each change has a sequence number and the manifest records the last one
applied, so no change applies twice.

The change files are also a stream of the served job's input (`ticks`: rows of no stream), so
that Spark's loop, which runs a batch only for new input, runs one for a change while the
streams are idle: a change applies within a trigger or two either way.
"""

from __future__ import annotations

import json
import threading
import typing as t
from dataclasses import dataclass, replace

from streamjoin.errors import StreamJoinError
from streamjoin.optimizer.sharing import REPLAN_CHURN, group_all, place, remove
from streamjoin.plan import plan_job
from streamjoin.plan.physical import candidates_of
from streamjoin.sql import parse_query_file

if t.TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame, SparkSession

    from streamjoin.model import Job, Query
    from streamjoin.optimizer.sharing import Candidate
    from streamjoin.plan import JobPlan
    from streamjoin.runtime.state.checkpoint import Checkpoint
    from streamjoin.runtime.state.manifest import Manifest

Kind = t.Literal["add", "drop"]
CONTROL = "control"
"""The checkpoint's directory of changes not yet applied."""


@dataclass(frozen=True)
class Change:
    """One asked-for change: add the query in `text` (named `name`), or drop query `name`."""

    seq: int
    kind: Kind
    name: str
    text: str = ""

    def to_json(self) -> str:
        """The change as the text of its control file."""
        raw = {"seq": self.seq, "kind": self.kind, "name": self.name, "text": self.text}
        return json.dumps(raw)

    @staticmethod
    def from_json(text: str) -> Change:
        """Inverse of `to_json`."""
        raw = json.loads(text)
        return Change(int(raw["seq"]), raw["kind"], str(raw["name"]), str(raw.get("text", "")))


@dataclass(frozen=True)
class QuerySet:
    """The queries a batch runs, relative to the job file: the ones added (name and text, in the
    order added), the job file's queries dropped, the batch each added query started in, and the
    sequence number of the last change applied."""

    seq: int = 0
    added: tuple[tuple[str, str], ...] = ()
    dropped: tuple[str, ...] = ()
    since: tuple[tuple[str, int], ...] = ()
    groups: tuple[tuple[str, ...], ...] | None = None
    """The queries that share a join (`optimizer.sharing`); None: not grouped yet."""
    churn: int = 0
    """Changes since the groups were last made afresh."""

    def apply(self, change: Change, batch: int) -> QuerySet:
        """This set after `change`, applied at the start of batch `batch`."""
        if change.kind == "add":
            return replace(
                self,
                seq=change.seq,
                added=(*self.added, (change.name, change.text)),
                since=(*self.since, (change.name, batch)),
            )
        if any(name == change.name for name, _ in self.added):
            return replace(
                self,
                seq=change.seq,
                added=tuple(a for a in self.added if a[0] != change.name),
                since=tuple(s for s in self.since if s[0] != change.name),
            )
        return replace(self, seq=change.seq, dropped=(*self.dropped, change.name))

    def job(self, base: Job) -> Job:
        """The job file's `base` job with this set's changes."""
        job = base
        for name in self.dropped:
            job = job.without_query(name)
        for name, text in self.added:
            sink, query = parse_query_file(text, job, f"<query {name}>")
            job = job.with_query(query, sink)
        return job

    def to_dict(self) -> dict[str, t.Any]:
        """The set as the manifest keeps it."""
        return {
            "seq": self.seq,
            "added": [list(a) for a in self.added],
            "dropped": list(self.dropped),
            "since": dict(self.since),
            "groups": None if self.groups is None else [list(g) for g in self.groups],
            "churn": self.churn,
        }

    @staticmethod
    def of(raw: dict[str, t.Any]) -> QuerySet:
        """Inverse of `to_dict` (an empty dict: the job file's queries)."""
        groups = raw.get("groups")
        return QuerySet(
            seq=int(raw.get("seq", 0)),
            added=tuple((str(n), str(s)) for n, s in raw.get("added", [])),
            dropped=tuple(str(n) for n in raw.get("dropped", [])),
            since=tuple((str(n), int(b)) for n, b in raw.get("since", {}).items()),
            groups=None if groups is None else tuple(tuple(map(str, g)) for g in groups),
            churn=int(raw.get("churn", 0)),
        )


class ServedQueries:
    """The query set of a served job and the changes asked for since the last batch (safe to
    call from any thread).

    Args:
        base: the job file's job.
        checkpoint: the job's checkpoint (its newest manifest's set, its control directory).
        check: raises `JobError` when a job's new query cannot run (Spark's analysis); called
            with the job, the query and the name of its text before a change is accepted.
        history_us: how far behind the watermark every stream's state keeps rows at least,
            for the queries added later (None: all of them; `plan.plan_job`).
        share: whether queries may share a join (`optimizer.sharing`; the setting
            ``streamjoin.share``).
    """

    def __init__(
        self,
        base: Job,
        checkpoint: Checkpoint,
        check: Callable[[Job, Query, str], None],
        history_us: int | None = 0,
        *,
        share: bool = True,
    ) -> None:
        self.base = base
        self.history_us = history_us
        self.share = share
        self.checkpoint = checkpoint
        self.check = check
        self._lock = threading.Lock()
        self.current = QuerySet.of(checkpoint.latest().served)
        """The set the newest committed batch ran."""
        self._jobs: dict[tuple[t.Any, ...], Job] = {}
        changes = self._load()
        self._pending = [c for c in changes if c.seq > self.current.seq]
        for change in changes:
            if change.seq <= self.current.seq:  # (applied by a run that stopped before this)
                checkpoint.fs.delete(self._file(change))

    def _dir(self) -> str:
        return self.checkpoint.path(CONTROL)

    def ticks(self, spark: SparkSession, streams: int) -> DataFrame | None:
        """The change files as a stream of rows of no stream (``_sj_src`` -1), for the served
        job's input beside its `streams` streams; None where Spark's checkpoint recorded
        batches of the streams alone (a served job started before changes were a stream:
        Spark would refuse the added source, so its changes wait for input as they did)."""
        from pyspark.sql import functions as F

        offsets = self.checkpoint.path("spark/offsets")
        fs = self.checkpoint.fs
        logged = [int(n) for n in fs.list_names(offsets) if n.isdigit()]
        if logged:
            # (An offset file: a version line, the batch's metadata, then a line per source.)
            lines = fs.read_text(f"{offsets}/{max(logged)}").strip().splitlines()
            if len(lines) - 2 <= streams:
                return None
        fs.mkdirs(self._dir())
        files = (
            spark.readStream.format("text")
            .option("pathGlobFilter", "*.json")
            .option("ignoreMissingFiles", "true")  # (a file goes once its change applied)
            .load(self._dir())
        )
        return files.select(F.lit(-1).alias("_sj_src"))

    def _file(self, change: Change) -> str:
        return f"{self._dir()}/{change.seq:012d}.json"

    def _load(self) -> list[Change]:
        fs = self.checkpoint.fs
        names = sorted(n for n in fs.list_names(self._dir()) if n.endswith(".json"))
        return [Change.from_json(fs.read_text(f"{self._dir()}/{n}")) for n in names]

    def job_of(self, queries: QuerySet) -> Job:
        """The job that runs `queries` (the same object for the same queries)."""
        key = (queries.added, queries.dropped)
        job = self._jobs.get(key)
        if job is None:
            job = queries.job(self.base)
            # (A few sets are asked for again: the last batch's, the planned one.)
            self._jobs = dict(list(self._jobs.items())[-7:]) | {key: job}
        return job

    def plan(self, job: Job, groups: t.Sequence[t.Sequence[str]] | None = None) -> JobPlan:
        """The plan of a served `job`: every stream read, each keeping the history, and the
        queries in `groups` sharing a join each (None: grouped afresh)."""

        def planned(groups: t.Sequence[t.Sequence[str]]) -> JobPlan:
            return plan_job(job, every_stream=True, history_us=self.history_us, groups=groups)

        if groups is None:
            return planned(group_all(self._candidates(planned(()))))
        # (Groups a checkpoint kept from a run with other settings: none where sharing is off.)
        return planned(groups if self.share else ())

    def _candidates(self, plan: JobPlan) -> list[Candidate]:
        return candidates_of(plan) if self.share else []

    def _regroup(self, before: QuerySet, after: QuerySet, prev: Manifest) -> QuerySet:
        """`after` (`before` with some changes) with its groups: `before`'s, each added query
        placed and each dropped one taken out, or all made afresh past AJoin's churn."""
        if after == before and after.groups is not None:
            return after
        plan = self.plan(self.job_of(after), groups=())
        candidates = self._candidates(plan)
        rates = _rates(plan, prev)
        churn = after.seq - before.seq + before.churn
        if before.groups is None or churn > REPLAN_CHURN * max(1, len(plan.job.queries)):
            groups = group_all(candidates, rates)
            return replace(after, groups=tuple(map(tuple, groups)), churn=0)
        # A query added, or dropped and added again with other text, is placed afresh.
        was = {q.name: q for q in self.job_of(before).queries}
        fresh = {q.name for q in plan.job.queries if was.get(q.name) != q}
        names = {c.name for c in candidates}
        kept: list[list[str]] = [list(g) for g in before.groups]
        for group in before.groups:
            for name in group:
                if name not in names or name in fresh:
                    kept = remove(kept, name)
        for c in candidates:
            if c.name in fresh:
                kept = place(kept, c, candidates, rates)
        return replace(after, groups=tuple(map(tuple, kept)), churn=churn)

    def _planned(self) -> QuerySet:
        planned = self.current
        for change in self._pending:
            planned = planned.apply(change, -1)
        return planned

    def planned_job(self) -> Job:
        """The job as the pending changes will leave it."""
        with self._lock:
            return self.job_of(self._planned())

    def add(self, text: str, source: str = "<query>") -> tuple[Change, Job]:
        """Check the query file `text` against the job as the pending changes leave it, and
        queue it for the next batch; the change, and the job it leads to.

        Raises:
            JobError: the query is wrong or cannot run; nothing changes.
        """
        with self._lock:
            job = self.job_of(self._planned())
            sink, query = parse_query_file(text, job, source)
            running = {q.name: q for q in job.queries}
            if query.name in running:
                msg = f"a query called {query.name!r} is running already; drop it first"
                raise StreamJoinError(msg)
            users = [q.name for q in job.queries if q.sink == query.sink]
            if users:
                msg = f"sink {query.sink!r} receives the results of query {users[0]} already"
                raise StreamJoinError(msg)
            changed = job.with_query(query, sink)
            self.plan(changed)  # (fails naming the query if it cannot be planned)
            if (by := _closed_by_column(changed, query)) is not None:
                msg = (
                    f"query {query.name}: its groups per row, complete when the watermark "
                    f"passes {by}, cannot join a running job (the rows read before it would "
                    "have groups missing the pairs made before): put it in the job file"
                )
                raise StreamJoinError(msg)
            self.check(changed, query, source)
            return self._queue("add", query.name, text), changed

    def drop(self, name: str) -> Change:
        """Queue dropping query `name` (or the query of sink `name`) for the next batch.

        Raises:
            StreamJoinError: no such query runs or is about to.
        """
        with self._lock:
            job = self.job_of(self._planned())
            query = next((q for q in job.queries if name in (q.name, q.sink)), None)
            if query is None:
                known = ", ".join(q.name for q in job.queries) or "none"
                msg = f"no query called {name!r} (queries: {known})"
                raise StreamJoinError(msg)
            return self._queue("drop", query.name)

    def _queue(self, kind: Kind, name: str, text: str = "") -> Change:
        seq = max([self.current.seq, *(c.seq for c in self._pending)]) + 1
        change = Change(seq, kind, name, text)
        self.checkpoint.fs.write_text_atomic(self._file(change), change.to_json())
        self._pending.append(change)
        return change

    def for_batch(self, batch_id: int, prev: Manifest) -> tuple[Job, QuerySet]:
        """The job batch `batch_id` runs (after `prev`) and its query set: the set its manifest
        recorded if it was committed before (a replay), else `prev`'s with the pending changes."""
        replayed = self.checkpoint.committed(batch_id)
        if replayed is not None:
            queries = QuerySet.of(replayed.served)
        else:
            before = queries = QuerySet.of(prev.served)
            with self._lock:
                for change in self._pending:
                    if change.seq > queries.seq:
                        queries = queries.apply(change, batch_id)
            queries = self._regroup(before, queries, prev)
        return self.job_of(queries), queries

    def committed(self, queries: QuerySet) -> None:
        """A batch that ran `queries` is committed: its changes are done."""
        with self._lock:
            self.current = queries
            done = [c for c in self._pending if c.seq <= queries.seq]
            self._pending = [c for c in self._pending if c.seq > queries.seq]
        for change in done:
            self.checkpoint.fs.delete(self._file(change))

    def pending(self) -> list[Change]:
        """The changes asked for that no committed batch has applied yet."""
        with self._lock:
            return list(self._pending)


def _closed_by_column(job: Job, query: Query) -> str | None:
    """The column that closes `query`'s groups per row of a keyed input, where it is not an
    event time (`sql.rowgroups`); None for any other query."""
    if query.windowed is None:
        return None
    window = query.windowed.window
    side = next(s for s in query.sides if s.alias.lower() == window.source[0])
    return None if window.by_event_time(job.stream(side.stream)) else window.time


def _rates(plan: JobPlan, last: Manifest) -> dict[str, float]:
    """Each stream's rows per second of event time, as its state holds them after `last`."""
    rows = last.state_rows()
    return {
        sp.name: rows[sp.name] / (sp.retain_us / 1e6)
        for sp in plan.streams
        if sp.name in rows and sp.retain_us
    }
