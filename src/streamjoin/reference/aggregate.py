"""The reference of a ``GROUP BY window(...)`` query: its join results grouped per window, by
brute force, and the batch each group is emitted in.

7. A query with ``GROUP BY window(X.ts, size, slide), keys`` puts each of its join results (as
   in 5) in every window ``[start, start + size)`` holding its ``X.ts``, starts being the
   multiples of slide since the epoch, and groups them by window and keys. A group yields one
   row: its SELECT items, aggregates over its results (count(*) counts them; count, sum, avg,
   min and max skip NULLs and give NULL, count 0, when nothing is left), if its HAVING holds.
8. A window ending at e is emitted in the first batch after which ``W - lag >= e``, W the
   global watermark after the batch and lag how far X's event time may trail the watermark in
   a result still to come (`plan.aggregate`); on a run declared final, windows still open are
   emitted in one more batch after the input's last (index ``len(batches)``); otherwise they
   are not emitted yet. That batch is the group's
   arrival. Every result of a window arrives by the batch that emits it (checked: the run fails
   otherwise, as a wrong lag would make it).
"""

from __future__ import annotations

import datetime as dt
import functools
import typing as t
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal

import sqlglot
from sqlglot import exp

from streamjoin.model.aggregate import WINDOW, TopN
from streamjoin.plan.aggregate import GroupBuffer
from streamjoin.reference import values as v
from streamjoin.reference.evaluate import compile_expression

Env = dict[str, Mapping[str, object]]
Aggregate = Callable[[Sequence[Env]], object]
_AGG = "__agg"
_EPOCH = dt.datetime(1970, 1, 1)


def aggregate_results(
    plan: GroupBuffer,
    joined: Sequence[tuple[tuple[object, ...], int]],
    watermarks: Sequence[int | None],
    final: bool,
) -> list[tuple[tuple[object, ...], int]]:
    """The query's rows and the batch each arrives in, from its join results (the buffered
    columns of `plan`, in order, each with its arrival batch)."""
    agg = plan.windowed
    window = agg.window
    names = [_qualified(sql) for sql, _ in plan.columns]
    time = _qualified(window.time)
    keys = [compile_expression(k) for k in agg.keys]
    groups: dict[tuple[object, ...], list[tuple[Env, int]]] = {}
    for values, arrival in joined:
        env: Env = {}
        for (alias, col), value in zip(names, values, strict=True):
            env.setdefault(alias, {})[col] = value  # type: ignore[index]
        ts = env[time[0]][time[1]]
        assert isinstance(ts, dt.datetime)
        key = tuple(k(env) for k in keys)
        for start in window.starts(v.event_time_us(ts)):
            groups.setdefault((start, *key), []).append((env, arrival))
    emit = _emitter(plan, watermarks, final)
    top = _ranker(agg) if isinstance(agg, TopN) else None
    rows, items, having = [], [], None
    if isinstance(agg, TopN):
        rows = [compile_expression(s.sql) for s in plan.select]
    else:
        items = [compile_grouped(s.sql) for s in plan.select]
        having = compile_grouped(agg.having) if agg.having is not None else None
    out = []
    for group, members in groups.items():
        end = t.cast("int", group[0]) + window.size_us
        batch = emit(end)
        if batch is None:
            continue
        late = max(a for _, a in members)
        if late > batch:
            msg = f"window ending at {end} us emitted in batch {batch}, a result came in {late}"
            raise AssertionError(msg)
        envs = [e for e, _ in members]
        if top is not None:
            out += [(tuple(f(e) for f in rows), batch) for e in top(envs)]
            continue
        bounds = {"start": _timestamp(end - window.size_us), "end": _timestamp(end)}
        if having is not None and having(envs, bounds) is not True:
            continue
        out.append((tuple(f(envs, bounds) for f in items), batch))
    return out


