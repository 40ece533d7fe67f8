"""What the monitor tells its user: its counters and its warnings, one per streak."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest

from rlpulse import Every, LoggerMonitor
from rlpulse.runtime.queues import Item, QueueListener, SinkQueue
from rlpulse.runtime.sinks import Sink
from rlpulse.testing import InMemorySink
from tests.support import (
    Discard,
    Outage,
    Source,
    StepRecorder,
    frames_logged,
    rlpulse_warnings,
    wait_for,
    wait_until,
)

pytestmark = pytest.mark.timeout(60)


def test_a_sink_that_raises_every_call_warns_once_and_others_get_everything(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken:
        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            raise RuntimeError("sink exploded")

    good = InMemorySink()
    monitor = LoggerMonitor([Broken(), good], poll_interval=0.01)
    monitor.watch(Source(), name="source")
    with caplog.at_level(logging.WARNING), monitor:
        assert wait_until(lambda: frames_logged(good, "source") >= 20)
    warnings = [m for m in rlpulse_warnings(caplog) if "sink exploded" in m]
    assert len(warnings) == 1
    assert "Broken" in warnings[0]
    assert monitor.stats()["errors"] >= 20


def test_stop_says_one_payload_not_delivered_in_the_singular(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = Outage()
    sink.away.set()
    monitor = LoggerMonitor(sink, poll_interval=0.01, stop_timeout=0.5)
    monitor.watch(
        Source(), name="source", schedule=Every.seconds(3600), log_on_close=False
    )
    with caplog.at_level(logging.WARNING):
        monitor.start()
        assert wait_until(lambda: sink.failed_calls >= 1)
        monitor.stop()
    assert monitor.stats()["dropped"] == 1
    [drained] = [m for m in rlpulse_warnings(caplog) if "without draining" in m]
    assert "; 1 payload was not delivered (counted in dropped)" in drained


def test_the_payloads_a_sink_fails_for_good_are_counted_rejected_and_said_at_stop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Refusing:
        delivered = 0

        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            self.log_batch([(metrics, step, None)])

        def log_batch(self, payloads: list[Any]) -> None:
            if len(payloads) > 1 or payloads[0][0]["source/frames"] % 2:
                raise ValueError("refused")  # final: not sent again
            self.delivered += 1

    sink, kept = Refusing(), InMemorySink()
    monitor = LoggerMonitor([sink, kept], poll_interval=0.01, stop_timeout=2)
    monitor.watch(Source(), name="source")
    with caplog.at_level(logging.WARNING), monitor:
        assert wait_until(lambda: sink.delivered >= 3)
    stats = monitor.stats()

    assert stats["rejected"] > 0
    assert stats["dropped"] == 0
    assert sink.delivered + stats["rejected"] == len(kept.payloads)
    said = rlpulse_warnings(caplog)[-1]
    assert said == (
        f"LoggerMonitor: since start(), sink Refusing did not deliver "
        f"{stats['rejected']} payloads: {stats['rejected']} lost to its failed "
        "calls (counted in rejected)."
    )


def test_monitor_stats_show_queues_and_hung_watches() -> None:
    stats: dict[str, Any] = LoggerMonitor(InMemorySink(), background=False).stats()
    assert {"timeouts", "dropped", "hung", "queued"} <= set(stats)


def test_a_round_dropping_several_is_warned_once_with_how_many(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from rlpulse.runtime.reporting import Reporter

    reporter = Reporter("warn")
    queue = SinkQueue(
        Sink(StepRecorder()), size=2, listener=QueueListener(on_drop=reporter.dropped)
    )
    with caplog.at_level("WARNING", logger="rlpulse"):
        queue.put_all([Item({"w/x": 1.0}, step, 0.0, "w", {}, {}) for step in range(6)])
        assert reporter.counts()["dropped"] == 0  # a round keeps its own
        queue.put_all([Item({"w/x": 1.0}, 6, 0.0, "w", {}, {})])
    assert reporter.counts()["dropped"] == 5
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 1
    assert (
        "dropped the oldest pending payloads, 5 of them, of sink StepRecorder"
        in (warnings[0])
    )


class _Pausable:
    """A sink whose calls wait while its gate is closed."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.gate.set()
        self.calls = 0

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        self.gate.wait()
        self.calls += 1


def _fall_behind_and_catch_up(queue: SinkQueue, sink: _Pausable, start: int) -> None:
    # One drop streak: the sink stops, a round overfills the queue, the sink
    # goes on and the sender empties the queue.
    sink.gate.clear()
    queue.put_all([Item({"w/x": 1.0}, start, 0.0, "w", {}, {})])
    queue.wake()
    wait_for(lambda: not queue.pending)  # the sender holds it, waiting
    queue.put_all(
        [Item({"w/x": 1.0}, start + step, 0.0, "w", {}, {}) for step in range(1, 4)]
    )
    queue.put_all([Item({"w/x": 1.0}, start + 4, 0.0, "w", {}, {})])
    sink.gate.set()
    queue.wake()
    wait_for(lambda: queue.caught_up and not queue.pending)
    queue.wake()  # the round after: the streak has ended


@pytest.mark.parametrize("interval", [60.0, 0.0])
def test_a_queue_falling_behind_again_is_warned_about_at_most_once_an_interval(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, interval: float
) -> None:
    from rlpulse.runtime import reporting

    monkeypatch.setattr(reporting, "DROP_WARNING_INTERVAL_S", interval)
    reporter = reporting.Reporter("warn")
    sink = _Pausable()
    queue = SinkQueue(
        Sink(sink), size=2, listener=QueueListener(on_drop=reporter.dropped)
    )
    queue.start()
    try:
        with caplog.at_level("WARNING", logger="rlpulse"):
            for streak in range(3):
                _fall_behind_and_catch_up(queue, sink, 10 * streak)
    finally:
        queue.begin_close()
        queue.close(time.monotonic() + 10)
    warnings = [record.getMessage() for record in caplog.records]
    assert reporter.counts()["dropped"] == queue.dropped == 6
    if interval:
        assert len(warnings) == 1
        assert "dropped from it before" not in warnings[0]
    else:
        assert len(warnings) == 3
        assert "; 2 dropped from it before" in warnings[1]
        assert "; 4 dropped from it before" in warnings[2]


def test_two_threads_tallies_that_are_equal_are_each_counted_once() -> None:
    from rlpulse.runtime.reporting import Reporter

    reporter = Reporter("warn")
    behind = reporter.open_tally()  # a call left behind, one poll so far
    behind.polls += 1
    live = reporter.open_tally()  # the live thread's round: equal to it
    live.polls += 1
    reporter.close_tally(live, finished=True, seconds=0.0)
    behind.logged += 1  # the call left behind returns and logs
    assert reporter.counts()["logged"] == 1
    reporter.close_tally(behind, finished=False, seconds=0.0)
    assert reporter.counts() == {
        "rounds": 1,
        "polls": 2,
        "logged": 1,
        "errors": 0,
        "timeouts": 0,
        "dropped": 0,
        "rejected": 0,
    }


def test_a_forked_childs_reporter_forgets_the_parents_rounds_and_sink_error() -> None:
    from rlpulse.runtime.reporting import Reporter
    from rlpulse.runtime.sinks import Sink

    reporter = Reporter("raise")
    tally = reporter.open_tally()  # a parent's thread in a round
    tally.polls += 4
    reporter.sink_failed(Sink(Discard()), "w", OSError("disk full"), queued=True)
    reporter.after_fork()
    assert reporter.counts()["polls"] == 0
    assert reporter.take_sink_error() is None
