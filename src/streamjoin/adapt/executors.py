"""Executors for the load: BiStream's elastic scaling (`adapt.elastic`) over a cluster's
executors, so that added units get cores of their own.

BiStream grows a group of units when their load passes T_h for N checks in a row and shrinks it
below T_l, to the count that brings the load to Ψ (Eq. 7). Here a check is a committed batch, the
units are executors, and an executor's load is the share of the wall time the batches kept the
cluster busy: all of it while batches run back to back (input waiting for the executors, the
backlog growing), less the pauses otherwise. Three
batches in a row above 0.8 ask for ⌈k·load / 0.6⌉ executors, and three below 0.3 give back
what the load does not need. The runtime (`runtime.executors`) asks the cluster manager for them
and sets the processor's units to their cores.

No batch counts during a stabilization period after the start and after each change (as Flink's
autoscaler's ``job.autoscaler.stabilization.interval``): a run's first batches are slow while its
JVMs compile the batches' code, and executors just asked for or given back take seconds to come
and go; either would read as load the run does not have.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streamjoin.adapt.elastic import ElasticController


@dataclass
class ExecutorScaling:
    """The executor count of one run, between `least` and `most`, started at `least`."""

    least: int
    most: int
    confirmations: int = 3
    high: float = 0.8
    low: float = 0.3
    target: float = 0.6
    stabilization: float = 30.0
    """Seconds after the start and after each change whose batches do not count."""
    drain_wait: float = 120.0
    """Seconds of idle batches a scale-in waits for a drain at most (a batch that would take
    the wait past it counts): then it goes ahead, and
    the index is built again (one batch's pause) rather than an idle run holding executors
    for as long as a window of an hour takes to pass its rows."""
    _ctl: ElasticController = field(init=False, repr=False)
    _settling: float = field(init=False, repr=False)
    """Seconds left of the current stabilization period."""
    _busy: float = field(init=False, repr=False, default=0.0)
    """The load of the last batch that counted."""
    _waited: float = field(init=False, repr=False, default=0.0)
    """Seconds of idle batches that waited for the drain under way (`drain_wait`)."""

    def __post_init__(self) -> None:
        if not 1 <= self.least <= self.most:
            msg = f"executors: need 1 <= least <= most, got {self.least} and {self.most}"
            raise ValueError(msg)
        if self.drain_wait < 0:
            msg = f"executors: the wait for a drain must be >= 0 s, got {self.drain_wait}"
            raise ValueError(msg)
        if self.stabilization < 0:
            msg = f"executors: the stabilization period must be >= 0 s, got {self.stabilization}"
            raise ValueError(msg)
        self._ctl = ElasticController(
            "executors",
            self.least,
            max_units=self.most,
            min_units=self.least,
            high=self.high,
            low=self.low,
            target=self.target,
            confirmations=self.confirmations,
        )
        self._settling = self.stabilization

    @property
    def executors(self) -> int:
        """The executors asked for now."""
        return len(self._ctl.units)

    def observe(
        self, batch: int, seconds: float, interval: float, draining: bool = False
    ) -> int | None:
        """Take committed batch `batch`, busy `seconds` of the `interval` since the batch before
        ended; the new executor count from the next batch on, or None to keep it. A batch that
        ends in a stabilization period, or spans its end, does not count. With `draining` (the
        join operator's partitions still drain from the last change, and will empty), a batch
        below the low load does not count either, and breaks any streak: a scale-in waits for
        the drain to end, as a second change while one drains builds the index again (a
        pause), for `drain_wait` seconds of such batches at most; a scale-out does not wait.

        Example:
            >>> s = ExecutorScaling(1, 2, stabilization=4.0)
            >>> [s.observe(b, 1.0, 1.02) for b in range(4)]  # the start: settling
            [None, None, None, None]
            >>> [s.observe(b, 1.0, 1.02) for b in range(4, 7)]  # back to back: grow
            [None, None, 2]
            >>> [s.observe(b, 0.5, 4.0) for b in range(7, 11)]  # pauses: settle, then shrink
            [None, None, None, 1]
            >>> s = ExecutorScaling(1, 2, stabilization=0.0)
            >>> [s.observe(b, 1.0, 1.0) for b in range(3)]
            [None, None, 2]
            >>> [s.observe(b, 0.1, 1.0, draining=b < 8) for b in range(3, 11)]  # waits
            [None, None, None, None, None, None, None, 1]
            >>> s = ExecutorScaling(1, 2, stabilization=0.0, drain_wait=2.0)
            >>> [s.observe(b, 1.0, 1.0) for b in range(3)]
            [None, None, 2]
            >>> [s.observe(b, 0.1, 1.0, draining=True) for b in range(3, 8)]  # not for ever
            [None, None, None, None, 1]
        """
        if self._settling > 0:
            self._settling -= interval
            return None
        busy = min(seconds / interval, 1.0) if interval > 0 else 1.0
        idle = busy < self.low
        if draining and idle and self._waited + interval <= self.drain_wait:
            self._waited += interval
            self._ctl.interrupt()  # (nor does it keep a streak of batches behind going)
            return None
        if not draining:
            self._waited = 0.0
        self._busy = busy
        step = self._ctl.observe(batch, {unit: busy for unit in self._ctl.units})
        if step is None:
            return None
        self._settling, self._waited = self.stabilization, 0.0
        return len(step.units_after)

    def ahead(self) -> int | None:
        """While batches behind their trigger count towards a scale-out not yet confirmed: the
        executors it would ask for now (None: none under way). Asked for ahead, they register
        while the confirmations come (a cluster manager takes seconds to start one), and go
        back if the batches catch up first.

        Example:
            >>> s = ExecutorScaling(1, 3, stabilization=0.0)
            >>> s.observe(0, 1.0, 1.0), s.ahead()  # (one batch behind: ⌈1 · 1.0 / 0.6⌉)
            (None, 2)
            >>> s.observe(1, 0.5, 1.0), s.ahead()
            (None, None)
        """
        verdict, streak = self._ctl.streak
        if self._settling > 0 or verdict != "out" or not streak:
            return None
        want = self._ctl.wanted(dict.fromkeys(self._ctl.units, self._busy))
        return want if want > self.executors else None
