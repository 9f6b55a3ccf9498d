"""The ``flink`` engine's Flink job, run in PyFlink's own venv (`flink_env`) as
``python -I engines_flink_runner.py PLAN RESULT`` by `engines_flink.run_flink`.

It needs PyFlink alone: it imports nothing but the standard library, ``pyflink`` and ``py4j``
(PyFlink's own), for that venv has no PySpark, streamjoin, sqlglot nor pyarrow, and ``-I``
keeps this folder's modules off its path. The benchmark's process parses and translates the
job and copies its input to CSV; here the plan (JSON) is run as it is written:

- ``conf``: Flink's settings; ``sources``: each stream's ``CREATE TABLE``;
- ``queries``: by query name, its ``select``, the ``sink`` folder its rows go to as CSV, and
  the ``key`` (output columns) an updating query's rows are keyed by, if any;
- ``time_limit``: seconds after which the job is cancelled (null: none);
- ``stdout``: the file this process's (and so the JVM's) standard output goes to;
- ``warmup`` (optional): ``sources``, ``selects`` and ``streams`` of a job run to its end into
  ``blackhole`` sinks first, its tables then dropped (a live run's warm-up, as each Spark
  engine runs one in its own JVM before a live run);
- ``live`` (optional): the sources are read as a live feed (``done``, ``ready``,
  ``drain_limit``, ``settle``, ``traces``): see `run_live`.

RESULT (JSON) holds what was measured: ``startup_seconds`` (this python's start, PyFlink's
import, the JVM's start, the table environment, the planning), ``seconds`` from the job's
submission to its end, ``cpu_seconds`` of the JVM (the mini-cluster runs in it) and of this
process over those seconds, ``stopped_early``, each query's ``columns`` (name, Flink type),
``updating`` (the queries whose result updates rows it wrote), ``flink`` (its version) and
``jvm_flags``; or ``error``, Flink's own message, when it refuses.

Flink's file sink writes rows, not changes. An updating query (a key given: Nexmark q4's
averages, q9's top bid; or a plan whose root emits more than inserts) is timed as Flink's own
Nexmark runs time it, into a ``blackhole`` sink; once the timed job is done, the query runs again
untimed, its changes collected here and applied, and its final rows are written to its folder
(`collect_result`).
"""

from __future__ import annotations

import collections
import csv
import decimal
import json
import os
import re
import sys
import time
import typing as t

_STARTED = time.monotonic()


def sink_ddl(name: str, columns: t.Sequence[tuple[str, str]], folder: str) -> str:
    """``CREATE TABLE`` of a CSV sink in `folder` with `columns` (name, Flink type)."""
    return (
        f"CREATE TABLE `{name}` ({_body(columns)}) WITH ('connector' = 'filesystem', "
        f"'path' = '{folder}', 'format' = 'csv')"
    )


def run(plan: dict[str, t.Any]) -> dict[str, t.Any]:
    """Run `plan` (the module's docstring says its fields): the figures."""
    from pyflink.java_gateway import get_gateway
    from pyflink.table import EnvironmentSettings, TableEnvironment
    from pyflink.version import __version__

    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    for key, value in plan["conf"].items():
        env.get_config().set(key, value)
    if plan.get("warmup"):
        warm_up(env, plan["warmup"])
    if plan.get("live"):
        return run_live(env, plan)
    for ddl in plan["sources"]:
        env.execute_sql(ddl)
    statements = env.create_statement_set()
    columns: dict[str, list[tuple[str, str]]] = {}
    updating: dict[str, t.Any] = {}
    for name, query in plan["queries"].items():
        table = env.sql_query(query["select"])
        columns[name] = _columns(table)
        if query.get("key") or _updates(table):
            # Flink's file sink takes inserts only: the timed job discards an updating
            # result, and a second run collects its changes (`collect_result`).
            updating[name] = table
            body = _body(columns[name])
            ddl = f"CREATE TABLE `{name}__sink` ({body}) WITH ('connector' = 'blackhole')"
        else:
            ddl = sink_ddl(f"{name}__sink", columns[name], query["sink"])
        env.execute_sql(ddl)
        statements.add_insert(f"{name}__sink", table)
    jvm = get_gateway().jvm
    jvm_pid = int(jvm.java.lang.ProcessHandle.current().pid())
    figures: dict[str, t.Any] = {
        "flink": __version__,
        "jvm_flags": _jvm_flags(jvm),
        "columns": columns,
        "startup_seconds": round(time.monotonic() - _STARTED, 2),
    }
    cpu_before, began = _cpu_seconds(jvm_pid), time.monotonic()
    result = statements.execute()
    figures["stopped_early"] = _wait(result, plan.get("time_limit"))
    figures["seconds"] = time.monotonic() - began
    cpu_after = _cpu_seconds(jvm_pid)
    cpu = None if cpu_before is None or cpu_after is None else round(cpu_after - cpu_before, 2)
    figures["cpu_seconds"] = None if figures["stopped_early"] else cpu
    figures["updating"] = sorted(updating)
    if not figures["stopped_early"]:
        for name, table in updating.items():
            query, limit = plan["queries"][name], plan.get("time_limit")
            key, stdout = query.get("key") or [], plan["stdout"]
            if collect_result(env, table, query["sink"], key, stdout, limit) is None:
                figures["error"] = f"{name}: its changes were not collected within {limit} s"
    return figures


