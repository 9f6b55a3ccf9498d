"""The soak's sampler (`benchmarks.soak`): the engine's resident memory, its Python driver and
its JVM apart, the checkpoint's bytes by part, and at longer intervals the JVM's live heap."""

from __future__ import annotations

import contextlib
import os
import threading
import time
import typing as t

from benchmarks.soak_heap import heap_committed, live_heap

CHECKPOINT_PARTS = {
    "spark": "Spark's query logs (offsets, commits, the file source's log)",
    "manifests": "streamjoin's manifests (the chain since the newest whole one)",
    "state": "stored state (none where it is read back from the input files)",
    "metrics": "the metrics history (rotated, capped)",
}


def _du(path: str) -> int:
    total = 0
    for d, _, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.path.getsize(os.path.join(d, f))
    return total


class Sampler:
    """Memory and checkpoint bytes of the engine child process, sampled in a thread."""

    def __init__(self, ckpt: str, every: float, gc_every: float) -> None:
        self.ckpt, self.every, self.gc_every = ckpt, every, gc_every
        self.samples: list[dict[str, t.Any]] = []
        self.live_heap: list[dict[str, t.Any]] = []
        self.histograms: list[tuple[float, dict[str, int]]] = []
        """The live heap by class at each collection (the first and last are reported)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-sampler", daemon=True)
        self._started = time.time()

    def start(self) -> None:
        self._started = time.time()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _engine(self) -> tuple[t.Any, t.Any] | tuple[None, None]:
        """The engine's Python process (this one's child) and its JVM."""
        import psutil

        for child in psutil.Process().children():
            jvms = [p for p in child.children(recursive=True) if p.name() == "java"]
            if jvms:
                return child, jvms[0]
        return None, None

    def _run(self) -> None:
        import psutil

        last_gc = time.time()
        while not self._stop.wait(self.every):
            python, jvm = self._engine()
            if python is None or jvm is None:
                continue
            now = time.time()
            sample: dict[str, t.Any] = {"t": round(now - self._started, 1)}
            with contextlib.suppress(psutil.Error):
                sample["python_rss_mb"] = round(python.memory_info().rss / 2**20, 1)
                sample["jvm_rss_mb"] = round(jvm.memory_info().rss / 2**20, 1)
            for part in CHECKPOINT_PARTS:
                sample[f"ckpt_{part}_mb"] = round(_du(os.path.join(self.ckpt, part)) / 2**20, 3)
            sample["ckpt_mb"] = round(_du(self.ckpt) / 2**20, 3)
            self.samples.append(sample)
            if now - last_gc >= self.gc_every:
                last_gc = now
                histogram = live_heap(jvm.pid)
                if "total" in histogram:
                    mb = round(histogram["total"] / 2**20, 1)
                    entry: dict[str, t.Any] = {"t": sample["t"], "heap_mb": mb}
                    committed = heap_committed(jvm.pid)
                    if committed is not None:
                        entry["heap_committed_mb"] = round(committed / 2**20, 1)
                    self.live_heap.append(entry)
                    self.histograms.append((sample["t"], histogram))
