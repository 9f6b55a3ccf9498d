"""Squall's adaptive join-matrix shape controller (Elseidy et al., PVLDB 2014, §4.1–4.2).

A join matrix of J units (J a power of two) is cut into n row and m column partitions, n·m = J;
each R tuple is stored by m units and each S tuple by n, so a unit's input and storage, the
input-load factor, is ``ILF = size_R·|R|/n + size_S·|S|/m`` (§3.3). The best (n, m) depends on
the ratio |R|/|S|, which drifts; this controller follows it.

Monitoring (Alg. 1). The controller keeps |R| and |S|, the totals at the last decision, and |ΔR|,
|ΔS|, the arrivals since. In Squall one of J reshufflers counts its own sample of the input and
adds J per local tuple; here the driver sees every micro-batch's exact counts, so ``scale`` is 1.
When only a sample is counted (one of k routers, or a 1/k row sample), pass ``scale=k``: each
observed row then counts as `scale` rows, as in Alg. 1's ``|ΔR| += J``.

Decision (Alg. 2 with the ε of footnote 1). After each committed batch: if ``|ΔR| ≥ ε·|R|`` or
``|ΔS| ≥ ε·|S|`` (one relation grew by a factor 1 + ε since the last decision), pick the (n, m)
of least ILF for the *updated* totals ``(|R| + |ΔR|, |S| + |ΔS|)`` over every power-of-two n,
so one decision can jump several factors of two (as Squall's ``TheoreticalAdvisorNew`` does);
then fold Δ into the totals and zero Δ. Decisions are suppressed during a warm-up, until the
scaled total of rows seen reaches `warmup` (Squall's ``DIP_FIRST_MIGRATION``); Δ keeps counting.

Guarantee (Theorem 4.1). With ε = 1, equal tuple sizes and |R|/|S| within [1/J, J] at the
decisions, the shape after every `observe` is within 1.25 of the optimal ILF for the current totals
(Δ included). The check runs after the batch's rows are counted, so this holds for any batch
size: between decisions both |ΔR| < |R| and |ΔS| < |S|, which is Lemma 4.3's simplex. What large
batches cost is elsewhere: the batch that crossed the trigger was stored under the old shape
(the new one takes effect at ``batch + 1``), so its ``Reshape.ilf_old`` may exceed 1.25 times the
optimum, and Lemma 4.2's one-step moves (hence Lemma 4.4's migration cost) no longer hold.
Unequal tuple sizes keep the bound when the ratio condition holds for ``size·count``, since the
trigger is scale-free; the paper's additive term ``max(τ_R, τ_S)`` comes from tuple-at-a-time
granularity, which the batch-end check does not have.

Example:
    >>> c = MatrixController(64, warmup=0)
    >>> c.shape
    (8, 8)
    >>> c.observe(0, 1_000, 1_000) is None  # balanced: (8, 8) is already optimal
    True
    >>> step = c.observe(1, 0, 63_000)  # S grew 64x in one batch: jump straight to (1, 64)
    >>> step.batch_effective, step.new_shape, step.ilf_new
    (2, (1, 64), 2000.0)
    >>> round(c.ilf_ratio(), 2)
    1.0
"""

from __future__ import annotations

import math
import typing as t
from dataclasses import dataclass

from streamjoin.adapt import _codec
from streamjoin.partition.cost import ilf, matrix_shapes, optimal_shape

if t.TYPE_CHECKING:
    from collections.abc import Mapping

Shape = tuple[int, int]
"""A join-matrix shape (n, m): n row partitions (of the left stream) times m column partitions."""

DEFAULT_WARMUP = 1000
"""Rows (scaled) before the first decision: Squall's ``DIP_FIRST_MIGRATION`` default."""

_KIND = "matrix-controller"
_VERSION = 1


