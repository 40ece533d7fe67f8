"""Metric names (``rlpulse.naming``): a counter's rate name; the module's docstring examples test the rest (``pytest src/rlpulse/naming.py``)."""

from __future__ import annotations

from rlpulse.naming import RATE_NAMES, rate_name


def test_rate_names_follow_torchrl() -> None:
    assert RATE_NAMES["write_count"] == "writes_per_second"
    assert rate_name("sample_calls") == "samples_per_second"
    assert rate_name("episodes") == "episodes_per_second"
