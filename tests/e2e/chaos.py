"""Chaos: a job runs while input files keep arriving and is SIGKILLed at random moments.

`run_chaos` writes one job with an equi, a band, a theta, a full-history and a three-way query
over streams A, B and C; a feeder thread adds one file per stream per input batch at a random
pace (written under a hidden name, then renamed, so Spark never reads half a file); the job runs
with ``streamjoin run`` in its own process group, which is SIGKILLed (driver and JVM, as a
machine failure) at moments drawn from a seeded RNG and restarted on the same checkpoint. Once
the feeder is done, one ``run --once`` drains the rest, and every sink must equal the brute-force
reference over all fed rows.

The input has no late rows in any batching (disorder 1.5 s under a 2 s watermark delay, and no
row behind an earlier file's event times): which files a micro-batch reads depends on when the
kills fall, and with no row ever late the reference over the fed batches is the exact answer
whatever the batching was. The run's dead letters are checked to be empty, so that premise is
tested too. A failure names its seed; ``python -m tests.e2e.chaos --seed N --kills K`` reruns it
(the kill moments are the seed's, the machine's timing is not).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import typing as t
from dataclasses import asdict, dataclass, field
from pathlib import Path

from streamjoin.reference import normalize, run_reference
from streamjoin.sql import parse_job
from tests.e2e.cli import QUICK_DRIVER
from tests.e2e.files import read_json_rows
from tests.spark.streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    Batches = Sequence[Mapping[str, Sequence[Mapping[str, object]]]]

STREAMS = ("A", "B", "C")
# Files a micro-batch takes per stream (0: all there are): the streams advance unevenly, so the
# state one keeps for another's lagging watermark is exercised too.
FILES_PER_TRIGGER = {"A": 1, "B": 2, "C": 0}
W3 = "b.ts BETWEEN a.ts - INTERVAL '3' SECOND AND a.ts + INTERVAL '3' SECOND"
PAIR = "a.id AS i1, b.id AS i2, a.x + b.x AS i3"
# sink -> (SELECT list, FROM ... ON ...)
QUERIES: dict[str, tuple[str, str]] = {
    "equi": (PAIR, f"A a JOIN B b ON a.k = b.k AND {W3}"),
    "band": (PAIR, f"A a JOIN B b ON abs(a.x - b.x) <= 0.7 AND {W3}"),
    "theta": (
        PAIR,
        "A a JOIN B b ON a.x < b.x AND b.x < a.x + 0.5 "
        "AND a.ts >= b.ts AND a.ts <= b.ts + INTERVAL 2 SECONDS",
    ),
    "history": (PAIR, "A a JOIN C b ON a.k = b.k AND a.s <> b.s"),
    "threeway": (
        "a.id AS i1, b.id AS i2, c.id AS i3",
        f"A a JOIN B b ON a.k = b.k AND {W3} "
        "JOIN C c ON abs(c.x - b.x) <= 1.0 "
        "AND c.ts BETWEEN b.ts AND b.ts + INTERVAL '4' SECOND",
    ),
}
COLUMNS = ("i1", "i2", "i3")


@dataclass(frozen=True)
class ChaosConfig:
    """One chaos run: `kills` driver kills over `batches` input batches fed every ~`feed_s`."""

    seed: int
    kills: int
    batches: int
    rows_per_batch: int = 10
    feed_s: float = 1.0
    master: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Kill:
    """One SIGKILL: of which run or worker, when (s after the run started), and how it was
    timed (``time``: a drawn delay from the start; ``progress``: a drawn delay after the run's
    first sign of progress)."""

    target: str
    run: int
    at_s: float
    mode: str
    committed: int


@dataclass
class ChaosReport:
    """What a chaos run did: the seed, every kill, the runs started and the rows checked."""

    seed: int
    kills: list[Kill] = field(default_factory=list)
    runs: int = 0
    batches: int = 0
    seconds: float = 0.0
    rows: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        """One line: the seed and the counts, for the test log."""
        by: dict[str, int] = {}
        for k in self.kills:
            kind = k.target.split("-")[0]
            by[kind] = by.get(kind, 0) + 1
        return (
            f"chaos seed {self.seed}: {by} kills, {self.runs} runs, {self.batches} input "
            f"batches, {self.seconds:.0f} s, rows {self.rows}"
        )


def write_job(root: Path) -> Path:
    """``root/job.sql`` over ``root/in/<stream>`` with a JSON sink ``root/out/<query>`` each."""
    parts = []
    for s in STREAMS:
        n = FILES_PER_TRIGGER[s]
        opts = f"maxFilesPerTrigger = '{n}', " if n else ""
        parts.append(stream_ddl(s, str(root / "in" / s)).replace("WITH (", f"WITH ({opts}"))
    parts += [
        f"CREATE SINK {q} WITH (format = 'json', path = '{root / 'out' / q}');" for q in QUERIES
    ]
    parts += [f"INSERT INTO {q} SELECT {sel} FROM {fr};" for q, (sel, fr) in QUERIES.items()]
    path = root / "job.sql"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def make_input(config: ChaosConfig) -> list[dict[str, list[dict[str, object]]]]:
    """The seed's input batches: disordered, NULL and repeated keys, no late rows."""
    return make_batches(
        config.seed,
        streams=STREAMS,
        n_batches=config.batches,
        rows_per_batch=config.rows_per_batch,
        late_per_batch=0,
    )


