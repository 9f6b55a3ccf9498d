"""The benchmarks' child processes (``python -m``, `run_child`), each engine's runs among them
(`run_engine_process`), with the peak resident memory of a child's process tree sampled while it
runs."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import typing as t
from dataclasses import dataclass

from benchmarks.engines import MASTER_ENV


@dataclass
class _Peak:
    rss: int = 0


def _sample_tree(pid: int, peak: _Peak, done: threading.Event) -> None:
    import psutil

    try:
        proc = psutil.Process(pid)
    except psutil.Error:
        return
    while not done.is_set():
        try:
            procs = [proc, *proc.children(recursive=True)]
            rss = 0
            for p in procs:
                with contextlib.suppress(psutil.Error):
                    rss += p.memory_info().rss
            peak.rss = max(peak.rss, rss)
        except psutil.Error:
            return
        done.wait(0.2)


def run_engine_process(
    engine: str,
    jobs: t.Sequence[tuple[str, str]],
    time_limit: float | None = None,
    live: dict[str, t.Any] | None = None,
    final: t.Sequence[bool] = (),
    log: str | None = None,
    master: str | None = None,
) -> list[dict[str, t.Any]]:
    """`engine` on each (job, workdir) of `jobs`, one after another in one child process; each
    run's EngineRun as a dict, with the process's peak memory. `live`: the fields of
    `benchmarks.engines_live.Live`, for a run on a live source (``--rate`` mode); `final[i]`: job
    i declares its input finished; `log`: a file for the child's whole stderr; `master`: a
    cluster's to run on (default: local mode)."""
    plan = []
    for i, (job, workdir) in enumerate(jobs):
        shutil.rmtree(workdir, ignore_errors=True)
        os.makedirs(workdir)
        job_file = os.path.join(workdir, "job.sql")
        with open(job_file, "w", encoding="utf-8") as f:
            f.write(job.replace("{out}", os.path.join(workdir, "out")))
        done = i < len(final) and final[i]
        item = {"job": job_file, "workdir": workdir, "time_limit": time_limit, "live": live}
        plan.append(item | {"final": done})
    first = jobs[0][1]
    plan_file, result = os.path.join(first, "plan.json"), os.path.join(first, "result.json")
    with open(plan_file, "w", encoding="utf-8") as f:
        json.dump(plan, f)
    args = ["benchmarks.engines", engine, plan_file, result]
    env = {MASTER_ENV: master} if master else None
    code, tail, peak_mb = run_child(args, extra_env=env, log=log)
    if not os.path.exists(result):
        return [{"engine": engine, "error": f"exit {code}: {tail}"} for _ in jobs]
    with open(result, encoding="utf-8") as f:
        runs: list[dict[str, t.Any]] = json.load(f)
    for run in runs:
        run["peak_rss_mb"] = peak_mb
    return runs


def run_child(
    args: t.Sequence[str],
    paths: t.Sequence[str] = (),
    extra_env: t.Mapping[str, str] | None = None,
    log: str | None = None,
) -> tuple[int, str, float]:
    """``python -m *args`` with this checkout's benchmarks (and `paths`) first on the path and
    `extra_env` in its environment, sampling its process tree's memory: (exit code, last lines of
    stderr, peak RSS in MB); its whole stderr is written to `log`, if given."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, **(extra_env or {}))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, *paths, env.get("PYTHONPATH", "")) if p)
    proc = subprocess.Popen(
        [sys.executable, "-m", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    peak, done = _Peak(), threading.Event()
    sampler = threading.Thread(target=_sample_tree, args=(proc.pid, peak, done), daemon=True)
    sampler.start()
    _, stderr = proc.communicate()
    done.set()
    sampler.join()
    if log is not None:
        with open(log, "w", encoding="utf-8") as f:
            f.write(stderr)
    tail = "\n".join(stderr.strip().splitlines()[-5:])
    return proc.returncode, tail, round(peak.rss / 2**20, 1)
