"""Flink beside ours: the page ``results/FLINK.md`` and its line among RESULTS.md's targets,
from the backlog runs made with ``--engines streamjoin,flink`` (``<workload>-flink.json``).

Such a run is a report of its own, not a column of the workload's main report: ours and Flink
run one after the other in it, on the same machine in the same minutes, and every ratio on the
page is between the two figures of one run."""

from __future__ import annotations

import re
import typing as t

from benchmarks.maxrate import probes_cell
from benchmarks.nexmark_queries import QUERIES
from benchmarks.report_format import Report, _agree, _fmt, commit_of, ratio_cell
from benchmarks.report_provenance import _SIZE_FLAG

FLINK = "flink"
LIVE_MODES = ("rate", "max-rate")
"""The modes of live runs (``--rate``, ``--max-rate``), apart from the backlog ones."""
SUFFIX = "-flink.json"
"""The reports' file names end so (``shapes-flink.json``, ``nexmark-flink.json``)."""


def flink_lines(reports: t.Mapping[str, Report]) -> list[str]:
    """The page's section: what ran, a table per report, and the edits Flink's SQL needed."""
    lines = [
        "## Flink beside ours (flink)",
        "",
        "Flink runs each job's own SQL (PyFlink's Table API in streaming mode, a local "
        "mini-cluster with a slot per core; its heap state backend and mini-batch settings, in "
        "each run's report) over CSV copies of the same backlog (Flink bundles no Parquet "
        "format), each stream one file in event-time order. Ours runs as in every backlog "
        "workload. *rows/s*: input rows over the run: ours from the job's analysis to its last "
        "commit (Spark's start apart), Flink's from its job's submission and optimisation "
        "to its end (its start-up apart: PyFlink, the JVM, the queries' parsing and validation); "
        "an updating result is timed into Flink's `blackhole` sink, its rows checked from a "
        "second, untimed run. *rows/CPU s*: over the CPU of each engine's JVM and Python process. "
        "Flink's bounded input ends with a final "
        "watermark, which closes every window and decides every row without a partner; ours "
        "declares its input finished (`--final`) where a case's windows or outer join need it, "
        "so both answers are the whole result's. A Flink run stopped at its time limit had "
        "not read all its input: its rows/s is an upper bound (all its rows over its limit), so "
        "our ratio is a lower bound. Each loss (in **bold**) and its measured reason: "
        "[`docs/benchmarks.md`](../../docs/benchmarks.md#where-flink-is-faster-and-why).",
        "",
    ]
    for name, report in reports.items():
        if report.get("mode") in LIVE_MODES:
            continue
        limit = report.get("peer_time_limit_s")
        command = _command(
            report, name, f"--engines streamjoin,flink{f' --peer-limit {limit:g}' if limit else ''}"
        )
        lines += [
            f"`{name}`: {report.get('workload')}, {report.get('size', 'full')} size; "
            f"Flink's time limit {_fmt(limit)} s; commit {commit_of(report)}: `{command}`",
            "",
            "| case | rows/s: ours · Flink | rows per CPU s: ours · Flink | Flink's start-up s | "
            "our run s: first batch + other batches (n) + outside them | results agree | "
            "ours ÷ Flink |",
            "|---|---|---|---|---|---|---|",
            *(_row(c) for c in report["cases"] if FLINK in c["engines"]),
            "",
        ]
    lines += live_lines({n: r for n, r in reports.items() if r.get("mode") == "rate"})
    lines += max_rate_lines({n: r for n, r in reports.items() if r.get("mode") == "max-rate"})
    edits = sorted(
        {
            re.sub(r"^q\w*: |^stream \w+: ", "", e)
            for report in reports.values()
            for c in report["cases"]
            for e in c["engines"].get(FLINK, {}).get("sql_edits") or ()
        }
    )
    if edits:
        lines += ["Flink's SQL, edited as written in each run's report: " + "; ".join(edits), ""]
    differ = [
        f"{q.name}: {q.flink_differs}"
        for q in QUERIES.values()
        if q.flink_differs and any(r.get("workload") == "nexmark" for r in reports.values())
    ]
    if differ:
        lines += ["Where Flink's SQL means another thing: " + "; ".join(differ) + ".", ""]
    return lines


