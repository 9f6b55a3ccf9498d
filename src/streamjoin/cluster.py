"""A Spark standalone cluster on this machine: one master and N workers on 127.0.0.1.

Started from the PySpark wheel's ``bin/spark-class`` (the wheel has no ``start-master.sh``), each
daemon in its own process group, so that stopping the cluster ends exactly the processes it
started, and killing a worker's group also kills the executor JVMs it launched (they inherit the
group). ``<dir>/cluster.json`` records what was started; ``streamjoin cluster stop --dir D`` reads
it back in another process. From Python (starting a cluster takes 10-20 s)::

    with LocalCluster("/tmp/sj-cluster") as cluster:
        print(cluster.master_url)  # spark://127.0.0.1:40123, for --master
        cluster.kill_worker(0)     # SIGKILL a worker and its executors, as a machine failure
        cluster.start_worker(0)    # and back
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import typing as t
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from streamjoin.errors import StreamJoinError

if t.TYPE_CHECKING:
    from types import TracebackType

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
STATE_FILE = "cluster.json"
_TAG = "-Dstreamjoin.cluster.dir="


class ClusterError(StreamJoinError):
    """The cluster could not be started, found or reached."""


@dataclass
class Daemon:
    """One master or worker JVM: its process (and process group) id and its log file."""

    name: str
    pid: int
    log: str


def spark_home() -> Path:
    """The PySpark wheel's directory, which is a complete SPARK_HOME (``bin/``, ``jars/``)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        msg = "pyspark is not installed: pip install pyspark"
        raise ClusterError(msg)
    return Path(next(iter(spec.submodule_search_locations)))


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (another process may still take it first)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class LocalCluster:
    """A standalone master and `workers` workers, each with `cores` cores and `memory`.

    Everything lives under `directory`: ``logs/``, ``work/worker-<i>/`` (the workers' work dirs,
    with the executors' logs) and `STATE_FILE`.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        workers: int = 2,
        cores: int = 1,
        memory: str = "2g",
        host: str = "127.0.0.1",
    ) -> None:
        if workers < 1 or cores < 1:
            msg = f"a cluster needs at least one worker and one core (got {workers}, {cores})"
            raise ClusterError(msg)
        self.dir = Path(directory).resolve()
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.host = host
        self.port = 0
        self.webui_port = 0
        self.master: Daemon | None = None
        self.worker_daemons: list[Daemon | None] = [None] * workers
        self._procs: dict[int, subprocess.Popen[bytes]] = {}

    # -- addresses ------------------------------------------------------------------------------
    @property
    def master_url(self) -> str:
        """``spark://host:port``, for ``--master``."""
        return f"spark://{self.host}:{self.port}"

    @property
    def webui_url(self) -> str:
        """The master's web UI (its JSON is at ``/json/``)."""
        return f"http://{self.host}:{self.webui_port}"

    # -- life cycle -----------------------------------------------------------------------------
    def start(self, timeout: float = 120) -> LocalCluster:
        """Start the master and the workers; return once every worker has registered."""
        if (self.dir / STATE_FILE).exists() and LocalCluster.load(self.dir).alive():
            msg = f"a cluster is already running from {self.dir} (streamjoin cluster stop first)"
            raise ClusterError(msg)
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        for old in (self.dir / "logs").glob("*.log"):
            old.unlink()
        self.port, self.webui_port = free_port(self.host), free_port(self.host)
        try:
            self.master = self._spawn(
                "master",
                MASTER_CLASS,
                ["--host", self.host, "--port", str(self.port)],
                ["--webui-port", str(self.webui_port)],
            )
            self._save()
            # The workers' JVMs take seconds to start: launch them once the master's RPC port
            # is open rather than once its UI answers (a worker retries a refused registration
            # only after 5 to 15 s).
            self._wait(self._master_listens, "the master to start", timeout)
            for i in range(self.workers):
                self.start_worker(i, wait=False)
            self.wait_workers(self.workers, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def start_worker(self, index: int, *, wait: bool = True, timeout: float = 120) -> None:
        """(Re)start worker `index` (after `kill_worker`, say); with `wait`, until it registers."""
        work = self.dir / "work" / f"worker-{index}"
        work.mkdir(parents=True, exist_ok=True)
        before = self.alive_workers() if wait else 0
        self.worker_daemons[index] = self._spawn(
            f"worker-{index}",
            WORKER_CLASS,
            ["--host", self.host, "--cores", str(self.cores), "--memory", self.memory],
            # Port 0: the worker's RPC and UI ports are picked by the worker itself.
            ["--work-dir", str(work), "--port", "0", "--webui-port", "0", self.master_url],
        )
        self._save()
        if wait:
            self.wait_workers(before + 1, timeout)

    def kill_worker(self, index: int) -> None:
        """SIGKILL worker `index` and the executor JVMs it launched (a machine failure)."""
        daemon = self.worker_daemons[index]
        if daemon is None or not self._owned(daemon):
            msg = f"worker {index} is not running"
            raise ClusterError(msg)
        _signal_group(daemon.pid, signal.SIGKILL)
        self._reap(daemon.pid, 10)
        self.worker_daemons[index] = None
        self._save()

    def stop(self, timeout: float = 20) -> None:
        """Stop every daemon this cluster started: SIGTERM, then SIGKILL after `timeout` s."""
        daemons = [d for d in [*self.worker_daemons, self.master] if d and self._owned(d)]
        for d in daemons:
            _signal_group(d.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for d in daemons:
            if not self._reap(d.pid, max(0.0, deadline - time.monotonic())) and self._owned(d):
                _signal_group(d.pid, signal.SIGKILL)
                self._reap(d.pid, 10)
        # An executor may outlive its worker's SIGTERM for a moment; its group goes with it.
        # (A group id cannot be reused while a member lives, so a live group is still ours.)
        for d in daemons:
            if _group_members(d.pid):
                _signal_group(d.pid, signal.SIGKILL)
        self.master = None
        self.worker_daemons = [None] * self.workers
        with contextlib.suppress(FileNotFoundError):
            (self.dir / STATE_FILE).unlink()

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- status ---------------------------------------------------------------------------------
    def status(self) -> dict[str, t.Any]:
        """The master's view (its web UI's JSON: ``workers``, ``activeapps``, …)."""
        got = self._status()
        if got is None:
            msg = f"the master at {self.webui_url} does not answer"
            raise ClusterError(msg)
        return got

    def alive_workers(self) -> int:
        """Workers the master currently counts as ALIVE."""
        got = self._status() or {}
        return sum(1 for w in got.get("workers", []) if w.get("state") == "ALIVE")

    def wait_workers(self, n: int, timeout: float = 120) -> None:
        """Wait until `n` workers are ALIVE at the master."""
        self._wait(lambda: self.alive_workers() >= n, f"{n} workers to register", timeout)

    def alive(self) -> bool:
        """Whether the master process (as recorded) is still running."""
        return self.master is not None and self._owned(self.master)

    # -- persistence, for the CLI ---------------------------------------------------------------
    def _save(self) -> None:
        state = {
            "host": self.host,
            "port": self.port,
            "webui_port": self.webui_port,
            "workers": self.workers,
            "cores": self.cores,
            "memory": self.memory,
            "master": asdict(self.master) if self.master else None,
            "worker_daemons": [asdict(d) if d else None for d in self.worker_daemons],
        }
        tmp = self.dir / f"{STATE_FILE}.tmp"
        tmp.write_text(json.dumps(state, indent=1), encoding="utf-8")
        tmp.replace(self.dir / STATE_FILE)

    @staticmethod
    def load(directory: str | os.PathLike[str]) -> LocalCluster:
        """The cluster started from `directory` (by this or another process)."""
        path = Path(directory).resolve() / STATE_FILE
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            msg = f"no cluster was started from {path.parent} (no {STATE_FILE})"
            raise ClusterError(msg) from None
        cluster = LocalCluster(
            path.parent,
            workers=state["workers"],
            cores=state["cores"],
            memory=state["memory"],
            host=state["host"],
        )
        cluster.port, cluster.webui_port = state["port"], state["webui_port"]
        cluster.master = Daemon(**state["master"]) if state["master"] else None
        cluster.worker_daemons = [Daemon(**d) if d else None for d in state["worker_daemons"]]
        return cluster

    # -- helpers --------------------------------------------------------------------------------
    def _spawn(self, name: str, cls: str, args: list[str], more: list[str]) -> Daemon:
        home = spark_home()
        log = self.dir / "logs" / f"{name}.log"
        env = {
            **os.environ,
            "SPARK_HOME": str(home),
            "SPARK_LOCAL_IP": self.host,
            # The tag marks the JVMs as this cluster's, so a stale pid is never signalled. The
            # daemons only schedule: the quick JIT and the serial collector cut what they cost
            # to start (the daemons' code is not what a job waits for).
            "SPARK_DAEMON_JAVA_OPTS": (
                "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC "
                + os.environ.get("SPARK_DAEMON_JAVA_OPTS", "")
                + f' "{_TAG}{self.dir}"'
            ).strip(),
            # Spark 4 opens the master's REST submission server on the fixed port 6066 by
            # default: two clusters on one machine would collide, and nothing here submits
            # through it.
            "SPARK_MASTER_OPTS": (
                os.environ.get("SPARK_MASTER_OPTS", "") + " -Dspark.master.rest.enabled=false"
            ).strip(),
            # Executors start Python (if ever) with this; the driver's own choice wins per app.
            "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
        }
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [str(home / "bin" / "spark-class"), cls, *args, *more],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.dir,
                # Own session and process group: signals reach this daemon and its children only.
                start_new_session=True,
            )
        self._procs[proc.pid] = proc
        return Daemon(name, proc.pid, str(log))

    def _owned(self, daemon: Daemon) -> bool:
        """Whether `daemon` is still ours to signal: a child of this process, or (for a cluster
        loaded from its state file) a group that still holds a JVM tagged with this directory."""
        return daemon.pid in self._procs or _group_is_ours(daemon.pid, self.dir)

    def _reap(self, pid: int, timeout: float) -> bool:
        """Wait up to `timeout` s for `pid` to exit; whether it did."""
        proc = self._procs.pop(pid, None)
        if proc is not None:
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._procs[pid] = proc
                return False
            return True
        deadline = time.monotonic() + timeout
        while _pid_running(pid):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def _master_listens(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=1):
                return True
        except OSError:
            return False

    def _status(self) -> dict[str, t.Any] | None:
        if not self.webui_port:
            return None
        try:
            with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=5) as resp:
                return t.cast("dict[str, t.Any]", json.loads(resp.read().decode("utf-8")))
        except (OSError, ValueError):
            return None

    def _wait(self, done: t.Callable[[], bool], what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            for d in [self.master, *self.worker_daemons]:
                if d is not None and d.pid in self._procs and self._procs[d.pid].poll() is not None:
                    msg = f"spark {d.name} exited while waiting for {what}:\n{_tail(d.log)}"
                    raise ClusterError(msg)
            if time.monotonic() > deadline:
                logs = "\n".join(
                    f"--- {d.name}:\n{_tail(d.log)}"
                    for d in [self.master, *self.worker_daemons]
                    if d is not None
                )
                msg = f"timed out after {timeout:.0f} s waiting for {what}\n{logs}"
                raise ClusterError(msg)
            time.sleep(0.3)


def _pid_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by its parent) counts as gone.
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
        return stat.rpartition(")")[2].split()[0] != "Z"
    return True


def _group_members(pgid: int) -> list[str]:
    """Command lines of the live processes in process group `pgid`."""
    out = subprocess.run(
        ["ps", "-eww", "-o", "pgid=,stat=,args="], capture_output=True, text=True, check=False
    ).stdout
    members = []
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[0] == str(pgid) and not parts[1].startswith("Z"):
            members.append(parts[2])
    return members


def _group_is_ours(pgid: int, directory: Path) -> bool:
    """Whether group `pgid` still holds a JVM this cluster started (not a recycled id)."""
    tag = f" {_TAG}{directory} "
    return any(tag in f" {args} " for args in _group_members(pgid))


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    # The daemons were started as group leaders, so their pid is their group id.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _tail(path: str, lines: int = 30) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])
