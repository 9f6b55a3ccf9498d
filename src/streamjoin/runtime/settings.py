"""Every streamjoin setting, read and checked once per run from Spark's conf and the environment.

A job's settings are Spark confs (``spark.conf.set`` before ``Engine.run``, or ``--conf
spark.streamjoin.…`` under spark-submit, which drops keys without the ``spark.`` prefix) and a
few environment variables; `Settings.read` is the one place that reads them, so a bad value
fails when the run starts, naming the key and the value, and every other module takes the
typed field. The table in docs/settings.md lists the same keys (`SETTINGS`), which a test
keeps in step.
"""

from __future__ import annotations

import os
import typing as t
import warnings
from dataclasses import dataclass

from streamjoin.errors import SettingError, StreamJoinWarning

if t.TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from pyspark.sql import SparkSession


Optimizer = t.Literal["ilp", "greedy"]
Loop = t.Literal["auto", "spark"]


@dataclass(frozen=True)
class Key:
    """One setting: where it is read from, its default, and what it does (for docs/settings.md)."""

    name: str
    default: str
    doc: str
    env: bool = False
    choices: tuple[str, ...] = ()
    least: int | None = None
    size: bool = False
    """A size in bytes, with a suffix k, m, g or t (powers of 1024), or `auto`."""
    auto: bool = False
    """`auto` is taken beside the whole numbers from `least` on."""


SETTINGS: dict[str, Key] = {
    k.name: k
    for k in (
        Key(
            "streamjoin.hash.skewCheckEvery",
            "5",
            "batches between two counts of rows per unit on the automatic hash path",
            least=1,
        ),
        Key(
            "streamjoin.hash.skewCheckSeconds",
            "20",
            "with a trigger, the counts of rows per unit come at most every this many seconds of "
            "triggers (more batches apart than skewCheckEvery when triggers are short); 0: by "
            "skewCheckEvery alone",
            least=0,
        ),
        Key(
            "streamjoin.state.fromSource",
            "true",
            "`false` copies every stream's state into the checkpoint instead of reading it back "
            "from the stream's input files",
            choices=("true", "false"),
        ),
        Key(
            "streamjoin.loop",
            "auto",
            "`auto`: the engine's own micro-batch loop where every stream is a directory of "
            "files it can read (runtime/loop.py), Spark's otherwise; `spark`: always Spark's",
            choices=("auto", "spark"),
        ),
        Key(
            "streamjoin.state.memory",
            "auto",
            "bytes of state (`512m`, `2g`) that the join operator keeps in each executor's "
            "memory (the driver's in local mode): its rows and their slots (keys, times, "
            "links and the key table: 32 bytes a slot and 12 a table entry, more for a band or "
            "an outer join), every query's partitions there together; past it, each partition "
            "spills its oldest rows to the executor's local directory, down to its part of it "
            "(in proportion to what it holds, at least an even share), and reads them back where "
            "a probe reaches them. "
            "`auto`: three tenths of the JVM's heap",
            size=True,
        ),
        Key(
            "streamjoin.batch.maxRows",
            "auto",
            "the most input rows a batch of the engine's own loop takes, all streams together "
            "(from each stream's bytes a row in the batches before; a batch takes the oldest "
            "file of each stream at least): further files wait for the next batches, so a "
            "backlog or a rate over what "
            "the job keeps up with runs in bounded batches and falls behind rather than running "
            "out of memory. `auto`: one for each 8 KiB of the driver's heap",
            least=1,
            auto=True,
        ),
        Key(
            "streamjoin.multiway.optimizer",
            "ilp",
            "`greedy`: greedy probe orders, no integer program",
            choices=("ilp", "greedy"),
        ),
        Key(
            "streamjoin.share",
            "true",
            "`false`: every query runs its own join (no join or probe step shared between "
            "queries by query-set bits)",
            choices=("true", "false"),
        ),
        Key(
            "streamjoin.elastic.maxExecutors",
            "0",
            "on a cluster, more than 0: the most executors the run asks for when its batches "
            "fall behind their trigger (`runtime.executors`; dynamic allocation off)",
            least=0,
        ),
        Key(
            "streamjoin.elastic.minExecutors",
            "1",
            "the fewest executors an elastic run keeps (it starts with them)",
            least=1,
        ),
        Key(
            "streamjoin.elastic.stabilizationSeconds",
            "30",
            "seconds after an elastic run starts, and after each change of its executors, whose "
            "batches do not count towards the next change (warm-up and executors coming and "
            "going are not load)",
            least=0,
        ),
        Key(
            "STREAMJOIN_LOCAL",
            "on",
            "`off` starts a driver without streamjoin's jar (`runtime.jvm`): a local one "
            "without the local-mode speed-ups, and no driver with the joins' indexes",
            env=True,
            choices=("on", "off"),
        ),
        Key(
            "STREAMJOIN_DEBUG",
            "",
            "set: the CLI prints the traceback of an unexpected error",
            env=True,
        ),
    )
}


