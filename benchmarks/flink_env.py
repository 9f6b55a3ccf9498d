"""PyFlink's own virtual environment, made on first use: the ``flink`` engine's Flink job runs in
its python (`engines_flink_runner`), apart from the library's.

Not an extra of the project: ``apache-flink`` 2.3.0 pulls ``apache-beam`` 2.61, whose pins move
the packages PySpark 4 runs on below its floor when installed beside it (pyarrow 26.0.1 → 16.1,
beam wants < 17 where PySpark 4 needs >= 18; py4j 0.10.9.9 → 0.10.9.7; numpy 2.4.6 → 2.1.3;
pandas 2.3.3 → 2.2.3). So it lives in ``$XDG_CACHE_HOME/streamjoin/flink-2.3.0`` (the cache
directory of streamjoin's jar), made by ``python -m venv`` and ``pip install
apache-flink==2.3.0`` (once: about 850 MB with Flink's jars): by `flink_python` on
the first run of the engine, or ahead of it by ``python3 -m benchmarks.flink_env``.

A venv is taken as made only once its pip install has ended well (`_MADE`, written last), so
one left half-made by a failure or a kill is made again from nothing.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import typing as t

from streamjoin.runtime.jvm.jar import cache_dir

FLINK_VERSION = "2.3.0"
FLINK_REQUIREMENT = f"apache-flink=={FLINK_VERSION}"
MAKE_COMMAND = "python3 -m benchmarks.flink_env"
"""The command that makes the venv ahead of its first use (tests never make it)."""

_MADE = ".made"
"""The file whose presence says the venv's pip install ended well."""


def venv_dir() -> str:
    """Where PyFlink's venv is (made or not)."""
    return os.path.join(cache_dir(), f"flink-{FLINK_VERSION}")


def venv_python(directory: str | None = None) -> str:
    """The python of the venv in `directory` (default `venv_dir`)."""
    return os.path.join(directory or venv_dir(), "bin", "python")


def flink_env_ready() -> bool:
    """Whether PyFlink's venv is made (nothing is made here)."""
    return os.path.exists(os.path.join(venv_dir(), _MADE))


def flink_python(progress: t.TextIO = sys.stderr) -> str:
    """The python of PyFlink's venv, made first if it is not (progress to `progress`); a
    RuntimeError with pip's output when it cannot be."""
    directory = venv_dir()
    if flink_env_ready():
        return venv_python(directory)
    os.makedirs(os.path.dirname(directory), exist_ok=True)
    # One maker at a time: two engine runs starting together would install into one folder.
    with open(directory + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not flink_env_ready():
            _make(directory, progress)
    return venv_python(directory)


def _make(directory: str, progress: t.TextIO) -> None:
    shutil.rmtree(directory, ignore_errors=True)  # (a half-made one: made again)
    print(f"flink: making PyFlink's venv in {directory} (once) …", file=progress, flush=True)
    _step([sys.executable, "-m", "venv", directory], progress)
    python = venv_python(directory)
    print(f"flink: pip install {FLINK_REQUIREMENT} (a few minutes) …", file=progress, flush=True)
    _step([python, "-m", "pip", "install", "--progress-bar", "off", FLINK_REQUIREMENT], progress)
    with open(os.path.join(directory, _MADE), "w", encoding="utf-8") as f:
        f.write(f"{FLINK_REQUIREMENT}\n")
    print(f"flink: PyFlink's venv is made: {python}", file=progress, flush=True)


def _step(command: list[str], progress: t.TextIO) -> None:
    """Run `command`, its output passed on to `progress`; a RuntimeError with its last lines
    when it fails."""
    tail: collections.deque[str] = collections.deque(maxlen=40)
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    assert proc.stdout is not None
    with contextlib.closing(proc.stdout):
        for line in proc.stdout:
            tail.append(line.rstrip())
            print(f"  {line.rstrip()}", file=progress, flush=True)
    if proc.wait() != 0:
        output = "\n".join(tail)
        msg = f"flink: `{' '.join(command)}` failed (exit {proc.returncode}):\n{output}"
        raise RuntimeError(msg)


if __name__ == "__main__":
    print(flink_python())
