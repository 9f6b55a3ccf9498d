"""The query set of a served job as its manifest keeps it (`runtime.serve.queries.QuerySet`),
the endpoint's token rule and the CLI's history durations."""

from __future__ import annotations

import argparse

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamjoin.cli_serve import parse_history
from streamjoin.runtime.serve.http import needs_token
from streamjoin.runtime.serve.queries import Change, QuerySet
from streamjoin.sql import parse_job

JOB = parse_job(
    "CREATE STREAM A (k BIGINT, ts TIMESTAMP) WITH (format = 'json', path = '/a');\n"
    "CREATE STREAM B (k BIGINT, ts TIMESTAMP) WITH (format = 'json', path = '/b');\n"
    "CREATE SINK j WITH (format = 'json', path = '/j');\n"
    "INSERT INTO j SELECT a.k AS k FROM A a JOIN B b ON a.k = b.k;\n"
)


def _add(seq: int, name: str) -> Change:
    text = (
        f"CREATE SINK {name} WITH (format = 'json', path = '/{name}');\n"
        f"INSERT INTO {name} SELECT b.k AS k FROM A a JOIN B b ON a.k < b.k"
    )
    return Change(seq, "add", name, text)


def test_adds_and_drops_give_the_job_each_batch_runs() -> None:
    queries = QuerySet().apply(_add(1, "x"), 3).apply(_add(2, "y"), 3)
    queries = queries.apply(Change(3, "drop", "q1"), 4).apply(Change(4, "drop", "x"), 5)
    assert queries == QuerySet(
        seq=4, added=(("y", _add(2, "y").text),), dropped=("q1",), since=(("y", 3),)
    )
    assert [q.name for q in queries.job(JOB).queries] == ["y"]
    assert QuerySet.of(queries.to_dict()) == queries
    assert QuerySet.of({}) == QuerySet()


@given(st.lists(st.tuples(st.sampled_from(["x", "y", "q1"]), st.integers(0, 9)), max_size=8))
def test_the_manifest_keeps_any_set(steps: list[tuple[str, int]]) -> None:
    """Each step adds the named query if the set lacks it, else drops it."""
    queries = QuerySet()
    for seq, (name, batch) in enumerate(steps, start=1):
        names = {q.name for q in queries.job(JOB).queries}
        change = Change(seq, "drop", name) if name in names else _add(seq, name)
        if name == "q1" and name not in names:
            continue  # (the job file's query is not added back by a file)
        queries = queries.apply(change, batch)
    assert QuerySet.of(queries.to_dict()) == queries
    assert Change.from_json(_add(7, "x").to_json()) == _add(7, "x")


def test_a_token_is_needed_beyond_loopback() -> None:
    assert not needs_token("127.0.0.1") and not needs_token("::1")
    assert needs_token("0.0.0.0") and needs_token("192.0.2.7")


def test_history_durations() -> None:
    assert parse_history("90s") == 90_000_000 and parse_history("1.5h") == 5_400_000_000
    assert parse_history("all") is None and parse_history("0") == 0
    for bad in ("10", "ten minutes", "-1s"):
        with pytest.raises(argparse.ArgumentTypeError, match="--history"):
            parse_history(bad)
