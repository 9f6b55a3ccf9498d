"""A job over JSON, CSV and Parquet streams whose files mix hostile records with good rows of
extreme values: the output is the reference's over the good rows alone, and every hostile
record is dead-lettered once, with its reason."""

from __future__ import annotations

import json
import math
import os
import typing as t
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from streamjoin.errors import StreamJoinError
from streamjoin.reference import normalize, run_reference
from streamjoin.runtime.batch.intake import NOT_UTF8, OUT_OF_RANGE
from streamjoin.runtime.engine import Engine
from streamjoin.sql import parse_job
from tests.spark.decoded import decode
from tests.spark.harness import read_sink
from tests.spark.hostile import NULL_TS, UNPARSABLE
from tests.spark.streams import make_batches

if t.TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from pyspark.sql import SparkSession

STREAMS = ("J", "C", "P")
FORMATS = {"J": "json", "C": "csv", "P": "parquet"}
_EPOCH = 1_700_000_000
_FAR = 20_000 * 365 * 86_400 * 1_000_000
"""Microseconds from 1970 to about the year 21970."""
_US = timedelta(microseconds=1)


def _job(root: Path) -> str:
    streams = [
        f"CREATE STREAM {s} (id BIGINT, k BIGINT, x DOUBLE, s STRING, ts TIMESTAMP, "
        "WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (format = "
        f"'{FORMATS[s]}', path = '{root / s}', maxFilesPerTrigger = '1'"
        + (", escape = '\"'" if s == "C" else "")
        + ");"
        for s in STREAMS
    ]
    return "\n".join(
        [
            *streams,
            f"CREATE SINK eq WITH (format = 'parquet', path = '{root / 'out-eq'}');",
            f"CREATE SINK band WITH (format = 'parquet', path = '{root / 'out-band'}');",
            "INSERT INTO eq SELECT j.id AS jid, c.id AS cid FROM J j JOIN C c ON j.k = c.k "
            "AND c.ts BETWEEN j.ts - INTERVAL '3' SECOND AND j.ts + INTERVAL '3' SECOND;",
            "INSERT INTO band SELECT p.id AS pid, j.id AS jid FROM P p JOIN J j "
            "ON abs(p.x - j.x) <= 2.5 "
            "AND j.ts BETWEEN p.ts - INTERVAL '3' SECOND AND p.ts + INTERVAL '3' SECOND;",
        ]
    )


def _extreme(batches: list[dict[str, list[dict[str, object]]]]) -> None:
    """Give some good rows NaN, infinities, -0.0 and long or unusual strings."""
    xs = [math.nan, math.inf, -math.inf, -0.0, 5e-324, 1.7976931348623157e308]
    texts = ["", 'a "quoted", comma', "ünï©ødé ✓ \U0001f600", "\\", "null", "x" * 100_000]
    n = 0
    for batch in batches:
        for rows in batch.values():
            for row in rows:
                n += 1
                if n % 5 == 0:
                    row["x"] = xs[n % len(xs)]
                if n % 7 == 0:
                    row["s"] = texts[n % len(texts)]