RETIRED = {
    "STREAMJOIN_LOCAL_FS": "STREAMJOIN_LOCAL=off turns the local-mode speed-ups off",
    "STREAMJOIN_JVM_ARCHIVE": "docs/settings.md says how to keep Java's classes in an archive",
    "STREAMJOIN_CACHE_DIR": "the local file system's jar is kept under $XDG_CACHE_HOME",
    "streamjoin.warmup": "a driver's JVM is no longer warmed at start",
    "streamjoin.state.footers": "a batch's statistics come from its Parquet footers wherever "
    "they prove every row ok",
    "streamjoin.state.hot": "the cached slices (the overflow path) are always kept in memory, "
    "spilling to disk",
    "streamjoin.join.path": "the cached slices, the overflow path, run the delta rule's halves",
    "streamjoin.join.shuffleRows": "the cached slices, the overflow path, run the delta rule's "
    "halves",
    "streamjoin.twoway.index": "the join operator serves every two-way join (STREAMJOIN_LOCAL=off "
    "runs without it, on the cached slices)",
    "streamjoin.twoway.indexRows": "the join operator serves a state of any size, spilling beyond "
    "streamjoin.state.memory (STREAMJOIN_LOCAL=off runs without it, on the cached slices)",
    "streamjoin.twoway.share": "streamjoin.share replaces it (its false still keeps every "
    "query apart)",
    "streamjoin.multiway.share": "streamjoin.share replaces it (its false still keeps every "
    "query apart)",
    "streamjoin.multiway.mirs": "the join operator's chain keeps a multi-way query's MIRs as its "
    "levels; the cached slices probe an MIR's inputs one at a time",
    "streamjoin.multiway.partitioned": "the join operator places a multi-way query's levels on "
    "the executors; the cached slices read their stores as the two-way joins do",
    "streamjoin.multiway.routeRows": "the cached slices broadcast every multi-way probe (no "
    "store is partitioned any more)",
}
"""Keys earlier versions read, and what stands in their place."""


def _warn_retired(get: Callable[[str], str | None], env: Mapping[str, str]) -> None:
    for key, instead in RETIRED.items():
        if (env.get(key) if key.isupper() else get(key)) is not None:
            msg = f"{key} is retired: {instead}"
            warnings.warn(msg, StreamJoinWarning, stacklevel=3)


def _unshared(get: Callable[[str], str | None]) -> bool:
    """Whether a retired sharing key turns sharing off: a job that set one to false keeps
    its queries apart (its served checkpoint's groups too), not shared again by an upgrade."""
    keys = ("streamjoin.twoway.share", "streamjoin.multiway.share")
    return any((get(k) or "").strip().lower() == "false" for k in keys)


def _memory(text: str) -> int:
    got = None if text.lower() == "auto" else size_bytes(text)
    return -1 if got is None else got


def _whole_or_auto(text: str) -> int:
    return 0 if text.lower() == "auto" else int(text)


