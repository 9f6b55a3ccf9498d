"""Each batch's figures (`runtime.metrics`): built from a `BatchReport`, kept and rotated under
the checkpoint, rendered as Prometheus text, and served at ``/metrics`` and ``/history`` under
the control endpoint's rules (a token beyond loopback, a local client's request without one)."""

from __future__ import annotations

import http.client
import json
import struct
import typing as t

import pytest
from prometheus_client.parser import text_string_to_metric_families

from streamjoin.adapt.schemestate import UnitStats
from streamjoin.plan import plan_job
from streamjoin.runtime.batch.context import BatchReport
from streamjoin.runtime.metrics.history import MetricsHistory, local_dir, read_history
from streamjoin.runtime.metrics.prometheus import render
from streamjoin.runtime.metrics.record import BatchFigures, figures_of
from streamjoin.runtime.metrics.sparkprogress import FIELDS, unsafe_row, values
from streamjoin.runtime.serve.http import ControlServer
from streamjoin.runtime.serve.runview import RunView
from streamjoin.runtime.state.manifest import Manifest, StateUnit, Totals
from streamjoin.runtime.state.nextmanifest import StreamStats
from streamjoin.sql import parse_job

if t.TYPE_CHECKING:
    from pathlib import Path

SECOND = 1_000_000


def _report(batch: int, *, late: int = 0, note: str = "matrix 2x2") -> BatchReport:
    streams = {
        "A": StreamStats(ok=5, late=late, malformed=1, min_ts=10 * SECOND, max_ts=20 * SECOND),
        "B": StreamStats(ok=3, max_ts=25 * SECOND),
    }
    manifest = Manifest(
        batch=batch,
        global_wm=18 * SECOND,
        units=[
            StateUnit("A", batch, 5, 10 * SECOND, 20 * SECOND, bytes=500),
            StateUnit("B", batch, 3, 25 * SECOND, 25 * SECOND, bytes=300),
            StateUnit("A", batch - 1, 2, 1, 2),
        ],
        totals=Totals(batch + 1, {"A": 6 * (batch + 1), "B": 3}, {"A": late}, {"A": 1}, {"q": 7}),
        routing={"q": {"params": {"name": "matrix", "n": 2, "m": 2, "units": 4}}},
    )
    return BatchReport(
        batch=batch,
        rows_in=9 + late,
        late=late,
        malformed=1,
        out={"q": 4},
        state_rows=10,
        watermark=18 * SECOND,
        seconds=0.5,
        manifest=manifest,
        phases={"join": 0.3, "commit": 0.2},
        units={"q": UnitStats((1, 2, 3, 4), (0, 5, 0, 0), row_bytes=10.0)},
        routing={"q": note},
        shed={"q": {"left": 2, "right": 0, "left.pairs": 7, "right.pairs": 0}},
        streams=streams,
    )


def test_figures_come_from_the_report_and_the_commit_time() -> None:
    before = figures_of(_report(0), ["q", "old"])
    f = figures_of(_report(1, late=2, note="matrix 2x2 -> matrix 1x4"), ["q", "new"], before, 30.0)
    assert f.rows_in == {"A": 8, "B": 3} and f.late == {"A": 2, "B": 0}
    assert f.state_rows == {"A": 7, "B": 3} and f.state_bytes == {"A": 500, "B": 300}
    assert f.newest == 25 * SECOND and f.latency == 5.0 and f.watermark_lag == 12.0
    assert f.units == {
        "q": {"probe": [1, 2, 3, 4], "store": [0, 5, 0, 0], "store_bytes": [0, 50, 0, 0]}
    }
    assert f.schemes == {"q": "matrix 2x2"} and f.shapes["q"]["m"] == 2
    assert f.events == [
        "q: matrix 2x2 -> matrix 1x4",
        "query new added",
        "query old dropped",
        "2 late and 1 malformed rows to the dead letters",
        "q: 2 new rows did not probe (overload), missing about 7 pairs",
    ]
    assert BatchFigures.of(json.loads(json.dumps(f.to_dict()))) == f
    row = f.flat()
    assert (row["rows_in"], row["rows_out"], row["out.q"], row["phase.join"]) == (11, 4, 4, 0.3)


