"""The ``overload`` benchmark (issue 35): shedding probes under a budget, JAQPOT's way against
load shedding's, in JAQPOT's model and on a live stream.

``python -m benchmarks.overload [--quick|--tiny] [--rate R] [--duration S] [--out F]`` (or
``streamjoin bench overload``); the last line printed is one JSON object, also written to
``benchmarks/results/overload-<size>.json`` for quick and full runs.

**Model** (`benchmarks.overload_model`): the paper's plans and policies in its fractional model.

**Live**: equi joins fed at a rate (`benchmarks.rate`), three ways, each in a process of its
own:

- ``exact``: the query as written;
- ``jaqpot``: ``WITH (overload = 'shed')``, the allowances JAQPOT's controller picks;
- ``uniform``: the same with ``shed_policy = 'uniform'``: every direction the same share.

The workload makes the directions differ as JAQPOT's setting does (issue 70): stream ``a``
(``l``) arrives at a tenth of ``b``'s (``r``) rate, within 10 s of each other on a key, and
``r``'s rate steps up 3× for the middle third of the run and back (a fluctuating rate). Three
cases (`LIVE`):

- **one partner** (`LIVE`'s first): an ``l`` row's probe of the 10 s of ``r`` before it finds
  about one partner, an ``r`` row's about a tenth of one. The budget is 40 % of the work exact
  processing did a trigger interval on the same feed (both streams' probes and the pairs
  they found; `adapt.overload`, ``pairs_cost``), measured by its run, which goes first.
  Giving the ``l`` rows' probes all they need and the rest to ``r``'s yields about 65 % of
  exact's pairs; uniform shedding yields 40 %.
- **200 partners**, at a rate where writing the pairs is more than a trigger's work: no budget
  given, so each batch's comes from what kept the batches before within the trigger. Exact
  processing falls behind; shedding keeps up. (Where a probe finds one partner, the probes
  and pairs are a small part of a batch's work, most of it the reading and storing of every
  row, which shedding does not skip: skipping all but a trickle of the probes left the batch's
  time unchanged in our runs.)
- **four streams** (`chain_case`): ((a ⋈ b) ⋈ c) ⋈ d at 1:10:1:10 on the operator's chain of
  levels, one partner a slow probe, 40 % of exact's work (its rows and output; its
  combinations' probes, about a tenth of its rows, are not counted in it).

Reported per case and way: output pairs and pairs per second of the run, their share of
exact's, latency p50/p99 and whether it kept up (`benchmarks.rate`), the skipped probes.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
import typing as t

import numpy as np
import pyarrow as pa

from benchmarks.data import two_streams, write_backlog
from benchmarks.harness import ROOT, _say, machine, source_commit
from benchmarks.overload_model import run_model
from benchmarks.rate import TRIGGER
from benchmarks.rate_feed import TICK, Feed
from benchmarks.rate_run import _run_one
from benchmarks.workloads import _STREAM, WATERMARK_SECONDS, Case, two_stream_job

BUDGET_SHARE = 0.4
SIZES: dict[str, dict[str, t.Any]] = {
    "tiny": {
        "rows": 600,
        "span": 30.0,
        "rates": (200.0, 200.0, 200.0),
        "duration": 10.0,
        "plans": 3,
    },
    "quick": {
        "rows": 24_000,
        "span": 120.0,
        "rates": (12_000.0, 20_000.0, 6_000.0),
        "duration": 30.0,
        "plans": 20,
    },
    "full": {
        "rows": 60_000,
        "span": 300.0,
        "rates": (12_000.0, 20_000.0, 6_000.0),
        "duration": 60.0,
        "plans": 50,
    },
}
"""Per size: ``a``'s rows over `span` seconds of event time (``b`` has ten times as many, and
three times that in its middle third), the feed's rate (rows/s per stream) for each of `LIVE`'s
cases and its duration, the model's plans."""
LIVE = ((1, BUDGET_SHARE, 2), (200, None, 2), (1, BUDGET_SHARE, 4))
"""The live cases: partners a slow row's probe finds, the budget as a share of exact's work
(None: from the trigger), and the streams joined (2: ``a ⋈ b``, 4: `chain_case`)."""
WINDOW = 10
ON = (
    f"l.k = r.k AND r.ts BETWEEN l.ts - INTERVAL '{WINDOW}' SECOND "
    f"AND l.ts + INTERVAL '{WINDOW}' SECOND"
)
"""An ``l`` row joins the ``r`` rows of its key within 10 s of it."""
FAST = 10
"""``b``'s rate over ``a``'s (outside its step)."""
WAYS = ("exact", "jaqpot", "uniform")


def keys(size: str, rate: float, partners: int = 1) -> int:
    """The key space where an ``l`` row's probe finds `partners`, fed at `rate` rows/s per
    stream: the ``r`` rows (outside ``r``'s step) of the 10 s before it. The feed replays the
    backlog's event time at its own pace (`rate_feed.Feed`), so the window reaches the rows of
    10 s of feed time: ``r``'s rate there is its share of the ``2 × rate`` rows a second."""
    shape = SIZES[size]
    a_rows, b_rows = shape["rows"], FAST * shape["rows"] * (2 + 3) / 3  # (b's step: 3×)
    r_rate = 2 * rate * FAST * shape["rows"] / (a_rows + b_rows)
    return max(1, round(float(r_rate) * WINDOW / partners))


