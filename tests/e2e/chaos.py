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
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import typing as t
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from streamjoin.reference import normalize, run_reference
from streamjoin.sql import parse_job
from tests.e2e.cli import QUICK_JIT, class_archive
from tests.e2e.files import Feeder, read_json_rows
from tests.e2e.groups import Runs
from tests.spark.streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from streamjoin.model import GroupQuery, Query

    Batches = Sequence[Mapping[str, Sequence[Mapping[str, object]]]]

STREAMS = ("A", "B", "C")
KEYED = "C"
"""The stream that declares a key (its ids are unique) and an end column."""
# Files a micro-batch takes per stream (0: all there are): the streams advance unevenly, so the
# state one keeps for another's lagging watermark is exercised too.
FILES_PER_TRIGGER = {"A": 2, "B": 3, "C": 0}
W3 = "b.ts BETWEEN a.ts - INTERVAL '3' SECOND AND a.ts + INTERVAL '3' SECOND"
PAIR = "a.id AS i1, b.id AS i2, a.x + b.x AS i3"
# sink -> (SELECT list, FROM ... ON ...)
QUERIES: dict[str, tuple[str, str]] = {
    "equi": (PAIR, f"A a JOIN B b ON a.k = b.k AND {W3}"),
    # (An outer join's rows without a partner, decided as the watermark passes them.)
    "band": (PAIR, f"A a FULL JOIN B b ON abs(a.x - b.x) <= 0.7 AND {W3}"),
    "theta": (
        PAIR,
        "A a JOIN B b ON a.x < b.x AND b.x < a.x + 0.5 "
        "AND a.ts >= b.ts AND a.ts <= b.ts + INTERVAL 2 SECONDS",
    ),
    "history": (PAIR, "A a JOIN C b ON a.k = b.k AND a.s <> b.s"),
    # (A band within a key, LEFT; an OR of equalities, a pair meeting both found once; a
    # matrix's copies of each row.)
    "bandkey": (PAIR, f"A a LEFT JOIN B b ON a.k = b.k AND abs(a.x - b.x) <= 1.0 AND {W3}"),
    "either": (PAIR, f"A a JOIN B b ON (a.k = b.k OR a.x = b.x) AND {W3}"),
    # (No band of values, no key: each row meets every row its window reaches.)
    "product": (PAIR, f"A a JOIN B b ON a.x * b.x > 80 AND {W3}"),
    "matrix": (
        PAIR,
        f"A a JOIN B b ON a.k = b.k AND a.x < b.x AND {W3} "
        "WITH (partitioning = 'matrix', units = 4)",
    ),
    # (Groups per row of C, keyed, closed once the watermark passes the row's end `e`.)
    "perrow": (
        "c.id AS i1, count(*) AS i2, max(a.x) AS i3",
        "A a JOIN C c ON a.k = c.k AND a.ts BETWEEN c.ts AND c.e GROUP BY c.id",
    ),
    # (B's rows joined with A's groups per window: those under their key's highest x.)
    "withgroups": (
        "b.id AS i1, b.k AS i2, g.hx AS i3",
        "B b JOIN (SELECT k, max(x) AS hx, window_end AS w FROM TABLE(TUMBLE(TABLE A, "
        "DESCRIPTOR(ts), INTERVAL '3' SECOND)) GROUP BY k, window_start, window_end) g "
        "ON b.k = g.k AND b.x <= g.hx WHERE b.ts BETWEEN g.w - INTERVAL '3' SECOND AND g.w",
    ),
    "threeway": (
        "a.id AS i1, b.id AS i2, c.id AS i3",
        f"A a JOIN B b ON a.k = b.k AND {W3} "
        "JOIN C c ON abs(c.x - b.x) <= 1.0 "
        "AND c.ts BETWEEN b.ts AND b.ts + INTERVAL '4' SECOND",
    ),
}
COLUMNS = ("i1", "i2", "i3")
JVM_OPTIONS = f"{QUICK_JIT} -XX:ReservedCodeCacheSize=240m"
"""The quick compiler alone fills its default 48 MB code cache within minutes of a run, after
which the JVM stops compiling and runs interpreted, several times slower."""


