"""What the monitor tells its user: its counters and its warnings, one per streak."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest

from rlpulse import Every, LoggerMonitor
from rlpulse.testing import InMemorySink
from tests.support import Outage, Source, frames_logged, rlpulse_warnings, wait_until

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
