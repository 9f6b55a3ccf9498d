"""Shared test set-up: UTC everywhere, hypothesis profiles, folder markers, one Spark session."""

from __future__ import annotations

import os
import shutil
import time
import typing as t
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Spark runs with session time zone UTC; make Python's datetime conversions agree with it.
os.environ["TZ"] = "UTC"
time.tzset()

settings.register_profile(
    "ci", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "dev", max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

if t.TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import SparkSession

_HERE = Path(__file__).parent


_ARCHIVE_MADE = pytest.StashKey[str]()


@pytest.hookimpl(trylast=True)  # (after pytest's own, which makes its temporary directory)
def pytest_configure(config: pytest.Config) -> None:
    """A folder for the session's class-data archive of the CLI's driver JVM
    (`tests.e2e.cli.class_archive`), in the session's base temporary directory, which pytest
    removes past its last three sessions (a killed session leaves nothing else behind). Made
    where the session starts: xdist's workers, started after this, inherit the variable and
    share the archive."""
    from tests.e2e.cli import ARCHIVE_DIR

    if ARCHIVE_DIR not in os.environ:
        folder = config._tmp_path_factory.getbasetemp() / "driver-archive"  # type: ignore[attr-defined]
        folder.mkdir(exist_ok=True)
        os.environ[ARCHIVE_DIR] = config.stash[_ARCHIVE_MADE] = str(folder)


def pytest_unconfigure(config: pytest.Config) -> None:
    """(The archive serves this session only: 166 MB not kept with pytest's last sessions.)"""
    from tests.e2e.cli import ARCHIVE_DIR

    if (folder := config.stash.get(_ARCHIVE_MADE, None)) is not None:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop(ARCHIVE_DIR, None)


# Tests that must not run beside each other on pytest-xdist's workers (``-n 2``, in addopts):
# the cluster tests share one cluster, the benchmark tests one data folder under the temporary
# directory, and the browser tests an ``apt-get install chromium``. Each group runs on one worker.
_GROUPS = {
    "cluster": ("cluster",),
    "bench": ("spark/test_bench_",),
    "browser": ("spark/test_dashboard.py", "unit/runtime/test_dashboard_page.py"),
}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark tests by folder: tests/spark → spark, tests/e2e → e2e (never by hand); and put the
    tests of each of `_GROUPS` on one xdist worker. (First: xdist's own hook, registered after
    this file, reads the group marks to send a group to one worker.)"""
    for item in items:
        path = Path(str(item.fspath))
        parts = path.relative_to(_HERE).parts if path.is_relative_to(_HERE) else ()
        if parts and parts[0] == "spark":
            item.add_marker(pytest.mark.spark)
        elif parts and parts[0] == "e2e":
            item.add_marker(pytest.mark.e2e)
        where = "/".join(parts)
        for group, prefixes in _GROUPS.items():
            if where.startswith(prefixes):
                item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local Spark session for every Spark test (starting one costs ~10 s)."""
    from streamjoin.errors import JavaMissingError
    from streamjoin.runtime.session import check_java

    try:
        java = check_java()
    except JavaMissingError as err:
        pytest.skip(str(err))
    from pyspark.find_spark_home import _find_spark_home
    from pyspark.sql import SparkSession

    from streamjoin.runtime.jvm.jar import CLASS_PATH, build_jar
    from streamjoin.runtime.local import CHECKPOINT_MANAGER
    from streamjoin.runtime.session import LOCAL_CONF

    builder = SparkSession.builder.master("local[2]").appName("streamjoin-tests")
    # The JVM's own tiered compilers, not the quick one of the short-lived test processes
    # (`tests.e2e.cli.QUICK_JIT`): this JVM runs a worker's Spark tests for the whole suite.
    conf = {**LOCAL_CONF, **CHECKPOINT_MANAGER}
    # streamjoin's jar on the class path (the executor-memory index), Hadoop's file system kept.
    jar = build_jar(java, _find_spark_home())
    if jar is not None:
        conf[CLASS_PATH] = jar
    for key, value in {**conf, "spark.sql.shuffle.partitions": "2"}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def driver_archive() -> Iterator[None]:
    """The class-data archive of the CLI's driver JVM, written in the background for the runs of
    the e2e and cluster tests (`tests.e2e.archive`); each run maps it once it is there."""
    from tests.e2e import archive

    writer = archive.start()
    yield
    if writer is not None:
        archive.stop(writer)
