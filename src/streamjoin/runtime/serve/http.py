"""The control endpoint of a served job: JSON over HTTP, on 127.0.0.1 unless told otherwise.

=========================  ===================================================================
``GET /status``            `Serving.status`
``GET /queries``           `Serving.queries`
``POST /queries``          body ``{"sql": text, "source": name, "wait": seconds}``: add a query
                           (`Serving.add_query`); with ``wait``, answer once a batch applied it
``DELETE /queries/NAME``   drop a query (`Serving.drop_query`); ``?wait=seconds`` as above
``GET /metrics``           the newest batch's figures as Prometheus text (`runtime.metrics`)
``GET /history``           the figures of the batches kept, oldest first; ``?since=BATCH``
``GET /plan``              ``{"explain": text}``: the running plan (`Serving.plan`)
``GET /``                  the dashboard (a static page, `serve/static/`, that reads the above)
=========================  ===================================================================

A refused change answers 400 with ``{"error": message}`` and, for a mistake in the query's text,
its ``line``, ``col`` and ``text``. Bound beyond the loopback interface the endpoint needs a
token, sent as ``Authorization: Bearer TOKEN``; without one, or with a wrong one, it answers 401.
Without a token, a request must name a loopback ``Host``, come from no other web ``Origin``,
and send its body as ``application/json``: a web page the operator visits cannot then add or
drop queries (a cross-site JSON request needs a CORS check this endpoint never grants, and a
page served under another name cannot rebind it). The dashboard's page and its assets hold no
data and are served without the token; the page takes the token from its address's fragment
(``/#token=TOKEN``, which a browser never sends) and sends it with each read.
"""

from __future__ import annotations

import hmac
import json
import socket
import threading
import typing as t
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from urllib.parse import parse_qs, unquote, urlsplit

from streamjoin.errors import JobError, StreamJoinError
from streamjoin.runtime.metrics.prometheus import CONTENT_TYPE, render

if t.TYPE_CHECKING:
    from streamjoin.runtime.metrics.history import MetricsHistory

DEFAULT_PORT = 8765
LOOPBACK = ("127.0.0.1", "localhost", "::1")
STATIC = {
    "": ("dashboard.html", "text/html; charset=utf-8"),
    "dashboard.js": ("dashboard.js", "text/javascript; charset=utf-8"),
    "dashboard.css": ("dashboard.css", "text/css; charset=utf-8"),
}
"""The dashboard's files by request path, shipped in the package (``serve/static/``)."""
STATIC_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
}
"""The page runs only its own files, and no other site may frame it."""


class Service(t.Protocol):
    """What the endpoint answers from: `Serving` (``serve``) or `RunView` (``run --ui``)."""

    metrics: MetricsHistory

    def status(self) -> dict[str, t.Any]:
        """The service at a glance."""

    def queries(self) -> list[dict[str, t.Any]]:
        """Every query."""

    def plan(self) -> str:
        """The running plan, explained."""

    def add_query(self, sql: str, source: str = ...) -> dict[str, t.Any]:
        """Add a query."""

    def drop_query(self, name: str) -> dict[str, t.Any]:
        """Drop a query."""

    def wait(self, change: int, timeout: float | None = ...) -> bool:
        """Wait for a change to apply."""


def needs_token(host: str) -> bool:
    """Whether an endpoint bound to `host` must be given a token: any host but loopback."""
    return host not in LOOPBACK


