"""The ``flink`` engine's live run (``--rate``), in PyFlink's own venv as
``python -I engines_flink_live.py PLAN RESULT`` (`engines_flink.run_flink`): the plan of
`engines_flink_runner` (loaded from beside this file, not from a path of modules: ``-I`` keeps
this folder off it), with two more fields:

- ``warmup``: ``sources``, ``selects`` and ``streams`` of a job run to its end into
  ``blackhole`` sinks first, its tables then dropped, as each Spark engine runs one in its own
  JVM before a live run;
- ``live``: ``done`` (the feeder's file), ``ready``, ``drain_limit``, ``settle``, ``traces``
  (a file per query), ``trace`` (the columns that time a result), ``reads`` (a file per
  stream), ``file`` (the column of a row's file name), ``folders`` (each stream's, which the
  feeder writes into) and ``savepoints`` (the folder of the one its end takes): see `run_live`.
"""

from __future__ import annotations

import csv
import importlib.util
import os
import sys
import time
import typing as t

_SPEC = importlib.util.spec_from_file_location(
    "engines_flink_runner",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "engines_flink_runner.py"),
)
assert _SPEC is not None and _SPEC.loader is not None
base = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(base)


def run(plan: dict[str, t.Any]) -> dict[str, t.Any]:
    """Warm up, then run the live plan: the figures."""
    env = base.environment(plan)
    if plan.get("warmup"):
        warm_up(env, plan["warmup"])
    return run_live(env, plan)


def warm_up(env: t.Any, warmup: dict[str, t.Any]) -> None:
    """Run `warmup`'s selects over its sources to their end into ``blackhole`` sinks, then drop
    its tables: the JVM has then compiled the code a live run's first rows would wait for."""
    for ddl in warmup["sources"]:
        env.execute_sql(ddl)
    statements = env.create_statement_set()
    for i, select in enumerate(warmup["selects"]):
        table = env.sql_query(select)
        body = base.columns_ddl(base.table_columns(table))
        env.execute_sql(f"CREATE TABLE `warmup__{i}` ({body}) WITH ('connector' = 'blackhole')")
        statements.add_insert(f"warmup__{i}", table)
    statements.execute().wait()
    for name in [*warmup["streams"], *(f"warmup__{i}" for i in range(len(warmup["selects"])))]:
        env.execute_sql(f"DROP TABLE IF EXISTS `{name}`")