@dataclass(frozen=True, slots=True)
class Reshape:
    """A decided change of the matrix shape.

    The new shape applies to rows stored from batch `batch_effective` on; rows stored before stay
    under `old_shape` (their epoch's shape) until they expire or are migrated.

    Attributes:
        batch_effective: first batch stored under `new_shape` (the deciding batch + 1).
        old_shape: the shape in force up to ``batch_effective - 1``.
        new_shape: the ILF-optimal shape for the totals below.
        left_total: |R| at the decision, Δ included (scaled rows).
        right_total: |S| at the decision, Δ included.
        ilf_old: ILF of `old_shape` for these totals.
        ilf_new: ILF of `new_shape` for these totals (the optimum).
    """

    batch_effective: int
    old_shape: Shape
    new_shape: Shape
    left_total: float
    right_total: float
    ilf_old: float
    ilf_new: float

    def params(self) -> dict[str, int]:
        """The new shape as epoch parameters ``{"n": n, "m": m}``."""
        return {"n": self.new_shape[0], "m": self.new_shape[1]}


@dataclass(frozen=True, slots=True)
class Decision:
    """One firing of the trigger, whether or not the shape changed.

    Attributes:
        batch: the batch whose arrivals fired the trigger.
        left_total: |R| after folding Δ in.
        right_total: |S| after folding Δ in.
        old_shape: the shape before the decision.
        new_shape: the shape chosen (equal to `old_shape` when that is already optimal).
        ilf_old: ILF of `old_shape` for the totals.
        ilf_optimal: the least ILF over all shapes for the totals (that of `new_shape`).
    """

    batch: int
    left_total: float
    right_total: float
    old_shape: Shape
    new_shape: Shape
    ilf_old: float
    ilf_optimal: float

    def to_dict(self) -> dict[str, t.Any]:
        """A JSON-able dict; `from_dict` reads it back."""
        return {
            "batch": self.batch,
            "left_total": self.left_total,
            "right_total": self.right_total,
            "old_shape": list(self.old_shape),
            "new_shape": list(self.new_shape),
            "ilf_old": self.ilf_old,
            "ilf_optimal": self.ilf_optimal,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, t.Any]) -> Decision:
        """The decision `to_dict` wrote."""
        return cls(
            batch=_codec.get_int(data, "batch"),
            left_total=_codec.get_float(data, "left_total"),
            right_total=_codec.get_float(data, "right_total"),
            old_shape=_codec.get_shape(data, "old_shape"),
            new_shape=_codec.get_shape(data, "new_shape"),
            ilf_old=_codec.get_float(data, "ilf_old"),
            ilf_optimal=_codec.get_float(data, "ilf_optimal"),
        )