def jvm_env(executors: bool = False) -> dict[str, str]:
    """The runs' ``PYSPARK_SUBMIT_ARGS``: `JVM_OPTIONS` for the driver (and the executors), and
    the driver's class-data archive if the test session has one (`class_archive`)."""
    confs = f'--conf "spark.driver.extraJavaOptions={JVM_OPTIONS}{class_archive()}" '
    if executors:
        confs += f'--conf "spark.executor.extraJavaOptions={JVM_OPTIONS}" '
    return {"PYSPARK_SUBMIT_ARGS": f"{confs}pyspark-shell"}


@dataclass(frozen=True)
class ChaosConfig:
    """One chaos run: `kills` driver kills over `batches` input batches, fed about every
    `feed_s` seconds, an equal share between two driver kills; on `master` (default local), with
    `env` for the runs; `rerun` tells a failure how to run it again (default: this module's
    command line)."""

    seed: int
    kills: int
    batches: int
    rows_per_batch: int = 10
    feed_s: float = 3.0
    master: str | None = None
    env: Mapping[str, str] = field(default_factory=jvm_env)
    rerun: str = ""

    def __post_init__(self) -> None:
        # A run with no new input shows no progress, and a kill timed by progress never comes.
        if self.batches < self.kills:
            msg = f"every run needs new input: {self.batches} batches for {self.kills} kills"
            raise ValueError(msg)


@dataclass
class Kill:
    """One SIGKILL: of a worker or of run `run`'s driver, `at_s` seconds into the chaos, timed
    by `mode` (``time``: a drawn delay after the run started; ``progress``: after its first
    commit; ``busy``: a worker's, after the run's first new offset or commit), with `committed`
    batches committed and whether one was open (started and not committed: under way, or
    waiting for its replay)."""

    target: str
    run: int
    at_s: float
    mode: str
    committed: int
    mid_batch: bool


class Disruption(t.Protocol):
    """More chaos while the runs are up (the cluster test's worker kills)."""

    def tick(self, now: float, run: int, ckpt: Path, busy: bool) -> Kill | None:
        """Called about every 0.2 s while run `run` is up (`now`: seconds since the chaos
        began; `busy`: the run has started or committed a batch); a returned `Kill` is
        recorded."""

    def ready(self, run: int) -> bool:
        """Whether run `run` may be killed yet (at its drawn moment or later)."""


@dataclass
class ChaosReport:
    """What a chaos run did: the seed, every kill, the runs started and the rows checked."""

    seed: int
    kills: list[Kill] = field(default_factory=list)
    runs: int = 0
    batches: int = 0
    seconds: float = 0.0
    rows: dict[str, int] = field(default_factory=dict)

    def driver_kills(self) -> int:
        """The driver kills so far."""
        return sum(k.target == "driver" for k in self.kills)

    def summary(self) -> str:
        """The seed, the counts, and each kill as target@seconds/batches committed (``*``: a
        batch open)."""
        kinds = Counter(k.target.split("-")[0] for k in self.kills)
        kills = " ".join(
            f"{k.target}@{k.at_s:.0f}s/{k.committed}{'*' if k.mid_batch else ''}"
            for k in self.kills
        )
        return (
            f"chaos seed {self.seed}: {dict(kinds)} kills ({kills}), {self.runs} runs, "
            f"{self.batches} input batches, {self.seconds:.0f} s, rows {self.rows}"
        )


def chaos_seed() -> int:
    """``STREAMJOIN_CHAOS_SEED``, or a fresh one: each run explores other kill moments."""
    given = os.environ.get("STREAMJOIN_CHAOS_SEED")
    return int(given) if given else random.SystemRandom().randrange(10**6)


def write_job(root: Path) -> Path:
    """``root/job.sql`` over ``root/in/<stream>`` with a JSON sink ``root/out/<query>`` each."""
    parts = []
    for s in STREAMS:
        n = FILES_PER_TRIGGER[s]
        opts = f"maxFilesPerTrigger = '{n}', " if n else ""
        ddl = stream_ddl(s, str(root / "in" / s)).replace("WITH (", f"WITH ({opts}")
        if s == KEYED:
            ddl = ddl.replace("ts TIMESTAMP,", "ts TIMESTAMP, e TIMESTAMP,").replace(
                "SECOND)", "SECOND, PRIMARY KEY (id) NOT ENFORCED)"
            )
        parts.append(ddl)
    parts += [
        f"CREATE SINK {q} WITH (format = 'json', path = '{root / 'out' / q}');" for q in QUERIES
    ]
    parts += [f"INSERT INTO {q} SELECT {sel} FROM {fr};" for q, (sel, fr) in QUERIES.items()]
    path = root / "job.sql"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def make_input(config: ChaosConfig) -> list[dict[str, list[dict[str, object]]]]:
    """The seed's input batches: disordered, NULL and repeated keys, no late rows; each row of
    the keyed stream ends (`e`) 0-5 s after its event time."""
    batches = make_batches(
        config.seed,
        streams=STREAMS,
        n_batches=config.batches,
        rows_per_batch=config.rows_per_batch,
        late_per_batch=0,
    )
    rng = random.Random(config.seed)
    for batch in batches:
        for row in batch[KEYED]:
            row["e"] = t.cast("datetime", row["ts"]) + timedelta(seconds=rng.uniform(0, 5))
    return batches


