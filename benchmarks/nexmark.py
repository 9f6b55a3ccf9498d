"""Nexmark events (person, auction, bid) as Arrow tables, in the public suite's columns.

The data model follows the reference generator (nexmark/nexmark, ``GeneratorConfig``,
``PersonGenerator``, ``AuctionGenerator``, ``BidGenerator``), vectorised with numpy: event i of
every block of 50 is a person (offset 0), an auction (offsets 1-3) or a bid (offsets 4-49), and
happens at ``base_time + i / events_per_second``. Two deliberate departures keep every join key
valid: the generator's id "leads" (ids of people and auctions not created yet) are dropped, and a
hot bidder is clamped to the last person created; so every seller, bidder and auction referenced by
an event was created by an earlier event.
"""

from __future__ import annotations

import typing as t

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
import pyarrow.compute as pc  # type: ignore[import-untyped, unused-ignore]

from benchmarks.tpch import TS, epoch_us, schema

if t.TYPE_CHECKING:
    from datetime import datetime

    from numpy.typing import NDArray

    Ints = NDArray[np.int64]

FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
NUM_CATEGORIES = 5
PERSON_PROPORTION, AUCTION_PROPORTION, BID_PROPORTION = 1, 3, 46
TOTAL_PROPORTION = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION
# Probabilities (GeneratorConfig): a seller/auction/bidder is hot with probability 1 - 1/ratio.
HOT_SELLERS_RATIO, HOT_AUCTION_RATIO, HOT_BIDDERS_RATIO = 4, 2, 4
# The hot one is the first id of the current batch of this many (the generators' constants).
HOT_BATCH = 100
NUM_ACTIVE_PEOPLE = 1000
NUM_IN_FLIGHT_AUCTIONS = 100
MAX_AUCTION_SECONDS = 10
"""No auction lasts longer, so q9 may bound a bid's time by its auction's plus this."""

US_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
US_CITIES = (
    "Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland",
    "Bend", "Redmond", "Seattle", "Kent", "Cheyenne",
)  # fmt: skip
FIRST_NAMES = (
    "Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter",
)  # fmt: skip
LAST_NAMES = (
    "Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris",
)  # fmt: skip
CHANNELS = ("Google", "Facebook", "Baidu", "Apple")

# The column names of the public suite's views (nexmark/nexmark, ddl_views.sql).
PERSON_SCHEMA = schema(
    "id BIGINT, name STRING, emailAddress STRING, creditCard STRING, city STRING, state STRING,"
    " dateTime TIMESTAMP, extra STRING"
)
AUCTION_SCHEMA = schema(
    "id BIGINT, itemName STRING, description STRING, initialBid BIGINT, reserve BIGINT,"
    " dateTime TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, extra STRING"
)
BID_SCHEMA = schema(
    "auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING,"
    " dateTime TIMESTAMP, extra STRING"
)
TIME_COLUMN = "dateTime"
# GeneratorConfig's average event sizes in bytes, which `extra` pads each event up to.
AVG_PERSON_BYTES, AVG_AUCTION_BYTES, AVG_BID_BYTES = 200, 500, 100


def nexmark_tables(
    events: int,
    *,
    seed: int = 0,
    events_per_second: float = 10_000.0,
    base_time: datetime | None = None,
) -> dict[str, pa.Table]:
    """Events ``0 .. events-1`` split into the ``person``, ``auction`` and ``bid`` tables.

    Each table is in event order (so its ``date_time`` never decreases); the same arguments
    always give the same tables. A naive `base_time` is read as UTC.
    """
    if events < 0 or events_per_second <= 0:
        msg = "events must be >= 0 and events_per_second > 0"
        raise ValueError(msg)
    base_us = epoch_us(base_time)
    step_us = 1e6 / events_per_second
    rng = np.random.default_rng(seed)
    ev = np.arange(events, dtype=np.int64)
    epoch, offset = np.divmod(ev, TOTAL_PROPORTION)
    kind = np.where(
        offset < PERSON_PROPORTION,
        0,
        np.where(offset < PERSON_PROPORTION + AUCTION_PROPORTION, 1, 2),
    )
    # floor(i * step) like GeneratorConfig.timestampForEvent, but in microseconds.
    ts = base_us + np.floor(ev * step_us).astype(np.int64)
    # Base-0 id of the last person / auction created at or before each event.
    last_person = epoch * PERSON_PROPORTION + np.minimum(offset, PERSON_PROPORTION - 1)
    last_auction = np.where(
        offset < PERSON_PROPORTION,
        epoch * AUCTION_PROPORTION - 1,
        epoch * AUCTION_PROPORTION + np.minimum(offset - PERSON_PROPORTION, AUCTION_PROPORTION - 1),
    )
    p, a, b = (np.flatnonzero(kind == k) for k in range(3))
    return {
        "person": _persons(rng, last_person[p], ts[p]),
        "auction": _auctions(rng, last_person[a], last_auction[a], ts[a], step_us),
        "bid": _bids(rng, last_person[b], last_auction[b], ts[b]),
    }


