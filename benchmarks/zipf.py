"""Generators for the skew benchmarks (`benchmarks.skew`): Zipf keys, arrival schedules, and the
exact result sizes to check the engine against.

Everything is numpy with a seeded generator, so a size and a seed fix the input bit for bit.
Tables have the columns of `benchmarks.data.two_streams` (``id``, ``k``, ``x``, ``ts``), so the
backlogs go through `benchmarks.data.write_backlog` like every other workload.
"""

from __future__ import annotations

import typing as t

import numpy as np
import pyarrow as pa

from benchmarks.data import BASE_TIME, US

if t.TYPE_CHECKING:
    from collections.abc import Sequence

IntArray = np.ndarray[t.Any, np.dtype[np.int64]]


def zipf_probabilities(z: float, keys: int) -> np.ndarray[t.Any, np.dtype[np.float64]]:
    """P(key = i) ∝ 1 / (i + 1)^z over ``0 .. keys-1`` (bounded Zipf; z = 0 is uniform).

    numpy's own `zipf` needs z > 1 and is unbounded; this one takes any z >= 0, and key 0 is the
    hottest.
    """
    if keys < 1 or z < 0:
        raise ValueError(f"need keys >= 1 and z >= 0, got keys={keys}, z={z}")
    weights: np.ndarray[t.Any, np.dtype[np.float64]] = (
        1.0 / np.arange(1, keys + 1, dtype=np.float64) ** z
    )
    probabilities: np.ndarray[t.Any, np.dtype[np.float64]] = weights / weights.sum()
    return probabilities


def zipf_keys(rng: np.random.Generator, rows: int, z: float, keys: int) -> IntArray:
    """`rows` keys drawn from `zipf_probabilities` (key 0 hottest)."""
    return rng.choice(keys, size=rows, p=zipf_probabilities(z, keys)).astype(np.int64)


def top_share(z: float, keys: int) -> float:
    """The hottest key's share of the rows."""
    return float(zipf_probabilities(z, keys)[0])


def pair_share(z: float, keys: int) -> float:
    """Σ p_i²: the chance two independent rows carry the same key."""
    p = zipf_probabilities(z, keys)
    return float((p * p).sum())


def _table(ids: IntArray, keys: IntArray, x: np.ndarray[t.Any, t.Any], ts: IntArray) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids),
            "k": pa.array(keys),
            "x": pa.array(x),
            "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
        }
    )


def zipf_streams(
    rows: int,
    *,
    z: float,
    keys: int,
    span_seconds: float,
    jitter_seconds: float = 0.5,
    x_range: float = 1_000_000.0,
    seed: int = 0,
) -> dict[str, pa.Table]:
    """Streams ``a`` and ``b`` of `rows` rows each, keys Zipf(z) over `keys` values with the same
    hot key on both sides (the worst case for hash partitioning), event times spread evenly over
    `span_seconds` with up to `jitter_seconds` of disorder, ``x`` uniform in [0, x_range)."""
    rng = np.random.default_rng(seed)
    base = int(BASE_TIME.timestamp()) * US
    out = {}
    for name in ("a", "b"):
        nominal = np.linspace(0, span_seconds * US, rows, endpoint=False).astype(np.int64)
        jitter = (rng.random(rows) * jitter_seconds * US).astype(np.int64)
        out[name] = _table(
            np.arange(rows, dtype=np.int64),
            zipf_keys(rng, rows, z, keys),
            np.round(rng.random(rows) * x_range, 3),
            base + nominal + jitter,
        )
    return out


def window_pairs(
    left: pa.Table, right: pa.Table, window_seconds: float, key: str = "k", ts: str = "ts"
) -> int:
    """Exactly how many (l, r) pairs have ``l.k = r.k AND r.ts BETWEEN l.ts - w AND l.ts + w``.

    Sorts the right side by (key, ts) and counts each left row's partners by binary search:
    exact, and fast enough for millions of rows.
    """
    w = round(window_seconds * US)
    lk, rk = _ints(left[key]), _ints(right[key])
    lt, rt = _ts(left[ts]), _ts(right[ts])
    lo = min(int(lt.min()), int(rt.min())) - w - 1
    stride = max(int(lt.max()), int(rt.max())) - lo + w + 2
    lv = (lk - int(min(lk.min(), rk.min()))) * stride + (lt - lo)
    rv = np.sort((rk - int(min(lk.min(), rk.min()))) * stride + (rt - lo))
    hi_idx = np.searchsorted(rv, lv + w, side="right")
    lo_idx = np.searchsorted(rv, lv - w, side="left")
    return int((hi_idx - lo_idx).sum())


def equi_pairs(left_keys: IntArray, right_keys: IntArray) -> int:
    """Exactly how many (l, r) pairs have equal keys: Σ_k count_l(k) · count_r(k)."""
    lu, lc = np.unique(left_keys, return_counts=True)
    ru, rc = np.unique(right_keys, return_counts=True)
    _, li, ri = np.intersect1d(lu, ru, assume_unique=True, return_indices=True)
    return int((lc[li].astype(np.int64) * rc[ri].astype(np.int64)).sum())


def _ints(column: pa.ChunkedArray) -> IntArray:
    return np.asarray(column.to_numpy(), dtype=np.int64)


def _ts(column: pa.ChunkedArray) -> IntArray:
    return np.asarray(column.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()).to_numpy())


def phased_streams(
    phases: Sequence[tuple[int, int, int]],
    *,
    keys: int,
    seed: int = 0,
    seconds_per_batch: float = 10.0,
) -> list[dict[str, pa.Table]]:
    """Micro-batches whose left/right arrival counts follow `phases`.

    Each phase is ``(batches, left_rows_per_batch, right_rows_per_batch)``; every batch spans
    `seconds_per_batch` of event time, keys are uniform over `keys` values, ids are unique per
    stream. Returns one ``{"a": table, "b": table}`` per batch.
    """
    rng = np.random.default_rng(seed)
    base = int(BASE_TIME.timestamp()) * US
    counters = {"a": 0, "b": 0}
    out: list[dict[str, pa.Table]] = []
    batch = 0
    for count, left_rows, right_rows in phases:
        for _ in range(count):
            tables = {}
            for name, rows in (("a", left_rows), ("b", right_rows)):
                start = base + round(batch * seconds_per_batch * US)
                ts = start + np.sort(rng.integers(0, round(seconds_per_batch * US), rows))
                ids = np.arange(counters[name], counters[name] + rows, dtype=np.int64)
                counters[name] += rows
                tables[name] = _table(
                    ids,
                    rng.integers(0, keys, rows, dtype=np.int64),
                    np.round(rng.random(rows) * 1_000_000.0, 3),
                    ts.astype(np.int64),
                )
            out.append(tables)
            batch += 1
    return out
