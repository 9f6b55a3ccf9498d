"""CREATE STREAM and CREATE SINK: types, watermarks, options and their errors."""

from __future__ import annotations

import pytest

from streamjoin.errors import JobError
from streamjoin.model import Column, SinkDef, SqlType, StreamDef, Watermark
from streamjoin.sql import parse_job


def _stream(text: str) -> StreamDef:
    job = parse_job(text)
    assert len(job.streams) == 1
    return job.streams[0]


def _error(text: str) -> JobError:
    with pytest.raises(JobError) as info:
        parse_job(text, source="job.sql")
    assert info.value.source == "job.sql"
    return info.value


def test_every_type() -> None:
    stream = _stream(
        "CREATE STREAM s (a BIGINT, b INT, c INTEGER, d DOUBLE, e STRING, f BOOLEAN,\n"
        "  g TIMESTAMP, h DECIMAL(10, 2), i decimal(38,0), j bigint)\n"
        "WITH (format = 'rate')"
    )
    assert stream.columns == (
        Column("a", SqlType("BIGINT")),
        Column("b", SqlType("INT")),
        Column("c", SqlType("INT")),
        Column("d", SqlType("DOUBLE")),
        Column("e", SqlType("STRING")),
        Column("f", SqlType("BOOLEAN")),
        Column("g", SqlType("TIMESTAMP")),
        Column("h", SqlType("DECIMAL", 10, 2)),
        Column("i", SqlType("DECIMAL", 38, 0)),
        Column("j", SqlType("BIGINT")),
    )
    assert stream.watermark is None
    assert stream.format == "rate"
    assert stream.options == ()
    assert stream.line == 1


def test_quoted_and_keyword_column_names() -> None:
    stream = _stream(
        "CREATE STREAM `my stream` (`my col` BIGINT, timestamp TIMESTAMP, value BIGINT)"
        " WITH (format = 'rate')"
    )
    assert stream.name == "my stream"
    assert [c.name for c in stream.columns] == ["my col", "timestamp", "value"]


@pytest.mark.parametrize(
    ("interval", "delay_us"),
    [
        ("'3' SECOND", 3_000_000),
        ("'3' SECONDS", 3_000_000),
        ("'1.5' second", 1_500_000),
        ("'250' MILLISECOND", 250_000),
        ("'1.5' MILLISECONDS", 1_500),
        ("'2' MINUTE", 120_000_000),
        ("'2' MINUTES", 120_000_000),
        ("'1' HOUR", 3_600_000_000),
        ("'3' HOURS", 10_800_000_000),
        ("'1' DAY", 86_400_000_000),
        ("'2' DAYS", 172_800_000_000),
        ("'0' SECOND", 0),
        ("5 SECONDS", 5_000_000),
        ("'10 minutes'", 600_000_000),
    ],
)
def test_watermark_units(interval: str, delay_us: int) -> None:
    stream = _stream(
        f"CREATE STREAM s (id BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL {interval})"
        " WITH (format = 'rate')"
    )
    assert stream.watermark == Watermark("ts", delay_us)


def test_watermark_without_delay_and_declared_spelling() -> None:
    stream = _stream(
        "CREATE STREAM s (WATERMARK FOR EventTime AS eventtime, eventTime TIMESTAMP)"
        " WITH (format = 'rate')"
    )
    assert stream.watermark == Watermark("eventTime", 0)
    assert stream.event_time == "eventTime"


def test_column_called_watermark() -> None:
    stream = _stream("CREATE STREAM s (watermark BIGINT) WITH (format = 'rate')")
    assert stream.columns == (Column("watermark", SqlType("BIGINT")),)


def test_options_dotted_quoted_numbers_booleans() -> None:
    stream = _stream(
        "CREATE STREAM k (v STRING) WITH (\n"
        "  FORMAT = 'KAFKA',\n"
        "  'kafka.bootstrap.servers' = 'localhost:9092',\n"
        '  subscribe = "topic",\n'
        "  maxOffsetsPerTrigger = 100,\n"
        "  failOnDataLoss = false,\n"
        "  a.b.c = -1.5,\n"
        "  quote = 'it''s'\n"
        ")"
    )
    assert stream.format == "kafka"
    assert stream.options == (
        ("kafka.bootstrap.servers", "localhost:9092"),
        ("subscribe", "topic"),
        ("maxoffsetspertrigger", "100"),
        ("failondataloss", "false"),
        ("a.b.c", "-1.5"),
        ("quote", "it's"),
    )
    assert stream.option("subscribe") == "topic"


@pytest.mark.parametrize("fmt", ["json", "csv", "parquet"])
def test_file_formats_keep_path(fmt: str) -> None:
    stream = _stream(
        f"CREATE STREAM s (id BIGINT) WITH (format = '{fmt}', path = 'in/s', "
        "maxFilesPerTrigger = '1', deadletter = 'dl/s')"
    )
    assert stream.format == fmt
    assert stream.options == (("path", "in/s"), ("maxfilespertrigger", "1"), ("deadletter", "dl/s"))


