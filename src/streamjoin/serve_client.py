"""The client side of a served job's control endpoint (`streamjoin query ...`, `streamjoin
status`): plain HTTP from the standard library, so that a command answers without starting Spark."""

from __future__ import annotations

import json
import typing as t
import urllib.error
import urllib.request

from streamjoin.errors import JobError, StreamJoinError


def call(
    method: str,
    path: str,
    body: dict[str, t.Any] | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    timeout: float = 60.0,
) -> t.Any:
    """Send one request to the endpoint and return its JSON answer.

    Raises:
        JobError: the service refused a query for a mistake in its text.
        StreamJoinError: the service refused the request, or none answers there.
    """
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://{host}:{port}{path}", data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as err:
        try:
            refusal = json.loads(err.read())
        except ValueError:
            refusal = {"error": f"HTTP {err.code} {err.reason}"}
        if "line" in refusal:
            raise _job_error(refusal, body) from None
        raise StreamJoinError(str(refusal.get("error"))) from None
    except OSError as err:
        msg = (
            f"no streamjoin service answers at {host}:{port} ({err}); start one with "
            "`streamjoin serve JOB.sql --checkpoint DIR`, or give its --port"
        )
        raise StreamJoinError(msg) from None


def _job_error(refusal: dict[str, t.Any], body: dict[str, t.Any] | None) -> JobError:
    text = str(refusal["error"])
    source = str((body or {}).get("source") or "<query>")
    # The service renders "source:line:col: message (at 'text')"; keep the message alone.
    head = f"{source}:{refusal['line']}:{refusal['col']}: "
    message = text[len(head) :] if text.startswith(head) else text
    at = f" (at {refusal['text']!r})"
    message = message[: -len(at)] if message.endswith(at) else message
    return JobError(
        message,
        line=int(refusal["line"]),
        col=int(refusal["col"]),
        text=str(refusal["text"]),
        source=source,
    )
