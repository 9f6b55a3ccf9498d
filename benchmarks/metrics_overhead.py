"""What the figures and the dashboard cost (`runtime.metrics`, ``run --ui``).

``python -m benchmarks.metrics_overhead [--rounds 2] [--files 4] [--rows 4000] [--out FILE]``
runs one equi join over a Parquet backlog (`maxFilesPerTrigger = 1`: one file a batch) in one
process, alternately with the figures off (``metrics=False``) and on (the history file under the
checkpoint, the endpoint of ``--ui``, and a client reading ``/status``, ``/queries``,
``/history`` and ``/metrics`` every second, as the dashboard does), after a warm-up run. It
prints one JSON object: each run's throughput, the median on/off ratio, and the driver time
each batch spent recording its figures, and the Python driver's extra CPU with them on, over
the run's time (``driver_share``): on a shared machine the runs' own spread (``off_spread``)
can exceed the 3 % a ratio would resolve, and that share is the bound to read.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import tempfile
import threading
import time
import typing as t
import urllib.request

from benchmarks.data import two_streams, write_backlog
from benchmarks.workloads import two_stream_job

if t.TYPE_CHECKING:
    from collections.abc import Sequence

    from streamjoin.runtime.batch.context import BatchReport
    from streamjoin.runtime.metrics.record import BatchFigures

ENDPOINTS = ("/status", "/queries", "/history?since=-1", "/metrics")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _poll(port: int, stop: threading.Event, answered: list[float]) -> None:
    """Read the dashboard's endpoints every second until `stop`; keep each answered read's
    seconds (on loopback, the endpoint's work plus a round trip)."""
    while not stop.wait(1.0):
        for path in ENDPOINTS:
            started = time.perf_counter()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
                    r.read()
                answered.append(time.perf_counter() - started)
            except OSError:
                pass  # (before the endpoint starts, or after it stops)


def _median(runs: list[dict[str, t.Any]], mode: str, key: str) -> float:
    return float(statistics.median(r[key] for r in runs if r["mode"] == mode))


def run(rounds: int, files: int, rows: int) -> dict[str, t.Any]:
    """The measurement (see the module's docstring)."""
    from benchmarks.engines import session
    from benchmarks.harness import machine, source_commit
    from streamjoin.runtime.engine import Engine
    from streamjoin.runtime.metrics.history import MetricsHistory
    from streamjoin.runtime.serve.runview import Ui
    from streamjoin.sql import parse_job

    class Timed(MetricsHistory):
        spent: float = 0.0

        def record(self, report: BatchReport, queries: Sequence[str]) -> BatchFigures:
            started = time.perf_counter()
            try:
                return super().record(report, queries)
            finally:
                self.spent += time.perf_counter() - started

    work = tempfile.mkdtemp(prefix="sj-metrics-overhead-")
    tables = two_streams(rows, span_seconds=rows / 200, keys=max(1, rows // 50), seed=3)
    backlog = write_backlog(os.path.join(work, "in"), tables, {"a": "ts", "b": "ts"}, files)
    window = "r.ts BETWEEN l.ts - INTERVAL '5' SECOND AND l.ts + INTERVAL '5' SECOND"
    text = two_stream_job(backlog, f"l.k = r.k AND {window}")
    engine = Engine(session())
    runs: list[dict[str, t.Any]] = []
    modes = ["warm-up", *(m for i in range(rounds) for m in (("off", "on"), ("on", "off"))[i % 2])]
    for i, mode in enumerate(modes):
        job = parse_job(text.replace("{out}", os.path.join(work, f"out-{i}")))
        on = mode == "on"
        history = Timed(os.path.join(work, f"ckpt-{i}", "metrics")) if on else None
        port = _free_port()
        stop = threading.Event()
        answered: list[float] = []
        poller = threading.Thread(target=_poll, args=(port, stop, answered))
        if on:
            poller.start()
        started, cpu = time.monotonic(), time.process_time()
        summary = engine.run(
            job,
            checkpoint=os.path.join(work, f"ckpt-{i}"),
            once=True,
            progress=False,
            metrics=history if history is not None else False,
            ui=Ui(port=port) if on else None,
        )
        seconds = time.monotonic() - started
        cpu = time.process_time() - cpu
        stop.set()
        if on:
            poller.join()
        runs.append(
            {
                "mode": mode,
                "seconds": round(seconds, 3),
                "batches": summary.batches_this_run,
                "rows_per_second": round(backlog.total_rows / seconds, 1),
                "record_ms_per_batch": round(history.spent * 1000 / summary.batches_this_run, 3)
                if history is not None
                else None,
                "reads_answered": len(answered) if on else None,
                "read_ms_mean": round(1000 * statistics.mean(answered), 2) if answered else None,
                "python_cpu_seconds": round(cpu, 3),
            }
        )
    measured = [r for r in runs if r["mode"] != "warm-up"]
    off = [r["rows_per_second"] for r in measured if r["mode"] == "off"]
    on_ = [r["rows_per_second"] for r in measured if r["mode"] == "on"]
    spread = (max(off) - min(off)) / min(off) if len(off) > 1 else None
    extra = _median(measured, "on", "python_cpu_seconds") - _median(
        measured, "off", "python_cpu_seconds"
    )
    return {
        "benchmark": "metrics-overhead",
        "command": "python -m benchmarks.metrics_overhead "
        f"--rounds {rounds} --files {files} --rows {rows} "
        "--out benchmarks/results/metrics-overhead.json",
        "machine": machine(),
        "commit": source_commit(),
        "rows_per_stream": rows,
        "files": files,
        "runs": runs,
        "ratio_on_off": round(statistics.median(on_) / statistics.median(off), 4),
        "off_spread": None if spread is None else round(spread, 4),
        # The Python driver's extra CPU with the figures on (recording them, answering the
        # reads, and the reading client itself), over the run's time: a bound of their cost
        # that the machine's noise hides less than the ratio.
        "driver_share": round(max(0.0, extra) / _median(measured, "off", "seconds"), 4),
        "record_ms_per_batch": statistics.median(
            r["record_ms_per_batch"] for r in measured if r["mode"] == "on"
        ),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: print (and with ``--out`` write) the JSON report."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.metrics_overhead")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--rows", type=int, default=4_000)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    report = run(args.rounds, args.files, args.rows)
    text = json.dumps(report, indent=1)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