def test_sinks() -> None:
    job = parse_job(
        "CREATE SINK out WITH (format = 'parquet', path = 'out/x');\n"
        "create sink shown with (format = 'Console', numRows = 5);\n"
        "CREATE SINK c WITH (format = 'csv', path = 'o/c', header = true)"
    )
    assert job.sinks == (
        SinkDef("out", "parquet", (("path", "out/x"),), line=1),
        SinkDef("shown", "console", (("numrows", "5"),), line=2),
        SinkDef("c", "csv", (("path", "o/c"), ("header", "true")), line=3),
    )
    assert job.sink("shown").option("numrows") == "5"


def test_comments_and_empty_statements() -> None:
    job = parse_job(
        "-- a job\n"
        "/* streams /* nested */ first */\n"
        ";;\n"
        "CREATE SINK s WITH (format = 'console'); -- trailing\n"
        ";\n"
        "CREATE SINK t WITH (format = 'console' /* ; */);\n"
        "-- the end"
    )
    assert [(s.name, s.line) for s in job.sinks] == [("s", 4), ("t", 6)]


# Errors: each text is written so that the expected line and column can be read off it.


def test_unknown_type() -> None:
    err = _error("CREATE STREAM s (id BIGINT,\n  x FLOAT) WITH (format = 'rate')")
    assert (err.line, err.col, err.text) == (2, 5, "FLOAT")
    assert "unknown type 'FLOAT'" in err.message
    assert "BIGINT, INT (or INTEGER), DOUBLE, STRING, BOOLEAN, TIMESTAMP, DECIMAL(p,s)" in (
        err.message
    )


@pytest.mark.parametrize(
    ("decl", "text", "fragment"),
    [
        ("DECIMAL", "DECIMAL", "DECIMAL needs a precision and a scale"),
        ("DECIMAL(40,2)", "DECIMAL(40,2)", "need 1 <= p <= 38"),
        ("DECIMAL(5,6)", "DECIMAL(5,6)", "need 1 <= p <= 38"),
        ("INT(3)", "INT(", "INT takes no precision or scale"),
    ],
)
def test_bad_type_arguments(decl: str, text: str, fragment: str) -> None:
    err = _error(f"CREATE STREAM s (x {decl}) WITH (format = 'rate')")
    assert (err.line, err.col, err.text) == (1, 20, text)
    assert fragment in err.message


def test_duplicate_column() -> None:
    err = _error("CREATE STREAM s (id BIGINT,\n  ID STRING) WITH (format = 'rate')")
    assert (err.line, err.col, err.text) == (2, 3, "ID")
    assert "declared twice" in err.message


def test_watermark_on_unknown_column() -> None:
    err = _error("CREATE STREAM s (id BIGINT,\n  WATERMARK FOR tz AS tz) WITH (format = 'rate')")
    assert (err.line, err.col, err.text) == (2, 17, "tz")
    assert "no such column" in err.message


def test_watermark_on_non_timestamp() -> None:
    err = _error("CREATE STREAM s (id BIGINT,\n  WATERMARK FOR id AS id) WITH (format = 'rate')")
    assert (err.line, err.col, err.text) == (2, 17, "id")
    assert "needs a TIMESTAMP column, not BIGINT" in err.message


def test_two_watermarks() -> None:
    err = _error(
        "CREATE STREAM s (ts TIMESTAMP, WATERMARK FOR ts AS ts,\n"
        "  WATERMARK FOR ts AS ts) WITH (format = 'rate')"
    )
    assert (err.line, err.col, err.text) == (2, 3, "WATERMARK")
    assert "at most one" in err.message


@pytest.mark.parametrize(
    ("interval", "col", "text", "fragment"),
    [
        ("'2' WEEK", 41, "WEEK", "unknown interval unit 'WEEK'"),
        ("'x' SECOND", 37, "'x'", "must be a number >= 0"),
        ("'-1' SECOND", 37, "'-1'", "must be a number >= 0"),
        ("'0.0001' MILLISECOND", 37, "'0.0001' MILLISECOND", "whole number of microseconds"),
    ],
)
def test_bad_watermark_interval(interval: str, col: int, text: str, fragment: str) -> None:
    err = _error(
        "CREATE STREAM s (ts TIMESTAMP,\n"
        f"  WATERMARK FOR ts AS ts - INTERVAL {interval}) WITH (format = 'rate')"
    )
    assert (err.line, err.col, err.text) == (2, col, text)
    assert fragment in err.message


def test_watermark_must_subtract() -> None:
    err = _error(
        "CREATE STREAM s (ts TIMESTAMP,\n"
        "  WATERMARK FOR ts AS ts + INTERVAL '1' SECOND) WITH (format = 'rate')"
    )
    assert (err.line, err.col, err.text) == (2, 26, "+")