def _text(key: str, get: Callable[[str], str | None], env: Mapping[str, str]) -> str:
    spec = SETTINGS[key]
    value = env.get(key) if spec.env else get(key)
    value = spec.default if value is None else value.strip()
    where = "environment variable" if spec.env else "Spark conf"
    if spec.choices and value.lower() not in spec.choices:
        choices = ", ".join(repr(c) for c in spec.choices)
        msg = f"{where} {key} must be one of {choices}; got {value!r}"
        raise SettingError(msg)
    if spec.size and value.lower() != "auto" and size_bytes(value) is None:
        msg = f"{where} {key} must be a size in bytes (such as 512m or 2g) or 'auto'; got {value!r}"
        raise SettingError(msg)
    if spec.least is not None and not (spec.auto and value.lower() == "auto"):
        try:
            number = int(value)
        except ValueError:
            number = None
        if number is None or number < spec.least:
            also = " or 'auto'" if spec.auto else ""
            msg = (
                f"{where} {key} must be a whole number, at least {spec.least}{also}; got {value!r}"
            )
            raise SettingError(msg)
    return value.lower() if spec.choices else value


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def size_bytes(text: str) -> int | None:
    """The bytes a size such as ``512m``, ``2g``, ``64kb`` or ``1048576`` says (None: not a
    size)."""
    value = text.strip().lower()
    digits = value.rstrip("kmgtb")
    unit = value[len(digits) :]
    unit = unit[:-1] if len(unit) == 2 and unit.endswith("b") else unit
    if not digits.isdigit() or unit not in _UNITS:
        return None
    return int(digits) * _UNITS[unit]


@dataclass(frozen=True)
class Settings:
    """The settings of one run (see `SETTINGS` for each key's meaning and default)."""

    skew_check_every: int = 5
    skew_check_seconds: int = 20
    state_from_source: bool = True
    loop: Loop = "auto"
    memory: int = -1
    """`streamjoin.state.memory` in bytes; -1: `auto`."""
    batch_rows: int = 0
    """`streamjoin.batch.maxRows`; 0: `auto`."""
    optimizer: Optimizer = "ilp"
    share: bool = True
    max_executors: int = 0
    min_executors: int = 1
    stabilization_seconds: int = 30
    local: bool = True
    debug: bool = False

    @classmethod
    def read(
        cls, get: Callable[[str], str | None], env: Mapping[str, str] | None = None
    ) -> Settings:
        """The settings from a conf lookup `get` (None when unset) and `env` (default: this
        process's environment); `SettingError` names a bad key and its value."""
        env = os.environ if env is None else env
        _warn_retired(get, env)

        def text(key: str) -> str:
            return _text(key, get, env)

        return cls(
            skew_check_every=int(text("streamjoin.hash.skewCheckEvery")),
            skew_check_seconds=int(text("streamjoin.hash.skewCheckSeconds")),
            state_from_source=text("streamjoin.state.fromSource") == "true",
            loop=t.cast("Loop", text("streamjoin.loop")),
            memory=_memory(text("streamjoin.state.memory")),
            batch_rows=_whole_or_auto(text("streamjoin.batch.maxRows")),
            optimizer=t.cast("Optimizer", text("streamjoin.multiway.optimizer")),
            share=text("streamjoin.share") == "true" and not _unshared(get),
            max_executors=int(text("streamjoin.elastic.maxExecutors")),
            min_executors=int(text("streamjoin.elastic.minExecutors")),
            stabilization_seconds=int(text("streamjoin.elastic.stabilizationSeconds")),
            local=text("STREAMJOIN_LOCAL") == "on",
            debug=bool(text("STREAMJOIN_DEBUG")),
        )

    @classmethod
    def of(cls, spark: SparkSession) -> Settings:
        """The settings of `spark`'s conf and this process's environment. A key is also read
        with a ``spark.`` prefix: spark-submit drops every ``--conf`` key without one."""

        def get(key: str) -> str | None:
            value = spark.conf.get(key, None)
            return spark.conf.get(f"spark.{key}", None) if value is None else value

        return cls.read(get)
