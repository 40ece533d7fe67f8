"""The watchdog: a slow provider call is left behind, a hung one warned about and counted (SPEC 2.5).

Real threads under a hard deadline, so a regression fails instead of hanging.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest

from rlpulse import Every, LoggerMonitor
from rlpulse.testing import InMemorySink
from tests.support import (
    Blocking,
    Discard,
    Source,
    context_switches,
    frames_logged,
    rlpulse_warnings,
    wait_until,
)

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


def test_a_slow_call_returning_late_does_not_hide_a_hang_after_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The slow call is left behind after one poll interval; the hang that
    # the round meets next must still be noticed when the slow call returns.
    slow, hung = Blocking(seconds=0.7, block_after=1), Blocking(block_after=1)
    monitor = LoggerMonitor(Discard(), poll_interval=0.5, poll_timeout=1.5)
    monitor.watch(slow, name="slow")
    monitor.watch(hung, name="hung")
    try:
        with caplog.at_level(logging.WARNING, logger="rlpulse"):
            monitor.start()
            assert wait_until(lambda: monitor.stats()["hung"] == 1, timeout=10)
            monitor.stop(log_final=False)
    finally:
        hung.release.set()
    assert monitor.stats()["timeouts"] >= 1
    assert any("skipped watch 'hung'" in r.getMessage() for r in caplog.records)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc")
def test_the_watchdog_wakes_once_a_round_that_ends_in_time() -> None:
    # It looks when a round could have lasted one check, not as the round
    # starts and again after it: a wake-up costs the training loop a turn
    # of the interpreter lock.
    monitor = LoggerMonitor(Discard(), poll_interval=0.05)
    monitor.watch(Source(), name="source")
    with monitor:
        time.sleep(0.2)
        (watchdog,) = [t for t in threading.enumerate() if t.name == "rlpulse-watchdog"]
        rounds_before, woke_before = (
            monitor.stats()["rounds"],
            context_switches(watchdog),
        )
        time.sleep(1.0)
        rounds = monitor.stats()["rounds"] - rounds_before
        woke = context_switches(watchdog) - woke_before
    assert rounds >= 10
    assert woke <= 1.5 * rounds, (woke, rounds)


def test_a_hang_in_a_round_a_registration_brought_forward_is_left_behind_at_once() -> (
    None
):
    # Every watch is due half a minute apart: the watchdog sleeps until the
    # round it knew of, unless the poller tells it that a registration
    # brought one forward.
    monitor = LoggerMonitor(Discard(), poll_interval=0.1, poll_timeout=5.0)
    monitor.watch(Source(), name="early", schedule=Every.seconds(30))
    hanging, after = Blocking(), Source()
    with monitor:
        time.sleep(0.3)
        monitor.watch(hanging, name="hanging", schedule=Every.seconds(30))
        monitor.watch(after, name="after", schedule=Every.seconds(30))
        try:
            assert wait_until(lambda: hanging.calls == 1, timeout=5.0)
            # Left behind after about one poll interval, not half a minute.
            assert wait_until(lambda: after.frames >= 1, timeout=3.0)
        finally:
            hanging.release.set()
