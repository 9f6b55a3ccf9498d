"""The driver JVM's class archive, end to end: the first run writes it on its way out, the next
run's JVM maps it, and both runs' results are exact."""

from __future__ import annotations

import glob
import typing as t
from pathlib import Path

from streamjoin.reference import normalize, run_reference
from streamjoin.runtime.local.classarchive import CACHE_ENV, SWITCH_ENV, archives
from streamjoin.sql import parse_job
from tests.spark.streams import make_batches, stream_ddl

from .cli import streamjoin
from .files import read_json_rows, write_batches

if t.TYPE_CHECKING:
    from collections.abc import Callable


def _job(tmp_path: Path, out: str) -> str:
    # (One file a batch: the batches the reference replays.)
    streams = [
        stream_ddl(name, str(tmp_path / "in" / name)).replace(
            "WITH (", "WITH (maxFilesPerTrigger = '1', "
        )
        for name in ("A", "B")
    ]
    text = "\n".join(
        [
            *streams,
            f"CREATE SINK eq WITH (format = 'json', path = '{tmp_path / out}');",
            "INSERT INTO eq SELECT a.id AS aid, b.id AS bid, a.k AS kx FROM A a JOIN B b "
            "ON a.k = b.k "
            "AND b.ts BETWEEN a.ts - INTERVAL '3' SECOND AND a.ts + INTERVAL '3' SECOND;",
        ]
    )
    path = tmp_path / f"{out}.sql"
    path.write_text(text, encoding="utf-8")
    return str(path)


def _mapped(archive: str, seen: list[bool]) -> Callable[[], bool]:
    """A probe for `streamjoin(kill_when=...)` that never kills: it records whether any process
    has `archive` mapped into its memory (the JVM maps it for its whole life)."""

    def probe() -> bool:
        for maps in glob.glob("/proc/[0-9]*/maps"):
            try:
                if archive in Path(maps).read_text(encoding="utf-8", errors="replace"):
                    seen.append(True)
                    return False
            except OSError:
                continue
        return False

    return probe


def test_the_first_run_writes_the_archive_and_the_next_maps_it(tmp_path: Path) -> None:
    env = {CACHE_ENV: str(tmp_path / "cache"), SWITCH_ENV: "on"}
    batches = make_batches(5, n_batches=3, rows_per_batch=12)
    write_batches(tmp_path / "in", batches)

    first = streamjoin("run", _job(tmp_path, "out1"), "--once", env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "saving the driver JVM's classes" in first.stderr
    written = archives(str(tmp_path / "cache"))
    assert len(written) == 1
    # (Besides it only the lock file, released, and the jar of the local file system the
    # driver ran with (its class path is part of what the archive is valid for): no part
    # file, no failure mark.)
    left = sorted(p.name for p in (tmp_path / "cache" / "jvm").iterdir())
    jars = [n for n in left if n.startswith("localfs-") and n.endswith(".jar")]
    assert len(jars) == 1
    assert left == sorted([Path(written[0]).name, Path(written[0]).name + ".lock", *jars])

    seen: list[bool] = []
    second = streamjoin(
        "run", _job(tmp_path, "out2"), "--once", env=env, kill_when=_mapped(written[0], seen)
    )
    assert second.returncode == 0, second.stderr[-3000:]
    assert "saving the driver JVM's classes" not in second.stderr
    assert seen, "the second run's JVM never mapped the archive"

    job = parse_job(Path(tmp_path / "out1.sql").read_text(encoding="utf-8"))
    expected = normalize(run_reference(job, batches).outputs["q1"])
    assert expected
    for out in ("out1", "out2"):
        assert normalize(read_json_rows(tmp_path / out, ("aid", "bid", "kx"))) == expected, out
    Path(written[0]).unlink()  # (150-200 MB that pytest would keep with the test's folder)