class Feeder(threading.Thread):
    """Writes batch i of every stream to ``in/<stream>/part-<i>.json`` at a random pace."""

    def __init__(self, root: Path, batches: Batches, rng: random.Random, mean_s: float) -> None:
        super().__init__(name="chaos-feeder", daemon=True)
        self.root = root
        self.batches = batches
        self.pauses = [rng.uniform(0, 2 * mean_s) for _ in batches]
        self.fed = 0
        self.error: BaseException | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        """Feed every batch unless stopped; keep the error for the test to raise."""
        try:
            for i, batch in enumerate(self.batches):
                if self.stop.wait(self.pauses[i]):
                    return
                for stream, rows in batch.items():
                    folder = self.root / "in" / stream
                    folder.mkdir(parents=True, exist_ok=True)
                    hidden = folder / f".part-{i:05d}.json"
                    lines = [json.dumps({**r, "ts": _iso(r["ts"])}) for r in rows]
                    hidden.write_text("\n".join(lines) + "\n", encoding="utf-8")
                    hidden.rename(folder / f"part-{i:05d}.json")
                self.fed = i + 1
        except BaseException as err:  # the test thread re-raises it
            self.error = err


def _iso(value: object) -> object:
    return value.isoformat() if hasattr(value, "isoformat") else value


def _count(folder: Path) -> int:
    return sum(1 for p in folder.glob("*") if p.name.isdigit()) if folder.is_dir() else 0


def committed(ckpt: Path) -> int:
    """Micro-batches Spark has committed in `ckpt` (its commit log's entries)."""
    return _count(ckpt / "spark" / "commits")


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
    """Starts ``streamjoin run`` in its own process group, logging to ``root/logs/``."""

    def __init__(self, root: Path, job: Path, config: ChaosConfig) -> None:
        self.root = root
        self.job = job
        self.config = config
        self.started = 0
        self.leaks: list[str] = []
        (root / "logs").mkdir(parents=True, exist_ok=True)

    def start(self, *extra: str) -> subprocess.Popen[bytes]:
        """A run on the chaos checkpoint (`extra`: more options, e.g. ``--once``)."""
        args = ["run", str(self.job), "--checkpoint", str(self.root / "ckpt"), *extra]
        if self.config.master:
            args += ["--master", self.config.master]
        env = {**os.environ, "TZ": "UTC", **QUICK_DRIVER, **self.config.env}
        log = self.root / "logs" / f"run-{self.started}.log"
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
        """SIGKILL the run's whole group, reap it, and record any member that outlived it."""
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

    def log(self, run: int) -> str:
        """The last lines of run `run`'s output."""
        text = (self.root / "logs" / f"run-{run}.log").read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-40:])


def run_chaos(
    root: Path,
    config: ChaosConfig,
    *,
    tick: Callable[[float], Kill | None] | None = None,
    run_timeout: float = 600,
) -> ChaosReport:
    """Run the chaos of `config` in `root`; raise AssertionError (naming the seed) unless every
    sink ends exactly equal to the reference.

    Args:
        root: an empty directory for the job, its input, output, checkpoint and logs.
        config: the seed, number of driver kills and input size.
        tick: called about every 0.2 s while a run is up, with the seconds since the chaos
            began; a returned `Kill` is recorded (the cluster test kills workers from here).
        run_timeout: seconds one run may take before the chaos gives up.
    """
    began = time.monotonic()
    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(config.seed)
    report = ChaosReport(config.seed)
    job = write_job(root)
    batches = make_input(config)
    ckpt = root / "ckpt"
    runs = Runs(root, job, config)
    feeder = Feeder(root, batches, rng, config.feed_s)
    feeder.start()
    proc: subprocess.Popen[bytes] | None = None
    try:
        for _ in range(config.kills):
            proc = runs.start()
            run = runs.started - 1
            mode, delay = _draw_kill(rng)
            at = _wait_kill(proc, ckpt, mode, delay, began, tick, report, run_timeout)
            if proc.poll() is not None:
                msg = f"run {run} exited by itself ({proc.returncode}):\n{runs.log(run)}"
                raise AssertionError(msg)
            runs.kill(proc)
            report.kills.append(Kill("driver", run, round(at, 2), mode, committed(ckpt)))
            time.sleep(rng.uniform(0, 1))
        feeder.join()
        if feeder.error is not None:
            raise feeder.error
        report.batches = feeder.fed
        proc = runs.start("--once")
        run = runs.started - 1
        _wait_kill(proc, ckpt, "none", 0, began, tick, report, run_timeout)
        if proc.returncode != 0:
            msg = f"the final run failed ({proc.returncode}):\n{runs.log(run)}"
            raise AssertionError(msg)
    finally:
        feeder.stop.set()
        if proc is not None and proc.poll() is None:
            runs.kill(proc)
    report.runs = runs.started
    assert not runs.leaks, f"seed {config.seed}: processes outlived their group: {runs.leaks}"
    report.rows = check_exact(root, job, batches, config.seed)
    report.seconds = time.monotonic() - began
    return report


