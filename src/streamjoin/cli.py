"""``streamjoin`` command line: run, explain, demo, bench (`cli_bench`), cluster, and serve with
its query and status commands (`cli_serve`). A thin shell over the Python API."""

from __future__ import annotations

import argparse
import re
import sys
import traceback
import typing as t

from streamjoin.errors import JavaMissingError, JobError, StreamJoinError

if t.TYPE_CHECKING:
    from collections.abc import Sequence

    from streamjoin.model import Job

EXIT_JOB_ERROR = 2
EXIT_NO_JAVA = 3

_UNITS = {"ms": "milliseconds", "s": "seconds", "m": "minutes", "h": "hours"}


def parse_trigger(text: str) -> str:
    """``1s`` / ``500ms`` / ``2 seconds`` → Spark's processingTime text.

    >>> parse_trigger("1s"), parse_trigger("250ms"), parse_trigger("2 minutes")
    ('1 seconds', '250 milliseconds', '2 minutes')
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)\s*", text)
    if m:
        return f"{m.group(1)} {_UNITS[m.group(2)]}"
    if re.fullmatch(r"\s*\d+(\.\d+)?\s+[a-z]+\s*", text):
        return text.strip()
    msg = f"--trigger {text!r}: expected e.g. 1s, 500ms, 2m or '10 seconds'"
    raise argparse.ArgumentTypeError(msg)


def _load(path: str) -> Job:
    from streamjoin.sql import parse_job

    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as err:
        msg = f"cannot read job file {path}: {err.strerror}"
        raise StreamJoinError(msg) from None
    try:
        return parse_job(text, path)
    except JobError as err:
        raise err.with_source(path) from None


def _show_job_error(err: JobError) -> None:
    print(f"error: {err.render()}", file=sys.stderr)
    try:
        with open(err.source, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return
    if 1 <= err.line <= len(lines):
        print(f"  {err.line:>4} | {lines[err.line - 1]}", file=sys.stderr)
        width = max(len(err.text), 1) if "\n" not in err.text else 1
        print(f"       | {' ' * (err.col - 1)}{'^' * width}", file=sys.stderr)


def _cmd_explain(args: argparse.Namespace) -> int:
    from streamjoin.plan import plan_job

    print(plan_job(_load(args.job)).explain())
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    job = _load(args.job)
    if args.checkpoint:  # (a run on a checkpoint in use is refused before Spark starts)
        from streamjoin.runtime.state.lock import refuse_if_held

        refuse_if_held(args.checkpoint)
    from streamjoin.runtime.engine import Engine
    from streamjoin.runtime.serve.runview import Ui

    engine = Engine(master=args.master)
    summary = engine.run(
        job,
        checkpoint=args.checkpoint,
        once=args.once,
        trigger=args.trigger,
        timeout=args.timeout,
        final=args.final,
        ui=Ui(args.host, args.port, args.token) if args.ui else None,
    )
    print(summary.render())
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from streamjoin.demo import run_demo

    return run_demo(args.dir, rows=args.rows, master=args.master)


def _cmd_jar(args: argparse.Namespace) -> int:
    from streamjoin.cluster import spark_home
    from streamjoin.runtime.jvm.jar import build_jar
    from streamjoin.runtime.session import check_java

    print(build_jar(check_java(), str(spark_home())))
    return 0


def _cmd_cluster(args: argparse.Namespace) -> int:
    from streamjoin.cluster import LocalCluster

    if args.action == "start":
        cluster = LocalCluster(args.dir, workers=args.workers, cores=args.cores, memory=args.memory)
        cluster.start()
        print(cluster.master_url)
        print(f"web UI {cluster.webui_url}; logs under {cluster.dir / 'logs'}", file=sys.stderr)
        return 0
    cluster = LocalCluster.load(args.dir)
    if args.action == "stop":
        cluster.stop()
        return 0
    if not cluster.alive():
        print(f"{cluster.master_url}: not running")
        return 1
    print(f"{cluster.master_url}: {cluster.alive_workers()} of {cluster.workers} workers alive")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``streamjoin`` command."""
    from streamjoin.cli_bench import add_bench
    from streamjoin.cli_serve import add_commands, endpoint_arguments

    parser = argparse.ArgumentParser(
        prog="streamjoin", description="Continuous joins over data streams on Apache Spark."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a job file")
    run.add_argument("job", help="the job file (.sql)")
    run.add_argument("--once", action="store_true", help="process all available input, then exit")
    run.add_argument(
        "--final",
        action="store_true",
        help="with --once: the input is finished; emit every window still open",
    )
    run.add_argument("--checkpoint", help="state and progress directory (restart continues here)")
    run.add_argument("--trigger", type=parse_trigger, default="1 seconds", help="batch interval")
    run.add_argument("--master", default=None, help="Spark master (default local[*])")
    run.add_argument("--timeout", type=float, default=None, help="stop after this many seconds")
    run.add_argument(
        "--ui", action="store_true", help="serve the dashboard and /metrics while it runs"
    )
    endpoint_arguments(run)
    run.set_defaults(func=_cmd_run)
    explain = sub.add_parser("explain", help="print the plan of a job file")
    explain.add_argument("job")
    explain.set_defaults(func=_cmd_explain)
    demo = sub.add_parser("demo", help="generate data and run a demo job in local mode")
    demo.add_argument("--dir", default="demo-out", help="where the data and results go")
    demo.add_argument("--rows", type=int, default=20_000, help="rows per stream")
    demo.add_argument("--master", default=None)
    demo.set_defaults(func=_cmd_demo)
    add_bench(sub)
    jar = sub.add_parser(
        "jar",
        help="build the jar of streamjoin's Java classes and print its path",
        description="For spark-submit, which starts the driver itself: pass the jar with --jars "
        "and --driver-class-path, so that a cluster's executors hold the joins' indexes.",
    )
    jar.set_defaults(func=_cmd_jar)
    cluster = sub.add_parser(
        "cluster",
        help="a Spark standalone cluster on this machine (master + workers on 127.0.0.1)",
        description="start prints the master URL to pass to run --master; stop ends exactly "
        "the processes start began; status says how many workers are alive.",
    )
    cluster.add_argument("action", choices=("start", "stop", "status"))
    cluster.add_argument("--dir", required=True, help="logs, work dirs and the cluster's state")
    cluster.add_argument("--workers", type=int, default=2)
    cluster.add_argument("--cores", type=int, default=1, help="cores per worker")
    cluster.add_argument("--memory", default="2g", help="memory per worker")
    cluster.set_defaults(func=_cmd_cluster)
    add_commands(sub, parse_trigger)
    return parser


def _debug() -> bool:
    """Whether the setting ``STREAMJOIN_DEBUG`` asks for tracebacks (`runtime.settings`)."""
    from streamjoin.runtime.settings import Settings

    try:
        return Settings.read(lambda _key: None).debug
    except StreamJoinError:  # (another setting is bad: show everything)
        return True


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2: job-file error, 3: no Java, 1: other errors)."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except JobError as err:
        _show_job_error(err)
        return EXIT_JOB_ERROR
    except JavaMissingError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_NO_JAVA
    except StreamJoinError as err:
        print(f"error: {err}", file=sys.stderr)
        if _debug():
            traceback.print_exc()
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
