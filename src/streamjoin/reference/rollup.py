"""The reference of a rollup (`model.aggregate.Rollup`), by brute force.

10. A query with a rollup feeds it the rows of its GROUP BY (as in 7 and 8). In each batch
    where some arrive, every group of the rollup's keys that one of them falls into is written
    with its values over all the rows that arrived by that batch.
"""

from __future__ import annotations

from collections.abc import Sequence

from streamjoin.model import Query
from streamjoin.reference.aggregate import Env, compile_grouped
from streamjoin.reference.evaluate import compile_expression


def rollup_results(
    query: Query, rows: Sequence[tuple[tuple[object, ...], int]]
) -> list[tuple[tuple[object, ...], int]]:
    """The rollup's rows and their batches, from the query's GROUP BY rows and theirs."""
    rollup = query.rollup
    assert rollup is not None
    keys = [compile_expression(k) for k in rollup.keys]
    items = [compile_grouped(s.sql) for s in rollup.select]
    groups: dict[tuple[object, ...], list[tuple[Env, int]]] = {}
    for values, batch in rows:
        env: Env = {
            rollup.alias: {i.alias.lower(): v for i, v in zip(query.select, values, strict=True)}
        }
        groups.setdefault(tuple(k(env) for k in keys), []).append((env, batch))
    out = []
    for batch in sorted({b for _, b in rows}):
        for members in groups.values():
            if all(b != batch for _, b in members):
                continue
            envs = [e for e, b in members if b <= batch]
            out.append((tuple(f(envs, {}) for f in items), batch))
    return out
