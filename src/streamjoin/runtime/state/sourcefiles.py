"""State read back from a file stream's own input files instead of a copy in the checkpoint.

A file stream's input already sits in files that Spark lists once and reads in one batch, and
Spark's file source asks that a file does not change once it is there. A state unit (the rows
one batch added to a stream) can then be those files and the batch's watermark: read back, the
files give the same rows, and the status test of `runtime.batch.intake` with that watermark
keeps the same ok rows. The batch skips writing them (on the full equi backlog that write was a
seventh of the run's CPU: docs/dev-log.md).

The price is that the files must stay until the state no longer needs them. A stream is
*sourced* when it is read by the engine from a ``json``, ``csv`` or ``parquet`` path without
wildcards, and has an event time and a watermark. When every query
over it has a window both ways, a unit is dropped once the watermark passes its rows' window;
when its state is unbounded (full history), each unit is copied into the checkpoint after its
batch, off the batch's path, and the files are needed only until the copy lands
(`runtime.state.copybehind`). Spark's ``cleanSource`` (which moves or deletes files after
their batch), the stream option ``state = 'copy'`` and the Spark conf
``streamjoin.state.fromSource = false`` keep the copy in the batch. A unit's files are checked
before each read: a file that is gone or changed stops the batch with an error naming it, never
a silently smaller state.

Which files a batch read is what Spark's own checkpoint says (`SourceLog`), read before the
batch's state job: a stream whose files the logs do not tell is copied for that batch.
"""

from __future__ import annotations

import itertools
import json
import typing as t
from urllib.parse import unquote

from streamjoin.errors import StreamJoinError
from streamjoin.runtime.batch.intake import status_sql
from streamjoin.runtime.sources import (
    FILE_FORMATS,
    column_exprs,
    file_reader,
    prefixed,
    raw_sql,
    reader_options,
)

if t.TYPE_CHECKING:
    from collections.abc import Collection

    from pyspark.sql import DataFrame, SparkSession

    from streamjoin.plan import JobPlan, StreamPlan
    from streamjoin.runtime.state.fs import FileStore
    from streamjoin.runtime.state.manifest import StateUnit

STATE_OPTION = "state"
"""Stream option: ``auto`` (the default: read back from the source's files where it can) or
``copy``."""
_STATE_CHOICES = ("auto", "copy")
_processors = itertools.count()


def sourced_streams(
    plan: JobPlan, read: Collection[str], from_source: bool = True
) -> list[StreamPlan]:
    """The streams of `plan` whose state units are their input files (see the module's text);
    `read` names the streams the engine reads itself; `from_source` false (the setting
    ``streamjoin.state.fromSource``) keeps a copy of every stream's state."""
    for sp in plan.streams:
        choice = (sp.stream.option(STATE_OPTION) or "auto").lower()
        if choice not in _STATE_CHOICES:
            msg = (
                f"stream {sp.name!r}: option {STATE_OPTION} must be one of "
                f"{', '.join(map(repr, _STATE_CHOICES))}, got {choice!r}"
            )
            raise StreamJoinError(msg)
    if not from_source or set(read) != {sp.name for sp in plan.streams}:
        # (A stream given as a DataFrame may be any number of Spark sources: the source
        # indexes of the others would not be known.)
        return []
    return [sp for sp in plan.streams if _file_backed(sp)]


def _file_backed(sp: StreamPlan) -> bool:
    s = sp.stream
    path = s.option("path") or ""
    return (
        s.format in FILE_FORMATS
        and (s.option(STATE_OPTION) or "auto").lower() == "auto"
        and (s.option("cleansource") or "off").lower() == "off"
        and not any(c in path for c in "*?[{")
        and s.watermark is not None
        and s.event_time is not None
    )


