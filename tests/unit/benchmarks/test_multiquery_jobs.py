"""The multiquery benchmark's queries: distinct, planned by the ILP, sharing sub-joins."""

from __future__ import annotations

from benchmarks.multiquery_jobs import STREAMS, TEMPLATES, job_text, query_specs
from streamjoin.plan import plan_job
from streamjoin.sql import parse_job

PATHS = {name: f"/data/{name}" for name in STREAMS}


def test_hundred_queries_are_distinct_and_use_every_template() -> None:
    specs = query_specs(100, 10)
    assert len({(s.select, s.joins, s.filter) for s in specs}) == 100
    assert len({s.sink for s in specs}) == 100
    assert {s.template for s in specs} == {tpl.name for tpl in TEMPLATES}


def test_the_global_plan_shares_the_common_sub_joins() -> None:
    specs = query_specs(10, 10)
    job = parse_job(job_text(specs, PATHS, "/out"), "<multiquery>")
    assert [q.sink for q in job.queries] == [s.sink for s in specs]
    plan = plan_job(job, groups=())  # (CLASH's sharing alone: no query runs in a group)
    assert len(plan.multiway) == 10
    assert plan.clash is not None and not plan.clash.left_out
    shared = {str(s.step) for s in plan.clash.plan.shared}
    # orders ⋈ lineitem is in three templates: its probe steps run once for all of them.
    assert any("orders" in s and "lineitem" in s for s in shared)
    assert plan.clash.plan.load < plan.clash.plan.unshared_load


def test_a_query_alone_reads_only_its_streams() -> None:
    [spec] = query_specs(1, 10)
    job = parse_job(job_text([spec], PATHS, "/out"), "<one>")
    assert {s.name for s in job.streams} == set(spec.streams)


def test_queries_of_a_template_share_one_join() -> None:
    specs = query_specs(10, 10)
    job = parse_job(job_text(specs, PATHS, "/out"), "<multiquery>")
    plan = plan_job(job)
    grouped = [m.name for g in plan.cores for m in g.members]
    assert len(grouped) == len(set(grouped)) > 0
    # Each join a batch runs is a group's or a query's that runs alone.
    assert len(plan.multiway) == len(plan.cores) + len(job.queries) - len(grouped)
    template = {q.name: s.template for q, s in zip(job.queries, specs, strict=True)}
    assert all(len({template[m.name] for m in g.members}) == 1 for g in plan.cores)