def default_shape(units: int) -> Shape:
    """The square-ish starting shape: n = 2^⌊log2(J)/2⌋ ≤ m (e.g. (8, 8) for 64, (2, 4) for 8)."""
    shapes = matrix_shapes(units)
    return shapes[(len(shapes) - 1) // 2]


class MatrixController:
    """Squall's doubling rule for the (n, m) shape of one two-way join matrix (module docstring).

    State is explicit and small: the shape, |R|, |S|, |ΔR|, |ΔS|, the last observed batch and the
    decision log; `to_dict` / `from_dict` persist it in the runtime's manifest so that a restart
    replays the same decisions. Call `observe` exactly once per committed batch, in batch order.

    Args:
        units: J, the number of matrix cells (a power of two).
        epsilon: trigger fraction ε in (0, 1]; smaller decides more often (tighter ILF, more
            migrations). The 1.25 bound is proven for ε = 1 and holds a fortiori for smaller ε.
        warmup: no decision before the scaled rows seen (both sides) reach this many.
        size_left: bytes (or any weight) of a left tuple, size_R in the ILF.
        size_right: bytes of a right tuple, size_S.
        start: the initial shape; default `default_shape`.
        scale: each observed row counts as this many (see the module docstring).
    """

    __slots__ = (
        "_decisions",
        "_epsilon",
        "_last_batch",
        "_left_delta",
        "_left_total",
        "_right_delta",
        "_right_total",
        "_scale",
        "_shape",
        "_size_left",
        "_size_right",
        "_units",
        "_warmup",
    )

    def __init__(
        self,
        units: int,
        epsilon: float = 1.0,
        warmup: float = DEFAULT_WARMUP,
        size_left: float = 1.0,
        size_right: float = 1.0,
        start: Shape | None = None,
        scale: float = 1.0,
    ) -> None:
        shapes = matrix_shapes(units)  # rejects a J that is not a power of two
        if not 0.0 < epsilon <= 1.0:
            msg = f"epsilon must be in (0, 1] (Squall, footnote 1), got {epsilon}"
            raise ValueError(msg)
        if not warmup >= 0.0:
            msg = f"warmup must be >= 0 rows, got {warmup}"
            raise ValueError(msg)
        for name, value in (("size_left", size_left), ("size_right", size_right), ("scale", scale)):
            if not (value > 0.0 and math.isfinite(value)):
                msg = f"{name} must be a positive finite number, got {value}"
                raise ValueError(msg)
        shape = default_shape(units) if start is None else (int(start[0]), int(start[1]))
        if shape not in shapes:
            msg = f"start shape {start} is not one of the {units}-unit shapes {shapes}"
            raise ValueError(msg)
        self._units = units
        self._epsilon = float(epsilon)
        self._warmup = float(warmup)
        self._size_left = float(size_left)
        self._size_right = float(size_right)
        self._scale = float(scale)
        self._shape: Shape = shape
        self._left_total = 0.0
        self._right_total = 0.0
        self._left_delta = 0.0
        self._right_delta = 0.0
        self._last_batch: int | None = None
        self._decisions: list[Decision] = []

    @property
    def units(self) -> int:
        """J, the number of cells."""
        return self._units

    @property
    def epsilon(self) -> float:
        """The trigger fraction ε."""
        return self._epsilon

    @property
    def shape(self) -> Shape:
        """The latest decided shape (in force from the batch after the last decision)."""
        return self._shape

    @property
    def totals(self) -> tuple[float, float]:
        """(|R|, |S|) at the last decision (scaled rows)."""
        return self._left_total, self._right_total

    @property
    def deltas(self) -> tuple[float, float]:
        """(|ΔR|, |ΔS|): scaled rows observed since the last decision."""
        return self._left_delta, self._right_delta

    @property
    def current_totals(self) -> tuple[float, float]:
        """(|R| + |ΔR|, |S| + |ΔS|): everything observed so far."""
        return self._left_total + self._left_delta, self._right_total + self._right_delta

    @property
    def last_batch(self) -> int | None:
        """The last batch observed, or None before the first."""
        return self._last_batch

    @property
    def decisions(self) -> tuple[Decision, ...]:
        """Every decision so far, oldest first, including those that kept the shape."""
        return tuple(self._decisions)

    def ilf(self, totals: tuple[float, float] | None = None, shape: Shape | None = None) -> float:
        """ILF of `shape` (default the current one) for `totals` (default `current_totals`)."""
        r, s = self.current_totals if totals is None else totals
        n, m = self._shape if shape is None else shape
        return ilf(r, s, n, m, self._size_left, self._size_right)

    def optimal_ilf(self, totals: tuple[float, float] | None = None) -> float:
        """The least ILF over every allowed shape for `totals` (default `current_totals`)."""
        return min(self.ilf(totals, nm) for nm in matrix_shapes(self._units))

    def ilf_ratio(self, totals: tuple[float, float] | None = None) -> float:
        """ILF of the current shape over the optimal ILF, for `totals` (default
        `current_totals`); 1.0 when both totals are 0."""
        best = self.optimal_ilf(totals)
        return 1.0 if best == 0.0 else self.ilf(totals) / best

    def observe(self, batch: int, left_rows: int, right_rows: int) -> Reshape | None:
        """Count one committed batch's arrivals and decide (Alg. 1 then Alg. 2).

        Args:
            batch: the batch id; strictly greater than the previous call's.
            left_rows: rows the batch added to the left stream (R), before scaling.
            right_rows: rows added to the right stream (S), before scaling.

        Returns:
            The change of shape, effective from ``batch + 1``, or None when the trigger did not
            fire or the current shape is already optimal (either way a firing is logged in
            `decisions`).
        """
        if self._last_batch is not None and batch <= self._last_batch:
            msg = (
                f"batch {batch} observed after batch {self._last_batch}: observe each committed "
                "batch once, in order (a replay must restart from the persisted state)"
            )
            raise ValueError(msg)
        if left_rows < 0 or right_rows < 0:
            msg = f"row counts must be >= 0, got left={left_rows}, right={right_rows} in {batch}"
            raise ValueError(msg)
        self._last_batch = batch
        self._left_delta += left_rows * self._scale
        self._right_delta += right_rows * self._scale
        if not self._fires():
            return None
        totals = self.current_totals
        old = self._shape
        new = optimal_shape(*totals, self._units, self._size_left, self._size_right)
        ilf_old, ilf_new = self.ilf(totals, old), self.ilf(totals, new)
        if ilf_old <= ilf_new:
            new, ilf_new = old, ilf_old  # a tie is no reason to migrate
        self._left_total, self._right_total = totals
        self._left_delta = self._right_delta = 0.0
        self._shape = new
        self._decisions.append(Decision(batch, *totals, old, new, ilf_old, ilf_new))
        if new == old:
            return None
        return Reshape(batch + 1, old, new, *totals, ilf_old, ilf_new)

    def _fires(self) -> bool:
        r, s = self.current_totals
        if r + s < self._warmup:
            return False
        # "Grew by ε": an empty side that stays empty has not grown, so Δ must be positive; one
        # that receives its first rows has (a factor of infinity).
        eps = self._epsilon
        dr, ds = self._left_delta, self._right_delta
        return (dr > 0.0 and dr >= eps * self._left_total) or (
            ds > 0.0 and ds >= eps * self._right_total
        )

    def to_dict(self) -> dict[str, t.Any]:
        """Configuration and state as a JSON-able dict (`from_dict` restores it exactly)."""
        return {
            "kind": _KIND,
            "version": _VERSION,
            "units": self._units,
            "epsilon": self._epsilon,
            "warmup": self._warmup,
            "size_left": self._size_left,
            "size_right": self._size_right,
            "scale": self._scale,
            "shape": list(self._shape),
            "left_total": self._left_total,
            "right_total": self._right_total,
            "left_delta": self._left_delta,
            "right_delta": self._right_delta,
            "last_batch": self._last_batch,
            "decisions": [d.to_dict() for d in self._decisions],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, t.Any]) -> MatrixController:
        """The controller `to_dict` wrote, ready to observe the batch after `last_batch`."""
        _codec.check_kind(data, _KIND, _VERSION)
        c = cls(
            _codec.get_int(data, "units"),
            epsilon=_codec.get_float(data, "epsilon"),
            warmup=_codec.get_float(data, "warmup"),
            size_left=_codec.get_float(data, "size_left"),
            size_right=_codec.get_float(data, "size_right"),
            start=_codec.get_shape(data, "shape"),
            scale=_codec.get_float(data, "scale"),
        )
        c._left_total = _codec.get_float(data, "left_total")
        c._right_total = _codec.get_float(data, "right_total")
        c._left_delta = _codec.get_float(data, "left_delta")
        c._right_delta = _codec.get_float(data, "right_delta")
        c._last_batch = _codec.get_opt_int(data, "last_batch")
        c._decisions = [Decision.from_dict(d) for d in _codec.get_list(data, "decisions")]
        return c

    def __repr__(self) -> str:
        r, s = self.current_totals
        return (
            f"MatrixController(units={self._units}, shape={self._shape}, "
            f"rows=({r:g}, {s:g}), decisions={len(self._decisions)})"
        )
