"""``SELECT ... FROM (<a GROUP BY query>) q GROUP BY keys``: groups with no window over the
rows of a windowed GROUP BY (Nexmark q4's shape), into a `Rollup`."""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from streamjoin.model import SelectItem
from streamjoin.model.aggregate import Rollup
from streamjoin.sql.aggregate import check_grouped, is_window
from streamjoin.sql.dialect import node_error
from streamjoin.sql.groups import qualify_outputs
from streamjoin.sql.positions import Statement
from streamjoin.sql.relations import AGGREGATES, select_items

_USAGE = "SELECT keys, aggregates FROM (SELECT ... GROUP BY ...) q GROUP BY keys [HAVING ...]"
_CLAUSES = frozenset({"expressions", "from_", "group", "having"})


def unwrap_rollup(select: exp.Select) -> tuple[exp.Select, exp.Select] | None:
    """(the outer SELECT, the inner one) when `select` groups the rows of a grouped subquery."""
    from_ = select.args.get("from_")
    if from_ is None or select.args.get("group") is None or select.args.get("joins"):
        return None
    inner = from_.this
    if not isinstance(inner, exp.Subquery) or not isinstance(inner.this, exp.Select):
        return None
    if inner.this.args.get("group") is None:
        return None
    return select, inner.this


def parse_rollup(stmt: Statement, outer: exp.Select, inner: Sequence[SelectItem]) -> Rollup:
    """The rollup `outer` makes of the rows of a query whose output is `inner`.

    Raises:
        JobError: a column the inner query does not output, one neither grouped nor
            aggregated; UnsupportedError: another clause, a window, HAVING, count(DISTINCT),
            another aggregate or one inside another.
    """
    for arg, value in outer.args.items():
        if value and arg not in _CLAUSES:
            msg = f"groups over a grouped subquery take GROUP BY and HAVING only: {_USAGE}"
            raise node_error(stmt, outer, msg, unsupported=True)
    sub = outer.args["from_"].this
    alias = sub.alias
    if not alias:
        raise node_error(stmt, sub, "name the grouped subquery: (SELECT ...) AS q")
    named = [(alias, tuple(inner))]
    group = outer.args["group"]
    keys = []
    for key in group.expressions:
        if key.find(exp.AggFunc) is not None:
            raise node_error(stmt, key, "an aggregate cannot be a GROUP BY key")
        if is_window(key):
            msg = f"groups over a grouped subquery have no window of their own: {_USAGE}"
            raise node_error(stmt, key, msg, unsupported=True)
        qualify_outputs(stmt, key, named)
        keys.append(key.sql(dialect="spark", comments=False))
    having = outer.args.get("having")
    calls = [
        n for e in [*outer.expressions, having] if e is not None for n in e.find_all(exp.AggFunc)
    ]
    for node in calls:  # (the outer SELECT's and HAVING's: the subquery's are its own)
        if type(node) not in AGGREGATES or node.this.find(exp.AggFunc) is not None:
            known = ", ".join(AGGREGATES.values())
            msg = f"over a grouped subquery the aggregates are {known}, of its columns"
            raise node_error(stmt, node, msg, unsupported=True)
        if isinstance(node.this, exp.Distinct):
            msg = "count(DISTINCT) over a grouped subquery is not supported: its groups update"
            raise node_error(stmt, node, msg, unsupported=True)
    for item in outer.expressions:
        qualify_outputs(stmt, item, named)
        check_grouped(stmt, item.this if isinstance(item, exp.Alias) else item, keys, "SELECT")
    if having is not None:
        # (A group written once would have to be withdrawn when its values stop passing.)
        msg = "HAVING over a grouped subquery is not supported: its groups' values change"
        raise node_error(stmt, having, msg, unsupported=True)
    return Rollup(alias, tuple(keys), select_items(stmt, outer))
