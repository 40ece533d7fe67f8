"""The runtime under concurrency, across its modules: exact counters, sinks drained side by side, idle threads asleep.

Counters stay exact while sender threads count at once; a hung sink keeps
no real sink from its final flush; a monitor with nothing to do wakes no
thread; four threads may watch and unwatch while it polls.

Real threads, real sinks (rlpulse's SQLite store read back, TorchRL's
``TensorboardLogger`` read back with TensorBoard's own reader), under a hard
deadline.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torchrl.record.loggers import TensorboardLogger

from rlpulse import LoggerMonitor, SQLiteLogger, read
from rlpulse.testing import InMemorySink
from tests.support import (
    Discard,
    Source,
    context_switches,
    frames_logged,
    wait_until,
)

pytestmark = pytest.mark.timeout(60)


class Hung:
    """A sink whose calls block until released."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        self.release.wait()


class AlwaysFailing:
    """A sink whose every call raises; it counts its calls (one sender thread calls it)."""

    def __init__(self) -> None:
        self.calls = 0

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        self.calls += 1
        raise RuntimeError("sink down")


@pytest.fixture
def fast_thread_switches() -> Iterator[None]:
    # Switch threads as often as the interpreter allows, so that an
    # unguarded counter shared by the sender threads loses increments.
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


@pytest.mark.usefixtures("fast_thread_switches")
def test_every_failure_of_sinks_failing_at_once_is_counted() -> None:
    sinks = [AlwaysFailing() for _ in range(8)]
    # Time enough at stop() to drain every queue, however busy the machine:
    # what is counted, not how fast, is under test.
    monitor = LoggerMonitor(
        sinks,
        poll_interval=0.001,
        on_error="ignore",
        queue_size=100_000,
        stop_timeout=60,
    )
    for index in range(20):
        monitor.watch(Source(), name=f"w{index}")
    monitor.start()
    assert wait_until(lambda: min(sink.calls for sink in sinks) >= 2_000)
    monitor.stop()
    stats = monitor.stats()
    assert stats["dropped"] == 0
    assert stats["errors"] == sum(sink.calls for sink in sinks)
    # Every payload reached every sink, and every call failed.
    assert {sink.calls for sink in sinks} == {stats["logged"]}


def test_stats_counts_are_consistent_while_polling() -> None:
    monitor = LoggerMonitor(AlwaysFailing(), poll_interval=0.001, on_error="ignore")
    monitor.watch(Source(), name="source")
    with monitor:
        assert wait_until(lambda: monitor.stats()["rounds"] >= 50)
        stats = monitor.stats()
        # A round polls the one watch at most once (none where it was polled
        # a moment before, after a round that overran), its poll counted
        # from the moment it is made: the round in progress's too.
        assert 0 < stats["polls"] <= stats["rounds"] + 1
        assert stats["logged"] <= stats["polls"]


def test_a_hung_sink_listed_first_keeps_neither_sqlite_nor_tensorboard_from_its_final_flush(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    hung = Hung()
    store = SQLiteLogger(tmp_path / "metrics.sqlite")
    board = TensorboardLogger(exp_name="tb", log_dir=str(tmp_path))
    source = Source()
    monitor = LoggerMonitor([hung, store, board], poll_interval=0.02, stop_timeout=2)
    monitor.watch(source, name="source")
    try:
        with caplog.at_level(logging.WARNING, logger="rlpulse"):
            monitor.start()
            assert wait_until(lambda: source.frames >= 3)
            started = time.monotonic()
            monitor.stop()
            took = time.monotonic() - started
        final_frames = float(source.frames)
        # Read back while the store is still open: what stop() flushed.
        stored = [r.value for r in read(store.path) if r.name == "source/frames"]
        board.experiment.flush()
        accumulator = EventAccumulator(str(tmp_path / "tb"))
        accumulator.Reload()
        charted = [event.value for event in accumulator.Scalars("source/frames")]
    finally:
        hung.release.set()
        store.close()
    warnings = [r.getMessage() for r in caplog.records if r.name == "rlpulse"]
    assert took < 3
    assert any("without draining sink Hung" in m for m in warnings)
    assert not any("SQLiteLogger" in m or "TensorboardLogger" in m for m in warnings)
    assert stored[-1] == final_frames  # the final snapshot, flushed
    assert charted[-1] == final_frames


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc")
def test_no_thread_wakes_while_the_monitor_has_nothing_to_do() -> None:
    # A short poll_timeout makes the watchdog check every few milliseconds
    # while a round runs; between rounds a minute apart it must sleep.
    monitor = LoggerMonitor(Discard(), poll_interval=60, poll_timeout=0.01)
    monitor.watch(Source(), name="source")
    with monitor:
        time.sleep(0.2)  # the first round is a minute away: all idle
        threads = [t for t in threading.enumerate() if t.name.startswith("rlpulse-")]
        assert {t.name for t in threads} >= {"rlpulse-poller", "rlpulse-watchdog"}
        before = {t.name: context_switches(t) for t in threads}
        time.sleep(0.5)
        woke = {t.name: context_switches(t) - before[t.name] for t in threads}
    # A watchdog checking every 3 ms would have woken about 150 times.
    assert max(woke.values()) <= 5, woke


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
