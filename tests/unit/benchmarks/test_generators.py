"""The benchmark data generators: Nexmark's event mix and keys, TPC-H's event times, job texts."""

from __future__ import annotations

import os
import typing as t
from datetime import UTC, datetime, timedelta

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
import pyarrow.compute as pc  # type: ignore[import-untyped, unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped, unused-ignore]
import pytest

from benchmarks import nexmark, tpch
from benchmarks.nexmark_queries import QUERIES, nexmark_job, nexmark_query
from streamjoin.plan import plan_job
from streamjoin.sql import parse_job

if t.TYPE_CHECKING:
    from pathlib import Path

    from numpy.typing import NDArray

EVENTS = 20_000
RATE = 1_000.0


def _ints(table: pa.Table, column: str) -> NDArray[np.int64]:
    """A column as int64 (timestamps as microseconds since 1970)."""
    col = table[column]
    if pa.types.is_timestamp(col.type):
        col = col.cast(pa.int64())
    values: NDArray[np.int64] = np.asarray(col.to_numpy(), dtype=np.int64)
    return values


def _event_number(table: pa.Table) -> NDArray[np.int64]:
    """Each row's event number, from its event time (RATE events per second, from BASE_TIME)."""
    since = _ints(table, "dateTime") - tpch.epoch_us(None)
    number: NDArray[np.int64] = np.rint(since * RATE / 1e6).astype(np.int64)
    return number


@pytest.fixture(scope="module")
def nex() -> dict[str, pa.Table]:
    return nexmark.nexmark_tables(EVENTS, seed=3, events_per_second=RATE)


def test_nexmark_proportions(nex: dict[str, pa.Table]) -> None:
    counts = {k: v.num_rows for k, v in nex.items()}
    assert sum(counts.values()) == EVENTS
    blocks = EVENTS / 50
    assert counts == {"person": blocks, "auction": 3 * blocks, "bid": 46 * blocks}
    # A partial block still follows the layout: person first, then auctions, then bids.
    few = {k: v.num_rows for k, v in nexmark.nexmark_tables(55).items()}
    assert few == {"person": 2, "auction": 6, "bid": 47}


def test_nexmark_event_times(nex: dict[str, pa.Table]) -> None:
    seen = np.concatenate([_event_number(table) for table in nex.values()])
    assert np.array_equal(np.sort(seen), np.arange(EVENTS))
    for name, table in nex.items():
        assert np.all(np.diff(_ints(table, "dateTime")) > 0), name
    assert np.all(_event_number(nex["person"]) % 50 == 0)
    assert set(np.unique(_event_number(nex["auction"]) % 50)) == {1, 2, 3}
    ends = _ints(nex["auction"], "expires") - _ints(nex["auction"], "dateTime")
    assert ends.min() >= 1000
    assert ends.max() <= nexmark.MAX_AUCTION_SECONDS * 1_000_000


def test_nexmark_auction_length_is_capped_at_low_rates() -> None:
    auction = nexmark.nexmark_tables(5_000, events_per_second=10.0)["auction"]
    ends = _ints(auction, "expires") - _ints(auction, "dateTime")
    assert ends.max() <= nexmark.MAX_AUCTION_SECONDS * 1_000_000
    assert ends.max() > nexmark.MAX_AUCTION_SECONDS * 900_000  # uniform below the cap


def test_nexmark_keys_refer_to_earlier_events(nex: dict[str, pa.Table]) -> None:
    person, auction, bid = nex["person"], nex["auction"], nex["bid"]
    pid, aid = _ints(person, "id"), _ints(auction, "id")
    assert np.array_equal(pid, nexmark.FIRST_PERSON_ID + np.arange(len(pid)))
    assert np.array_equal(aid, nexmark.FIRST_AUCTION_ID + np.arange(len(aid)))
    # Ids are sequential, so "created earlier" is "the id's creation event is earlier".
    created_p, created_a = _event_number(person), _event_number(auction)
    for table, column, first, created in (
        (auction, "seller", nexmark.FIRST_PERSON_ID, created_p),
        (bid, "bidder", nexmark.FIRST_PERSON_ID, created_p),
        (bid, "auction", nexmark.FIRST_AUCTION_ID, created_a),
    ):
        base0 = _ints(table, column) - first
        assert base0.min() >= 0, column
        assert np.all(created[base0] < _event_number(table)), column
    category = _ints(auction, "category")
    assert set(np.unique(category)) == set(range(10, 15))
    # Hot sellers and auctions: the first id of each batch of 100 carries most of the traffic.
    for table, column, first in (
        (auction, "seller", nexmark.FIRST_PERSON_ID),
        (bid, "auction", nexmark.FIRST_AUCTION_ID),
    ):
        hot = (_ints(table, column) - first) % nexmark.HOT_BATCH == 0
        assert 0.4 < hot.mean() < 0.9, column


