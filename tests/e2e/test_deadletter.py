"""Malformed and late rows are counted and dead-lettered with a reason; good rows join exactly."""

from __future__ import annotations

import json
import typing as t

from streamjoin.reference import normalize, run_reference
from streamjoin.sql import parse_job
from tests.spark.streams import make_batches, stream_ddl

from .cli import streamjoin
from .files import read_json_rows, write_batches

if t.TYPE_CHECKING:
    from pathlib import Path

BAD_LINES = {
    (1, "A"): ['{"id": 9001, "k": 1, "x": 1.0, "s": "p", "ts": "2026-01-01T00:00:03"'],  # cut off
    (2, "A"): ['{"id": "not-a-number", "k": 1, "x": 1.0, "s": "p", "ts": "2026-01-01T00:00:04"}'],
    (3, "B"): ['{"id": 9003, "k": 1, "x": 1.0, "s": "p", "ts": null}'],  # NULL event time
    (4, "B"): ["this is not json at all"],
}


def test_malformed_and_late_rows_are_dead_lettered(tmp_path: Path) -> None:
    batches = make_batches(5, n_batches=6, rows_per_batch=10, late_per_batch=2)
    write_batches(tmp_path / "in", batches, extra_lines=BAD_LINES)
    dl_b = tmp_path / "dl-b"
    text = "\n".join(
        [
            stream_ddl("A", str(tmp_path / "in" / "A")).replace(
                "WITH (", "WITH (maxFilesPerTrigger = '1', "
            ),
            stream_ddl("B", str(tmp_path / "in" / "B")).replace(
                "WITH (", f"WITH (maxFilesPerTrigger = '1', deadletter = '{dl_b}', "
            ),
            f"CREATE SINK out WITH (format = 'json', path = '{tmp_path / 'out'}');",
            "INSERT INTO out SELECT a.id AS aid, b.id AS bid FROM A a JOIN B b "
            "ON a.k = b.k "
            "AND b.ts BETWEEN a.ts - INTERVAL '3' SECOND AND a.ts + INTERVAL '3' SECOND;",
        ]
    )
    (tmp_path / "job.sql").write_text(text, encoding="utf-8")
    ckpt = tmp_path / "ckpt"
    run = streamjoin("run", str(tmp_path / "job.sql"), "--once", "--checkpoint", str(ckpt))
    assert run.returncode == 0, run.stderr[-3000:]

    expected = run_reference(parse_job(text), batches)
    dead: dict[str, list[dict[str, object]]] = {}
    for stream, folder in (("A", ckpt / "deadletter" / "A"), ("B", dl_b)):
        dead[stream] = [
            json.loads(line)
            for part in sorted(folder.glob("batch=*/part-*.json"))
            for line in part.read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]
    kinds = {s: sorted(str(r["kind"]) for r in rows) for s, rows in dead.items()}
    late_a, late_b = len(expected.late["A"]), len(expected.late["B"])
    assert late_a > 0 and late_b > 0
    assert kinds["A"] == sorted(["malformed"] * 2 + ["late"] * late_a)
    assert kinds["B"] == sorted(["malformed"] * 2 + ["late"] * late_b)
    reasons = {str(r["reason"]) for rows in dead.values() for r in rows if r["kind"] == "malformed"}
    assert reasons == {"unparsable record or wrong type", "null event time"}
    raw = {str(r["record"]) for rows in dead.values() for r in rows}
    assert "this is not json at all" in raw
    late_ids = sorted(int(t.cast("int", r["id"])) for s in ("A", "B") for r in expected.late[s])
    dead_late_ids = sorted(
        int(json.loads(str(r["record"]))["id"])
        for rows in dead.values()
        for r in rows
        if r["kind"] == "late"
    )
    assert dead_late_ids == late_ids
    assert "malformed:   4" in run.stdout
    assert f"late:        {late_a + late_b}" in run.stdout

    got = read_json_rows(tmp_path / "out", ("aid", "bid"))
    assert normalize(got) == normalize(expected.outputs["q1"])
