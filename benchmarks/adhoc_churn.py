"""The ``adhoc`` benchmark's churn (`benchmarks.adhoc`): queries added to and dropped from a
served job on a live feed, and the batches and seconds from each add to its first results."""

from __future__ import annotations

import os
import threading
import time
import typing as t

from benchmarks.adhoc_jobs import query, streams_sql, write_files
from benchmarks.harness_figures import _percentile


def churn(n: int, work: str, rows: int, adds: int) -> dict[str, t.Any]:
    """Serve N queries on a live feed; add (then drop) `adds` queries one by one: per add, the
    batches and seconds until its first results."""
    from streamjoin.runtime.engine import Engine
    from streamjoin.sql import parse_job

    live = os.path.join(work, "live")
    write_files(live, 3, rows, first=0)
    out = os.path.join(work, "out-live")
    job = parse_job(streams_sql(live) + "\n" + "\n".join(query(i, out)[0] for i in range(n)))
    batches: list[tuple[int, float, float]] = []
    lock = threading.Lock()

    def on_batch(report: t.Any) -> None:
        with lock:
            batches.append((report.batch, time.monotonic(), report.seconds))

    serving = Engine().start(job, checkpoint=os.path.join(work, "ckpt-live"), on_batch=on_batch)
    stop = threading.Event()

    def feeder() -> None:
        f = 3
        while not stop.wait(1.0):
            write_files(live, 1, rows, first=f)
            f += 1

    feed = threading.Thread(target=feeder, daemon=True)
    feed.start()
    firsts = []
    try:
        for j in range(adds):
            i = n + j
            added_at = time.monotonic()
            change = serving.add_query(query(i, out)[0])
            serving.wait(change["change"], 120)
            since = next(q["since"] for q in serving.queries() if q["name"] == f"s{i}")
            deadline = time.monotonic() + 60
            first = None
            while first is None and time.monotonic() < deadline:
                row = next(q for q in serving.queries() if q["name"] == f"s{i}")
                if row["rows_out"]:
                    with lock:
                        first = batches[-1][0]
                        seen = batches[-1][1]
                time.sleep(0.05)
            firsts.append(
                {
                    "query": f"s{i}",
                    "since_batch": since,
                    "first_batch": first,
                    "batches_to_first": None if first is None else first - since + 1,
                    "seconds_to_first": None if first is None else round(seen - added_at, 2),
                }
            )
            serving.drop_query(f"s{i}" if j % 2 else f"s{j}")
        time.sleep(2)
    finally:
        stop.set()
        serving.stop()
    with lock:
        secs = [s * 1000 for _, _, s in batches[2:]]
    return {
        "adds": firsts,
        "batch_ms_p50": _percentile(secs, 50),
        "batch_ms_p99": _percentile(secs, 99),
        "batches": len(batches),
    }