def warm_up(env: t.Any, warmup: dict[str, t.Any]) -> None:
    """Run `warmup`'s selects over its sources to their end into ``blackhole`` sinks, then drop
    its tables: the JVM has then compiled the code a live run's first rows would wait for."""
    for ddl in warmup["sources"]:
        env.execute_sql(ddl)
    statements = env.create_statement_set()
    for i, select in enumerate(warmup["selects"]):
        table = env.sql_query(select)
        columns = _columns(table)
        env.execute_sql(
            f"CREATE TABLE `warmup__{i}` ({_body(columns)}) WITH ('connector' = 'blackhole')"
        )
        statements.add_insert(f"warmup__{i}", table)
    statements.execute().wait()
    for name in [*warmup["streams"], *(f"warmup__{i}" for i in range(len(warmup["selects"])))]:
        env.execute_sql(f"DROP TABLE IF EXISTS `{name}`")


def run_live(env: t.Any, plan: dict[str, t.Any]) -> dict[str, t.Any]:
    """Run `plan`'s queries on its sources as a live feed, each result printed, as JSON, by
    Flink's ``print`` sink as it is made: `plan["live"]`'s ``ready`` file is written once the
    job is submitted; once its ``done`` file (the feeder's) exists, the job runs until nothing
    more is printed for ``settle`` seconds (the feed's last files listed and read), at most
    ``drain_limit`` seconds, and is cancelled. Each query's rows then go, as CSV, to its sink
    folder (``part-live.csv``), and the columns that time them (its last three: the files of
    its two rows and when Flink made it, `engines_flink_sql.TRACE_COLUMNS`) to its file in
    ``traces``, in the same order."""
    from pyflink.java_gateway import get_gateway
    from pyflink.version import __version__

    live = plan["live"]
    for ddl in plan["sources"]:
        env.execute_sql(ddl)
    statements = env.create_statement_set()
    columns: dict[str, list[tuple[str, str]]] = {}
    for name, query in plan["queries"].items():
        table = env.sql_query(query["select"])
        columns[name] = _columns(table)
        pairs = ", ".join(f"KEY '{c}' VALUE `{c}`" for c, _ in columns[name])
        env.create_temporary_view(f"{name}__live", table)
        env.execute_sql(
            f"CREATE TABLE `{name}__sink` (j STRING) WITH ('connector' = 'print', "
            f"'print-identifier' = 'live_{name}')"
        )
        statements.add_insert_sql(
            f"INSERT INTO `{name}__sink` SELECT JSON_OBJECT({pairs} NULL ON NULL) "
            f"FROM `{name}__live`"
        )
    jvm = get_gateway().jvm
    jvm_pid = int(jvm.java.lang.ProcessHandle.current().pid())
    figures: dict[str, t.Any] = {
        "flink": __version__,
        "jvm_flags": _jvm_flags(jvm),
        "startup_seconds": round(time.monotonic() - _STARTED, 2),
    }
    cpu_before, began = _cpu_seconds(jvm_pid), time.monotonic()
    result = statements.execute()
    with open(live["ready"], "w", encoding="utf-8") as f:
        f.write(str(time.time()))
    figures["stopped_early"] = _await_live(result, live, plan["stdout"])
    figures["seconds"] = time.monotonic() - began
    cpu_after = _cpu_seconds(jvm_pid)
    figures["cpu_seconds"] = (
        None if cpu_before is None or cpu_after is None else round(cpu_after - cpu_before, 2)
    )
    figures["columns"] = {}
    for name, query in plan["queries"].items():
        names = [c for c, _ in columns[name]]
        with open(plan["stdout"], encoding="utf-8") as printed:
            rows = apply_changes(printed, f"live_{name}", names, ())
        own = len(names) - 3
        os.makedirs(query["sink"], exist_ok=True)
        for path, part in (
            (os.path.join(query["sink"], "part-live.csv"), slice(0, own)),
            (live["traces"][name], slice(own, None)),
        ):
            with open(path, "w", newline="", encoding="utf-8") as f:
                out = csv.writer(f)
                for row in rows:
                    out.writerow(["" if v is None else _text(v) for v in row[part]])
        figures["columns"][name] = columns[name][:own]
    figures["updating"] = []
    return figures