def overload_case(root: str, size: str, rate: float, partners: int = 1) -> Case:
    """The live workload at `rate` rows/s per stream: `l` steady, `r` ten times as dense and
    3× denser in the middle third of its event time, an `l` row's probe finding `partners`."""
    shape = SIZES[size]
    tables: dict[str, pa.Table] = {}
    space = keys(size, rate, partners)
    for name, rows, seed in (("a", 3 * shape["rows"], 11), ("b", 3 * FAST * shape["rows"], 12)):
        tables |= two_streams(
            rows, span_seconds=shape["span"], keys=space, seed=seed, names=(name,)
        )
    backlog = write_backlog(
        os.path.join(root, "overload"), stepped(tables, ("b",)), {"a": "ts", "b": "ts"}, 12
    )
    name = "overload" if partners == 1 else f"overload-{partners}"
    return Case(name, two_stream_job(backlog, ON), None, backlog, float(WINDOW), ON)


CHAIN = "abcd"
"""The four-way case's streams, in its plan's order: a and c slow, b and d ten times as fast."""
NEAR = "{0}.ts BETWEEN {1}.ts - INTERVAL '{2}' SECOND AND {1}.ts + INTERVAL '{2}' SECOND"


def chain_case(root: str, size: str, rate: float) -> Case:
    """The four-way live workload at `rate` rows/s per stream on average: ((a ⋈ b) ⋈ c) ⋈ d
    on a key, each input within 10 s of the one before, a and c at a tenth of b's and d's
    rates; a slow row's probe of a fast stream finds one partner."""
    shape = SIZES[size]
    share = {n: FAST if n in "bd" else 1 for n in CHAIN}
    fast = len(CHAIN) * rate * FAST / sum(share.values())  # (a fast stream's feed rate)
    space = max(1, round(fast * WINDOW))
    tables: dict[str, pa.Table] = {}
    for seed, name in enumerate(CHAIN, 21):
        rows = share[name] * shape["rows"]
        tables |= two_streams(
            rows, span_seconds=shape["span"], keys=space, seed=seed, names=(name,)
        )
    backlog = write_backlog(
        os.path.join(root, "overload-chain"), tables, dict.fromkeys(CHAIN, "ts"), 12
    )
    streams = "".join(
        _STREAM.format(name=n, wm=WATERMARK_SECONDS, path=backlog.streams[n]) for n in CHAIN
    )
    joins = " ".join(
        f"JOIN {n} ON {n}.k = {m}.k AND {NEAR.format(n, m, WINDOW)}"
        for m, n in itertools.pairwise(CHAIN)
    )
    job = (
        streams
        + "CREATE SINK out WITH (format = 'parquet', path = '{out}');\n"
        + "INSERT INTO out SELECT a.id AS aid, b.id AS bid, c.id AS cid, d.id AS did\n"
        + f"FROM a {joins};\n"
    )
    return Case("overload-chain", job, None, backlog, float(WINDOW), joins)


def stepped(tables: t.Mapping[str, pa.Table], busy: t.Collection[str]) -> dict[str, pa.Table]:
    """Each table thinned to every third row, except, for the streams in `busy`, in the middle
    third of their event time, where every row stays: their rate steps up 3× and back."""
    keep = {}
    for name, table in tables.items():
        ts = np.asarray(table["ts"].cast(pa.int64()))
        third = (ts - ts.min()) * 3 // (ts.max() - ts.min() + 1)
        rank = np.arange(len(ts)) % 3
        keep[name] = table.filter(pa.array((rank == 0) | ((name in busy) & (third == 1))))
    return keep


def _way(case: Case, way: str, budget: int | None) -> Case:
    """`case`'s job run `way`: shedding within `budget` (None: what keeps a batch within its
    trigger, measured)."""
    if way == "exact":
        job = case.job
    else:
        given = "" if budget is None else f", budget = '{budget}'"
        policy = "" if way == "jaqpot" else ", shed_policy = 'uniform'"
        options = f" WITH (overload = 'shed'{given}{policy});"
        job = case.job.rstrip().removesuffix(";") + options + "\n"
    return Case(f"{case.name}-{way}", job, None, case.backlog, case.window_seconds, case.predicate)


def exact_work(case: Case, rate: float, size: str, partners: int = 1) -> float:
    """Work a second exact processing needs at `rate` rows/s per stream: each row's probe and
    the pairs it finds (an ``l`` row and the ``r`` rows of its key within 10 s of feed time)."""
    rows = case.backlog.rows
    share_r = rows["b"] / (rows["a"] + rows["b"])
    rate_l, rate_r = 2 * rate * (1 - share_r), 2 * rate * share_r
    pairs = rate_l * rate_r * 2 * WINDOW / keys(size, rate, partners)
    return rate_l + rate_r + pairs