def run_live(env: t.Any, plan: dict[str, t.Any]) -> dict[str, t.Any]:
    """Run `plan`'s queries on its sources as a live feed: `plan["live"]`'s ``ready`` file is
    written once the job is submitted; once its ``done`` file (the feeder's) exists, the job
    runs until it has read every file the feeder lists there and nothing more is printed for
    ``settle`` seconds, and is stopped with a last watermark (cancelled past ``drain_limit``
    seconds).

    Each query's rows go to its CSV sink, as in a backlog run (its files stay in progress: no
    checkpoint commits them, and the counts below check the result). Beside them, the same
    join's results are counted per pair of files of their two rows, with the latest time one
    was made (`engines_flink_sql.TRACE_COLUMNS`), printed as changes by Flink's ``print`` sink,
    and written to the query's file in ``traces`` once applied: left file, right file, that
    time, the results. The query's result size is their sum (``counts``). Each stream's rows
    are counted likewise per file, with the latest time one was read, into its file in
    ``reads``: the file, that time, its rows (what was read, and when a file whose rows meet
    no earlier row was done)."""

    live = plan["live"]
    for ddl in plan["sources"]:
        env.execute_sql(ddl)
    statements = env.create_statement_set()
    lf, rf, at = trace = live["trace"]
    for name, query in plan["queries"].items():
        table = env.sql_query(query["select"])
        own = [(c, kind) for c, kind in base.table_columns(table) if c not in trace]
        env.create_temporary_view(f"{name}__live", table)
        env.execute_sql(base.sink_ddl(f"{name}__sink", own, query["sink"]))
        statements.add_insert_sql(
            f"INSERT INTO `{name}__sink` SELECT {', '.join(f'`{c}`' for c, _ in own)} "
            f"FROM `{name}__live`"
        )
        env.execute_sql(
            f"CREATE TABLE `{name}__traces` (j STRING) WITH ('connector' = 'print', "
            f"'print-identifier' = 'live-{name}-')"
        )
        statements.add_insert_sql(
            f"INSERT INTO `{name}__traces` SELECT JSON_OBJECT(KEY 'lf' VALUE `{lf}`, KEY 'rf' "
            f"VALUE `{rf}`, KEY 'at' VALUE MAX(`{at}`), KEY 'n' VALUE COUNT(*)) "
            f"FROM `{name}__live` GROUP BY `{lf}`, `{rf}`"
        )
    for stream in live["reads"]:
        env.execute_sql(
            f"CREATE TABLE `{stream}__reads` (j STRING) WITH ('connector' = 'print', "
            f"'print-identifier' = 'read-{stream}-')"
        )
        statements.add_insert_sql(
            f"INSERT INTO `{stream}__reads` SELECT JSON_OBJECT(KEY 'f' VALUE `{live['file']}`, "
            "KEY 'at' VALUE MAX(DATE_FORMAT(CURRENT_TIMESTAMP, 'yyyy-MM-dd HH:mm:ss.SSS')), "
            f"KEY 'n' VALUE COUNT(*)) FROM `{stream}` GROUP BY `{live['file']}`"
        )
    figures: dict[str, t.Any] = base.timed(
        statements, lambda result: _await_live(result, live, plan["stdout"])
    )
    if figures["stopped_early"]:
        figures["cpu_seconds"] = None  # (as `engines_flink_runner.run` reports a cut run)
    figures["counts"] = {}
    for name in plan["queries"]:
        with open(plan["stdout"], encoding="utf-8") as printed:
            pairs = base.apply_changes(
                printed, f"live-{name}-", ("lf", "rf", "at", "n"), ("lf", "rf")
            )
        with open(live["traces"][name], "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows(pairs)
        figures["counts"][name] = sum(int(n) for *_, n in pairs)
    for stream, path in live["reads"].items():
        with open(plan["stdout"], encoding="utf-8") as printed:
            files = base.apply_changes(printed, f"read-{stream}-", ("f", "at", "n"), ("f",))
        with open(path, "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows(files)
    figures["updating"] = []
    return figures


def _await_live(result: t.Any, live: dict[str, t.Any], stdout: str) -> bool:
    """Write the ``ready`` file, wait as `run_live` says, then stop the job with a last
    watermark, or cancel it past the drain limit: whether it was cut so. A job that fails
    raises its error."""
    from py4j.protocol import Py4JJavaError

    with open(live["ready"], "w", encoding="utf-8") as f:
        f.write(str(time.time()))
    client = result.get_job_client()
    done_at: float | None = None
    size, changed = -1, time.monotonic()
    while True:
        time.sleep(0.2)
        now = time.monotonic()
        try:
            status = client.get_job_status().result().name
        except Py4JJavaError:  # (a job that ended: its mini-cluster is gone)
            status = "ENDED"
        if status in ("FAILED", "CANCELED", "FINISHED", "ENDED"):
            result.wait()  # (raises a failed job's error)
            return False
        if (grown := os.path.getsize(stdout)) != size:
            size, changed = grown, now
        if done_at is None:
            done_at = now if os.path.exists(live["done"]) else None
            continue
        if now - done_at > live["drain_limit"]:
            client.cancel().result()
            return True
        settled = now - done_at >= live["settle"] and now - changed >= live["settle"]
        if settled and _all_read(live, stdout):
            # (Drained as `flink stop --drain` does: a last watermark flushes what the
            # aggregates' bundles hold, which only a watermark's advance sends on.)
            from pyflink.java_gateway import get_gateway

            canonical = get_gateway().jvm.org.apache.flink.core.execution.SavepointFormatType
            # (PyFlink's own stop_with_savepoint calls the method Flink 2 no longer has.)
            j_client = client._j_job_client
            j_client.stopWithSavepoint(True, live["savepoints"], canonical.CANONICAL).get()
            return False


def _all_read(live: dict[str, t.Any], stdout: str) -> bool:
    """Whether every row of every file the feeder wrote (its ``done`` file's, with their rows)
    has been read, as the job's read counts printed so far say. (A file of no rows has no
    count, and nothing to read.)"""
    import json

    with open(live["done"], encoding="utf-8") as f:
        done = json.load(f)
    with open(stdout, encoding="utf-8") as printed:
        lines = [x for x in printed if x.endswith("\n")]  # (not a line still being written)
    folders = {os.path.normpath(folder): s for s, folder in live["folders"].items()}
    fed: dict[str, dict[str, int]] = {s: {} for s in folders.values()}
    for path, rows in zip(done["files"], done["rows"], strict=True):
        stream = folders.get(os.path.normpath(os.path.dirname(path)))
        if stream is None:
            msg = f"flink: a fed file outside the streams' folders: {path}"
            raise ValueError(msg)
        fed[stream][os.path.basename(path)] = rows
    for stream, files in fed.items():
        marker = f"read-{stream}-"
        read = {f: int(n) for f, n in base.apply_changes(lines, marker, ("f", "n"), ("f",))}
        if any(rows and read.get(name) != rows for name, rows in files.items()):
            return False
    return True


if __name__ == "__main__":
    sys.exit(base.main(sys.argv[1:], run))
