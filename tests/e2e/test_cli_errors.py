"""The command line as a user meets it: clear job-file errors, explain, and missing Java."""

from __future__ import annotations

import os
import subprocess
import sys
import typing as t

import pytest

if t.TYPE_CHECKING:
    from pathlib import Path

GOOD = """\
CREATE STREAM bids (id BIGINT, price DOUBLE, ts TIMESTAMP,
                    WATERMARK FOR ts AS ts - INTERVAL '3' SECOND)
  WITH (format = 'json', path = '/tmp/none/bids');
CREATE STREAM asks (id BIGINT, price DOUBLE, ts TIMESTAMP,
                    WATERMARK FOR ts AS ts - INTERVAL '3' SECOND)
  WITH (format = 'json', path = '/tmp/none/asks');
CREATE SINK matches WITH (format = 'json', path = '/tmp/none/out');
INSERT INTO matches
SELECT b.id AS bid, a.id AS aid
FROM bids b JOIN asks a
  ON abs(b.price - a.price) <= 0.5
 AND a.ts BETWEEN b.ts - INTERVAL '10' SECOND AND b.ts + INTERVAL '10' SECOND;
"""


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streamjoin", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env or dict(os.environ),
    )


@pytest.mark.parametrize(
    ("broken", "where", "says"),
    [
        (GOOD.replace("b.price - a.price", "b.pricee - a.price"), ":11:12:", "pricee"),
        (GOOD.replace("JOIN asks a", "JOIN askz a"), ":10:18:", "askz"),
        (
            GOOD.replace("ON abs(b.price - a.price) <= 0.5", "ON abs(b.price - a.price)"),
            ":11:",
            "boolean",
        ),
        (
            GOOD.replace("FROM bids b JOIN", "FROM bids b LEFT JOIN").replace(
                "\n AND a.ts BETWEEN b.ts - INTERVAL '10' SECOND AND b.ts + INTERVAL '10' SECOND",
                "",
            ),
            ":8:1:",
            "a full-history outer join could never emit",
        ),
        (GOOD.replace("SELECT b.id AS bid", "SELECT b.id AS bid FROM"), ":9:", ""),
    ],
)
def test_job_file_errors_name_line_column_text(
    tmp_path: Path, broken: str, where: str, says: str
) -> None:
    job = tmp_path / "job.sql"
    job.write_text(broken, encoding="utf-8")
    for command in ("run", "explain"):
        result = _cli(command, str(job))
        assert result.returncode == 2, result.stderr
        assert f"{job}{where}" in result.stderr
        assert says in result.stderr
        assert "Traceback" not in result.stderr


def test_explain_shows_classification_and_storage(tmp_path: Path) -> None:
    job = tmp_path / "job.sql"
    job.write_text(GOOD, encoding="utf-8")
    result = _cli("explain", str(job))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "bands:         a.price - b.price in [-0.5, 0.5]" in out
    assert "window:        a.ts - b.ts in [-10s, +10s]" in out
    assert "band join by bucket equality" in out
    assert "dropped whole once all its rows are older" in out


def test_missing_java_is_one_clear_line(tmp_path: Path) -> None:
    job = tmp_path / "job.sql"
    job.write_text(GOOD, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)  # no java anywhere on it
    result = _cli("run", str(job), "--once", env=env)
    assert result.returncode == 3
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Java 17" in lines[0] and "apt-get install" in lines[0]
