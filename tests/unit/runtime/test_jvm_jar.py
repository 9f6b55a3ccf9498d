"""Which drivers get the local-mode settings (`runtime.local`): streamjoin's process-free local
file system and Spark's FileSystem-based checkpoint logs; and how streamjoin's jar is built
(`runtime.jvm.jar`)."""

from __future__ import annotations

import os
import typing as t
import zipfile

import pytest

from streamjoin.errors import StreamJoinError
from streamjoin.runtime import local
from streamjoin.runtime.jvm import jar as jvmjar

if t.TYPE_CHECKING:
    from pathlib import Path

JAR = "/cache/jvm/localfs-0123.jar"
FS = "spark.hadoop.fs.file.impl"


def _settings(master: str, settings: dict[str, str] | None = None) -> dict[str, str]:
    built: list[str] = []

    def jar(java: str, spark_home: str) -> str:
        built.append(JAR)
        return JAR

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(local, "build_jar", jar)
        got = local.local_conf("java", "/spark", master, settings or {})
    assert len(built) == 1
    return {k: v for k, v in got.items() if k not in local.CHECKPOINT_MANAGER}


@pytest.mark.parametrize("master", ["local", "local[*]", "local[2]", " local[4, 3] "])
def test_a_local_driver_runs_the_file_system_from_the_jar(master: str) -> None:
    assert _settings(master) == {
        "spark.driver.extraClassPath": JAR,
        "spark.hadoop.fs.file.impl": "streamjoin.localfs.LocalFiles",
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(local, "build_jar", lambda java, home: JAR)
        assert local.CHECKPOINT_MANAGER.items() <= local.local_conf("j", "/s", master, {}).items()


@pytest.mark.parametrize(
    "master", ["spark://host:7077", "local-cluster[2,1,1024]", "yarn", "k8s://https://k:443"]
)
def test_executors_in_other_processes_keep_hadoops_and_get_the_jar(master: str) -> None:
    # (Hadoop's file system: the executors would not have the class on their class path when
    # they start. The jar itself they fetch, for the joins' indexes.)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(local, "build_jar", lambda java, home: JAR)
        got = local.local_conf("java", "/spark", master, {"spark.jars": "/opt/a.jar"})
        assert got == {
            "spark.driver.extraClassPath": JAR,
            "spark.jars": f"/opt/a.jar,{JAR}",
            "spark.locality.wait.process": "10s",
        }
        mine = {"spark.locality.wait.process": "5s"}
        assert "spark.locality.wait.process" not in local.local_conf("j", "/s", master, mine)


def test_a_class_path_of_ones_own_keeps_its_entries_first() -> None:
    got = _settings("local[2]", {"spark.driver.extraClassPath": "/opt/mine.jar"})
    assert got["spark.driver.extraClassPath"] == f"/opt/mine.jar{os.pathsep}{JAR}"


def test_a_local_file_system_of_ones_own_is_kept_and_the_operator_still_gets_the_jar() -> None:
    mine = {"spark.hadoop.fs.file.impl": "org.example.MyFs"}
    assert _settings("local[2]", mine) == {"spark.driver.extraClassPath": JAR}


def _java(tmp_path: Path, body: str) -> str:
    """A stand-in for `java` running Spark's compiler: a script that logs its call, then runs
    `body` with the class directory (the argument after ``-d``) in ``$D``."""
    path = tmp_path / "java"
    path.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> "{tmp_path}/calls"\n'
        'while [ "$1" != "-d" ]; do shift; done; D="$2"\n' + body,
        encoding="utf-8",
    )
    path.chmod(0o755)
    return str(path)


def _calls(tmp_path: Path) -> int:
    calls = tmp_path / "calls"
    return len(calls.read_text(encoding="utf-8").splitlines()) if calls.exists() else 0


@pytest.fixture
def spark_home(tmp_path: Path) -> str:
    jars = tmp_path / "spark" / "jars"
    jars.mkdir(parents=True)
    for name in ("hadoop-client-api.jar", "janino.jar"):
        (jars / name).write_bytes(b"jar")
    return str(tmp_path / "spark")


