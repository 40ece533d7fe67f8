"""A watch's options (``rlpulse.watch.spec``): what ``LoggerMonitor.watch()`` refuses before it watches anything, saying what it takes."""

from __future__ import annotations

import time
from typing import Any

import pytest

from rlpulse import LoggerMonitor
from rlpulse.testing import InMemorySink
from tests.support import Counter


def test_a_schedule_that_is_not_a_schedule_is_refused() -> None:
    monitor = LoggerMonitor(InMemorySink(), background=False)
    with pytest.raises(TypeError, match="schedule"):
        monitor.watch(Counter(), schedule=5)  # type: ignore[arg-type]


def test_a_stats_fn_that_cannot_be_called_is_refused_at_watch() -> None:
    monitor = LoggerMonitor(InMemorySink(), background=False)
    with pytest.raises(TypeError, match="stats_fn must be a callable"):
        monitor.watch(Counter(), stats_fn=42)  # type: ignore[arg-type]
    assert monitor.stats()["watches"] == 0


@pytest.mark.parametrize(
    ("name", "error", "message"),
    [
        ("", ValueError, "must not be empty"),
        ("train/collector", ValueError, "must not contain '/'"),
        (5, TypeError, "must be a str"),
    ],
)
def test_a_watch_name_that_would_garble_metric_names_is_refused(
    name: Any, error: type[Exception], message: str
) -> None:
    monitor = LoggerMonitor(InMemorySink(), background=False)
    with pytest.raises(error, match=message):
        monitor.watch(Counter(), name=name)
    assert monitor.stats()["watches"] == 0


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("stats_kwargs", 5, "stats_kwargs takes a mapping"),
        ("rate_keys", 5, "rate_keys takes a tuple or list of names, got int 5"),
        ("aggregate", 5, "aggregate takes a tuple or list of names, got int 5"),
        ("step", 5, "step takes the name"),
        ("progress_key", 5, "progress_key takes the name"),
        ("stall_after", "10", "stall_after must be a positive number"),
    ],
)
def test_watch_options_of_the_wrong_type_are_refused_saying_what_they_take(
    option: str, value: object, says: str
) -> None:
    monitor = LoggerMonitor(InMemorySink(), background=False)

    with pytest.raises((TypeError, ValueError), match=says):
        monitor.watch(Counter(), **{option: value})
    assert monitor.stats()["watches"] == 0


def test_rate_keys_given_as_one_str_are_refused_not_split() -> None:
    monitor = LoggerMonitor(InMemorySink(), background=False)
    with pytest.raises(TypeError, match=r"rate_keys=\('frames',\)"):
        monitor.watch(Counter(), rate_keys="frames")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="aggregate"):
        monitor.watch(Counter(), aggregate="mean")
    with pytest.raises(TypeError, match="names"):
        monitor.watch(Counter(), rate_keys=(1, 2))  # type: ignore[arg-type]
    assert monitor.stats()["watches"] == 0
    monitor.watch(Counter(), name="listed", rate_keys=["frames"])  # type: ignore[arg-type]
    assert "listed/frames_per_second" in _rated(monitor)


def _rated(monitor: LoggerMonitor) -> dict[str, float]:
    monitor.step()
    time.sleep(0.01)
    return monitor.step()["listed"]
