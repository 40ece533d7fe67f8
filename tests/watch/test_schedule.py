"""When a watch's snapshot is due (rlpulse.watch.schedule): counter thresholds, the seconds' cadence, and resets.

Counter schedules over random counter paths, on a manual monitor: a
source's cumulative counter creeps, jumps across several thresholds and
resets (``empty()``, a state restore); the monitor must log exactly the
polls that section 1.4 of the contract says are due. The expected
decisions come from a small model written here. Then the same schedule
state driven through one watch with explicit times (no sleeping).
"""

from __future__ import annotations

import math
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlpulse import Every, LoggerMonitor
from rlpulse.testing import InMemorySink
from rlpulse.watch import Watch, WatchSpec
from tests.support import PROPERTIES, Counter, Counters, make_watch, poll


def expected_decisions(
    interval: int, values: list[int], log_on_start: bool
) -> list[bool]:
    """Which polls section 1.4 says are due, for a counter seen at every poll.

    The schedule's next threshold is always the multiple of ``interval`` just
    above the reference value (the counter when last primed, logged or
    reset), so a poll is due when it reaches a higher multiple than the
    reference, which is comparing multiples-of-interval buckets.
    """
    decisions = []
    reference_bucket = previous = None
    for value in values:
        bucket = value // interval
        if previous is None:
            due = log_on_start
            reference_bucket = bucket
        elif value < previous:
            due = False
            reference_bucket = bucket
        else:
            assert reference_bucket is not None
            due = bucket > reference_bucket
            if due:
                reference_bucket = bucket
        decisions.append(due)
        previous = value
    return decisions


@st.composite
def counter_paths(draw: st.DrawFn) -> tuple[int, list[int]]:
    """An interval and a counter path that stays, creeps, jumps and resets."""
    interval = draw(st.integers(1, 50))
    value = draw(st.integers(0, 5 * interval))
    values = [value]
    moves = draw(
        st.lists(st.sampled_from(["stay", "creep", "jump", "reset"]), max_size=40)
    )
    for move in moves:
        if move == "creep":
            value += draw(st.integers(1, interval))
        elif move == "jump":
            value += draw(st.integers(2 * interval, 10 * interval))
        elif move == "reset":
            value = draw(st.integers(0, max(value - 1, 0)))
        values.append(value)
    return interval, values


@st.composite
def rising_paths(draw: st.DrawFn) -> tuple[int, list[int]]:
    """An interval and a counter path that never goes down."""
    interval = draw(st.integers(1, 50))
    start = draw(st.integers(0, 5 * interval))
    steps = draw(st.lists(st.integers(0, 3 * interval), max_size=40))
    values = [start]
    for step in steps:
        values.append(values[-1] + step)
    return interval, values


def counter_watch(
    interval: int, log_on_start: bool
) -> tuple[Any, Counters, InMemorySink]:
    sink = InMemorySink()
    source = Counters()
    monitor = LoggerMonitor(sink, background=False)
    monitor.watch(
        source,
        name="collector",
        schedule=Every.counter("frames", interval),
        log_on_start=log_on_start,
    )
    return monitor, source, sink


def run_path(monitor: Any, source: Counters, values: list[int]) -> list[bool]:
    decisions = []
    for value in values:
        source.values["frames"] = value
        decisions.append("collector" in monitor.step())
    return decisions


@PROPERTIES
@given(path=counter_paths(), log_on_start=st.booleans())
def test_counter_schedule_logs_exactly_the_polls_that_are_due(
    path: tuple[int, list[int]], log_on_start: bool
) -> None:
    interval, values = path
    monitor, source, sink = counter_watch(interval, log_on_start)
    decisions = run_path(monitor, source, values)
    assert decisions == expected_decisions(interval, values, log_on_start)
    logged_values = [value for value, due in zip(values, decisions, strict=True) if due]
    assert [step for _, step in sink.calls] == logged_values
    assert [payload["collector/frames"] for payload, _ in sink.calls] == logged_values


