"""How long a peer may run: the size's default, an override, none at all, and a bad value named
before any backlog is generated; which cases run (`--cases`)."""

from __future__ import annotations

import typing as t

import pytest

from benchmarks.harness import PEER_TIME_LIMIT, chosen, peer_time_limit, run_workload
from benchmarks.workloads import WORKLOADS
from streamjoin.cli import main

if t.TYPE_CHECKING:
    from pathlib import Path


def test_the_default_is_the_sizes_and_zero_means_no_limit() -> None:
    assert peer_time_limit("full") == PEER_TIME_LIMIT["full"] == 3600.0
    assert peer_time_limit("quick") == 60.0
    assert peer_time_limit("tiny") is None
    assert peer_time_limit("full", 0) is None
    assert peer_time_limit("quick", 12.5) == 12.5


def test_a_negative_limit_is_refused_with_its_value() -> None:
    with pytest.raises(ValueError, match=r"--peer-limit .* not -5"):
        run_workload("equi", "tiny", peer_limit=-5)


def test_peer_limit_with_rate_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "equi", "--tiny", "--rate", "100", "--peer-limit", "10"])
    assert code != 0
    assert "--peer-limit goes with a backlog run" in capsys.readouterr().err


def test_cases_keeps_those_named_and_names_them_all_when_none_is(tmp_path: Path) -> None:
    cases = WORKLOADS["window-growth"](str(tmp_path), "tiny")
    assert [c.name for c in chosen(cases, ["-1s", "band-100"])] == [
        "equi-1s",
        "band-1s",
        "band-100s",
    ]
    assert chosen(cases, []) == list(cases)
    with pytest.raises(ValueError, match=r"--cases nope; the cases: equi-1s, equi-10s"):
        chosen(cases, ["nope"])


def test_cases_refuses_an_empty_name_which_would_take_every_case(tmp_path: Path) -> None:
    cases = WORKLOADS["window-growth"](str(tmp_path), "tiny")
    with pytest.raises(ValueError, match=r"--cases equi-1s, has an empty name"):
        chosen(cases, ["equi-1s", ""])


def test_cases_starting_with_a_dash_parse_after_an_equals_sign(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # (--tiny and --rate refuse --cases before any run: the parse is what is checked)
    code = main(["bench", "equi", "--tiny", "--rate", "100", "--cases=-10s,-1s"])
    assert code != 0
    assert "--cases goes with a backlog run" in capsys.readouterr().err


def test_cases_with_rate_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "equi", "--tiny", "--rate", "100", "--cases", "equi"])
    assert code != 0
    assert "--cases goes with a backlog run" in capsys.readouterr().err