class ControlServer:
    """The endpoint of `serving`, answering in a thread of its own once `start`ed.

    Raises:
        StreamJoinError: `host` is beyond loopback and no token is given.
    """

    def __init__(
        self,
        serving: Service,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        token: str | None = None,
    ) -> None:
        if needs_token(host) and not token:
            msg = (
                f"the control endpoint would listen on {host}, beyond this machine's loopback: "
                "give it a token (--token) that every request must carry"
            )
            raise StreamJoinError(msg)
        handler = type("Handler", (_Handler,), {"serving": serving, "token": token})
        server = _Server6 if ":" in host else _Server  # (":": an IPv6 address)
        self._server = server((host, port), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        """The port it listens on (the one given, or the one the system chose for 0)."""
        return int(self._server.server_address[1])

    def start(self) -> ControlServer:
        """Answer requests from now on."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop answering and free the port."""
        self._server.shutdown()
        self._server.server_close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


def _seconds(value: object) -> float | None:
    """A request's ``wait``, checked before anything changes."""
    if value is None:
        return None
    try:
        seconds = float(t.cast("float", value))
    except (TypeError, ValueError):
        msg = f"wait must be a number of seconds, got {value!r}"
        raise ValueError(msg) from None
    if not 0 <= seconds <= 3600:
        msg = f"wait must be between 0 and 3600 seconds, got {seconds:g}"
        raise ValueError(msg)
    return seconds


class _Handler(BaseHTTPRequestHandler):
    serving: Service
    token: str | None

    def log_message(self, format: str, *args: t.Any) -> None:
        """Quiet: the service's terminal shows the batches, not the requests."""

    def do_GET(self) -> None:  # (the base class's names)
        self._answer("GET")

    def do_POST(self) -> None:
        self._answer("POST")

    def do_DELETE(self) -> None:
        self._answer("DELETE")

    def _answer(self, method: str) -> None:
        url = urlsplit(self.path)
        page = url.path.strip("/")
        if method == "GET" and page in STATIC:
            if self.token is None and self._refused(method):
                return
            name, kind = STATIC[page]
            data = (resources.files(__package__) / "static" / name).read_bytes()
            self._send_bytes(200, data, kind, STATIC_HEADERS)
            return
        if self.token:
            # (The header's bytes as sent: http.server decodes them as Latin-1.)
            given = self.headers.get("Authorization", "").encode("latin-1", "replace")
            if not hmac.compare_digest(given, f"Bearer {self.token}".encode()):
                self._send(401, {"error": "a valid token is required (Authorization: Bearer ...)"})
                return
        elif self._refused(method):
            return
        parts = [unquote(p) for p in url.path.strip("/").split("/") if p]
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        if method == "GET" and parts == ["metrics"]:
            self._send_bytes(200, render(self.serving.metrics), CONTENT_TYPE)
            return
        try:
            status, body = self._route(method, parts, query)
        except JobError as err:
            status, body = (
                400,
                {
                    "error": err.render(),
                    "line": err.line,
                    "col": err.col,
                    "text": err.text,
                },
            )
        except (StreamJoinError, ValueError) as err:
            status, body = 400, {"error": str(err)}
        self._send(status, body)

    def _refused(self, method: str) -> bool:
        """Answer 403 and say True when a request without a token is refused."""
        refusal = self._local_refusal(method)
        if refusal:
            self._send(403, {"error": refusal})
        return refusal is not None

    def _local_refusal(self, method: str) -> str | None:
        """Why a request without a token is refused, or None: it must look like a local
        client's, not a web page's."""
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0].strip("[]")
        if host not in LOOPBACK:
            return f"Host {host!r} is not this machine's loopback name"
        origin = self.headers.get("Origin")
        if origin is not None and urlsplit(origin).hostname not in LOOPBACK:
            return f"requests from the web page {origin} are refused"
        kind = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if method != "GET" and kind != "application/json":
            return "a change must be sent as application/json"
        return None

    def _route(self, method: str, parts: list[str], query: dict[str, str]) -> tuple[int, t.Any]:
        serving = self.serving
        if method == "GET" and parts == ["status"]:
            return 200, serving.status()
        if method == "GET" and parts == ["queries"]:
            return 200, serving.queries()
        if method == "GET" and parts == ["history"]:
            since = int(query.get("since", -1))
            return 200, [r.to_dict() for r in serving.metrics.records(since)]
        if method == "GET" and parts == ["plan"]:
            return 200, {"explain": serving.plan()}
        if method == "POST" and parts == ["queries"]:
            body = self._json()
            sql = body.get("sql")
            if not isinstance(sql, str):
                msg = 'the body must be JSON with the query file\'s text as "sql"'
                raise ValueError(msg)
            wait = _seconds(body.get("wait"))
            added = serving.add_query(sql, str(body.get("source") or "<query>"))
            added["applied"] = self._wait(added["change"], wait)
            return 201, added
        if method == "DELETE" and len(parts) == 2 and parts[0] == "queries":
            wait = _seconds(query.get("wait"))
            dropped = serving.drop_query(parts[1])
            dropped["applied"] = self._wait(dropped["change"], wait)
            return 200, dropped
        return 404, {"error": f"no such request: {method} /{'/'.join(parts)}"}

    def _wait(self, change: int, seconds: float | None) -> bool | None:
        return None if seconds is None else self.serving.wait(change, seconds)

    def _json(self) -> dict[str, t.Any]:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError as err:
            msg = f"the body is not JSON: {err}"
            raise ValueError(msg) from None
        if not isinstance(body, dict):
            msg = "the body must be a JSON object"
            raise ValueError(msg)
        return body

    def _send(self, status: int, body: t.Any) -> None:
        self._send_bytes(status, json.dumps(body, indent=1).encode(), "application/json")

    def _send_bytes(
        self, status: int, data: bytes, kind: str, headers: t.Mapping[str, str] | None = None
    ) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        # (Figures change every batch: a browser must ask again, not reuse a stored answer.)
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(data)
