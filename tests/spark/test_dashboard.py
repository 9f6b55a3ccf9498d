"""A served job seen from outside (`runtime.metrics`, `runtime.serve`): ``/metrics`` parsed with
prometheus-client's parser against the batch reports, the handle's history and plot, the
history file under the checkpoint, and the dashboard in headless Chromium.

One job for all: two file streams, one file a batch each (`N` batches, then no input, so the
figures stop changing), a band-and-key join on a 2×2 join matrix.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import typing as t
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from streamjoin.runtime.engine import Engine
from streamjoin.runtime.metrics.history import MetricsHistory, read_history
from streamjoin.runtime.serve.http import ControlServer
from streamjoin.runtime.serve.runview import Ui
from streamjoin.sql import parse_job
from tests.browser import Browser, find_or_install
from tests.e2e.files import write_batches

from .harness import sparks_metrics
from .streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from pyspark.sql import SparkSession

    from streamjoin.runtime.batch.processor import BatchReport
    from streamjoin.runtime.metrics.record import BatchFigures
    from streamjoin.runtime.serve.handle import Serving

N = 4
ARTIFACTS = Path(os.environ.get("STREAMJOIN_ARTIFACTS", Path(__file__).parents[2] / "artifacts"))
"""Where the dashboard's screenshot goes (``docs/img/dashboard.png`` is a copy of one)."""

QUERY = """
CREATE SINK q WITH (format = 'parquet', path = '{out}');
INSERT INTO q SELECT a.id AS i1, b.id AS i2 FROM A a JOIN B b
  ON a.k = b.k AND abs(a.x - b.x) <= 3
 AND b.ts BETWEEN a.ts - INTERVAL '3' SECOND AND a.ts + INTERVAL '3' SECOND
WITH (partitioning = 'matrix', units = 4, adapt = false);
"""


@dataclass
class Running:
    serving: Serving
    port: int
    checkpoint: Path
    reports: list[BatchReport]
    done: threading.Condition

    def reach(self, batches: int) -> list[BatchReport]:
        with self.done:
            assert self.done.wait_for(lambda: len(self.reports) >= batches, timeout=180)
            return list(self.reports)

    def get(self, path: str) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=30) as got:
            return str(got.read().decode())


@pytest.fixture(scope="module")
def running(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    tmp = tmp_path_factory.mktemp("dashboard")
    write_batches(tmp / "in", make_batches(5, n_batches=N, rows_per_batch=10, keys=3))
    ddl = [
        stream_ddl(s, str(tmp / "in" / s)).replace("WITH (", "WITH (maxFilesPerTrigger = '1', ")
        for s in "AB"
    ]
    job = parse_job("\n".join([*ddl, QUERY.format(out=tmp / "out")]))
    reports: list[BatchReport] = []
    done = threading.Condition()

    def on_batch(report: BatchReport) -> None:
        with done:
            reports.append(report)
            done.notify_all()

    ckpt = tmp / "ckpt"
    serving = Engine(spark).start(job, checkpoint=str(ckpt), on_batch=on_batch)
    server = ControlServer(serving, "127.0.0.1", 0).start()
    try:
        yield Running(serving, server.port, ckpt, reports, done)
    finally:
        server.stop()
        serving.stop()
    serving.raise_failure()


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _samples(text: str) -> Samples:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _by(samples: Samples, name: str) -> dict[str, float]:
    """The samples of `name`, by their one label's value."""
    return {labels[0][1]: v for (n, labels), v in samples.items() if n == name and labels}


def test_run_with_ui_serves_the_runs_figures(spark: SparkSession, tmp_path: Path) -> None:
    write_batches(tmp_path / "in", make_batches(6, n_batches=2, rows_per_batch=6, keys=3))
    ddl = [
        stream_ddl(s, str(tmp_path / "in" / s)).replace(
            "WITH (", "WITH (maxFilesPerTrigger = '1', "
        )
        for s in "AB"
    ]
    job = parse_job("\n".join([*ddl, QUERY.format(out=tmp_path / "out")]))
    with socket.socket() as probe:  # (a free port, named before the run starts)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    seen: list[tuple[int, Samples, dict[str, t.Any]]] = []

    class Watched(MetricsHistory):
        def record(self, report: BatchReport, queries: Sequence[str]) -> BatchFigures:
            figures = super().record(report, queries)
            metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30)
            status = urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=30)
            seen.append((report.batch, _samples(metrics.read().decode()), json.load(status)))
            return figures

    summary = Engine(spark).run(
        job,
        checkpoint=str(tmp_path / "ckpt"),
        once=True,
        progress=False,
        metrics=Watched(str(tmp_path / "ckpt" / "metrics")),
        ui=Ui(port=port),
    )
    assert [b for b, _, _ in seen] == [0, 1], seen
    _, samples, status = seen[-1]
    assert samples[("streamjoin_rows_out_total", (("query", "q1"),))] == summary.out["q1"]
    assert status["last_batch"] == 1 and status["queries"] == 1
    assert (tmp_path / "ckpt" / "metrics" / "batches.jsonl").exists()
    with pytest.raises(OSError):  # (the endpoint ends with the run)
        urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5)