def _command(report: Report, name: str, options: str) -> str:
    """The command that made `report` (file `name`): its workload and size, then `options`."""
    size = _SIZE_FLAG.get(report.get("size", ""), "")
    return (
        f"streamjoin bench {report.get('workload')}{size} {options} --out benchmarks/results/{name}"
    )


def live_lines(reports: t.Mapping[str, Report]) -> list[str]:
    """The live runs (``--rate``): each engine's latency at one rate, fed the same files."""
    if not reports:
        return []
    lines = [
        "### Live, beside Flink",
        "",
        "Each engine is fed the same files at the same moments (`benchmarks/rate_feed.py`), "
        "after a warm-up job in its own JVM; Flink reads CSV files (the same rows), listing "
        "its folders once per trigger interval, as the Spark engines' triggers list theirs. "
        "*Latency* of a file: from its write to when an engine was done with it, percentiles "
        "weighted by rows. Ours and Spark's: the commit of the batch that read it. Flink, "
        "which has no batches: the latest moment its join made a result that the file "
        "completes (each result stamped with `CURRENT_TIMESTAMP` and its rows' file names, "
        "counted per pair of files beside its CSV sink), before any sink commits it (Flink's "
        "file sink commits at checkpoints), so Flink's "
        "figure is its earliest possible; a file that completes no result, at the moment its "
        "last row was read. Each file's rows read are counted by Flink (per file name, beside "
        "the join): a file not read in full is not processed.",
        "",
    ]
    for name, report in reports.items():
        rate, seconds = report.get("rate_per_stream", 0), report.get("duration_s", 0)
        engines = ",".join(_LIVE_ENGINES)
        command = _command(
            report, name, f"--rate {rate:g} --duration {seconds:g} --engines {engines}"
        )
        lines += _run_table(
            name,
            report,
            command,
            "| case | rows/s per stream | latency p50 / p99 s: ours · Spark · Flink | keeps up: "
            "ours · Spark · Flink | results agree | ours ÷ Flink: p50 · p99 |",
            [_live_row(c, report) for c in report["cases"] if FLINK in c["engines"]],
        )
    return lines


def _run_table(name: str, report: Report, command: str, header: str, rows: list[str]) -> list[str]:
    """A live run's lines: its file, commit and command, then its table."""
    return [
        f"`{name}`: commit {commit_of(report)}: `{command}`",
        "",
        header,
        "|" + "---|" * header.count(" | ") + "---|",
        *rows,
        "",
    ]


_LIVE_ENGINES = ("streamjoin", "spark-native", FLINK)


def max_rate_lines(reports: t.Mapping[str, Report]) -> list[str]:
    """The ``--max-rate`` runs: each engine's highest rate kept up with, found alike."""
    if not reports:
        return []
    lines = [
        "### Highest rate kept up with, beside Flink",
        "",
        "Each engine's rate per stream is searched alone on the machine, by the live runs "
        "above, each probe a whole run (warm-up, feed, drain) of its own: from the starting "
        "rate, doubled while the engine keeps up, then the gap to the first rate it did not "
        "halved three times (`benchmarks/maxrate.py`). *Keeps up*: it read and finished every "
        "fed file within the drain limit, its backlog when the feed stopped was at most two "
        "batches' worth (for Flink, two trigger intervals'), its latency did not grow over the "
        "run, and its result equals DuckDB's count of the fed rows' join. A probe that does not "
        "keep up is run once more: the rate is kept up with if the second run keeps up. "
        "Flink, once behind, loses results: it reads a "
        "backlog of listed files newest first, and its interval join drops the older files' "
        "rows as late ([`docs/benchmarks.md`](../../docs/benchmarks.md#live-streams)).",
        "",
    ]
    for name, report in reports.items():
        engines = ",".join(e for e in _LIVE_ENGINES if e in report["cases"][0]["engines"])
        seconds = report.get("duration_s")
        options = (
            f"--max-rate --rate {report.get('start_rate', 0):g}"
            f"{f' --duration {seconds:g}' if seconds else ''} --engines {engines}"
        )
        lines += _run_table(
            name,
            report,
            _command(report, name, options),
            "| case | rows/s per stream kept up with: ours · Spark · Flink | ours ÷ Flink | "
            "results equal to DuckDB's count, of those checked | probes (✓ kept up) | run again |",
            [_max_rate_row(c) for c in report["cases"]],
        )
    return lines


