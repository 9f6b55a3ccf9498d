"""The ``flink`` engine: the job's own SQL run by Flink (PyFlink's Table API, streaming mode, a
local mini-cluster of the machine's cores), a second peer beside Spark's.

PyFlink cannot be installed beside the library (its pins move PySpark's pyarrow, py4j, numpy
and pandas below PySpark's floor: `flink_env`), so the Flink job runs in PyFlink's own venv, made
on first use, as a process of its own (`engines_flink_runner`, which needs PyFlink alone). This
process does the rest, with the library's packages: it parses and translates the job
(`engines_flink_sql`), writes the CSV copies of the input, hands the runner the SQL and the
folders as JSON, and copies Flink's output to Parquet once the runner is done.

It reads CSV copies of the backlog's Parquet files (Flink 2.3 bundles no Parquet format), one
file per stream in the backlog's order, so that each stream is read by one reader in event-time
order: Flink's file source hands a directory's files to its readers in no promised order, and a
reader given an older file after a newer one would make its rows late. Its rows go to CSV
files, copied to Parquet in the query's own sink folder once the job ends, so that the harness
checks them as it checks every engine's. An updating result (Nexmark q4, q9) is timed into a
``blackhole`` sink instead, and its final rows come from a second, untimed run of the query
(`engines_flink_runner`); the report's edits say so.

Figures: ``seconds`` runs from the job's submission (its optimisation included) to its end
(the runner's start, PyFlink's import, the JVM's start, the table environment, the parsing and
validation of the queries are ``startup_seconds``, apart); ``cpu_seconds`` is the JVM's (the
mini-cluster runs in it) and the runner's over those seconds. Flink has no micro-batches: no
batch times. Its bounded file source ends with a final watermark, which closes every window, as
``--final`` does for ours.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import typing as t

from benchmarks.engines_flink_sql import FILE_COLUMN, TRACE_COLUMNS, translate
from benchmarks.engines_measure import EngineRun
from benchmarks.flink_env import flink_python

if t.TYPE_CHECKING:
    from benchmarks.engines_live import Live
    from streamjoin.model import Job

FLINK = "flink"

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "engines_flink_runner.py")
"""The Flink job's module, run as a file by PyFlink's python (not as ``benchmarks.…``)."""
LIVE_RUNNER = os.path.join(os.path.dirname(RUNNER), "engines_flink_live.py")
"""A live run's (``--rate``), run likewise."""

FLINK_CONF = {
    "parallelism.default": str(os.cpu_count() or 1),
    "table.local-time-zone": "UTC",  # (Spark's session time zone in every engine)
    "state.backend.type": "hashmap",  # (Flink's default, said: state on the JVM heap)
    # Flink's advice for throughput, as Nexmark's Flink runs take it: an aggregate or a join
    # handles its input in bundles, and sends one change per key and bundle, not one per row.
    "table.exec.mini-batch.enabled": "true",
    "table.exec.mini-batch.allow-latency": "1 s",
    "table.exec.mini-batch.size": "5000",
}
"""The settings Flink runs with, reported with its figures."""


def csv_rows(table: t.Any) -> t.Any:
    """`table` (Arrow) as Flink's CSV format reads it: timestamps as ``yyyy-MM-dd
    HH:mm:ss.ffffff`` (in UTC), the other columns as they are."""
    import pyarrow as pa
    import pyarrow.compute as pc

    cols = [
        pc.strftime(col, format="%Y-%m-%d %H:%M:%S") if pa.types.is_timestamp(col.type) else col
        for col in table.columns
    ]
    return pa.table(cols, names=table.column_names)


def write_csv(table: t.Any, sink: t.Any) -> None:
    """Write `table` (Arrow) to `sink` (a path or a binary file) as `csv_rows`, no header."""
    import pyarrow.csv as pcsv

    # (One chunk: pyarrow 26's CSV writer writes a table whose columns begin with an empty
    # chunk, as a live feed's tick across a replay's end has, as binary garbage.)
    rows = csv_rows(table).combine_chunks()
    pcsv.write_csv(rows, sink, pcsv.WriteOptions(include_header=False))