def test_the_dashboard_shows_what_metrics_says(running: Running) -> None:
    try:
        binary = find_or_install()
    except RuntimeError as err:
        pytest.skip(f"no headless Chromium: {err}")
    browser = Browser(binary)
    try:
        browser.open(f"http://127.0.0.1:{running.port}/")
        shown = "document.getElementById('last-batch').textContent"
        browser.wait_for(f"Number({shown}) >= 1", 180)  # two batches drawn
        reports = running.reach(N)
        browser.wait_for(f"{shown} === '{reports[-1].batch}'", 30)
        ids = ("batches", "last-batch", "rows-in-total", "rows-out-total", "state-rows")
        values = browser.evaluate(
            "({"
            + ", ".join(f"'{i}': document.getElementById('{i}').textContent" for i in ids)
            + "})"
        )
        table = browser.evaluate(
            "document.querySelector('#queries tr[data-query=q1] .rows-out').textContent"
        )
        units = browser.evaluate("document.querySelectorAll('#heatmaps rect').length")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        browser.screenshot(str(ARTIFACTS / "dashboard.png"))
    finally:
        browser.close()
    samples = _samples(running.get("/metrics"))
    assert float(values["batches"]) == samples[("streamjoin_batches_total", ())] == N
    assert float(values["last-batch"]) == samples[("streamjoin_batch", ())]
    assert float(values["rows-in-total"]) == sum(_by(samples, "streamjoin_rows_in_total").values())
    rows_out = _by(samples, "streamjoin_rows_out_total")
    assert float(values["rows-out-total"]) == float(table) == rows_out["q1"] > 0
    assert float(values["state-rows"]) == sum(_by(samples, "streamjoin_state_rows").values())
    assert units == 4  # (the 2×2 matrix)
    assert (ARTIFACTS / "dashboard.png").stat().st_size > 10_000


def test_metrics_are_the_batch_reports(running: Running) -> None:
    reports = running.reach(N)
    got = _samples(running.get("/metrics"))
    last = reports[-1]
    assert got[("streamjoin_batches_total", ())] == len(reports) == N
    assert got[("streamjoin_batch", ())] == last.batch
    rows_in = {
        s: sum(r.streams[s].ok + r.streams[s].late + r.streams[s].malformed for r in reports)
        for s in "AB"
    }
    assert _by(got, "streamjoin_rows_in_total") == rows_in
    assert sum(rows_in.values()) == sum(r.rows_in for r in reports)
    assert _by(got, "streamjoin_rows_out_total") == {"q1": sum(r.out["q1"] for r in reports)}
    late = sum(_by(got, "streamjoin_late_rows_total").values())
    assert late == sum(r.late for r in reports) > 0  # (the generated streams carry late rows)
    assert _by(got, "streamjoin_batch_rows_in") == {
        s: last.streams[s].ok + last.streams[s].late + last.streams[s].malformed for s in "AB"
    }
    assert sum(_by(got, "streamjoin_state_rows").values()) == last.state_rows
    assert last.watermark is not None
    assert got[("streamjoin_watermark_seconds", ())] == last.watermark / 1e6
    assert got[("streamjoin_batch_seconds", ())] == pytest.approx(last.seconds)
    assert _by(got, "streamjoin_batch_phase_seconds") == pytest.approx(last.phases)
    units = sum(v for (n, _), v in got.items() if n == "streamjoin_unit_rows")
    assert units == sum(last.units["q1"].per_unit) > 0
    schemes = [dict(labels)["scheme"] for (n, labels) in got if n == "streamjoin_scheme_info"]
    assert len(schemes) == 1 and "matrix" in schemes[0]


def test_sparks_progress_carries_each_batchs_figures(running: Running) -> None:
    reports = running.reach(N)
    query = running.serving.query
    assert query is not None
    deadline = time.monotonic() + 30
    published: dict[int, t.Any] = {}
    while len(published) < N and time.monotonic() < deadline:
        for p in query.recentProgress:
            row = p.observedMetrics.get("streamjoin")
            if row is not None and row.batch is not None:
                published[p.batchId] = row
        time.sleep(0.1)  # (Spark adds a batch's progress after foreachBatch returns)
    for r in reports:
        row = published[r.batch]
        assert row.batch == r.batch
        assert row.rows_in == r.rows_in and row.late == r.late
        assert row.rows_out == sum(r.out.values()) > 0
        assert row.state_rows == r.state_rows
        assert row.seconds == pytest.approx(r.seconds)
        record = json.loads(row.figures)
        assert record["out"] == r.out and record["units"]["q1"]["probe"]


def test_sparks_metrics_system_reports_the_newest_batch(
    spark: SparkSession, running: Running
) -> None:
    last = running.reach(N)[-1]
    got = sparks_metrics(spark)
    assert got["batch"] == last.batch and got["rows_in"] == last.rows_in
    assert got["rows_out"] == sum(last.out.values()) and got["state_rows"] == last.state_rows
    assert got["seconds"] == pytest.approx(last.seconds) and "figures" not in got


def test_history_plot_and_file(running: Running, tmp_path: Path) -> None:
    reports = running.reach(N)
    table = running.serving.history()
    assert list(table["batch"]) == [r.batch for r in reports]
    assert list(table["rows_out"]) == [r.out["q1"] for r in reports]
    assert list(table["state_rows"]) == [r.state_rows for r in reports]
    assert list(table["rows_in.A"]) == [
        r.streams["A"].ok + r.streams["A"].late + r.streams["A"].malformed for r in reports
    ]
    assert table["latency"].notna().all() and (table["seconds"] > 0).all()
    kept = read_history(str(running.checkpoint / "metrics"))
    assert [(f.batch, f.out) for f in kept] == [(r.batch, r.out) for r in reports]
    figure = running.serving.plot()
    assert len(figure.axes) == 4
    figure.savefig(tmp_path / "history.png")
    assert (tmp_path / "history.png").stat().st_size > 10_000
    assert "matrix" in running.serving.plan()
