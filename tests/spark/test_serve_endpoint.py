"""A job served by `Engine.start` on file streams, its queries changed through the HTTP control
endpoint while it runs (`runtime.serve.http`, `serve_client`).

All input files are there from the start, one a batch per stream, so the batches are the
generated ones; the batch each change applies in depends on timing and is read from the query
set each batch's manifest recorded. Each query's output is the reference's over the batches it
ran in.
"""

from __future__ import annotations

import threading
import typing as t

import pytest

from streamjoin.errors import JobError, StreamJoinError
from streamjoin.runtime.engine import Engine
from streamjoin.runtime.serve.http import ControlServer
from streamjoin.runtime.serve.queries import QuerySet
from streamjoin.serve_client import call
from tests.e2e.files import write_batches

from .streams import make_batches
from .test_serve import Lives, _base, _check, _everything, _text

if t.TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession

    from streamjoin.model import Job
    from streamjoin.runtime.batch.processor import BatchReport

TOKEN = "s3cret-token"


def test_queries_changed_over_http_while_the_stream_runs(
    spark: SparkSession, tmp_path: Path
) -> None:
    n = 12
    batches = make_batches(31, streams=("A", "B", "C"), n_batches=n, rows_per_batch=8, keys=3)
    write_batches(tmp_path / "in", batches)
    base = _base(tmp_path, ("ab",), files=True)
    sets: dict[int, QuerySet] = {}
    done = threading.Condition()

    def on_batch(report: BatchReport) -> None:
        with done:
            sets[report.batch] = QuerySet.of(report.manifest.served)
            done.notify_all()

    def reach(batch: int) -> None:
        with done:
            assert done.wait_for(lambda: batch in sets, timeout=120), (batch, sorted(sets))

    serving = Engine(spark).start(
        base,
        checkpoint=str(tmp_path / "ckpt"),
        trigger="1 second",
        history=10_000_000,
        on_batch=on_batch,
    )
    server = ControlServer(serving, "127.0.0.1", 0, TOKEN).start()
    client: dict[str, t.Any] = {"port": server.port, "token": TOKEN}
    try:
        reach(1)
        with pytest.raises(StreamJoinError, match="valid token"):
            call("GET", "/status", port=server.port)
        with pytest.raises(StreamJoinError, match="valid token"):
            call("GET", "/status", port=server.port, token="wrong")
        bad = _text(tmp_path, "bc_band").replace("c.x", "c.nope", 1)
        with pytest.raises(JobError) as refused:
            call("POST", "/queries", {"sql": bad, "source": "bad.sql"}, **client)
        assert (refused.value.line, refused.value.source) == (2, "bad.sql")
        assert "nope" in refused.value.message
        added = call("POST", "/queries", {"sql": _text(tmp_path, "bc_band"), "wait": 60}, **client)
        assert added["name"] == "bc_band" and added["applied"] is True
        listed = {q["name"]: q for q in call("GET", "/queries", **client)}
        assert listed["bc_band"]["state"] == "running" and listed["q1"]["state"] == "running"
        start = listed["bc_band"]["since"]
        reach(start + 2)
        dropped = call("DELETE", "/queries/ab?wait=60", **client)
        assert dropped == {"name": "q1", "state": "stopping", "change": 2, "applied": True}
        assert [q["name"] for q in call("GET", "/queries", **client)] == ["bc_band"]
        reach(n - 1)
        status = call("GET", "/status", **client)
        assert status["active"] and status["queries"] == 1 and status["error"] is None
    finally:
        server.stop()
        serving.stop()
    serving.raise_failure()
    assert sorted(sets) == list(range(n))
    ran = {
        name: [b for b in range(n) if name in _names(base, sets[b])] for name in ("q1", "bc_band")
    }
    assert ran["bc_band"] == list(range(start, n))
    stop = ran["q1"][-1] + 1
    assert ran["q1"] == list(range(stop)) and start < stop < n
    lives: Lives = {"ab": [(0, stop)], "bc_band": [(start, None)]}
    _check(spark, _everything(tmp_path, base), batches, lives)


def _names(base: Job, queries: QuerySet) -> set[str]:
    return {q.name for q in queries.job(base).queries}


def test_a_change_applies_while_the_streams_are_idle(spark: SparkSession, tmp_path: Path) -> None:
    """Spark's loop runs a batch only for new input; a change's file is input of its own
    (`ServedQueries.ticks`), so a band query added, and the job's query dropped, while no stream
    has new rows each apply in a batch of their own, and the output of the rows that come after
    is exact."""
    batches = make_batches(37, streams=("A", "B", "C"), n_batches=4, rows_per_batch=8, keys=3)
    write_batches(tmp_path / "in", batches[:2])
    base = _base(tmp_path, ("ab",), files=True)
    seen: dict[int, tuple[QuerySet, int]] = {}
    done = threading.Condition()

    def on_batch(report: BatchReport) -> None:
        with done:
            seen[report.batch] = (QuerySet.of(report.manifest.served), report.rows_in)
            done.notify_all()

    def fed(n: int) -> None:  # (until n batches with input rows have committed)
        with done:
            ok = done.wait_for(lambda: sum(1 for _, rows in seen.values() if rows) >= n, 120)
            assert ok, seen

    serving = Engine(spark).start(
        base, checkpoint=str(tmp_path / "ckpt"), trigger="1 second", on_batch=on_batch
    )
    try:
        fed(2)
        added = serving.add_query(_text(tmp_path, "bc_band"))
        assert serving.wait(added["change"], 60), "the add never applied"
        dropped = serving.drop_query("ab")
        assert serving.wait(dropped["change"], 60), "the drop never applied"
        write_batches(tmp_path / "in", batches[2:], first=2)
        fed(4)
    finally:
        serving.stop()
    serving.raise_failure()
    order = sorted(seen)
    assert order == list(range(len(order))), order
    inputs = iter(batches)
    empty: dict[str, list[t.Any]] = {s: [] for s in "ABC"}
    sequence = [next(inputs) if seen[b][1] else empty for b in order]
    assert next(inputs, None) is None
    ran = {n: [b for b in order if n in _names(base, seen[b][0])] for n in ("q1", "bc_band")}
    start, stop = ran["bc_band"][0], ran["q1"][-1] + 1
    # Each change applied in a batch without input rows, before the rows written after it.
    assert not seen[start][1] and not seen[stop][1], seen
    assert ran["q1"] == list(range(stop)) and ran["bc_band"] == order[start:], ran
    lives: Lives = {"ab": [(0, stop)], "bc_band": [(start, None)]}
    _check(spark, _everything(tmp_path, base), sequence, lives)