def _max_rate_row(c: t.Mapping[str, t.Any]) -> str:
    runs = [c["engines"].get(e, {}) for e in _LIVE_ENGINES]
    rates = " · ".join(_fmt(r.get("max_rate")) if r else "–" for r in runs)
    ratio = c.get("flink_ratio")
    shown = "–" if ratio is None else (f"**×{ratio:g}**" if ratio < 1 else f"×{ratio:g}")
    checked = " · ".join(
        f"{sum(a is True for a in r.get('results_agree', []))} of {len(r.get('results_agree', []))}"
        for r in runs
        if r
    )
    probes = probes_cell(c["engines"])
    again = "; ".join(
        f"{e}: " + (", ".join(f"{rate:g}" for rate in r.get("run_again", [])) or "none")
        for e, r in c["engines"].items()
    )
    return f"| {c['case']} | {rates} | {shown} | {checked} | {probes} | {again} |"


def _live_row(c: t.Mapping[str, t.Any], report: Report) -> str:
    runs = [c["engines"].get(e, {}) for e in _LIVE_ENGINES]
    latency = " · ".join(
        "–"
        if not r or r.get("error")
        else f"{_fmt(r.get('latency_p50_s'))} / {_fmt(r.get('latency_p99_s'))}"
        for r in runs
    )
    keeps = " · ".join("–" if not r or r.get("error") else _agree(r.get("keeps_up")) for r in runs)
    ratios = live_ratios(c)
    shown = " · ".join(
        "–" if (v := ratios.get(k)) is None else (f"**×{v:g}**" if v > 1 else f"×{v:g}")
        for k in ("latency_p50_s", "latency_p99_s")
    )
    flink = c["engines"][FLINK]
    if flink.get("error"):
        shown = f"Flink: {flink['error']}"
    return (
        f"| {c['case']} | {_fmt(report.get('rate_per_stream'))} | {latency} | {keeps} | "
        f"{_agree(c.get('results_agree'))} | {shown} |"
    )


def live_ratios(c: t.Mapping[str, t.Any]) -> dict[str, float | None]:
    """Our latency p50 and p99 over Flink's in live case `c` (below 1: ours is lower)."""
    return _over_flink(c, ("latency_p50_s", "latency_p99_s"))


def _over_flink(c: t.Mapping[str, t.Any], keys: t.Sequence[str]) -> dict[str, float | None]:
    """Our figure over Flink's for each of `keys` in case `c` (None where either is missing)."""
    ours, flink = c["engines"].get("streamjoin", {}), c["engines"].get(FLINK, {})
    out: dict[str, float | None] = {}
    for key in keys:
        a, b = ours.get(key), flink.get(key)
        out[key] = round(a / b, 2) if a and b else None
    return out


def _row(c: t.Mapping[str, t.Any]) -> str:
    ours, flink = c["engines"].get("streamjoin", {}), c["engines"][FLINK]
    if flink.get("error"):
        ours_rate = _fmt(ours.get("throughput"))
        return f"| {c['case']} | {ours_rate} · – | | | | | Flink: {flink['error']} |"
    stopped = " (stopped at its time limit)" if flink.get("stopped_early") else ""
    return (
        f"| {c['case']} | {_fmt(ours.get('throughput'))} · {_fmt(flink.get('throughput'))}"
        f"{stopped} | {_fmt(ours.get('rows_per_cpu_second'))} · "
        f"{_fmt(flink.get('rows_per_cpu_second'))} | {_fmt(flink.get('startup_seconds'))} | "
        f"{our_time(ours)} | {_agree(c.get('results_agree'))} | {ratio_cell(flink_ratios(c))} |"
    )


