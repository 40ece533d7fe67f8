"""The runtime under concurrency: exact counters, and sinks drained side by side at stop.

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
from typing import Any

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torchrl.record.loggers import TensorboardLogger

from rlpulse import Every, LoggerMonitor, SQLiteLogger, read
from rlpulse.testing import InMemorySink
from tests.support import Blocking, Source, frames_logged, wait_until

pytestmark = pytest.mark.timeout(60)


class AlwaysFailing:
    """A sink whose every call raises; it counts its calls (one sender thread calls it)."""

    def __init__(self) -> None:
        self.calls = 0

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        self.calls += 1
        raise RuntimeError("sink down")


class Hung:
    """A sink whose calls block until released."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        self.release.wait()


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
    monitor = LoggerMonitor(
        sinks, poll_interval=0.001, on_error="ignore", queue_size=100_000
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
        # A round's polls are counted from the moment they are made.
        assert stats["polls"] >= stats["rounds"]
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


class Discard:
    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        pass


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


class Batches:
    """A sink with log_batch that records each batch's size and takes ``seconds`` per call."""

    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds = seconds
        self.sizes: list[int] = []

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        raise AssertionError("a sink with log_batch gets batches")

    def log_batch(self, payloads: list[object]) -> None:
        self.sizes.append(len(payloads))
        time.sleep(self.seconds)


def test_batches_grow_when_the_sink_is_slower_than_the_polls() -> None:
    busy = Batches(seconds=0.05)
    monitor = LoggerMonitor(busy, poll_interval=0.005, queue_size=10_000)
    for index in range(20):
        monitor.watch(Source(), name=f"w{index}")
    with monitor:
        assert wait_until(lambda: sum(busy.sizes) >= 400)
    assert monitor.stats()["dropped"] == 0
    assert max(busy.sizes) > 20  # several rounds' payloads in one call
    assert sum(busy.sizes) == monitor.stats()["logged"]  # none lost


def test_under_light_load_a_batch_is_one_payload_and_sqlite_keeps_them_all(
    tmp_path: Path,
) -> None:
    quick = Batches()
    store = SQLiteLogger(tmp_path / "light.sqlite")
    monitor = LoggerMonitor([quick, store], poll_interval=0.2)
    source = Source()
    monitor.watch(source, name="source")
    try:
        with monitor:
            assert wait_until(lambda: len(quick.sizes) >= 5)
            # While it runs: stop() may add its final snapshot to the last
            # round's payload before the sender has taken that one.
            running = list(quick.sizes)
        frames = [r.value for r in read(store.path) if r.name == "source/frames"]
    finally:
        store.close()
    assert set(running) == {1}
    assert frames == [float(n) for n in range(1, source.frames + 1)]


def _context_switches(thread: threading.Thread) -> int:
    status = Path(f"/proc/self/task/{thread.native_id}/status").read_text()
    return sum(
        int(line.split()[1]) for line in status.splitlines() if "ctxt_switches" in line
    )


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
        before = {t.name: _context_switches(t) for t in threads}
        time.sleep(0.5)
        woke = {t.name: _context_switches(t) - before[t.name] for t in threads}
    # A watchdog checking every 3 ms would have woken about 150 times.
    assert max(woke.values()) <= 5, woke


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
            _context_switches(watchdog),
        )
        time.sleep(1.0)
        rounds = monitor.stats()["rounds"] - rounds_before
        woke = _context_switches(watchdog) - woke_before
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


def test_a_call_left_behind_returning_mid_round_leaves_polling_running() -> None:
    # The slow call is left behind; it returns while the live thread's
    # round has counted as many polls and payloads as it: closing either
    # thread's tally must not take the other's.
    from rlpulse import Every

    armed, a_called, release = threading.Event(), threading.Event(), threading.Event()

    def slow() -> dict[str, float]:
        if armed.is_set() and not release.is_set():
            release.wait(5)
        return {"s": 1}

    def a() -> dict[str, float]:
        if armed.is_set():
            a_called.set()
        return {"a": 1}

    def q() -> dict[str, float]:
        if a_called.is_set() and not release.is_set():
            release.set()  # slow returns while this round's tally is [2, 1]
            time.sleep(0.06)  # below the hand-over delay
        return {"n": 0}

    sink = Discard()
    monitor = LoggerMonitor(sink, poll_interval=0.1, poll_timeout=5.0)
    monitor.watch(None, name="a", stats_fn=a, schedule=Every.seconds(0.5))
    monitor.watch(None, name="q", stats_fn=q, schedule=Every.counter("n", 10**9))
    monitor.watch(None, name="slow", stats_fn=slow)
    monitor.watch(
        None, name="b", stats_fn=lambda: {"n": 0}, schedule=Every.counter("n", 10**9)
    )
    monitor.start()
    try:
        time.sleep(0.15)  # the first round logged all four
        armed.set()  # the next leaves slow's call behind
        time.sleep(1.2)
        state = repr(monitor)
    finally:
        release.set()
        monitor.stop(log_final=False)
    assert "running" in state, state


