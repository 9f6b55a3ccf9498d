"""The automatic hash path's rows per unit, counted in the state job (`runtime.routing.unitcounts`):
which key expressions it can read off a batch's stored columns, and the unit SQL over those
columns (no JVM: the SQL is text; Spark's side is `tests/spark/test_partitioning`'s hot-key
test)."""

from __future__ import annotations

import typing as t

import pytest

from streamjoin.plan import plan_job
from streamjoin.runtime.routing.router import QueryRouter
from streamjoin.runtime.routing.unitcounts import column_of
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
