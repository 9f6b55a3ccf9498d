"""Parse a job file (Flink-style SQL) into `streamjoin.model.Job`, using sqlglot."""

from __future__ import annotations

from streamjoin.sql.job import parse_job, parse_query_file

__all__ = ["parse_job", "parse_query_file"]
