"""A hung target or sink stalls nobody else; stop is bounded; exit and fork (SPEC 2.5, 2.6).

Every test here runs real threads (and some real processes) under a hard
deadline, so a regression fails instead of hanging.
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

import rlpulse
from rlpulse import Every, LoggerMonitor
from rlpulse.testing import InMemorySink
from tests.support import Blocking, Source, not_delivered, wait_until

pytestmark = pytest.mark.timeout(60)


class Recorder:
    """A plain, thread-safe sink keeping every call: the base of the sinks here that fail, stall or time their calls."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[dict[str, float], int | None]] = []

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        with self.lock:
            self.calls.append((dict(metrics), step))


def frames_logged(sink: Recorder | InMemorySink, watch: str) -> int:
    """How many payloads of watch ``watch`` (each with its ``frames``) ``sink`` was given."""
    return sum(1 for metrics, _ in sink.calls if f"{watch}/frames" in metrics)


def rlpulse_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "rlpulse"]


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


def test_the_hung_watch_is_not_polled_again_while_its_call_is_outstanding() -> None:
    hung = Blocking(block_after=1)
    monitor = LoggerMonitor(InMemorySink(), poll_interval=0.01, poll_timeout=0.1)
    monitor.watch(hung, name="hung")
    with monitor:
        assert wait_until(lambda: monitor.stats()["hung"] == 1)
        time.sleep(0.3)
        assert hung.calls == 2
    hung.release.set()


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


def test_a_slow_sink_delays_neither_polls_nor_the_fast_sink() -> None:
    class Sleepy:
        calls = 0

        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            self.calls += 1
            time.sleep(1.0)

    sleepy, fast = Sleepy(), InMemorySink()
    monitor = LoggerMonitor([sleepy, fast], poll_interval=0.01, stop_timeout=3)
    monitor.watch(Source(), name="source")
    with monitor:
        assert wait_until(lambda: frames_logged(fast, "source") >= 50, timeout=10)
        assert sleepy.calls <= 3


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


def test_a_full_queue_drops_the_oldest_payload_and_counts_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate = threading.Event()

    class Stuck:
        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            gate.wait()

    monitor = LoggerMonitor(
        [Stuck(), InMemorySink()], poll_interval=0.005, queue_size=5, stop_timeout=1
    )
    monitor.watch(Source(), name="source")
    with caplog.at_level(logging.WARNING):
        monitor.start()
        assert wait_until(lambda: monitor.stats()["dropped"] >= 10)
        assert monitor.stats()["queued"] <= 5 + 5  # Stuck's queue stays bounded
        monitor.stop()
    gate.set()
    drop_warnings = [m for m in rlpulse_warnings(caplog) if "dropped the oldest" in m]
    assert len(drop_warnings) == 1
    assert "Stuck" in drop_warnings[0]