def _hostile(ts: datetime) -> dict[str, list[tuple[bytes | dict[str, object], str]]]:
    """Per stream, hostile records (a line, or a Parquet row) at event time `ts`, each with the
    reason it must be dead-lettered with."""
    iso = ts.isoformat()
    good = f'"k": 1, "x": 1.0, "s": "p", "ts": "{iso}"'
    deep = "[" * 3000 + "]" * 3000
    return {
        "J": [
            (f'{{"id": "abc", {good}}}'.encode(), UNPARSABLE),
            (f'{{"id": 9223372036854775808, {good}}}'.encode(), UNPARSABLE),
            (f'{{"id": 1, "k": {deep}, "x": 1.0, "ts": "{iso}"}}'.encode(), UNPARSABLE),
            (f'{{"id": 1, "k": 1, "x": "abc", "ts": "{iso}"}}'.encode(), UNPARSABLE),
            (f'{{"id": 1, "k": 1, "s": "\xff\xfe", "ts": "{iso}"}}'.encode("latin-1"), NOT_UTF8),
            (b'{"id": 1, "k": 1, "ts": "+10000-01-01T00:00:00"}', OUT_OF_RANGE),
            (b'{"id": 1, "k": 1, "ts": null}', NULL_TS),
            (f'{{"id": 1, {good}'.encode(), UNPARSABLE),
            (b'"just a string"', UNPARSABLE),
        ],
        "C": [
            (f"abc,1,1.0,p,{iso}".encode(), UNPARSABLE),
            (b"1,1,1.0,p", UNPARSABLE),
            (f"1,1,1.0,p,{iso},extra".encode(), UNPARSABLE),
            (f"1,1,1.0,\xc3,{iso}".encode("latin-1"), NOT_UTF8),
            (b"1,1,1.0,p,+10000-01-01T00:00:00", OUT_OF_RANGE),
            (b"1,1,1.0,p,", NULL_TS),
            (f'1,1,1.0,"open,{iso}'.encode(), UNPARSABLE),
        ],
        "P": [
            ({"id": 1, "k": 1, "x": 1.0, "s": "p", "ts": None}, NULL_TS),
            ({"id": 2, "k": 1, "x": 1.0, "s": "p", "ts": _FAR}, OUT_OF_RANGE),
            ({"id": 3, "k": 1, "x": 1.0, "s": "p", "ts": -_FAR}, OUT_OF_RANGE),
            ({"id": 4, "k": 1, "x": 1.0, "s": b"\xed\xa0\x80", "ts": 0}, NOT_UTF8),
        ],
    }


def _csv_value(v: object) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        if math.isinf(v):
            return "Inf" if v > 0 else "-Inf"
        return "NaN" if math.isnan(v) else repr(v)
    if isinstance(v, str):
        return '"' + v.replace('"', '""') + '"'
    if isinstance(v, datetime):
        return v.isoformat()
    return str(v)