class BatchFiles(t.Protocol):
    """Which files each batch read: Spark's logs (`SourceLog`), or the engine's own loop's
    (`runtime.loop.BatchLog`)."""

    def files(self, batch: int) -> dict[str, list[str]]:
        """Per sourced stream, the files it read in `batch` (a stream not told: copied)."""
        ...

    def idle(self, batch: int) -> frozenset[str]:
        """The sourced streams `batch` is known to read no file of."""
        ...


class SourceLog:
    """The files each sourced stream's file source read in a batch, from Spark's checkpoint:
    ``offsets/<batch>`` holds each source's log offset after the batch (one line per source, in
    the order of the engine's streams), ``sources/<i>/<offset>`` (or a ``.compact`` file that
    took it in) the files of that offset. Those logs are how Spark itself replays a batch."""

    def __init__(self, fs: FileStore, checkpoint: str, streams: Collection[StreamPlan]) -> None:
        self.fs = fs
        self.root = checkpoint.rstrip("/")
        self.streams = {
            sp.name: (sp.index, fs.qualify(sp.stream.option("path") or "")) for sp in streams
        }
        """Each sourced stream's source index and qualified path."""
        self._offsets: dict[int, list[int | None] | None] = {}

    def idle(self, batch: int) -> frozenset[str]:
        """None known: a stream left out of `files` read no file, or its logs do not tell."""
        return frozenset()

    def files(self, batch: int) -> dict[str, list[str]]:
        """Per sourced stream, the files it read in `batch` (Hadoop paths, each under the
        stream's path). A stream is left out when no file was read or the logs do not tell
        which: its rows are then copied."""
        end, start = self._offsets_of(batch), self._offsets_of(batch - 1)
        found: dict[str, list[str]] = {}
        for name, (i, path) in self.streams.items():
            hi = _at(end, i)
            lo = _at(start, i) if batch else -1
            if hi is None or lo is None:
                continue
            files: list[str] = []
            for offset in range(lo + 1, hi + 1):
                logged = self._logged(i, offset)
                if logged is None:
                    files = []
                    break
                files += logged
            under = path.rstrip("/") + "/"
            if files and all(bare_path(f).startswith(bare_path(under)) for f in files):
                found[name] = sorted(files)
        self._offsets = {b: o for b, o in self._offsets.items() if b >= batch - 1}
        return found

    def _offsets_of(self, batch: int) -> list[int | None] | None:
        if batch not in self._offsets:
            self._offsets[batch] = self._read_offsets(batch)
        return self._offsets[batch]

    def _read_offsets(self, batch: int) -> list[int | None] | None:
        path = f"{self.root}/offsets/{batch}"
        if batch < 0 or not self.fs.exists(path):
            return None
        out: list[int | None] = []
        for line in self.fs.read_text(path).splitlines()[2:]:  # (a version, the batch's conf)
            try:
                offset = json.loads(line).get("logOffset") if line.startswith("{") else None
            except ValueError:
                offset = None
            out.append(offset if isinstance(offset, int) else None)
        return out

    def _logged(self, index: int, offset: int) -> list[str] | None:
        """The files of log offset `offset` of source `index`, or None if not found."""
        d = f"{self.root}/sources/{index}"
        name = str(offset)
        if not self.fs.exists(f"{d}/{name}"):
            # Every tenth entry is a compaction of all before it; older single ones go later.
            names = self.fs.list_names(d)
            stems = [n.removesuffix(".compact") for n in names if n.endswith(".compact")]
            later = sorted(b for b in map(int, filter(str.isdigit, stems)) if b >= offset)
            if not later:
                return None
            name = f"{later[0]}.compact"
        files = []
        # A compaction lists every entry since the start in batch order: read from its end,
        # so a batch costs its own entries, not the run's.
        for line in reversed(self.fs.read_text(f"{d}/{name}").splitlines()[1:]):
            entry = json.loads(line)
            at = entry.get("batchId")
            if isinstance(at, int) and at < offset:
                break
            if at == offset and isinstance(entry.get("path"), str):
                files.append(unquote(entry["path"]))
        return files[::-1]


