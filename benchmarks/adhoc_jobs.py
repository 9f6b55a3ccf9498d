"""The ``adhoc`` benchmark's streams and queries (`benchmarks.adhoc`): streams A and B written as
Parquet files, a second of event time each, and query i from one of two templates."""

from __future__ import annotations

import os

KEYS = 50_000
"""Join keys per column: a row meets about one partner per second of window, so that a query's
results stay small and the joins, not the writing of results, are what N queries share."""
WINDOWS = (2, 5, 10)


def query(i: int, out: str) -> tuple[str, str]:
    """Query i: its CREATE SINK and INSERT (sink ``s<i>``), and its Spark condition."""
    window = WINDOWS[(i // 2) % len(WINDOWS)]
    c = (i * 37) % 91
    key, sel = ("k", f"a.x > {c}") if i % 2 == 0 else ("g", f"b.x < {c}")
    cond = (
        f"a.{key} = b.{key} AND {sel} AND b.ts BETWEEN a.ts - INTERVAL '{window}' SECOND "
        f"AND a.ts + INTERVAL '{window}' SECOND"
    )
    sql = (
        f"CREATE SINK s{i} WITH (format = 'parquet', path = '{out}/s{i}');\n"
        f"INSERT INTO s{i} SELECT a.id AS aid, b.id AS bid FROM A a JOIN B b ON {cond};"
    )
    return sql, cond


def streams_sql(data: str, one_file: bool = True) -> str:
    per = "maxFilesPerTrigger = '1', " if one_file else ""
    return "\n".join(
        f"CREATE STREAM {s} (id BIGINT, k BIGINT, g BIGINT, x DOUBLE, ts TIMESTAMP, "
        f"WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) "
        f"WITH (format = 'parquet', {per}path = '{data}/{s}');"
        for s in "AB"
    )


def write_files(data: str, files: int, rows: int, first: int = 0, seed: int = 7) -> None:
    """Files ``first`` to ``first + files - 1`` of each stream, one second of event time each."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    for n, s in enumerate("AB"):
        folder = os.path.join(data, s)
        os.makedirs(folder, exist_ok=True)
        for f in range(first, first + files):
            rng = np.random.default_rng(seed * 1_000 + f * 2 + n)
            base = 1_700_000_000_000_000 + f * 1_000_000
            ids = np.arange(rows, dtype=np.int64) + (f * 2 + n) * rows
            table = pa.table(
                {
                    "id": ids,
                    "k": rng.integers(0, KEYS, rows),
                    "g": rng.integers(0, KEYS, rows),
                    "x": rng.uniform(0, 100, rows),
                    "ts": pa.array(
                        np.sort(rng.integers(0, 1_000_000, rows)) + base, pa.timestamp("us")
                    ),
                }
            )
            path = os.path.join(folder, f"part-{f:05d}.parquet")
            pq.write_table(table, path + ".tmp")
            os.replace(path + ".tmp", path)
            os.utime(path, (1_700_000_000 + f, 1_700_000_000 + f))