def test_the_row_published_in_sparks_progress() -> None:
    f = figures_of(_report(1, late=2), ["q"], None, 30.0)
    row = values(f)
    assert list(row) == list(FIELDS)
    assert (row["batch"], row["rows_in"], row["rows_out"], row["late"]) == (1, 11, 4, 2)
    assert (row["state_rows"], row["state_bytes"], row["shed_rows"]) == (10, 800, 2)
    assert (row["latency"], row["watermark_lag"]) == (5.0, 12.0)
    assert BatchFigures.of(json.loads(row["figures"])) == f
    # Spark's row layout: a word of null bits, a word per field, the JSON padded to a word.
    encoded = unsafe_row(row | {"latency": None})
    nulls, *words = struct.unpack(f"={1 + len(FIELDS)}q", encoded[: 8 * (1 + len(FIELDS))])
    assert nulls == 1 << FIELDS.index("latency")
    assert words[FIELDS.index("rows_in")] == 11
    where = words[FIELDS.index("figures")]
    text = encoded[where >> 32 : (where >> 32) + (where & 0xFFFFFFFF)]
    assert text.decode() == row["figures"] and len(encoded) % 8 == 0


def test_history_keeps_the_newest_and_rotates_its_file(tmp_path: Path) -> None:
    history = MetricsHistory(str(tmp_path / "metrics"), keep=3, rotate_bytes=1500, parts=2)
    for b in range(8):
        history.record(_report(b), ["q"])
    assert [r.batch for r in history.records()] == [5, 6, 7]
    assert [r.batch for r in history.records(since=6)] == [7]
    files = sorted(p.name for p in (tmp_path / "metrics").iterdir())
    assert files == ["batches.1.jsonl", "batches.2.jsonl", "batches.jsonl"]
    read = [r.batch for r in read_history(str(tmp_path / "metrics"))]
    assert read == sorted(read) and read[-1] == 7 and read[0] > 0  # (the oldest part is gone)
    history.record(_report(7), ["q"])  # a replayed batch: its last line counts
    assert [r.batch for r in read_history(str(tmp_path / "metrics"))].count(7) == 1


def test_local_dir() -> None:
    assert local_dir("file:/tmp/c/metrics") == "/tmp/c/metrics"
    assert local_dir("file:///tmp/c/metrics") == "/tmp/c/metrics"
    assert local_dir("ckpt/metrics") == "ckpt/metrics"
    assert local_dir("hdfs://nn/c/metrics") is None


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_prometheus_text_parses_back_to_the_figures() -> None:
    history = MetricsHistory()
    assert render(history) == b""  # (nothing before the first batch)
    f = history.record(_report(3, late=1), ["q"])
    got = _samples(render(history).decode())
    assert got[("streamjoin_batches_total", ())] == 4
    assert got[("streamjoin_rows_in_total", (("stream", "A"),))] == 24
    assert got[("streamjoin_rows_out_total", (("query", "q"),))] == 7
    assert got[("streamjoin_batch", ())] == 3
    assert got[("streamjoin_batch_rows_in", (("stream", "A"),))] == 7
    assert got[("streamjoin_batch_phase_seconds", (("phase", "join"),))] == 0.3
    assert got[("streamjoin_state_rows", (("stream", "A"),))] == 7
    assert got[("streamjoin_watermark_seconds", ())] == 18
    assert got[("streamjoin_latency_seconds", ())] == pytest.approx(t.cast("float", f.latency))
    assert got[("streamjoin_unit_rows", (("query", "q"), ("role", "store"), ("unit", "1")))] == 5
    assert got[("streamjoin_unit_state_bytes", (("query", "q"), ("unit", "1")))] == 50
    assert got[("streamjoin_scheme_info", (("query", "q"), ("scheme", "matrix 2x2")))] == 1
    assert got[("streamjoin_shed_rows", (("direction", "left"), ("query", "q")))] == 2
    assert got[("streamjoin_shed_pairs", (("direction", "left"), ("query", "q")))] == 7