def write_csv_copies(job: Job, root: str) -> tuple[dict[str, str], int]:
    """One CSV file per stream of `job` under `root`, its Parquet files' rows in name order (the
    backlog's order), timestamps as ``yyyy-MM-dd HH:mm:ss.ffffff`` in UTC: (folder by stream,
    rows written)."""
    import pyarrow.parquet as pq

    folders, rows = {}, 0
    for s in job.streams:
        if s.format != "parquet":
            msg = f"flink: stream {s.name} is {s.format}; only Parquet backlogs are copied"
            raise ValueError(msg)
        folder = os.path.join(root, s.name)
        os.makedirs(folder, exist_ok=True)
        files = sorted(glob.glob(os.path.join(s.option("path") or "", "*.parquet")))
        names = [c.name for c in s.columns]
        with open(os.path.join(folder, "rows.csv"), "wb") as sink:
            for path in files:
                table = pq.read_table(path, columns=names)
                write_csv(table, sink)
                rows += table.num_rows
        folders[s.name] = folder
    return folders, rows


def run_flink(
    job: Job,
    workdir: str,
    time_limit: float | None = None,
    live: Live | None = None,
    text: str | None = None,
) -> EngineRun:
    """Run `job` (whose job file is `text`) on Flink to the end of its input (or `time_limit`
    seconds, then cancelled and marked ``stopped_early``); results under the job's sink folders,
    as Parquet. A query Flink refuses raises RuntimeError with Flink's own message (the harness
    reports its first line). PyFlink's venv is made first if it is not (`flink_python`).

    With `live`, the job's streams are the feeder's folders of CSV files (`rate_feed.feed`),
    listed for new files once per trigger interval, as the Spark engines' triggers list theirs;
    its warm-up job runs first, in the same JVM; the job runs until the feed is done and read
    (`engines_flink_live.run_live`). Each query's results are then timed in
    `trace_path(workdir, query)`, and counted: the rows themselves stay in Flink's sink files,
    uncommitted; what it read of each stream is in `reads_path(workdir, stream)`."""
    python = flink_python()
    sink_root = os.path.join(workdir, "flink-out")
    plan: dict[str, t.Any] = {"conf": FLINK_CONF, "time_limit": time_limit}
    if live is None:
        csv_dirs, rows = write_csv_copies(job, os.path.join(workdir, "flink-in"))
        flink_job = translate(job, csv_dirs, sink_root, text)
    else:
        rows = 0  # (the feeder counts what it fed)
        feed_dirs = {s.name: s.option("path") or "" for s in job.streams}
        flink_job = translate(job, feed_dirs, sink_root, text, monitor=live.trigger)
        plan["live"] = {
            "done": live.done,
            "ready": os.path.join(workdir, "ready"),
            "drain_limit": live.drain_limit,
            "settle": 3 * _seconds(live.trigger),
            "traces": {name: trace_path(workdir, name) for name in flink_job.selects},
            "trace": list(TRACE_COLUMNS),
            "reads": {s.name: reads_path(workdir, s.name) for s in job.streams},
            "file": FILE_COLUMN,
            "folders": feed_dirs,
            "savepoints": "file://" + os.path.join(workdir, "flink-savepoints"),
        }
        if live.warmup is not None:
            plan["warmup"] = _warmup_plan(live.warmup, os.path.join(workdir, "warmup"))
    plan |= {
        "sources": flink_job.sources,
        "queries": {
            name: {
                "select": select,
                "sink": flink_job.sinks[name],
                "key": flink_job.keys.get(name, []),
            }
            for name, select in flink_job.selects.items()
        },
        "stdout": os.path.join(workdir, "flink-stdout.log"),
    }
    figures = _run_in_venv(python, plan, workdir, RUNNER if live is None else LIVE_RUNNER)
    if figures.get("error"):
        raise RuntimeError(f"flink: {figures['error']}")
    if live is not None:  # (counted by Flink, `engines_flink_live.run_live`)
        out = {name: int(n) for name, n in figures["counts"].items()}
    else:
        columns = {
            name: [(c, kind) for c, kind in cols] for name, cols in figures["columns"].items()
        }
        out = {
            name: csv_to_parquet(flink_job.sinks[name], flink_job.outputs[name], columns[name])
            for name in flink_job.selects
        }
    return EngineRun(
        FLINK,
        rows_in=rows,
        seconds=figures["seconds"],
        cpu_seconds=figures["cpu_seconds"],
        stopped_early=figures["stopped_early"],
        jvm_flags=figures["jvm_flags"],
        settings={"flink": figures["flink"], **FLINK_CONF},
        startup_seconds=figures["startup_seconds"],
        sql_edits=[
            *flink_job.edits,
            *(
                f"{name}: an updating result, timed into a blackhole sink; its final rows from a "
                "second, untimed run"
                for name in figures.get("updating", ())
            ),
        ],
        out=out,
    )


