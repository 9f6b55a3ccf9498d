"""RESULTS.md says which JVM flags and Spark settings each engine ran with, from the reports."""

from __future__ import annotations

from benchmarks.report_provenance import jvm_line, settings_line


def _report(**flags: str | None) -> dict[str, object]:
    engines = {name: {"jvm_flags": f} for name, f in flags.items()}
    return {"cases": [{"engines": engines}]}


def test_each_engine_names_its_flags_and_defaults_are_said_so() -> None:
    line = jvm_line(
        {
            "equi": _report(streamjoin="-XX:TieredStopAtLevel=1", **{"spark-native": "-XX:A"}),
            "band": _report(streamjoin="-XX:TieredStopAtLevel=1", **{"spark-foreach": ""}),
        }
    )
    assert "streamjoin `-XX:TieredStopAtLevel=1`;" in line
    assert "spark-native `-XX:A`" in line
    assert "spark-foreach the JVM's defaults" in line


def test_reports_that_disagree_show_every_setting() -> None:
    line = jvm_line({"a": _report(streamjoin="-XX:B"), "b": _report(streamjoin=None)})
    assert "streamjoin the JVM's defaults (or not recorded) / `-XX:B`" in line


def test_settings_over_the_defaults_are_named_per_engine() -> None:
    native = {"spark-native": {"settings": {"spark.x": "1"}}, "streamjoin": {"settings": {}}}
    line = settings_line({"equi": {"cases": [{"engines": native}]}})
    assert "spark-native `spark.x=1` (equi)" in line
    assert line.count("`") == 2  # (streamjoin took nothing over its defaults: not listed)
    bare = settings_line({"equi": {"cases": [{"engines": {"streamjoin": {}}}]}})
    assert bare == "Spark settings: every engine ran with streamjoin's local defaults."
