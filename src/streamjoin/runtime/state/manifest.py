"""The manifest: which state units are live after a batch, the watermarks, and the run's totals.

A batch is committed by writing its manifest (atomically, named by batch id). Batch b always starts
from the manifest of the newest committed batch before b, so a batch that is replayed after a crash
recomputes exactly what it computed the first time (its input is fixed by Spark's offset log, its
state by the manifest), and every file it writes is keyed by the batch id and overwritten.

A manifest is written whole (`to_json`) or as its changes from the one before (`delta_json`):
an unbounded stream keeps a unit per batch, and a whole manifest of thousands of units would
cost a batch more than its join (`runtime.state.checkpoint` chooses).
"""

from __future__ import annotations

import json
import typing as t
from dataclasses import asdict, dataclass, field, fields, replace


def batch_state_dir(batch: int) -> str:
    """Where batch `batch` writes the state of all streams (one write, partitioned by stream),
    relative to the checkpoint directory."""
    return f"state/b={batch}"


def copy_state_dir(batch: int) -> str:
    """Where the units of batch `batch` copied after it are written (one directory per
    stream), relative to the checkpoint directory: apart from `batch_state_dir`, which a
    replay of the batch overwrites whole."""
    return f"state/c={batch}"


@dataclass(frozen=True, slots=True)
class StateUnit:
    """The rows one batch appended to one stream's state, with their event-time range."""

    stream: str
    batch: int
    rows: int
    min_ts: int | None
    max_ts: int | None
    bytes: int = 0
    """Bytes of its files (0: not measured; manifests written before it was)."""
    files: tuple[str, ...] = ()
    """The stream's own input files its rows are read back from (`runtime.state.sourcefiles`), as
    Spark named them; empty when the rows were copied under `path`."""
    sizes: tuple[int, ...] = ()
    """Bytes of each of `files` when the batch read them: a changed file is not read back."""
    watermark: int | None = None
    """For rows read back from `files`: the watermark their batch started with (the files'
    rows behind it were late, and are not state)."""
    behind: bool = False
    """Copied after its batch, from the files it was first read back from
    (`runtime.state.copybehind`): its rows are under `copy_state_dir`."""
    bound: int | None = None
    """For a stream whose rows leave by a column (`StreamPlan.expiry`): the greatest value of
    that column (`bound_of`) over its rows, in microseconds (the least long: every one NULL);
    None: not measured, and the unit is not let go by a column."""
    bound_of: str | None = None
    """The column `bound` is of: a plan that lets rows go by another column keeps the unit."""
    whole: bool = False
    """For rows read back from `files`: every row of them was ok in its batch (none late or
    malformed), so a read of several such units scans their files at once, with no test of
    each unit's own watermark (`SourcedUnits.whole_view`)."""

    @staticmethod
    def of(raw: dict[str, t.Any]) -> StateUnit:
        """Inverse of `dataclasses.asdict`."""
        seqs: dict[str, tuple[t.Any, ...]] = {
            k: tuple(raw[k]) for k in ("files", "sizes") if k in raw
        }
        return StateUnit(**{**raw, **seqs})

    @property
    def path(self) -> str:
        """Location under the checkpoint directory."""
        where = copy_state_dir(self.batch) if self.behind else batch_state_dir(self.batch)
        return f"{where}/sj_stream={self.stream}"

    def same_rows(self, other: StateUnit | None) -> bool:
        """Whether `other` holds the rows this unit holds, wherever either keeps them."""
        return other is not None and (
            other.stream,
            other.batch,
            other.rows,
            other.min_ts,
            other.max_ts,
        ) == (self.stream, self.batch, self.rows, self.min_ts, self.max_ts)

    def overlaps(self, lo: int | None, hi: int | None) -> bool:
        """Whether any of its rows may have an event time in ``[lo, hi]`` (None = unbounded)."""
        if self.min_ts is None or self.max_ts is None:
            return True
        return (lo is None or self.max_ts >= lo) and (hi is None or self.min_ts <= hi)


@dataclass(frozen=True, slots=True)
class GroupUnit:
    """The joined rows one batch buffered for a ``GROUP BY window`` query (`plan.aggregate`),
    or their partial aggregates per pane and key (`plan.partials`), with the event-time range
    of the window's time column."""

    query: str
    batch: int
    rows: int
    min_ts: int
    max_ts: int

    @property
    def path(self) -> str:
        """Location under the checkpoint directory."""
        return f"groups/b={self.batch}/{self.query}"


@dataclass
class GroupState:
    """A ``GROUP BY window`` query's buffer: every window ending at or before `closed` has been
    emitted (None: none yet); `units` hold the joined rows of the others."""

    closed: int | None = None
    units: list[GroupUnit] = field(default_factory=list)
    signature: str = ""
    """The query's `model.Query.signature`: a changed query starts a buffer of its own."""

    @staticmethod
    def of(raw: dict[str, t.Any]) -> GroupState:
        """Inverse of `dataclasses.asdict`."""
        units = [GroupUnit(**u) for u in raw["units"]]
        return GroupState(raw["closed"], units, raw.get("signature", ""))


@dataclass
class Totals:
    """Counters over the whole run (across restarts: they live in the manifest)."""

    batches: int = 0
    rows_in: dict[str, int] = field(default_factory=dict)
    late: dict[str, int] = field(default_factory=dict)
    malformed: dict[str, int] = field(default_factory=dict)
    out: dict[str, int] = field(default_factory=dict)