def test_stop_returns_in_time_while_a_sink_blocks_forever(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate = threading.Event()

    class Frozen:
        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            gate.wait()

    good = InMemorySink()
    monitor = LoggerMonitor([Frozen(), good], poll_interval=0.01, stop_timeout=1.0)
    monitor.watch(Source(), name="source")
    with caplog.at_level(logging.WARNING):
        monitor.start()
        assert wait_until(lambda: frames_logged(good, "source") >= 3)
        started = time.monotonic()
        monitor.stop()
        took = time.monotonic() - started
    gate.set()
    assert took < 1.5
    assert any("without draining sink Frozen" in m for m in rlpulse_warnings(caplog))
    final, _ = good.calls[-1]
    assert "source/frames_per_second" in final  # the final snapshot, with rates


class Outage(Recorder):
    """A sink of one's own whose far end goes away: while ``away`` is set its calls raise TransientSinkError and store nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.away = threading.Event()
        self.failed_calls = 0

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        if self.away.is_set():
            self.failed_calls += 1
            raise rlpulse.TransientSinkError("far end away", retry_after=0.05)
        super().log_metrics(metrics, step)


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


class Overrunning:
    """A batch sink whose call, once ``armed``, outlives stop(): it waits for ``go``, then stores its payloads."""

    def __init__(self) -> None:
        self.delivered = 0
        self.armed = threading.Event()
        self.in_call = threading.Event()
        self.go = threading.Event()

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        self.log_batch([(metrics, step, None)])

    def log_batch(self, payloads: list[Any]) -> None:
        if self.armed.is_set():
            self.armed.clear()
            self.in_call.set()
            assert self.go.wait(20)
        self.delivered += len(payloads)


def test_a_call_that_outlives_stop_and_then_succeeds_is_not_counted_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink, kept = Overrunning(), InMemorySink()
    monitor = LoggerMonitor([sink, kept], poll_interval=0.01, stop_timeout=0.5)
    monitor.watch(Source(), name="source")
    with caplog.at_level(logging.WARNING):
        monitor.start()
        assert wait_until(lambda: sink.delivered >= 3)
        sink.armed.set()
        assert sink.in_call.wait(5)
        time.sleep(0.05)  # rounds queued behind the call
        monitor.stop()
    sink.go.set()  # the call returns after stop() gave up on it: delivered
    assert wait_until(
        lambda: (
            not any(t.name == "rlpulse-sink-Overrunning" for t in threading.enumerate())
        )
    )
    stats = monitor.stats()

    assert sink.delivered + stats["dropped"] + stats["rejected"] == len(kept.payloads)
    [drained] = [m for m in rlpulse_warnings(caplog) if "without draining" in m]
    assert f"{not_delivered(stats['dropped'])} (counted in dropped)" in drained
    assert (
        "still being written by it (counted in rejected only if that call fails)"
        in drained
    )


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


def test_a_payload_a_sink_refuses_in_manual_mode_is_counted_rejected() -> None:
    class Refusing:
        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            raise ValueError("refused")

    monitor = LoggerMonitor(
        [Refusing(), InMemorySink()], background=False, on_error="ignore"
    )
    monitor.watch(Source(), name="source")
    monitor.step()
    monitor.step()
    assert (monitor.stats()["rejected"], monitor.stats()["errors"]) == (2, 2)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_sink_that_ends_its_feeding_thread_is_said_at_stop_with_what_it_left(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Exiting:
        calls = 0

        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            self.calls += 1
            if self.calls == 2:
                raise SystemExit(3)  # what no thread of rlpulse catches

    sink = Exiting()
    monitor = LoggerMonitor(sink, poll_interval=0.01, stop_timeout=1.0)
    monitor.watch(Source(), name="source")
    with caplog.at_level(logging.WARNING):
        monitor.start()
        assert wait_until(lambda: sink.calls == 2)
        time.sleep(0.1)  # rounds polled after it, never delivered
        monitor.stop()
    stats = monitor.stats()
    assert stats["dropped"] > 0
    [drained] = [m for m in rlpulse_warnings(caplog) if "without draining" in m]
    assert "the thread feeding it ended on SystemExit(3)" in drained
    assert not_delivered(stats["dropped"]) in drained


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_the_payloads_of_the_call_that_ended_a_sinks_feeding_thread_count_as_rejected() -> (
    None
):
    class ExitingBatches:
        def __init__(self) -> None:
            self.delivered = 0
            self.calls = 0

        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            self.log_batch([(metrics, step, None)])

        def log_batch(self, payloads: list[Any]) -> None:
            self.calls += 1
            if self.calls == 3:
                raise SystemExit(3)  # what no thread of rlpulse catches
            self.delivered += len(payloads)

    sink = ExitingBatches()
    kept = InMemorySink()
    monitor = LoggerMonitor([sink, kept], poll_interval=0.01, stop_timeout=1.0)
    monitor.watch(Source(), name="source")
    with monitor:
        assert wait_until(lambda: sink.calls == 3)
        time.sleep(0.1)  # rounds polled after it, never delivered
    stats = monitor.stats()

    assert stats["rejected"] >= 1  # the call's payloads: the sink raised on them
    assert sink.delivered + stats["dropped"] + stats["rejected"] == len(kept.payloads)


@pytest.mark.parametrize("hangs_in", ["log_metrics", "flush"])
def test_manual_stop_returns_in_time_while_a_sink_hangs(
    caplog: pytest.LogCaptureFixture, hangs_in: str
) -> None:
    gate = threading.Event()

    class Frozen:
        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            if hangs_in == "log_metrics":
                gate.wait(20)

        def flush(self) -> None:
            gate.wait(20)

    class Flushed(Recorder):
        flushed = False

        def flush(self) -> None:
            self.flushed = True

    good = Flushed()
    monitor = LoggerMonitor([Frozen(), good], background=False, stop_timeout=1.0)
    monitor.watch(Source(), name="source")
    try:
        with caplog.at_level(logging.WARNING):
            started = time.monotonic()
            monitor.stop()
            took = time.monotonic() - started
    finally:
        gate.set()
    assert took < 1.5
    assert good.flushed  # the hung sink kept no other from its flush
    assert any("without flushing sink Frozen" in m for m in rlpulse_warnings(caplog))


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


def test_once_unwatch_returns_nothing_more_is_logged_for_that_watch() -> None:
    # Payloads carry the source's call count: one produced by a call made
    # after unwatch() returned would carry more frames than seen then.
    sink = InMemorySink()
    monitor = LoggerMonitor(sink, poll_interval=0.001)
    with monitor:
        sources = []
        for round_ in range(30):
            source = Source()
            name = monitor.watch(source, name=f"w{round_}")
            time.sleep(0.003)
            monitor.unwatch(name)
            sources.append((name, source.frames))
    for name, frames_at_unwatch in sources:
        logged = sink.values(f"{name}/frames")
        assert all(frames <= frames_at_unwatch for frames in logged), name


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


def test_four_threads_churning_watch_and_unwatch_during_fast_polling() -> None:
    sink = InMemorySink()
    monitor = LoggerMonitor(sink, poll_interval=0.001)
    errors: list[BaseException] = []
    stop_at = time.monotonic() + 2.0

    def churn(index: int) -> None:
        round_ = 0
        try:
            while time.monotonic() < stop_at:
                name = monitor.watch(Source(), name=f"t{index}_{round_}")
                if round_ % 3 == 0:
                    monitor.step()
                monitor.unwatch(name)
                round_ += 1
        except BaseException as err:  # reported below
            errors.append(err)

    monitor.watch(Source(), name="steady")
    with monitor:
        threads = [threading.Thread(target=churn, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    assert errors == []
    assert monitor.stats()["watches"] == 1
    assert frames_logged(sink, "steady") > 10


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


def test_on_error_raise_with_a_failing_sink_ends_background_polling() -> None:
    class Broken:
        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            raise RuntimeError("boom")

    source = Source()
    previous_hook = threading.excepthook
    raised: list[BaseException | None] = []
    threading.excepthook = lambda args: raised.append(args.exc_value)
    try:
        monitor = LoggerMonitor(Broken(), poll_interval=0.01, on_error="raise")
        monitor.watch(source, name="s")
        monitor.start()
        assert wait_until(lambda: bool(raised))
        frames = source.frames
        time.sleep(0.1)
        assert source.frames == frames  # polling ended
        monitor.stop(log_final=False)
    finally:
        threading.excepthook = previous_hook
    assert isinstance(raised[0], RuntimeError)


def test_a_dropped_monitor_is_collected() -> None:
    import gc
    import weakref

    monitor = LoggerMonitor(InMemorySink(), background=False)
    monitor.watch(Source())
    reference = weakref.ref(monitor)
    del monitor
    gc.collect()
    assert reference() is None


def test_a_script_that_exits_without_stop_still_logs_its_final_snapshot(
    tmp_path: Path,
) -> None:
    store = tmp_path / "run.sqlite"
    script = textwrap.dedent(
        f"""
        from rlpulse import Every, LoggerMonitor, SQLiteLogger

        class Source:
            frames = 0
            def stats(self):
                self.frames += 7
                return {{"frames": self.frames}}

        monitor = LoggerMonitor(SQLiteLogger({str(store)!r}), poll_interval=3600)
        monitor.watch(Source(), name="src", schedule=Every.seconds(3600))
        monitor.start()
        print("started", flush=True)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    records = list(rlpulse.read(store))
    frames = [r.value for r in records if r.name == "src/frames"]
    assert frames == [7.0]  # never polled while running: only the exit hook's final one


@pytest.mark.parametrize(
    ("sink", "counters_made"),
    [("SinkProcess('csv:{store}')", "before"), ("CSVLogger({store!r})", "after")],
)
def test_the_final_snapshot_at_exit_reaches_a_sink_process_from_shared_counters(
    tmp_path: Path, sink: str, counters_made: str
) -> None:
    # Both close themselves at exit (weakref.finalize), as late as ever:
    # made before the monitor starts, or after it (the first such object
    # of the process).
    store = str(tmp_path / "run.csv")
    make = "counters = SharedCounters(2, counters=('frames',))"
    script = textwrap.dedent(
        f"""
        from rlpulse import CSVLogger, LoggerMonitor, SharedCounters, SinkProcess

        {make if counters_made == "before" else ""}
        monitor = LoggerMonitor({sink.format(store=store)}, poll_interval=3600)
        monitor.start()
        {make if counters_made == "after" else ""}
        monitor.watch(counters, name="workers", log_on_start=False)
        counters.worker(1).inc("frames", 99)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    frames = [r.value for r in rlpulse.read(store) if r.name == "workers/frames"]
    assert frames == [99.0]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_inherits_an_inert_monitor_that_can_start_again() -> None:
    sink = InMemorySink()
    monitor = LoggerMonitor(sink, poll_interval=0.001)
    monitor.watch(Source(), name="s")
    monitor.start()
    assert wait_until(lambda: frames_logged(sink, "s") > 5)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            child_sink = InMemorySink()
            inert = repr(monitor).endswith("idle)")
            monitor._sinks[0].target.clear()
            time.sleep(0.05)
            quiet = frames_logged(sink, "s") == 0
            monitor.stop()  # nothing to stop: inert
            monitor._engine.delivery.sinks = (rlpulse.runtime.sinks.Sink(child_sink),)
            monitor.start()
            started = wait_until(lambda: frames_logged(child_sink, "s") > 2, timeout=10)
            monitor.stop()
            code = 0 if (inert and quiet and started) else 3
            os.write(write_end, f"{inert} {quiet} {started}".encode())
        finally:
            os._exit(code)
    os.close(write_end)
    _, status = os.waitpid(pid, 0)
    report = os.read(read_end, 100).decode()
    os.close(read_end)
    monitor.stop()
    assert os.waitstatus_to_exitcode(status) == 0, report


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_a_polling_thread_ends_a_round_polls_on_its_own() -> None:
    # Every polling thread ends its timed rounds the same way; a child forked
    # while one of them (of any monitor) was doing so must inherit nothing
    # held. Taken here as that thread would hold it, then forked.
    from rlpulse.runtime import poller

    held = poller._UNAWAITED._cond
    held.acquire()
    pid = os.fork()
    if pid:
        held.release()  # the child's copy stays held
    else:  # pragma: no cover - runs in the child
        child_sink = InMemorySink()
        child = LoggerMonitor(child_sink, poll_interval=0.001)
        child.watch(Source(), name="c")
        child.start()
        polled = wait_until(lambda: frames_logged(child_sink, "c") > 5, timeout=5)
        os._exit(0 if polled else 3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_bad_timeouts_and_queue_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="poll_timeout"):
        LoggerMonitor(InMemorySink(), poll_timeout=0)
    with pytest.raises(ValueError, match="stop_timeout"):
        LoggerMonitor(InMemorySink(), stop_timeout=-1)
    with pytest.raises(ValueError, match="queue_size"):
        LoggerMonitor(InMemorySink(), queue_size=0)
    monitor = LoggerMonitor(InMemorySink(), background=False)
    with pytest.raises(ValueError, match="poll_timeout"):
        monitor.watch(Source(), poll_timeout=float("inf"))


def test_monitor_stats_show_queues_and_hung_watches() -> None:
    stats: dict[str, Any] = LoggerMonitor(InMemorySink(), background=False).stats()
    assert {"timeouts", "dropped", "hung", "queued"} <= set(stats)


def test_a_seconds_schedule_in_background_is_polled_once_per_interval() -> None:
    calls: list[float] = []

    def provider() -> dict[str, float]:
        calls.append(time.monotonic())
        return {"frames": len(calls)}

    monitor = LoggerMonitor(InMemorySink(), poll_interval=0.005)
    monitor.watch(object(), name="w", stats_fn=provider, schedule=Every.seconds(0.2))
    with monitor:
        time.sleep(0.7)
    # first poll, ~3 due polls, and the final snapshot; never one per 5 ms
    assert 3 <= len(calls) <= 7


def test_a_sink_stuck_at_stop_gets_no_more_calls_once_stop_returns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate = threading.Event()

    class Frozen:
        def __init__(self) -> None:
            self.calls = 0
            self.flushed = False

        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            self.calls += 1
            gate.wait()

        def flush(self) -> None:
            self.flushed = True

    sink = Frozen()
    monitor = LoggerMonitor(sink, poll_interval=0.01, stop_timeout=1.0)
    monitor.watch(Source(), name="source")
    with caplog.at_level(logging.WARNING):
        monitor.start()
        assert wait_until(lambda: monitor.stats()["queued"] >= 5)
        monitor.stop()
    calls_at_stop = sink.calls
    queued = monitor.stats()["queued"]
    gate.set()  # the stuck call returns after stop() gave up on the sink
    time.sleep(0.3)
    assert sink.calls == calls_at_stop == 1
    assert not sink.flushed
    assert queued == 0
    assert monitor.stats()["dropped"] >= 5
    assert any("gets no more calls" in m for m in rlpulse_warnings(caplog))


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


def test_calls_returning_just_as_the_round_moves_on_never_overlap_or_get_stuck() -> (
    None
):
    # Calls that last about the hand-over delay race the watchdog's decision
    # to move the round on: every call must end up either completed by its
    # worker or left behind, never both, never neither.
    class Jittery:
        def __init__(self) -> None:
            self.lock = threading.Lock()
            self.in_flight = 0
            self.most_in_flight = 0
            self.calls = 0
            self.slow = True

        def stats(self) -> dict[str, float]:
            with self.lock:
                self.in_flight += 1
                self.calls += 1
                self.most_in_flight = max(self.most_in_flight, self.in_flight)
            if self.slow:
                time.sleep(0.03 + 0.04 * (self.calls % 5) / 4)
            with self.lock:
                self.in_flight -= 1
            return {"frames": self.calls}

    jittery = Jittery()
    sink = InMemorySink()
    monitor = LoggerMonitor(sink, poll_interval=0.01, poll_timeout=5, stop_timeout=3)
    monitor.watch(jittery, name="jittery")
    monitor.watch(Source(), name="healthy")
    with monitor:
        assert wait_until(lambda: jittery.calls >= 60, timeout=40)
        jittery.slow = False
        calls = jittery.calls
        assert wait_until(lambda: jittery.calls >= calls + 20)
        assert wait_until(lambda: monitor.stats()["hung"] == 0)
    assert jittery.most_in_flight == 1
    assert monitor.stats()["timeouts"] == 0


class SlowThenRaises(Source):
    """A source whose calls take ``seconds``; from ``raise_from`` on they then raise."""

    def __init__(self, seconds: float, raise_from: int) -> None:
        super().__init__()
        self.seconds = seconds
        self.raise_from = raise_from

    def stats(self) -> dict[str, float]:
        snapshot = super().stats()
        time.sleep(self.seconds)
        if self.frames >= self.raise_from:
            raise RuntimeError("provider broke")
        return snapshot


def test_on_error_raise_from_a_call_left_behind_still_ends_polling() -> None:
    slow = SlowThenRaises(seconds=0.3, raise_from=2)
    previous_hook = threading.excepthook
    raised: list[BaseException | None] = []
    threading.excepthook = lambda args: raised.append(args.exc_value)
    try:
        monitor = LoggerMonitor(
            InMemorySink(), poll_interval=0.05, poll_timeout=5, on_error="raise"
        )
        monitor.watch(slow, name="slow")
        monitor.watch(Source(), name="healthy")
        monitor.start()
        assert wait_until(lambda: bool(raised))
        assert wait_until(lambda: "polling thread ended" in repr(monitor))
        monitor.stop(log_final=False)
    finally:
        threading.excepthook = previous_hook
    assert isinstance(raised[0], RuntimeError)
    assert str(raised[0]) == "provider broke"


class TimedRecorder(Recorder):
    """A recorder that also notes when each payload arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.times: dict[str, list[float]] = {}

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        super().log_metrics(metrics, step)
        for key in metrics:
            self.times.setdefault(key, []).append(time.monotonic())


def _slow_once(
    seconds: float,
) -> tuple[threading.Event, Callable[[], dict[str, float]]]:
    arm = threading.Event()

    def provider() -> dict[str, float]:
        if arm.is_set():
            arm.clear()
            time.sleep(seconds)
        return {"frames": 1}

    return arm, provider


@pytest.mark.parametrize("poll_timeout", [5.0, None], ids=["handed over", "waited for"])
def test_a_seconds_schedule_is_not_logged_again_at_once_after_a_round_overran(
    poll_timeout: float | None,
) -> None:
    # The round due after the slow call starts at once; the watch polled
    # late in the overrunning round must not be due again in it.
    sink = TimedRecorder()
    arm, slow = _slow_once(0.6)
    monitor = LoggerMonitor(sink, poll_interval=0.2, poll_timeout=poll_timeout)
    monitor.watch(None, name="slow", stats_fn=slow, schedule=Every.seconds(0.2))
    monitor.watch(
        None, name="fast", stats_fn=lambda: {"y": 1}, schedule=Every.seconds(0.2)
    )
    monitor.start()
    time.sleep(0.35)  # the first round, at 0.2 s, logged both
    arm.set()  # the next round's call of slow holds it up for 0.6 s
    time.sleep(1.5)
    monitor.stop(log_final=False)
    logged = sink.times["fast/y"]
    gaps = [later - earlier for earlier, later in itertools.pairwise(logged)]
    assert len(gaps) >= 3
    assert min(gaps) > 0.005, gaps  # never twice within a few microseconds


def test_a_round_handed_over_is_followed_by_the_next_at_its_due_time() -> None:
    # The thread the round was handed over to sets when the next is due: an
    # every-round watch is not polled again at once, round after round.
    sink = TimedRecorder()
    arm, slow = _slow_once(0.6)
    monitor = LoggerMonitor(sink, poll_interval=0.2, poll_timeout=5.0)
    monitor.watch(None, name="slow", stats_fn=slow)
    monitor.watch(None, name="every", stats_fn=lambda: {"y": 1})
    monitor.start()
    time.sleep(0.35)
    arm.set()  # the next round is handed over past slow's call
    time.sleep(1.5)
    monitor.stop(log_final=False)
    logged = sink.times["every/y"]
    gaps = [later - earlier for earlier, later in itertools.pairwise(logged)]
    # The round after the overrun starts at once; none after it does.
    assert sum(gap < 0.005 for gap in gaps) <= 1, gaps


def test_a_seconds_schedule_shorter_than_the_poll_interval_is_logged_every_round() -> (
    None
):
    # Reached 0.12 s into each 0.2 s round, by no overrun: every round due.
    sink = TimedRecorder()

    def slowish() -> dict[str, float]:
        time.sleep(0.12)
        return {"s": 1}

    monitor = LoggerMonitor(sink, poll_interval=0.2, poll_timeout=5.0)
    monitor.watch(None, name="slowish", stats_fn=slowish)
    monitor.watch(
        None, name="fast", stats_fn=lambda: {"y": 1}, schedule=Every.seconds(0.1)
    )
    monitor.start()
    time.sleep(2.0)
    monitor.stop(log_final=False)
    assert len(sink.times["fast/y"]) >= len(sink.times["slowish/s"]) - 1


def test_on_error_raise_from_the_part_of_a_round_handed_over_ends_polling() -> None:
    arm, slow = _slow_once(0.5)
    fail = threading.Event()

    def flaky() -> dict[str, float]:
        if fail.is_set():
            fail.clear()
            raise RuntimeError("transient")
        return {"y": 1}

    def slow_then_flaky() -> dict[str, float]:
        if arm.is_set():
            fail.set()  # the next watch of this round fails once
        return slow()

    previous_hook = threading.excepthook
    raised: list[BaseException | None] = []
    threading.excepthook = lambda args: raised.append(args.exc_value)
    try:
        monitor = LoggerMonitor(
            InMemorySink(), poll_interval=0.1, poll_timeout=5.0, on_error="raise"
        )
        monitor.watch(None, name="slow", stats_fn=slow_then_flaky)
        monitor.watch(None, name="flaky", stats_fn=flaky)
        monitor.start()
        time.sleep(0.25)
        arm.set()  # the next round is handed over past slow's call
        assert wait_until(lambda: "polling thread ended" in repr(monitor))
        monitor.stop(log_final=False)
    finally:
        threading.excepthook = previous_hook
    assert monitor.stats()["errors"] == 1
    assert [str(error) for error in raised] == ["transient"]


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


def _sigterm_script(store: Path, before: str, opt_in: str = "stop_on_sigterm()") -> str:
    """A script whose background monitor logs nothing until its final snapshot; it prints ``ready``, then waits."""
    return textwrap.dedent(
        f"""
        import signal, sys, time
        from rlpulse import Every, LoggerMonitor, SQLiteLogger, stop_on_sigterm

        class Source:
            frames = 0
            def stats(self):
                self.frames += 7
                return {{"frames": self.frames}}

        {before}
        {opt_in}
        monitor = LoggerMonitor(SQLiteLogger({str(store)!r}), poll_interval=3600)
        monitor.watch(Source(), name="src", schedule=Every.seconds(3600))
        monitor.start()
        print("ready", flush=True)
        time.sleep(60)
        print("not terminated", flush=True)
        """
    )


def _terminate(script: str) -> tuple[int, str]:
    """Run ``script``, send it SIGTERM once it is ready; return its exit status and output."""
    process = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "ready\n"
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    finally:
        process.kill()
        process.wait()
    return process.returncode, out + err


def _final_frames(store: Path) -> list[float]:
    return [r.value for r in rlpulse.read(store) if r.name == "src/frames"]


def test_sigterm_without_the_opt_in_loses_the_final_snapshot(tmp_path: Path) -> None:
    store = tmp_path / "run.sqlite"
    returncode, _ = _terminate(_sigterm_script(store, "", opt_in=""))
    assert returncode == -signal.SIGTERM
    assert _final_frames(store) == []


def test_sigterm_after_stop_on_sigterm_logs_the_final_snapshot_and_terminates(
    tmp_path: Path,
) -> None:
    store = tmp_path / "run.sqlite"
    returncode, output = _terminate(_sigterm_script(store, ""))
    assert returncode == -signal.SIGTERM, output
    assert "not terminated" not in output
    assert _final_frames(store) == [7.0]  # the final snapshot, and only it


def test_sigterm_reaches_the_handler_installed_before_once(tmp_path: Path) -> None:
    store = tmp_path / "run.sqlite"
    before = textwrap.dedent(
        """
        def previous(signum, frame):
            print("previous handler", signum, flush=True)
            sys.exit(3)
        signal.signal(signal.SIGTERM, previous)
        stop_on_sigterm()  # a second call below changes nothing
        """
    ).replace("\n", "\n        ")
    returncode, output = _terminate(_sigterm_script(store, before))
    assert returncode == 3, output
    assert output.count("previous handler") == 1
    assert _final_frames(store) == [7.0]


def test_an_ignored_sigterm_stays_ignored_and_stops_nothing() -> None:
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sink = InMemorySink()
    monitor = LoggerMonitor(sink, poll_interval=3600)
    monitor.watch(Source(), name="s", schedule=Every.seconds(3600))
    try:
        rlpulse.stop_on_sigterm()
        monitor.start()
        signal.raise_signal(signal.SIGTERM)
        assert frames_logged(sink, "s") == 0
        assert repr(monitor).endswith("running)")
    finally:
        signal.signal(signal.SIGTERM, previous)
        monitor.stop()
    assert frames_logged(sink, "s") == 1


def test_sigterm_in_process_stops_running_monitors_before_the_previous_handler() -> (
    None
):
    class Terminated(Exception):
        pass

    seen: list[int] = []
    sink = InMemorySink()

    def earlier(signum: int, frame: object) -> None:
        seen.append(frames_logged(sink, "s"))
        raise Terminated

    previous = signal.signal(signal.SIGTERM, earlier)
    monitor = LoggerMonitor(sink, poll_interval=3600)
    monitor.watch(Source(), name="s", schedule=Every.seconds(3600))
    try:
        rlpulse.stop_on_sigterm()
        installed = signal.getsignal(signal.SIGTERM)
        rlpulse.stop_on_sigterm()  # changes nothing
        assert signal.getsignal(signal.SIGTERM) is installed
        monitor.start()
        with pytest.raises(Terminated):
            signal.raise_signal(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, previous)
        monitor.stop()
    assert seen == [1]  # the final snapshot was logged before it was called
    assert frames_logged(sink, "s") == 1  # and the monitor was stopped


def test_sigterm_while_the_main_thread_holds_a_monitor_lock_still_ends_in_time() -> (
    None
):
    # The handler runs between two bytecodes of the main thread: here inside
    # a section holding the lock stats() takes, which stop() needs too. The
    # stop waits at most the monitors' stop timeouts, then the signal goes on.
    script = textwrap.dedent(
        """
        import os, signal, sys, time
        import rlpulse
        from rlpulse import LoggerMonitor

        class Null:
            def log_metrics(self, metrics, step=None):
                pass

        class Printed:
            def log_metrics(self, metrics, step=None):
                print("other monitor:", sorted(metrics), flush=True)

        def previous(signum, frame):
            print("previous handler", flush=True)
            sys.exit(0)

        signal.signal(signal.SIGTERM, previous)
        rlpulse.stop_on_sigterm()
        monitor = LoggerMonitor(Null(), poll_interval=0.05, stop_timeout=1.0)
        monitor.watch(None, name="a", stats_fn=lambda: {"x": 1})
        monitor.start()
        other = LoggerMonitor(Printed(), poll_interval=3600, stop_timeout=1.0)
        other.watch(None, name="b", stats_fn=lambda: {"x": 1}, log_on_start=False)
        other.start()
        time.sleep(0.2)
        with monitor._engine.reporter._lock:  # as inside monitor.stats()
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)
        print("not terminated", flush=True)
        """
    )
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    # The other monitor still stopped, with its final snapshot.
    assert result.stdout == "other monitor: ['b/x']\nprevious handler\n"
    assert time.monotonic() - started < 20


def test_stop_on_sigterm_from_another_thread_says_to_call_it_in_the_main_thread() -> (
    None
):
    errors: list[BaseException] = []

    def install() -> None:
        try:
            rlpulse.stop_on_sigterm()
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=install)
    thread.start()
    thread.join()
    assert len(errors) == 1
    assert isinstance(errors[0], RuntimeError)
    assert "main thread" in str(errors[0])


def test_a_previous_handler_that_returns_lets_the_process_go_on() -> None:
    calls: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: calls.append(signum))
    sink = InMemorySink()
    monitor = LoggerMonitor(sink, poll_interval=3600)
    monitor.watch(Source(), name="s", schedule=Every.seconds(3600))
    try:
        rlpulse.stop_on_sigterm()
        monitor.start()
        signal.raise_signal(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert calls == [signal.SIGTERM]
    assert frames_logged(sink, "s") == 1  # the final snapshot
    assert repr(monitor).endswith("idle)")  # stopped; the caller goes on
    monitor.stop()
    assert frames_logged(sink, "s") == 1


def test_a_watch_left_in_a_round_under_way_is_not_called_after_unwatch_returned() -> (
    None
):
    in_slow = threading.Event()
    calls_of_b: list[float] = []

    def slow() -> dict[str, float]:
        in_slow.set()
        time.sleep(0.5)  # under the hand-over delay: the round waits for it
        return {"x": 1}

    def b() -> dict[str, float]:
        calls_of_b.append(time.monotonic())
        return {"y": 1}

    monitor = LoggerMonitor(InMemorySink(), poll_interval=1.0, poll_timeout=5.0)
    monitor.watch(None, name="slow", stats_fn=slow, log_on_start=False)
    monitor.watch(None, name="b", stats_fn=b, log_on_start=False)
    monitor.start()
    try:
        assert in_slow.wait(20)  # the round lists b, after slow
        monitor.unwatch("b")
        returned = time.monotonic()
        time.sleep(1.0)
    finally:
        monitor.stop(log_final=False)
    assert [t for t in calls_of_b if t > returned] == []
    assert monitor.stats()["errors"] == 0