def _ranker(top: TopN) -> Callable[[list[Env]], list[Env]]:
    """The first `top.limit` results of a group by its order; a tie across that boundary
    makes ROW_NUMBER's choice arbitrary, and the reference refuses it."""
    terms = []
    for term in top.order:
        tree: exp.Expr = sqlglot.parse_one(f"SELECT 1 ORDER BY {term}", dialect="spark")
        ordered = tree.args["order"].expressions[0]
        desc, first = bool(ordered.args.get("desc")), bool(ordered.args.get("nulls_first"))
        terms.append((compile_expression(ordered.this.sql(dialect="spark")), desc, first))

    def compare(a: Env, b: Env) -> int:
        for value, desc, nulls_first in terms:
            x, y = value(a), value(b)
            if x is None or y is None:
                if x is None and y is None:
                    continue
                return (-1 if x is None else 1) * (1 if nulls_first else -1)
            if x != y:
                less = x < y  # type: ignore[operator]
                return (-1 if less else 1) * (-1 if desc else 1)
        return 0

    def leading(envs: list[Env]) -> list[Env]:
        ordered = sorted(envs, key=functools.cmp_to_key(compare))
        n = top.limit
        if len(ordered) > n and compare(ordered[n - 1], ordered[n]) == 0:
            msg = f"rows {n} and {n + 1} of a group tie on ORDER BY {', '.join(top.order)}"
            raise ValueError(msg)
        return ordered[:n]

    return leading


def _emitter(
    plan: GroupBuffer, watermarks: Sequence[int | None], final: bool
) -> Callable[[int], int | None]:
    closes = [plan.closed_below(w) for w in watermarks]

    def emit(end: int) -> int | None:
        for i, closed in enumerate(closes):
            if closed is not None and closed >= end:
                return i
        return len(watermarks) if final else None

    return emit


def compile_grouped(sql: str) -> Callable[[Sequence[Env], Mapping[str, object]], object]:
    """`sql` over a group: its aggregate calls over the group's results, the rest (keys, the
    window's bounds) over the first result."""
    tree: exp.Expr = exp.maybe_parse(sql, dialect="spark")
    calls: list[Aggregate] = []

    def swap(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.AggFunc):
            calls.append(_aggregate(node))
            return exp.column(f"a{len(calls) - 1}", table=_AGG)
        return node

    rest = compile_expression(tree.transform(swap).sql(dialect="spark"))

    def run(envs: Sequence[Env], bounds: Mapping[str, object]) -> object:
        values = {f"a{i}": f(envs) for i, f in enumerate(calls)}
        return rest({**envs[0], _AGG: values, WINDOW: bounds})

    return run


def _aggregate(node: exp.AggFunc) -> Aggregate:
    arg = node.this
    if isinstance(node, exp.Count) and isinstance(arg, exp.Star):
        return len
    distinct = isinstance(arg, exp.Distinct)
    if distinct:
        arg = arg.expressions[0]
    value = compile_expression(arg.sql(dialect="spark"))

    def present(envs: Sequence[Env]) -> list[object]:
        return [x for e in envs if (x := value(e)) is not None]

    if isinstance(node, exp.Count):
        if distinct:
            return lambda envs: len(set(present(envs)))
        return lambda envs: len(present(envs))
    combine: dict[type[exp.Expr], Callable[[list[t.Any]], object]] = {
        exp.Sum: _sum,
        exp.Avg: lambda xs: float(_sum(xs)) / len(xs),
        exp.Min: min,
        exp.Max: max,
    }
    fold = combine[type(node)]
    return lambda envs: fold(xs) if (xs := present(envs)) else None


def _sum(xs: list[t.Any]) -> t.Any:
    """Spark's sum: a DOUBLE if a value is one (added in order), else exact."""
    if any(isinstance(x, float) for x in xs):
        return float(sum(float(x) for x in xs))
    if any(isinstance(x, Decimal) for x in xs):
        return sum((Decimal(x) for x in xs), Decimal(0))
    return sum(xs)


def _qualified(sql: str) -> tuple[str, str]:
    col: exp.Expr = exp.maybe_parse(sql, dialect="spark")
    assert isinstance(col, exp.Column)
    return col.table, col.name.lower()


def _timestamp(us: int) -> dt.datetime:
    return _EPOCH + dt.timedelta(microseconds=us)