def test_nexmark_values(nex: dict[str, pa.Table]) -> None:
    person, auction, bid = nex["person"], nex["auction"], nex["bid"]
    assert set(person["state"].to_pylist()) <= set(nexmark.US_STATES)
    assert set(person["city"].to_pylist()) <= set(nexmark.US_CITIES)
    assert set(bid["channel"].to_pylist()) <= set(nexmark.CHANNELS)
    for email in person["emailAddress"].to_pylist()[:50]:
        local, domain = email.split("@")
        assert 3 <= len(local) <= 6 and domain.endswith(".com")
    assert all(len(c) == 19 and c[4::5] == "   " for c in person["creditCard"].to_pylist())
    assert _ints(bid, "price").min() >= 100
    assert np.all(_ints(auction, "reserve") >= _ints(auction, "initialBid"))


def test_nexmark_schema_and_determinism(nex: dict[str, pa.Table]) -> None:
    # The public suite's views (ddl_views.sql), column for column.
    assert nex["person"].schema.names == [
        "id", "name", "emailAddress", "creditCard", "city", "state", "dateTime", "extra",
    ]  # fmt: skip
    assert nex["auction"].schema.names == [
        "id", "itemName", "description", "initialBid", "reserve", "dateTime", "expires",
        "seller", "category", "extra",
    ]  # fmt: skip
    assert nex["bid"].schema.names == [
        "auction", "bidder", "price", "channel", "url", "dateTime", "extra",
    ]  # fmt: skip
    ts = pa.timestamp("us", tz="UTC")
    assert nex["bid"].schema.field("dateTime").type == ts
    assert nex["auction"].schema.field("seller").type == pa.int64()
    again = nexmark.nexmark_tables(EVENTS, seed=3, events_per_second=RATE)
    assert all(again[k].equals(nex[k]) for k in nex)
    other = nexmark.nexmark_tables(EVENTS, seed=4, events_per_second=RATE)
    assert not other["bid"].equals(nex["bid"])
    assert other["bid"]["dateTime"].equals(nex["bid"]["dateTime"])


def test_nexmark_base_time() -> None:
    naive = nexmark.nexmark_tables(60, base_time=datetime(2025, 3, 1, 12, 0, 0, 7))
    first = naive["person"]["dateTime"][0].as_py()
    assert first == datetime(2025, 3, 1, 12, 0, 0, 7, tzinfo=UTC)
    last = naive["bid"]["dateTime"][-1].as_py()
    assert last - first == timedelta(microseconds=59 * 100)


def test_nexmark_event_sizes(nex: dict[str, pa.Table]) -> None:
    # `extra` pads each event to the generator's average size, give or take 20 %.
    for name, average in (("person", 200), ("auction", 500), ("bid", 100)):
        table = nex[name]
        size = sum(
            pc.binary_length(table[c]).to_numpy() if pa.types.is_string(f.type) else 8
            for c, f in zip(table.column_names, table.schema, strict=True)
        )
        assert abs(np.mean(size) / average - 1) < 0.1, name


@pytest.mark.parametrize("query", QUERIES)
def test_nexmark_jobs_parse_and_plan(query: str) -> None:
    paths = {"person": "/d/person", "auction": "/d/auction", "bid": "/d/b'id"}
    text = nexmark_job(query, paths, "/out", {"maxFilesPerTrigger": "1"})
    job = parse_job(text)
    assert [s.name for s in job.sinks] == ["out"]
    assert all(dict(s.options)["maxfilespertrigger"] == "1" for s in job.streams)
    for edit in QUERIES[query].edits:
        assert edit.why and edit.new in QUERIES[query].ours
    if query == "q8":  # two streams' groups joined on their 10 s window
        (groups,) = job.group_queries
        assert [g.aggregation.window.size_us for g in groups.inputs] == [10_000_000] * 2
        return
    if query == "q7":  # bids joined with their 10 s window's highest price
        (gp,) = plan_job(job).group_queries
        assert gp.rows is not None and (gp.rows.lo_us, gp.rows.hi_us) == (-10_000_000, 0)
        return
    plan = plan_job(job).queries[0]
    assert plan.strategy == "hash"
    window = plan.parts.window
    if query in ("q4", "q9"):  # as published: bids from their auction's start to its expires
        assert window is not None and (window.lo_us, window.hi_us) == (0, None)
        assert [(b.side, b.column) for b in plan.parts.bounds] == [(0, "A.expires")]
        assert QUERIES[query].ours.count("INTERVAL") == 0
        windowed = job.queries[0].windowed
        assert windowed is not None and windowed.window.time == "A.expires"
    else:
        assert window is None  # q3 and q20 join over the whole history