def _at(offsets: list[int | None] | None, index: int) -> int | None:
    """Source `index`'s offset in `offsets` (None: not known)."""
    return offsets[index] if offsets is not None and index < len(offsets) else None


def bare_path(path: str) -> str:
    """`path` without its scheme's slashes (``file:///a`` and ``file:/a`` alike)."""
    scheme, _, rest = path.partition(":")
    return f"{scheme}:/{rest.lstrip('/')}" if "/" not in scheme else path


def check_files(fs: FileStore, sp: StreamPlan, unit: StateUnit) -> None:
    """Raise if any file of `unit` is gone or changed since its batch read it."""
    for path, size in zip(unit.files, unit.sizes, strict=True):
        now = fs.file_size(path)
        if now != size:
            what = "is gone" if now is None else f"changed ({now} bytes, {size} when read)"
            msg = (
                f"stream {sp.name!r}: its state from batch {unit.batch} is read back from the "
                f"input file {path}, which {what}. A file stream's input files must stay as they "
                "are while its state reads them back (with a window, until the watermark passes "
                "their rows' window; without one, two batches more, until their copy in the "
                "checkpoint); to copy the state into the checkpoint in each batch instead, set "
                f"WITH ({STATE_OPTION} = 'copy') on the stream"
            )
            raise StreamJoinError(msg)


class SourcedUnits:
    """Temp views of state units read back from their streams' files, each kept from the first
    batch that reads it to the first that does not: a unit is read by the batches after its own
    until it expires, and building its view (a file listing, an analysis) costs about as much
    as the batch's other driver work."""

    def __init__(self, fs: FileStore) -> None:
        self.fs = fs
        self._views: dict[tuple[str, int, str | None], tuple[str, DataFrame]] = {}
        self._used: set[tuple[str, int, str | None]] = set()
        self._prefix = f"_sj_sourced_{next(_processors)}"

    def view(self, spark: SparkSession, sp: StreamPlan, unit: StateUnit) -> str:
        """A relation (SQL text) of `unit`'s rows under their stored names, once its files are
        checked."""
        check_files(self.fs, sp, unit)
        base = copy_base(unit)
        return self.batch_view(spark, sp, unit.batch, unit.files, unit.watermark, base)

    def batch_view(
        self,
        spark: SparkSession,
        sp: StreamPlan,
        batch: int,
        files: Collection[str],
        watermark: int | None,
        base: str | None = None,
    ) -> str:
        """A relation of the ok rows of `files`, which batch `batch` (started at `watermark`)
        read: the rows its classified input held for `sp`. Batch `batch` itself reads them as
        its delta; the batches after it, as its unit, through the same view. `base`: where
        copies of the files are (`copy_base`; None: they are the stream's own)."""
        key = (sp.name, batch, base)
        self._used.add(key)
        if key not in self._views:
            name = f"{self._prefix}_{sp.index}_{batch}{'_copy' if base else ''}"
            raw = read_files(spark, sp, files, base)
            raw.createOrReplaceTempView(name)
            self._views[key] = (name, raw)
        return stored_sql(sp, self._views[key][0], watermark)

    def estimate_view(
        self, spark: SparkSession, sp: StreamPlan, units: Collection[StateUnit], views: list[str]
    ) -> str:
        """A relation of about the rows of `units`, for statistics only: their files read in
        one scan (per place of their files) and taken by the status test at the earliest of
        their batches' watermarks, so that rows a later batch found late are in it too. (A
        view per unit, as `view`, makes a read of a window's state a scan per batch.)"""
        marks = [u.watermark for u in units if u.watermark is not None]
        earliest = min(marks) if len(marks) == len(units) else None
        return self._one_scan(spark, sp, units, views, earliest)

    def whole_view(
        self, spark: SparkSession, sp: StreamPlan, units: Collection[StateUnit], views: list[str]
    ) -> str:
        """A relation of the rows of `units`, each of them `StateUnit.whole` (every row of its
        files ok in its batch), under their stored names: their files read in one scan (per
        place of their files), with no watermark's test. A view per unit (`view`) is a scan
        per batch, which a read of a long window's units (hundreds of batches) pays for in
        planning and tasks."""
        assert all(u.whole for u in units), "only whole units are read without their watermarks"
        return self._one_scan(spark, sp, units, views, None)

    def _one_scan(
        self,
        spark: SparkSession,
        sp: StreamPlan,
        units: Collection[StateUnit],
        views: list[str],
        watermark: int | None,
    ) -> str:
        """The rows of `units`' files read in one scan per place of their files, taken by the
        status test at `watermark`."""
        by_base: dict[str | None, list[str]] = {}
        for u in units:
            check_files(self.fs, sp, u)
            by_base.setdefault(copy_base(u), []).extend(u.files)
        parts = []
        for base, files in by_base.items():
            name = f"{self._prefix}_{sp.index}_all_{len(views)}"
            read_files(spark, sp, files, base).createOrReplaceTempView(name)
            views.append(name)
            parts.append(stored_sql(sp, name, watermark))
        return parts[0] if len(parts) == 1 else "(" + " UNION ALL ".join(parts) + ")"

    def clear(self) -> None:
        """Drop every view (the processor is done)."""
        self._used = set()
        self.end_batch()

    def end_batch(self) -> None:
        """Drop the views no batch read since the last call."""
        for key in set(self._views) - self._used:
            name, rows = self._views.pop(key)
            rows.sparkSession.catalog.dropTempView(name)
        self._used = set()


