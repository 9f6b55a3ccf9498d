"""The ``--max-rate`` mode: the highest rate per stream at which each engine keeps up, found by
search over live runs (`benchmarks.rate`, whose *keeps up* criterion it uses).

From a starting rate, the rate doubles while the engine keeps up; then the gap between the
last rate kept up with and the first one not is halved a few times. Each probe is a whole live
run (warm-up, feed, drain) of one engine alone on the machine, so a search costs minutes per
engine. The figure is a lower bound within the last gap: the engine kept up at it, and did not
at a rate at most that gap above it.
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
        checked: list[bool | None] = []

        def keeps_up(
            rate: float, engine: str = engine, checked: list[bool | None] = checked
        ) -> bool:
            report = run_rate(
                workload, rate, size, duration=duration, engines=[engine], progress=progress
            )
            # (A probe whose result differs from the exact answer did not keep up.)
            agree = [c["results_agree"] for c in report["cases"]]
            checked.append(False if False in agree else None if None in agree else True)
            return False not in agree and all(
                c["engines"][engine].get("keeps_up") for c in report["cases"]
            )

        best, probes = search(keeps_up, start)
        _say(progress, f"[{workload}] {engine}: keeps up to {best} rows/s per stream")
        found[engine] = {"max_rate": best, "probes": probes, "results_agree": checked}
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
        probes = "; ".join(
            f"{e}: " + ", ".join(f"{r:g}{'✓' if ok else '✗'}" for r, ok in v["probes"])
            for e, v in c["engines"].items()
        )
        lines.append(
            f"| {c['case']} | {ours.get('max_rate', '–')} | {c['peer']} | "
            f"{theirs.get('max_rate', '–')} | {c.get('ratio') or '–'} | {probes} |"
        )
    return lines
