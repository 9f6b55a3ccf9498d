"""State read back from a file stream's own input files (`runtime.state.sourcefiles`): the same
results as the copy in the checkpoint and as the reference, with late and malformed rows in the
files, each batch's delta read from its files too and the one join shuffled or not; and a file
gone from under the state stops the run, naming it."""

from __future__ import annotations

import random
import typing as t
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from streamjoin.errors import StreamJoinError
from streamjoin.plan import plan_job
from streamjoin.reference import normalize, run_reference
from streamjoin.runtime.engine import Engine
from streamjoin.runtime.state.checkpoint import Checkpoint
from streamjoin.runtime.state.footers import read_footers
from streamjoin.runtime.state.fs import FileStore
from streamjoin.runtime.state.manifest import Manifest, StateUnit
from streamjoin.runtime.state.sourcefiles import SourcedUnits
from streamjoin.sql import parse_job
from tests.e2e.files import write_batches
from tests.spark.harness import read_sink
from tests.spark.streams import make_batches, stream_ddl, ts

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

COLUMNS = ("aid", "bid")
WINDOW = timedelta(seconds=10)


def _job(root: Path, name: str, options: str = "", seconds: int = 3) -> str:
    streams = [
        stream_ddl(s, str(root / "in" / s)).replace(
            "WITH (", f"WITH (maxFilesPerTrigger = '1'{options}, "
        )
        for s in ("A", "B")
    ]
    return "\n".join(
        [
            *streams,
            f"CREATE SINK w WITH (format = 'parquet', path = '{root / 'out' / name}');",
            "INSERT INTO w SELECT a.id AS aid, b.id AS bid FROM A a JOIN B b ON a.k = b.k "
            f"AND b.ts BETWEEN a.ts - INTERVAL '{seconds}' SECOND "
            f"AND a.ts + INTERVAL '{seconds}' SECOND;",
        ]
    )


def _units(spark: SparkSession, checkpoint: Path) -> list[StateUnit]:
    """Every state unit any kept manifest lists."""
    store = Checkpoint(FileStore(spark), str(checkpoint))
    ids = sorted(int(m.stem) for m in (checkpoint / "manifests").glob("*.json"))
    return [u for i in ids for u in t.cast("Manifest", store.committed(i)).units]


def _with_late_row() -> tuple[list[dict[str, list[dict[str, object]]]], dict[str, object]]:
    """Six batches of A and B, and a row of A added to batch 4 just behind its watermark,
    where batch 5's rows of B would meet it if it came back as state (the row, returned)."""
    batches = make_batches(29, n_batches=6, rows_per_batch=14)

    def time(row: dict[str, object]) -> datetime:
        return t.cast("datetime", row["ts"])

    wm = min(max(time(r) for b in batches[:4] for r in b[s]) for s in "AB") - timedelta(seconds=2)
    late: dict[str, object] = {"id": 10**6, "k": 1, "x": 1.0, "s": "p", "ts": wm - WINDOW / 20}
    batches[4]["A"].append(late)
    assert any(r["k"] == 1 and abs(time(r) - time(late)) <= WINDOW for r in batches[5]["B"])
    return batches, late