def _draw_kill(rng: random.Random) -> tuple[str, float]:
    # Some kills at any moment from the start (start-up, a replay, recovery); most a little
    # after the run has shown progress, where batches are under way.
    if rng.random() < 0.3:
        return "time", rng.uniform(2, 20)
    return "progress", rng.uniform(0, 4)


def _wait_kill(
    proc: subprocess.Popen[bytes],
    ckpt: Path,
    mode: str,
    delay: float,
    began: float,
    tick: Callable[[float], Kill | None] | None,
    report: ChaosReport,
    timeout: float,
) -> float:
    """Wait until the kill moment of (`mode`, `delay`) or until `proc` exits; the seconds since
    the run started."""
    start = time.monotonic()
    marks = (_count(ckpt / "spark" / "offsets"), committed(ckpt))
    progressed: float | None = None
    while proc.poll() is None:
        now = time.monotonic()
        if now - start > timeout:
            msg = f"seed {report.seed}: a run took over {timeout:.0f} s"
            raise AssertionError(msg)
        if progressed is None and (_count(ckpt / "spark" / "offsets"), committed(ckpt)) != marks:
            progressed = now
        if mode == "time" and now - start >= delay:
            break
        if mode == "progress" and progressed is not None and now - progressed >= delay:
            break
        if tick is not None and (kill := tick(now - began)) is not None:
            report.kills.append(kill)
        time.sleep(0.2)
    return time.monotonic() - start


def check_exact(root: Path, job: Path, batches: Batches, seed: int) -> dict[str, int]:
    """Assert that every sink equals the reference and that nothing went to the dead letters;
    the rows per sink."""
    parsed = parse_job(job.read_text(encoding="utf-8"))
    expected = run_reference(parsed, batches)
    assert not any(expected.late.values()), "the chaos input must have no late rows"
    dead = [p for p in (root / "ckpt" / "deadletter").rglob("part-*") if p.stat().st_size]
    assert not dead, f"seed {seed}: rows went to the dead letters: {dead[:3]}"
    rows = {}
    for q in parsed.queries:
        got = normalize(read_json_rows(root / "out" / q.sink, COLUMNS))
        want = normalize(expected.outputs[q.name])
        assert want, f"seed {seed}: {q.sink} has no result to check"
        if got != want:
            missing = len([r for r in want if r not in set(got)])
            twice = len(got) - len(set(got))
            msg = (
                f"seed {seed}: {q.sink}: {len(got)} rows vs {len(want)} "
                f"({missing} missing, {twice} duplicated); rerun: {rerun(seed)}"
            )
            raise AssertionError(msg)
        rows[q.sink] = len(got)
    return rows


def rerun(seed: int, kills: int | None = None) -> str:
    """The command that reruns the chaos of `seed`."""
    more = f" --kills {kills}" if kills else ""
    return f"python -m tests.e2e.chaos --seed {seed}{more}"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tests.e2e.chaos [--seed N] [--kills K] [--batches B] [--dir D]``."""
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.chaos", description=__doc__)
    parser.add_argument("--seed", type=int, default=random.SystemRandom().randrange(10**6))
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--batches", type=int, default=None, help="default: 4 per kill")
    parser.add_argument("--dir", default=None, help="default: a new temporary directory")
    args = parser.parse_args(argv)
    root = Path(args.dir or tempfile.mkdtemp(prefix="sj-chaos-"))
    config = ChaosConfig(args.seed, args.kills, args.batches or 4 * args.kills)
    print(f"chaos seed {config.seed} in {root}", flush=True)
    report = run_chaos(root, config)
    print(json.dumps(asdict(report), indent=1))
    print(report.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