def _await_live(result: t.Any, live: dict[str, t.Any], stdout: str) -> bool:
    """Wait as `run_live` says, then cancel the job: whether it was cut at the drain limit. A
    job that fails raises its error."""
    from py4j.protocol import Py4JJavaError

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
        cut = now - done_at > live["drain_limit"]
        if cut or (now - done_at >= live["settle"] and now - changed >= live["settle"]):
            client.cancel().result()
            return bool(cut)


def _schema(table: t.Any) -> t.Any:
    return table._j_table.getResolvedSchema().getColumns()


def _columns(table: t.Any) -> list[tuple[str, str]]:
    """`table`'s columns: (name, Flink type)."""
    return [(c.getName(), c.getDataType().toString()) for c in _schema(table)]


def _body(columns: t.Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"`{c}` {kind}" for c, kind in columns)


def _updates(table: t.Any) -> bool:
    """Whether `table`'s plan says its result updates rows it wrote (its root emits more than
    inserts: ``EXPLAIN CHANGELOG_MODE``). Not always so: for a top-1 (Nexmark q9) the plan says
    inserts only and the job sends upserts, which the query's key catches instead."""
    from pyflink.table.explain_detail import ExplainDetail

    plan = table.explain(ExplainDetail.CHANGELOG_MODE)
    physical = plan.split("== Optimized Physical Plan ==", 1)[1].strip().splitlines()[0]
    mode = re.search(r"changelogMode=\[([^\]]*)\]", physical)
    return mode is not None and mode.group(1).replace(" ", "") != "I"


def collect_result(
    env: t.Any,
    table: t.Any,
    folder: str,
    key: t.Sequence[str],
    stdout: str,
    time_limit: float | None = None,
) -> int | None:
    """Run `table` again, its changes printed by Flink and applied here (`apply_changes`), and
    write the rows left, its final result, as CSV to `folder` (``part-collected.csv``): the rows
    written, or None when the run was cancelled after `time_limit` seconds.

    Each change is one JSON text (``JSON_OBJECT``) that Flink's ``print`` sink writes, with its
    kind, to the JVM's standard output, the file `stdout`: PyFlink's own collect converts a
    row's fields one by one over its gateway, which took over ten minutes for Nexmark q9's."""
    names = [c.getName() for c in _schema(table)]
    marker = f"changes_{abs(hash(folder))}"
    env.create_temporary_view(marker, table)
    pairs = ", ".join(f"KEY '{n}' VALUE `{n}`" for n in names)
    env.execute_sql(
        f"CREATE TABLE `{marker}_out` (j STRING) WITH ('connector' = 'print', "
        f"'print-identifier' = '{marker}')"
    )
    insert = f"INSERT INTO `{marker}_out` SELECT JSON_OBJECT({pairs} NULL ON NULL) FROM `{marker}`"
    if _wait(env.execute_sql(insert), time_limit):
        return None
    with open(stdout, encoding="utf-8") as printed:
        final = apply_changes(printed, marker, names, key)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "part-collected.csv"), "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        for row in final:
            out.writerow(["" if v is None else _text(v) for v in row])
    return len(final)


