"""The ``adhoc`` benchmark's rows in RESULTS.md (`benchmarks.adhoc`): its targets, and its
section, a row per query count and mode."""

from __future__ import annotations

import typing as t

from benchmarks.report_format import Report, _fmt, commit_of


def adhoc_targets(adhoc: t.Mapping[str, Report]) -> list[tuple[str, str, bool | None]]:
    """(target, the numbers, met?) of the ``adhoc`` reports present (`benchmarks.adhoc`)."""
    from benchmarks.adhoc_targets import _ratios
    from benchmarks.adhoc_targets import targets as adhoc_met

    rows: list[tuple[str, str, bool | None]] = []
    for file, r in adhoc.items():
        ns = sorted(int(n) for n in r["ratios"])
        total = 2 * r["spec"]["files"] * r["spec"]["rows"]
        ratios = _ratios(r["runs"], ns, total)
        met = adhoc_met(r["runs"], ratios, ns)
        at = ratios.get("100", {})
        for peer, least in (("spark", 10), ("apart", 3)):
            gaps = ", ".join(
                f"×{ratios[str(n)].get(f'vs_{peer}', '–')}"
                f"{' (at its limit)' if ratios[str(n)].get(f'{peer}_at_limit') else ''} at {n}"
                for n in ns
            )
            name = "one Spark query per query" if peer == "spark" else "ours without sharing"
            at_least, widens = met[f"at_100_vs_{peer}_ge_{least}"], met[f"gap_vs_{peer}_widens"]
            verdict = None if at_least is None or widens is None else at_least and widens
            if at_least is False or widens is False:
                verdict = False
            if widens is None and len(ns) > 1:
                gaps += " (widening not decided: a peer stopped at its limit gives a bound)"
            rows.append(
                (
                    f"adhoc (`{file}`): shared ≥ {least}× {name} at 100 queries, gap widening",
                    gaps or f"×{at.get(f'vs_{peer}', '–')}",
                    verdict,
                )
            )
        adds = [a for run in r["runs"].values() for a in run.get("churn", {}).get("adds", [])]
        steps = ", ".join(str(a["batches_to_first"]) for a in adds)
        rows.append(
            (
                f"adhoc (`{file}`): an added query's first results within 2 batches",
                f"batches: {steps or '–'}",
                met["first_results_within_2_batches"],
            )
        )
    return rows


def adhoc_lines(adhoc: t.Mapping[str, Report]) -> list[str]:
    """The ``adhoc`` section: a row per query count and mode, and the served adds."""
    lines = [
        "## Ad-hoc queries (adhoc)",
        "",
        "N two-way queries over two streams, half of each of two templates (`benchmarks/adhoc.py`):"
        " *shared*, one job with AJoin's sharing; *apart*, one job, a join per query; *spark*, "
        "one Spark native join per query, all started together. Our state is the streams' input "
        "files (the checkpoint keeps manifests); Spark's is its state store. *rows/s* is input "
        "rows a second per query; a run *stopped* at the time limit is rated on what it had "
        "read by then, and the ratios are of throughput (query-rows a second).",
        "",
    ]
    for file, r in adhoc.items():
        spec = r["spec"]
        lines += [
            f"`{file}`: {spec['files']} files × {spec['rows']} rows per stream; commit "
            f"{commit_of(r)}; results {', '.join(f'{n}: {v}' for n, v in r['checks'].items())}.",
            "",
            "| queries | mode | seconds | rows/s | joins a batch | state MB | peak MB |",
            "|" + "---|" * 7,
        ]
        for key, run in r["runs"].items():
            mode, n = key.rsplit("-", 1)
            if "error" in run:
                after = f" after {_fmt(run['failed_after_s'])} s" if "failed_after_s" in run else ""
                lines.append(f"| {n} | {mode} | failed{after}: {run['error'][:80]} |" + " |" * 4)
                continue
            late = "" if run.get("finished", True) else " (stopped)"
            rows = run.get("rows_in") or r["runs"].get(f"shared-{n}", {}).get("rows_in")
            if not run.get("finished", True):
                rows = run.get("rows_read_per_query", run.get("rows_in"))
            rate = rows / run["wall_s"] if rows else None
            lines.append(
                f"| {n} | {mode} | {_fmt(run['wall_s'])}{late} | {_fmt(rate)} | "
                f"{run.get('joins_per_batch', '–')} | {run['state_bytes'] / 2**20:.2f} | "
                f"{_fmt(run.get('peak_rss_mb'))} |"
            )
        for run in r["runs"].values():
            churn = run.get("churn")
            if churn:
                firsts = ", ".join(
                    f"{a['query']} {a['batches_to_first']} ({_fmt(a['seconds_to_first'])} s)"
                    for a in churn["adds"]
                )
                lines += [
                    "",
                    f"Served, with queries added and dropped: batch p50 / p99 "
                    f"{_fmt(churn['batch_ms_p50'])} / {_fmt(churn['batch_ms_p99'])} ms; batches "
                    f"from an add to its first results (seconds): {firsts}.",
                ]
        lines.append("")
    return lines