@dataclass
class Manifest:
    """State of the engine after batch `batch` (-1: before the first batch)."""

    batch: int = -1
    stream_wm: dict[str, int | None] = field(default_factory=dict)
    global_wm: int | None = None
    units: list[StateUnit] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    totals: Totals = field(default_factory=Totals)
    routing: dict[str, dict[str, t.Any]] = field(default_factory=dict)
    """Per query: the partitioning scheme for the next batch and its controller's state."""
    multiway: dict[str, t.Any] = field(default_factory=dict)
    """The multi-way queries' re-planning state (`adapt.reorder.ReorderController`)."""
    streams: list[str] = field(default_factory=list)
    """The streams the job read, in the order of their index: the names of their columns in
    the state files and the order of Spark's sources (empty: written before it was kept)."""
    expired: dict[str, int] = field(default_factory=dict)
    column_cuts: dict[str, list[t.Any]] = field(default_factory=dict)
    """Per stream whose every dropped unit left by a column (`StreamPlan.expiry`): that
    column and the least offset it left by, ``[column, offset_us]``; ``["", 0]`` once units
    left by different columns. A stream with drops and no entry had some by event time."""
    """Per stream: the newest event time of any row its state has dropped (absent: none yet).
    The state holds every on-time row of the stream that is newer; see `runtime.restart`."""
    served: dict[str, t.Any] = field(default_factory=dict)
    """A served job's query set as of this batch (`runtime.serve.queries.QuerySet`)."""
    groups: dict[str, GroupState] = field(default_factory=dict)
    """Per ``GROUP BY window`` query: its buffer of open windows (`runtime.batch.groups`)."""
    final: bool = False
    """The input was declared finished after the batch before (``--final``): every window was
    emitted, and the run cannot take more input."""
    overload: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per shedding query: each direction's probe allowance for the next batch
    (`runtime.batch.shedding`)."""

    def live(self, stream: str) -> list[StateUnit]:
        """The live state units of `stream`."""
        return [u for u in self.units if u.stream == stream]

    def state_rows(self) -> dict[str, int]:
        """Live state rows per stream."""
        rows: dict[str, int] = {}
        for s in self.units:
            rows[s.stream] = rows.get(s.stream, 0) + s.rows
        return rows

    def to_json(self) -> str:
        """Serialized form (stable key order, so equal manifests are equal files)."""
        raw = asdict(replace(self, units=[]))
        raw["units"] = [_unit_raw(u) for u in self.units]
        return json.dumps(raw, sort_keys=True, indent=1)

    def delta_json(self, base: Manifest) -> str:
        """Serialized as its changes from `base` (the manifest it was made from): its units as
        runs ``[i, j]`` of `base`'s units (``base.units[i:j]``, the same objects) and the
        others whole; every other field whole. Read back by `from_json` with `base`."""
        at = {id(u): i for i, u in enumerate(base.units)}
        runs: list[t.Any] = []
        for u in self.units:
            i = at.get(id(u))
            if i is None:
                runs.append(_unit_raw(u))
            elif runs and isinstance(runs[-1], list) and runs[-1][1] == i:
                runs[-1][1] = i + 1
            else:
                runs.append([i, i + 1])
        raw = asdict(replace(self, units=[]))
        raw |= {"units": runs, "base": base.batch, "base_units": len(base.units)}
        return json.dumps(raw, sort_keys=True, separators=(",", ":"))

    @staticmethod
    def from_json(text: str | dict[str, t.Any], base: Manifest | None = None) -> Manifest:
        """Inverse of `to_json` (text, or its parsed JSON), and of `delta_json` with its
        `base`."""
        raw = json.loads(text) if isinstance(text, str) else text
        if base is not None and raw.get("base_units", len(base.units)) != len(base.units):
            msg = (
                f"the manifest of batch {raw['batch']} is a delta on {raw['base_units']} units "
                f"of batch {raw['base']}, whose manifest holds {len(base.units)}"
            )
            raise ValueError(msg)
        units: list[StateUnit] = []
        for u in raw["units"]:
            if isinstance(u, dict):
                units.append(StateUnit.of(u))
            elif base is None:
                msg = f"the manifest of batch {raw['batch']} is a delta, read without its base"
                raise ValueError(msg)
            else:
                units += base.units[u[0] : u[1]]
        return Manifest(
            batch=raw["batch"],
            stream_wm=raw["stream_wm"],
            global_wm=raw["global_wm"],
            units=units,
            dropped=raw["dropped"] + _legacy_mirs(raw),
            totals=Totals(**raw["totals"]),
            routing=raw.get("routing", {}),
            multiway=raw.get("multiway", {}),
            streams=raw.get("streams", []),
            expired=raw.get("expired", {}),
            column_cuts=raw.get("column_cuts", {}),
            served=raw.get("served", {}),
            groups={k: GroupState.of(g) for k, g in raw.get("groups", {}).items()},
            final=raw.get("final", False),
            overload=raw.get("overload", {}),
        )


def _legacy_mirs(raw: dict[str, t.Any]) -> list[str]:
    """The directory of the MIR stores a manifest of an earlier version kept (its ``mirs``):
    dropped with the manifest's own dropped units at the next commit, as nothing reads them
    now (the operator's chain builds its MIRs from the streams' units; the slices keep none)."""
    return ["mir"] if raw.get("mirs") else []


_UNIT_FIELDS = tuple(f.name for f in fields(StateUnit))


def _unit_raw(unit: StateUnit) -> dict[str, t.Any]:
    """`asdict(unit)`, without its deep copy of every value (a unit holds no mutable one)."""
    return {f: getattr(unit, f) for f in _UNIT_FIELDS}


def manifest_name(batch: int) -> str:
    """File name of batch `batch`'s manifest."""
    return f"{batch:012d}.json"


def parse_manifest_name(name: str) -> int | None:
    """The batch id of a manifest file name, or None for anything else."""
    stem, dot, ext = name.partition(".")
    return int(stem) if dot and ext == "json" and stem.isdigit() else None
