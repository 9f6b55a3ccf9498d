"""How the skew benchmarks (`benchmarks.skew`) drive the engine: their job's text, a job run
batch by batch in process (`Run`, `drive`), and the reference its output is checked against."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import typing as t
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pyarrow.parquet as pq

if t.TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from pyspark.sql import DataFrame, SparkSession

    from streamjoin.model import Job
    from streamjoin.runtime.batch.processor import BatchProcessor, BatchReport

ROOT = os.path.join(tempfile.gettempdir(), "streamjoin-bench", "skew")

_STREAM = """CREATE STREAM {name} (id BIGINT, k BIGINT, x DOUBLE, ts TIMESTAMP{wm})
  WITH (format = 'parquet', path = '{path}');
"""
_WM = ",\n    WATERMARK FOR ts AS ts - INTERVAL '2' SECOND"


def job_text(
    paths: Mapping[str, str],
    queries: Sequence[tuple[str, str]],
    select: str,
    on: str,
    *,
    wm: bool,
) -> str:
    """Streams ``a``, ``b`` (id, k, x, ts) and, per (sink path, WITH options) of `queries`, a
    parquet sink and the query ``a l JOIN b r ON on`` into it (named q1, q2, … in order)."""
    text = "".join(_STREAM.format(name=n, path=paths[n], wm=_WM if wm else "") for n in ("a", "b"))
    for i, (out, with_) in enumerate(queries, 1):
        text += f"CREATE SINK o{i} WITH (format = 'parquet', path = '{out}');\n"
        text += f"INSERT INTO o{i} SELECT {select} FROM a l JOIN b r ON {on}\n  WITH ({with_});\n"
    return text


@dataclass
class Run:
    """One job driven batch by batch: its reports, batch wall times and the processor."""

    job: Job
    processor: BatchProcessor
    reports: list[BatchReport] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    rows: int = 0

    def out(self, query: str = "q1") -> int:
        """Rows `query` wrote over the run."""
        return sum(r.out.get(query, 0) for r in self.reports)


def drive(
    spark: SparkSession,
    text: str,
    batches: Sequence[Mapping[str, str | None]],
    workdir: str,
) -> Run:
    """Run the job `text` over `batches` (per batch: stream -> Parquet file, None = no rows)."""
    from streamjoin.runtime.engine import Engine
    from streamjoin.runtime.sources import schema_ddl
    from streamjoin.sql import parse_job

    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    job = parse_job(text)
    engine = Engine(spark)
    processor = engine.processor(job, os.path.join(workdir, "ckpt"))
    run = Run(job, processor)
    for i, files in enumerate(batches):
        frames: dict[str, DataFrame] = {}
        for name, path in files.items():
            ddl = schema_ddl(job.stream(name))
            frames[name] = (
                spark.read.schema(ddl).parquet(path)
                if path is not None
                else spark.createDataFrame([], schema=ddl)
            )
        started = time.monotonic()
        report = processor.process(engine.unified(processor.plan, frames), i)
        run.seconds.append(time.monotonic() - started)
        run.reports.append(report)
        run.rows += report.rows_in
    return run


def backlog_batches(streams: Mapping[str, str]) -> list[dict[str, str | None]]:
    """Batch i: file i of every stream of a backlog."""
    files = {n: sorted(os.listdir(d)) for n, d in streams.items()}
    count = len(next(iter(files.values())))
    return [{n: os.path.join(streams[n], files[n][i]) for n in streams} for i in range(count)]


def sink_rows(spark: SparkSession, path: str, columns: Sequence[str]) -> list[tuple[object, ...]]:
    """Every row a run's parquet sink holds, as tuples of `columns`."""
    if not os.path.isdir(path) or not any(n.startswith("batch=") for n in os.listdir(path)):
        return []
    return [tuple(r) for r in spark.read.parquet(path).select(*columns).collect()]


def _rows_of(path: str | None) -> list[dict[str, object]]:
    """A Parquet file's rows for the reference (aware datetimes made naive UTC)."""
    if path is None:
        return []
    rows: list[dict[str, object]] = pq.read_table(path).to_pylist()
    for row in rows:
        for key, value in row.items():
            if isinstance(value, datetime) and value.tzinfo is not None:
                row[key] = value.astimezone(UTC).replace(tzinfo=None)
    return rows


def reference_by_key(
    job: Job, batches: Sequence[Mapping[str, str | None]], buckets: int
) -> list[tuple[object, ...]]:
    """`run_reference` of the job's equi query, run once per key bucket (k mod `buckets`).

    The query's predicate has ``l.k = r.k``, so every joinable pair lies inside one bucket; with
    no late rows anywhere (checked by the caller) each bucket's run sees every row on time, and
    the union of the buckets' results is the reference result over all rows, at a fraction of
    the nested loop's cost.
    """
    from streamjoin.reference import run_reference

    # per bucket, per batch, per stream: the rows (grouped once)
    parts: list[list[dict[str, list[dict[str, object]]]]] = [
        [{n: [] for n in b} for b in batches] for _ in range(buckets)
    ]
    for i, b in enumerate(batches):
        for n, path in b.items():
            for row in _rows_of(path):
                parts[t.cast("int", row["k"]) % buckets][i][n].append(row)
    out: list[tuple[object, ...]] = []
    for part in parts:
        result = run_reference(job, part)
        assert not any(result.late.values()), "the reference saw late rows"
        out += result.outputs["q1"]
    return out


def _percentile(values: Sequence[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    i = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return round(ordered[i] * 1000, 1)


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 3) if values else None


def _session(master: str | None = None) -> SparkSession:
    """The benchmarks' session: local mode, or on the cluster at `master`."""
    from streamjoin.runtime.session import get_session

    spark: SparkSession = get_session(master)
    return spark


def _say(say: t.TextIO | None, text: str) -> None:
    if say is not None:
        print(text, file=say, flush=True)
