"""``streamjoin`` command line: run, explain, demo, bench, cluster, and serve with its query and
status commands (`cli_serve`). A thin shell over the Python API."""

from __future__ import annotations

import argparse
import json
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


def _cmd_bench(args: argparse.Namespace) -> int:
    try:
        from benchmarks.harness import run_workload, summary_line
    except ImportError as err:
        if err.name == "benchmarks":
            msg = (
                "the benchmarks live in streamjoin's source tree, not in the installed package: "
                "run `python -m streamjoin bench ...` in the top folder of a checkout"
            )
        else:
            msg = (
                f"the benchmarks need extra packages ({err.name}): pip install 'streamjoin[bench]'"
            )
        raise StreamJoinError(msg) from None
    size = "quick" if args.quick else "tiny" if args.tiny else "full"
    if args.workload == "multiquery":  # its own modes and report: benchmarks/multiquery.py
        from benchmarks.multiquery import main as multiquery

        return multiquery([f"--{size}"] * (size != "full") + ["--out", args.out] * bool(args.out))
    if args.workload == "adhoc":  # its own modes and report: benchmarks/adhoc.py
        from benchmarks.adhoc import main as adhoc

        return adhoc([f"--{size}"] * (size != "full") + ["--out", args.out] * bool(args.out))
    if args.workload == "overload":  # its own modes and report: benchmarks/overload.py
        from benchmarks.overload import main as overload

        extra = [f"--rate={args.rate}"] * (args.rate is not None)
        extra += [f"--duration={args.duration}"] * (args.duration is not None)
        return overload(
            [f"--{size}"] * (size != "full") + extra + ["--out", args.out] * bool(args.out)
        )
    if args.workload == "soak":  # one long live run of ours alone: benchmarks/soak.py
        from benchmarks.soak import main as soak

        extra = [f"--rate={args.rate}"] * (args.rate is not None)
        extra += [f"--duration={args.duration}"] * (args.duration is not None)
        return soak(extra + ["--out", args.out] * bool(args.out))
    engines = args.engines.split(",") if args.engines else None
    if args.duration is not None and args.rate is None and not args.max_rate:
        msg = "--duration goes with --rate (the live mode)"
        raise StreamJoinError(msg)
    if args.peer_limit is not None and (args.rate is not None or args.max_rate):
        msg = "--peer-limit goes with a backlog run, not --rate (a live run ends with its feed)"
        raise StreamJoinError(msg)
    if args.trigger is not None and (args.rate is None or args.max_rate or args.trigger < 0):
        msg = f"--trigger {args.trigger:g} goes with --rate, not --max-rate, and is 0 or more"
        raise StreamJoinError(msg)
    if args.cold and (args.rate is None or args.max_rate):
        msg = "--cold goes with --rate, not a backlog run or --max-rate (no warm-up job first)"
        raise StreamJoinError(msg)
    if args.warm and (args.rate is not None or args.max_rate):
        msg = "--warm goes with a backlog run (a live run has its warm-up job unless --cold)"
        raise StreamJoinError(msg)
    if args.cases and (args.rate is not None or args.max_rate):
        msg = "--cases goes with a backlog run, not --rate or --max-rate"
        raise StreamJoinError(msg)
    if args.cluster and args.max_rate:
        msg = "--cluster goes with a backlog run or --rate, not --max-rate"
        raise StreamJoinError(msg)
    try:
        if args.max_rate:
            from benchmarks.maxrate import START, run_max_rate
            from benchmarks.maxrate import summary_lines as max_lines

            report = run_max_rate(
                args.workload,
                size,
                start=args.rate or START,
                duration=args.duration,
                engines=engines,
                progress=sys.stderr,
            )
            lines = max_lines(report)
        elif args.rate is not None:
            from benchmarks.rate import TRIGGER, run_rate, summary_lines

            report = run_rate(
                args.workload,
                args.rate,
                size,
                duration=args.duration,
                trigger=TRIGGER if args.trigger is None else args.trigger,
                engines=engines,
                progress=sys.stderr,
                cluster=args.cluster,
                warmup=not args.cold,
            )
            lines = summary_lines(report)
        else:
            report = run_workload(
                args.workload,
                size,
                engines=engines,
                progress=sys.stderr,
                peer_limit=args.peer_limit,
                cluster=args.cluster,
                warm=args.warm,
                only=args.cases.split(",") if args.cases else (),
            )
            lines = summary_line(report)
    except ValueError as err:
        raise StreamJoinError(str(err)) from None
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
    for line in lines:
        print(line, file=sys.stderr)
    print(json.dumps(report))
    return 0


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
    bench = sub.add_parser(
        "bench",
        help="run a benchmark workload: streamjoin and its Spark peer side by side",
        description="Workloads: equi, band, theta, window-growth, long, tpch, nexmark, "
        "multiquery, adhoc, overload, soak (ours alone, fed live for --duration seconds, default "
        "300, at --rate, default 70%% of the highest rate found by --max-rate). The last line "
        "printed is one JSON object with every figure and the ratios to the peer.",
    )
    bench.add_argument("workload")
    size = bench.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="development size (minutes)")
    size.add_argument("--tiny", action="store_true", help="correctness size (seconds)")
    bench.add_argument("--engines", help="comma-separated subset of engines to run")
    bench.add_argument("--out", help="also write the JSON report to this file")
    bench.add_argument(
        "--rate",
        type=float,
        metavar="ROWS_PER_S",
        help="live mode: feed each stream this many rows per second; report whether each "
        "engine keeps up and its end-to-end latency",
    )
    bench.add_argument(
        "--max-rate",
        action="store_true",
        help="live mode: search the highest rate each engine keeps up at (from --rate, default "
        "5000: doubling, then halving the gap three times); equi, band and theta",
    )
    bench.add_argument(
        "--duration",
        type=float,
        metavar="SECONDS",
        help="with --rate: how long to feed (default: tiny 10, quick 30, full 60)",
    )
    bench.add_argument(
        "--trigger",
        type=float,
        metavar="SECONDS",
        help="with --rate: every engine's processing-time trigger (default 1; 0: each batch "
        "as soon as the one before ends, Spark's default)",
    )
    bench.add_argument(
        "--cold",
        action="store_true",
        help="with --rate: no warm-up job before the feed, so the figures include each "
        "engine's cold start (its JVM compiling the first batches' code)",
    )
    bench.add_argument(
        "--warm",
        action="store_true",
        help="backlog runs: each engine runs the backlog once, untimed, in the process of the "
        "run measured (its JVM warm, as on a stream that has run for minutes; not Flink, "
        "which starts a JVM per run)",
    )
    bench.add_argument(
        "--peer-limit",
        type=float,
        metavar="SECONDS",
        help="stop a peer's run after this long, 0 for never (default: quick 60, full 3600); "
        "a stopped peer's throughput is that of its finished batches and its result is unchecked",
    )
    bench.add_argument(
        "--cluster",
        action="store_true",
        help="run every engine on a standalone cluster of 2 workers of 1 core on 127.0.0.1, "
        "started and stopped by the run (backlog workloads, and live ones with --rate)",
    )
    bench.add_argument(
        "--cases",
        metavar="NAMES",
        help="backlog runs: only the cases whose names contain one of these comma-separated "
        "strings (say --cases=-10s,-3600s: with =, as a first string may start with -)",
    )
    bench.set_defaults(func=_cmd_bench)
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