@PROPERTIES
@given(path=rising_paths(), start_offset=st.integers(0, 49))
def test_thresholds_are_multiples_of_the_interval_wherever_the_counter_starts(
    path: tuple[int, list[int]], start_offset: int
) -> None:
    interval, values = path
    bucket_start = values[0] - values[0] % interval
    other_start = bucket_start + start_offset % interval
    if len(values) > 1:
        other_start = min(other_start, values[1])
    monitor, source, _ = counter_watch(interval, False)
    other_monitor, other_source, _ = counter_watch(interval, False)
    assert run_path(monitor, source, values) == run_path(
        other_monitor, other_source, [other_start, *values[1:]]
    )


@PROPERTIES
@given(
    interval=st.integers(1, 50),
    start=st.integers(0, 500),
    thresholds_crossed=st.integers(2, 20),
    overshoot_fraction=st.floats(0, 0.99),
)
def test_a_jump_across_several_thresholds_logs_once(
    interval: int, start: int, thresholds_crossed: int, overshoot_fraction: float
) -> None:
    monitor, source, sink = counter_watch(interval, False)
    next_threshold = (start // interval + 1) * interval
    landing = (
        next_threshold
        + (thresholds_crossed - 1) * interval
        + int(overshoot_fraction * interval)
    )
    following_threshold = (landing // interval + 1) * interval
    values = [start, landing, following_threshold - 1, following_threshold]
    assert run_path(monitor, source, values) == [False, True, False, True]
    assert [step for _, step in sink.calls] == [landing, following_threshold]


@PROPERTIES
@given(path=counter_paths(), data=st.data())
def test_a_reset_logs_nothing_and_re_baselines(
    path: tuple[int, list[int]], data: st.DataObject
) -> None:
    interval, values = path
    monitor, source, sink = counter_watch(interval, True)
    run_path(monitor, source, values)
    peak = values[-1] + data.draw(st.integers(1, 5 * interval))
    source.values["frames"] = peak
    monitor.step()
    reset_to = data.draw(st.integers(0, peak - 1))
    next_threshold = (reset_to // interval + 1) * interval
    logged_before_reset = len(sink.calls)

    source.values["frames"] = reset_to
    time.sleep(0.001)
    reset_began = time.monotonic()
    assert monitor.step() == {}
    reset_ended = time.monotonic()
    source.values["frames"] = next_threshold - 1
    assert monitor.step() == {}
    source.values["frames"] = next_threshold
    time.sleep(0.001)
    logged_began = time.monotonic()
    payload = monitor.step()["collector"]
    logged_ended = time.monotonic()

    assert len(sink.calls) == logged_before_reset + 1
    delta = next_threshold - reset_to
    rate = payload["collector/frames_per_second"]
    assert delta / (logged_ended - reset_began) <= rate * (1 + 1e-9)
    assert rate <= delta / (logged_began - reset_ended) * (1 + 1e-9)


def test_a_composite_schedule_logs_on_each_counter_threshold() -> None:
    source = Counter()
    sink = InMemorySink()
    monitor = LoggerMonitor(sink, background=False)
    monitor.watch(
        source, name="c", schedule=Every.counter("frames", 10) | Every.seconds(3600)
    )
    for frames in (0, 5, 10, 12, 35, 39, 40):
        source.frames = frames
        monitor.step()
    assert [step for _, step in sink.calls] == [0, 10, 35, 40]


def test_a_composite_schedule_logs_on_counter_thresholds() -> None:
    watch = make_watch(Every.counter("frames", 100) | Every.seconds(60))
    assert poll(watch, {"frames": 0}, now=0.0) is not None  # log_on_start
    assert poll(watch, {"frames": 99}, now=1.0) is None
    assert poll(watch, {"frames": 100}, now=2.0) is not None
    assert poll(watch, {"frames": 150}, now=3.0) is None
    assert poll(watch, {"frames": 420}, now=4.0) is not None  # several thresholds: once
    assert poll(watch, {"frames": 499}, now=5.0) is None
    assert (
        poll(watch, {"frames": 500}, now=6.0) is not None
    )  # thresholds stay multiples


def test_a_composite_schedule_logs_at_least_every_interval_seconds() -> None:
    watch = make_watch(Every.counter("frames", 1000) | Every.seconds(10))
    poll(watch, {"frames": 0}, now=0.0)
    assert poll(watch, {"frames": 5}, now=9.0) is None
    assert poll(watch, {"frames": 6}, now=10.0) is not None


def test_composite_seconds_count_from_the_last_log_whatever_caused_it() -> None:
    watch = make_watch(Every.counter("frames", 100) | Every.seconds(10))
    poll(watch, {"frames": 0}, now=0.0)
    assert poll(watch, {"frames": 100}, now=8.0) is not None  # counter-caused log
    assert poll(watch, {"frames": 110}, now=12.0) is None  # only 4 s since that log
    assert poll(watch, {"frames": 120}, now=18.0) is not None


def test_each_counter_part_keeps_its_own_thresholds() -> None:
    watch = make_watch(Every.counter("frames", 100) | Every.counter("batches", 5))
    poll(watch, {"frames": 0, "batches": 0}, now=0.0)
    assert poll(watch, {"frames": 50, "batches": 4}, now=1.0) is None
    assert poll(watch, {"frames": 60, "batches": 5}, now=2.0) is not None
    assert poll(watch, {"frames": 100, "batches": 6}, now=3.0) is not None
    assert poll(watch, {"frames": 150, "batches": 9}, now=4.0) is None


def test_a_counter_reset_in_a_composite_re_baselines_and_logs_nothing() -> None:
    watch = make_watch(Every.counter("frames", 100) | Every.seconds(5))
    poll(watch, {"frames": 500}, now=0.0)
    assert poll(watch, {"frames": 20}, now=6.0) is None  # reset wins over seconds
    payload = poll(watch, {"frames": 100}, now=8.0)
    assert payload is not None
    assert payload["w/frames_per_second"] == 40.0  # since the reset at t=6


def test_a_threshold_crossed_as_another_counter_resets_is_logged_at_the_next_poll() -> (
    None
):
    watch = make_watch(Every.counter("frames", 100) | Every.counter("updates", 10))
    poll(watch, {"frames": 50, "updates": 5}, now=0.0)
    # frames reset while updates crossed 10: the reset logs nothing...
    assert poll(watch, {"frames": 0, "updates": 12}, now=1.0) is None
    # ... and the crossing is not lost: updates logs before reaching 20.
    payload = poll(watch, {"frames": 5, "updates": 13}, now=2.0)
    assert payload is not None
    assert payload["w/updates"] == 13.0
    assert poll(watch, {"frames": 6, "updates": 15}, now=3.0) is None


def test_a_time_only_schedule_is_not_due_until_its_interval() -> None:
    watch = make_watch(Every.seconds(5) | Every.seconds(2))
    assert watch.clock_gated
    assert watch.next_due <= 0.0
    poll(watch, {}, now=0.0)
    assert watch.next_due > 1.9
    assert watch.next_due <= 2.0


def test_a_schedule_with_a_counter_is_never_clock_gated() -> None:
    watch = make_watch(Every.seconds(5) | Every.counter("frames", 10))
    assert not watch.clock_gated
    poll(watch, {"frames": 0}, now=0.0)
    assert watch.next_due <= 0.1


def test_a_seconds_schedule_without_log_on_start_is_due_from_its_baseline() -> None:
    watch = make_watch(Every.seconds(5), log_on_start=False)
    assert poll(watch, {"frames": 0}, now=0.0) is None
    assert watch.next_due > 4.0
    assert watch.next_due <= 5.0
    payload = poll(watch, {"frames": 50}, now=5.0)
    assert payload == {"w/frames": 50.0, "w/frames_per_second": 10.0}


def test_a_schedule_counts_from_when_its_round_was_due_not_from_when_it_ran() -> None:
    # Every.seconds(1) polled on a 1 s cadence: the round that logged it ran
    # 4 ms late, the next only 0.1 ms late; it is due all the same.
    watch = Watch(WatchSpec("w", provider=dict, schedule=Every.seconds(1)))
    assert (
        watch.poll({"frames": 1}, now=0.004, scheduled=0.0, poll_interval=1.0)
        is not None
    )
    assert watch.next_due <= 1.0001
    payload = watch.poll({"frames": 3}, now=1.0001)
    # Rates still count from when it ran.
    assert payload is not None
    assert payload["w/frames_per_second"] == pytest.approx(2 / 0.9961)


def test_a_round_that_overran_its_interval_counts_the_schedule_from_the_poll() -> None:
    # The round due at 0.0 reached the watch 2.5 s late: counted from 0.0 it
    # would be due again at once, in the round that follows straight away.
    watch = Watch(WatchSpec("w", provider=dict, schedule=Every.seconds(1)))
    assert watch.poll({"frames": 1}, now=2.5, scheduled=0.0) is not None
    assert watch.next_due > 2.5001
    assert watch.next_due <= 3.5


def test_a_schedule_shorter_than_the_poll_interval_is_due_at_every_round() -> None:
    # Every.seconds(0.1) polled every 0.2 s, reached 5 ms into its round:
    # the next round, at 0.2 s, finds it due.
    watch = Watch(WatchSpec("w", provider=dict, schedule=Every.seconds(0.1)))
    assert (
        watch.poll({"frames": 1}, now=0.005, scheduled=0.0, poll_interval=0.2)
        is not None
    )
    assert watch.next_due <= 0.2


def timed_poll(
    watch: Watch, now: float, scheduled: float, poll_interval: float
) -> bool:
    """One poll by the polling thread's round due at ``scheduled``, reaching the watch at ``now``; whether it logged."""
    if watch.next_due > now:  # not due: the round skips it
        return False
    payload = watch.poll(
        {"frames": now}, now, scheduled=scheduled, poll_interval=poll_interval
    )
    return payload is not None


def test_a_round_that_reached_the_watch_late_does_not_push_the_next_log_later() -> None:
    # Every.seconds(5) due at 5.0, reached 0.7 s late (a slow call earlier in
    # the round): the next is due at 10.0 all the same, not 10.7.
    watch = Watch(WatchSpec("w", provider=dict, schedule=Every.seconds(5)))
    assert timed_poll(watch, now=0.001, scheduled=0.0, poll_interval=1.0)
    assert not timed_poll(watch, now=4.999, scheduled=4.0, poll_interval=1.0)
    assert timed_poll(watch, now=5.7, scheduled=5.0, poll_interval=1.0)
    assert watch.next_due == 10.0


def test_a_round_late_by_several_intervals_logs_once_and_keeps_the_cadence() -> None:
    # A stats() call hung for 12 s: one log when it returns, none to catch
    # up, and the next at the cadence's next due time.
    watch = Watch(WatchSpec("w", provider=dict, schedule=Every.seconds(5)))
    assert timed_poll(watch, now=0.0, scheduled=0.0, poll_interval=1.0)
    assert timed_poll(watch, now=17.0, scheduled=5.0, poll_interval=1.0)
    assert watch.next_due == 20.0
    assert not timed_poll(watch, now=18.0, scheduled=18.0, poll_interval=1.0)


@pytest.mark.parametrize(
    ("seconds", "poll_interval"),
    [(1.0, 0.5), (5.0, 1.0), (1.0, 0.3), (0.25, 1.0), (1.0, 1.0), (0.7, 0.2)],
)
def test_a_seconds_schedule_on_the_polling_thread_logs_each_due_time_without_drift(
    seconds: float, poll_interval: float
) -> None:
    # Rounds every poll_interval, each reaching the watch 1-9 ms late: every
    # log is within a poll interval of a due time seconds apart, each due
    # time is logged once at most, and a watch is called only when due.
    watch = Watch(WatchSpec("w", provider=dict, schedule=Every.seconds(seconds)))
    logs, calls = [], 0
    for round_number in range(400):
        scheduled = round_number * poll_interval
        now = scheduled + 0.001 + 0.008 * ((round_number * 7) % 5) / 4
        if watch.next_due <= now:
            calls += 1
            assert timed_poll(watch, now, scheduled, poll_interval)
            logs.append(now)
    assert calls == len(logs)
    # The first log, in the round due at 0.0, sets the due times: k * seconds.
    served = [math.floor(log / seconds + 1e-9) for log in logs]
    for log, k in zip(logs, served, strict=True):
        assert 0 <= log - k * seconds < poll_interval
    assert len(set(served)) == len(served)
    if seconds >= poll_interval:  # then every due time is logged
        assert served == list(range(len(logs)))


def test_a_step_counts_the_seconds_from_its_log_as_in_torchrl() -> None:
    # step() is no round of the polling thread: due seconds after the last log.
    watch = Watch(WatchSpec("w", provider=dict, schedule=Every.seconds(5)))
    assert poll(watch, {"frames": 1}, now=0.0) is not None
    assert poll(watch, {"frames": 2}, now=7.0) is not None
    assert poll(watch, {"frames": 3}, now=11.0) is None
    assert poll(watch, {"frames": 4}, now=12.0) is not None


def test_a_counter_log_restarts_the_seconds_of_a_composite_from_its_round() -> None:
    # Every 10 frames or 5 s: the counter logged in the round due at 3.0,
    # so the seconds are due at 8.0, counted from the last log.
    watch = Watch(
        WatchSpec(
            "w", provider=dict, schedule=Every.counter("frames", 10) | Every.seconds(5)
        )
    )
    for frames, now, scheduled, logged in (
        (0, 0.002, 0.0, True),
        (4, 1.002, 1.0, False),
        (12, 3.002, 3.0, True),
        (13, 7.002, 7.0, False),
        (14, 8.002, 8.0, True),
    ):
        payload = watch.poll(
            {"frames": frames}, now, scheduled=scheduled, poll_interval=1.0
        )
        assert (payload is not None) == logged, now


def test_a_fractional_counter_interval_is_due_at_each_multiple_as_in_torchrl() -> None:
    # A counter of seconds trained, logged every 2.5 of them.
    watch = Watch(
        WatchSpec("w", provider=dict, schedule=Every.counter("seconds_trained", 2.5))
    )  # type: ignore[arg-type]
    due = []
    for value in (0.0, 1.0, 2.4, 2.6, 4.9, 5.1, 7.4):
        if watch.poll({"seconds_trained": value}, now=value) is not None:
            due.append(value)
    assert due == [0.0, 2.6, 5.1]
    assert Every.counter("frames", 1e4).interval == 10_000  # type: ignore[arg-type]


def test_a_seconds_schedule_given_a_key_is_a_seconds_schedule_as_in_torchrl() -> None:
    from torchrl.record.loggers.monitoring import Every as TorchRLEvery
    from torchrl.record.loggers.monitoring import LoggerMonitor as TorchRLMonitor

    from rlpulse import LoggerMonitor

    class Source:
        frames = 0

        def stats(self) -> dict[str, int]:
            return {"frames": self.frames}

    class Steps:
        def __init__(self) -> None:
            self.steps: list[int | None] = []

        def log_metrics(self, metrics: Any, step: int | None = None) -> None:
            self.steps.append(step)

    logged = {}
    for name, every, monitor_type in (
        ("torchrl", TorchRLEvery, TorchRLMonitor),
        ("rlpulse", Every, LoggerMonitor),
    ):
        source, sink = Source(), Steps()
        monitor = monitor_type(sink, background=False)
        monitor.watch(source, name="c", schedule=every("seconds", 5, key="frames"))
        monitor.step()
        for frames in (7, 12, 23):  # multiples of 5 crossed: no matter, in seconds
            source.frames = frames
            monitor.step()
        logged[name] = sink.steps
    assert logged["rlpulse"] == logged["torchrl"] == [None]
