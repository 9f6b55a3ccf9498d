"""The plan-epoch log: which partitioning is in force for which batches.

An epoch is a partitioning scheme and its parameters, in force from its first batch up to the
batch before the next epoch's first batch (the batch id is the epoch clock). Controllers propose
epochs that start at a future batch; rows are stored under the epoch of the batch that brought
them, and stay under it until they expire or are migrated (CLASH, AJoin; Squall's epochs). The
log is generic: the runtime maps ``scheme_name`` and ``params`` onto partition scheme objects.

Example:
    >>> log = EpochLog([Epoch(0, "matrix", {"n": 8, "m": 8})])
    >>> log.propose(log.at(0).successor(5, n=4, m=16))
    >>> log.at(4).params, log.at(5).params
    ({'n': 8, 'm': 8}, {'n': 4, 'm': 16})
"""

from __future__ import annotations

import bisect
import copy
import typing as t
from dataclasses import dataclass, field

from streamjoin.adapt import _codec

if t.TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

ParamValue = int | float | list[float]
"""An epoch parameter: a count (units, n, m), a number, or a list of numbers (unit ids,
weights). JSON-able, so the log can live in the runtime's manifest."""

_KIND = "epoch-log"
_VERSION = 1


@dataclass(frozen=True)
class Epoch:
    """A partitioning in force from batch `first_batch` on, until the next epoch starts.

    Attributes:
        first_batch: the first batch stored under this epoch (>= 0).
        scheme_name: which partitioning scheme ("matrix", "biclique", "hash", ...).
        params: the scheme's parameters; copied on construction, so the caller's dict and lists
            can change afterwards without changing the epoch.
    """

    first_batch: int
    scheme_name: str
    params: dict[str, ParamValue] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.first_batch < 0:
            msg = f"an epoch starts at a batch id >= 0, got {self.first_batch}"
            raise ValueError(msg)
        if not self.scheme_name:
            msg = "an epoch needs a scheme name"
            raise ValueError(msg)
        for key, value in self.params.items():
            if not _is_param(value):
                msg = (
                    f"epoch parameter {key!r} must be a number or a list of numbers, got {value!r}"
                )
                raise ValueError(msg)
        object.__setattr__(self, "params", copy.deepcopy(dict(self.params)))

    def successor(
        self, first_batch: int, scheme_name: str | None = None, **updates: ParamValue
    ) -> Epoch:
        """An epoch from `first_batch` on with this one's parameters, `updates` applied (and
        `scheme_name` changed, if given)."""
        return Epoch(first_batch, scheme_name or self.scheme_name, {**self.params, **updates})

    def to_dict(self) -> dict[str, t.Any]:
        """A JSON-able dict; `from_dict` reads it back."""
        return {
            "first_batch": self.first_batch,
            "scheme_name": self.scheme_name,
            "params": copy.deepcopy(self.params),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, t.Any]) -> Epoch:
        """The epoch `to_dict` wrote."""
        params = data.get("params")
        if not isinstance(params, dict):
            msg = f"state key 'params' must be an object, got {params!r}"
            raise ValueError(msg)
        return cls(_codec.get_int(data, "first_batch"), _codec.get_str(data, "scheme_name"), params)


def _is_param(value: object) -> bool:
    def number(v: object) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool)

    return number(value) or (isinstance(value, list) and all(number(v) for v in value))


