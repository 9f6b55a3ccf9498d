"""The driver JVM's class archive: which flags a session gets, and when an archive is published."""

from __future__ import annotations

import os
import time
import typing as t

import pytest

from streamjoin.runtime.local import classarchive as ca

if t.TYPE_CHECKING:
    from pathlib import Path

MAGIC = (0xF00BABA8).to_bytes(4, "little")


@pytest.fixture
def spark_home(tmp_path: Path) -> str:
    jars = tmp_path / "spark" / "jars"
    jars.mkdir(parents=True)
    for name in ("spark-core.jar", "spark-sql.jar"):
        (jars / name).write_bytes(b"jar " + name.encode())
    return str(tmp_path / "spark")


@pytest.fixture
def java(tmp_path: Path) -> str:
    path = tmp_path / "bin" / "java"
    path.parent.mkdir()
    path.write_bytes(b"#!java")
    return str(path)


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(ca.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(ca.SWITCH_ENV, raising=False)
    return tmp_path / "cache" / "jvm"


def _dumps(path: str | None, data: bytes = MAGIC + b"classes", code: int = 0) -> t.Any:
    """A stand-in for the JVM's exit: it writes `data` where it was told to dump."""

    def exit_() -> int:
        assert path is not None
        with open(path, "wb") as f:
            f.write(data)
        return code

    return exit_


def test_first_session_writes_the_archive_and_later_ones_map_it(java: str, spark_home: str) -> None:
    first = ca.plan_archive(java, spark_home, "-XX:+UseParallelGC")
    assert first is not None and first.writing is not None
    assert f"-XX:ArchiveClassesAtExit={first.writing}" in first.java_options()
    # While the first JVM runs, no one else writes (or maps) the same archive.
    assert ca.plan_archive(java, spark_home, "-XX:+UseParallelGC") is None
    first.finish(_dumps(first.writing))
    assert ca.archives() == [first.path]
    assert not os.path.exists(first.writing)

    later = ca.plan_archive(java, spark_home, "-XX:+UseParallelGC")
    assert later == ca.ClassArchive(first.path)
    assert f"-XX:SharedArchiveFile={first.path}" in later.java_options()
    later.finish(_dumps(None))  # (nothing to publish: the exit is not even awaited)


@pytest.mark.parametrize(
    ("data", "code"),
    [(MAGIC + b"classes", 1), (b"\0\0\0\0partial", 0), (b"", 0)],
    ids=["jvm-failed", "no-header", "empty"],
)
def test_a_failed_or_partial_dump_is_not_published_nor_retried_for_a_week(
    java: str, spark_home: str, data: bytes, code: int
) -> None:
    archive = ca.plan_archive(java, spark_home, "")
    assert archive is not None and archive.writing is not None
    archive.finish(_dumps(archive.writing, data, code))
    assert ca.archives() == []
    assert not os.path.exists(archive.writing)
    assert ca.plan_archive(java, spark_home, "") is None
    week_ago = time.time() - 8 * 86400
    os.utime(archive.path + ".failed", (week_ago, week_ago))
    again = ca.plan_archive(java, spark_home, "")
    assert again is not None and again.writing is not None


def test_a_jvm_that_could_not_be_awaited_marks_nothing(java: str, spark_home: str) -> None:
    archive = ca.plan_archive(java, spark_home, "")
    assert archive is not None
    archive.finish(lambda: None)
    again = ca.plan_archive(java, spark_home, "")
    assert again is not None and again.writing is not None


def test_a_dead_writers_part_file_is_removed_by_the_next(
    java: str, spark_home: str, cache: Path
) -> None:
    dead = ca.plan_archive(java, spark_home, "")
    assert dead is not None and dead.writing is not None and dead.lock_fd is not None
    with open(dead.writing, "wb") as f:
        f.write(MAGIC)  # (it died mid-dump, never renamed)
    assert ca.plan_archive(java, spark_home, "") is None
    os.close(dead.lock_fd)  # (its process ended: the kernel lets go of its lock)
    taker = ca.plan_archive(java, spark_home, "")
    assert taker is not None and taker.writing not in (None, dead.writing)
    assert not os.path.exists(dead.writing)
    assert [n for n in os.listdir(cache) if not n.endswith(".lock")] == []


def test_the_key_follows_java_jars_flags_settings_and_environment(
    java: str, spark_home: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = ca.configuration_key(java, spark_home, "-Xmx2g")
    assert ca.configuration_key(java, spark_home, "-Xmx2g") == key
    assert ca.configuration_key(java, spark_home, "-Xmx4g") != key
    extra = {"spark.driver.extraClassPath": "/opt/mine.jar"}
    assert ca.configuration_key(java, spark_home, "-Xmx2g", extra) != key
    assert ca.configuration_key(java, spark_home, "-Xmx2g", {"spark.ui.enabled": "x"}) == key
    monkeypatch.setenv("SPARK_CONF_DIR", "/etc/spark")
    assert ca.configuration_key(java, spark_home, "-Xmx2g") != key
    monkeypatch.delenv("SPARK_CONF_DIR")
    jar = os.path.join(spark_home, "jars", "spark-sql.jar")
    with open(jar, "ab") as f:
        f.write(b" upgraded")
    assert ca.configuration_key(java, spark_home, "-Xmx2g") != key
    with open(java, "ab") as f:
        f.write(b" 17.0.16")
    assert ca.configuration_key(java, spark_home, "-Xmx2g") != key


def test_a_jar_rebuilt_on_the_driver_class_path_needs_a_new_archive(
    java: str, spark_home: str, tmp_path: Path
) -> None:
    jar = tmp_path / "mine.jar"
    jar.write_bytes(b"classes")
    extra = {"spark.driver.extraClassPath": f"/opt/gone.jar{os.pathsep}{jar}"}
    key = ca.configuration_key(java, spark_home, "", extra)
    assert ca.configuration_key(java, spark_home, "", extra) == key
    os.utime(jar, ns=(0, 10**9))  # (the JVM checks the jar's time and size)
    assert ca.configuration_key(java, spark_home, "", extra) != key


@pytest.mark.parametrize("value", ["off", "0", "false", "No"])
def test_switched_off(
    java: str, spark_home: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ca.SWITCH_ENV, value)
    assert ca.plan_archive(java, spark_home, "") is None


@pytest.mark.parametrize(
    "flags",
    ["-XX:SharedArchiveFile=/mine.jsa", "-XX:ArchiveClassesAtExit=/mine.jsa", "-Xshare:off"],
)
def test_the_users_own_archive_flags_win(java: str, spark_home: str, flags: str) -> None:
    assert ca.plan_archive(java, spark_home, flags) is None


def test_archives_unused_for_a_month_go_when_a_new_one_is_written(
    java: str, spark_home: str, cache: Path
) -> None:
    cache.mkdir(parents=True)
    stale, recent = cache / "0000000000000000.jsa", cache / "1111111111111111.jsa"
    for path, age in ((stale, 31), (recent, 2)):
        path.write_bytes(MAGIC)
        then = time.time() - age * 86400
        os.utime(path, (then, then))
    archive = ca.plan_archive(java, spark_home, "")
    assert archive is not None
    archive.finish(_dumps(archive.writing))
    assert ca.archives() == sorted([str(recent), archive.path])


def test_an_unwritable_cache_means_no_archive(
    java: str, spark_home: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv(ca.CACHE_ENV, str(blocker))
    assert ca.plan_archive(java, spark_home, "") is None
