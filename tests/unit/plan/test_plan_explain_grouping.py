"""Explain shows every predicate with the grouping the job wrote: the text it prints for the
residual (and the whole predicate), parsed again, has the same truth values."""

from __future__ import annotations

import itertools
import typing as t

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.plan import Band, EquiKey, plan_job
from streamjoin.reference import compile_expression
from streamjoin.sql import parse_job

STREAMS = """
CREATE STREAM A (k BIGINT, category BIGINT, x BIGINT, y BIGINT)
  WITH (format = 'json', path = '/a');
CREATE STREAM P (k BIGINT, state STRING, u BIGINT, v BIGINT) WITH (format = 'json', path = '/p');
CREATE SINK o WITH (format = 'console');
"""


def _explained(join: str) -> dict[str, str]:
    """The explain lines of the one query ``... FROM A JOIN P {join}``, by their label."""
    job = parse_job(STREAMS + f"INSERT INTO o SELECT A.k AS k FROM A JOIN P {join};\n")
    lines = {}
    for line in plan_job(job).explain().splitlines():
        label, colon, text = line.strip().partition(":")
        if colon and label in ("predicate", "equality keys", "bands", "residual"):
            lines[label] = text.strip()
    return lines


@pytest.mark.parametrize(
    ("join", "residual"),
    [
        (
            "ON A.k = P.k WHERE A.category = 10 AND (P.state = 'or' OR P.state = 'id')",
            "A.category = 10 AND (P.state = 'or' OR P.state = 'id')",
        ),
        (
            "ON A.k = P.k AND (A.x = 1 OR P.u = 2) WHERE A.y = 3 OR P.v = 4",
            "(A.x = 1 OR P.u = 2) AND (A.y = 3 OR P.v = 4)",
        ),
        (
            "ON A.k = P.k WHERE NOT (A.x = 1 OR P.u = 2) AND A.y = 3",
            "NOT (A.x = 1 OR P.u = 2) AND A.y = 3",
        ),
        (
            "ON A.k = P.k WHERE A.x = 1 OR P.u = 2 AND A.y = 3",
            "(A.x = 1 OR P.u = 2 AND A.y = 3)",
        ),
        (
            "ON A.k = P.k WHERE ((A.x = 1 OR (P.u = 2 AND A.y = 3))) AND P.v = 4",
            "(A.x = 1 OR (P.u = 2 AND A.y = 3)) AND P.v = 4",
        ),
        (
            "ON A.x BETWEEN 1 AND 2 AND (P.u = 1 OR NOT P.v = 2 OR A.y <> P.v)",
            "A.x BETWEEN 1 AND 2 AND (P.u = 1 OR NOT P.v = 2 OR A.y <> P.v)",
        ),
    ],
)
def test_residual_keeps_the_parentheses_of_an_or(join: str, residual: str) -> None:
    assert _explained(join)["residual"] == residual


def test_a_band_against_a_sum_shows_the_sum_in_parentheses() -> None:
    lines = _explained("ON abs(A.x + A.y - P.u) <= 2")
    assert lines["bands"] == "P.u - (A.x + A.y) in [-2, 2]"


@pytest.mark.parametrize(
    ("piece", "text"),
    [
        (EquiKey("a.k", "b.k"), "a.k = b.k"),
        (EquiKey("a.f", "b.u = b.v"), "a.f = (b.u = b.v)"),
        (EquiKey("a.x + 1", "b.y * 2"), "a.x + 1 = b.y * 2"),
        (Band("a.x", "b.y", -1, 2), "b.y - a.x in [-1, 2]"),
        (Band("a.x - a.z", "b.y", -1, 1), "b.y - (a.x - a.z) in [-1, 1]"),
        (Band("a.x * 2", "b.y + b.w", 0, 1), "b.y + b.w - a.x * 2 in [0, 1]"),
        (Band("a.x & 3", "b.y", 0, 1), "b.y - (a.x & 3) in [0, 1]"),
    ],
)
def test_keys_and_bands_describe_themselves_with_their_grouping(
    piece: EquiKey | Band, text: str
) -> None:
    assert piece.describe() == text


# A boolean tree: a comparison (leaf), or ("AND" | "OR", left, right), ("NOT", child) or
# ("()", child) for parentheses that change nothing.
Tree = str | tuple[t.Any, ...]

COLUMNS = ("A.x", "A.y", "P.u", "P.v")

_leaves = st.one_of(
    st.builds(
        "{} {} {}".format,
        st.sampled_from(COLUMNS),
        st.sampled_from(["=", "<>", "<", "<=", ">", ">="]),
        st.integers(0, 2),
    ),
    st.builds("{} BETWEEN {} AND {}".format, st.sampled_from(COLUMNS), st.just(0), st.just(1)),
    st.builds("{} IS NULL".format, st.sampled_from(COLUMNS)),
)


def _extend(children: st.SearchStrategy[Tree]) -> st.SearchStrategy[Tree]:
    return st.one_of(
        st.tuples(st.sampled_from(["AND", "OR"]), children, children),
        st.tuples(st.just("NOT"), children),
        st.tuples(st.just("()"), children),
    )


trees = st.recursive(_leaves, _extend, max_leaves=8)

_RANK = {"OR": 1, "AND": 2, "NOT": 3}
"""How tightly each form binds in Spark SQL (a leaf binds tightest: 4)."""


def _sql(tree: Tree) -> tuple[str, int]:
    """The tree as a job writes it, with the parentheses its grouping needs and no others
    (except those of "()"), and how tightly the text binds."""
    if isinstance(tree, str):
        return tree, 4
    kind = tree[0]
    if kind == "()":
        return f"({_sql(tree[1])[0]})", 4
    rank = _RANK[kind]
    if kind == "NOT":
        text, inner = _sql(tree[1])
        return f"NOT {text if inner >= rank else f'({text})'}", rank
    (left, left_rank), (right, right_rank) = _sql(tree[1]), _sql(tree[2])
    left = left if left_rank >= rank else f"({left})"
    right = right if right_rank > rank else f"({right})"
    return f"{left} {kind} {right}", rank


_VALUES = (None, 0, 1, 2)
ROWS = [
    {"A": {"k": 0, "x": x, "y": y}, "P": {"k": 0, "u": u, "v": v}}
    for x, y, u, v in itertools.product(_VALUES, repeat=4)
]
"""Every combination of NULL, 0, 1 and 2 in the compared columns, on a matching key."""


@settings(max_examples=150, deadline=None)
@given(trees)
def test_displayed_residual_means_the_written_condition(tree: Tree) -> None:
    written, _ = _sql(tree)
    lines = _explained(f"ON A.k = P.k WHERE {written}")
    # Comparisons with constants are never keys or bands: all of WHERE is residual.
    assert lines["equality keys"] == "A.k = P.k"
    expected = compile_expression(written)
    for label in ("residual", "predicate"):
        shown = compile_expression(lines[label])
        for env in ROWS:
            assert shown(env) == expected(env), (label, lines[label], written, env)