def test_nexmark_unknown_query_names_the_queries_run() -> None:
    with pytest.raises(ValueError, match=r"unknown Nexmark query 'q99'.*q3, q4, q7, q8, q9, q20"):
        nexmark_query("q99")


def test_nexmark_published_answers(nex: dict[str, pa.Table]) -> None:
    # The published text runs in DuckDB as is (the harness's exact answer), with and without
    # our edits alike: on this generator's data the edits change nothing.
    duckdb = pytest.importorskip("duckdb")
    with duckdb.connect() as con:
        for name, table in nex.items():
            con.register(name, table)
        for q in QUERIES.values():
            published = con.execute(f"SELECT * FROM ({q.exact}) ORDER BY ALL").fetchall()
            assert published, q.name
            if q.duckdb is not None:
                continue  # (our text is Flink's, which DuckDB does not read)
            ours = con.execute(f"SELECT * FROM ({q.ours}) ORDER BY ALL").fetchall()
            assert ours == published, q.name
            if q.name == "q9":  # one winning bid per auction that had a bid
                assert len({row[0] for row in ours}) == len(ours)


@pytest.fixture(scope="module")
def tpc() -> dict[str, pa.Table]:
    pytest.importorskip("duckdb")
    pytest.importorskip("duckdb_extension_tpch")
    return tpch.tpch_tables(0.001, span_seconds=10.0)


def test_tpch_counts_match_duckdb(tpc: dict[str, pa.Table]) -> None:
    with tpch.tpch_connection(0.001) as con:
        for name in ("orders", "lineitem"):
            (n,) = con.execute(f"SELECT count(*) FROM {name}").fetchall()[0]
            assert tpc[name].num_rows == n
    assert tpc["orders"].schema.equals(tpch.ORDERS_SCHEMA)
    assert tpc["lineitem"].schema.equals(tpch.LINEITEM_SCHEMA)


def test_tpch_event_times(tpc: dict[str, pa.Table]) -> None:
    orders, items = tpc["orders"], tpc["lineitem"]
    base, n = tpch.epoch_us(None), orders.num_rows
    keys, ts = _ints(orders, "orderkey"), _ints(orders, "ts")
    assert np.all(np.diff(keys) > 0) and np.all(np.diff(ts) > 0)
    expected = base + np.floor(np.arange(n) * 10e6 / n).astype(np.int64)
    assert np.array_equal(ts, expected)
    assert ts.max() < base + 10_000_000
    order_ts = ts[np.searchsorted(keys, _ints(items, "orderkey"))]
    lag = _ints(items, "ts") - order_ts
    assert np.array_equal(lag, _ints(items, "linenumber") * 1000)
    assert lag.min() > 0 and lag.max() < 1_000_000


@pytest.mark.parametrize("query", tpch.QUERIES)
def test_tpch_jobs_parse_and_plan(query: str) -> None:
    text = tpch.tpch_job(query, {"orders": "/o", "lineitem": "/l"}, "/out", {"a.b": "x"})
    plan = plan_job(parse_job(text)).queries[0]
    assert plan.strategy == ("hash" if query == "equi" else "band")
    window = plan.parts.window
    assert window is not None and window.lo_us is not None and window.hi_us is not None


def test_tpch_expected_counts(tpc: dict[str, pa.Table]) -> None:
    # Every item meets its own order, and only it.
    assert tpch.expected_count("equi", tpc) == tpc["lineitem"].num_rows
    assert tpch.expected_count("band", tpc) > 0


def test_tpch_names_the_missing_package(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("duckdb")
    monkeypatch.setattr("glob.glob", lambda _: [])
    with pytest.raises(RuntimeError, match="duckdb-extension-tpch"):
        tpch.tpch_connection(0.001)


def test_a_backlog_rewritten_with_fewer_files_leaves_no_stale_file(tmp_path: Path) -> None:
    """A stale file of an earlier, longer backlog would be read as one more (late) batch."""
    from benchmarks.data import two_streams, write_backlog

    tables = two_streams(400, span_seconds=8.0, keys=50, seed=3)
    write_backlog(str(tmp_path), tables, {"a": "ts", "b": "ts"}, 4)
    backlog = write_backlog(str(tmp_path), tables, {"a": "ts", "b": "ts"}, 3)
    for name, folder in backlog.streams.items():
        files = sorted(os.listdir(folder))
        assert files == [f"part-{i:05d}.parquet" for i in range(3)], name
        rows = sum(pq.read_metadata(os.path.join(folder, f)).num_rows for f in files)
        assert rows == tables[name].num_rows
