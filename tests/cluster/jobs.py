"""Job files over JSON file streams with JSON (or Parquet) sinks, checked against the reference
executor."""

from __future__ import annotations

import json
import typing as t
from collections import Counter
from pathlib import Path

from streamjoin.reference import normalize, run_reference
from streamjoin.sql import parse_job
from tests.e2e.cli import QUICK_JIT, class_archive, streamjoin
from tests.e2e.files import read_json_rows, read_parquet_rows
from tests.spark.streams import stream_ddl

if t.TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable, Collection, Mapping, Sequence

    from streamjoin.cluster import LocalCluster

SELECT = "a.id AS aid, b.id AS bid, a.x + b.x AS xs"
COLUMNS = ("aid", "bid", "xs")


def quick_jvms(**settings: object) -> dict[str, str]:
    """Executors too run the quick compiler only (see `QUICK_JIT`); the driver maps the session's
    class-data archive if there is one (`class_archive`); and Spark's `settings`."""
    driver = f"{QUICK_JIT}{class_archive()}"
    confs = "".join(f" --conf {k}={v}" for k, v in settings.items())
    return {
        "PYSPARK_SUBMIT_ARGS": f'--conf "spark.driver.extraJavaOptions={driver}" '
        f"--conf spark.executor.extraJavaOptions={QUICK_JIT}{confs} pyspark-shell"
    }


def event_log(folder: Path) -> dict[str, str]:
    """The environment of `run_on` for a driver that writes Spark's event log, uncompressed,
    into `folder` (read by `batch_call_sites`)."""
    folder.mkdir(parents=True, exist_ok=True)
    logging = {"enabled": "true", "dir": f"file://{folder}", "compress": "false"}
    return quick_jvms(**{f"spark.eventLog.{k}": v for k, v in logging.items()})


def batch_call_sites(folder: Path, *, distinct: bool = False) -> dict[int, Counter[str]]:
    """By batch, the call sites of the RDDs of the Spark jobs the engine ran for it (their
    description names the batch), each as often as an RDD was made there (a stage that
    follows a shuffle repeats its parent's), or with `distinct`, once per RDD however many
    of the batch's jobs read it, from the event logs in `folder`."""
    sites: dict[int, Counter[str]] = {}
    seen: set[tuple[int, int]] = set()
    # (Spark 4 writes each application's log in parts, ``eventlog_v2_<app>/events_<n>_<app>``.)
    for log in folder.rglob("events_*"):
        for line in log.read_text(encoding="utf-8").splitlines():
            event = json.loads(line)
            if event["Event"] != "SparkListenerJobStart":
                continue
            described = event.get("Properties", {}).get("spark.job.description", "")
            if not described.startswith("streamjoin batch "):
                continue
            number = int(described.rsplit(" ", 1)[1])
            batch = sites.setdefault(number, Counter())
            made = {r["RDD ID"]: r["Callsite"] for s in event["Stage Infos"] for r in s["RDD Info"]}
            if distinct:
                made = {i: c for i, c in made.items() if (number, i) not in seen}
                seen.update((number, i) for i in made)
            batch.update(made.values())
    return sites


def run_on(
    cluster: LocalCluster,
    *args: str,
    env: Mapping[str, str] | None = None,
    kill_when: Callable[[], bool] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """``streamjoin ARGS --master <cluster>`` in a subprocess (see `tests.e2e.cli.streamjoin`)."""
    return streamjoin(
        *args,
        "--master",
        cluster.master_url,
        env={**quick_jvms(), **(env or {})},
        kill_when=kill_when,
        timeout=timeout,
    )


def write_job(
    root: Path,
    queries: Mapping[str, tuple[str, str]],
    parquet: Collection[str] = (),
    parquet_input: bool = False,
) -> Path:
    """``root/job.sql``: streams A and B read from ``root/in/<stream>`` one file per batch (JSON,
    or Parquet with `parquet_input`), and per query (name → FROM clause, ON predicate) a JSON
    sink ``root/out/<name>`` (Parquet for the names in `parquet`)."""
    fmt = "parquet" if parquet_input else "json"
    parts = [
        stream_ddl(s, str(root / "in" / s)).replace(
            "WITH (format = 'json', ", f"WITH (format = '{fmt}', maxFilesPerTrigger = '1', "
        )
        for s in ("A", "B")
    ]
    parts += [
        f"CREATE SINK {name} WITH (format = '{'parquet' if name in parquet else 'json'}', "
        f"path = '{root / 'out' / name}');"
        for name in queries
    ]
    parts += [
        f"INSERT INTO {name} SELECT {SELECT} FROM {from_} ON {on};"
        for name, (from_, on) in queries.items()
    ]
    path = root / "job.sql"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def assert_exact(
    job: Path,
    batches: Sequence[Mapping[str, Sequence[Mapping[str, object]]]],
    but: Sequence[str] = (),
) -> None:
    """Every sink of `job` (`but` those named) holds exactly the reference's result of its
    query (not empty)."""
    parsed = parse_job(job.read_text(encoding="utf-8"))
    expected = run_reference(parsed, batches)
    for q in parsed.queries:
        if q.sink in but:
            continue
        read = read_parquet_rows if parsed.sink(q.sink).format == "parquet" else read_json_rows
        got = read(job.parent / "out" / q.sink, COLUMNS)
        want = expected.outputs[q.name]
        assert want, f"{q.sink}: the input gives this query no result to check"
        assert normalize(got) == normalize(want), f"{q.sink}: {len(got)} rows vs {len(want)}"


def app_ids(cluster: LocalCluster) -> set[str]:
    """Ids of the applications the master has seen finish."""
    return {str(app["id"]) for app in cluster.status()["completedapps"]}


def workers_of(cluster: LocalCluster, app_id: str) -> list[int]:
    """The workers that ran an executor of `app_id` (each has a work dir for it)."""
    return [
        i
        for i in range(cluster.workers)
        if (cluster.dir / "work" / f"worker-{i}" / app_id).is_dir()
    ]
