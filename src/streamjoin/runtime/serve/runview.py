"""`RunView`: what ``streamjoin run --ui`` shows through the control endpoint — a run's figures,
queries and plan, read-only (its queries are the job file's: changes are `serve`'s)."""

from __future__ import annotations

import sys
import time
import typing as t
from dataclasses import dataclass

from streamjoin.errors import StreamJoinError
from streamjoin.runtime.progress import format_watermark

if t.TYPE_CHECKING:
    from collections.abc import Callable

    from streamjoin.plan import JobPlan
    from streamjoin.runtime.metrics.history import MetricsHistory
    from streamjoin.runtime.serve.http import ControlServer


@dataclass(frozen=True)
class Ui:
    """Where ``run --ui`` serves its dashboard (`runtime.serve.http.ControlServer`'s rules)."""

    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None


class RunView:
    """The read side of `Serving` for a job that `Engine.run` runs."""

    def __init__(self, plan: JobPlan, metrics: MetricsHistory, active: Callable[[], bool]) -> None:
        self._plan = plan
        self.metrics = metrics
        self._active = active
        self._started = time.monotonic()

    def status(self) -> dict[str, t.Any]:
        """`Serving.status`'s figures that a run has."""
        last = self.metrics.latest()
        return {
            "active": self._active(),
            "uptime_seconds": round(time.monotonic() - self._started, 3),
            "batches": self.metrics.serial,
            "last_batch": None if last is None else last.batch,
            "last_batch_seconds": None if last is None else round(last.seconds, 3),
            "rows_in": None if last is None else sum(last.rows_in.values()),
            "state_rows": None if last is None else sum(last.state_rows.values()),
            "watermark": format_watermark(None if last is None else last.watermark),
            "queries": len(self._plan.job.queries),
            "shared_joins": [[m.name for m in g.members] for g in self._plan.shared],
            "pending_changes": 0,
            "error": None,
        }

    def queries(self) -> list[dict[str, t.Any]]:
        """The job file's queries, as `Serving.queries` lists them."""
        last = self.metrics.latest()
        out = last.totals.get("out", {}) if last is not None else {}
        shared = {m.name: g for g in self._plan.shared for m in g.members}
        return [
            {
                "name": q.name,
                "sink": q.sink,
                "streams": [side.stream for side in q.sides],
                "state": "running",
                "since": None,
                "rows_out": out.get(q.name, 0),
                "shares_with": [m.name for m in shared[q.name].members if m.name != q.name]
                if q.name in shared
                else [],
                "sql": None,
            }
            for q in self._plan.job.queries
        ]

    def plan(self) -> str:
        """The plan, as ``streamjoin explain`` shows it."""
        return self._plan.explain()

    def add_query(self, sql: str, source: str = "<query>") -> dict[str, t.Any]:
        """Refused: a run's queries are its job file's."""
        msg = "this job runs with `streamjoin run`: its queries are fixed (`serve` takes changes)"
        raise StreamJoinError(msg)

    def drop_query(self, name: str) -> dict[str, t.Any]:
        """Refused, as `add_query`."""
        return self.add_query(name)

    def wait(self, change: int, timeout: float | None = None) -> bool:
        """No change ever applies."""
        return False


def serve_run(
    ui: Ui, plan: JobPlan, history: MetricsHistory, active: Callable[[], bool]
) -> ControlServer:
    """The endpoint of ``run --ui``, answering from now on; its address goes to stderr."""
    from streamjoin.runtime.serve.http import ControlServer

    server = ControlServer(RunView(plan, history, active), ui.host, ui.port, ui.token).start()
    print(f"dashboard: http://{ui.host}:{server.port}/", file=sys.stderr)
    return server
