"""Runs of the ``streamjoin`` command in a process group of their own, SIGKILLed whole."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import typing as t

from .cli import quick_driver

if t.TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path


def group_alive(pgid: int) -> list[str]:
    """Command lines of the live (not zombie) processes still in process group `pgid`."""
    out = subprocess.run(
        ["ps", "-eww", "-o", "pgid=,stat=,args="], capture_output=True, text=True, check=False
    ).stdout
    alive = []
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[0] == str(pgid) and not parts[1].startswith("Z"):
            alive.append(parts[2])
    return alive


class Runs:
    """Starts ``streamjoin run JOB --checkpoint CKPT`` runs, each logging to
    ``logs/run-<i>.log``, and kills them with their JVM; `leaks` lists any process that
    outlived its group's SIGKILL."""

    def __init__(
        self, logs: Path, job: Path, ckpt: Path, master: str | None, env: Mapping[str, str]
    ) -> None:
        self.logs = logs
        self.job = job
        self.ckpt = ckpt
        self.master = master
        self.env = env
        self.started = 0
        self.leaks: list[str] = []
        logs.mkdir(parents=True, exist_ok=True)

    def start(self, *extra: str) -> subprocess.Popen[bytes]:
        """Start the next run (`extra`: more options, e.g. ``--once``)."""
        args = ["run", str(self.job), "--checkpoint", str(self.ckpt), *extra]
        if self.master:
            args += ["--master", self.master]
        env = {**os.environ, "TZ": "UTC", **quick_driver(), **self.env}
        log = self.logs / f"run-{self.started}.log"
        self.started += 1
        with open(log, "wb") as out:
            return subprocess.Popen(
                [sys.executable, "-m", "streamjoin", *args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL the run's whole group and reap it; record and kill any member left after
        10 s (the JVM is in the group, so nothing should be)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        deadline = time.monotonic() + 10
        while (left := group_alive(proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.2)
        if left:
            self.leaks += left
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

    def tail(self, run: int, lines: int = 40) -> str:
        """The last `lines` lines of run `run`'s output."""
        path = self.logs / f"run-{run}.log"
        text = path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])
