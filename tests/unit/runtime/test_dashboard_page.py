"""The dashboard's page in headless Chromium against a service bound beyond loopback: with the
token in the address's fragment it reads and draws the figures; without it, it draws nothing and
says the endpoint refused it. (The page of a real job: ``tests/spark/test_dashboard.py``.)"""

from __future__ import annotations

import typing as t

import pytest

from streamjoin.runtime.metrics.history import MetricsHistory
from streamjoin.runtime.serve.http import ControlServer
from tests.browser import Browser, find_or_install
from tests.unit.runtime.test_metrics import _report

if t.TYPE_CHECKING:
    from collections.abc import Iterator


class FakeServing:
    def __init__(self) -> None:
        self.metrics = MetricsHistory()
        for b in range(3):
            self.metrics.record(_report(b, late=b), ["q"])

    def status(self) -> dict[str, t.Any]:
        return {"active": True, "watermark": "1970-01-01 00:00:18.000", "error": None}

    def queries(self) -> list[dict[str, t.Any]]:
        row = {"name": "q", "state": "running", "streams": ["A", "B"], "since": None}
        return [{**row, "rows_out": 7, "shares_with": []}]

    def plan(self) -> str:
        return "streams:\n  A, B\n\nquery q (line 1): INSERT INTO q\n  predicate: a.k = b.k\n"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    try:
        binary = find_or_install()
    except RuntimeError as err:
        pytest.skip(f"no headless Chromium: {err}")
    opened = Browser(binary)
    yield opened
    opened.close()


def test_the_page_sends_the_token_of_its_address(browser: Browser) -> None:
    server = ControlServer(t.cast("t.Any", FakeServing()), "0.0.0.0", 0, "s3cret").start()
    text = "document.getElementById('{}').textContent"
    try:
        browser.open(f"http://127.0.0.1:{server.port}/#token=s3cret")
        browser.wait_for(f"{text.format('last-batch')} === '2'", 30)
        assert browser.evaluate(text.format("rows-out-total")) == "7"
        assert browser.evaluate(text.format("rejected")) == "2 · 1"
        assert browser.evaluate("document.querySelectorAll('#heatmaps rect').length") == 4
        plan = browser.evaluate("document.querySelector('tr[data-query=q] pre').textContent")
        assert plan.startswith("query q (line 1)") and "predicate: a.k = b.k" in plan
        events = browser.evaluate(text.format("events"))
        assert "batch 2: 2 late and 1 malformed rows to the dead letters" in events
        assert browser.evaluate(text.format("error")) == ""
        browser.open(f"http://127.0.0.1:{server.port}/")
        assert "401" in browser.wait_for(text.format("error"), 30)
        assert browser.evaluate(text.format("last-batch")) == "–"
    finally:
        server.stop()