class FakeServing:
    def __init__(self) -> None:
        self.metrics = MetricsHistory()
        self.metrics.record(_report(0), ["q"])


def _get(port: int, path: str, **headers: str) -> tuple[int, str, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", path, headers=headers)
    answer = conn.getresponse()
    result = answer.status, answer.getheader("Content-Type") or "", answer.read()
    conn.close()
    return result


def test_metrics_history_and_dashboard_on_loopback() -> None:
    server = ControlServer(t.cast("t.Any", FakeServing()), "127.0.0.1", 0).start()
    try:
        status, kind, body = _get(server.port, "/metrics")
        assert status == 200 and kind.startswith("text/plain")
        assert _samples(body.decode())[("streamjoin_batch_rows_out", (("query", "q"),))] == 4
        status, _, body = _get(server.port, "/history?since=-1")
        assert status == 200 and [r["batch"] for r in json.loads(body)] == [0]
        assert _get(server.port, "/history?since=0")[2] == b"[]"
        status, kind, body = _get(server.port, "/")
        assert status == 200 and kind.startswith("text/html") and b"dashboard.js" in body
        assert _get(server.port, "/dashboard.js")[0] == 200
        # A page under another name (DNS rebinding) reads nothing.
        assert _get(server.port, "/metrics", Host="evil.example")[0] == 403
        assert _get(server.port, "/", Host="evil.example")[0] == 403
    finally:
        server.stop()


def test_beyond_loopback_every_read_needs_the_token() -> None:
    with pytest.raises(Exception, match="give it a token"):
        ControlServer(t.cast("t.Any", FakeServing()), "0.0.0.0", 0)
    server = ControlServer(t.cast("t.Any", FakeServing()), "0.0.0.0", 0, "tok").start()
    try:
        for path in ("/metrics", "/history", "/status"):
            assert _get(server.port, path)[0] == 401
            assert _get(server.port, path, Authorization="Bearer nope")[0] == 401
        status, _, body = _get(server.port, "/metrics", Authorization="Bearer tok")
        assert status == 200 and b"streamjoin_batch_rows_out" in body
        # The page itself holds no data: it loads, then sends the token with each read.
        assert _get(server.port, "/")[0] == 200
    finally:
        server.stop()


def test_a_run_shows_its_figures_and_takes_no_change() -> None:
    ddl = (
        "CREATE STREAM {} (k BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts) "
        "WITH (format = 'json', path = 'p');"
    )
    job = parse_job(
        f"{ddl.format('a')}\n{ddl.format('b')}\n"
        "CREATE SINK q WITH (format = 'json', path = 'q');\n"
        "INSERT INTO q SELECT a.k AS k FROM a JOIN b ON a.k = b.k;"
    )
    history = MetricsHistory()
    view = RunView(plan_job(job), history, lambda: True)
    assert view.status()["last_batch"] is None and view.queries()[0]["rows_out"] == 0
    history.record(_report(0), ["q1"])
    assert view.status()["last_batch"] == 0 and view.status()["batches"] == 1
    assert view.queries()[0]["name"] == "q1" and "streams:" in view.plan()
    server = ControlServer(view, "127.0.0.1", 0).start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        body = json.dumps({"sql": "INSERT INTO ..."})
        conn.request("POST", "/queries", body, {"Content-Type": "application/json"})
        answer = conn.getresponse()
        assert answer.status == 400 and b"queries are fixed" in answer.read()
        conn.close()
        assert _get(server.port, "/plan")[0] == 200
    finally:
        server.stop()


def test_a_file_that_cannot_be_written_stops_alone(tmp_path: Path) -> None:
    (tmp_path / "metrics").write_text("a file where the folder should be")
    history = MetricsHistory(str(tmp_path / "metrics"))
    history.record(_report(0), ["q"])
    history.record(_report(1), ["q"])
    assert [r.batch for r in history.records()] == [0, 1]
    assert history.failed is not None and "metrics" in history.failed