def test_state_read_back_from_the_input_files_gives_the_reference_result(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Late rows and a malformed line sit in the files the state is read back from: none may
    # come back as state. One row is just behind the watermark of batch 4, where batch 5's
    # rows would meet it if it did.
    batches, late = _with_late_row()
    write_batches(tmp_path / "in", batches, extra_lines={(3, "A"): ['{"id": "x", "k": 1']})
    results = {}
    for name, options in (("sourced", ""), ("copied", ", state = 'copy'")):
        job = parse_job(_job(tmp_path, name, options, seconds=10), "<test>")
        Engine(spark).run(job, checkpoint=str(tmp_path / name), once=True, progress=False)
        results[name] = read_sink(spark, job, "w", COLUMNS)
        units = _units(spark, tmp_path / name)
        assert units, name
        kept = [u for u in units if u.files]
        if name != "copied":
            assert len(kept) == len(units)
            assert all(f.startswith("file:") and "/in/" in f for u in kept for f in u.files)
            # Nothing was copied into the checkpoint.
            assert not list((tmp_path / name / "state").glob("**/*.parquet"))
        else:
            assert not kept
    job = parse_job(_job(tmp_path, "x", seconds=10), "<test>")
    expected = run_reference(job, batches).outputs["q1"]
    assert not [pair for pair in expected if pair[0] == late["id"]]
    assert normalize(results["sourced"]) == normalize(expected)
    assert normalize(results["copied"]) == normalize(expected)
    assert expected


def test_an_input_file_gone_from_under_the_state_stops_the_run_naming_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    batches = make_batches(31, n_batches=4, rows_per_batch=10)
    write_batches(tmp_path / "in", batches[:3])
    job = parse_job(_job(tmp_path, "o"), "<test>")
    ckpt = tmp_path / "ckpt"
    Engine(spark).run(job, checkpoint=str(ckpt), once=True, progress=False)
    live = Checkpoint(FileStore(spark), str(ckpt)).latest().live("A")
    assert live and all(u.files for u in live)
    gone = Path("/" + live[-1].files[0].removeprefix("file:").lstrip("/"))
    gone.unlink()
    write_batches(tmp_path / "in", batches[3:], first=3)
    with pytest.raises(StreamJoinError, match="state = 'copy'") as err:
        Engine(spark).run(job, checkpoint=str(ckpt), once=True, progress=False)
    assert str(gone) in str(err.value)
    assert "is gone" in str(err.value)


def test_state_bounded_by_the_deltas_least_event_times_keeps_every_pair(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Parquet streams: each side's state is bounded by the *other* side's delta, from its files'
    footers (`runtime.state.footers`), not by the watermark alone. In batch 2 A's delta
    starts at 40 s and B's at 25 s, both far past the watermark (about 18 s): the A row at 16 s
    meets the B row at 25 s, and a bound taken from A's delta (40 - 10 s) or from B's latest
    time would drop it."""
    rng = random.Random(5)
    spans = [
        {"A": (0, 9), "B": (0, 9)},
        {"A": (10, 19), "B": (10, 19)},
        {"A": (40, 45), "B": (25, 30)},
    ]
    batches: list[dict[str, list[dict[str, object]]]] = []
    uid = 0
    for span in spans:
        batch: dict[str, list[dict[str, object]]] = {}
        for s, (lo, hi) in span.items():
            rows = []
            for _ in range(12):
                uid += 1
                when = ts(lo + rng.uniform(0, hi - lo))
                rows.append({"id": uid, "k": rng.randrange(3), "x": 1.0, "s": "p", "ts": when})
            batch[s] = rows
        batches.append(batch)
    batches[1]["A"].append({"id": 900, "k": 7, "x": 1.0, "s": "p", "ts": ts(16)})
    batches[2]["B"] += [
        {"id": 901, "k": 7, "x": 1.0, "s": "p", "ts": ts(25)},
        {"id": 902, "k": 0, "x": 1.0, "s": "p", "ts": ts(30)},
    ]
    write_batches(tmp_path / "in", batches, parquet=True)
    text = _job(tmp_path, "floor", seconds=10).replace("format = 'json'", "format = 'parquet'")
    job = parse_job(text, "<test>")
    ckpt = tmp_path / "ckpt"
    Engine(spark).run(job, checkpoint=str(ckpt), once=True, progress=False)
    units = _units(spark, ckpt)
    assert units and all(u.files for u in units)  # (read back from the input files)
    plan = plan_job(job)
    last = [f"file:{p}" for p in sorted((tmp_path / "in" / "B").glob("part-00002.parquet"))]
    footers = read_footers(plan.stream("B"), last)
    assert footers is not None
    assert footers.least == round(ts(25).replace(tzinfo=UTC).timestamp() * 1e6)
    expected = run_reference(job, batches).outputs["q1"]
    assert (900, 901) in {(p[0], p[1]) for p in expected}
    assert normalize(read_sink(spark, job, "w", COLUMNS)) == normalize(expected)


def test_a_restart_reads_the_units_whose_rows_were_all_ok_in_one_scan_and_no_late_row(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restart loads the join's index from the live units' files. The units whose files held
    only ok rows (`StateUnit.whole`) are read in one scan with no watermark's test; a unit
    whose files held a late row or a malformed line is read with its own batch's watermark, so
    neither comes back as state (batch 5's rows would meet the late one)."""
    batches, late = _with_late_row()
    write_batches(tmp_path / "in", batches[:5], extra_lines={(3, "A"): ['{"id": "x", "k": 1']})
    job = parse_job(_job(tmp_path, "r", seconds=10), "<test>")
    ckpt = tmp_path / "ckpt"
    Engine(spark).run(job, checkpoint=str(ckpt), once=True, progress=False)
    whole = {u.batch: u.whole for u in Checkpoint(FileStore(spark), str(ckpt)).latest().live("A")}
    assert whole[3] is False  # (a malformed line)
    assert whole[4] is False  # (the late row)
    assert sum(whole.values()) >= 2, whole

    scans: list[tuple[str, list[int]]] = []
    one_scan = SourcedUnits.whole_view

    def spied(
        self: SourcedUnits, spark: SparkSession, sp: t.Any, units: t.Any, views: t.Any
    ) -> str:
        scans.append((sp.name, sorted(u.batch for u in units)))
        return one_scan(self, spark, sp, units, views)

    monkeypatch.setattr(SourcedUnits, "whole_view", spied)
    write_batches(tmp_path / "in", batches[5:], first=5)
    Engine(spark).run(job, checkpoint=str(ckpt), once=True, progress=False)
    read = [units for name, units in scans if name == "A"]
    assert read and all(3 not in b and 4 not in b for b in read), scans
    assert max(len(b) for b in read) >= 2
    expected = run_reference(job, batches).outputs["q1"]
    assert not [pair for pair in expected if pair[0] == late["id"]]
    assert normalize(read_sink(spark, job, "w", COLUMNS)) == normalize(expected)
