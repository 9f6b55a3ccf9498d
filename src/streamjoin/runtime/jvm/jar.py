"""The jar of streamjoin's Java classes, compiled on first use against the Spark it runs with.

The sources beside this module, by Java package:

- ``operator/``: the join operator, state kept per partition in executor memory across batches
  (``JoinIndex`` with its sides and probe, ``PlacedIndex`` on a cluster's executors), the rows of
  a batch as its input (``BatchInput``), the writes of a batch's rows into sinks (``JointWrite``,
  ``BatchWrite``) and the rows GROUP BY queries hold for their open windows (``GroupRows``);
- ``loop/``: the engine's own micro-batch loop's scan of new files (``BatchScan``) and the figures
  it publishes to Spark's progress (``ProgressFigures``);
- ``localfs/``: Hadoop's local file system without a process per file (`runtime.local`).

They are compiled with the Java compiler that ships in Spark's jars (janino, so a JRE is
enough) into a jar in streamjoin's cache directory, once per Spark and set of sources. The jar
is not optional: it holds the join operator, so a jar that cannot be built stops the driver's
start with the cause (`build_jar`); ``STREAMJOIN_LOCAL=off`` starts without it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import tempfile
import typing as t
import zipfile
from importlib import resources

from streamjoin.errors import StreamJoinError

CLASS_PATH = "spark.driver.extraClassPath"
_SOURCES = (
    "localfs/LocalFiles.java",
    "operator/JoinIndex.java",
    "operator/IndexRows.java",
    "operator/IndexPart.java",
    "operator/IndexSide.java",
    "operator/IndexProbe.java",
    "operator/ProbePairs.java",
    "operator/BatchInput.java",
    "operator/BatchStreams.java",
    "operator/ChainProbe.java",
    "operator/BatchWrite.java",
    "operator/JointWrite.java",
    "operator/GroupRows.java",
    "operator/HeldCopies.java",
    "operator/PaneFold.java",
    "operator/PlacedIndex.java",
    "operator/PlacedProbe.java",
    "operator/PlacedLoad.java",
    "operator/DrainVetoes.java",
    "operator/PlainRdd.java",
    "operator/SpillFile.java",
    "operator/SpilledRows.java",
    "operator/OuterSlots.java",
    "operator/PairTest.java",
    "operator/SideColumns.java",
    "operator/ParallelPairs.java",
    "operator/OuterMarks.java",
    "operator/SharedMarks.java",
    "operator/ProbeCounts.java",
    "operator/IndexLoad.java",
    "operator/ProbeWork.java",
    "loop/ProgressFigures.java",
    "loop/FiguresSource.java",
    "loop/BatchScan.java",
)
_COMPILER = "org.codehaus.commons.compiler.samples.CompilerDemo"


def cache_dir() -> str:
    """Where the jar is kept: ``$XDG_CACHE_HOME/streamjoin`` (``~/.cache/streamjoin``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "streamjoin")


def placed_index_conf(settings: t.Mapping[str, str], jar: t.Callable[[], str]) -> dict[str, str]:
    """The settings that put the jar on the class path of a cluster's driver and executors,
    for the indexes kept on the executors (``PlacedIndex.java``), and let a task wait longer for
    the executor that holds its partition."""
    path = jar()
    prior, jars = settings.get(CLASS_PATH), settings.get("spark.jars")
    out = {
        CLASS_PATH: f"{prior}{os.pathsep}{path}" if prior else path,
        "spark.jars": f"{jars},{path}" if jars else path,
    }
    # A probe task waits this long for its partition's owner before Spark runs it elsewhere,
    # where it fails (3 s by default: an owner busy with a backlog's long tasks is not gone).
    return out | ({} if LOCALITY_WAIT in settings else {LOCALITY_WAIT: "10s"})


LOCALITY_WAIT = "spark.locality.wait.process"


