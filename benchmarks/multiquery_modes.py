"""How the ``multiquery`` benchmark runs a mode (`benchmarks.multiquery`): its session settings,
its jobs, and those jobs run one after another on one session, in a child process after a
warm-up (or in this process, for the test)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import typing as t
from dataclasses import asdict

from benchmarks.harness_process import run_child
from benchmarks.multiquery_jobs import job_text

if t.TYPE_CHECKING:
    from collections.abc import Sequence

    from benchmarks.data import Backlog
    from benchmarks.engines_measure import EngineRun
    from benchmarks.multiquery_jobs import QuerySpec

MODES = ("alone", "simple", "global")
"""CLASH's three baselines."""
_ILP = {"streamjoin.multiway.optimizer": "ilp", "streamjoin.share": "true"}
MODE_CONF: dict[str, dict[str, str]] = {
    "alone": _ILP,
    "simple": {"streamjoin.multiway.optimizer": "greedy", "streamjoin.share": "false"},
    "global": _ILP,
}
"""The session settings each mode runs under (read by the engine at every batch)."""

# (job text with "{out}" for its result directory, workdir) of each job a mode runs.
Jobs = list[tuple[str, str]]


def mode_jobs(mode: str, specs: Sequence[QuerySpec], backlog: Backlog, work: str) -> Jobs:
    """The jobs of `mode`: one per query for ``alone``, else one with every query."""
    groups = [[spec] for spec in specs] if mode == "alone" else [list(specs)]
    jobs = []
    for group in groups:
        name = group[0].sink if mode == "alone" else "all"
        jobs.append((job_text(group, backlog.streams, "{out}"), os.path.join(work, mode, name)))
    return jobs


def _cpu_seconds() -> float:
    """CPU time (user + system) of this process and its children so far: the JVM's included."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for p in [me, *me.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            times = p.cpu_times()
            total += times.user + times.system
    return total


def run_mode(
    mode: str, jobs: Jobs, warmup: tuple[str, str] | None = None
) -> tuple[list[EngineRun], float]:
    """Run `jobs` one after another on this process's session under `mode`'s settings (restored
    afterwards), `warmup` first, unmeasured; the runs, and the CPU seconds they took (less
    sensitive than wall time to other work on the machine)."""
    from benchmarks.engines import run_engine, session

    spark = session()
    saved = {key: spark.conf.get(key, None) for key in MODE_CONF[mode]}
    for key, value in MODE_CONF[mode].items():
        spark.conf.set(key, value)
    runs = []
    cpu = 0.0
    try:
        for i, (text, workdir) in enumerate([*([warmup] if warmup else []), *jobs]):
            if i == (1 if warmup else 0):
                cpu = _cpu_seconds()
            shutil.rmtree(workdir, ignore_errors=True)
            os.makedirs(workdir)
            out = os.path.join(workdir, "out")
            runs.append(run_engine("streamjoin", text.replace("{out}", out), workdir))
        cpu = _cpu_seconds() - cpu
    finally:
        for key, old in saved.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)
    return (runs[1:] if warmup else runs), cpu


def run_mode_process(mode: str, jobs: Jobs, warmup: tuple[str, str] | None) -> dict[str, t.Any]:
    """`run_mode` in a child process: ``runs`` (each as a dict), ``cpu_seconds``,
    ``peak_rss_mb`` (the process tree's), or ``error``."""
    first = jobs[0][1]
    os.makedirs(first, exist_ok=True)
    plan, result = os.path.join(first, "..", "plan.json"), os.path.join(first, "..", "runs.json")
    with open(plan, "w", encoding="utf-8") as f:
        json.dump({"mode": mode, "jobs": jobs, "warmup": warmup}, f)
    if os.path.exists(result):
        os.remove(result)
    import streamjoin

    # The child imports the same benchmarks and streamjoin as this process, whatever another
    # editable install of the package may point to.
    src = os.path.dirname(os.path.dirname(streamjoin.__file__))
    code, tail, peak_mb = run_child(["benchmarks.multiquery", "--child", plan, result], [src])
    if code != 0 or not os.path.exists(result):
        return {"error": f"exit {code}: {tail}"}
    with open(result, encoding="utf-8") as f:
        measured: dict[str, t.Any] = json.load(f)
    return measured | {"peak_rss_mb": peak_mb}


def _child(plan_file: str, result_file: str) -> int:
    with open(plan_file, encoding="utf-8") as f:
        plan = json.load(f)
    warmup = tuple(plan["warmup"]) if plan["warmup"] else None
    jobs = [(text, workdir) for text, workdir in plan["jobs"]]
    runs, cpu = run_mode(plan["mode"], jobs, t.cast("tuple[str, str] | None", warmup))
    with open(result_file, "w", encoding="utf-8") as f:
        json.dump({"runs": [asdict(r) for r in runs], "cpu_seconds": round(cpu, 1)}, f)
    return 0 if all(r.error is None for r in runs) else 1


def _warmup(backlog: Backlog, specs: Sequence[QuerySpec], work: str) -> tuple[str, str]:
    """The first query over a copy of each stream's first file."""
    paths = {}
    for name, folder in backlog.streams.items():
        paths[name] = os.path.join(work, "warmup-data", name)
        shutil.rmtree(paths[name], ignore_errors=True)
        os.makedirs(paths[name])
        first = sorted(os.listdir(folder))[0]
        shutil.copy2(os.path.join(folder, first), paths[name])
    return job_text(specs[:1], paths, "{out}"), os.path.join(work, "warmup")
