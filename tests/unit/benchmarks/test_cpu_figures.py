"""Each engine's CPU over a run: read from the driver process's own count, and reported."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

from benchmarks.engines_measure import CpuClock
from benchmarks.harness_figures import figures
from benchmarks.nexmark_queries import nexmark_job
from benchmarks.report_backlog import table

# A process that burns `n` seconds of CPU in a thread that then ends (a summing of live threads
# would miss it), says so, and waits to be told to exit.
_BURNER = """
import sys, threading, time
def burn():
    end = time.process_time() + float(sys.argv[1])
    while time.process_time() < end:
        pass
t = threading.Thread(target=burn); t.start(); t.join()
print("done", flush=True)
sys.stdin.readline()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_clock_counts_cpu_of_threads_that_ended() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _BURNER, "0.3"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        clock = CpuClock(child.pid)
        assert child.stdout is not None and child.stdout.readline().strip() == "done"
        used = clock.seconds()
    finally:
        child.communicate("\n")
    assert used is not None
    # (The clock also counts this process, which only waited: a few hundredths at most.)
    assert 0.25 <= used < 1.0


def test_without_a_process_to_read_there_is_no_figure() -> None:
    assert CpuClock(None).seconds() is None


def _case() -> types.SimpleNamespace:
    backlog = types.SimpleNamespace(raw_bytes={"a": 3200}, total_rows=100, rows={"bid": 5000})
    job = nexmark_job("q7", {"bid": "/d/bid"}, "{out}")
    return types.SimpleNamespace(backlog=backlog, warmup_batches=None, job=job)


def test_a_stream_read_twice_counts_its_rows_once() -> None:
    """Spark counts the rows of a stream a query reads twice (q7) twice: a run that read the
    whole backlog has read the backlog's rows of its streams."""
    run = _run(6.0) | {"rows_in": 10_000}
    assert figures(run, _case())["rows"] == 5000  # type: ignore[arg-type]
    cut = run | {"stopped_early": True}  # (how much of the backlog it read is its count)
    assert figures(cut, _case())["rows"] == 10_000  # type: ignore[arg-type]


def _run(cpu: float | None) -> dict[str, object]:
    run: dict[str, object] = {"engine": "streamjoin", "rows_in": 1000, "seconds": 4.0}
    return run | {"batch_ms": [1.0, 2.0], "cpu_seconds": cpu}


def test_figures_give_the_cores_kept_busy_and_rows_per_cpu_second() -> None:
    f = figures(_run(6.0), _case())  # type: ignore[arg-type]
    assert (f["cpu_seconds"], f["cores_busy"], f["rows_per_cpu_second"]) == (6.0, 1.5, 166.7)
    old = figures(_run(None), _case())  # type: ignore[arg-type]
    assert (old["cores_busy"], old["rows_per_cpu_second"]) == (None, None)


def test_the_table_shows_cpu_or_a_dash_for_reports_without_it() -> None:
    with_cpu = figures(_run(6.0), _case())  # type: ignore[arg-type]
    without = figures(_run(None), _case())  # type: ignore[arg-type]
    case = {"case": "c", "ratios": {}, "results_agree": True}
    lines = table(
        {
            "cases": [
                case | {"engines": {"streamjoin": with_cpu}},
                case | {"engines": {"streamjoin": without}},
            ]
        }
    )
    assert "CPU s (cores)" in lines[0]
    assert lines[0].count("|") == lines[1].count("|") == lines[2].count("|")
    assert "| 6 (1.5) |" in lines[2]
    assert "| – |" in lines[3]
