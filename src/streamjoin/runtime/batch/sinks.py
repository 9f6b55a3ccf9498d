"""Writing query results: one directory per batch id, overwritten when a batch is replayed."""

from __future__ import annotations

import typing as t

from streamjoin.errors import StreamJoinError

if t.TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from streamjoin.model import SinkDef

SINK_FORMATS = ("json", "parquet", "csv", "console")


def sink_batch_path(sink: SinkDef, batch_id: int) -> str:
    """``<path>/batch=<id>``: readers see a ``batch`` column telling which batch produced a row."""
    path = sink.option("path")
    if not path:
        msg = f"sink {sink.name!r} (format {sink.format!r}) needs a path option"
        raise StreamJoinError(msg)
    return f"{path.rstrip('/')}/batch={batch_id}"


def write_sink(sink: SinkDef, df: DataFrame, batch_id: int) -> None:
    """Write `df` as batch `batch_id`'s output of `sink` (idempotent: the batch's dir is
    replaced)."""
    if sink.format == "console":
        rows = df.collect()
        print(f"-- {sink.name}, batch {batch_id}: {len(rows)} rows")
        for row in rows:
            print("  " + ", ".join(f"{k}={v}" for k, v in row.asDict().items()))
        return
    if sink.format not in SINK_FORMATS:
        msg = f"sink {sink.name!r}: unsupported format {sink.format!r}"
        raise StreamJoinError(msg)
    options = {k: v for k, v in sink.options if k != "path"}
    if sink.format == "csv":
        options.setdefault("header", "true")
    df.write.mode("overwrite").format(sink.format).options(**options).save(
        sink_batch_path(sink, batch_id)
    )
