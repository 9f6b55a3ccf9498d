"""The partitioning section of RESULTS.md (`benchmarks.skew`): forced hash against auto under
skewed keys; the rest of the partitioning benchmarks is on their own page (`skew_report`)."""

from __future__ import annotations

import typing as t

from benchmarks.report_format import Report, _fmt


def skew_lines(extra: t.Mapping[str, Report]) -> list[str]:
    """The skew section: forced hash against auto partitioning, a row per size and Zipf z."""
    runs = [extra[n] for n in ("skew-full", "skew") if n in extra]
    if not runs:
        return []
    lines = [
        "## Partitioning under skew",
        "",
        "Zipf-distributed keys, an equi join with a 1 s window, Spark's hash partitioning by the "
        "key (forced) against `auto`. Details, the fluctuating-ratio and memory benchmarks: "
        "[`results/SKEW.md`](results/SKEW.md).",
        "",
        "| size | z | hot key | out | hash rows/s | auto rows/s | auto ÷ hash | "
        "hash p50 / p99 ms | auto p50 / p99 ms | hash max/mean | auto max/mean after switch |",
        "|" + "---|" * 11,
    ]
    for r in runs:
        for c in r["cases"]:
            h, a = c["hash"], c["auto"]
            gain = c["ratios"].get("throughput_auto_over_hash")
            shown = "–" if gain is None else f"**×{gain}**" if gain < 1 else f"×{gain}"
            lines.append(
                f"| {r['size']} | {c['z']} | {c['top_key_share']:.1%} | {_fmt(h['out'])} | "
                f"{_fmt(h['throughput'])} | {_fmt(a['throughput'])} | {shown} | "
                f"{_fmt(h['batch_p50_ms'])} / {_fmt(h['batch_p99_ms'])} | "
                f"{_fmt(a['batch_p50_ms'])} / {_fmt(a['batch_p99_ms'])} | "
                f"{_fmt(h.get('skew_mean'))} | {_fmt(a.get('skew_after_switch'))} |"
            )
    return [*lines, ""]
