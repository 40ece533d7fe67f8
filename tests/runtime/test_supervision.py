"""The supervision table: a watch whose call is outstanding is skipped, for as long as its budget, across a restart."""

from __future__ import annotations

import logging
import time

import pytest

from rlpulse import LoggerMonitor
from rlpulse.testing import InMemorySink
from tests.support import Blocking, rlpulse_warnings, wait_until

pytestmark = pytest.mark.timeout(60)


def test_the_hung_watch_is_not_polled_again_while_its_call_is_outstanding() -> None:
    hung = Blocking(block_after=1)
    monitor = LoggerMonitor(InMemorySink(), poll_interval=0.01, poll_timeout=0.1)
    monitor.watch(hung, name="hung")
    with monitor:
        assert wait_until(lambda: monitor.stats()["hung"] == 1)
        time.sleep(0.3)
        assert hung.calls == 2
    hung.release.set()


def test_a_per_watch_poll_timeout_overrides_the_monitor_one() -> None:
    slow = Blocking(seconds=0.3, block_after=1)
    monitor = LoggerMonitor(InMemorySink(), poll_interval=0.02, poll_timeout=5.0)
    monitor.watch(slow, name="slow", poll_timeout=0.05)
    with monitor:
        assert wait_until(lambda: monitor.stats()["timeouts"] >= 1)


def test_no_timeout_when_poll_timeout_is_none() -> None:
    slow = Blocking(seconds=0.3, block_after=1)
    monitor = LoggerMonitor(InMemorySink(), poll_interval=0.02, poll_timeout=None)
    monitor.watch(slow, name="slow")
    with monitor:
        assert wait_until(lambda: slow.returned >= 2)
    assert monitor.stats()["timeouts"] == 0


def test_a_call_left_behind_across_a_restart_is_still_marked_hung(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hung = Blocking()
    monitor = LoggerMonitor(
        InMemorySink(), poll_interval=0.02, poll_timeout=0.6, stop_timeout=0.5
    )
    monitor.watch(hung, name="hung")
    with caplog.at_level(logging.WARNING):
        monitor.start()
        # Left behind (about 50 ms), but not yet past poll_timeout.
        assert wait_until(lambda: hung.calls == 1 and monitor.stats()["polls"] >= 1)
        time.sleep(0.15)
        monitor.stop(log_final=False)
        assert monitor.stats()["timeouts"] == 0
        monitor.start()
        assert wait_until(lambda: monitor.stats()["hung"] == 1)
        monitor.stop(log_final=False)
    hung.release.set()
    assert monitor.stats()["timeouts"] == 1
    assert hung.calls == 1
    assert any("skipped watch 'hung'" in m for m in rlpulse_warnings(caplog))