def build_jar(java: str, spark_home: str, directory: str | None = None) -> str:
    """The jar of the Java sources beside this module compiled against `spark_home`'s jars, in
    `directory` (default: the cache directory), built unless there. A `StreamJoinError` with the
    cause when it cannot be built; a failed compile is not tried again until the sources or
    Spark's jars change."""
    directory = directory or cache_dir()
    here = resources.files("streamjoin.runtime.jvm")
    sources = {name: here.joinpath(name).read_bytes() for name in _SOURCES}
    jars = os.path.join(spark_home, "jars")
    names = sorted(os.listdir(jars)) if os.path.isdir(jars) else []
    # (The sources' paths too: a class moved to another package is another jar.)
    named = b"\0".join(n.encode() + b"\0" + s for n, s in sources.items())
    text = named + "\0".join(names).encode()
    key = hashlib.sha256(text).hexdigest()[:16]
    path = os.path.join(directory, f"streamjoin-{key}.jar")
    if os.path.exists(path):
        return path
    if os.path.exists(path + ".failed"):
        with open(path + ".failed", encoding="utf-8") as f:
            raise _not_built(f.read(), path + ".failed")
    try:
        os.makedirs(directory, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=directory, prefix=".jar-") as work:
            _compile(java, sources, [os.path.join(jars, n) for n in names], work)
            # (A link fails rather than replace a jar another session published meanwhile.)
            with contextlib.suppress(FileExistsError):
                os.link(os.path.join(work, "streamjoin.jar"), path)
    except (OSError, subprocess.SubprocessError, CompileError) as err:
        if isinstance(err, CompileError):
            with open(path + ".failed", "w", encoding="utf-8") as f:
                f.write(str(err))
        raise _not_built(
            str(err), path + ".failed" if isinstance(err, CompileError) else None
        ) from err
    return path


def _not_built(cause: str, marker: str | None) -> StreamJoinError:
    """The error of a jar that could not be built for `cause` (a failed compile's `marker`,
    which keeps it from being tried again, named for a retry)."""
    again = f"; remove {marker} to try again" if marker else ""
    return StreamJoinError(
        f"streamjoin's Java classes (the join operator) could not be built: {cause}{again}. "
        "STREAMJOIN_LOCAL=off starts Spark without them, every join on the slower cached path"
    )


class CompileError(Exception):
    """Spark's Java compiler did not compile the Java sources."""


def _compile(java: str, sources: t.Mapping[str, bytes], class_path: list[str], work: str) -> None:
    """Compile `sources` (by file name) against `class_path` into ``streamjoin.jar`` in `work`."""
    java_files = []
    for name, source in sources.items():
        java_files.append(os.path.join(work, "src", name))
        os.makedirs(os.path.dirname(java_files[-1]), exist_ok=True)
        with open(java_files[-1], "wb") as f:
            f.write(source)
    classes = os.path.join(work, "classes")
    os.makedirs(classes)
    jars = os.pathsep.join(class_path)
    command = [java, "-cp", jars, _COMPILER, "-d", classes, "-classpath", jars, *java_files]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    compiled = [
        os.path.relpath(os.path.join(d, n), classes)
        for d, _, files in os.walk(classes)
        for n in files
        if n.endswith(".class")
    ]
    if done.returncode != 0 or not compiled:
        lines = (done.stderr or done.stdout).strip().splitlines() or [f"exit {done.returncode}"]
        msg = f"compiling {', '.join(sources)} with Spark's janino failed: {lines[-1]}"
        raise CompileError(msg)
    # Fixed timestamps: the same source and compiler make the same jar.
    with zipfile.ZipFile(os.path.join(work, "streamjoin.jar"), "w") as jar:
        jar.writestr(zipfile.ZipInfo("META-INF/MANIFEST.MF"), "Manifest-Version: 1.0\n")
        for name in sorted(compiled):
            with open(os.path.join(classes, name), "rb") as f:
                jar.writestr(zipfile.ZipInfo(name.replace(os.sep, "/")), f.read())