def _write(root: Path, batches: Sequence[Mapping[str, Sequence[Mapping[str, object]]]]) -> None:
    """Batch i of each stream as file ``part-<i>``, with the i-th share of its hostile records."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    hostile = _hostile(datetime(2026, 1, 1, 0, 0, 1))
    cols = ("id", "k", "x", "s", "ts")
    for i, batch in enumerate(batches):
        for s in STREAMS:
            folder = root / s
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"part-{i:05d}.{FORMATS[s]}"
            rows = list(batch[s])
            bad = [rec for j, (rec, _) in enumerate(hostile[s]) if j % len(batches) == i]
            if s == "P":
                epoch = datetime(1970, 1, 1)
                table = [dict(r, ts=(t.cast("datetime", r["ts"]) - epoch) // _US) for r in rows]
                table += [t.cast("dict[str, object]", b) for b in bad]
                arrays = {
                    "id": pa.array([r["id"] for r in table], pa.int64()),
                    "k": pa.array([r["k"] for r in table], pa.int64()),
                    "x": pa.array([r["x"] for r in table], pa.float64()),
                    "s": pa.array(
                        [r["s"].encode() if isinstance(r["s"], str) else r["s"] for r in table],
                        pa.binary(),
                    ).view(pa.string()),
                    "ts": pa.array([r["ts"] for r in table], pa.int64()).view(
                        pa.timestamp("us", tz="UTC")
                    ),
                }
                pq.write_table(pa.table(arrays), path)
            else:
                if s == "J":
                    lines = [json.dumps({**r, "ts": _iso(r["ts"])}).encode() for r in rows]
                else:
                    lines = [",".join(_csv_value(r[c]) for c in cols).encode() for r in rows]
                lines += [t.cast("bytes", b) for b in bad]
                path.write_bytes(b"\n".join(lines) + b"\n")
            os.utime(path, (_EPOCH + i, _EPOCH + i))


def _iso(ts: object) -> str:
    return t.cast("datetime", ts).isoformat()


def _dead_letters(folder: Path) -> list[dict[str, t.Any]]:
    return [
        json.loads(line)
        for part in sorted(folder.glob("batch=*/part-*.json"))
        for line in part.read_text(encoding="utf-8", errors="replace").splitlines()
        if line.strip()
    ]


def test_hostile_records_leave_the_good_rows_result_alone(
    spark: SparkSession, tmp_path: Path
) -> None:
    batches = make_batches(11, streams=STREAMS, n_batches=3, rows_per_batch=6)
    _extreme(batches)
    for batch in batches:  # (CSV cannot tell an empty string from NULL)
        for row in batch["C"]:
            row["s"] = row["s"] or None
    _write(tmp_path, batches)
    text = _job(tmp_path)
    job = parse_job(text)
    ckpt = tmp_path / "ckpt"
    summary = Engine(spark).run(job, checkpoint=str(ckpt), once=True, progress=False)

    expected = run_reference(job, batches)
    assert any(expected.outputs[q] for q in ("q1", "q2"))
    for q, sink, cols in (("q1", "eq", ("jid", "cid")), ("q2", "band", ("pid", "jid"))):
        assert normalize(read_sink(spark, job, sink, cols)) == normalize(expected.outputs[q])
    hostile = _hostile(datetime(2026, 1, 1))
    for s in STREAMS:
        dead = _dead_letters(ckpt / "deadletter" / s)
        assert summary.malformed.get(s, 0) == len(hostile[s])
        assert summary.late.get(s, 0) == len(expected.late[s])
        got = sorted(str(r["reason"]) for r in dead if r["kind"] == "malformed")
        assert got == sorted(reason for _, reason in hostile[s])
        assert all(r["record"] for r in dead)


def test_a_parquet_file_of_another_type_stops_the_run_naming_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    batches = make_batches(3, streams=STREAMS, n_batches=1, rows_per_batch=4)
    _write(tmp_path, batches)
    wrong = pa.table({"id": ["a"], "k": [1], "x": [1.0], "s": ["p"], "ts": [datetime(2026, 1, 1)]})
    pq.write_table(wrong, tmp_path / "P" / "wrong.parquet")
    job = parse_job(_job(tmp_path))
    with pytest.raises(StreamJoinError) as info:
        Engine(spark).run(job, checkpoint=str(tmp_path / "ckpt"), once=True, progress=False)
    message = str(info.value)
    assert "wrong.parquet" in message and "[id]" in message, message
    assert "bigint" in message.lower(), message


def test_parquet_columns_missing_extra_or_narrower(spark: SparkSession, tmp_path: Path) -> None:
    """A missing column reads as NULL (the event time's: malformed), an extra one is ignored,
    a narrower integer is widened."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    ts = pa.array([datetime(2026, 1, 1)] * 2, pa.timestamp("us", tz="UTC"))
    files = {
        "missing.parquet": pa.table({"id": [7_000_000_000_000_000_000, 1], "ts": ts}),
        "no-ts.parquet": pa.table({"id": pa.array([5, 6], pa.int64()), "s": ["m5", "m6"]}),
        "extra.parquet": pa.table(
            {"id": [3, 4], "n": pa.array([1, 2], pa.int32()), "zz": ["a", "b"], "ts": ts}
        ),
        "narrow.parquet": pa.table({"id": pa.array([2**31 - 1, -(2**31)], pa.int32()), "ts": ts}),
    }
    for name, table in files.items():
        pq.write_table(table, tmp_path / name)
    got = {r["id"]: r for r in decode(spark, "parquet", str(tmp_path))}
    assert sorted(got) == sorted([7_000_000_000_000_000_000, 1, 5, 6, 3, 4, 2**31 - 1, -(2**31)])
    assert got[1]["status"] == "ok" and got[1]["n"] is None and got[1]["x"] is None
    assert (got[5]["status"], got[5]["reason"], got[5]["s"]) == ("malformed", NULL_TS, "m5")
    assert (got[4]["status"], got[4]["n"]) == ("ok", 2)
    assert got[2**31 - 1]["status"] == "ok"
