"""SIGKILL a checkpointed run at several points; the restarted runs' total output is exact."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from streamjoin.reference import normalize, run_reference
from streamjoin.sql import parse_job
from tests.spark.streams import make_batches, stream_ddl

from .cli import streamjoin
from .files import read_json_rows, write_batches

COLUMNS = ("aid", "bid", "kx")
GROUPED = ("windowjoin", "rollup", "unmatched")


def _job(tmp_path: Path) -> str:
    text = "\n".join(
        [
            stream_ddl("A", str(tmp_path / "in" / "A")).replace(
                "WITH (", "WITH (maxFilesPerTrigger = '1', "
            ),
            stream_ddl("B", str(tmp_path / "in" / "B")).replace(
                "WITH (", "WITH (maxFilesPerTrigger = '1', "
            ),
            f"CREATE SINK eq WITH (format = 'json', path = '{tmp_path / 'out' / 'eq'}');",
            f"CREATE SINK band WITH (format = 'json', path = '{tmp_path / 'out' / 'band'}');",
            "INSERT INTO eq SELECT a.id AS aid, b.id AS bid, a.k AS kx FROM A a JOIN B b "
            "ON a.k = b.k "
            "AND b.ts BETWEEN a.ts - INTERVAL '3' SECOND AND a.ts + INTERVAL '3' SECOND;",
            "INSERT INTO band SELECT a.id AS aid, b.id AS bid, b.k AS kx FROM A a JOIN B b "
            "ON abs(a.x - b.x) <= 0.5 AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '4' SECOND;",
            # The operators before and after a join, killed alike: two streams' groups
            # joined on their window, a rollup of a join's groups per window, and an outer
            # join's rows without a partner.
            *(
                f"CREATE SINK {s} WITH (format = 'json', path = '{tmp_path / 'out' / s}');"
                for s in GROUPED
            ),
            "INSERT INTO windowjoin SELECT p.k AS aid, p.n AS bid, q.n AS kx FROM "
            "(SELECT k, count(*) AS n, window_start AS w FROM TABLE(TUMBLE(TABLE A, "
            "DESCRIPTOR(ts), INTERVAL '4' SECOND)) GROUP BY k, window_start, window_end) p "
            "JOIN (SELECT k, count(*) AS n, window_start AS w FROM TABLE(TUMBLE(TABLE B, "
            "DESCRIPTOR(ts), INTERVAL '4' SECOND)) GROUP BY k, window_start, window_end) q "
            "ON p.k = q.k AND p.w = q.w;",
            "INSERT INTO rollup SELECT g.k AS aid, count(*) AS bid, sum(g.n) AS kx FROM "
            "(SELECT a.k AS k, count(*) AS n FROM A a JOIN B b ON a.k = b.k "
            "AND b.ts BETWEEN a.ts - INTERVAL '1' SECOND AND a.ts + INTERVAL '1' SECOND "
            "GROUP BY window(b.ts, '2 seconds'), a.k) g GROUP BY g.k;",
            "INSERT INTO unmatched SELECT a.id AS aid, b.id AS bid, a.k AS kx "
            "FROM A a LEFT JOIN B b ON a.k = b.k "
            "AND b.ts BETWEEN a.ts - INTERVAL '1' SECOND AND a.ts;",
        ]
    )
    path = tmp_path / "job.sql"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_sigkill_at_three_points_then_more_input(tmp_path: Path) -> None:
    job_path = _job(tmp_path)
    ckpt = tmp_path / "ckpt"
    # (Six batches: the three kills fall in batches 1 to 3, batch 4 is left of the first input
    # and batch 5 is new; every sink has results in the batches after the kills.)
    batches = make_batches(11, n_batches=6, rows_per_batch=10)
    write_batches(tmp_path / "in", batches[:5])

    # Three kills at named points inside a batch (kills at random moments: `test_chaos`).
    for fault in ("after-state:1", "after-sink:2", "after-commit:3"):
        run = streamjoin(
            "run", job_path, "--once", "--checkpoint", str(ckpt), env={"STREAMJOIN_FAULT": fault}
        )
        assert run.returncode == -9, (fault, run.stderr[-2000:])

    # The restart after the last kill finds more input too: it runs the batches left of the
    # first input, then the new ones, where the killed run stopped.
    write_batches(tmp_path / "in", batches[5:], first=5)
    more = streamjoin("run", job_path, "--once", "--checkpoint", str(ckpt))
    assert more.returncode == 0, more.stderr[-3000:]
    assert "rows joined" in more.stdout
    assert (ckpt / "manifests" / f"{len(batches) - 1:012d}.json").exists()

    expected = run_reference(parse_job(Path(job_path).read_text(encoding="utf-8")), batches)
    sinks = {"eq": "q1", "band": "q2"} | {s: f"q{i}" for i, s in enumerate(GROUPED, start=3)}
    for sink, query in sinks.items():
        got = read_json_rows(tmp_path / "out" / sink, COLUMNS)
        assert normalize(got) == normalize(expected.outputs[query]), sink
        assert got, sink


def test_sigkill_after_sinks_their_probes_wrote_then_a_restart(tmp_path: Path) -> None:
    # Parquet in and out: each batch's probe makes its query's rows and writes them into the
    # sink itself (``BatchWrite.java``); the batch killed after its writes runs again and
    # replaces them.
    window = "b.ts BETWEEN a.ts - INTERVAL '3' SECOND AND a.ts + INTERVAL '3' SECOND"
    streams = [
        stream_ddl(s, str(tmp_path / "in" / s))
        .replace("format = 'json'", "format = 'parquet'")
        .replace("WITH (", "WITH (maxFilesPerTrigger = '1', ")
        for s in ("A", "B")
    ]
    sinks = {"eq": f"a.k = b.k AND {window}", "band": f"abs(a.x - b.x) <= 0.5 AND {window}"}
    text = "\n".join(
        [
            *streams,
            *(
                f"CREATE SINK {s} WITH (format = 'parquet', path = '{tmp_path / 'out' / s}');\n"
                f"INSERT INTO {s} SELECT a.id AS aid, b.id AS bid, a.k AS kx "
                f"FROM A a JOIN B b ON {on};"
                for s, on in sinks.items()
            ),
        ]
    )
    job_path = tmp_path / "job.sql"
    job_path.write_text(text, encoding="utf-8")
    ckpt = str(tmp_path / "ckpt")
    batches = make_batches(23, n_batches=4, rows_per_batch=10)
    write_batches(tmp_path / "in", batches, parquet=True)

    fault = {"STREAMJOIN_FAULT": "after-sink:2"}
    run = streamjoin("run", str(job_path), "--once", "--checkpoint", ckpt, env=fault)
    assert run.returncode == -9, run.stderr[-2000:]
    done = streamjoin("run", str(job_path), "--once", "--checkpoint", ckpt)
    assert done.returncode == 0, done.stderr[-3000:]

    expected = run_reference(parse_job(text), batches)
    for i, sink in enumerate(sinks, start=1):
        out = tmp_path / "out" / sink
        # (The probe's own file in every batch: the direct write ran, in both runs.)
        files = [out / f"batch={b}" / f"part-00000-b{b}.snappy.parquet" for b in range(4)]
        assert all(f.exists() for f in files), sink
        assert not list(out.glob("batch=*/.*.writing"))
        got = pq.read_table(out).select(list(COLUMNS)).to_pylist()
        rows = [tuple(r[c] for c in COLUMNS) for r in got]
        assert normalize(rows) == normalize(expected.outputs[f"q{i}"]), sink
        assert rows, sink