class EpochLog:
    """Epochs in order of their first batch (strictly increasing), each in force until the next.

    Args:
        epochs: the initial epochs, in order (usually one, starting at batch 0).
    """

    __slots__ = ("_epochs",)

    def __init__(self, epochs: Iterable[Epoch] = ()) -> None:
        self._epochs: list[Epoch] = []
        for epoch in epochs:
            self.propose(epoch)

    @property
    def epochs(self) -> tuple[Epoch, ...]:
        """All epochs, oldest first."""
        return tuple(self._epochs)

    @property
    def last(self) -> Epoch:
        """The newest epoch (possibly not in force yet)."""
        if not self._epochs:
            msg = "the epoch log is empty"
            raise LookupError(msg)
        return self._epochs[-1]

    def __len__(self) -> int:
        return len(self._epochs)

    def at(self, batch: int) -> Epoch:
        """The epoch in force for `batch`: the last one whose first batch is <= `batch`."""
        i = bisect.bisect_right([e.first_batch for e in self._epochs], batch)
        if i == 0:
            first = self._epochs[0].first_batch if self._epochs else None
            msg = f"no epoch is in force for batch {batch}: " + (
                "the log is empty" if first is None else f"the first starts at batch {first}"
            )
            raise LookupError(msg)
        return self._epochs[i - 1]

    def propose(self, epoch: Epoch, *, committed: int | None = None) -> None:
        """Append `epoch`.

        Args:
            epoch: the new epoch; it must start after the last epoch's first batch.
            committed: the last committed batch, if known; the epoch must then start after it,
                since a committed batch's rows are already stored under the old epoch.

        Raises:
            ValueError: naming both batch ids when `epoch` starts too early.
        """
        if self._epochs and epoch.first_batch <= self._epochs[-1].first_batch:
            msg = (
                f"an epoch proposed to start at batch {epoch.first_batch} must start after the "
                f"last epoch, which starts at batch {self._epochs[-1].first_batch}"
            )
            raise ValueError(msg)
        if committed is not None and epoch.first_batch <= committed:
            msg = (
                f"an epoch proposed to start at batch {epoch.first_batch} must start after the "
                f"last committed batch {committed}"
            )
            raise ValueError(msg)
        self._epochs.append(epoch)

    def update(
        self,
        first_batch: int,
        params: Mapping[str, ParamValue],
        *,
        scheme_name: str | None = None,
        committed: int | None = None,
    ) -> Epoch:
        """Change parameters from `first_batch` on, merging changes that start at one batch.

        When the last epoch already starts at `first_batch` (another controller changed the plan
        for the same batch, e.g. the other side's scale step), it is replaced by itself with
        `params` applied; otherwise the last epoch's successor is appended. Either way the epoch
        must start after `committed`, the last committed batch, when given.

        Returns:
            The epoch now starting at `first_batch`.
        """
        last = self.last
        if committed is not None and first_batch <= committed:
            msg = (
                f"a change proposed to start at batch {first_batch} must start after the last "
                f"committed batch {committed}"
            )
            raise ValueError(msg)
        if last.first_batch == first_batch:
            merged = last.successor(first_batch, scheme_name, **params)
            self._epochs[-1] = merged
            return merged
        epoch = last.successor(first_batch, scheme_name, **params)
        self.propose(epoch)
        return epoch

    def live(self, oldest_live_batch: int) -> tuple[Epoch, ...]:
        """Epochs that may still own state: those in force for some batch >= `oldest_live_batch`
        (the oldest batch whose rows are still stored), including epochs not yet started."""
        starts = [e.first_batch for e in self._epochs]
        i = max(bisect.bisect_right(starts, oldest_live_batch) - 1, 0)
        return tuple(self._epochs[i:])

    def prune(self, oldest_live_batch: int) -> tuple[Epoch, ...]:
        """Drop and return the epochs that no longer own state (see `live`)."""
        keep = self.live(oldest_live_batch)
        dropped = tuple(self._epochs[: len(self._epochs) - len(keep)])
        self._epochs = list(keep)
        return dropped

    def to_dict(self) -> dict[str, t.Any]:
        """A JSON-able dict; `from_dict` reads it back."""
        return {
            "kind": _KIND,
            "version": _VERSION,
            "epochs": [e.to_dict() for e in self._epochs],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, t.Any]) -> EpochLog:
        """The log `to_dict` wrote."""
        _codec.check_kind(data, _KIND, _VERSION)
        return cls(Epoch.from_dict(e) for e in _codec.get_list(data, "epochs"))

    def __repr__(self) -> str:
        return f"EpochLog({self._epochs!r})"
