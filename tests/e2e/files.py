"""Input files for CLI runs: one file per stream per micro-batch, in modification-time order,
written at once or fed while a job runs."""

from __future__ import annotations

import json
import os
import threading
import typing as t
from pathlib import Path

from tests.spark.streams import stream_ddl

if t.TYPE_CHECKING:
    import random
    from collections.abc import Callable, Mapping, Sequence

_EPOCH = 1_700_000_000


def write_batches(
    root: Path,
    batches: Sequence[Mapping[str, Sequence[Mapping[str, object]]]],
    *,
    first: int = 0,
    extra_lines: Mapping[tuple[int, str], Sequence[str]] | None = None,
    parquet: bool = False,
) -> None:
    """Write batch i of stream s to ``root/s/part-<first+i>.json`` (``.parquet`` with
    `parquet`: the generated streams' columns, ``ts`` as a UTC microsecond timestamp).

    With ``maxFilesPerTrigger = '1'`` each file becomes one micro-batch (file sources take files
    in modification-time order, set here to the batch order). `extra_lines` adds raw lines
    (malformed records) to a (batch, stream) JSON file.
    """
    for i, batch in enumerate(batches):
        n = first + i
        for stream, rows in batch.items():
            folder = root / stream
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"part-{n:05d}.{'parquet' if parquet else 'json'}"
            if parquet:
                _write_parquet(path, rows)
            else:
                lines = [json.dumps({k: _iso(v) for k, v in r.items()}) for r in rows]
                lines += list((extra_lines or {}).get((i, stream), ()))
                path.write_text("\n".join(lines) + "\n", encoding="utf-8")
            os.utime(path, (_EPOCH + n, _EPOCH + n))


def _write_parquet(path: Path, rows: Sequence[Mapping[str, object]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    types = {"id": pa.int64(), "k": pa.int64(), "x": pa.float64(), "s": pa.string()}
    columns = {c: pa.array([r[c] for r in rows], kind) for c, kind in types.items()}
    columns["ts"] = pa.array([r["ts"] for r in rows], pa.timestamp("us", tz="UTC"))
    pq.write_table(pa.table(columns), path)


def _iso(value: object) -> object:
    return value.isoformat() if hasattr(value, "isoformat") else value


def read_json_rows(path: Path, columns: Sequence[str]) -> list[tuple[object, ...]]:
    """Every row of every part file under a JSON sink, as tuples in `columns` order."""
    rows = []
    for part in sorted(path.glob("batch=*/part-*.json")):
        for line in part.read_text(encoding="utf-8").splitlines():
            if line.strip():
                obj = json.loads(line)
                rows.append(tuple(obj.get(c) for c in columns))
    return rows


def read_parquet_rows(path: Path, columns: Sequence[str]) -> list[tuple[object, ...]]:
    """Every row of every part file under a Parquet sink, as tuples in `columns` order."""
    import pyarrow.parquet as pq

    rows: list[tuple[object, ...]] = []
    for part in sorted(path.glob("batch=*/part-*.parquet")):
        table = pq.read_table(part, columns=list(columns)).to_pydict()
        rows += zip(*(table[c] for c in columns), strict=True)
    return rows


class Feeder(threading.Thread):
    """Writes batch i of every stream to ``root/<stream>/part-<i>.json`` once `released(i)`
    holds, after a pause drawn from `rng` (up to twice `mean_s`): input that keeps arriving
    while a job runs. Setting `hurry` skips the pauses still to come.

    Each file is written under a hidden name (Spark's file source skips names starting with a
    dot) and then renamed, so no micro-batch ever reads half a file; its modification time is
    set as in `write_batches`, so the batches are read in order.
    """

    def __init__(
        self,
        root: Path,
        batches: Sequence[Mapping[str, Sequence[Mapping[str, object]]]],
        rng: random.Random,
        mean_s: float,
        released: Callable[[int], bool] = lambda i: True,
    ) -> None:
        super().__init__(name="feeder", daemon=True)
        self.root = root
        self.batches = batches
        self.pauses = [rng.uniform(0, 2 * mean_s) for _ in batches]
        self.released = released
        self.fed = 0
        self.error: BaseException | None = None
        self.stop = threading.Event()
        self.hurry = threading.Event()
        # (Made now, not with their first file: a run that starts before the first pause ends
        # finds its streams' folders, as a job reading a directory expects.)
        for stream in {s for batch in batches for s in batch}:
            (root / stream).mkdir(parents=True, exist_ok=True)

    def run(self) -> None:
        """Feed every batch unless stopped; keep an error for the caller to raise."""
        try:
            for i, batch in enumerate(self.batches):
                while not (self.hurry.is_set() or self.released(i)):
                    if self.stop.wait(0.1):
                        return
                if not self.hurry.wait(self.pauses[i]) and self.stop.is_set():
                    return
                for stream, rows in batch.items():
                    folder = self.root / stream
                    folder.mkdir(parents=True, exist_ok=True)
                    hidden = folder / f".part-{i:05d}.json"
                    lines = [json.dumps({k: _iso(v) for k, v in r.items()}) for r in rows]
                    hidden.write_text("\n".join(lines) + "\n", encoding="utf-8")
                    # Spark takes files in modification-time order (in ms) and breaks ties at
                    # random: files written in the same ms could be read out of order.
                    os.utime(hidden, (_EPOCH + i, _EPOCH + i))
                    hidden.rename(folder / f"part-{i:05d}.json")
                self.fed = i + 1
        except BaseException as err:  # re-raised by the thread that joins this one
            self.error = err


def write_job(path: Path, inputs: Path, sinks: Mapping[str, Path], inserts: Sequence[str]) -> Path:
    """A job file at `path`: the generated streams A and B read from ``inputs/<stream>`` one
    file a batch, a JSON sink per name of `sinks` at its path, and the `inserts`."""
    ddl = (
        stream_ddl(s, str(inputs / s)).replace("WITH (", "WITH (maxFilesPerTrigger = '1', ")
        for s in "AB"
    )
    sink_ddl = (f"CREATE SINK {n} WITH (format = 'json', path = '{p}');" for n, p in sinks.items())
    path.write_text("\n".join([*ddl, *sink_ddl, *inserts]), encoding="utf-8")
    return path
