"""The benchmark report draws streamjoin's batches from the records its checkpoint kept: the
format of ``/history`` and `Serving.history`, drawn as `Serving.plot` draws them."""

from __future__ import annotations

import typing as t

from benchmarks.report_history import HISTORY_PLOT, history_case, history_plot
from streamjoin.runtime.metrics.record import BatchFigures

if t.TYPE_CHECKING:
    from pathlib import Path


def _records(n: int) -> list[dict[str, t.Any]]:
    return [
        BatchFigures(
            batch=b,
            time=1000.0 + b,
            seconds=0.5 + b / 10,
            phases={"join": 0.4, "commit": 0.1 + b / 10},
            rows_in={"a": 100, "b": 90},
            out={"q1": 30 + b},
            watermark=(990 + b) * 1_000_000,
            newest=(995 + b) * 1_000_000,
            state_rows={"a": 100 * (b + 1), "b": 90 * (b + 1)},
        ).to_dict()
        for b in range(n)
    ]


def _report(history: list[dict[str, t.Any]]) -> dict[str, t.Any]:
    engines = {"spark-native": {"engine": "spark-native"}, "streamjoin": {"history": history}}
    return {"cases": [{"case": "equi-10s", "engines": engines}]}


def test_the_first_case_with_a_history_is_drawn(tmp_path: Path) -> None:
    reports = {"equi": _report([]), "long": _report(_records(6))}
    found = history_case(reports)
    assert found is not None and found[0] == "long/equi-10s" and len(found[1]) == 6
    assert history_plot(reports, str(tmp_path)) == HISTORY_PLOT
    assert (tmp_path / HISTORY_PLOT).stat().st_size > 10_000


def test_reports_without_histories_draw_nothing(tmp_path: Path) -> None:
    assert history_plot({"equi": _report([])}, str(tmp_path)) is None
    assert not (tmp_path / HISTORY_PLOT).exists()
