"""One query run batch by batch on a cluster (a driver of its own: ``python -m
tests.cluster.changes MASTER ROOT JOIN ON``), its placement set by hand between batches, its
output compared with the reference executor's; prints what it saw as JSON: whether the output
was exact, how many indexes drained after each batch, the vetoes a drain sent the driver (an
outer join's), and the batches' events."""

from __future__ import annotations

import json
import sys
import typing as t
from pathlib import Path

from streamjoin.reference import normalize, run_reference
from streamjoin.sql import parse_job
from tests.spark.harness import local_frame, read_sink
from tests.spark.streams import make_batches, stream_ddl

SELECT = "a.id AS aid, b.id AS bid, a.x + b.x AS xs"
COLUMNS = ("aid", "bid", "xs")
CHANGES: dict[int, dict[str, t.Any]] = {
    1: {"name": "biclique", "left": 2, "right": 2},
    5: {"name": "matrix", "n": 2, "m": 2},
}
"""After which batch the query takes which placement (a drain each; the second after the
first ended)."""


def run(master: str, root: Path, join: str, on: str) -> dict[str, t.Any]:
    """The run (see the module's doc), in a session at `master`."""
    from streamjoin.runtime.engine import Engine
    from streamjoin.runtime.session import get_session

    spark = get_session(master)
    job = parse_job(
        "\n".join(
            [
                stream_ddl("A"),
                stream_ddl("B"),
                f"CREATE SINK o WITH (format = 'parquet', path = '{root / 'out'}');",
                f"INSERT INTO o SELECT {SELECT} FROM A a {join} B b ON {on};",
            ]
        )
    )
    batches = make_batches(19, n_batches=9, rows_per_batch=12, keys=12, disorder_s=2.0)
    engine = Engine(spark)
    processor = engine.processor(job, str(root / "ckpt"))
    draining, events = [], []
    try:
        for i, batch in enumerate(batches):
            frames = {n: local_frame(spark, job.stream(n), rows) for n, rows in batch.items()}
            report = processor.process(engine.unified(processor.plan, frames), i)
            draining.append(len(processor.indexed.drains.names()))
            events += [f"{i}: {e}" for e in report.events]
            if i in CHANGES:
                processor.set_partitioning("q1", CHANGES[i])
    finally:
        processor.close()
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    vetoes = int(jvm.streamjoin.operator.DrainVetoes.received())
    want = run_reference(job, batches).outputs["q1"]
    got = read_sink(spark, job, "o", COLUMNS)
    return {
        "exact": normalize(got) == normalize(want),
        "rows": [len(got), len(want)],
        "alone": sum(None in row for row in want),
        "draining": draining,
        "vetoes": vetoes,
        "events": events,
    }


if __name__ == "__main__":
    master, root, join, on = sys.argv[1:5]
    print(json.dumps(run(master, Path(root), join, on)))