def test_watermark_from_other_column() -> None:
    err = _error(
        "CREATE STREAM s (ts TIMESTAMP, t2 TIMESTAMP,\n"
        "  WATERMARK FOR ts AS t2 - INTERVAL '1' SECOND) WITH (format = 'rate')"
    )
    assert (err.line, err.col, err.text) == (2, 23, "t2")


def test_unknown_stream_format() -> None:
    err = _error("CREATE STREAM s (id BIGINT)\n  WITH (format = 'xml', path = 'p')")
    assert (err.line, err.col, err.text) == (2, 18, "'xml'")
    assert "json, csv, parquet, rate, kafka" in err.message


def test_unknown_sink_format() -> None:
    err = _error("CREATE SINK s\n  WITH (format = 'kafka')")
    assert (err.line, err.col, err.text) == (2, 18, "'kafka'")
    assert "json, parquet, csv, console" in err.message


def test_missing_format() -> None:
    err = _error("CREATE STREAM s (id BIGINT)\n  WITH (path = 'p')")
    assert (err.line, err.col, err.text) == (2, 3, "WITH")
    assert "needs a format" in err.message


def test_missing_with() -> None:
    err = _error("CREATE STREAM s (id BIGINT)")
    assert (err.line, err.col, err.text) == (1, 27, ")")
    assert "expected WITH" in err.message


@pytest.mark.parametrize("head", ["CREATE STREAM s (id BIGINT)", "CREATE SINK s"])
def test_missing_path(head: str) -> None:
    err = _error(f"{head}\n  WITH (format = 'json')")
    assert (err.line, err.col, err.text) == (2, 3, "WITH")
    assert "needs a path" in err.message


def test_empty_path() -> None:
    err = _error("CREATE SINK s\n  WITH (format = 'json', path = '')")
    assert (err.line, err.col, err.text) == (2, 33, "''")


def test_unquoted_value() -> None:
    err = _error("CREATE SINK s\n  WITH (format = json)")
    assert (err.line, err.col, err.text) == (2, 18, "json")
    assert "must be quoted" in err.message


def test_repeated_option() -> None:
    err = _error("CREATE SINK s\n  WITH (format = 'console', FORMAT = 'json')")
    assert (err.line, err.col, err.text) == (2, 29, "FORMAT")


def test_duplicate_stream_and_sink() -> None:
    err = _error(
        "CREATE STREAM s (id BIGINT) WITH (format = 'rate');\n"
        "CREATE STREAM S (id BIGINT) WITH (format = 'rate');"
    )
    assert (err.line, err.col, err.text) == (2, 15, "S")
    assert "stream 'S' is defined twice" in err.message
    err = _error(
        "CREATE SINK o WITH (format = 'console');\nCREATE SINK o WITH (format = 'console');"
    )
    assert (err.line, err.col, err.text) == (2, 13, "o")


def test_stream_and_sink_may_share_a_name() -> None:
    job = parse_job(
        "CREATE STREAM x (id BIGINT) WITH (format = 'rate');\n"
        "CREATE SINK x WITH (format = 'console');"
    )
    assert job.stream("x").name == job.sink("x").name == "x"


def test_missing_semicolon() -> None:
    err = _error("CREATE SINK a WITH (format = 'console')\nCREATE SINK b WITH (format = 'console')")
    assert (err.line, err.col, err.text) == (2, 1, "CREATE")
    assert "is a ';' missing?" in err.message


def test_no_columns() -> None:
    err = _error("CREATE STREAM s () WITH (format = 'rate')")
    assert (err.line, err.col, err.text) == (1, 18, ")")
    assert "expected a column name" in err.message


def test_unknown_statement() -> None:
    err = _error("CREATE SINK o WITH (format = 'console');\n\n  DROP TABLE x;")
    assert (err.line, err.col, err.text) == (3, 3, "DROP")
    assert "expected CREATE STREAM, CREATE SINK or INSERT INTO" in err.message
    err = _error("CREATE TABLE t (id BIGINT)")
    assert (err.line, err.col, err.text) == (1, 8, "TABLE")


def test_unterminated_string_and_comment() -> None:
    err = _error("CREATE SINK o WITH (format = 'console);\nCREATE SINK p")
    assert (err.line, err.col, err.text) == (1, 30, "'console);")
    assert "unterminated string" in err.message
    err = _error("CREATE SINK o WITH (format = 'console');\n  /* never closed")
    assert (err.line, err.col, err.text) == (2, 3, "/*")


@pytest.mark.parametrize("source", ["", ", source = ' '"])
def test_a_python_stream_needs_its_source_class(source: str) -> None:
    err = _error(f"CREATE STREAM s (id BIGINT)\n  WITH (format = 'python'{source})")
    assert (err.line, err.col, err.text) == (2, 3, "WITH")
    assert "source = 'package.module.Class'" in err.message