def _count(folder: Path) -> int:
    return sum(1 for p in folder.glob("*") if p.name.isdigit()) if folder.is_dir() else 0


def _after_newest(folder: Path) -> int:
    """One past the newest batch whose file is in `folder` (named by the batch, maybe padded,
    maybe with a suffix)."""
    ids = [int(p.name.split(".")[0]) for p in folder.glob("*") if p.name.split(".")[0].isdigit()]
    return max(ids) + 1 if ids else 0


def progress(ckpt: Path) -> tuple[int, int]:
    """Micro-batches started and committed in `ckpt`: Spark's offset and commit logs, or the
    engine's own loop's log of each batch's files and the manifests; a kill between the two
    falls inside a batch."""
    if (ckpt / "loop").is_dir():
        return _after_newest(ckpt / "loop"), _after_newest(ckpt / "manifests")
    return _count(ckpt / "spark" / "offsets"), _count(ckpt / "spark" / "commits")


def run_chaos(
    root: Path,
    config: ChaosConfig,
    *,
    more: Disruption | None = None,
    run_timeout: float = 600,
) -> ChaosReport:
    """Run the chaos of `config` in `root`; raise AssertionError (naming the seed and how to
    rerun it) unless every sink ends exactly equal to the reference.

    Args:
        root: a directory for the job, its input, output, checkpoint and logs.
        config: the seed, the number of driver kills and the input's size.
        more: more disruption while the runs are up, and when a run may be killed.
        run_timeout: seconds one run may take before the chaos gives up.
    """
    try:
        return _chaos(root, config, more, run_timeout)
    except AssertionError as err:
        msg = f"chaos seed {config.seed} in {root}: {err}\nrerun: {rerun(config)}"
        raise AssertionError(msg) from None


def _chaos(
    root: Path,
    config: ChaosConfig,
    more: Disruption | None,
    run_timeout: float,
) -> ChaosReport:
    began = time.monotonic()
    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(config.seed)
    report = ChaosReport(config.seed)
    job = write_job(root)
    batches = make_input(config)
    ckpt = root / "ckpt"
    runs = Runs(root / "logs", job, ckpt, config.master, config.env)
    feeder = Feeder(
        root / "in",
        batches,
        rng,
        config.feed_s,
        # Spread over the runs: a share of the input arrives while each run is up.
        released=lambda i: report.driver_kills() >= i * config.kills // config.batches,
    )
    feeder.start()
    proc: subprocess.Popen[bytes] | None = None
    try:
        for _ in range(config.kills):
            proc = runs.start()
            run = runs.started - 1
            mode, delay = _draw_kill(rng)
            _wait(proc, ckpt, run, mode, delay, began, more, report, run_timeout)
            if proc.poll() is not None:
                msg = f"run {run} exited by itself ({proc.returncode}):\n{runs.tail(run)}"
                raise AssertionError(msg)
            started, done = progress(ckpt)
            at = time.monotonic() - began
            runs.kill(proc)
            report.kills.append(Kill("driver", run, round(at, 2), mode, done, started > done))
            time.sleep(rng.uniform(0, 1))
        feeder.hurry.set()
        feeder.join()
        if feeder.error is not None:
            raise feeder.error
        report.batches = feeder.fed
        proc = runs.start("--once")
        run = runs.started - 1
        _wait(proc, ckpt, run, "none", 0, began, more, report, run_timeout)
        if proc.returncode != 0:
            msg = f"the final run failed ({proc.returncode}):\n{runs.tail(run)}"
            raise AssertionError(msg)
    finally:
        feeder.stop.set()
        if proc is not None and proc.poll() is None:
            runs.kill(proc)
    report.runs = runs.started
    assert not runs.leaks, f"processes outlived their group's SIGKILL: {runs.leaks}"
    report.rows = check_exact(root, job, batches)
    report.seconds = time.monotonic() - began
    return report


