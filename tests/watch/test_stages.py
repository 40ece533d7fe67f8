"""Gauge aggregation between logs and stall detection (SPEC 2.8, 2.9)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import pytest

from rlpulse import Every, LoggerMonitor
from rlpulse.testing import InMemorySink
from rlpulse.watch import Watch, WatchSpec
from rlpulse.watch.stages import Stall


def poll(watch: Watch, raw: dict[str, Any], now: float) -> dict[str, float] | None:
    return watch.poll(raw, now)


def test_gauges_are_aggregated_over_the_polls_between_logs() -> None:
    watch = Watch(
        WatchSpec(
            "rb",
            provider=dict,
            schedule=Every.seconds(10),
            aggregate=("mean", "min", "max"),
        )
    )
    poll(watch, {"size": 4, "write_count": 0}, now=0.0)
    for now, size in ((1.0, 10), (2.0, 2), (3.0, 6)):
        assert poll(watch, {"size": size, "write_count": now}, now=now) is None
    payload = poll(watch, {"size": 8, "write_count": 10}, now=10.0)
    assert payload is not None
    assert payload["rb/size_mean"] == pytest.approx((10 + 2 + 6 + 8) / 4)
    assert payload["rb/size_min"] == 2.0
    assert payload["rb/size_max"] == 10.0
    assert "rb/write_count_mean" not in payload  # a counter is not a gauge


def test_aggregates_restart_after_each_logged_snapshot() -> None:
    watch = Watch(WatchSpec("q", provider=dict, aggregate=("max",)))
    poll(watch, {"depth": 50}, now=0.0)
    payload = poll(watch, {"depth": 3}, now=1.0)
    assert payload is not None
    assert payload["q/depth_max"] == 3.0


def test_aggregates_skip_explicit_rate_keys() -> None:
    watch = Watch(
        WatchSpec("w", provider=dict, aggregate=("mean",), rate_keys=("episodes",))
    )
    payload = poll(watch, {"episodes": 3, "frames": 9}, now=0.0)
    assert payload is not None
    assert "w/episodes_mean" not in payload
    assert payload["w/frames_mean"] == 9.0


def test_an_unknown_aggregate_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="mean, min, max"):
        Watch(WatchSpec("w", provider=dict, aggregate=("median",)))


def test_an_aggregating_seconds_watch_is_polled_every_time() -> None:
    calls = []

    def provider() -> dict[str, float]:
        calls.append(1)
        return {"size": float(len(calls))}

    monitor = LoggerMonitor(InMemorySink(), background=False)
    monitor.watch(
        object(),
        name="rb",
        stats_fn=provider,
        schedule=Every.seconds(3600),
        aggregate=["mean"],
    )
    for _ in range(5):
        monitor.step()
    assert len(calls) == 5


class StallsSeen:
    """What a watch tells of its stalls, kept as (stalled, seconds)."""

    def __init__(self, seen: list[tuple[bool, float]]) -> None:
        self.seen = seen

    def stalled(self, watch: Watch, stalled: bool, seconds: float) -> None:
        self.seen.append((stalled, seconds))

    def workers_lost(
        self, watch: Watch, alive: float, before: float, lost: float
    ) -> None:
        raise AssertionError("no workers here")

    def entry_missing(
        self, watch: Watch, option: str, key: str, entries: Sequence[str]
    ) -> None:
        raise AssertionError(f"{option} names {key}, which the snapshot has")


def test_a_counter_that_stops_increasing_marks_the_watch_stalled() -> None:
    stalls: list[tuple[bool, float]] = []
    watch = Watch(
        WatchSpec(
            "collector",
            provider=dict,
            schedule=Every.counter("frames", 1000),
            stall_after=5.0,
        ),
        StallsSeen(stalls),
    )
    first = poll(watch, {"frames": 0}, now=0.0)
    assert first is not None
    assert first["collector/stalled"] == 0.0
    poll(watch, {"frames": 10}, now=1.0)
    poll(watch, {"frames": 10}, now=4.0)
    assert not watch.stalled
    poll(watch, {"frames": 10}, now=6.5)
    assert watch.stalled
    assert stalls == [(True, 5.5)]
    poll(watch, {"frames": 10}, now=9.0)
    assert stalls == [(True, 5.5)]  # one warning per episode
    payload = watch.poll({"frames": 10}, 10.0, force=True)
    assert payload is not None
    assert payload["collector/stalled"] == 1.0
    poll(watch, {"frames": 20}, now=11.0)
    assert not watch.stalled
    assert stalls[-1] == (False, 10.0)  # moving again, 10 s after it last moved
    poll(watch, {"frames": 20}, now=17.0)
    assert stalls == [(True, 5.5), (False, 10.0), (True, 6.0)]  # a new episode


def test_a_restart_keeps_a_stall_until_progress_ends_it() -> None:
    stalls: list[tuple[bool, float]] = []
    watch = Watch(
        WatchSpec("c", provider=dict, stall_after=5.0, progress_key="frames"),
        StallsSeen(stalls),
    )
    poll(watch, {"frames": 10}, now=0.0)
    poll(watch, {"frames": 10}, now=6.0)
    assert stalls == [(True, 6.0)]
    watch.restart()
    payload = poll(watch, {"frames": 10}, now=100.0)
    assert payload is not None
    assert payload["c/stalled"] == 1.0
    poll(watch, {"frames": 11}, now=101.0)
    assert not watch.stalled
    # Polled without progress 6 s before the stop and 1 s after: the time
    # stopped is no time without progress.
    assert stalls == [(True, 6.0), (False, 7.0)]


def test_a_restart_starts_the_stall_clock_of_a_watch_not_stalled_again() -> None:
    stalls: list[tuple[bool, float]] = []
    watch = Watch(
        WatchSpec("c", provider=dict, stall_after=5.0, progress_key="frames"),
        StallsSeen(stalls),
    )
    poll(watch, {"frames": 10}, now=0.0)
    watch.restart()
    # The time stopped is not time without progress.
    poll(watch, {"frames": 10}, now=100.0)
    poll(watch, {"frames": 10}, now=104.0)
    assert stalls == []
    poll(watch, {"frames": 10}, now=105.0)
    assert stalls == [(True, 5.0)]


def test_a_counter_reset_is_not_a_stall() -> None:
    watch = Watch(WatchSpec("c", provider=dict, stall_after=2.0, progress_key="frames"))
    poll(watch, {"frames": 100}, now=0.0)
    poll(watch, {"frames": 5}, now=1.5)
    poll(watch, {"frames": 5}, now=3.0)
    assert not watch.stalled


def test_stall_detection_needs_a_progress_counter() -> None:
    with pytest.raises(ValueError, match="progress_key"):
        Watch(WatchSpec("w", provider=dict, stall_after=1.0))


def test_stall_after_must_be_positive() -> None:
    with pytest.raises(ValueError, match="stall_after"):
        Watch(WatchSpec("w", provider=dict, stall_after=0, progress_key="frames"))


def test_the_monitor_warns_once_per_stall_episode(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Frozen:
        def stats(self) -> dict[str, float]:
            return {"frames": 7}

    sink = InMemorySink()
    monitor = LoggerMonitor(sink, background=False)
    monitor.watch(Frozen(), name="collector", step="frames", stall_after=0.01)
    with caplog.at_level(logging.WARNING):
        monitor.step()
        time.sleep(0.05)
        monitor.step()
        monitor.step()
    warnings = [
        r.getMessage() for r in caplog.records if "no progress" in r.getMessage()
    ]
    assert len(warnings) == 1
    assert "'collector'" in warnings[0]
    assert sink.payloads[-1].metrics["collector/stalled"] == 1.0


def test_a_stall_that_ends_after_a_restart_lasted_only_the_time_it_was_polled() -> None:
    # Its recovered event counted the time the monitor was stopped.
    told: list[tuple[bool, float]] = []
    stall = Stall(
        ("frames",), 1.0, lambda stalled, seconds: told.append((stalled, seconds))
    )
    for now in (0.0, 0.5, 1.0, 1.5):
        stall.observe({"frames": 5.0}, now)
    stall.restart()
    stall.restart()  # stopped and started twice before its next poll
    stall.observe({"frames": 6.0}, 101.5)

    assert told == [(True, 1.0), (False, 1.5)]
    assert not stall.stalled
