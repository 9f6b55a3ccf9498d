"""The automatic hash path's rows per unit, counted in the state job (`runtime.routing.unitcounts`):
which key expressions it can read off a batch's stored columns, and the unit SQL over those
columns (no JVM: the SQL is text; Spark's side is `tests/spark/test_partitioning`'s hot-key
test)."""

from __future__ import annotations

import typing as t

import pytest

from streamjoin.plan import plan_job
from streamjoin.runtime.routing.router import QueryRouter
from streamjoin.runtime.routing.unitcounts import InputUnitCounts, column_of
from streamjoin.sql import parse_job
from tests.spark.streams import stream_ddl

if t.TYPE_CHECKING:
    from streamjoin.runtime.batch.joins import Side


@pytest.mark.parametrize(
    ("sql", "alias", "column"),
    [
        ("l.k", "l", "k"),
        ("`l`.`k`", "l", "k"),
        ("l.`k`", "l", "k"),
        ("r.k", "l", None),  # the other side's alias
        ("k", "l", None),  # unqualified
        ("l.k + 1", "l", None),  # an expression, not a column
        ("lower(l.s)", "l", None),
        ("l.`a b`", "l", None),  # not a name the stored layout can prefix as it is
    ],
)
def test_only_bare_columns_of_the_side_are_read_off_the_stored_batch(
    sql: str, alias: str, column: str | None
) -> None:
    assert column_of(sql, alias) == column


def test_unit_sql_over_stored_columns_is_the_join_side_unit_with_the_keys_renamed() -> None:
    text = "\n".join(stream_ddl(s) for s in "AB")
    text += "\nCREATE SINK o WITH (format = 'json', path = '/out');\n"
    text += "INSERT INTO o SELECT a.id AS i FROM A a JOIN B b ON a.k = b.k AND a.s = b.s;"
    plan = plan_job(parse_job(text))
    qp = plan.queries[0]
    router = QueryRouter.restore(qp, plan.job.stream("A"), plan.job.stream("B"), None, 4)
    router.key_types = ("bigint", "string")
    sides: list[tuple[Side, str, str]] = [("left", "a", "`s0_{}`"), ("right", "b", "`s1_{}`")]
    for side, alias, stored in sides:
        over_alias = router.unit_sql(side)
        keys = [stored.format(c) for c in ("k", "s")]
        over_stored = router.unit_sql(side, keys)
        assert over_stored != over_alias
        renamed = over_alias
        for c, key in zip(("k", "s"), keys, strict=True):
            renamed = renamed.replace(f"{alias}.{c}", key)
        assert over_stored == renamed
        assert "pmod" in over_stored or "%" in over_stored, over_stored


def _routers(params: dict[str, t.Any]) -> tuple[t.Any, dict[str, QueryRouter]]:
    """A windowed equi join's plan, and its router under `params`, key types known."""
    text = "\n".join(stream_ddl(s) for s in "AB")
    text += "\nCREATE SINK o WITH (format = 'json', path = '/out');\n"
    text += (
        "INSERT INTO o SELECT a.id AS i FROM A a JOIN B b ON a.k = b.k "
        "AND b.ts BETWEEN a.ts - INTERVAL '3' SECOND AND a.ts + INTERVAL '3' SECOND;"
    )
    plan = plan_job(parse_job(text))
    qp = plan.queries[0]
    router = QueryRouter.restore(qp, plan.job.stream("A"), plan.job.stream("B"), None, 8)
    router.params = params
    router.key_types = ("bigint",)
    return plan, {qp.query.name: router}


@pytest.mark.parametrize(
    "params",
    [
        {"name": "matrix", "n": 2, "m": 2, "units": 8, "moved": True},
        {"name": "hash", "units": 8, "time_bucket": True, "moved": True},
    ],
)
def test_a_query_moved_off_hash_is_counted_by_its_keys_hash_alone(params: dict[str, t.Any]) -> None:
    """Under the scheme or the time buckets the skew check chose, its rows are still counted in
    the hash units of its key alone (as many as it had), apart from its scheme's places."""
    plan, routers = _routers(params)
    counted = InputUnitCounts()
    counted.choose(t.cast("t.Any", None), plan, routers)
    assert "q1" in counted and counted.moved == {"q1"}
    assert counted.units("q1", routers) == 8
    for _src, unit in counted.sides["q1"]:
        # (A row whose key is NULL meets nothing: no unit.)
        assert unit.startswith("CASE WHEN (`s") and "IS NULL THEN NULL" in unit, unit
        assert unit.endswith(", 8) END"), unit
        assert "floor(" not in unit and "_sj_place" not in unit, unit
    got = {f"u_0_{j}_{u}": (u + 1) * (j + 1) for j in range(2) for u in range(8)}
    counted.read(got, routers)
    assert counted.take_moved() == {"q1": [3 * (u + 1) for u in range(8)]}
    assert counted.counts == {}


def test_a_scheme_the_user_chose_is_not_counted_by_key() -> None:
    plan, routers = _routers({"name": "matrix", "n": 2, "m": 2, "units": 8})
    counted = InputUnitCounts()
    counted.choose(t.cast("t.Any", None), plan, routers)
    assert "q1" not in counted and not counted.moved


def test_a_stream_that_read_no_file_has_no_row_to_count() -> None:
    counts = InputUnitCounts()
    counts.sides = {"q1": [(0, "u_a"), (1, "u_b")], "q2": [(1, "v_b"), (2, "v_c")]}
    sql = counts.files_sql({1: "rel_b", 2: "rel_c"}, ["q1", "q2"])
    assert "rel_b" in sql and "u_a" not in sql and sql.count(" FROM rel_") == 3
    none = counts.files_sql({}, ["q1"])
    assert none.endswith("WHERE FALSE")
