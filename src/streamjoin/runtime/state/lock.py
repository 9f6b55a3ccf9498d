"""One run per checkpoint: a lock under ``<checkpoint>/_lock/`` with its owner and a heartbeat.

Each holder of the lock has a generation g, and two files: ``<g>.json`` says who holds it
(host, pid, user, since when; made create-exclusive and never rewritten) and ``<g>.beat`` its
last heartbeat, or that it was released. The newest generation is the lock. A run takes it by
creating generation g+1, which only one of several racing runs can do, and only when
generation g is free: released, its heartbeat older than `STALE_BEATS` intervals, or its
process gone from this machine. Generations only grow (a release keeps its files), so a run
that judged an older generation free can never take the lock beside a newer holder. A holder
that finds a newer generation than its own has lost the lock (another run took it over while
this one stalled), and commits nothing more (`check`).
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import socket
import threading
import time
import typing as t
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from streamjoin.errors import CheckpointInUseError, StreamJoinError

if t.TYPE_CHECKING:
    from collections.abc import Callable

    from streamjoin.runtime.state.fs import FileStore

HEARTBEAT_SECONDS = 5.0
"""How often a holder refreshes its heartbeat."""
STALE_BEATS = 6
"""Heartbeats a holder may miss before another run takes its lock over (30 s by default):
enough for a long garbage collection, short enough to restart after a machine died."""
_ATTEMPTS = 5
"""Rounds of look-then-take before a run gives up: each lost race shows a newer holder."""


@dataclass(frozen=True, slots=True)
class Owner:
    """Who holds (or held) a lock."""

    host: str
    pid: int
    user: str
    since: float
    """Seconds since the epoch when it took the lock."""
    machine: str = ""
    """The boot and process namespace of its pid: a pid is only known dead on the same one."""

    @staticmethod
    def me(clock: Callable[[], float] = time.time) -> Owner:
        """This process, now."""
        try:
            user = getpass.getuser()
        except (KeyError, OSError):  # (a uid with no name, in some containers)
            user = str(os.getuid())
        return Owner(socket.gethostname(), os.getpid(), user, clock(), _machine())

    def describe(self) -> str:
        """``pid 12 on host h (user u) since 2026-11-26 18:20:01 UTC``."""
        return f"pid {self.pid} on host {self.host} (user {self.user}) since {_utc(self.since)}"


def _utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _machine() -> str:
    """This boot of this machine and this pid namespace ('' where Linux's /proc cannot tell)."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip()
        return f"{boot}/{os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return ""


def pid_alive(pid: int) -> bool:
    """Whether process `pid` of this machine runs (a zombie, killed but not yet reaped, does
    not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # (another user's process)
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class CheckpointLock:
    """The lock of one checkpoint, held by this process from `take` to `release`.

    >>> lock = CheckpointLock.take(fs, "file:/data/ckpt")    # doctest: +SKIP
    >>> lock.check()                                         # doctest: +SKIP
    >>> lock.release()                                       # doctest: +SKIP

    `check` before each commit raises if another run took the lock over meanwhile.
    """

    def __init__(
        self,
        fs: FileStore,
        root: str,
        *,
        interval: float = HEARTBEAT_SECONDS,
        clock: Callable[[], float] = time.time,
        alive: Callable[[int], bool] = pid_alive,
    ) -> None:
        self.fs = fs
        self.root = root.rstrip("/")
        self.dir = f"{self.root}/_lock"
        self.interval = interval
        self._clock = clock
        self._alive = alive
        self.generation: int | None = None
        self.owner = Owner.me(clock)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lost: str | None = None
        self._confirmed: float | None = None
        """When this holder last wrote a heartbeat, having seen no newer generation."""

    @classmethod
    def take(cls, fs: FileStore, root: str, **kwargs: t.Any) -> CheckpointLock:
        """Take the lock of checkpoint `root` and keep it fresh in the background.

        Raises:
            CheckpointInUseError: a live run holds it (the message names it).
        """
        lock = cls(fs, root, **kwargs)
        lock.acquire()
        return lock

    def _path(self, generation: int, kind: str) -> str:
        return f"{self.dir}/{generation:012d}.{kind}"

    def _generations(self) -> list[int]:
        names = self.fs.list_names(self.dir)
        return sorted(int(n[:-5]) for n in names if n.endswith(".json") and n[:-5].isdigit())

    def _read(self, generation: int) -> tuple[Owner | None, dict[str, t.Any] | None]:
        """Generation `generation`'s owner and its last heartbeat (None: missing or being
        written)."""
        owner = beat = None
        with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
            owner = Owner(**json.loads(self.fs.read_text(self._path(generation, "json"))))
        with contextlib.suppress(OSError, ValueError):
            beat = json.loads(self.fs.read_text(self._path(generation, "beat")))
        return owner, beat

    def busy(self, owner: Owner, beat: dict[str, t.Any] | None) -> str | None:
        """Why `owner`'s lock (last heartbeat `beat`) still holds, or None if it is free."""
        if beat is not None and beat.get("released"):
            return None
        last = float(beat["at"]) if beat is not None else owner.since
        age = self._clock() - last
        if age > self.interval * STALE_BEATS:
            return None
        me = self.owner
        here = owner.machine and (owner.host, owner.machine) == (me.host, me.machine)
        if here and owner.pid != me.pid and not self._alive(owner.pid):
            return None
        return f"{owner.describe()}, last heartbeat {max(age, 0.0):.0f} s ago"

    def acquire(self) -> None:
        """Take the lock (see the module's docstring for how a race between runs ends).

        Raises:
            CheckpointInUseError: a live run holds it.
        """
        held = "a run that is taking it now"
        for attempt in range(_ATTEMPTS):
            generations = self._generations()
            top = generations[-1] if generations else -1
            if top >= 0:
                owner, beat = self._read(top)
                if owner is None or beat is None:
                    if attempt < _ATTEMPTS - 1:  # (being written: look again shortly)
                        time.sleep(0.2)
                        continue
                    if owner is None:
                        break
                reason = self.busy(owner, beat)
                if reason is not None:
                    held = reason
                    break
            mine = top + 1
            record = json.dumps(asdict(self.owner), sort_keys=True)
            if self.fs.create_new(self._path(mine, "json"), record):
                self.generation = mine
                self._write_beat()
                for old in generations:  # (older than the one judged free: no reader needs them)
                    self.fs.delete(self._path(old, "json"))
                    self.fs.delete(self._path(old, "beat"))
                self._thread = threading.Thread(
                    target=self._beating, name="streamjoin-lock", daemon=True
                )
                self._thread.start()
                return
        raise self._refusal(held)

    def _refusal(self, held: str) -> CheckpointInUseError:
        msg = (
            f"checkpoint {self.root} is in use by another run: {held}. Stop that run first; "
            f"a run that died leaves a lock that is taken over once its heartbeat is "
            f"{self.interval * STALE_BEATS:.0f} s old (at once on the same machine)"
        )
        return CheckpointInUseError(msg)

    def peek(self) -> None:
        """Refuse now if a live run holds the lock, without taking it (a lock being taken
        passes: `acquire` decides that race).

        Raises:
            CheckpointInUseError: a live run holds it.
        """
        generations = self._generations()
        if generations:
            owner, beat = self._read(generations[-1])
            held = self.busy(owner, beat) if owner is not None else None
            if held is not None:
                raise self._refusal(held)

    def _write_beat(self, *, released: bool = False) -> None:
        assert self.generation is not None
        now = self._clock()
        beat = {"at": now, "released": released}
        self.fs.write_text_atomic(self._path(self.generation, "beat"), json.dumps(beat))
        self._confirmed = now

    def _newer(self) -> str | None:
        """Who took the lock over from this holder, if anyone did."""
        assert self.generation is not None
        newer = [g for g in self._generations() if g > self.generation]
        if not newer:
            return None
        owner, _ = self._read(newer[-1])
        return owner.describe() if owner is not None else "another run"

    def beat(self) -> None:
        """One heartbeat: refresh it, unless another run took the lock over."""
        if self._lost is not None or self.generation is None:
            return
        self._lost = self._newer()
        if self._lost is None:
            self._write_beat()

    def _beating(self) -> None:
        while not self._stop.wait(self.interval):
            # A failed heartbeat is tried again at the next: the lock only goes stale after
            # STALE_BEATS of them fail in a row.
            with contextlib.suppress(Exception):
                self.beat()
            if self._lost is not None:
                return

    def check(self) -> None:
        """Raise if this run no longer holds the lock (call before committing a batch).

        Raises:
            StreamJoinError: another run took the lock over (named in the message).
        """
        # A takeover needs a heartbeat older than the stale age: within half of it (a margin
        # for the machines' clocks) none can have happened, and the commit lists nothing.
        recent = self._confirmed is not None and (
            self._clock() - self._confirmed < self.interval * STALE_BEATS / 2
        )
        if self._lost is None and self.generation is not None and not recent:
            self._lost = self._newer()
        if self._lost is not None:
            msg = (
                f"checkpoint {self.root}: another run took its lock over ({self._lost}) while "
                "this one was not heard from; this run stops without committing more"
            )
            raise StreamJoinError(msg)

    def release(self) -> None:
        """Stop the heartbeat and free the lock (a lock lost to another run stays theirs)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.generation is None or self._lost is not None:
            return
        # A release that cannot be written (a full disk) leaves a lock that another run on
        # this machine takes over at once, and any run after its heartbeat went stale.
        with contextlib.suppress(Exception):
            if self._newer() is None:
                self._write_beat(released=True)
        self.generation = None


class _LocalReads:
    """The reads `CheckpointLock.peek` makes, on ``file:`` paths without a JVM."""

    def list_names(self, path: str) -> list[str]:
        local = path[len("file:") :]
        return os.listdir(local) if os.path.isdir(local) else []

    def read_text(self, path: str) -> str:
        with open(path[len("file:") :], encoding="utf-8") as f:
            return f.read()


def refuse_if_held(checkpoint: str) -> None:
    """Refuse a local `checkpoint` (a path, or ``file:``) whose lock a live run holds, before
    Spark starts (the run takes the lock itself once it has); any other is left to the run.

    Raises:
        CheckpointInUseError: a live run holds it.
    """
    if checkpoint.startswith("file:"):
        rest = checkpoint[len("file:") :]
        local = rest[2:] if rest.startswith("///") else None if rest.startswith("//") else rest
    elif "://" in checkpoint or ":" in checkpoint.split("/", 1)[0]:
        local = None  # (another file system: only its run, through Hadoop, can tell)
    else:
        local = os.path.abspath(checkpoint)
    if local is not None:
        root = f"file:{os.path.normpath(local)}"  # (as Hadoop qualifies it)
        CheckpointLock(t.cast("FileStore", _LocalReads()), root).peek()
