"""`FileStore` on local paths (Python's own calls) agrees with Hadoop's file system, in both
directions: what one writes the other reads, lists and deletes alike."""

from __future__ import annotations

import typing as t

from streamjoin.runtime.state.fs import FileStore

if t.TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import SparkSession


def _hadoop(spark: SparkSession, path: str) -> t.Any:
    jvm: t.Any = spark.sparkContext._jvm
    p = getattr(jvm, "org.apache.hadoop.fs.Path")(path)
    return p, p.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())


def _hadoop_write(spark: SparkSession, path: str, text: str) -> None:
    p, fs = _hadoop(spark, path)
    out = fs.create(p, True)
    try:
        out.write(bytearray(text.encode("utf-8")))
    finally:
        out.close()


def _hadoop_read(spark: SparkSession, path: str) -> str:
    p, fs = _hadoop(spark, path)
    stream = fs.open(p)
    try:
        data = getattr(spark.sparkContext._jvm, "org.apache.commons.io.IOUtils").toByteArray(stream)
    finally:
        stream.close()
    return bytes(data).decode("utf-8")


def test_local_paths_agree_with_hadoop(spark: SparkSession, tmp_path: Path) -> None:
    store = FileStore(spark)
    root = store.qualify(str(tmp_path))
    assert root.startswith("file:")
    manifest = f"{root}/manifests/7.json"

    # A first write makes its directories, as Hadoop's create does.
    store.write_text_atomic(f"{root}/state/b=0/m.json", "{}")
    assert _hadoop_read(spark, f"{root}/state/b=0/m.json") == "{}"

    # Hadoop writes first (with its checksum file beside), then the store replaces the text:
    # Hadoop must read the new text back, not fail on the old checksum.
    _hadoop_write(spark, manifest, '{"batch": 6}')
    assert (tmp_path / "manifests" / ".7.json.crc").exists()
    store.write_text_atomic(manifest, '{"batch": 7, "é": 1}')
    assert _hadoop_read(spark, manifest) == '{"batch": 7, "é": 1}'
    assert store.read_text(manifest) == '{"batch": 7, "é": 1}'
    assert not (tmp_path / "manifests" / "7.json.tmp").exists()

    # Listing hides checksum files, as Hadoop's does.
    _hadoop_write(spark, f"{root}/manifests/8.json", "{}")
    p, fs = _hadoop(spark, f"{root}/manifests")
    hadoop_names = sorted(str(s.getPath().getName()) for s in fs.listStatus(p))
    assert sorted(store.list_names(f"{root}/manifests")) == hadoop_names == ["7.json", "8.json"]
    assert store.list_names(f"{root}/missing") == []

    assert store.exists(manifest) and not store.exists(f"{root}/manifests/9.json")
    assert store.file_size(manifest) == len('{"batch": 7, "é": 1}'.encode())
    assert store.file_size(f"{root}/manifests/9.json") is None

    # Deleting a file takes its checksum file with it; deleting a directory, all of it.
    store.delete(f"{root}/manifests/8.json")
    assert not (tmp_path / "manifests" / ".8.json.crc").exists()
    assert not fs.exists(_hadoop(spark, f"{root}/manifests/8.json")[0])
    store.delete(f"{root}/manifests")
    store.delete(f"{root}/manifests")  # (absent: nothing to do)
    assert not (tmp_path / "manifests").exists()


def test_local_forms_of_a_path(tmp_path: Path) -> None:
    local = FileStore._local
    assert local(f"file:{tmp_path}/a") == f"{tmp_path}/a"
    assert local(f"file://{tmp_path}/a") == f"{tmp_path}/a"
    assert local("hdfs://nn:8020/a") is None
    assert local(f"{tmp_path}/a") is None


def test_paths_on_one_file_system(spark: SparkSession, tmp_path: Path) -> None:
    fs = FileStore(spark)
    here = str(tmp_path / "a")
    assert fs.qualify(here) == f"file:{here}" and fs.qualify(here) == fs.qualify(f"file://{here}")
    assert fs.same_system(here, f"file:{tmp_path}/b")
    assert fs.same_system(f"file://{here}", str(tmp_path))
