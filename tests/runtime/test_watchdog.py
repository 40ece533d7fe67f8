"""The watchdog: a slow provider call is left behind, a hung one warned about and counted (SPEC 2.5).

Real threads under a hard deadline, so a regression fails instead of hanging.
"""

from __future__ import annotations

import logging
import time

import pytest

from rlpulse import LoggerMonitor
from rlpulse.testing import InMemorySink
from tests.support import Blocking, Source, frames_logged, rlpulse_warnings, wait_until

pytestmark = pytest.mark.timeout(60)


def test_a_stats_call_that_blocks_forever_stalls_no_other_watch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = InMemorySink()
    hung = Blocking(block_after=1)
    monitor = LoggerMonitor(sink, poll_interval=0.02, poll_timeout=0.2, stop_timeout=2)
    monitor.watch(hung, name="hung")
    monitor.watch(Source(), name="healthy")
    with caplog.at_level(logging.WARNING):
        monitor.start()
        assert wait_until(lambda: monitor.stats()["hung"] == 1)
        logged_when_hung = frames_logged(sink, "healthy")
        assert wait_until(
            lambda: frames_logged(sink, "healthy") >= logged_when_hung + 20
        )
        started = time.monotonic()
        monitor.stop()
        stop_took = time.monotonic() - started
    hung.release.set()
    assert stop_took < 2.5
    assert monitor.stats()["timeouts"] == 1
    messages = rlpulse_warnings(caplog)
    assert (
        sum("'hung'" in message and "poll_timeout" in message for message in messages)
        == 1
    )
    assert any("no final snapshot of watch 'hung'" in message for message in messages)


def test_a_stats_call_that_blocks_for_twice_the_timeout_then_recovers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = InMemorySink()
    slow = Blocking(seconds=0.4, block_after=1)
    monitor = LoggerMonitor(sink, poll_interval=0.02, poll_timeout=0.2)
    monitor.watch(slow, name="slow")
    monitor.watch(Source(), name="healthy")
    with caplog.at_level(logging.WARNING), monitor:
        assert wait_until(lambda: monitor.stats()["timeouts"] >= 1)
        slow.release.set()  # from now on its calls return at once
        calls_at_recovery = slow.calls
        assert wait_until(lambda: slow.calls >= calls_at_recovery + 5)
        assert wait_until(lambda: monitor.stats()["hung"] == 0)
    assert frames_logged(sink, "slow") >= 5
    assert monitor.stats()["timeouts"] == 1


def test_a_provider_that_always_overruns_is_warned_once_per_streak(
    caplog: pytest.LogCaptureFixture,
) -> None:
    slow = Blocking(seconds=0.15)
    monitor = LoggerMonitor(InMemorySink(), poll_interval=0.01, poll_timeout=0.05)
    monitor.watch(slow, name="slow")
    with caplog.at_level(logging.WARNING), monitor:
        assert wait_until(lambda: monitor.stats()["timeouts"] >= 3)
        slow.seconds = 0.0  # its calls return in time: the streak ends
        calls = slow.returned
        assert wait_until(lambda: slow.returned >= calls + 3)
        slow.seconds = 0.15  # a new streak
        timeouts = monitor.stats()["timeouts"]
        assert wait_until(lambda: monitor.stats()["timeouts"] >= timeouts + 2)
    overrun_warnings = [
        m for m in rlpulse_warnings(caplog) if "skipped watch 'slow'" in m
    ]
    assert len(overrun_warnings) == 2


def test_a_slow_call_holds_the_others_up_for_about_a_poll_interval_not_poll_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = InMemorySink()
    stuck = Blocking()
    monitor = LoggerMonitor(sink, poll_interval=0.02, poll_timeout=30, stop_timeout=2)
    monitor.watch(stuck, name="stuck")
    monitor.watch(Source(), name="healthy")
    with caplog.at_level(logging.WARNING):
        monitor.start()
        # Far sooner than poll_timeout, the round has moved on without it.
        assert wait_until(lambda: frames_logged(sink, "healthy") >= 20, timeout=15)
        assert stuck.calls == 1
        assert monitor.stats()["timeouts"] == 0
        assert monitor.stats()["hung"] == 0  # not hung: within poll_timeout
        monitor.stop()
    stuck.release.set()
    messages = rlpulse_warnings(caplog)
    assert not any("skipped watch" in message for message in messages)
    assert any(
        "no final snapshot of watch 'stuck'" in message and "outstanding" in message
        for message in messages
    )


def test_a_slow_call_that_returns_within_poll_timeout_is_logged_without_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = InMemorySink()
    slow = Blocking(seconds=0.5, block_after=1)
    monitor = LoggerMonitor(sink, poll_interval=0.02, poll_timeout=10)
    monitor.watch(slow, name="slow")
    monitor.watch(Source(), name="healthy")
    with caplog.at_level(logging.WARNING), monitor:
        assert wait_until(lambda: slow.returned >= 2)  # the slow call returned
        slow.release.set()  # from now on its calls return at once
        assert wait_until(lambda: slow.returned >= 6)
    assert frames_logged(sink, "slow") >= 6  # the late snapshot and the ones after it
    assert monitor.stats()["timeouts"] == 0
    assert not any("skipped watch" in m for m in rlpulse_warnings(caplog))
