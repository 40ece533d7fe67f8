"""The engine: ``step()`` inline or on the polling thread, and ``stop()``'s final snapshots.

Real threads under a hard deadline, so a regression fails instead of hanging.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping

import pytest

import rlpulse
from rlpulse import LoggerMonitor
from rlpulse.testing import InMemorySink
from tests.support import (
    Blocking,
    Recorder,
    Source,
    frames_logged,
    rlpulse_warnings,
    wait_until,
)

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("background", [False, True])
@pytest.mark.parametrize("poll_timeout", [None, 0.3, 5.0])  # 5.0: past the deadline
def test_a_final_call_that_hangs_is_warned_once_and_the_watches_after_it_get_theirs(
    caplog: pytest.LogCaptureFixture, background: bool, poll_timeout: float | None
) -> None:
    sink = InMemorySink()
    hung = Blocking()
    monitor = LoggerMonitor(
        sink,
        background=background,
        poll_interval=3600,
        poll_timeout=poll_timeout,
        stop_timeout=1.5,
    )
    monitor.watch(hung, name="hung", log_on_start=False)
    monitor.watch(Source(), name="healthy", log_on_start=False)
    if background:
        monitor.start()
    with caplog.at_level(logging.WARNING):
        started = time.monotonic()
        monitor.stop()
        stop_took = time.monotonic() - started
    hung.release.set()
    assert stop_took < 2.5
    assert frames_logged(sink, "healthy") == 1  # its final snapshot
    messages = rlpulse_warnings(caplog)
    assert len(messages) == 1, messages
    assert "no final snapshot of watch 'hung'" in messages[0]
    assert "=Nones" not in messages[0]


def test_stop_logs_final_snapshots_of_every_watch_that_is_not_hung() -> None:
    sink = InMemorySink()
    hung = Blocking(block_after=1)
    monitor = LoggerMonitor(sink, poll_interval=0.02, poll_timeout=0.1, stop_timeout=2)
    monitor.watch(Source(), name="first")
    monitor.watch(hung, name="hung")
    monitor.watch(Source(), name="last")
    monitor.start()
    assert wait_until(lambda: monitor.stats()["hung"] == 1)
    before = {name: frames_logged(sink, name) for name in ("first", "last")}
    monitor.stop()
    hung.release.set()
    assert frames_logged(sink, "first") > before["first"]
    assert frames_logged(sink, "last") > before["last"]


def test_a_final_snapshot_that_hangs_at_stop_does_not_block_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = InMemorySink()
    hangs_at_stop = Blocking(block_after=1)
    monitor = LoggerMonitor(sink, background=False, poll_timeout=0.2, stop_timeout=3)
    monitor.watch(hangs_at_stop, name="stuck")
    monitor.watch(Source(), name="after")
    monitor.step()
    with caplog.at_level(logging.WARNING):
        started = time.monotonic()
        monitor.stop()
        took = time.monotonic() - started
    hangs_at_stop.release.set()
    assert took < 3.5
    assert frames_logged(sink, "after") == 2
    assert any("'stuck'" in m for m in rlpulse_warnings(caplog))


def test_unwatch_waits_for_a_step_polling_inline_after_the_polling_thread_ended() -> (
    None
):
    class SlowKinds:
        # Asked for its kinds at its first payload, after its stats() call,
        # while the step that polls it delivers that payload.
        def __init__(self) -> None:
            self.asked = threading.Event()
            self.answer = threading.Event()

        def stats(self) -> dict[str, float]:
            return {"frames": 1}

        def metric_kinds(self) -> dict[str, str]:
            self.asked.set()
            self.answer.wait(10)
            return {}

    class Journal:
        # Payloads and events, in the order the sink got them.
        def __init__(self) -> None:
            self.entries: list[tuple[str, str]] = []

        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            self.entries.extend(("payload", key) for key in metrics)

        def log_event(self, event: rlpulse.Event) -> None:
            self.entries.append((event.kind, event.watch))

    def broken() -> dict[str, float]:
        raise RuntimeError("provider broke")

    journal = Journal()
    target = SlowKinds()
    previous_hook = threading.excepthook
    threading.excepthook = lambda args: None
    try:
        monitor = LoggerMonitor(journal, poll_interval=0.01, on_error="raise")
        monitor.watch(None, name="broken", stats_fn=broken)
        monitor.start()
        assert wait_until(lambda: "polling thread ended" in repr(monitor))
        monitor.unwatch("broken")
        monitor.watch(target, name="slow")
        stepping = threading.Thread(target=monitor.step)
        stepping.start()  # polls on this thread: the polling thread ended
        assert target.asked.wait(10)
        threading.Timer(0.2, target.answer.set).start()
        monitor.unwatch("slow")
        stepping.join(10)
        monitor.stop(log_final=False)
    finally:
        threading.excepthook = previous_hook
    unwatched = journal.entries.index(("unwatched", "slow"))
    assert ("payload", "slow/frames") in journal.entries[:unwatched]


def _step_until(monitor: LoggerMonitor, stopped: threading.Event) -> None:
    while not stopped.is_set():
        monitor.step()


def test_a_step_on_another_thread_during_stop_never_polls_beside_the_final_snapshot() -> (
    None
):
    class OneAtATime:
        def __init__(self) -> None:
            self.inside = 0
            self.overlaps = 0
            self.frames = 0

        def stats(self) -> dict[str, int]:
            self.inside += 1
            self.overlaps += self.inside > 1
            time.sleep(0.01)
            self.frames += 1
            self.inside -= 1
            return {"frames": self.frames}

    for _ in range(5):
        source = OneAtATime()
        monitor = LoggerMonitor(InMemorySink(), poll_interval=0.02, stop_timeout=5)
        monitor.watch(source, name="s")
        monitor.start()
        stopped = threading.Event()
        stepper = threading.Thread(target=_step_until, args=(monitor, stopped))
        stepper.start()
        time.sleep(0.05)
        monitor.stop()
        stopped.set()
        stepper.join(10)
        assert source.overlaps == 0


def test_step_from_another_thread_polls_on_the_monitor_thread() -> None:
    seen: list[str] = []

    def provider() -> dict[str, float]:
        seen.append(threading.current_thread().name)
        return {"frames": 1}

    monitor = LoggerMonitor(InMemorySink(), poll_interval=3600)
    monitor.watch(object(), name="w", stats_fn=provider)
    with monitor:
        logged = monitor.step()
    assert "w" in logged
    assert seen[0] == "rlpulse-poller"


def test_on_error_raise_a_failing_final_snapshot_is_raised_after_draining() -> None:
    class FailsAtStop(Source):
        failing = False

        def stats(self) -> dict[str, float]:
            if self.failing:
                raise RuntimeError("stats failed at stop")
            return super().stats()

    class Flushed(Recorder):
        flushes = 0

        def flush(self) -> None:
            self.flushes += 1

    # Threads other tests left to finish a call (a slow sink's) are not this one's.
    others = set(threading.enumerate())
    sink = Flushed()
    failing = FailsAtStop()
    monitor = LoggerMonitor(sink, poll_interval=0.01, on_error="raise")
    monitor.watch(failing, name="failing")
    monitor.watch(Source(), name="after")
    monitor.start()
    assert wait_until(lambda: frames_logged(sink, "after") >= 3)
    failing.failing = True
    with pytest.raises(RuntimeError, match="stats failed at stop"):
        monitor.stop()
    assert monitor.stats()["queued"] == 0
    assert sink.flushes == 1
    assert not any(
        thread.name.startswith("rlpulse-sink")
        for thread in set(threading.enumerate()) - others
    )


def test_step_after_the_polling_thread_ended_polls_on_the_calling_thread() -> None:
    class BreaksOnce:
        broken = True

        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            if self.broken:
                raise RuntimeError("boom")

    sink = BreaksOnce()
    source = Source()
    previous_hook = threading.excepthook
    raised: list[BaseException | None] = []
    threading.excepthook = lambda args: raised.append(args.exc_value)
    try:
        monitor = LoggerMonitor(sink, poll_interval=0.01, on_error="raise")
        monitor.watch(source, name="s")
        monitor.start()
        assert wait_until(lambda: bool(raised))
        assert wait_until(lambda: "polling thread ended" in repr(monitor))
        sink.broken = False
        frames = source.frames
        logged = monitor.step()
        assert source.frames == frames + 1
        assert logged["s"]["s/frames"] == frames + 1
        # Delivered without waiting for stop(): the step woke the queues.
        assert wait_until(lambda: monitor.stats()["queued"] == 0)
        monitor.stop(log_final=False)
    finally:
        threading.excepthook = previous_hook


class ClosableRecorder(Recorder):
    """A recorder that notes which calls came after it was closed."""

    def __init__(self) -> None:
        super().__init__()
        self.closed = False
        self.after_close = 0

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        if self.closed:
            self.after_close += 1
        super().log_metrics(metrics, step)


def test_stop_waits_for_a_slow_call_within_poll_timeout_for_its_final_snapshot(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = ClosableRecorder()
    slow = Blocking(seconds=0.3)
    monitor = LoggerMonitor(sink, poll_interval=0.05, poll_timeout=5, stop_timeout=5)
    monitor.watch(slow, name="slow")
    with caplog.at_level(logging.WARNING):
        monitor.start()
        assert wait_until(lambda: frames_logged(sink, "slow") >= 2)
        monitor.stop()
    sink.closed = True
    final, _ = sink.calls[-1]
    assert final["slow/frames"] == slow.calls  # the last call is the final snapshot
    assert not any("no final snapshot" in m for m in rlpulse_warnings(caplog))
    time.sleep(0.5)
    assert sink.after_close == 0


def test_a_hung_call_that_returns_after_stop_delivers_nothing() -> None:
    sink = ClosableRecorder()
    hung = Blocking(block_after=1)
    monitor = LoggerMonitor(sink, poll_interval=0.02, poll_timeout=0.2, stop_timeout=1)
    monitor.watch(hung, name="hung")
    monitor.start()
    assert wait_until(lambda: monitor.stats()["hung"] == 1)
    monitor.stop()
    sink.closed = True
    hung.release.set()  # the call left behind returns now
    assert wait_until(lambda: hung.returned == 2)
    time.sleep(0.3)
    assert sink.after_close == 0
