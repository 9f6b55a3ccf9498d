"""The CLI's runs here map the driver's class-data archive once it is written."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _driver_archive(driver_archive: None) -> None:
    """(The session's archive, started by the first test here: `tests.conftest.driver_archive`.)"""
