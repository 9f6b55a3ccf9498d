"""Nexmark queries as the public suite publishes them, and what our dialect changes in each.

The published text of each query is the SELECT of the suite's Flink SQL (nexmark/nexmark,
``nexmark-flink/src/main/resources/queries/qN.sql``, Apache License 2.0), kept verbatim. What we
run is that text with a short list of edits, each an exact replacement with its reason, so the
differences are listed and nothing else changes. DuckDB computes the exact answer from the
published text itself: the edits must not change the result on the generator's data.
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass

from benchmarks.nexmark import (
    AUCTION_SCHEMA,
    BID_SCHEMA,
    PERSON_SCHEMA,
    TIME_COLUMN,
)
from benchmarks.tpch import job_text, stream_ddl

if t.TYPE_CHECKING:
    from collections.abc import Mapping


@dataclass(frozen=True)
class Edit:
    """Replace `old` (which must occur exactly once) by `new`, because `why`."""

    old: str
    new: str
    why: str


@dataclass(frozen=True)
class NexmarkQuery:
    """One query of the suite: its published SELECT and the edits we run it with."""

    name: str
    streams: tuple[str, ...]
    published: str
    edits: tuple[Edit, ...] = ()
    final: bool = False
    """Whether results wait for the end of input (`--final`): groups closed only then."""
    spark: str | None = None
    """Why Spark's native streaming cannot run it (None: it can, and is the peer)."""
    duckdb: str | None = None
    """The published query in DuckDB's SQL, where DuckDB cannot read the published text."""
    latest_by: tuple[str, ...] = ()
    """An updating result's key: each key's newest row is its answer (none: append-only)."""
    flink_differs: str | None = None
    """Where Flink's SQL means another thing than the published text in DuckDB, Spark and ours
    (a semantic difference): how."""
    flink_exact: str | None = None
    """Flink's answer in DuckDB's SQL where it `flink_differs`."""

    @property
    def exact(self) -> str:
        """The SQL DuckDB computes the exact answer with: the published text where it can."""
        return self.duckdb or self.published

    @property
    def ours(self) -> str:
        """The SELECT streamjoin runs: the published text with every edit applied."""
        text = self.published
        for e in self.edits:
            if text.count(e.old) != 1:
                msg = f"Nexmark {self.name}: edit {e.old!r} must match exactly once"
                raise ValueError(msg)
            text = text.replace(e.old, e.new)
        return text


_Q7 = """SELECT B.auction, B.bidder, B.price, B.dateTime, B.extra
from bid B
JOIN (
  SELECT MAX(price) AS maxprice, window_end as dateTime
  FROM TABLE(
          TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
  GROUP BY window_start, window_end
) B1
ON B.price = B1.maxprice
WHERE B.dateTime BETWEEN B1.dateTime  - INTERVAL '10' SECOND AND B1.dateTime"""

# DuckDB has no TUMBLE: its time_bucket gives the same 10 s windows (aligned to the epoch).
_Q7_DUCKDB = """SELECT B.auction, B.bidder, B.price, B.dateTime, B.extra
FROM bid B
JOIN (
  SELECT MAX(price) AS maxprice,
         time_bucket(INTERVAL '10 seconds', dateTime) + INTERVAL '10 seconds' AS dateTime
  FROM bid GROUP BY time_bucket(INTERVAL '10 seconds', dateTime)
) B1
ON B.price = B1.maxprice
WHERE B.dateTime BETWEEN B1.dateTime - INTERVAL '10 seconds' AND B1.dateTime"""

_Q3 = """SELECT
    P.name, P.city, P.state, A.id
FROM
    auction AS A INNER JOIN person AS P on A.seller = P.id
WHERE
    A.category = 10 and (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA')"""

_Q9 = """SELECT
    id, itemName, description, initialBid, reserve, dateTime, expires, seller, category, extra,
    auction, bidder, price, bid_dateTime, bid_extra
FROM (
   SELECT A.*, B.auction, B.bidder, B.price, B.dateTime AS bid_dateTime, B.extra AS bid_extra,
     ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price DESC, B.dateTime ASC) AS rownum
   FROM auction A, bid B
   WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires
)
WHERE rownum <= 1"""

_Q4 = """SELECT
    Q.category,
    AVG(Q.final)
FROM (
    SELECT MAX(B.price) AS final, A.category
    FROM auction A, bid B
    WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires
    GROUP BY A.id, A.category
) Q
GROUP BY Q.category"""

_Q8 = """SELECT P.id, P.name, P.starttime
FROM (
  SELECT id, name,
        window_start AS starttime,
        window_end AS endtime
  FROM TABLE(
            TUMBLE(TABLE person, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
  GROUP BY id, name, window_start, window_end
) P
JOIN (
  SELECT seller,
        window_start AS starttime,
        window_end AS endtime
  FROM TABLE(
        TUMBLE(TABLE auction, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
  GROUP BY seller, window_start, window_end
) A
ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime"""

