"""The ``--max-rate`` mode: the highest rate per stream at which each engine keeps up, found by
search over live runs (`benchmarks.rate`, whose *keeps up* criterion it uses).

From a starting rate, the rate doubles while the engine keeps up; then the gap between the
last rate kept up with and the first one not is halved a few times. Each probe is a whole live
run (warm-up, feed, drain) of one engine alone on the machine, so a search costs minutes per
engine. The figure is a lower bound within the last gap: the engine kept up at it, and did not
at a rate at most that gap above it.

A probe that does not keep up is run once more, and the rate counts as kept up only if the
second run keeps up (its result, where checked, equal to the exact answer): *keeps up* reads the
backlog when the feed stops, and one slow batch near the end (a cold code path met for the first
time, a collection) can put a run that keeps up just over its bound (measured: ours at 40,000
rows/s a stream, 2.53 s against 2.5, then kept up in four runs of four). A probe whose engine
failed is not run again.
"""

from __future__ import annotations

import time
import typing as t

from benchmarks.engines_flink import FLINK
from benchmarks.harness import _say, check_workload, machine, source_commit
from benchmarks.rate import run_rate
from benchmarks.workloads import PEERS

if t.TYPE_CHECKING:
    from collections.abc import Callable

START = 5_000.0
STEPS = 3
CAP = 1_000_000.0
"""No probe above this many rows per second per stream."""


def search(
    keeps_up: Callable[[float], bool], start: float = START, steps: int = STEPS, cap: float = CAP
) -> tuple[float | None, list[tuple[float, bool]]]:
    """The highest rate `keeps_up` held at (None: not even the lowest tried), and every probe
    in order. Below `start`, the rate halves until it holds (at most `steps` times)."""
    probes: list[tuple[float, bool]] = []

    def probe(rate: float) -> bool:
        ok = keeps_up(rate)
        probes.append((rate, ok))
        return ok

    good: float | None = None
    bad: float | None = None
    rate = start
    if probe(rate):
        good = rate
        while rate * 2 <= cap:
            rate *= 2
            if not probe(rate):
                bad = rate
                break
            good = rate
    else:
        bad = rate
        for _ in range(steps):
            rate /= 2
            if probe(rate):
                good = rate
                break
            bad = rate
    for _ in range(steps):
        if good is None or bad is None:
            break
        mid = round((good + bad) / 2)
        if probe(mid):
            good = mid
        else:
            bad = mid
    return good, probes


def run_max_rate(
    workload: str,
    size: str = "quick",
    *,
    start: float = START,
    duration: float | None = None,
    engines: t.Sequence[str] | None = None,
    progress: t.TextIO | None = None,
) -> dict[str, t.Any]:
    """Each engine's maximum sustainable rate on `workload` (one of the single-case two-stream
    workloads); the JSON object the CLI prints last."""
    check_workload(workload, size)
    if workload not in PEERS:
        msg = f"--max-rate runs on {', '.join(PEERS)}, not {workload!r}"
        raise ValueError(msg)
    began = time.monotonic()
    peer = PEERS[workload]
    found: dict[str, dict[str, t.Any]] = {}
    # (Flink only when named: it needs PyFlink's own venv, `engines_flink`.)
    every = ("streamjoin", peer, FLINK)
    for engine in [e for e in every if (e != FLINK if engines is None else e in engines)]:
        found[engine] = _searched(workload, size, start, duration, engine, progress)
    ratio, flink_ratio = (_over(found, "streamjoin", other) for other in (peer, FLINK))
    return {
        "workload": workload,
        "mode": "max-rate",
        "size": size,
        "start_rate": start,
        "duration_s": duration,
        "machine": machine(),
        "commit": source_commit(),
        "cases": [
            {
                "case": workload,
                "peer": peer,
                "engines": found,
                "ratio": ratio,
                **({"flink_ratio": flink_ratio} if FLINK in found else {}),
            }
        ],
        "wall_seconds": round(time.monotonic() - began, 1),
    }


def _searched(
    workload: str,
    size: str,
    start: float,
    duration: float | None,
    engine: str,
    progress: t.TextIO | None,
) -> dict[str, t.Any]:
    """`engine`'s highest rate kept up with, its probes, each run's result check (a probe run
    again has two), and the rates run again (a first run did not keep up)."""
    checked: list[bool | None] = []
    again: list[float] = []

    def keeps_up(rate: float) -> bool:
        ok, agree, failed = _probe(workload, rate, size, duration, engine, progress)
        checked.append(agree)
        if not ok and not failed:
            again.append(rate)
            ok, agree, _ = _probe(workload, rate, size, duration, engine, progress)
            checked.append(agree)
        return ok

    best, probes = search(keeps_up, start)
    _say(progress, f"[{workload}] {engine}: keeps up to {best} rows/s per stream")
    return {"max_rate": best, "probes": probes, "results_agree": checked, "run_again": again}


def _probe(
    workload: str,
    rate: float,
    size: str,
    duration: float | None,
    engine: str,
    progress: t.TextIO | None,
) -> tuple[bool, bool | None, bool]:
    """One live run of `engine` at `rate`: whether it kept up (and its result, where checked,
    equals the exact answer), whether its result agrees (None: unchecked), whether it failed."""
    report = run_rate(workload, rate, size, duration=duration, engines=[engine], progress=progress)
    agree = [c["results_agree"] for c in report["cases"]]
    runs = [c["engines"][engine] for c in report["cases"]]
    ok = False not in agree and all(r.get("keeps_up") for r in runs)
    verdict = False if False in agree else None if None in agree else True
    return ok, verdict, any(r.get("error") for r in runs)


def _over(found: dict[str, dict[str, t.Any]], ours: str, other: str) -> float | None:
    """`ours`'s highest rate over `other`'s (None where either has none)."""
    a, b = found.get(ours, {}).get("max_rate"), found.get(other, {}).get("max_rate")
    return round(a / b, 2) if a and b else None


def summary_lines(report: dict[str, t.Any]) -> list[str]:
    """One human line per case: each engine's maximum rate and the ratio."""
    lines = []
    for c in report["cases"]:
        rates = ", ".join(f"{e} {r['max_rate']}" for e, r in c["engines"].items())
        flink = f", ours ÷ Flink's {c['flink_ratio']}" if "flink_ratio" in c else ""
        lines.append(
            f"{c['case']}: highest rows/s per stream kept up with: {rates}; ratio {c['ratio']}"
            f"{flink}"
        )
    return lines


def maxrate_lines(*reports: dict[str, t.Any]) -> list[str]:
    """The RESULTS.md table of max-rate reports: a row per case."""
    lines = [
        "| highest rate kept up with (`--max-rate`) | ours, rows/s per stream | peer | peer's | "
        "ours ÷ peer's | probes (✓ kept up) |",
        "|" + "---|" * 6,
    ]
    for c in (c for report in reports for c in report["cases"]):
        ours = c["engines"].get("streamjoin", {})
        theirs = c["engines"].get(c["peer"], {})
        lines.append(
            f"| {c['case']} | {ours.get('max_rate', '–')} | {c['peer']} | "
            f"{theirs.get('max_rate', '–')} | {c.get('ratio') or '–'} | "
            f"{probes_cell(c['engines'])} |"
        )
    return lines


def probes_cell(engines: t.Mapping[str, t.Mapping[str, t.Any]]) -> str:
    """Each engine's probes in order, each rate marked ✓ (kept up) or ✗."""
    return "; ".join(
        f"{e}: " + ", ".join(f"{r:g}{'✓' if ok else '✗'}" for r, ok in v["probes"])
        for e, v in engines.items()
    )