def apply_changes(
    lines: t.Iterable[str], marker: str, names: t.Sequence[str], key: t.Sequence[str]
) -> list[tuple[t.Any, ...]]:
    """The rows left once the changes that Flink's ``print`` sink wrote as `marker`'s lines
    (``marker[:subtask]> +U[{json}]``, other lines ignored) are applied in order: a result's
    final rows, each a tuple of the columns `names`.

    Keyed by the columns `key`, an insert or an update's new row replaces its key's row and a
    delete takes it away (Flink sends a top-1's or a keyed aggregate's changes as upserts,
    without the old row). Without a key, an insert or an update's new row adds a row, a delete
    or an update's old row takes one away; a row taken away more often than it was added (an
    upsert without its key) raises ValueError, as does a line of `marker` of another shape."""
    line = re.compile(rf"^{re.escape(marker)}(?::\d+)?> ([+-][IUD])\[(.*)\]$")
    by_key: dict[tuple[t.Any, ...], tuple[t.Any, ...]] = {}
    rows: collections.Counter[tuple[t.Any, ...]] = collections.Counter()
    olds = news = 0
    for text in lines:
        m = line.match(text.rstrip("\n"))
        if m is None:
            if text.startswith(marker):
                raise ValueError(f"flink: a printed change of another shape: {text[:200]!r}")
            continue
        kind, values = m.group(1), json.loads(m.group(2), parse_float=decimal.Decimal)
        row = tuple(values[n] for n in names)
        olds, news = olds + (kind == "-U"), news + (kind == "+U")
        if key:
            if kind in ("+I", "+U"):
                by_key[tuple(values[k] for k in key)] = row
            elif kind == "-D":
                by_key.pop(tuple(values[k] for k in key), None)
        else:
            rows[row] += 1 if kind in ("+I", "+U") else -1
    if key:
        return list(by_key.values())
    if news != olds or any(n < 0 for n in rows.values()):
        msg = (
            f"flink: {news} updates and {olds} old rows without a key to apply them by: "
            "the result's changes are upserts, and the query names no key"
        )
        raise ValueError(msg)
    return list(rows.elements())


def _text(value: t.Any) -> str:
    """A JSON value as Flink's CSV format writes it (a timestamp with a space, not a T)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and _TIMESTAMP.fullmatch(value):
        return value.replace("T", " ")
    return str(value)


_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?")


def _wait(result: t.Any, time_limit: float | None) -> bool:
    """Wait for the job behind `result`; cancel it after `time_limit` seconds: whether it was."""
    from py4j.protocol import Py4JJavaError

    if time_limit is None:
        result.wait()
        return False
    try:
        result.wait(int(time_limit * 1000))
    except Py4JJavaError as err:
        if "TimeoutException" not in str(err.java_exception):
            raise
        result.get_job_client().cancel()
        return True
    return False


def _cpu_seconds(jvm_pid: int) -> float | None:
    """CPU seconds used so far by the JVM (every thread, those that ended too, from
    ``/proc/<pid>/stat``, as `engines_measure.CpuClock` reads Spark's driver) and by this
    process; None off Linux."""
    path = f"/proc/{jvm_pid}/stat"
    if not os.path.exists(path):
        return None
    with open(path, encoding="ascii") as f:
        # After the command name in parentheses: utime, stime, cutime, cstime are the
        # 12th-15th fields (proc(5)), in clock ticks.
        fields = f.read().rsplit(")", 1)[1].split()
    own = os.times()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK") + own.user + own.system


def _jvm_flags(jvm: t.Any) -> str:
    args = jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    # (As for Spark's driver, -XX:+IgnoreUnrecognizedVMOptions is no tuning.)
    return " ".join(a for a in args if a.startswith("-XX:") and "IgnoreUnrecognized" not in a)


def main(argv: list[str]) -> int:
    """``PLAN RESULT``: run the plan, write its figures (or Flink's error) as JSON."""
    from py4j.protocol import Py4JJavaError

    plan_file, result_file = argv
    with open(plan_file, encoding="utf-8") as f:
        plan = json.load(f)
    # The JVM, started below, writes to this process's standard output: a file of its own, where
    # `collect_result` reads the changes Flink prints.
    with open(plan["stdout"], "w", encoding="utf-8") as out:
        os.dup2(out.fileno(), 1)
    try:
        figures = run(plan)
    except ValueError as err:  # (changes that cannot be applied: `apply_changes`)
        figures = {"error": str(err)}
    except Py4JJavaError as err:  # a query Flink refuses: its own message, on one line
        cause = err.java_exception
        text = f"{cause.getClass().getSimpleName()}: {cause.getMessage()}"
        root = cause
        while root.getCause() is not None and root.getCause() != root:
            root = root.getCause()
        if root != cause:  # (a job's failure is wrapped: its first cause says what it was)
            text += f" (caused by {root.getClass().getSimpleName()}: {root.getMessage()})"
        figures = {"error": " ".join(text.split())}
    with open(result_file, "w", encoding="utf-8") as f:
        json.dump(figures, f)
    return 1 if "error" in figures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
