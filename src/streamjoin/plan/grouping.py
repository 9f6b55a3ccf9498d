"""Text for pieces of a predicate shown apart from it, with the parentheses their meaning needs.

Classification takes a predicate apart (its conjuncts, the two sides of a band or an equality)
and explain puts the pieces into new text (``c1 AND c2``, ``right - left``). sqlglot prints a
tree as it stands and adds no parentheses, so a piece that binds more loosely than the operator
it now sits beside would read as a different expression.
"""

from __future__ import annotations

import typing as t

import sqlglot
from sqlglot import exp

Operator = t.Literal["-", "="]
"""The operators explain writes between two pieces."""

_PRODUCTS = (exp.Mul, exp.Div, exp.IntDiv)
_ARITHMETIC = (
    exp.Add,
    exp.Sub,
    *_PRODUCTS,
    exp.Mod,
    exp.DPipe,
    exp.BitwiseAnd,
    exp.BitwiseOr,
    exp.BitwiseXor,
)

# Per operator, the compound operands that bind more tightly than it on its (left, right).
# The operators associate to the left, so a right operand of equal rank needs parentheses;
# `%` is kept out of the products because Spark and sqlglot rank it differently.
_TIGHTER: dict[Operator, tuple[tuple[type[exp.Expr], ...], tuple[type[exp.Expr], ...]]] = {
    "-": ((exp.Add, exp.Sub, *_PRODUCTS), _PRODUCTS),
    "=": (_ARITHMETIC, _ARITHMETIC),
}


def conjunct_sql(node: exp.Expr) -> str:
    """A top-level conjunct as text that keeps its meaning between ANDs: an OR goes back into
    the parentheses that `classify.conjuncts` looked through.

    >>> tree = sqlglot.parse_one("a.x = 1 AND (a.y = 2 OR b.z = 3)", dialect="spark")
    >>> [conjunct_sql(c) for c in (tree.this, tree.expression.unnest())]
    ['a.x = 1', '(a.y = 2 OR b.z = 3)']
    """
    text = node.sql(dialect="spark")
    # AND binds more tightly than OR (and sqlglot's XOR); every other condition binds tighter.
    return f"({text})" if isinstance(node, exp.Connector) else text


def binary_sql(left_sql: str, operator: Operator, right_sql: str) -> str:
    """``left operator right``, each side in parentheses when it would otherwise bind to its
    neighbour rather than to the whole other side.

    >>> binary_sql("b.y", "-", "a.x - a.z")
    'b.y - (a.x - a.z)'
    >>> binary_sql("b.y + 1", "-", "a.x * 2")
    'b.y + 1 - a.x * 2'
    """
    tighter_left, tighter_right = _TIGHTER[operator]
    return f"{_operand(left_sql, tighter_left)} {operator} {_operand(right_sql, tighter_right)}"


def _operand(sql: str, tighter: tuple[type[exp.Expr], ...]) -> str:
    node = sqlglot.parse_one(sql, dialect="spark")
    compound = isinstance(node, (exp.Binary, exp.Predicate, exp.Not)) and not isinstance(
        node, exp.Dot
    )
    return f"({sql})" if compound and not isinstance(node, tighter) else sql
