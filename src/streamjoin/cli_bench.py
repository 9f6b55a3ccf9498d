"""``streamjoin bench``: the benchmark workloads of a checkout (`benchmarks/`), each engine
side by side, its options checked against each other before anything runs."""

from __future__ import annotations

import json
import sys
import typing as t

from streamjoin.errors import StreamJoinError

if t.TYPE_CHECKING:
    import argparse


def add_bench(sub: t.Any) -> None:
    """The ``bench`` command, on the subparsers `sub` of the ``streamjoin`` parser."""
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