def test_the_jar_is_built_once_from_what_the_compiler_wrote(
    tmp_path: Path, spark_home: str
) -> None:
    java = _java(tmp_path, 'mkdir -p "$D/streamjoin"; echo c > "$D/streamjoin/LocalFiles.class"\n')
    cache = str(tmp_path / "cache")
    jar = jvmjar.build_jar(java, spark_home, cache)
    assert jar is not None and os.path.dirname(jar) == cache
    with zipfile.ZipFile(jar) as z:
        assert z.namelist() == ["META-INF/MANIFEST.MF", "streamjoin/LocalFiles.class"]
    assert os.listdir(cache) == [os.path.basename(jar)]  # (no work directory left)
    # (The compiler saw Spark's jars on its class path.)
    assert f"{spark_home}/jars/hadoop-client-api.jar" in (tmp_path / "calls").read_text("utf-8")
    stat = os.stat(jar)
    assert jvmjar.build_jar(java, spark_home, cache) == jar
    assert _calls(tmp_path) == 1 and os.stat(jar).st_mtime_ns == stat.st_mtime_ns
    # Another Spark (another set of jars) gets a jar of its own.
    (tmp_path / "spark" / "jars" / "hadoop-client-api-3.6.jar").write_bytes(b"jar")
    assert jvmjar.build_jar(java, spark_home, cache) not in (None, jar)


def test_a_failed_compile_stops_with_its_cause_and_is_not_retried(
    tmp_path: Path, spark_home: str
) -> None:
    java = _java(tmp_path, 'echo "LocalFiles.java, Line 9: no such class" >&2; exit 1\n')
    cache = str(tmp_path / "cache")
    for _ in range(2):  # (the second time from the failure kept beside the jar)
        with pytest.raises(StreamJoinError) as err:
            jvmjar.build_jar(java, spark_home, cache)
        assert "Line 9: no such class" in str(err.value)
        assert "STREAMJOIN_LOCAL=off" in str(err.value) and ".failed to try again" in str(err.value)
    assert _calls(tmp_path) == 1
    assert [n for n in os.listdir(cache) if not n.endswith(".failed")] == []


def test_a_compiler_that_wrote_nothing_is_a_failure(tmp_path: Path, spark_home: str) -> None:
    java = _java(tmp_path, "exit 0\n")
    with pytest.raises(StreamJoinError, match="could not be built"):
        jvmjar.build_jar(java, spark_home, str(tmp_path / "cache"))


def test_a_java_that_cannot_start_is_tried_again_next_time(tmp_path: Path, spark_home: str) -> None:
    cache = str(tmp_path / "cache")
    with pytest.raises(StreamJoinError, match="no-java"):
        jvmjar.build_jar(str(tmp_path / "no-java"), spark_home, cache)
    assert os.listdir(cache) == []


def test_the_jar_command_prints_the_built_jar_or_says_it_could_not(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from streamjoin.cli import main

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jvmjar, "build_jar", lambda java, home: JAR)
        assert main(["jar"]) == 0
        assert capsys.readouterr().out == f"{JAR}\n"

        def fails(java: str, home: str) -> str:
            raise StreamJoinError("streamjoin's Java classes could not be built: Line 9")

        patch.setattr(jvmjar, "build_jar", fails)
        assert main(["jar"]) == 1
        assert "could not be built: Line 9" in capsys.readouterr().err


class _Class:
    """A stand-in for py4j's ``JavaClass``: each attribute access is a lookup in the JVM."""

    def __init__(self) -> None:
        self.lookups: list[str] = []

    def __getattr__(self, name: str) -> t.Callable[[int], tuple[str, int]]:
        self.lookups.append(name)
        return lambda x: (name, x)


def test_static_methods_are_looked_up_once_each() -> None:
    from streamjoin.runtime.jvm.statics import StaticMethods

    cls = _Class()
    methods = StaticMethods(cls)
    calls = [methods.probe(1), methods.probe(2), methods.expire(3), methods.probe(4)]
    assert calls == [("probe", 1), ("probe", 2), ("expire", 3), ("probe", 4)]
    assert cls.lookups == ["probe", "expire"]
