"""streamjoin's local file system, compiled by Spark's janino from ``LocalFiles.java``: it sets
the permissions Hadoop's own would (loaded here into the shared session's JVM through a class
loader of its own; the e2e tests run whole jobs on it)."""

from __future__ import annotations

import os
import stat
import typing as t
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from py4j.protocol import Py4JJavaError

from streamjoin.runtime.jvm.jar import build_jar
from streamjoin.runtime.local.localfs import CLASS_NAME
from streamjoin.runtime.session import check_java

if t.TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession


class _Java:
    """A JVM object behind a name (hypothesis prints its examples' arguments; a py4j proxy
    cannot be printed)."""

    def __init__(self, name: str, obj: t.Any) -> None:
        self.name, self.obj = name, obj

    def __getattr__(self, attr: str) -> t.Any:
        if attr.startswith("_"):  # (printers look for hooks such as `_repr_pretty_`)
            raise AttributeError(attr)
        return getattr(self.obj, attr)

    def __repr__(self) -> str:
        return self.name


@pytest.fixture(scope="module")
def local_files(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> t.Any:
    """A `streamjoin.LocalFiles`, initialised on the session's Hadoop settings."""
    from pyspark.find_spark_home import _find_spark_home

    jar = build_jar(check_java(), _find_spark_home(), str(tmp_path_factory.mktemp("cache")))
    assert jar is not None
    sc = spark.sparkContext
    jvm: t.Any = sc._jvm
    gateway: t.Any = sc._gateway
    urls = gateway.new_array(jvm.java.net.URL, 1)
    urls[0] = jvm.java.io.File(jar).toURI().toURL()
    loader = jvm.java.net.URLClassLoader(
        urls, jvm.java.lang.Thread.currentThread().getContextClassLoader()
    )
    cls = loader.loadClass(CLASS_NAME)
    fs = cls.getConstructor(gateway.new_array(jvm.java.lang.Class, 0)).newInstance(
        gateway.new_array(jvm.java.lang.Object, 0)
    )
    fs.initialize(jvm.java.net.URI("file:///"), sc._jsc.hadoopConfiguration())
    return _Java(CLASS_NAME, fs)


def _path(spark: SparkSession, path: Path) -> t.Any:
    return getattr(spark.sparkContext._jvm, "org.apache.hadoop.fs.Path")(str(path))


def _permission(spark: SparkSession, mode: int) -> t.Any:
    return getattr(spark.sparkContext._jvm, "org.apache.hadoop.fs.permission.FsPermission")(
        f"{mode:03o}"
    )


# (tmp_path is shared by the examples: each makes a path of its own)
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(mode=st.integers(0, 0o777), directory=st.booleans())
def test_permissions_are_set_bit_for_bit(
    spark: SparkSession, local_files: t.Any, tmp_path: Path, mode: int, directory: bool
) -> None:
    path = tmp_path / uuid.uuid4().hex
    if directory:
        path.mkdir()
    else:
        path.write_bytes(b"x")
    local_files.setPermission(_path(spark, path), _permission(spark, mode))
    assert stat.S_IMODE(os.stat(path).st_mode) == mode


def test_the_sticky_bit_goes_through_hadoops_own(
    spark: SparkSession, local_files: t.Any, tmp_path: Path
) -> None:
    local_files.setPermission(_path(spark, tmp_path), _permission(spark, 0o1750))
    assert stat.S_IMODE(os.stat(tmp_path).st_mode) == 0o1750


def test_a_missing_path_is_not_found(
    spark: SparkSession, local_files: t.Any, tmp_path: Path
) -> None:
    with pytest.raises(Py4JJavaError, match=r"FileNotFoundException.*nothing-here"):
        local_files.setPermission(
            _path(spark, tmp_path / "nothing-here"), _permission(spark, 0o644)
        )


def test_created_files_and_directories_get_hadoops_modes_and_checksums(
    spark: SparkSession, local_files: t.Any, tmp_path: Path
) -> None:
    hadoop: t.Any = _path(spark, tmp_path / "h").getFileSystem(
        spark.sparkContext._jsc.hadoopConfiguration()
    )
    for fs, name in ((local_files, "ours"), (hadoop, "hadoops")):
        assert fs.mkdirs(_path(spark, tmp_path / name / "d"), _permission(spark, 0o750))
        out = fs.create(_path(spark, tmp_path / name / "d" / "f"), True)
        out.write(bytearray(b"rows"))
        out.close()
    for rel in ("d", "d/f", "d/.f.crc"):
        ours, hadoops = os.stat(tmp_path / "ours" / rel), os.stat(tmp_path / "hadoops" / rel)
        assert stat.S_IMODE(ours.st_mode) == stat.S_IMODE(hadoops.st_mode), rel
    assert (tmp_path / "ours" / "d" / "f").read_bytes() == b"rows"
