"""Hostile input for the decoders: good rows with extreme values, records built to be malformed,
and raw garbage, written as JSON or CSV lines or a Parquet table (`tests.spark.decoded` checks
what a decoder made of them).

A good row must come out of the decoder ok and exactly as generated. A built record (`Built`)
must come out malformed, with a reason of its kind. Garbage may come out as anything but must
not fail the read or change a good row. Good rows have ids from `GOOD_ID` on; every built
record carries its mark (`MARK` + a number) in its id or its string, whichever it leaves intact.
"""

from __future__ import annotations

import json
import math
import os
import typing as t
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from streamjoin.runtime.batch.intake import NOT_UTF8, OUT_OF_RANGE

EXAMPLES_ENV = "STREAMJOIN_FUZZ_EXAMPLES"
"""Hostile inputs per decoder: the long mode sets it (e.g. 10000); CI runs `CI_INPUTS`."""
CI_INPUTS = 200
HOSTILE_PER_EXAMPLE = 40
"""Hostile inputs (built records and garbage) in each generated file."""


def fuzz_settings() -> settings:
    """Enough examples for `EXAMPLES_ENV` hostile inputs (`CI_INPUTS` without it), each
    example one file of `HOSTILE_PER_EXAMPLE` of them plus good rows. No shrinking: a failure
    names the record it is about, and each shrinking step would be a Spark read."""
    inputs = int(os.environ.get(EXAMPLES_ENV, CI_INPUTS))
    return settings(
        max_examples=-(-inputs // HOSTILE_PER_EXAMPLE),
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


GOOD_ID = 7_000_000_000_000_000_000
MARK = 8_000_000_000_000_000_000
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
FIRST = datetime(1, 1, 1, tzinfo=UTC)
LAST = datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)
DECIMAL_TYPE = (12, 3)

COLUMNS = ("id", "n", "x", "d", "s", "b", "ts")
"""The fuzzed stream's columns, in CSV order."""


def job_text(fmt: str, path: str, options: str = "") -> str:
    """A job over one stream F of every declared type (and a second one for a query to plan)."""
    p, s = DECIMAL_TYPE
    return f"""
CREATE STREAM F (id BIGINT, n INT, x DOUBLE, d DECIMAL({p},{s}), s STRING, b BOOLEAN, ts TIMESTAMP,
                 WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
  WITH (format = '{fmt}', path = '{path}'{options});
CREATE STREAM G (id BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
  WITH (format = 'json', path = '{path}-unused');
CREATE SINK o WITH (format = 'json', path = '{path}-out');
INSERT INTO o SELECT f.id AS i FROM F f JOIN G g ON f.id = g.id
  AND g.ts BETWEEN f.ts - INTERVAL '1' SECOND AND f.ts + INTERVAL '1' SECOND;
"""


@dataclass(frozen=True)
class Good:
    """A row every decoder must return ok and unchanged."""

    id: int
    n: int | None
    x: float | None
    d: Decimal | None
    s: str | None
    b: bool | None
    ts: datetime


@dataclass(frozen=True)
class Built:
    """A record made malformed on purpose; `reason` is the dead-letter reason it must get
    (None: any reason)."""

    mark: int
    line: bytes
    reason: str | None


Garbage = bytes
Record = Good | Built | Garbage

UNPARSABLE = "unparsable record or wrong type"
NULL_TS = "null event time"


def micros(ts: datetime) -> int:
    """`ts` in epoch microseconds, exactly."""
    return (ts - EPOCH) // timedelta(microseconds=1)


def _text(csv: bool, stored: bool) -> st.SearchStrategy[str]:
    # Where a reader decodes text (CSV, JSON, Kafka's decoders), U+FFFD marks its decoding loss
    # (malformed by design); a Parquet file's strings are stored, where it is a character like
    # any other. CSV lines cannot hold line breaks.
    banned = ("" if stored else "\ufffd") + ("\n\r" if csv else "")
    short = st.text(
        st.characters(blacklist_categories=["Cs"], blacklist_characters=banned), max_size=30
    )
    huge = short.filter(bool).flatmap(lambda s: st.integers(1, 200_000 // len(s)).map(s.__mul__))
    if stored:  # (one that holds it, every example)
        return st.one_of(short, huge, st.just("sent \ufffd as is"))
    if not csv:
        return st.one_of(short, huge)
    # An empty field reads as NULL; Spark's CSV parser drops NUL from a field with a quote in it.
    return st.one_of(short, huge).filter(lambda s: s != "" and not ("\x00" in s and '"' in s))


def good_rows(csv: bool, stored: bool = False) -> st.SearchStrategy[list[Good]]:
    """Good rows with extreme values (ids filled in by `number`); `stored`: for a Parquet file,
    whose strings are not decoded."""
    p, s = DECIMAL_TYPE
    bound = Decimal(10 ** (p - s)) - Decimal(1).scaleb(-s)
    row = st.builds(
        Good,
        id=st.just(0),
        n=st.none() | st.integers(-(2**31), 2**31 - 1),
        x=st.none() | st.floats(allow_nan=True, allow_infinity=True),
        d=st.none() | st.decimals(-bound, bound, places=s, allow_nan=False),
        s=st.none() | _text(csv, stored),
        b=st.none() | st.booleans(),
        ts=st.datetimes(FIRST.replace(tzinfo=None), LAST.replace(tzinfo=None)).map(
            lambda d: d.replace(tzinfo=UTC)
        ),
    )
    return st.lists(row, min_size=1, max_size=20)


def number(rows: list[Good]) -> list[Good]:
    """`rows` with ids `GOOD_ID`, `GOOD_ID` + 1, ..."""
    return [Good(GOOD_ID + i, r.n, r.x, r.d, r.s, r.b, r.ts) for i, r in enumerate(rows)]


def garbage() -> st.SearchStrategy[bytes]:
    """Raw lines: bytes, text, and JSON-looking soup (no line breaks: one record each)."""
    soup = st.lists(
        st.sampled_from(["{", "}", "[", "]", '"', ":", ",", "null", "1e999", '"ts"', '"id"',
                         "NaN", "\\", "'", " ", "-", "9" * 30, "true", "\\u0000", "\x00"]),
        max_size=30,
    ).map("".join)  # fmt: skip
    raw = st.one_of(
        st.binary(max_size=80), st.text(max_size=80).map(str.encode), soup.map(str.encode)
    )
    return raw.map(lambda b: b.replace(b"\n", b" ").replace(b"\r", b" ")).filter(bool)


_TS = '"2026-01-01T00:00:00"'
_BAD_UTF8 = (b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80")
"""Bytes that are not UTF-8. (Not an overlong form such as C0 AF: Spark's JSON parser takes it
for the character it spells, docs/hostile-input.md.)"""
_DEEP = "[" * 3000 + "]" * 3000
JSON_CORRUPTIONS: dict[str, list[tuple[str, str | None]]] = {
    "id": [("1" * 25, UNPARSABLE), ("9223372036854775808", UNPARSABLE), ("1.5", UNPARSABLE),
           ('"12"', UNPARSABLE), ("true", UNPARSABLE), ('{"a": 1}', UNPARSABLE),
           (_DEEP, UNPARSABLE), ("1" + "0" * 2000, UNPARSABLE)],
    "n": [("2147483648", UNPARSABLE), ("-2147483649", UNPARSABLE), ("1.0", UNPARSABLE),
          ('"1"', UNPARSABLE), ("[]", UNPARSABLE)],
    "x": [('"abc"', UNPARSABLE), ("true", UNPARSABLE), ("[1.0]", UNPARSABLE),
          ('"1.5"', UNPARSABLE), ("0." + "1" * 2000, UNPARSABLE)],
    "d": [("1234567890.5", UNPARSABLE), ('"abc"', UNPARSABLE), ("[1]", UNPARSABLE),
          ("1e400", UNPARSABLE)],
    "b": [('"true"', UNPARSABLE), ("1", UNPARSABLE), ("[]", UNPARSABLE)],
    "ts": [('"2026-13-01T00:00:00"', UNPARSABLE), ('"garbage"', UNPARSABLE), ("[]", UNPARSABLE),
           ('"+10000-01-01T00:00:00"', OUT_OF_RANGE), ('"0000-12-31T23:59:59"', OUT_OF_RANGE),
           ('"-9999-01-01T00:00:00"', OUT_OF_RANGE), ("null", NULL_TS), ("1e20", None)],
}  # fmt: skip
"""Per column, values of a JSON record that make it malformed, with the reason each must get."""
CSV_CORRUPTIONS: dict[str, list[tuple[str, str | None]]] = {
    "id": [("abc", UNPARSABLE), ("9223372036854775808", UNPARSABLE), ("1.5", UNPARSABLE),
           (" 5 ", UNPARSABLE), ("1" + "0" * 2000, UNPARSABLE)],
    "n": [("2147483648", UNPARSABLE), ("1.0", UNPARSABLE), ("x", UNPARSABLE)],
    "x": [("abc", UNPARSABLE), ("0x10", UNPARSABLE), ("1.5.5", UNPARSABLE)],
    "d": [("1234567890.5", UNPARSABLE), ("abc", UNPARSABLE)],
    "b": [("yes", UNPARSABLE), ("tru", UNPARSABLE)],
    "ts": [("2026-13-01T00:00:00", UNPARSABLE), ("garbage", UNPARSABLE),
           ("+10000-01-01T00:00:00", OUT_OF_RANGE), ("", NULL_TS)],
}  # fmt: skip
"""Per column, values of a CSV record that make it malformed, with the reason each must get."""


def _json_line(fields: dict[str, str]) -> bytes:
    return ("{" + ", ".join(f'"{k}": {v}' for k, v in fields.items()) + "}").encode()


def _csv_line(fields: dict[str, str]) -> bytes:
    return ",".join(fields[c] for c in COLUMNS).encode()


def built_json(mark: int, draw: st.DrawFn) -> Built:
    """A JSON record with one hostile part: a wrong value, invalid UTF-8, a missing event time,
    a cut, or not an object."""
    fields = {"id": str(mark), "n": "1", "x": "1.5", "d": "1.5", "s": f'"m{mark}"', "b": "true"}
    fields["ts"] = _TS
    how = draw(st.sampled_from(["value", "utf8", "missing ts", "cut", "scalar"]))
    if how == "value":
        column = draw(st.sampled_from(sorted(JSON_CORRUPTIONS)))
        value, reason = draw(st.sampled_from(JSON_CORRUPTIONS[column]))
        return Built(mark, _json_line({**fields, column: value}), reason)
    if how == "utf8":
        line = _json_line({**fields, "s": '"bad@"'})
        return Built(mark, line.replace(b"@", draw(st.sampled_from(_BAD_UTF8))), NOT_UTF8)
    if how == "missing ts":
        del fields["ts"]
        return Built(mark, _json_line(fields), NULL_TS)
    if how == "cut":
        line = _json_line(fields)
        at = draw(st.integers(line.index(b","), len(line) - 1))
        return Built(mark, line[:at], UNPARSABLE)
    return Built(mark, draw(st.sampled_from([f'"m{mark}"', f"{mark}"])).encode(), UNPARSABLE)


def built_csv(mark: int, draw: st.DrawFn) -> Built:
    """A CSV record with one hostile part: a wrong value, invalid UTF-8, an open quote, too few
    or too many fields."""
    fields = {"id": str(mark), "n": "1", "x": "1.5", "d": "1.5", "s": f"m{mark}", "b": "true"}
    fields["ts"] = _TS.strip('"')
    how = draw(st.sampled_from(["value", "utf8", "open quote", "few", "many"]))
    if how == "value":
        column = draw(st.sampled_from(sorted(CSV_CORRUPTIONS)))
        value, reason = draw(st.sampled_from(CSV_CORRUPTIONS[column]))
        return Built(mark, _csv_line({**fields, column: value}), reason)
    if how == "utf8":
        line = _csv_line({**fields, "s": "bad@"})
        return Built(mark, line.replace(b"@", draw(st.sampled_from(_BAD_UTF8))), NOT_UTF8)
    if how == "open quote":
        return Built(mark, _csv_line({**fields, "s": '"open'}), UNPARSABLE)
    line = _csv_line(fields)
    if how == "few":
        cut = draw(st.integers(2, len(COLUMNS) - 1))
        return Built(mark, b",".join(line.split(b",")[:cut]), UNPARSABLE)
    return Built(mark, line + b",extra", UNPARSABLE)


def json_good(r: Good, draw: st.DrawFn) -> bytes:
    """`r` as a JSON line (non-ASCII raw or escaped, event time with or without a zone)."""
    ascii_only = draw(st.booleans())
    ts = r.ts.isoformat() if draw(st.booleans()) else r.ts.replace(tzinfo=None).isoformat()
    fields = {
        "id": str(r.id),
        "n": json.dumps(r.n),
        "x": json.dumps(r.x),
        "d": "null" if r.d is None else format(r.d, "f"),
        "s": json.dumps(r.s, ensure_ascii=ascii_only),
        "b": json.dumps(r.b),
        "ts": json.dumps(ts),
    }
    return _json_line(fields)


def csv_good(r: Good) -> bytes:
    """`r` as a CSV line (the stream reads with ``escape = '"'``: quotes doubled)."""
    x = r.x
    if x is None:
        xs = ""
    elif math.isnan(x):
        xs = "NaN"
    elif math.isinf(x):
        xs = "Inf" if x > 0 else "-Inf"
    else:
        xs = repr(x)
    fields = {
        "id": str(r.id),
        "n": "" if r.n is None else str(r.n),
        "x": xs,
        "d": "" if r.d is None else format(r.d, "f"),
        "s": "" if r.s is None else '"' + r.s.replace('"', '""') + '"',
        "b": "" if r.b is None else str(r.b).lower(),
        "ts": r.ts.replace(tzinfo=None).isoformat(),
    }
    return _csv_line(fields)


@st.composite
def hostile_file(draw: st.DrawFn, fmt: str) -> tuple[list[Record], bytes]:
    """`HOSTILE_PER_EXAMPLE` hostile records (built ones and garbage) and good rows, shuffled,
    and the file's bytes."""
    csv = fmt == "csv"
    goods: list[Record] = list(number(draw(good_rows(csv))))
    hostile: list[Record] = []
    for i in range(HOSTILE_PER_EXAMPLE):
        if draw(st.integers(0, 3)) == 0:
            hostile.append(draw(garbage()))
        else:
            hostile.append((built_csv if csv else built_json)(MARK + i, draw))
    records = draw(st.permutations(goods + hostile))
    lines = []
    for r in records:
        if isinstance(r, Good):
            lines.append(csv_good(r) if csv else json_good(r, draw))
        elif isinstance(r, Built):
            lines.append(r.line)
        else:
            lines.append(r)
    return records, b"\n".join(lines) + b"\n"


@st.composite
def hostile_table(draw: st.DrawFn) -> tuple[list[Record], t.Any]:
    """A Parquet table of good rows and `HOSTILE_PER_EXAMPLE` hostile ones (a NULL event time,
    one outside Spark's range, a string that is not UTF-8), shuffled."""
    import pyarrow as pa

    goods: list[Record] = list(number(draw(good_rows(csv=False, stored=True))))
    hostile: list[Record] = []
    rows: dict[int, dict[str, t.Any]] = {}
    low, high = micros(FIRST), micros(LAST)
    for i in range(HOSTILE_PER_EXAMPLE):
        mark = MARK + i
        row: dict[str, t.Any] = {"id": mark, "s": f"m{mark}".encode(), "ts": micros(FIRST)}
        how = draw(st.sampled_from(["null ts", "early", "late", "utf8"]))
        if how == "null ts":
            row["ts"], reason = None, NULL_TS
        elif how == "utf8":
            row["s"], reason = b"bad" + draw(st.sampled_from(_BAD_UTF8)), NOT_UTF8
        else:
            far = (
                st.integers(-(2**63), low - 1)
                if how == "early"
                else st.integers(high + 1, 2**63 - 1)
            )
            row["ts"], reason = draw(far), OUT_OF_RANGE
        rows[mark] = row
        hostile.append(Built(mark, b"", reason))
    for r in goods:
        assert isinstance(r, Good)
        text = None if r.s is None else r.s.encode()
        rows[r.id] = {
            "id": r.id,
            "n": r.n,
            "x": r.x,
            "d": r.d,
            "s": text,
            "b": r.b,
            "ts": micros(r.ts),
        }
    records = draw(st.permutations(goods + hostile))
    order = [r.id if isinstance(r, Good) else t.cast("Built", r).mark for r in records]
    p, s = DECIMAL_TYPE
    types = {"id": pa.int64(), "n": pa.int32(), "x": pa.float64(), "d": pa.decimal128(p, s),
             "b": pa.bool_(), "ts": pa.int64()}  # fmt: skip
    columns = {c: pa.array([rows[k].get(c) for k in order], kind) for c, kind in types.items()}
    columns["ts"] = columns["ts"].view(pa.timestamp("us", tz="UTC"))
    # A view, not a cast: a cast would refuse the bytes that are not UTF-8.
    columns["s"] = pa.array([rows[k].get("s") for k in order], pa.binary()).view(pa.string())
    return records, pa.table({c: columns[c] for c in COLUMNS})
