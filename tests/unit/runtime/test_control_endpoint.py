"""The control endpoint's gate (`runtime.serve.http`), before any change reaches the service: a
token beyond loopback, and without one, requests that only a local client sends."""

from __future__ import annotations

import http.client
import json
import typing as t

import pytest

from streamjoin.errors import StreamJoinError
from streamjoin.runtime.serve.http import ControlServer


class FakeServing:
    """Records what reaches the service."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, t.Any]] = []

    def status(self) -> dict[str, t.Any]:
        self.calls.append(("status", None))
        return {"active": True}

    def add_query(self, sql: str, source: str) -> dict[str, t.Any]:
        self.calls.append(("add", sql))
        return {"name": "x", "change": 1}

    def drop_query(self, name: str) -> dict[str, t.Any]:
        self.calls.append(("drop", name))
        return {"name": name, "change": 2}

    def wait(self, change: int, timeout: float | None = None) -> bool:
        return True


def _request(
    port: int, method: str, path: str, body: object = None, **headers: str
) -> tuple[int, t.Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    data = None if body is None else json.dumps(body)
    conn.request(
        method, path, body=data, headers={k.replace("_", "-"): v for k, v in headers.items()}
    )
    answer = conn.getresponse()
    status, text = answer.status, answer.read()
    conn.close()
    return status, json.loads(text)


@pytest.fixture
def served() -> t.Iterator[tuple[FakeServing, int]]:
    serving = FakeServing()
    server = ControlServer(t.cast("t.Any", serving), "127.0.0.1", 0).start()
    yield serving, server.port
    server.stop()


def test_beyond_loopback_a_token_is_required() -> None:
    with pytest.raises(StreamJoinError, match="give it a token"):
        ControlServer(t.cast("t.Any", FakeServing()), "0.0.0.0", 0)


def test_a_local_client_gets_through(served: tuple[FakeServing, int]) -> None:
    serving, port = served
    json_type = {"Content_Type": "application/json"}
    assert _request(port, "GET", "/status") == (200, {"active": True})
    status, body = _request(port, "POST", "/queries", {"sql": "INSERT ...", "wait": 1}, **json_type)
    assert (status, body["applied"]) == (201, True)
    assert _request(port, "DELETE", "/queries/x?wait=0", **json_type)[0] == 200
    assert [c[0] for c in serving.calls] == ["status", "add", "drop"]


def test_a_web_page_does_not(served: tuple[FakeServing, int]) -> None:
    serving, port = served
    attempts = [
        ("POST", {"Content_Type": "text/plain"}, "application/json"),
        ("POST", {"Content_Type": "application/json", "Origin": "http://evil.example"}, "web page"),
        ("GET", {"Host": "evil.example:8765"}, "loopback"),
        ("DELETE", {"Content_Type": "application/x-www-form-urlencoded"}, "application/json"),
    ]
    for method, headers, why in attempts:
        path = "/queries" if method == "POST" else "/queries/x" if method == "DELETE" else "/status"
        body = {"sql": "INSERT ..."} if method == "POST" else None
        status, answer = _request(port, method, path, body, **headers)
        assert status == 403 and why in answer["error"], (method, headers, answer)
    assert serving.calls == []


def test_a_bad_wait_changes_nothing(served: tuple[FakeServing, int]) -> None:
    serving, port = served
    status, answer = _request(
        port, "POST", "/queries", {"sql": "x", "wait": "soon"}, Content_Type="application/json"
    )
    assert status == 400 and "wait must be a number" in answer["error"]
    assert serving.calls == []


def test_with_a_token_only_the_token_counts() -> None:
    serving = FakeServing()
    server = ControlServer(t.cast("t.Any", serving), "127.0.0.1", 0, token="tök").start()
    try:
        assert _request(server.port, "GET", "/status")[0] == 401
        assert _request(server.port, "GET", "/status", Authorization="Bearer nope")[0] == 401
        # (A header is Latin-1 on the wire: the token's UTF-8 bytes, as a client sends them.)
        token = "Bearer tök".encode().decode("latin-1")
        assert _request(server.port, "GET", "/status", Authorization=token)[0] == 200
    finally:
        server.stop()