def _persons(rng: np.random.Generator, ids: Ints, ts: Ints) -> pa.Table:
    n = len(ids)
    names = [f"{f} {last}" for f in FIRST_NAMES for last in LAST_NAMES]
    name = rng.integers(0, len(FIRST_NAMES), n) * len(LAST_NAMES)
    name += rng.integers(0, len(LAST_NAMES), n)
    email = _strings(
        _letters(rng, n, 3, 7), _literal(n, "@"), _letters(rng, n, 3, 5), _literal(n, ".com")
    )
    digits = rng.integers(ord("0"), ord("9") + 1, (n, 19), dtype=np.uint8)
    digits[:, 4::5] = ord(" ")  # "dddd dddd dddd dddd", as the generator formats it
    card = _strings((digits, np.full(n, 19, dtype=np.int64)))
    columns = [
        ids + FIRST_PERSON_ID,
        pc.take(pa.array(names), pa.array(name)),
        email,
        card,
        _pick(rng, US_CITIES, n),
        _pick(rng, US_STATES, n),
    ]
    size = 8 + 8 + np.sum([_lengths(c) for c in columns[1:]], axis=0)
    columns += [pa.array(ts, TS), _extra(rng, size, AVG_PERSON_BYTES)]
    return pa.Table.from_arrays(columns, schema=PERSON_SCHEMA)


