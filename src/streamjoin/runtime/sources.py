"""Reading the declared streams and merging them into one tagged input.

Spark hands foreachBatch one DataFrame per micro-batch, so all streams are read by one query: each
stream is tagged with its index and its columns prefixed, and the streams are unioned by name. One
batch thus carries the deltas of every stream, under one batch id — what the delta rule needs.

Columns of the unified input:
``_sj_src`` (stream index), ``_sj_raw`` (the unparsable record, or NULL: `raw_sql`), ``_sj_ts``
(event time in epoch microseconds, NULL when the stream has no watermark) and ``s<i>_<column>``
per column.
"""

from __future__ import annotations

import functools
import typing as t

from pyspark.sql import functions as F

from streamjoin.errors import StreamJoinError

if t.TYPE_CHECKING:
    from collections.abc import Mapping

    from pyspark.sql import Column, DataFrame, DataFrameReader, SparkSession
    from pyspark.sql.streaming.readwriter import DataStreamReader

    from streamjoin.model import StreamDef
    from streamjoin.plan import JobPlan, StreamPlan

    R = t.TypeVar("R", DataFrameReader, DataStreamReader)

CORRUPT = "_sj_corrupt"
_OWN_OPTIONS = ("path", "deadletter", "state", "source")
_COLUMN_PREFIX = "column."
FILE_FORMATS = ("json", "csv", "parquet")


def prefixed(index: int, column: str) -> str:
    """Name of `column` of stream `index` in the unified input."""
    return f"s{index}_{column}"


def schema_ddl(stream: StreamDef, *, corrupt: bool = False) -> str:
    """The stream's columns as a Spark DDL schema, plus the corrupt-record column if asked."""
    cols = [f"`{c.name}` {c.type.ddl}" for c in stream.columns]
    if corrupt:
        cols.append(f"`{CORRUPT}` STRING")
    return ", ".join(cols)


def empty_relation(stream: StreamDef) -> str:
    """SQL of a relation with `stream`'s declared columns and no rows: Spark's own, where
    ``createDataFrame([])`` costs a second on a cold JVM and starts Python workers."""
    cols = ", ".join(f"CAST(NULL AS {c.type.ddl}) AS `{c.name}`" for c in stream.columns)
    return f"SELECT {cols} WHERE false"


def reader_options(stream: StreamDef) -> dict[str, str]:
    """Options passed to Spark's reader: all but streamjoin's own."""
    return {
        k: v
        for k, v in stream.options
        if k not in _OWN_OPTIONS and not k.startswith(_COLUMN_PREFIX)
    }


def column_exprs(stream: StreamDef) -> dict[str, str]:
    """``column.<name> = '<expr>'`` options: columns computed from the source's own columns."""
    return {k[len(_COLUMN_PREFIX) :]: v for k, v in stream.options if k.startswith(_COLUMN_PREFIX)}


def read_stream(spark: SparkSession, stream: StreamDef) -> DataFrame:
    """A streaming DataFrame with the stream's declared columns (and `CORRUPT` where parsable)."""
    fmt = stream.format
    reader = spark.readStream.options(**reader_options(stream))
    if fmt in FILE_FORMATS:
        return file_reader(reader, stream).load(_path(stream))
    if fmt == "rate":
        return conform(reader.format("rate").load(), stream)
    if fmt == "kafka":
        return parse_values(reader.format("kafka").load(), stream)
    if fmt == "python":
        return conform(reader.format(python_source(spark, stream)).load(), stream)
    msg = f"stream {stream.name!r}: unsupported format {fmt!r}"
    raise StreamJoinError(msg)


def python_source(spark: SparkSession, stream: StreamDef) -> str:
    """The name under which the Python data source class of `stream` (its ``source`` option,
    ``package.module.Class``, importable by the driver and the executors' Python workers) is
    registered with `spark` (Spark's ``pyspark.sql.datasource`` API: a live source with
    offsets, read in Spark's loop)."""
    import importlib

    from pyspark.sql.datasource import DataSource

    given = dict(stream.options).get("source", "")
    module, _, name = given.strip().rpartition(".")
    where = f"stream {stream.name!r}: source {given!r}"
    try:
        found = getattr(importlib.import_module(module), name) if module else None
    except ImportError as err:
        msg = f"{where} cannot be imported: {err}"
        raise StreamJoinError(msg) from err
    except AttributeError:
        found = None
    except Exception as err:  # (its module's own code failed as it was imported)
        msg = f"{where} cannot be imported: {type(err).__name__}: {err}"
        raise StreamJoinError(msg) from err
    if not (isinstance(found, type) and issubclass(found, DataSource)):
        msg = f"{where} is not a class of pyspark.sql.datasource.DataSource (package.module.Class)"
        raise StreamJoinError(msg)
    spark.dataSource.register(found)
    return found.name()


def parse_values(raw: DataFrame, stream: StreamDef) -> DataFrame:
    """Records whose ``value`` (Kafka's bytes) is a JSON object, parsed into the stream's
    declared columns and `CORRUPT` (the value, where it does not parse)."""
    parsed = raw.select(
        F.from_json(
            F.col("value").cast("string"),
            schema_ddl(stream, corrupt=True),
            {"columnNameOfCorruptRecord": CORRUPT, "mode": "PERMISSIVE"},
        ).alias("v")
    )
    return parsed.select("v.*")


def file_reader(reader: R, stream: StreamDef) -> R:
    """`reader` (a streaming or batch one, with the stream's options) set to parse a file
    stream's format into its declared columns, and `CORRUPT` where a record can be unparsable."""
    if stream.format == "parquet":
        return reader.format("parquet").schema(schema_ddl(stream))
    return (
        reader.format(stream.format)
        .schema(schema_ddl(stream, corrupt=True))
        .option("columnNameOfCorruptRecord", CORRUPT)
        .option("mode", "PERMISSIVE")
    )