def _draw_kill(rng: random.Random) -> tuple[str, float]:
    # Some kills at any moment from the start (start-up, a replay, recovery); most a little
    # after the run has committed a batch of its own, so every run moves the checkpoint on
    # and the kill falls in or between the batches after it.
    if rng.random() < 0.3:
        return "time", rng.uniform(2, 20)
    return "progress", rng.uniform(0, 4)


def _wait(
    proc: subprocess.Popen[bytes],
    ckpt: Path,
    run: int,
    mode: str,
    delay: float,
    began: float,
    more: Disruption | None,
    report: ChaosReport,
    timeout: float,
) -> None:
    """Wait until the kill moment of (`mode`, `delay`), or until `proc` exits."""
    start = time.monotonic()
    started, committed = progress(ckpt)
    busy = False
    progressed: float | None = None
    ready: float | None = None
    while proc.poll() is None:
        now = time.monotonic()
        if now - start > timeout:
            msg = f"run {run} took over {timeout:.0f} s"
            raise AssertionError(msg)
        if progressed is None:
            now_started, now_committed = progress(ckpt)
            busy = busy or (now_started, now_committed) != (started, committed)
            progressed = now if now_committed > committed else None
        if ready is None and (more is None or more.ready(run)):
            ready = now
        due = (mode == "time" and now - start >= delay) or (
            mode == "progress" and progressed is not None and now - progressed >= delay
        )
        # A kill held back until the run was ready still falls a drawn while after that.
        if due and ready is not None and now - ready >= min(delay, 4):
            break
        if more is not None and (kill := more.tick(now - began, run, ckpt, busy)) is not None:
            report.kills.append(kill)
        time.sleep(0.2)


def check_exact(root: Path, job: Path, batches: Batches) -> dict[str, int]:
    """Assert that every sink under ``root/out`` equals the reference over `batches` and that
    nothing went to the dead letters; the rows per sink."""
    parsed = parse_job(job.read_text(encoding="utf-8"))
    expected = run_reference(parsed, batches)
    assert not any(expected.late.values()), "the chaos input must have no late rows"
    dead = [p for p in (root / "ckpt" / "deadletter").rglob("part-*") if p.stat().st_size]
    assert not dead, f"rows went to the dead letters: {dead[:3]}"
    rows = {}
    queries: list[Query | GroupQuery] = [*parsed.queries, *parsed.group_queries]
    for q in queries:
        got = Counter(normalize(read_json_rows(root / "out" / q.sink, COLUMNS)))
        want = Counter(normalize(expected.outputs[q.name]))
        assert want, f"{q.sink} has no result to check"
        missing, extra = want - got, got - want
        assert not missing and not extra, (
            f"{q.sink}: {got.total()} rows vs {want.total()}; missing {missing.total()} "
            f"(e.g. {sorted(missing)[:3]}), extra or twice {extra.total()} "
            f"(e.g. {sorted(extra)[:3]})"
        )
        rows[q.sink] = got.total()
    return rows


def rerun(config: ChaosConfig) -> str:
    """How to rerun the chaos of `config` (same seed: same input and kill moments)."""
    if config.rerun:
        return config.rerun
    return (
        f"python -m tests.e2e.chaos --seed {config.seed} --kills {config.kills} "
        f"--batches {config.batches}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tests.e2e.chaos [--seed N] [--kills K] [--batches B] [--dir D]``."""
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.chaos", description=__doc__)
    parser.add_argument("--seed", type=int, default=random.SystemRandom().randrange(10**6))
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--batches", type=int, default=None, help="default: 3 per kill")
    parser.add_argument("--dir", default=None, help="default: a new temporary directory")
    args = parser.parse_args(argv)
    root = Path(args.dir or tempfile.mkdtemp(prefix="sj-chaos-"))
    config = ChaosConfig(args.seed, args.kills, args.batches or max(8, 3 * args.kills))
    print(f"chaos seed {config.seed} in {root}", flush=True)
    report = run_chaos(root, config)
    print(json.dumps(asdict(report), indent=1))
    print(report.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