def measured_work(run: t.Mapping[str, t.Any], duration: float) -> float | None:
    """Work a second an exact run did: every fed row's probe and every pair it wrote, over the
    feed's duration (None: the run failed or did not drain)."""
    if run.get("error") or not run.get("drained") or duration <= 0:
        return None
    return (int(run["rows_fed"]) + _out(run)) / duration


def run_live(
    size: str,
    rate: float,
    duration: float,
    progress: t.TextIO | None = None,
    partners: int = 1,
    share: float | None = BUDGET_SHARE,
    streams: int = 2,
) -> dict[str, t.Any]:
    """The three ways on the live workload of `streams` whose slow rows' probes find
    `partners`, at `rate` rows/s per stream for `duration` s, within `share` of exact's work
    (None: the budget each batch's trigger gives). (The four-way case's work counted here is
    its rows and its output; its combinations' probes of the levels above the first, about a
    tenth of its rows, are left out, so its budget is a little under `share` of the work its
    controller counts.)"""
    folder = os.path.join(ROOT, "data", "overload", size)
    if streams == 4:
        case = chain_case(folder, size, rate)
    else:
        case = overload_case(folder, size, rate, partners)
    source = Feed(case, rate)
    runs: dict[str, dict[str, t.Any]] = {}
    budget = None
    for way in WAYS:
        if way != "exact" and share is not None:
            # The budget is a share of the work exact processing did on the same feed (its
            # probes and pairs a trigger interval), or of the rate's estimate if it failed.
            did = measured_work(runs["exact"], duration) or (
                exact_work(case, rate, size, partners) if streams == 2 else streams * rate
            )
            budget = round(share * did * TRIGGER)
        _say(
            progress,
            f"[overload] {case.name} {way} fed {rate:g} rows/s per stream, {duration:g} s …",
        )
        runs[way], _ = _run_one(
            _way(case, way, budget),
            "streamjoin",
            source,
            duration=duration,
            tick=TICK,
            trigger=TRIGGER,
            in_process=False,
            warmup=True,
        )
        _say(progress, f"[overload] {case.name} {way}: {_brief(runs[way])}")
    exact_out = _out(runs["exact"])
    for run in runs.values():
        out = _out(run)
        seconds = duration + float(run.get("drain_s") or 0.0)
        run["pairs"] = out
        # (A run that did not drain has no end to divide by: its pairs are a share, not a rate.)
        run["pairs_per_s"] = round(out / seconds, 1) if seconds and run.get("drained") else None
        run["share_of_exact"] = round(out / exact_out, 4) if exact_out else None
    if share is None:
        budget_from = "the trigger"
    elif measured_work(runs["exact"], duration):
        budget_from = "measured"
    else:
        budget_from = "estimated"
    return {
        "streams": streams,
        "partners": partners,
        "rate_per_stream": rate,
        "duration_s": duration,
        "budget": budget,
        "budget_from": budget_from,
        "ways": runs,
    }


def _out(run: t.Mapping[str, t.Any]) -> int:
    return int(sum((run.get("out") or {}).values()))


def _brief(run: t.Mapping[str, t.Any]) -> str:
    if run.get("error"):
        return f"ERROR {run['error']}"
    verdict = "keeps up" if run.get("keeps_up") else "FALLS BEHIND"
    return (
        f"{verdict}: latency p50/p99 {run.get('latency_p50_s')}/{run.get('latency_p99_s')} s, "
        f"batches p50 {run.get('batch_p50_ms')} ms, out {_out(run)}"
    )


def run_overload(
    size: str,
    rate: float | None = None,
    duration: float | None = None,
    progress: t.TextIO | None = None,
) -> dict[str, t.Any]:
    """The model comparison and the live runs: the JSON report."""
    shape = SIZES[size]
    began = time.monotonic()
    _say(progress, f"[overload] the model: {shape['plans']} plans per shape and freshness …")
    model = run_model(shape["plans"])
    live = []
    for i, ((partners, share, streams), fed) in enumerate(zip(LIVE, shape["rates"], strict=True)):
        fed = rate if rate and i == 0 else fed
        args = (partners, share, streams)
        live.append(run_live(size, fed, duration or shape["duration"], progress, *args))
    return {
        "workload": "overload",
        "size": size,
        "model": model,
        "live": live,
        "machine": machine(),
        "commit": source_commit(),
        "wall_seconds": round(time.monotonic() - began, 1),
    }


def main(argv: t.Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.overload")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true")
    size.add_argument("--tiny", action="store_true")
    parser.add_argument("--rate", type=float, help="the one-partner case's rate per stream")
    parser.add_argument("--duration", type=float)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    chosen = "tiny" if args.tiny else "quick" if args.quick else "full"
    report = run_overload(chosen, args.rate, args.duration, sys.stderr)
    text = json.dumps(report)
    here = os.path.dirname(os.path.abspath(__file__))
    out = args.out or (
        os.path.join(here, "results", f"overload-{chosen}.json") if chosen != "tiny" else None
    )
    if out:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
