"""One Spark standalone cluster (a master and two 1-core workers) for every cluster test."""

from __future__ import annotations

import typing as t
from pathlib import Path

import pytest

from streamjoin.cluster import LocalCluster

if t.TYPE_CHECKING:
    from collections.abc import Iterator

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests of this folder ``cluster`` (``pytest -m cluster`` runs them alone)."""
    for item in items:
        if Path(str(item.fspath)).is_relative_to(_HERE):
            item.add_marker(pytest.mark.cluster)


@pytest.fixture(scope="package")
def local_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Started once for all the tests here (~15 s); stopped, with every process it started,
    after the last of them (package scope: not idling on through the rest of the suite)."""
    from streamjoin.errors import JavaMissingError
    from streamjoin.runtime.session import check_java

    try:
        check_java()
    except JavaMissingError as err:
        pytest.skip(str(err))
    with LocalCluster(tmp_path_factory.mktemp("cluster"), workers=2, cores=1) as cluster:
        yield cluster


@pytest.fixture
def cluster(local_cluster: LocalCluster, driver_archive: None) -> LocalCluster:
    """The shared cluster with both workers alive (a test before may have killed one); the
    drivers of the runs on it map the session's class-data archive once it is written."""
    for i, daemon in enumerate(local_cluster.worker_daemons):
        if daemon is None:
            local_cluster.start_worker(i)
    local_cluster.wait_workers(local_cluster.workers)
    return local_cluster
