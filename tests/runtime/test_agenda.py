"""Which watches a round calls: every watch but a time-gated one not yet due, in registration order."""

from __future__ import annotations

import math
import threading
import time

import pytest

from rlpulse import Every, LoggerMonitor
from rlpulse.runtime.agenda import Agenda
from rlpulse.testing import InMemorySink
from rlpulse.watch import Watch, WatchSpec
from tests.support import wait_for


def _logged(watch: Watch, now: float) -> None:
    # What a poll that logs does to the watch's schedule.
    assert watch.poll({"frames": 1}, now=now) is not None


def _names(watches: object) -> list[str]:
    return [watch.name for watch in watches]  # type: ignore[attr-defined]


def test_due_watches_come_in_registration_order_whatever_their_due_times() -> None:
    fast = Watch(WatchSpec("fast", provider=dict, schedule=Every.seconds(1)))
    every = Watch(WatchSpec("every", provider=dict))
    slow = Watch(WatchSpec("slow", provider=dict, schedule=Every.seconds(10)))
    counted = Watch(
        WatchSpec("counted", provider=dict, schedule=Every.counter("frames", 5))
    )
    agenda = Agenda(lambda: (slow, every, fast, counted))

    assert _names(agenda.due(0.0)) == ["slow", "every", "fast", "counted"]
    _logged(slow, 0.0)
    _logged(fast, 0.0)
    assert _names(agenda.due(0.5)) == ["every", "counted"]
    assert _names(agenda.due(1.0)) == ["every", "fast", "counted"]
    _logged(fast, 1.0)
    assert _names(agenda.due(10.0)) == ["slow", "every", "fast", "counted"]


def test_a_watch_not_logged_when_due_stays_due() -> None:
    hourly = Watch(WatchSpec("hourly", provider=dict, schedule=Every.seconds(3600)))
    agenda = Agenda(lambda: (hourly,))
    assert _names(agenda.due(0.0)) == ["hourly"]
    # Its poll failed or was dropped: nothing moved its due time.
    assert _names(agenda.due(1.0)) == ["hourly"]
    _logged(hourly, 1.0)
    assert _names(agenda.due(2.0)) == []
    assert _names(agenda.due(3601.0)) == ["hourly"]


def test_a_new_registration_is_seen_at_the_next_round() -> None:
    first = Watch(WatchSpec("first", provider=dict, schedule=Every.seconds(60)))
    registered: tuple[Watch, ...] = (first,)
    agenda = Agenda(lambda: registered)
    _logged(first, 0.0)
    assert _names(agenda.due(1.0)) == []

    second = Watch(WatchSpec("second", provider=dict, schedule=Every.seconds(60)))
    registered = (first, second)
    assert _names(agenda.due(2.0)) == ["second"]
    registered = (second,)
    assert _names(agenda.due(61.0)) == ["second"]


def test_a_round_calls_only_the_due_watches_among_ten_thousand() -> None:
    calls: list[str] = []

    class Source:
        def __init__(self, name: str) -> None:
            self.name = name

        def stats(self) -> dict[str, float]:
            calls.append(self.name)
            return {"frames": float(len(calls))}

    class Null:
        def log_metrics(self, metrics: object, step: object = None) -> None:
            pass

    monitor = LoggerMonitor(Null(), background=False)
    for index in range(10_000):
        monitor.watch(
            Source(f"hourly_{index}"),
            name=f"hourly_{index}",
            schedule=Every.seconds(3600),
        )
    for index in range(100):
        monitor.watch(Source(f"every_{index}"), name=f"every_{index}")
    monitor.step()  # the first poll of every watch
    calls.clear()

    logged = monitor.step()

    assert calls == [f"every_{index}" for index in range(100)]
    assert list(logged) == calls


def test_the_next_due_time_is_the_earliest_of_the_time_gated_watches() -> None:
    hourly = Watch(WatchSpec("hourly", provider=dict, schedule=Every.seconds(3600)))
    minutely = Watch(WatchSpec("minutely", provider=dict, schedule=Every.seconds(60)))
    registered: tuple[Watch, ...] = (hourly, minutely)
    agenda = Agenda(lambda: registered)
    assert agenda.next_due() == -math.inf  # never looked at: a round at once

    agenda.due(0.0)
    _logged(hourly, 0.0)
    _logged(minutely, 0.0)
    assert agenda.next_due() == 60.0
    assert _names(agenda.due(60.0)) == ["minutely"]
    _logged(minutely, 60.0)
    assert agenda.next_due() == 120.0

    registered = (hourly, minutely, Watch(WatchSpec("every", provider=dict)))
    assert agenda.next_due() == -math.inf  # a new registration: a round at once
    agenda.due(61.0)
    assert agenda.next_due() == -math.inf  # a watch called every round


@pytest.mark.timeout(30)
def test_a_background_monitor_with_nothing_due_sleeps_until_a_watch_is() -> None:
    sink = InMemorySink()
    monitor = LoggerMonitor(sink, poll_interval=0.01)
    monitor.watch(_Counter(), name="hourly", schedule=Every.seconds(3600))
    monitor.start()
    try:
        wait_for(lambda: monitor.stats()["logged"] == 1)
        rounds = monitor.stats()["rounds"]
        time.sleep(0.5)  # fifty poll intervals with nothing due
        assert monitor.stats()["rounds"] - rounds <= 1

        # A watch registered meanwhile is polled at once, then every round.
        monitor.watch(_Counter(), name="every")
        assert sink.wait_for(lambda kept: len(kept.values("every/frames")) >= 3)
    finally:
        monitor.stop(log_final=False)
    assert len(sink.values("hourly/frames")) == 1


class _Counter:
    def __init__(self) -> None:
        self.frames = 0

    def stats(self) -> dict[str, float]:
        self.frames += 1
        return {"frames": float(self.frames)}


@pytest.mark.timeout(30)
def test_a_sink_error_that_ends_polling_is_raised_at_the_next_round_while_nothing_is_due() -> (
    None
):
    class Broken:
        def log_metrics(self, metrics: dict[str, float], step: object = None) -> None:
            raise RuntimeError("the sink is broken")

    raised: list[BaseException | None] = []
    previous_hook = threading.excepthook
    threading.excepthook = lambda args: raised.append(args.exc_value)
    try:
        monitor = LoggerMonitor(Broken(), poll_interval=0.01, on_error="raise")
        monitor.watch(_Counter(), name="hourly", schedule=Every.seconds(3600))
        monitor.start()
        # The first poll's payload fails on the sender thread; the polling
        # thread, asleep until the hour is up, raises it within an interval.
        wait_for(lambda: "polling thread ended" in repr(monitor))
        monitor.stop(log_final=False)
    finally:
        threading.excepthook = previous_hook
    assert [str(error) for error in raised] == ["the sink is broken"]