def trace_path(workdir: str, query: str) -> str:
    """Where a live run writes how `query`'s results were timed (`run_flink`): a CSV row per
    pair of files its results' rows came from: the left row's file name, the right row's, the
    latest time Flink made such a result (UTC, ``yyyy-MM-dd HH:mm:ss.SSS``), and how many."""
    return os.path.join(workdir, f"flink-traces-{query}.csv")


def reads_path(workdir: str, stream: str) -> str:
    """Where a live run writes what Flink read of `stream` (`run_flink`): a CSV row per file,
    its name, the latest time one of its rows was read (as in `trace_path`), its rows."""
    return os.path.join(workdir, f"flink-reads-{stream}.csv")


def _warmup_plan(job_text: str, root: str) -> dict[str, t.Any]:
    """The runner's warm-up (`engines_flink_live.warm_up`): `job_text` over CSV copies of
    its files."""
    from streamjoin.sql import parse_job

    job = parse_job(job_text.replace("{out}", os.path.join(root, "out")), "<warm-up>")
    csv_dirs, _ = write_csv_copies(job, os.path.join(root, "flink-in"))
    warm = translate(job, csv_dirs, os.path.join(root, "flink-out"), job_text)
    return {
        "sources": list(warm.sources),
        "selects": list(warm.selects.values()),
        "streams": [s.name for s in job.streams],
    }


def _seconds(interval: str) -> float:
    """Seconds of a trigger's interval text (``1 seconds``, ``500 milliseconds``)."""
    number, unit = interval.split()
    scale = {"millisecond": 0.001, "second": 1.0, "minute": 60.0}[unit.rstrip("s")]
    return float(number) * scale


def _run_in_venv(
    python: str, plan: dict[str, t.Any], workdir: str, runner: str
) -> dict[str, t.Any]:
    """`plan` run by `runner` (a file) in PyFlink's venv: its figures (or Flink's error); a
    RuntimeError with the end of its log when it wrote none."""
    plan_file = os.path.join(workdir, "flink-plan.json")
    result_file = os.path.join(workdir, "flink-result.json")
    log_file = os.path.join(workdir, "flink-runner.log")
    with open(plan_file, "w", encoding="utf-8") as f:
        json.dump(plan, f)
    with open(log_file, "w", encoding="utf-8") as log:
        # -I: no PYTHONPATH, no user site, and not the runner's folder on the path, so that
        # nothing of this checkout (nor its PySpark) is found there: PyFlink alone.
        command = [python, "-I", runner, plan_file, result_file]
        code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False)
    if not os.path.exists(result_file):
        with open(log_file, encoding="utf-8", errors="replace") as f:
            tail = " | ".join(f.read().strip().splitlines()[-5:])
        msg = f"flink: the runner wrote no figures (exit {code.returncode}): {tail}"
        raise RuntimeError(msg)
    with open(result_file, encoding="utf-8") as f:
        figures: dict[str, t.Any] = json.load(f)
    return figures


def _arrow_type(flink_type: str) -> t.Any:
    import pyarrow as pa

    name = flink_type.removesuffix(" NOT NULL")
    simple = {
        "BIGINT": pa.int64(),
        "INT": pa.int32(),
        "DOUBLE": pa.float64(),
        "BOOLEAN": pa.bool_(),
        "STRING": pa.string(),
    }
    if name in simple:
        return simple[name]
    if name.startswith("TIMESTAMP("):
        return pa.timestamp("us")
    return None  # (read as pyarrow infers it; the harness compares in the exact answer's types)


def csv_to_parquet(csv_dir: str, parquet_dir: str, columns: t.Sequence[tuple[str, str]]) -> int:
    """Flink's committed CSV files of one query (its hidden in-progress files aside) as one
    Parquet file in `parquet_dir`: the rows written (nothing is written for none)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    names = [c for c, _ in columns]
    types = {c: kind for c, f in columns if (kind := _arrow_type(f)) is not None}
    read = pcsv.ReadOptions(column_names=names)
    # (Flink writes NULL as an empty field.)
    convert = pcsv.ConvertOptions(column_types=types, strings_can_be_null=True)
    parts = [
        pcsv.read_csv(path, read_options=read, convert_options=convert)
        for path in sorted(glob.glob(os.path.join(csv_dir, "**", "part-*"), recursive=True))
        if os.path.getsize(path) > 0
    ]
    if not parts:
        return 0
    table = pa.concat_tables(parts, promote_options="permissive")
    os.makedirs(parquet_dir, exist_ok=True)
    pq.write_table(table, os.path.join(parquet_dir, "part-flink.parquet"))
    return int(table.num_rows)