def _path(stream: StreamDef) -> str:
    path = stream.option("path")
    if not path:
        msg = f"stream {stream.name!r} (format {stream.format!r}) needs a path option"
        raise StreamJoinError(msg)
    return path


def conform(df: DataFrame, stream: StreamDef) -> DataFrame:
    """Select and cast `df`'s columns to the declared ones (``column.<name>`` options may derive
    a column from others, e.g. ``'column.k' = 'value % 100'`` on the rate source)."""
    exprs = column_exprs(stream)
    have = {c.lower(): c for c in df.columns}
    cols: list[Column] = []
    for c in stream.columns:
        if c.name in exprs:
            src = F.expr(exprs[c.name])
        elif c.name.lower() in have:
            src = F.col(f"`{have[c.name.lower()]}`")
        else:
            msg = (
                f"stream {stream.name!r}: column {c.name!r} is not in the source "
                f"(it has {', '.join(df.columns)}); add an option 'column.{c.name}' = '<expr>'"
            )
            raise StreamJoinError(msg)
        cols.append(src.cast(c.type.ddl).alias(c.name))
    if CORRUPT in df.columns:
        cols.append(F.col(CORRUPT))
    return df.select(*cols)


REPLACEMENT = "\ufffd"
"""What a reader makes of bytes that are not UTF-8 (the CSV reader keeps the row with it)."""

STORED_FORMATS = frozenset({"parquet"})
"""Formats whose strings come as stored, not decoded from text by a reader that may put
`REPLACEMENT` for bytes that are not UTF-8 (CSV's, and Kafka's JSON and CSV decoders, do)."""


def raw_sql(stream: StreamDef, cols: Mapping[str, str], *, corrupt: bool) -> str:
    """SQL of a row's ``_sj_raw``: the reader's unparsable record (`CORRUPT`, where `corrupt`),
    else the row as JSON when a STRING value is not valid UTF-8 (or, decoded from text,
    holds `REPLACEMENT`), else NULL. `cols` is the SQL of each declared column.

    A string that held invalid UTF-8 is not the value that was sent: Spark's JSON file reader
    rejects it, its CSV reader and Kafka's decoders replace the bytes with `REPLACEMENT` and
    keep the row, and a Parquet file's strings come as stored, so the test is made here for
    every format. In a stored string `REPLACEMENT` is no loss but a character that was sent
    (and each search of it a scan of every string of every row).
    """
    strings = [cols[c.name] for c in stream.columns if c.type.name == "STRING"]
    replaced = stream.format not in STORED_FORMATS
    tests = [
        f"(instr({e}, '{REPLACEMENT}') > 0 OR NOT is_valid_utf8({e}))"
        if replaced
        else f"NOT is_valid_utf8({e})"
        for e in strings
    ]
    whole = ", ".join(f"{cols[c.name]} AS `{c.name}`" for c in stream.columns)
    bad_text = f"CASE WHEN {' OR '.join(tests)} THEN to_json(struct({whole})) END" if tests else ""
    parts = ([f"`{CORRUPT}`"] if corrupt else []) + ([bad_text] if bad_text else [])
    if not parts:
        return "CAST(NULL AS STRING)"
    return parts[0] if len(parts) == 1 else f"coalesce({', '.join(parts)})"


def tag(df: DataFrame, sp: StreamPlan) -> DataFrame:
    """`df` (declared columns, maybe `CORRUPT`) as rows of the unified input."""
    s = sp.stream
    names = {c.name: f"`{c.name}`" for c in s.columns}
    raw = F.expr(raw_sql(s, names, corrupt=CORRUPT in df.columns))
    ts = F.unix_micros(F.col(f"`{s.event_time}`")) if s.event_time else F.lit(None).cast("bigint")
    cols = [F.lit(sp.index).alias("_sj_src"), raw.alias("_sj_raw"), ts.alias("_sj_ts")]
    cols += [F.col(f"`{c.name}`").alias(prefixed(sp.index, c.name)) for c in s.columns]
    return df.select(*cols)


def unify(frames: list[DataFrame]) -> DataFrame:
    """Union the tagged streams by name; each keeps NULL in the others' columns."""
    return functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)


def no_rows(spark: SparkSession, plan: JobPlan) -> DataFrame:
    """The unified input of a batch without rows: every stream's columns, none of its rows."""
    return unify([tag(spark.sql(empty_relation(sp.stream)), sp) for sp in plan.streams])


_FAILED_READ = "[FAILED_READ_FILE"
"""Spark's error class of an input file it cannot read (its message names the file)."""


def unreadable_file(err: BaseException) -> str | None:
    """What Spark says of an input file it could not read, when that stopped a batch (`err`, a
    py4j error): a Parquet file with a column of a type other than the declared one, or not
    Parquet at all. Its message and the root cause's, in one line; None for other errors.

    Such a file has no rows to dead-letter (none can be read in the declared types), so the run
    stops, naming it, rather than go on without it.
    """
    java = getattr(err, "java_exception", None)
    found: str | None = None
    root = ""
    while java is not None:
        text = str(java.getMessage() or "")
        if found is None and _FAILED_READ in text:
            found = text
        root = text
        java = java.getCause()
    if found is None:
        return None
    first = " ".join(found.split()).split(" SQLSTATE")[0]
    root = " ".join(root.split())
    return first if not root or root in found else f"{first} ({root})"
