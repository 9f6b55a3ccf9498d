"""RESULTS.md and its plots from the JSON reports in ``benchmarks/results/``.

``python -m benchmarks.report`` reads the backlog reports ``<workload>.json`` (written by
``streamjoin bench WORKLOAD --out benchmarks/results/WORKLOAD.json``), the ``--rate`` reports
(``rate-*.json``), the ``multiquery`` reports (``multiquery-*.json``) and the partitioning and
ILP reports (``skew*.json``, ``fluctuating.json``, ``memory.json``, ``ilp-scaling.json``). It
checks each target of the benchmark issues against the numbers and writes
``benchmarks/RESULTS.md``: the machine, the commit, the commands, the targets, one table per
backlog workload with every ratio, the live rate mode's, and the plots beside it (throughput
against window size, the distribution of micro-batch times, and, for ``long``, batch time against
batch number). The other workloads' sections (multiquery, adhoc, overload and elasticity, soak)
are pages of their own in ``benchmarks/results/`` (`benchmarks.report_pages`), linked from
RESULTS.md's targets and its last section, as the partitioning benchmarks' ``results/SKEW.md``
is. It needs no Spark.

RESULTS.md holds results only; the log of measurements and trials is ``docs/dev-log.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from benchmarks.report_adhoc import adhoc_targets
from benchmarks.report_backlog import workload_lines
from benchmarks.report_flink import SUFFIX, flink_targets
from benchmarks.report_format import Report
from benchmarks.report_history import HISTORY_PLOT
from benchmarks.report_overload import elastic_targets, overload_targets
from benchmarks.report_pages import FOLDER, PAGES, linked, links, more_lines, pages
from benchmarks.report_plots import LONG_PLOT, plots
from benchmarks.report_provenance import (
    _SIZE_FLAG,
    _engines_flag,
    commands,
    commit_line,
    jvm_line,
    machine_line,
    settings_line,
)
from benchmarks.report_shapes import (
    PARTS,
    shapes_commands,
    shapes_sources,
    shapes_targets,
    with_parts,
)
from benchmarks.report_soak import soak_targets
from benchmarks.report_targets import other_targets, targets

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
ORDER = (
    "long",
    "long-cluster",
    "window-growth",
    "equi",
    "band",
    "theta",
    "outer",
    "tpch",
    "nexmark",
    "nexmark-warm",
)
EXTRA = (
    "skew-full",
    "skew",
    "skew-cluster-full",
    "passing",
    "passing-cluster",
    "fluctuating",
    "memory",
    "ilp-scaling",
    "metrics-overhead",
)
"""The partitioning and ILP reports, by file name (without ``.json``)."""


def _read(path: str) -> Report:
    with open(path, encoding="utf-8") as f:
        report: Report = json.load(f)
    return report


def load(folder: str = RESULTS) -> dict[str, Report]:
    """The backlog reports present, by workload."""
    paths = {name: os.path.join(folder, f"{name}.json") for name in ORDER}
    return {name: _read(p) for name, p in paths.items() if os.path.exists(p)}


def _load_prefixed(folder: str, prefix: str) -> dict[str, Report]:
    if not os.path.isdir(folder):
        return {}
    names = sorted(n for n in os.listdir(folder) if n.startswith(prefix) and n.endswith(".json"))
    return {n: _read(os.path.join(folder, n)) for n in names}


def load_rate(folder: str = RESULTS) -> dict[str, Report]:
    """The ``--rate`` mode reports present (``rate-*.json``), by file name, by rate."""
    reports = _load_prefixed(folder, "rate-")
    order = sorted(reports, key=lambda n: (reports[n]["workload"], reports[n]["rate_per_stream"]))
    return {n: reports[n] for n in order}


def load_multiquery(folder: str = RESULTS) -> dict[str, Report]:
    """The ``multiquery`` reports present (``multiquery-<size>.json``), by file name."""
    return _load_prefixed(folder, "multiquery-")


def load_extra(folder: str = RESULTS) -> dict[str, Report]:
    """The partitioning and ILP reports present (`EXTRA`), by name."""
    paths = {name: os.path.join(folder, f"{name}.json") for name in EXTRA}
    return {name: _read(p) for name, p in paths.items() if os.path.exists(p)}


def _verdict(met: bool | None) -> str:
    return "–" if met is None else "yes" if met else "**no**"


HOW_TO_READ = [
    "## How to read",
    "",
    "- *rows/s*: input rows (all streams) over the wall time of the whole run, JVM warm-up "
    "included for every engine. Each engine runs in its own process on the same Parquet backlog "
    "(`maxFilesPerTrigger = 1`), `local[2]`, 2 shuffle partitions.",
    "- *ours ÷ peer*: streamjoin's figure over the peer's (Spark's native join, or the "
    "foreachBatch join where Spark has none). Above 1 is a gain for rows/s, below 1 for times; "
    "every loss is in **bold**.",
    "- A peer *stopped at its time limit* is measured on the batches it finished, its cheapest "
    "(so our ratio is a lower bound), and its result is *unchecked*. "
    "*results agree*: inner joins against the size of an exact DuckDB batch join (a band "
    "counted as a range join, an OR by inclusion and exclusion); outer joins and what DuckDB "
    "could join only by a nested loop against the foreachBatch peer where it finished. "
    "*State*: bytes per live tuple, and over the raw "
    "(Arrow) bytes of the same rows. "
    "One run each on a shared 2-core machine: differences of up to about 25% between runs are "
    "noise. Runs, repeats and analysis: [`docs/dev-log.md`](../docs/dev-log.md).",
    "",
]


def render(
    reports: dict[str, Report],
    rate: dict[str, Report] | None = None,
    multiquery: dict[str, Report] | None = None,
    extra: dict[str, Report] | None = None,
    *,
    plot: bool = True,
    maxrate: dict[str, Report] | None = None,
    adhoc: dict[str, Report] | None = None,
    overload: dict[str, Report] | None = None,
    soak: dict[str, Report] | None = None,
    elastic: Report | None = None,
    shapes: Report | None = None,
    flink: dict[str, Report] | None = None,
) -> str:
    """The text of RESULTS.md; without `plot` the plots already on disk are linked as they are.
    The sections of multiquery, adhoc, overload, elastic and soak are on their own pages
    (`report_pages.pages`): RESULTS.md keeps their targets and links the pages."""
    rate, multiquery, extra, maxrate = rate or {}, multiquery or {}, extra or {}, maxrate or {}
    adhoc, overload, soak = adhoc or {}, overload or {}, soak or {}
    every = {**reports, **rate, **multiquery, **extra, **maxrate, **adhoc, **overload, **soak}
    every |= {"elastic.json": elastic} if elastic else {}
    every |= shapes_sources(shapes) if shapes else {}
    flink = flink or {}
    every |= flink
    if not every:
        return "# Benchmark results\n\nNo run recorded yet.\n"
    flags = f" {jvm_line(reports)} {settings_line(reports)}" if reports else ""
    lines = [
        "# Benchmark results",
        "",
        "## Machine, commit, command",
        "",
        "Generated by `python -m benchmarks.report` from `benchmarks/results/*.json`; edit "
        f"`benchmarks/report.py`, not this file. {machine_line(every)} {commit_line(every)}"
        + flags,
        "",
    ]
    lines += [
        "```",
        *commands(reports, rate, multiquery, extra)[:-1],
        *(shapes_commands(shapes) if shapes else []),
        *(
            f"streamjoin bench {r['workload']} --max-rate --rate {r.get('start_rate', 5000):g}"
            f"{_SIZE_FLAG.get(r['size'], '')} --duration {r.get('duration_s', 30):g}"
            f"{_engines_flag(r)} --out benchmarks/results/{file}"
            for file, r in maxrate.items()
        ),
        *(
            f"python -m benchmarks.adhoc{_SIZE_FLAG.get(r['size'], '')} --queries "
            f"{','.join(r['ratios'])} --out benchmarks/results/{file}"
            for file, r in adhoc.items()
        ),
        *(
            f"streamjoin bench overload{_SIZE_FLAG.get(r['size'], '')} --rate "
            f"{r['live'][0]['rate_per_stream']:g} --duration {r['live'][0]['duration_s']:g} "
            f"--out benchmarks/results/{file}"
            for file, r in overload.items()
        ),
        *(
            f"streamjoin bench soak --rate {r['rate_per_stream']:g} --duration "
            f"{r['duration_s']:g} --out benchmarks/results/{file}"
            for file, r in soak.items()
        ),
        *(
            [
                f"python -m benchmarks.elastic --rate {elastic['rate_per_stream']:g} --duration "
                f"{elastic['duration_s']:g} --trigger {elastic.get('trigger_s', 1.0):g}"
            ]
            if elastic
            else []
        ),
        "```",
        "",
        "## Targets",
        "",
        "| target | measured | met |",
        "|---|---|---|",
    ]
    on_pages = links(
        multiquery,
        extra,
        adhoc=adhoc,
        overload=overload,
        soak=soak,
        shapes=shapes,
        flink=flink,
        live=bool(rate or maxrate),
        folder=HERE,
    )
    for name, numbers, met in [
        *(targets(reports, rate, maxrate) if reports else []),
        *(shapes_targets(shapes) if shapes else []),
        *flink_targets(flink),
        *other_targets(multiquery, extra),
        *adhoc_targets(adhoc),
        *(row for file, r in overload.items() for row in overload_targets(file, r)),
        *(elastic_targets(elastic) if elastic else []),
        *(row for file, r in soak.items() for row in soak_targets(file, r)),
    ]:
        lines.append(f"| {linked(name, on_pages)} | {numbers} | {_verdict(met)} |")
    lines += ["", *HOW_TO_READ]
    if reports:
        lines += ["## Backlog workloads", "", *workload_lines(reports)]
        kept = [
            p
            for p in ("window_growth.png", "batch_times.png", LONG_PLOT, HISTORY_PLOT)
            if os.path.exists(f"{HERE}/{p}") and (p != LONG_PLOT or "long" in reports)
        ]
        pngs = plots(reports) if plot else kept
        lines += [" ".join(f"![{png}]({png})" for png in pngs), ""] if pngs else []
    lines += more_lines(
        on_pages,
        multiquery,
        extra,
        adhoc=adhoc,
        overload=overload,
        soak=soak,
        elastic=elastic,
        shapes=shapes,
        flink=flink,
        live=[*rate, *maxrate],
    )
    return "\n".join(lines).rstrip() + "\n"


def texts(folder: str = RESULTS, *, plot: bool = True) -> dict[str, str]:
    """RESULTS.md and its pages (``results/<PAGE>.md``), by path from ``benchmarks/``, from the
    reports in `folder`; with `plot`, their plots drawn anew."""
    multiquery, extra = load_multiquery(folder), load_extra(folder)
    adhoc, overload = _load_prefixed(folder, "adhoc-"), _load_prefixed(folder, "overload-")
    soak = _load_prefixed(folder, "soak")
    elastic = _load_prefixed(folder, "elastic.json").get("elastic.json")
    shapes = with_parts(
        _load_prefixed(folder, "shapes.json").get("shapes.json"), _load_prefixed(folder, PARTS)
    )
    flink = {n: r for n, r in _load_prefixed(folder, "").items() if n.endswith(SUFFIX)}
    rate, maxrate = load_rate(folder), _load_prefixed(folder, "maxrate-")
    text = render(
        load(folder),
        rate,
        multiquery,
        extra,
        plot=plot,
        maxrate=maxrate,
        adhoc=adhoc,
        overload=overload,
        soak=soak,
        elastic=elastic,
        shapes=shapes,
        flink=flink,
    )
    written = pages(
        multiquery,
        adhoc=adhoc,
        overload=overload,
        soak=soak,
        elastic=elastic,
        shapes=shapes,
        flink=flink,
        rate=rate,
        maxrate=maxrate,
        plot=plot,
    )
    return {"RESULTS.md": text, **{f"{FOLDER}/{name}": page for name, page in written.items()}}


def write(folder: str = RESULTS, *, plot: bool = True, out: str = HERE) -> str:
    """Regenerate RESULTS.md and its pages in `out` (and, with `plot`, the plots beside
    RESULTS.md) from the reports in `folder`; a page whose reports are gone is removed. The text
    of RESULTS.md."""
    every = texts(folder, plot=plot)
    os.makedirs(os.path.join(out, FOLDER), exist_ok=True)
    for path, text in every.items():
        with open(os.path.join(out, path), "w", encoding="utf-8") as f:
            f.write(text)
    for name in PAGES:
        stale = os.path.join(out, FOLDER, name)
        if f"{FOLDER}/{name}" not in every and os.path.exists(stale):
            os.remove(stale)
    return every["RESULTS.md"]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.report",
        description="Write benchmarks/RESULTS.md, its pages in benchmarks/results/ and its plots "
        "from the JSON reports.",
    )
    parser.add_argument("folder", nargs="?", default=RESULTS, help="the JSON reports' folder")
    parser.add_argument(
        "--no-plots",
        action="store_true",
        help="link the plots already on disk instead of drawing them anew",
    )
    args = parser.parse_args(argv)
    print(write(args.folder, plot=not args.no_plots))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
