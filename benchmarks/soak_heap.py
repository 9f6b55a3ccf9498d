"""The engine JVM's heap as the soak reads it (`benchmarks.soak`, ``jcmd``): its live objects by
class, the bytes the collector has committed, and the classes that grew most."""

from __future__ import annotations

import re
import subprocess


def _jcmd(jvm: int, command: str) -> str:
    """What ``jcmd <jvm> <command>`` printed (nothing if the JVM did not answer)."""
    run = subprocess.run(
        ["jcmd", str(jvm), command], capture_output=True, text=True, timeout=120, check=False
    )
    return run.stdout


def live_heap(jvm: int) -> dict[str, int]:
    """The JVM's live objects' bytes by class (``jcmd GC.class_histogram``, which collects
    first), with the total under ``"total"``; empty if the JVM did not answer."""
    return parse_histogram(_jcmd(jvm, "GC.class_histogram"))


def parse_histogram(text: str) -> dict[str, int]:
    """``GC.class_histogram``'s rows (``num: instances bytes class``) and its ``Total`` line."""
    found: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        # (A JDK class's row ends with its module, e.g. ``[B (java.base@17.0.15)``.)
        if len(parts) in (4, 5) and parts[0].endswith(":") and parts[2].isdigit():
            found[parts[3]] = found.get(parts[3], 0) + int(parts[2])
        elif len(parts) == 3 and parts[0] == "Total" and parts[2].isdigit():
            found["total"] = int(parts[2])
    return found


def heap_committed(jvm: int) -> int | None:
    """The bytes the JVM's heap has reserved from the system (``jcmd GC.heap_info``): the heap's
    size, which a collector grows toward ``-Xmx`` while the live part stays put."""
    return parse_heap_info(_jcmd(jvm, "GC.heap_info"))


def parse_heap_info(text: str) -> int | None:
    """The sum of ``GC.heap_info``'s ``total NK`` over its heap lines (a generation's, or the
    whole heap's for a collector of one region; JDK 22's G1 says ``total reserved NK,
    committed NK``); None where it has none (ZGC, Shenandoah)."""
    totals = [
        int(m.group(1)) * 1024
        for m in re.finditer(
            r"^\s*\S.*?\btotal (?:reserved \d+K, committed )?(\d+)K", text, re.MULTILINE
        )
    ]
    return sum(totals) if totals else None


def grown(first: dict[str, int], last: dict[str, int], top: int = 15) -> list[tuple[str, int]]:
    """The classes whose live bytes grew most from `first` to `last` (bytes grown)."""
    growth = {c: n - first.get(c, 0) for c, n in last.items() if c != "total"}
    return sorted(((c, d) for c, d in growth.items() if d > 0), key=lambda x: -x[1])[:top]
