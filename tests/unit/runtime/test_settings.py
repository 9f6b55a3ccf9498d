"""`Settings`: every key read once, a bad value named with its key, and the settings page's table in
step with the keys (no JVM: the reader takes a lookup function)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamjoin.errors import StreamJoinWarning
from streamjoin.runtime.settings import SETTINGS, Settings

TABLE = Path(__file__).resolve().parents[3] / "docs" / "settings.md"


def _read(conf: dict[str, str], env: dict[str, str] | None = None) -> Settings:
    return Settings.read(conf.get, env or {})


def test_defaults_are_the_documented_ones() -> None:
    assert _read({}) == Settings()
    assert SETTINGS["streamjoin.state.memory"].default == "auto" and Settings().memory == -1


def test_each_key_reaches_its_field() -> None:
    got = _read(
        {
            "streamjoin.state.memory": "64m",
            "streamjoin.hash.skewCheckEvery": "1",
            "streamjoin.hash.skewCheckSeconds": "0",
            "streamjoin.state.fromSource": "false",
            "streamjoin.multiway.optimizer": "greedy",
            "streamjoin.share": "false",
            "streamjoin.elastic.maxExecutors": "7",
            "streamjoin.batch.maxRows": "250000",
        },
        {"STREAMJOIN_LOCAL": "off", "STREAMJOIN_DEBUG": "1"},
    )
    assert got == Settings(
        memory=64 << 20,
        skew_check_every=1,
        skew_check_seconds=0,
        state_from_source=False,
        optimizer="greedy",
        share=False,
        max_executors=7,
        batch_rows=250_000,
        local=False,
        debug=True,
    )


def test_auto_is_a_count_where_a_key_takes_it() -> None:
    assert _read({"streamjoin.batch.maxRows": "AUTO"}).batch_rows == 0 == Settings().batch_rows
    with pytest.raises(ValueError, match=r"streamjoin\.elastic\.maxExecutors"):
        _read({"streamjoin.elastic.maxExecutors": "auto"})


def test_environment_keys_are_not_read_from_the_conf() -> None:
    assert _read({"STREAMJOIN_LOCAL": "off"}).local


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("streamjoin.hash.skewCheckEvery", "0", "at least 1"),
        ("streamjoin.hash.skewCheckSeconds", "-1", "at least 0"),
        ("streamjoin.state.memory", "many", "size in bytes"),
        ("streamjoin.state.memory", "1.5g", "size in bytes"),
        ("streamjoin.multiway.optimizer", "genetic", "'ilp', 'greedy'"),
        ("streamjoin.state.fromSource", "no", "'true', 'false'"),
        ("streamjoin.batch.maxRows", "0", "at least 1 or 'auto'"),
        ("streamjoin.batch.maxRows", "lots", "at least 1 or 'auto'"),
    ],
)
def test_a_bad_value_names_its_key_and_value(key: str, value: str, expected: str) -> None:
    with pytest.raises(ValueError, match=re.escape(key)) as err:
        _read({key: value})
    assert repr(value) in str(err.value)
    assert expected in str(err.value)


@given(st.text(max_size=6))
def test_any_text_for_a_count_is_a_count_or_a_named_error(value: str) -> None:
    try:
        got = _read({"streamjoin.elastic.maxExecutors": value})
    except ValueError as err:
        assert "streamjoin.elastic.maxExecutors" in str(err)
    else:
        assert got.max_executors == int(value.strip()) >= 0


def test_a_retired_key_is_named_in_a_warning() -> None:
    with pytest.warns(StreamJoinWarning, match="STREAMJOIN_LOCAL_FS is retired"):
        assert _read({}, {"STREAMJOIN_LOCAL_FS": "off"}) == Settings()
    with pytest.warns(StreamJoinWarning, match="streamjoin.warmup"):
        _read({"streamjoin.warmup": "false"})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("streamjoin.multiway.mirs", "false"),
        ("streamjoin.multiway.partitioned", "false"),
        ("streamjoin.multiway.routeRows", "1"),
    ],
)
def test_a_retired_multi_way_store_key_warns_and_changes_nothing(key: str, value: str) -> None:
    with pytest.warns(StreamJoinWarning, match=f"{re.escape(key)} is retired"):
        assert _read({key: value}) == Settings()


@pytest.mark.parametrize("key", ["streamjoin.twoway.share", "streamjoin.multiway.share"])
def test_a_retired_sharing_key_set_false_still_keeps_queries_apart(key: str) -> None:
    with pytest.warns(StreamJoinWarning, match=f"{key} is retired: streamjoin.share"):
        assert not _read({key: "false"}).share
    with pytest.warns(StreamJoinWarning):
        assert _read({key: "true"}).share
    assert _read({}).share and not _read({"streamjoin.share": "false"}).share


def test_the_settings_page_lists_every_key_once() -> None:
    text = TABLE.read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([A-Za-z_.]+)` \|", text, flags=re.MULTILINE)
    assert sorted(rows) == sorted(SETTINGS)
