"""The top of RESULTS.md: the machine, the commit, the driver JVM's flags and the Spark
settings each report ran with, and the commands that write every report."""

from __future__ import annotations

import re
import typing as t

from benchmarks.report_format import NOT_RECORDED, Report, commit_of

OLD_PEER_LIMIT = 180.0
"""The full-size peer time limit of the reports written before they recorded theirs."""

_ARCHIVE = re.compile(r"(-XX:SharedArchiveFile=)\S+")


def jvm_line(reports: t.Mapping[str, Report]) -> str:
    """Which ``-XX`` flags each engine's driver JVM ran with, over every report (the path of a
    class archive shown as ``…``)."""
    flags: dict[str, set[str]] = {}
    for report in reports.values():
        for case in report["cases"]:
            for name, run in case["engines"].items():
                flags.setdefault(name, set()).add(_ARCHIVE.sub(r"\1…", run.get("jvm_flags") or ""))
    parts = []
    for name, seen in flags.items():
        shown = " / ".join(
            f"`{f}`" if f else "the JVM's defaults (or not recorded)" for f in sorted(seen)
        )
        parts.append(f"{name} {shown}")
    return (
        "Driver JVM flags: "
        + "; ".join(parts)
        + " (each peer runs with the settings it is fastest with: "
        "`benchmarks.engines.PEER_CONF`)."
    )


def settings_line(reports: t.Mapping[str, Report]) -> str:
    """The Spark settings each engine ran with over streamjoin's local defaults, and in which
    reports (reports from before settings were recorded name none)."""
    seen: dict[tuple[str, str], list[str]] = {}
    for key, report in reports.items():
        for case in report["cases"]:
            for name, run in case["engines"].items():
                for k, v in sorted((run.get("settings") or {}).items()):
                    where = seen.setdefault((name, f"{k}={v}"), [])
                    if key not in where:
                        where.append(key)
    if not seen:
        return "Spark settings: every engine ran with streamjoin's local defaults."
    parts = [f"{name} `{kv}` ({', '.join(where)})" for (name, kv), where in seen.items()]
    return "Spark settings over streamjoin's local defaults: " + "; ".join(parts) + "."


def _size_flag(report: Report) -> str:
    """The size option that reproduces `report` (none for full size)."""
    size = report.get("size", "full")
    return "" if size == "full" else f" --{size}"


def commit_line(reports: t.Mapping[str, Report]) -> str:
    """The commit each report ran on, grouped; says so when no report recorded its commit."""
    by_commit: dict[str, list[str]] = {}
    for name, report in reports.items():
        by_commit.setdefault(commit_of(report), []).append(name)
    if not by_commit or set(by_commit) == {NOT_RECORDED}:
        return "Commit: not recorded (the JSON reports carry no commit)."
    parts = [
        f"{commit if commit == NOT_RECORDED else f'`{commit}`'} ({', '.join(names)})"
        for commit, names in by_commit.items()
    ]
    return "Commit: " + "; ".join(parts) + "."


def machine_line(reports: t.Mapping[str, Report]) -> str:
    """The machine of the reports; every distinct one if they differ."""
    seen: list[dict[str, t.Any]] = []
    for report in reports.values():
        m = report.get("machine")
        if m and m not in seen:
            seen.append(m)
    shown = [
        f"{m.get('cores')} cores ({m.get('cpu')}), {m.get('memory_gib')} GiB; "
        f"Python {m.get('python')}, PySpark {m.get('pyspark', '–')}, {m.get('java', 'Java –')}"
        for m in seen
    ]
    if not shown:
        return "Machine: not recorded."
    return "Machine: " + " | ".join(shown) + "."


def _peer_flag(report: Report) -> str:
    """The ``--peer-limit`` that reproduces `report` (none for the size's default)."""
    from benchmarks.harness import peer_time_limit

    limit = report.get("peer_time_limit_s", OLD_PEER_LIMIT)
    if limit == peer_time_limit(report.get("size", "full")):
        return ""
    return f" --peer-limit {limit or 0:g}"


_SIZE_FLAG = {"quick": " --quick", "tiny": " --tiny"}


def commands(
    reports: t.Mapping[str, Report],
    rate: t.Mapping[str, Report],
    multiquery: t.Mapping[str, Report],
    extra: t.Mapping[str, Report],
) -> list[str]:
    """The commands that write every report present, then RESULTS.md."""
    lines = [
        f"streamjoin bench {r.get('workload', name)}{_size_flag(r)}{_peer_flag(r)}"
        f"{' --cluster' * bool(r.get('cluster'))}{' --warm' * bool(r.get('warm'))}"
        f"{_cases_flag(r)} "
        f"--out benchmarks/results/{name}.json"
        for name, r in reports.items()
    ]
    lines += [
        f"streamjoin bench {r['workload']} --rate {r['rate_per_stream']:g}"
        f"{_SIZE_FLAG.get(r['size'], '')} --duration {r['duration_s']:g}"
        f"{_trigger_flag(r)}{' --cold' * (r.get('warmup') is False)}"
        f"{' --cluster' * bool(r.get('cluster'))} --out benchmarks/results/{file}"
        for file, r in rate.items()
    ]
    lines += [
        f"python -m benchmarks.multiquery{_SIZE_FLAG.get(r['size'], '')} "
        f"--queries {','.join(str(x['queries']) for x in r['runs'])}"
        for r in multiquery.values()
    ]
    lines += [r["command"] for r in extra.values() if r.get("command")]
    if "ilp-scaling" in extra:
        lines.append(
            "python -m benchmarks.ilp_scaling | tail -1 > benchmarks/results/ilp-scaling.json"
        )
    return [*lines, "python -m benchmarks.report"]


def _cases_flag(report: Report) -> str:
    """``--cases …`` where a report ran some of its workload's cases (else nothing)."""
    only = report.get("only")
    return f" --cases={','.join(only)}" if only else ""  # (= : a first name may start with -)


def _engines_flag(report: Report) -> str:
    """``--engines …`` where a report ran fewer engines than its workload has, or Flink, which
    runs only when named (else nothing)."""
    ran = [e for c in report.get("cases", [])[:1] for e in c.get("engines", {})]
    return f" --engines {','.join(ran)}" if ran and (len(ran) < 2 or "flink" in ran) else ""


def _trigger_flag(report: t.Mapping[str, t.Any]) -> str:
    """A live run's ``--trigger``, when it is not the default (1 s)."""
    trigger = report.get("trigger_s", 1.0)
    return "" if trigger == 1.0 else f" --trigger {trigger:g}"
