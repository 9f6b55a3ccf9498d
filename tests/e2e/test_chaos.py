"""Chaos: SIGKILLs at random moments while input keeps arriving; the output stays exact.

CI runs two kills on a random seed (printed, and named by any failure);
``STREAMJOIN_CHAOS_KILLS=20`` runs the long version, ``STREAMJOIN_CHAOS_SEED=N`` a given seed.
"""

from __future__ import annotations

import os
import typing as t

from .chaos import ChaosConfig, chaos_seed, run_chaos

if t.TYPE_CHECKING:
    from pathlib import Path


def test_sigkill_at_random_moments_while_input_arrives(tmp_path: Path) -> None:
    seed, kills = chaos_seed(), int(os.environ.get("STREAMJOIN_CHAOS_KILLS", "2"))
    rerun = (
        f"STREAMJOIN_CHAOS_SEED={seed} STREAMJOIN_CHAOS_KILLS={kills} "
        "python3 -m pytest tests/e2e/test_chaos.py"
    )
    config = ChaosConfig(seed, kills, batches=max(6, 3 * kills), rerun=rerun)
    print(f"chaos seed {seed}: {rerun}")
    report = run_chaos(tmp_path, config)
    print(report.summary())
    assert [k.target for k in report.kills] == ["driver"] * kills
    assert report.batches == config.batches
    assert report.runs == kills + 1
