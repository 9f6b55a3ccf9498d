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

A live run's plan (``warmup``, ``live``) is run by `engines_flink_live`, beside this module.

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
        f"CREATE TABLE `{name}` ({columns_ddl(columns)}) WITH ('connector' = 'filesystem', "
        f"'path' = '{folder}', 'format' = 'csv')"
    )


def run(plan: dict[str, t.Any]) -> dict[str, t.Any]:
    """Run `plan` (the module's docstring says its fields): the figures."""
    env = environment(plan)
    for ddl in plan["sources"]:
        env.execute_sql(ddl)
    statements = env.create_statement_set()
    columns: dict[str, list[tuple[str, str]]] = {}
    updating: dict[str, t.Any] = {}
    for name, query in plan["queries"].items():
        table = env.sql_query(query["select"])
        columns[name] = table_columns(table)
        if query.get("key") or _updates(table):
            # Flink's file sink takes inserts only: the timed job discards an updating
            # result, and a second run collects its changes (`collect_result`).
            updating[name] = table
            body = columns_ddl(columns[name])
            ddl = f"CREATE TABLE `{name}__sink` ({body}) WITH ('connector' = 'blackhole')"
        else:
            ddl = sink_ddl(f"{name}__sink", columns[name], query["sink"])
        env.execute_sql(ddl)
        statements.add_insert(f"{name}__sink", table)
    figures = timed(statements, lambda result: _wait(result, plan.get("time_limit")))
    figures["columns"] = columns
    if figures["stopped_early"]:
        figures["cpu_seconds"] = None
    figures["updating"] = sorted(updating)
    if not figures["stopped_early"]:
        for name, table in updating.items():
            query, limit = plan["queries"][name], plan.get("time_limit")
            key, stdout = query.get("key") or [], plan["stdout"]
            if collect_result(env, table, query["sink"], key, stdout, limit) is None:
                figures["error"] = f"{name}: its changes were not collected within {limit} s"
    return figures


def environment(plan: dict[str, t.Any]) -> t.Any:
    """A streaming table environment with `plan`'s settings."""
    from pyflink.table import EnvironmentSettings, TableEnvironment

    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    for key, value in plan["conf"].items():
        env.get_config().set(key, value)
    return env


def timed(statements: t.Any, wait: t.Callable[[t.Any], bool]) -> dict[str, t.Any]:
    """Submit `statements` and `wait` for their job (whether it was cut short): the figures of
    the run (the module's docstring names them)."""
    from pyflink.java_gateway import get_gateway
    from pyflink.version import __version__

    jvm = get_gateway().jvm
    jvm_pid = int(jvm.java.lang.ProcessHandle.current().pid())
    figures: dict[str, t.Any] = {
        "flink": __version__,
        "jvm_flags": _jvm_flags(jvm),
        "startup_seconds": round(time.monotonic() - _STARTED, 2),
    }
    cpu_before, began = _cpu_seconds(jvm_pid), time.monotonic()
    figures["stopped_early"] = wait(statements.execute())
    figures["seconds"] = time.monotonic() - began
    cpu_after = _cpu_seconds(jvm_pid)
    cpu = None if cpu_before is None or cpu_after is None else round(cpu_after - cpu_before, 2)
    figures["cpu_seconds"] = cpu
    return figures


def _schema(table: t.Any) -> t.Any:
    return table._j_table.getResolvedSchema().getColumns()


def table_columns(table: t.Any) -> list[tuple[str, str]]:
    """`table`'s columns: (name, Flink type)."""
    return [(c.getName(), c.getDataType().toString()) for c in _schema(table)]


def columns_ddl(columns: t.Sequence[tuple[str, str]]) -> str:
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


def main(argv: list[str], run_plan: t.Callable[[dict[str, t.Any]], dict[str, t.Any]] = run) -> int:
    """``PLAN RESULT``: `run_plan` the plan, write its figures (or Flink's error) as JSON."""
    from py4j.protocol import Py4JJavaError

    plan_file, result_file = argv
    with open(plan_file, encoding="utf-8") as f:
        plan = json.load(f)
    # The JVM, started below, writes to this process's standard output: a file of its own, where
    # `collect_result` reads the changes Flink prints.
    with open(plan["stdout"], "w", encoding="utf-8") as out:
        os.dup2(out.fileno(), 1)
    try:
        figures = run_plan(plan)
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
