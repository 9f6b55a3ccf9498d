"""Which queries may shed probes under overload, and the options that ask for it."""

from __future__ import annotations

import pytest

from streamjoin.errors import JobError, UnsupportedError
from streamjoin.plan import plan_job
from streamjoin.sql import parse_job
from tests.reference_cases import STREAMS

JOIN = (
    "FROM A a JOIN B b ON a.k = b.k "
    "AND b.ts BETWEEN a.ts - INTERVAL '2' SECOND AND a.ts + INTERVAL '2' SECOND"
)


def _plan(sql: str) -> None:
    plan_job(parse_job(f"{STREAMS}{sql};"))


def test_inner_joins_of_two_or_more_inputs_may_shed() -> None:
    _plan(f"INSERT INTO s SELECT a.id AS i {JOIN} WITH (overload = 'shed', budget = '1000')")
    _plan(f"INSERT INTO s SELECT a.id AS i {JOIN} WITH (overload = 'exact')")
    three = f"{JOIN} JOIN A c ON c.k = b.k AND c.ts BETWEEN b.ts AND b.ts + INTERVAL '1' SECOND"
    _plan(f"INSERT INTO s SELECT a.id AS i {three} WITH (overload = 'shed')")


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        (
            f"SELECT count(*) AS n {JOIN} GROUP BY window(a.ts, '2 seconds') "
            "WITH (overload = 'shed')",
            "groups' values would be wrong",
        ),
        (
            "SELECT a.id AS i FROM A a LEFT JOIN B b ON a.k = b.k AND b.ts BETWEEN a.ts AND "
            "a.ts + INTERVAL '1' SECOND WITH (overload = 'shed')",
            "without a partner",
        ),
        (
            f"SELECT a.id AS i {JOIN} WITH (overload = 'shed', partitioning = 'matrix')",
            "fixes a partitioning scheme",
        ),
        (f"SELECT a.id AS i {JOIN} WITH (budget = '10')", "budget applies with overload"),
        (
            f"SELECT a.id AS i {JOIN} WITH (freshness = '30 seconds')",
            "freshness applies with overload",
        ),
    ],
)
def test_shedding_is_refused_where_a_skipped_probe_makes_a_wrong_row(sql: str, why: str) -> None:
    with pytest.raises(UnsupportedError, match=why):
        _plan(f"INSERT INTO s {sql}")


def test_the_options_name_their_bad_values() -> None:
    with pytest.raises(JobError, match="overload must be 'exact' or 'shed', got 'drop'"):
        _plan(f"INSERT INTO s SELECT a.id AS i {JOIN} WITH (overload = 'drop')")
    with pytest.raises(JobError, match="freshness is a duration of whole seconds"):
        _plan(f"INSERT INTO s SELECT a.id AS i {JOIN} WITH (overload = 'shed', freshness = '30')")
    _plan(f"INSERT INTO s SELECT a.id AS i {JOIN} WITH (overload = 'shed', freshness = '1 minute')")
    with pytest.raises(UnsupportedError, match="freshness needs every input bounded"):
        ever = "FROM A a JOIN B b ON a.k = b.k WITH (overload = 'shed', freshness = '1 minute')"
        _plan(f"INSERT INTO s SELECT a.id AS i {ever}")
    with pytest.raises(UnsupportedError, match="freshness needs every input bounded"):
        # (b's rows meet every later a row: kept for good.)
        after = "FROM A a JOIN B b ON a.k = b.k AND b.ts <= a.ts"
        fresh = "WITH (overload = 'shed', freshness = '1 minute')"
        _plan(f"INSERT INTO s SELECT a.id AS i {after} {fresh}")
    with pytest.raises(JobError, match="budget is the probes a batch may make"):
        _plan(f"INSERT INTO s SELECT a.id AS i {JOIN} WITH (overload = 'shed', budget = '0.5')")
