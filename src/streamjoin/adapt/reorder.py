"""CLASH's reconfiguration by epochs: statistics per epoch, a new plan two epochs later.

An epoch is `length` consecutive batches (epoch e holds batches ``e * length`` to
``(e + 1) * length - 1``). During epoch e the controller counts each stream's on-time rows.
When epoch e ends, the optimizer runs on those rates, and the probe orders it picks take effect
at the first batch of epoch e + 2: the plan of epoch e + 1 was already fixed (and may already be
running on other workers) when e's statistics became complete. Orders only change how a batch
finds its results, never which results: the delta rule is exact under any probe order, and no
stored row moves, so a change needs no migration.

Example (epochs of 2 batches; the optimizer here just ranks streams by rate):
    >>> def optimize(rates):
    ...     return {"q": {0: tuple(sorted((1, 2), key=lambda i: rates.get("ab"[i - 1], 0)))}}
    >>> c = ReorderController(length=2, initial={"q": {0: (1, 2)}})
    >>> for batch, rows in enumerate([{"a": 9, "b": 1}, {"a": 9, "b": 1}, {}, {}, {}]):
    ...     note = c.after_batch(batch, rows, optimize)
    >>> [c.orders_at(b)["q"][0] for b in range(6)]
    [(1, 2), (1, 2), (1, 2), (1, 2), (2, 1), (2, 1)]
"""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field

if t.TYPE_CHECKING:
    from collections.abc import Callable, Mapping

Orders = dict[str, dict[int, tuple[int | tuple[int, ...], ...]]]
"""Per query, per starting input position: the stores of the other inputs, in probe order: an
input's position, or the positions of the inputs an MIR store joins (`plan.probeorder.Target`)."""


@dataclass
class ReorderController:
    """Epoch statistics in, probe orders with the batch they start at out.

    Attributes:
        length: batches per epoch (>= 1).
        initial: the orders in force from batch 0.
        rows: on-time rows per stream counted so far in the current epoch.
        epochs: (first batch, orders) in force from that batch on, in batch order.
    """

    length: int
    initial: Orders
    rows: dict[str, int] = field(default_factory=dict)
    epochs: list[tuple[int, Orders]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.length < 1:
            msg = f"an epoch is at least one batch long, got {self.length}"
            raise ValueError(msg)

    def orders_at(self, batch: int) -> Orders:
        """The orders in force for `batch`."""
        current = self.initial
        for first, orders in self.epochs:
            if first <= batch:
                current = orders
        return current

    def after_batch(
        self,
        batch: int,
        rows: Mapping[str, int],
        optimize: Callable[[dict[str, float]], Orders],
    ) -> str:
        """Count the batch's rows; at an epoch's last batch, plan epoch + 2. A note says what
        changed (empty when nothing did)."""
        for stream, n in rows.items():
            self.rows[stream] = self.rows.get(stream, 0) + n
        if (batch + 1) % self.length:
            return ""
        epoch = batch // self.length
        rates = {s: max(n, 1) / self.length for s, n in self.rows.items()}
        self.rows = {}
        first = (epoch + 2) * self.length
        orders = optimize(rates)
        if orders == self.orders_at(first):
            return ""
        # A replay of the batch may propose again: the newer proposal replaces the older.
        self.epochs = [(b, o) for b, o in self.epochs if b < first] + [(first, orders)]
        return f"new probe orders from batch {first} (epoch {epoch + 2})"

    def prune(self, batch: int) -> None:
        """Fold the epochs started by `batch` into `initial` (keeps the manifest small)."""
        past = [orders for first, orders in self.epochs if first <= batch]
        if past:
            self.initial = past[-1]
            self.epochs = [(b, o) for b, o in self.epochs if b > batch]

    def to_dict(self) -> dict[str, t.Any]:
        """JSON-able form (for the manifest)."""
        return {
            "length": self.length,
            "initial": _dump(self.initial),
            "rows": dict(self.rows),
            "epochs": [[b, _dump(o)] for b, o in self.epochs],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, t.Any]) -> ReorderController:
        """Inverse of `to_dict`."""
        return cls(
            int(data["length"]),
            _load(data["initial"]),
            {str(k): int(v) for k, v in data.get("rows", {}).items()},
            [(int(b), _load(o)) for b, o in data.get("epochs", [])],
        )


def _dump(orders: Orders) -> dict[str, dict[str, list[t.Any]]]:
    return {
        q: {str(s): [x if isinstance(x, int) else list(x) for x in o] for s, o in by.items()}
        for q, by in orders.items()
    }


def _load(data: Mapping[str, Mapping[str, list[t.Any]]]) -> Orders:
    return {
        q: {
            int(s): tuple(int(x) if isinstance(x, int) else tuple(x) for x in o)
            for s, o in by.items()
        }
        for q, by in data.items()
    }