def our_time(run: t.Mapping[str, t.Any]) -> str:
    """Where our run's seconds went: its first batch (the JVM compiling the batch's code, the
    first plans), the other batches, and the time outside batches (the job's analysis, the
    loop's start, the last commit): the parts a loss to Flink comes from."""
    batch, seconds = run.get("batch_ms") or [], run.get("seconds")
    if not batch or not seconds:
        return "–"
    first, rest = batch[0] / 1000, sum(batch[1:]) / 1000
    outside = max(seconds - first - rest, 0.0)
    return f"{first:.1f} + {rest:.1f} ({len(batch) - 1}) + {outside:.1f}"


def flink_ratios(c: t.Mapping[str, t.Any]) -> dict[str, float | None]:
    """Ours ÷ Flink's rows/s and rows per CPU second in case `c`."""
    out = _over_flink(c, ("throughput", "rows_per_cpu_second"))
    if c["engines"].get(FLINK, {}).get("stopped_early"):
        out.pop("rows_per_cpu_second")  # (its CPU is not counted when it is stopped)
    return out


def flink_targets(reports: t.Mapping[str, Report]) -> list[tuple[str, str, bool | None]]:
    """(target, the numbers, met?), one row for every report: the range of our throughput over
    Flink's in each, its losses, and whether the results agree where both engines finished."""
    if not reports:
        return []
    parts, lost, agree, cases = [], [], [], 0
    live: list[str] = []
    highest: list[str] = []
    for report in reports.values():
        ran = [c for c in report["cases"] if FLINK in c["engines"]]
        cases += len(ran)
        agree += [c["results_agree"] for c in ran if c.get("results_agree") is not None]
        if report.get("mode") == "max-rate":
            cases -= len(ran)  # (its probes are checked each: `max_rate_lines`)
            for c in ran:
                if (v := c.get("flink_ratio")) is not None:
                    highest.append(f"{c['case']} ×{v:g}")
                    lost += [f"{c['case']} highest rate ×{v:g}"] if v < 1 else []
            continue
        if report.get("mode") == "rate":
            for c in ran:
                p50, p99 = (live_ratios(c).get(k) for k in ("latency_p50_s", "latency_p99_s"))
                at = f"{c['case']} at {report.get('rate_per_stream', 0):g}/s"
                live.append(f"{at} p50 ×{_fmt(p50)}, p99 ×{_fmt(p99)}")
                lost += [f"{at} {k} ×{v:g}" for k, v in (("p50", p50), ("p99", p99)) if v and v > 1]
            continue
        known = {c["case"]: g for c in ran if (g := flink_ratios(c).get("throughput"))}
        if known:
            low, high = min(known.values()), max(known.values())
            parts.append(f"{report.get('workload')} ×{low:g}–×{high:g}")
        lost += [f"{k} ×{v:g}" for k, v in known.items() if v < 1]
    numbers = "rows/s ours ÷ Flink's: " + ("; ".join(parts) or "–")
    if live:
        numbers += "; live latency ours ÷ Flink's: " + "; ".join(live)
    if highest:
        numbers += "; highest rate kept up with, ours ÷ Flink's: " + "; ".join(highest)
    if lost:
        numbers += f"; **losses: {', '.join(lost)}**"
    numbers += f"; results agree in {sum(agree)} of {cases} cases ({cases - len(agree)} unchecked)"
    files = ", ".join(f"`{name}`" for name in reports)
    target = (
        f"flink ({files}): beside Flink on the same backlogs and live feeds, each result checked"
    )
    return [(target, numbers, None if not agree else all(agree))]
