"""Crash points for recovery tests: ``STREAMJOIN_FAULT=<point>:<batch>`` SIGKILLs the driver there;
``<point>:added``, there in the batch a served query added at run time starts in (whichever batch
the addition reached: a test need not race the trigger).

The kill is real (the process and its JVM die with no clean-up), so a test that uses it checks the
same recovery path as a machine failure at that moment. Unset, this costs one dict lookup.
"""

from __future__ import annotations

import os
import signal

POINTS = ("after-deadletter", "after-state", "after-sink", "after-commit")


def maybe_crash(point: str, batch_id: int | str) -> None:
    """SIGKILL this process if the environment asks for a crash at `point` in `batch_id` (a
    batch's id, or ``added``)."""
    spec = os.environ.get("STREAMJOIN_FAULT")
    if spec and spec == f"{point}:{batch_id}":
        os.kill(os.getpid(), signal.SIGKILL)