def read_files(
    spark: SparkSession, sp: StreamPlan, files: Collection[str], base: str | None = None
) -> DataFrame:
    """`files` of stream `sp` as its reader parses them (for `stored_sql`); `base`: the
    directory that stands for the stream's in their paths (for copies of its files)."""
    s = sp.stream
    reader = file_reader(spark.read.options(**reader_options(s)), s)
    # The stream's directory as the base: partition columns come out as the stream's.
    return reader.option("basePath", base or s.option("path") or "").load(list(files))


def copy_base(unit: StateUnit) -> str | None:
    """For a unit whose files are copies in the checkpoint (`runtime.state.copybehind`), the
    directory that holds them as the stream's directory holds its files; else None."""
    if not unit.behind or not unit.files:
        return None
    marker = f"/{unit.path}/"
    first = unit.files[0]
    return first[: first.index(marker) + len(marker) - 1]


def stored_sql(sp: StreamPlan, view: str, watermark: int | None) -> str:
    """SQL of the ok rows of `view` (the stream's files as its reader parses them) under their
    stored names, for a batch that started at `watermark`: what `runtime.sources.conform` and
    `tag` make of a stream's rows, and `runtime.batch.intake`'s status test, as one SQL text (each
    DataFrame call would be an analysis in the JVM)."""
    s = sp.stream
    derived = column_exprs(s)
    cols = {
        c.name: f"CAST({derived.get(c.name, f'`{c.name}`')} AS {c.type.ddl})" for c in s.columns
    }
    assert s.event_time is not None  # (sourced streams have one)
    raw = raw_sql(s, cols, corrupt=s.format != "parquet")
    tagged = [
        f"{sp.index} AS _sj_src",
        f"{raw} AS _sj_raw",
        f"unix_micros({cols[s.event_time]}) AS _sj_ts",
    ]
    tagged += [f"{cols[c.name]} AS `{prefixed(sp.index, c.name)}`" for c in s.columns]
    data = ", ".join(f"`{prefixed(sp.index, c.name)}`" for c in s.columns)
    ok = status_sql([sp.index], watermark)
    return f"(SELECT {data} FROM (SELECT {', '.join(tagged)} FROM {view}) WHERE ({ok}) = 'ok')"
