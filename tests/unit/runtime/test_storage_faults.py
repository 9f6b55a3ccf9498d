"""Storage faults told in one line (`runtime.storagefaults`): the path and the cause out of an
OSError, or out of the chain of a JVM error as Spark and Hadoop raise it; any other error is
left as it is."""

from __future__ import annotations

import errno

import pytest

from streamjoin.errors import StorageError
from streamjoin.runtime.storagefaults import storage_fault, told


class _Throwable:
    """A JVM throwable as py4j shows it: its text and its cause."""

    def __init__(self, text: str, cause: _Throwable | None = None) -> None:
        self.text, self.cause = text, cause

    def toString(self) -> str:
        return self.text

    def getCause(self) -> _Throwable | None:
        return self.cause


class _Py4JError(Exception):
    """py4j's error: its own text repeats the JVM's trace, its `java_exception` is the JVM's."""

    def __init__(self, java: _Throwable) -> None:
        super().__init__("An error occurred while calling o322.save. at org.apache /usr/lib/x")
        self.java_exception = java


def _one_line(fault: StorageError | None) -> str:
    assert fault is not None
    text = str(fault)
    assert "\n" not in text
    return text


def test_a_sink_write_on_a_full_disk_names_the_batch_directory() -> None:
    disk = _Throwable("java.io.IOException: No space left on device")
    chain = _Throwable(
        "org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing rows "
        "to file:/data/out/eq/batch=3. SQLSTATE: 58030",
        _Throwable("org.apache.hadoop.fs.FSError: java.io.IOException: No space left", disk),
    )
    text = _one_line(storage_fault(_Py4JError(chain), where="file:/ckpt"))
    assert text.startswith("cannot write file:/data/out/eq/batch=3: No space left on device.")
    assert "continue" in text


def test_spark_s_own_log_names_the_fallback_not_a_source_of_the_query() -> None:
    failure = _Throwable(
        "StreamingQueryException: Query [id = 1] terminated with exception: FSError\n"
        "=== Streaming Query ===\nFileStreamSource[file:/data/in/B]",
        _Throwable("org.apache.hadoop.fs.FSError: java.io.IOException: No space left on device"),
    )
    text = _one_line(storage_fault(jvm=failure, where="file:/ckpt/spark"))
    assert text.startswith("cannot write file:/ckpt/spark: No space left on device.")


def test_python_s_own_writes_name_the_file_a_temporary_was_to_become() -> None:
    err = OSError(errno.EROFS, "Read-only file system", "/ckpt/_lock/000000000002.json.41.99.tmp")
    text = _one_line(storage_fault(err))
    assert text.startswith("cannot write /ckpt/_lock/000000000002.json: Read-only file system.")
    renamed = OSError(errno.EXDEV, "Invalid cross-device link", "/a/7.json.tmp", None, "/b/7.json")
    assert _one_line(storage_fault(renamed)).startswith("cannot write /b/7.json: Invalid cross")


def test_a_failed_rename_in_hadoop_names_its_target() -> None:
    chain = _Throwable(
        "java.io.IOException: Failed to rename temp file file:/ckpt/spark/offsets/.4.tmp to "
        "file:/ckpt/spark/offsets/4 as rename returned false"
    )
    text = _one_line(storage_fault(_Py4JError(chain)))
    assert text.startswith("cannot write file:/ckpt/spark/offsets/4: a rename failed")


def test_other_errors_are_not_storage_faults() -> None:
    assert storage_fault(ValueError("no such column: pricee")) is None
    assert storage_fault(OSError(errno.ENOENT, "No such file or directory", "/x")) is None
    assert storage_fault(_Py4JError(_Throwable("AnalysisException: boom"))) is None
    with pytest.raises(KeyError), told("/ckpt"):
        raise KeyError("k")
    with pytest.raises(StorageError, match="cannot write /ckpt: No space"), told("/ckpt"):
        raise OSError(errno.ENOSPC, "No space left on device")
