"""Input validation: every mistake is an OptimizerError (a StreamJoinError) naming the value."""

from __future__ import annotations

import typing as t

import pytest

from streamjoin.errors import StreamJoinError
from streamjoin.optimizer import JoinPredicate, OptimizerError, Problem, Query, Relation

P = JoinPredicate
R = Relation("R", 10.0, ("a",))
S = Relation("S", 20.0, ("a", "b"))
T = Relation("T", 30.0, ("b",))
RS = P("R", "S", "a", "a", 0.1)
ST = P("S", "T", "b", "b", 0.2)


def test_optimizer_errors_are_streamjoin_errors() -> None:
    assert issubclass(OptimizerError, StreamJoinError)


def test_predicates_compare_equal_either_way_round() -> None:
    flipped = P("S", "R", "a", "a", 0.1)
    assert flipped == RS
    assert (flipped.left, flipped.right) == ("R", "S")
    assert str(P("T", "S", "y", "x", 0.5)) == "S.x = T.y"
    assert str(P("R", "S", None, None, 0.5, "R.v < S.v")) == "R θ S [R.v < S.v]"


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: Relation("", 1.0), "''"),
        (lambda: Relation("R", 0.0), "rate of R"),
        (lambda: Relation("R", float("nan")), "nan"),
        (lambda: Relation("R", True), "True"),
        (lambda: Relation("R", 1.0, ("a", "a")), "'a'"),
        (lambda: P("R", "R", "a", "a", 0.1), "R with itself"),
        (lambda: P("R", "S", "a", None, 0.1), "R.a = S.None"),
        (lambda: P("R", "S", "a", "a", -0.5), "-0.5"),
        (lambda: P("R", "S", "a", "a", float("inf")), "inf"),
        (lambda: Query("q", ("R",), ()), "('R',)"),
        (lambda: Query("q", ("R", "R"), (RS,)), "names a relation twice"),
        (lambda: Query("q", ("R", "S"), (ST,)), "uses T"),
        (lambda: Query("q", ("R", "S", "T"), (RS,)), "cross product"),
        (lambda: Query("q", ("R", "S"), (RS, RS)), "R.a = S.a twice"),
        (lambda: Problem((R, S), (), 2), "at least one query"),
        (lambda: Problem((R, S), (Query.of("q", RS),), 0), "got 0"),
        (lambda: Problem((R, S), (Query.of("q", RS),), True), "True"),
        (lambda: Problem((R, R, S), (Query.of("q", RS),), 2), "R is declared twice"),
        (lambda: Problem((R,), (Query.of("q", RS),), 2), "reads S"),
        (lambda: Problem((R, S), (Query.of("q", RS), Query.of("q", RS)), 2), "q is used twice"),
        (lambda: Problem((R, S, T), (Query.of("q", RS, P("S", "T", "c", "b", 0.2)),), 2), "S.c"),
        (
            lambda: Problem(
                (R, S), (Query.of("q1", RS), Query.of("q2", P("R", "S", "a", "a", 0.3))), 2
            ),
            "0.1 in query q1 but 0.3 in query q2",
        ),
    ],
)
def test_bad_input_is_refused_with_the_value_named(
    make: t.Callable[[], object], words: str
) -> None:
    with pytest.raises(OptimizerError) as err:
        make()
    assert words in str(err.value)


def test_round_trip_through_a_dict() -> None:
    theta = P("R", "T", None, None, 0.05, "R.v < T.v")
    problem = Problem((R, S, T), (Query.of("q", RS, ST, theta),), 3)
    assert Problem.from_dict(problem.to_dict()) == problem


def test_from_dict_names_the_missing_field() -> None:
    data = Problem((R, S), (Query.of("q", RS),), 2).to_dict()
    del data["queries"][0]["predicates"][0]["selectivity"]
    with pytest.raises(OptimizerError, match="'selectivity'"):
        Problem.from_dict(data)


def test_lookups() -> None:
    problem = Problem((R, S), (Query.of("q", RS),), 2)
    assert problem.relation("S") is S
    assert problem.query("q").relations == ("R", "S")
    with pytest.raises(OptimizerError, match="'X'"):
        problem.relation("X")
    with pytest.raises(OptimizerError, match="'nope'"):
        problem.query("nope")
