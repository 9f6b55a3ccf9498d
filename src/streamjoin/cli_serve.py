"""``streamjoin serve`` and the commands that talk to a served job: ``query add|drop|list`` and
``status`` (`runtime.serve`)."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import typing as t

from streamjoin.errors import JobError, StreamJoinError
from streamjoin.serve_client import call

if t.TYPE_CHECKING:
    from streamjoin.runtime.batch.processor import BatchReport

TOKEN_ENV = "STREAMJOIN_TOKEN"
_SECONDS = {"ms": 1e-3, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_history(text: str) -> int | None:
    """``10m`` / ``90s`` / ``1h`` / ``0`` → microseconds; ``all`` → None (keep everything).

    >>> parse_history("10m"), parse_history("0"), parse_history("all")
    (600000000, 0, None)
    """
    if text.strip().lower() == "all":
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*", text)
    if m is None or (m.group(2) is None and float(m.group(1)) != 0):
        msg = f"--history {text!r}: expected e.g. 0, 90s, 10m, 1h or all"
        raise argparse.ArgumentTypeError(msg)
    return round(float(m.group(1)) * _SECONDS[m.group(2) or "s"] * 1e6)


def add_commands(sub: t.Any, parse_trigger: t.Callable[[str], str]) -> None:
    """Add ``serve``, ``query`` and ``status`` to the subcommands `sub`."""
    serve = sub.add_parser(
        "serve", help="run a job as a service whose queries are added and dropped while it runs"
    )
    serve.add_argument("job", help="the job file (.sql): its streams, and any first queries")
    serve.add_argument("--checkpoint", required=True, help="state, progress and query set")
    serve.add_argument("--trigger", type=parse_trigger, default="1 seconds", help="batch interval")
    serve.add_argument(
        "--history",
        type=parse_history,
        default=0,
        help="event time every stream keeps behind the watermark for queries added later "
        "(e.g. 10m; all: everything; default 0: what the running queries need)",
    )
    serve.add_argument("--master", default=None, help="Spark master (default local[*])")
    serve.add_argument("--timeout", type=float, default=None, help="stop after this many seconds")
    endpoint_arguments(serve)
    serve.set_defaults(func=_cmd_serve)

    query = sub.add_parser("query", help="add, drop or list the queries of a served job")
    verbs = query.add_subparsers(dest="verb", required=True)
    add = verbs.add_parser("add", help="add the query of a file (CREATE SINK + INSERT INTO)")
    add.add_argument("file", help="the query file (.sql); the query is named after its sink")
    add.add_argument("--wait", type=float, default=60.0, help="seconds to wait for it to start")
    drop = verbs.add_parser("drop", help="drop a query (by its name or its sink's)")
    drop.add_argument("name")
    drop.add_argument("--wait", type=float, default=60.0, help="seconds to wait for it to stop")
    listing = verbs.add_parser("list", help="the queries running, starting and stopping")
    for verb in (add, drop, listing):
        endpoint_arguments(verb)
    add.set_defaults(func=_cmd_query_add)
    drop.set_defaults(func=_cmd_query_drop)
    listing.set_defaults(func=_cmd_query_list)

    status = sub.add_parser("status", help="a served job at a glance")
    endpoint_arguments(status)
    status.set_defaults(func=_cmd_status)


def endpoint_arguments(parser: argparse.ArgumentParser) -> None:
    """``--port``, ``--host`` and ``--token``: where a served job (or ``run --ui``) listens."""
    parser.add_argument("--port", type=int, default=8765, help="the service's port (8765)")
    parser.add_argument("--host", default="127.0.0.1", help="the service's address")
    parser.add_argument(
        "--token", default=os.environ.get(TOKEN_ENV), help=f"access token (or ${TOKEN_ENV})"
    )


def _cmd_serve(args: argparse.Namespace) -> int:
    from streamjoin.cli import _load
    from streamjoin.runtime.engine import Engine
    from streamjoin.runtime.progress import ProgressLine
    from streamjoin.runtime.serve.http import ControlServer
    from streamjoin.runtime.state.lock import refuse_if_held

    job = _load(args.job)
    refuse_if_held(args.checkpoint)  # (before Spark starts)
    line = ProgressLine()

    def on_batch(report: BatchReport) -> None:
        line(report)

    engine = Engine(master=args.master)
    serving = engine.start(
        job,
        checkpoint=args.checkpoint,
        trigger=args.trigger,
        history=args.history,
        on_batch=on_batch,
    )
    try:
        server = ControlServer(serving, args.host, args.port, args.token).start()
    except BaseException:
        serving.stop()
        raise
    print(
        f"serving {args.job} ({len(serving.queries())} queries) on "
        f"http://{args.host}:{server.port}; checkpoint {args.checkpoint}; Ctrl-C stops",
        file=sys.stderr,
    )
    started = time.monotonic()
    try:
        while serving.active:
            serving.await_termination(0.5)
            if args.timeout is not None and time.monotonic() - started > args.timeout:
                break
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        summary = serving.stop()
        line.close()
    serving.raise_failure()
    print(summary.render())
    return 0


def _client(args: argparse.Namespace) -> dict[str, t.Any]:
    return {"host": args.host, "port": args.port, "token": args.token}


def _cmd_query_add(args: argparse.Namespace) -> int:
    try:
        with open(args.file, encoding="utf-8") as f:
            text = f.read()
    except OSError as err:
        msg = f"cannot read query file {args.file}: {err.strerror}"
        raise StreamJoinError(msg) from None
    body = {"sql": text, "source": args.file, "wait": args.wait}
    try:
        added = call("POST", "/queries", body, timeout=args.wait + 30, **_client(args))
    except JobError as err:
        raise err.with_source(args.file) from None
    for warning in added.get("warnings", []):
        print(f"warning: {warning}", file=sys.stderr)
    when = "started" if added.get("applied") else "starts at the next batch"
    print(f"query {added['name']} (sink {added['sink']}) {when}")
    return 0


def _cmd_query_drop(args: argparse.Namespace) -> int:
    path = f"/queries/{args.name}?wait={args.wait}"
    dropped = call("DELETE", path, timeout=args.wait + 30, **_client(args))
    when = "stopped" if dropped.get("applied") else "stops at the next batch"
    print(f"query {dropped['name']} {when}")
    return 0


def _cmd_query_list(args: argparse.Namespace) -> int:
    rows = call("GET", "/queries", **_client(args))
    if not rows:
        print("no queries")
    for q in rows:
        since = "the start" if q["since"] is None else f"batch {q['since']}"
        shares = f"; shares a join with {', '.join(q['shares_with'])}" if q["shares_with"] else ""
        print(
            f"{q['name']:<16} {q['state']:<9} sink {q['sink']:<16} "
            f"{'+'.join(q['streams']):<12} since {since}, {q['rows_out']} rows out{shares}"
        )
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    print(json.dumps(call("GET", "/status", **_client(args)), indent=1))
    return 0
