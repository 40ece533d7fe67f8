"""The polling thread's cadence: ``Every.seconds`` logs once per interval, without drift, calling ``stats()`` only when due.

Real threads and the real clock, over many intervals, for intervals
longer, shorter and not a multiple of ``poll_interval``; the bounds are a
poll interval wide, as the schedule promises.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

import pytest

from rlpulse import Every, LoggerMonitor

pytestmark = pytest.mark.timeout(60)


class Timed:
    """A source that notes when each of its ``stats()`` calls came."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def stats(self) -> dict[str, float]:
        self.calls.append(time.monotonic())
        return {"frames": float(len(self.calls))}


class Counting:
    """A sink that counts the payloads of one watch."""

    def __init__(self, watch: str) -> None:
        self.prefix = f"{watch}/"
        self.logged = 0
        self.lock = threading.Lock()

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        if any(key.startswith(self.prefix) for key in metrics):
            with self.lock:
                self.logged += 1


@pytest.mark.parametrize(
    ("seconds", "poll_interval", "companion"),
    [
        (0.2, 0.1, False),
        (0.3, 0.2, True),
        (0.25, 0.25, True),
        (0.1, 0.25, False),
    ],
)
def test_a_seconds_schedule_logs_once_per_due_time_without_drift(
    seconds: float, poll_interval: float, companion: bool
) -> None:
    # companion: a watch called every round beside it, so rounds keep the
    # poll interval's beat instead of waking at the schedule's due times.
    source, sink = Timed(), Counting("timed")
    monitor = LoggerMonitor(sink, poll_interval=poll_interval)
    monitor.watch(source, name="timed", schedule=Every.seconds(seconds))
    if companion:
        monitor.watch(Timed(), name="every_round")
    intervals = 12
    with monitor:
        time.sleep(poll_interval + seconds * intervals + seconds / 2)
        monitor.stop(log_final=False)
    calls = source.calls
    # stats() is called only when a snapshot is due: each call is logged.
    assert sink.logged == len(calls)
    first, last = calls[0], calls[-1]
    if seconds >= poll_interval:
        # One log per due time, each within a poll interval of it: the
        # k-th comes k intervals after the first, give or take a round.
        assert len(calls) == intervals + 1
        for k, at in enumerate(calls):
            assert -0.02 < at - (first + k * seconds) < poll_interval + 0.05
    else:
        # Due at every round: a log a round, none missed, none doubled.
        rounds = round((last - first) / poll_interval)
        assert rounds - 1 <= len(calls) - 1 <= rounds + 1
