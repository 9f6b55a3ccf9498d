"""Unbounded state of file streams, copied into the checkpoint after each batch
(`runtime.state.copybehind`): the results are the reference's across restarts, the manifests
come to name the copies instead of the input files, the state then no longer needs those files,
and a copy that cannot be made stops the run, naming the file."""

from __future__ import annotations

import typing as t
from pathlib import Path

import pytest

from streamjoin.errors import StreamJoinError
from streamjoin.reference import normalize, run_reference
from streamjoin.runtime.engine import Engine
from streamjoin.runtime.state.checkpoint import Checkpoint
from streamjoin.runtime.state.copybehind import LAG
from streamjoin.runtime.state.fs import FileStore
from streamjoin.runtime.state.manifest import Manifest
from streamjoin.sql import parse_job
from tests.e2e.files import write_batches
from tests.spark.harness import read_sink
from tests.spark.streams import make_batches, stream_ddl

if t.TYPE_CHECKING:
    from pyspark.sql import SparkSession

COLUMNS = ("aid", "bid")


JOINS = {
    "AB": "FROM A a JOIN B b ON a.k = b.k",
    # (a multi-way query: a chain of levels on the operator, built from the same units)
    "ABC": "FROM A a JOIN B b ON a.k = b.k JOIN C c ON c.k = b.k AND c.x > b.x",
}


def _job(root: Path, streams: str = "AB") -> str:
    """A full-history equi join of JSON file streams `streams`, a file per batch."""
    ddl = [
        stream_ddl(s, str(root / "in" / s)).replace("WITH (", "WITH (maxFilesPerTrigger = '1', ")
        for s in streams
    ]
    return "\n".join(
        [
            *ddl,
            f"CREATE SINK w WITH (format = 'parquet', path = '{root / 'out'}');",
            f"INSERT INTO w SELECT a.id AS aid, b.id AS bid {JOINS[streams]};",
        ]
    )


def _latest(spark: SparkSession, checkpoint: Path) -> Manifest:
    return Checkpoint(FileStore(spark), str(checkpoint)).latest()


def _local(uri: str) -> Path:
    return Path("/" + uri.removeprefix("file:").lstrip("/"))


@pytest.mark.parametrize("streams", sorted(JOINS))
def test_unbounded_state_moves_from_the_input_files_to_copies(
    spark: SparkSession, tmp_path: Path, streams: str
) -> None:
    batches = make_batches(
        37, streams=tuple(streams), n_batches=9, rows_per_batch=12, late_per_batch=1
    )
    job = parse_job(_job(tmp_path, streams), "<test>")
    ckpt = tmp_path / "ckpt"
    write_batches(tmp_path / "in", batches[:4], extra_lines={(2, "A"): ['{"id": "x", "k": 1']})
    Engine(spark).run(job, checkpoint=str(ckpt), once=True, progress=False)
    write_batches(tmp_path / "in", batches[4:7], first=4)
    Engine(spark).run(job, checkpoint=str(ckpt), once=True, progress=False)

    manifest = _latest(spark, ckpt)
    units = [u for s in streams for u in manifest.live(s)]
    assert manifest.batch == 6 and len(units) == 7 * len(streams)  # (every batch's, stream's)
    # A batch's units are copies by the commit of the batch LAG after it; the first run's
    # were copied in the second run's first batches.
    copied = {u.batch for u in units if u.behind}
    assert copied >= set(range(manifest.batch - LAG + 1))
    for u in units:
        assert u.files
        if u.behind:  # (the files' copies, byte for byte, where the manifest says)
            copies = [_local(f) for f in u.files]
            assert all(c.parent == ckpt / u.path for c in copies)
            originals = [tmp_path / "in" / u.stream / c.name for c in copies]
            assert [c.read_bytes() for c in copies] == [o.read_bytes() for o in originals]
        else:
            assert all(_local(f).parent == tmp_path / "in" / u.stream for f in u.files)
    assert not list((ckpt / "state").glob("b=*"))  # (no copy in the batches themselves)

    # The copied batches' input files may go now: the state no longer reads them.
    for s in streams:
        for b in copied:
            (tmp_path / "in" / s / f"part-{b:05d}.json").unlink()
    write_batches(tmp_path / "in", batches[7:], first=7)
    Engine(spark).run(job, checkpoint=str(ckpt), once=True, progress=False)

    expected = run_reference(job, batches).outputs["q1"]
    assert expected
    assert normalize(read_sink(spark, job, "w", COLUMNS)) == normalize(expected)


def test_a_file_gone_before_its_copy_stops_the_run_naming_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    batches = make_batches(41, n_batches=4, rows_per_batch=10)
    job = parse_job(_job(tmp_path), "<test>")
    ckpt = tmp_path / "ckpt"
    write_batches(tmp_path / "in", batches[:3])
    Engine(spark).run(job, checkpoint=str(ckpt), once=True, progress=False)
    named = [u for u in _latest(spark, ckpt).live("A") if u.files]
    assert named  # (the last batch's unit: its copy came after the last commit)
    gone = _local(named[-1].files[0])
    gone.unlink()
    write_batches(tmp_path / "in", batches[3:], first=3)
    with pytest.raises(StreamJoinError) as err:
        Engine(spark).run(job, checkpoint=str(ckpt), once=True, progress=False)
    assert str(gone) in str(err.value)
    assert "is gone" in str(err.value)