def _three_watches(monitor: LoggerMonitor) -> LoggerMonitor:
    for name in ("a", "b", "c"):
        monitor.watch(None, name=name, stats_fn=lambda: {"x": 1})
    return monitor


def test_the_final_round_never_drops_its_own_payloads_from_a_small_queue(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = InMemorySink()
    monitor = _three_watches(LoggerMonitor(sink, poll_interval=10.0, queue_size=1))
    monitor.start()
    with caplog.at_level(logging.WARNING, logger="rlpulse"):
        monitor.stop()  # before the first timed round: the finals of all three
    assert sorted(next(iter(metrics)) for metrics, _ in sink.calls) == [
        "a/x",
        "b/x",
        "c/x",
    ]
    assert monitor.stats()["dropped"] == 0
    assert not [r for r in caplog.records if "dropped" in r.getMessage()]


def test_a_step_on_the_polling_thread_never_drops_its_own_payloads() -> None:
    sink = InMemorySink()
    monitor = _three_watches(LoggerMonitor(sink, poll_interval=10.0, queue_size=1))
    monitor.start()
    logged = monitor.step()  # a request round of all three
    monitor.stop(log_final=False)
    assert sorted(logged) == ["a", "b", "c"]
    assert len(sink.calls) == 3


def test_a_call_given_up_on_once_cannot_be_given_up_on_again() -> None:
    # stop() and the watchdog may both give up on the call under way: only
    # the first may hand the rest of the round to a fresh thread.
    from rlpulse.runtime.poller import Round
    from rlpulse.watch import Watch, WatchSpec

    watch = Watch(WatchSpec("w", provider=dict))
    polls = Round((watch,), force=False)
    polls.index = 1  # its call is under way
    assert polls.give_up_on(watch)
    assert not polls.give_up_on(watch)


def _held_call() -> tuple[threading.Event, threading.Event, Any]:
    """A provider whose call is held until released: (in the call, release, provider)."""
    release, in_call = threading.Event(), threading.Event()

    def slow() -> dict[str, float]:
        in_call.set()
        release.wait(10)
        return {"s": 1}

    return in_call, release, slow


def test_a_watchdog_hand_over_that_lost_to_stop_polls_nothing_after_stop() -> None:
    in_call, release, slow = _held_call()
    sink = InMemorySink()
    monitor = LoggerMonitor(sink, poll_interval=5.0, poll_timeout=30.0, stop_timeout=1)
    monitor.watch(None, name="slow", stats_fn=slow, log_on_close=False)
    monitor.watch(None, name="w2", stats_fn=lambda: {"x": 1}, log_on_close=False)
    monitor.start()
    threading.Thread(target=monitor.step, daemon=True).start()  # a request round
    try:
        assert in_call.wait(5)
        poller = monitor._engine.poller
        assert poller is not None
        assert poller.active is not None
        polls, watch = poller.active, poller.active.current
        assert watch is not None
        monitor.stop()
        # The watchdog's hand-over, decided before stop() took the table's lock.
        poller.leave_behind(polls, watch, since=time.monotonic() - 1.0, hung=False)
        time.sleep(0.3)
        assert sink.calls == []
    finally:
        release.set()


def test_stop_ends_the_step_requests_waiting_while_more_arrive() -> None:
    from rlpulse.runtime.poller import Round

    in_call, release, slow = _held_call()
    monitor = LoggerMonitor(
        Discard(), poll_interval=5.0, poll_timeout=30.0, stop_timeout=1
    )
    monitor.watch(None, name="slow", stats_fn=slow)
    monitor.start()
    threading.Thread(target=monitor.step, daemon=True).start()  # stuck in slow
    try:
        assert in_call.wait(5)
        poller = monitor._engine.poller
        assert poller is not None
        waiting = Round(monitor._engine.watches(), force=False)
        arriving = Round(monitor._engine.watches(), force=False)

        class Arrival(threading.Event):
            # Another thread's step() adds its request while stop() ends one.
            def set(self) -> None:
                poller.request(arriving)
                super().set()

        waiting.done = Arrival()
        poller.request(waiting)  # a second step() waiting its turn
        monitor.stop()
        assert monitor._engine.poller is None
        assert waiting.done.is_set()
        assert arriving.done.is_set()
    finally:
        release.set()


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


def test_a_queue_holds_its_size_again_after_a_round_larger_than_it() -> None:
    # Five hourly watches make the first round larger than the queue; the
    # rounds after it poll one watch, and the sink hangs: the queue's bound
    # is queue_size again, not the largest round.
    from rlpulse import Every

    gate = threading.Event()

    class Hung:
        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            gate.wait(30)

    monitor = LoggerMonitor(Hung(), poll_interval=0.05, queue_size=2, stop_timeout=1)
    for index in range(5):
        monitor.watch(
            None,
            name=f"h{index}",
            stats_fn=lambda: {"x": 1},
            schedule=Every.seconds(3600),
        )
    monitor.watch(None, name="every", stats_fn=lambda: {"x": 1})
    monitor.start()
    try:
        assert wait_until(lambda: monitor.stats()["rounds"] >= 5)
        queued = monitor.stats()["queued"]
    finally:
        gate.set()
        monitor.stop(log_final=False)
    assert queued <= 2


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