# DuckDB has no TUMBLE: its time_bucket gives the same 10 s windows (aligned to the epoch).
_Q8_DUCKDB = """SELECT P.id, P.name, P.starttime
FROM (
  SELECT id, name, time_bucket(INTERVAL '10 seconds', dateTime) AS starttime,
         time_bucket(INTERVAL '10 seconds', dateTime) + INTERVAL '10 seconds' AS endtime
  FROM person GROUP BY ALL
) P
JOIN (
  SELECT seller, time_bucket(INTERVAL '10 seconds', dateTime) AS starttime,
         time_bucket(INTERVAL '10 seconds', dateTime) + INTERVAL '10 seconds' AS endtime
  FROM auction GROUP BY ALL
) A
ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime"""

_Q20 = """SELECT
    auction, bidder, price, channel, url, B.dateTime, B.extra,
    itemName, description, initialBid, reserve, A.dateTime, expires, seller, category, A.extra
FROM
    bid AS B INNER JOIN auction AS A on B.auction = A.id
WHERE A.category = 10"""

_SINK_NAMES_Q4 = "the published sink names the columns (id, final); our sinks take the query's"
_SINK_NAMES = (
    "the published sink names these columns (bid_dateTime, bid_extra, auction_dateTime, "
    "auction_extra); our sinks take the query's names, and two columns of one name are refused"
)

QUERIES: dict[str, NexmarkQuery] = {
    q.name: q
    for q in (
        NexmarkQuery("q3", ("person", "auction"), _Q3),
        NexmarkQuery(
            "q4",
            ("auction", "bid"),
            _Q4,
            edits=(
                Edit("Q.category,", "Q.category AS id,", _SINK_NAMES_Q4),
                Edit("AVG(Q.final)", "AVG(Q.final) AS final", _SINK_NAMES_Q4),
            ),
            final=True,
            spark="Spark refuses an aggregation over an aggregation with no window in every "
            "output mode",
            duckdb=_Q4.replace("Q.category,", "Q.category AS id,").replace(
                "AVG(Q.final)", "AVG(Q.final) AS final"
            ),
            latest_by=("id",),
            flink_differs="Flink's AVG of a BIGINT is a BIGINT, the quotient truncated (Spark's, "
            "DuckDB's and ours a DOUBLE): checked against that answer",
            flink_exact=_Q4.replace("Q.category,", "Q.category AS id,").replace(
                "AVG(Q.final)", "SUM(Q.final) // COUNT(Q.final) AS final"
            ),
        ),
        NexmarkQuery("q7", ("bid",), _Q7, final=True, duckdb=_Q7_DUCKDB),
        NexmarkQuery("q8", ("person", "auction"), _Q8, final=True, duckdb=_Q8_DUCKDB),
        NexmarkQuery(
            "q9",
            ("auction", "bid"),
            _Q9,
            final=True,
            spark="Spark refuses a ROW_NUMBER() over a stream "
            "(NON_TIME_WINDOW_NOT_SUPPORTED_IN_STREAMING)",
        ),
        NexmarkQuery(
            "q20",
            ("auction", "bid"),
            _Q20,
            edits=(
                Edit(
                    "B.dateTime, B.extra",
                    "B.dateTime AS bid_dateTime, B.extra AS bid_extra",
                    _SINK_NAMES,
                ),
                Edit(
                    "A.dateTime, expires, seller, category, A.extra",
                    "A.dateTime AS auction_dateTime, expires, seller, category,"
                    " A.extra AS auction_extra",
                    _SINK_NAMES,
                ),
            ),
        ),
    )
}
"""The queries the harness runs: every join query of the issue (q3, q4, q7, q8, q9, q20)."""

NOT_RUN: dict[str, str] = {}

_SCHEMAS = {"person": PERSON_SCHEMA, "auction": AUCTION_SCHEMA, "bid": BID_SCHEMA}
KEYS: dict[str, tuple[str, ...]] = {"person": ("id",), "auction": ("id",)}
"""Each stream's ``PRIMARY KEY``: the generator gives every person and auction its own id.
q4's and q9's groups per auction are then complete when the watermark passes its expires."""


def nexmark_query(name: str) -> NexmarkQuery:
    """The query called `name`; ValueError naming the ones the harness runs (and why not)."""
    if name in QUERIES:
        return QUERIES[name]
    why = f" ({NOT_RUN[name]})" if name in NOT_RUN else ""
    msg = f"unknown Nexmark query {name!r}{why}; expected one of {', '.join(QUERIES)}"
    raise ValueError(msg)


def nexmark_job(
    name: str, paths: Mapping[str, str], out: str, options: Mapping[str, str] | None = None
) -> str:
    """The job file of Nexmark query `name` over Parquet directories.

    Args:
        name: which query (``q3``, ``q9``, ``q20``).
        paths: directory of each stream the query reads (``person``, ``auction``, ``bid``).
        out: directory of the Parquet sink ``out``.
        options: extra WITH options of every stream, e.g. ``{"maxFilesPerTrigger": "1"}``.
    """
    q = nexmark_query(name)
    ddl = [
        stream_ddl(s, _SCHEMAS[s], TIME_COLUMN, paths[s], options, key=KEYS.get(s, ()))
        for s in q.streams
    ]
    return job_text(f"Nexmark {name}, the published SELECT with its listed edits", ddl, out, q.ours)
