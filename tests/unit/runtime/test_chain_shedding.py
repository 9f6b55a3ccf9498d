"""A multi-way query shedding on the operator's chain (`runtime.multiway.chain`): each level's
counted pairs go to the direction that wrote them, an input or the combinations of the inputs
before it, and a combination's probes are the pairs the level below made."""

from __future__ import annotations

import itertools
import typing as t
from types import SimpleNamespace

from streamjoin.plan import plan_job
from streamjoin.plan.chain import directions, plan_chain, routes
from streamjoin.runtime.batch.shedding import Shed
from streamjoin.runtime.multiway.chain import ChainJoins
from streamjoin.sql import parse_job
from tests.spark.streams import stream_ddl

NEAR = "{0}.ts BETWEEN {1}.ts - INTERVAL '2' SECOND AND {1}.ts + INTERVAL '2' SECOND"
QUERY = " ".join(
    [
        "A a",
        *(
            f"JOIN {n.upper()} {n} ON {n}.k = {m}.k AND {NEAR.format(n, m)}"
            for m, n in itertools.pairwise("abcd")
        ),
    ]
)


def test_each_levels_pairs_go_to_the_side_that_wrote_them() -> None:
    text = "\n".join(stream_ddl(s) for s in "ABCD")
    text += "\nCREATE SINK o WITH (format = 'json', path = '/out');\n"
    text += f"INSERT INTO o SELECT a.id AS i FROM {QUERY} WITH (overload = 'shed');"
    job = parse_job(text)
    (mp,) = plan_job(job).multiway
    chain = plan_chain(job, mp)
    aliases = ["a", "b", "c", "d"]
    assert directions(chain, aliases) == (("a", "b"), ("a+b", "c"), ("a+b+c", "d"))
    ways = routes(chain, aliases)
    assert ways == {"a": ("a+b", "a+b+c"), "b": ("a+b", "a+b+c"), "c": ("a+b+c",), "d": ()}
    counts = {level.key: (10 * n + 1, 10 * n + 2) for n, level in enumerate(chain.levels)}
    levels = SimpleNamespace(shed_counts=lambda spark, key, batch: counts[key])
    joins = ChainJoins(t.cast("t.Any", levels))
    shed = Shed(mp.query, dict.fromkeys(aliases, 1.0), routes=ways)
    joins._shed = {mp.query.name: (shed, chain)}
    (got,) = joins.take_shed(t.cast("t.Any", SimpleNamespace(spark=None, batch_id=3))).values()
    assert got.found == {"a": 1, "b": 2, "a+b": 11, "c": 12, "a+b+c": 21, "d": 22}
    assert got.fed == {"a+b": 3, "a+b+c": 23}
