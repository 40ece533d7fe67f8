"""Failures that pass: a sink raising ``TransientSinkError`` gets its payloads again, in order, and stop stays bounded."""

from __future__ import annotations

import itertools
import logging
import math
import time
from typing import Any

import pytest

from rlpulse import LoggerMonitor
from rlpulse.runtime.queues import SinkQueue
from rlpulse.runtime.retry import MAX_BACKOFF_S, TransientSinkError, retry_delay
from rlpulse.runtime.sinks import Sink
from rlpulse.testing import InMemorySink
from tests.support import (
    BatchRecorder,
    Outage,
    Source,
    frames_logged,
    not_delivered,
    queue_item,
    rlpulse_warnings,
    wait_for,
    wait_until,
)

pytestmark = pytest.mark.timeout(60)


def test_a_sink_that_fails_transiently_gets_every_payload_of_the_outage_in_order(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink, other = Outage(), InMemorySink()
    monitor = LoggerMonitor([sink, other], poll_interval=0.01, queue_size=10_000)
    monitor.watch(Source(), name="source", step="frames")
    with caplog.at_level(logging.WARNING), monitor:
        assert wait_until(lambda: frames_logged(sink, "source") >= 3)
        sink.away.set()
        assert wait_until(lambda: sink.failed_calls >= 5)
        assert monitor.stats()["queued"] > 0  # kept, not dropped
        sink.away.clear()
        logged = monitor.stats()["logged"]
        assert wait_until(lambda: frames_logged(sink, "source") > logged)
    stats = monitor.stats()
    steps = [step for _, step in sink.calls]
    assert steps == [step for _, step in other.calls]  # none lost, none twice
    assert steps[:-1] == list(range(1, len(steps)))  # in order (the last is the final)
    assert stats["dropped"] == 0
    assert stats["errors"] == sink.failed_calls
    [warning] = rlpulse_warnings(caplog)
    assert "failed to log watch 'source' to sink Outage" in warning
    assert "tried again" in warning


def test_stop_while_a_sink_keeps_failing_transiently_is_bounded_and_says_what_was_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = Outage()
    monitor = LoggerMonitor(sink, poll_interval=0.01, stop_timeout=1.0)
    monitor.watch(Source(), name="source")
    with caplog.at_level(logging.WARNING):
        monitor.start()
        assert wait_until(lambda: frames_logged(sink, "source") >= 3)
        sink.away.set()
        assert wait_until(lambda: sink.failed_calls >= 3)
        started = time.monotonic()
        monitor.stop()
        took = time.monotonic() - started
    assert took < 1.5
    stats = monitor.stats()
    assert stats["dropped"] > 0
    [drained] = [m for m in rlpulse_warnings(caplog) if "without draining" in m]
    assert "it was still failing (TransientSinkError('far end away'))" in drained
    assert not_delivered(stats["dropped"]) in drained


@pytest.mark.parametrize("retry_after", [2.5, None, 0.0, math.nan])
def test_the_wait_between_tries_is_a_backoff_or_longer_where_the_far_end_asks(
    retry_after: float | None,
) -> None:
    tries: list[float] = []

    class Refusing(BatchRecorder):
        def log_batch(self, payloads: list[Any]) -> None:
            tries.append(time.monotonic())
            if len(tries) < 3:
                raise TransientSinkError("busy", retry_after=retry_after)
            super().log_batch(payloads)

    sink = Refusing()
    queue = SinkQueue(Sink(sink), size=10)
    queue.start()
    try:
        queue.put_all([queue_item(1)])
        queue.wake()
        wait_for(lambda: len(sink.batches) == 1, seconds=20)
    finally:
        assert queue.close(deadline=time.monotonic() + 5) is None
    waits = [later - earlier for earlier, later in itertools.pairwise(tries)]
    if retry_after == 2.5:  # longer than the back-off: as asked
        assert all(2.45 <= wait < 3.2 for wait in waits)
    else:  # 1 s then 2 s, each within 20 % either way, however little it asks
        assert 0.75 <= waits[0] <= 1.35
        assert 1.55 <= waits[1] <= 2.5


def test_a_permanent_failure_after_transient_ones_is_not_retried() -> None:
    calls: list[int] = []

    class Refusing(BatchRecorder):
        def log_batch(self, payloads: list[Any]) -> None:
            calls.append(len(payloads))
            if len(calls) == 1:
                raise TransientSinkError("away", retry_after=0.01)
            if len(calls) == 2:
                raise ValueError("a payload the backend refuses")
            super().log_batch(payloads)

    sink = Refusing()
    queue = SinkQueue(Sink(sink), size=10)
    queue.start()
    try:
        queue.put_all([queue_item(1)])
        queue.wake()
        wait_for(lambda: len(calls) == 2)
        queue.put_all([queue_item(2)])
        queue.wake()
        wait_for(lambda: len(sink.batches) == 1)
    finally:
        assert queue.close(deadline=time.monotonic() + 5) is None
    assert [[step for _, step, _ in batch] for batch in sink.batches] == [[2]]
    assert queue.retry_error is None


def test_the_longest_waits_keep_their_jitter_under_the_cap() -> None:
    # Capped after the jitter, every wait from the seventh try on was 32 s
    # exactly: senders that failed together tried again together.
    waits = [retry_delay(tries) for tries in (7, 8, 30) for _ in range(300)]

    assert max(waits) <= MAX_BACKOFF_S
    assert min(waits) >= 0.75 * MAX_BACKOFF_S * 0.8 / 1.2
    assert sum(wait == MAX_BACKOFF_S for wait in waits) <= 3
    assert max(waits) - min(waits) > 0.25 * MAX_BACKOFF_S