def _auctions(
    rng: np.random.Generator, last_person: Ints, ids: Ints, ts: Ints, step_us: float
) -> pa.Table:
    n = len(ids)
    # AuctionGenerator.nextSellerIdWithRandom: mostly the hot seller of the current batch.
    hot = rng.integers(0, HOT_SELLERS_RATIO, n) > 0
    seller = np.where(hot, last_person // HOT_BATCH * HOT_BATCH, _active_person(rng, last_person))
    initial = _prices(rng, n)
    # nextAuctionLengthMs: 1 ms + up to twice the time until NUM_IN_FLIGHT_AUCTIONS more auctions
    # exist, but never above MAX_AUCTION_SECONDS (uniform below it, not piled up at it).
    horizon_us = int(NUM_IN_FLIGHT_AUCTIONS * TOTAL_PROPORTION // AUCTION_PROPORTION * step_us)
    spread_ms = max(min(2 * (horizon_us // 1000), MAX_AUCTION_SECONDS * 1000 - 1), 1)
    length_us = (1 + rng.integers(0, spread_ms, n)) * 1000
    name = _strings(_letters(rng, n, 3, 20))
    description = _strings(_letters(rng, n, 3, 100))
    size = 8 + _lengths(name) + _lengths(description) + 5 * 8
    columns = [
        ids + FIRST_AUCTION_ID,
        name,
        description,
        initial,
        initial + _prices(rng, n),
        pa.array(ts, TS),
        pa.array(ts + length_us, TS),
        seller + FIRST_PERSON_ID,
        FIRST_CATEGORY_ID + rng.integers(0, NUM_CATEGORIES, n),
        _extra(rng, size, AVG_AUCTION_BYTES),
    ]
    return pa.Table.from_arrays(columns, schema=AUCTION_SCHEMA)


def _bids(rng: np.random.Generator, last_person: Ints, last_auction: Ints, ts: Ints) -> pa.Table:
    n = len(ts)
    # BidGenerator.nextBid: hot auctions and bidders, else recent ones (no ids ahead of time).
    hot = rng.integers(0, HOT_AUCTION_RATIO, n) > 0
    low = np.maximum(last_auction - NUM_IN_FLIGHT_AUCTIONS, 0)
    recent = low + rng.integers(0, last_auction - low + 1)
    auction = np.where(hot, last_auction // HOT_BATCH * HOT_BATCH, recent)
    hot = rng.integers(0, HOT_BIDDERS_RATIO, n) > 0
    # The second of the batch, so hot bidders and hot sellers differ; clamped to exist already.
    hot_bidder = np.minimum(last_person // HOT_BATCH * HOT_BATCH + 1, last_person)
    bidder = np.where(hot, hot_bidder, _active_person(rng, last_person))
    channel = _pick(rng, CHANNELS, n)
    # BidGenerator's url: three random path segments of the site's item page.
    parts = [_literal(n, "https://www.nexmark.com/")]
    for _ in range(3):
        parts += [_letters(rng, n, 3, 6), _literal(n, "/")]
    url = _strings(*parts, _literal(n, "item.htm?query=1"))
    size = 8 + 8 + 8 + _lengths(channel) + _lengths(url) + 8
    columns = [
        auction + FIRST_AUCTION_ID,
        bidder + FIRST_PERSON_ID,
        _prices(rng, n),
        channel,
        url,
        pa.array(ts, TS),
        _extra(rng, size, AVG_BID_BYTES),
    ]
    return pa.Table.from_arrays(columns, schema=BID_SCHEMA)


def _active_person(rng: np.random.Generator, last_person: Ints) -> Ints:
    """PersonGenerator.nextBase0PersonId without the lead: one of the last active people."""
    people = last_person + 1
    active = np.minimum(people, NUM_ACTIVE_PEOPLE)
    return t.cast("Ints", people - active + rng.integers(0, active))


def _prices(rng: np.random.Generator, n: int) -> Ints:
    """PriceGenerator.nextPrice: log-uniform in [10^2, 10^8] (cents, so $1 to $1M)."""
    return np.rint(10.0 ** (rng.random(n) * 6.0) * 100.0).astype(np.int64)


def _pick(rng: np.random.Generator, values: t.Sequence[str], n: int) -> pa.Array:
    return pc.take(pa.array(values), pa.array(rng.integers(0, len(values), n)))


Segment = tuple["NDArray[np.uint8]", "Ints"]
"""Characters ``(n, width)`` and the length of each row's prefix that is used."""


def _letters(rng: np.random.Generator, n: int, low: int, high: int) -> Segment:
    """StringsGenerator.nextString: lower-case letters, length in ``[low, high)``."""
    chars = rng.integers(ord("a"), ord("z") + 1, (n, high - 1), dtype=np.uint8)
    return chars, rng.integers(low, high, n)


def _lengths(strings: pa.Array) -> Ints:
    return t.cast("Ints", pc.binary_length(strings).to_numpy(zero_copy_only=False))


def _extra(rng: np.random.Generator, size: Ints, average: int) -> pa.Array:
    """StringsGenerator.nextExtra: letters that bring an event of `size` bytes to `average`,
    give or take 20 %."""
    want = np.maximum(average - size, 0)
    delta = np.rint(want * 0.2).astype(np.int64)
    length = want - delta + (rng.random(len(size)) * 2 * delta).astype(np.int64)
    width = max(int(length.max(initial=0)), 1)
    chars = rng.integers(ord("a"), ord("z") + 1, (len(size), width), dtype=np.uint8)
    return _strings((chars, length))


def _literal(n: int, text: str) -> Segment:
    chars = np.frombuffer(text.encode(), dtype=np.uint8)
    return np.broadcast_to(chars, (n, len(chars))), np.full(n, len(chars), dtype=np.int64)


def _strings(*segments: Segment) -> pa.Array:
    """Concatenate the used prefixes of each segment, row by row, into a string array."""
    n = len(segments[0][1])
    chars = np.concatenate([c for c, _ in segments], axis=1)
    used = np.concatenate([np.arange(c.shape[1]) < k[:, None] for c, k in segments], axis=1)
    lengths = np.sum([k for _, k in segments], axis=0, dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    data = np.ascontiguousarray(chars[used])  # row-major: row by row, segment by segment
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))
