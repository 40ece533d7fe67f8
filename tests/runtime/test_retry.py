"""Failures that pass: a sink raising ``TransientSinkError`` gets its payloads again, in order, and stop stays bounded."""

from __future__ import annotations

import logging
import time

import pytest

from rlpulse import LoggerMonitor
from rlpulse.testing import InMemorySink
from tests.support import (
    Outage,
    Source,
    frames_logged,
    not_delivered,
    rlpulse_warnings,
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
