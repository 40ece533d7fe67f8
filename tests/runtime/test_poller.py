"""The polling thread: its cadence, rounds handed over past a slow call, and ``unwatch()`` against a round under way.

``Every.seconds`` logs once per interval, without drift, calling
``stats()`` only when due. Real threads and the real clock, over many
intervals, for intervals longer, shorter and not a multiple of
``poll_interval``; the bounds are a poll interval wide, as the schedule
promises.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from rlpulse import Every, LoggerMonitor
from rlpulse.testing import InMemorySink
from tests.support import Discard, Recorder, Source, wait_until

pytestmark = pytest.mark.timeout(60)


class Timed:
    """A source that notes when each of its ``stats()`` calls came."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def stats(self) -> dict[str, float]:
        self.calls.append(time.monotonic())
        return {"frames": float(len(self.calls))}


class Counting:
    """A sink that counts the payloads of one watch."""

    def __init__(self, watch: str) -> None:
        self.prefix = f"{watch}/"
        self.logged = 0
        self.lock = threading.Lock()

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        if any(key.startswith(self.prefix) for key in metrics):
            with self.lock:
                self.logged += 1


@pytest.mark.parametrize(
    ("seconds", "poll_interval", "companion"),
    [
        (0.2, 0.1, False),
        (0.3, 0.2, True),
        (0.25, 0.25, True),
        (0.1, 0.25, False),
    ],
)
def test_a_seconds_schedule_logs_once_per_due_time_without_drift(
    seconds: float, poll_interval: float, companion: bool
) -> None:
    # companion: a watch called every round beside it, so rounds keep the
    # poll interval's beat instead of waking at the schedule's due times.
    source, sink = Timed(), Counting("timed")
    monitor = LoggerMonitor(sink, poll_interval=poll_interval)
    monitor.watch(source, name="timed", schedule=Every.seconds(seconds))
    if companion:
        monitor.watch(Timed(), name="every_round")
    intervals = 12
    with monitor:
        time.sleep(poll_interval + seconds * intervals + seconds / 2)
        monitor.stop(log_final=False)
    calls = source.calls
    # stats() is called only when a snapshot is due: each call is logged.
    assert sink.logged == len(calls)
    first, last = calls[0], calls[-1]
    if seconds >= poll_interval:
        # One log per due time, each within a poll interval of it: the
        # k-th comes k intervals after the first, give or take a round.
        assert len(calls) == intervals + 1
        for k, at in enumerate(calls):
            assert -0.02 < at - (first + k * seconds) < poll_interval + 0.05
    else:
        # Due at every round: a log a round, none missed, none doubled.
        rounds = round((last - first) / poll_interval)
        assert rounds - 1 <= len(calls) - 1 <= rounds + 1


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
    # The round due after the slow call starts an interval after it; the
    # watch polled late in the overrunning round must not be due again in it.
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
    # Not the round after the overrun either: polled again a moment later,
    # its rates would be over that moment.
    assert min(gaps) > 0.1, gaps


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


@pytest.mark.parametrize("poll_timeout", [5.0, None], ids=["handed over", "waited for"])
def test_no_rate_is_taken_over_a_moment_after_a_round_overran(
    poll_timeout: float | None,
) -> None:
    # A round at once after the overrun polled every watch again a moment
    # later: a counter moving steadily had a rate of 0 there.
    from rlpulse import Tally

    tally, running = Tally(), threading.Event()
    running.set()

    def count() -> None:
        while running.is_set():
            time.sleep(0.001)
            tally.inc("frames")

    counting = threading.Thread(target=count)
    counting.start()
    arm, slow = _slow_once(0.5)
    sink = TimedRecorder()
    monitor = LoggerMonitor(sink, poll_interval=0.2, poll_timeout=poll_timeout)
    monitor.watch(None, name="slow", stats_fn=slow)
    monitor.watch(tally, name="loop")
    try:
        monitor.start()
        time.sleep(0.35)
        arm.set()
        time.sleep(1.5)
        monitor.stop(log_final=False)
    finally:
        running.clear()
        counting.join()
    logged = sink.times["loop/frames"]
    gaps = [later - earlier for earlier, later in itertools.pairwise(logged)]
    assert len(gaps) >= 4
    assert min(gaps) > 0.05, gaps


def test_a_watch_slower_than_the_interval_keeps_the_others_polled_each_interval() -> (
    None
):
    # Rounds that each overrun a little (handed over past the slow call)
    # are followed at once: the fast watch keeps about its rhythm.
    polls = []

    def slow() -> dict[str, float]:
        time.sleep(0.26)
        return {"y": 1.0}

    monitor = LoggerMonitor(Recorder(), poll_interval=0.2, poll_timeout=5.0)
    monitor.watch(None, name="fast", stats_fn=lambda: polls.append(1) or {"x": 1.0})
    monitor.watch(None, name="slow", stats_fn=slow)
    monitor.start()
    time.sleep(2.0)
    monitor.stop(log_final=False)
    assert len(polls) >= 7  # about 10 without the slow watch
