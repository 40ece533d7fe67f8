"""Counter schedules and rates over random counter paths, on a manual monitor.

A source's cumulative counter creeps, jumps across several thresholds and
resets (``empty()``, a state restore); the monitor must log exactly the polls
that section 1.4 of the contract says are due, and never report a negative
rate. The expected decisions come from a small model written here.

Then the schedule values themselves: what ``Every`` and ``AnyOf`` refuse
and how composites flatten.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlpulse import AnyOf, Every, LoggerMonitor
from rlpulse.testing import InMemorySink

PROPERTIES = settings(max_examples=100, deadline=None)

COUNTERS = ("frames", "batches", "write_count", "episodes")


class Counters:
    """A source whose snapshot holds the counters the test sets."""

    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def stats(self) -> dict[str, int]:
        return dict(self.values)


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


counter_snapshots = st.lists(
    st.fixed_dictionaries({}, optional={key: st.integers(0, 1000) for key in COUNTERS}),
    min_size=1,
    max_size=30,
)
rate_key_choices = st.none() | st.lists(
    st.sampled_from([*COUNTERS, "absent"]), unique=True
).map(tuple)


@PROPERTIES
@given(
    snapshots=counter_snapshots,
    rate_keys=rate_key_choices,
    scheduled=st.booleans(),
    log_on_start=st.booleans(),
)
def test_no_rate_is_ever_negative(
    snapshots: list[dict[str, int]],
    rate_keys: tuple[str, ...] | None,
    scheduled: bool,
    log_on_start: bool,
) -> None:
    sink = InMemorySink()
    source = Counters()
    monitor = LoggerMonitor(sink, background=False)
    monitor.watch(
        source,
        name="w",
        schedule=Every.counter("frames", 7) if scheduled else None,
        rate_keys=rate_keys,
        log_on_start=log_on_start,
    )
    for snapshot in snapshots:
        source.values = snapshot
        monitor.step()
    monitor.stop()
    rates = [
        value
        for payload, _ in sink.calls
        for key, value in payload.items()
        if key.endswith("_per_second")
    ]
    assert all(rate >= 0 for rate in rates)


# The schedule values


def test_every_any_flattens_nested_composites() -> None:
    a, b, c = Every.seconds(1), Every.seconds(2), Every.counter("frames", 3)
    assert (a | b) | c == Every.any(a, Every.any(b, c))
    assert isinstance(a | b, AnyOf)
    assert len({a | b, Every.any(a, b)}) == 1


def test_every_any_refuses_what_is_not_a_schedule() -> None:
    with pytest.raises(TypeError, match="Every"):
        Every.any(Every.seconds(1), 5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Every"):
        AnyOf((Every.seconds(1), "x"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one"):
        Every.any()


@pytest.mark.parametrize("interval", [float("nan"), float("inf"), -float("inf")])
def test_every_refuses_an_interval_that_is_not_finite(interval: float) -> None:
    with pytest.raises(ValueError, match="strictly positive: a finite number of"):
        Every.seconds(interval)
    with pytest.raises(ValueError, match="strictly positive: a finite number of"):
        Every.counter("frames", interval)  # type: ignore[arg-type]


@pytest.mark.parametrize("interval", ["5", True, b"5"])
def test_every_refuses_an_interval_that_is_not_a_number(interval: Any) -> None:
    with pytest.raises(TypeError, match="a finite number of seconds above zero"):
        Every("seconds", interval)


@pytest.mark.parametrize(
    ("interval", "error"), [(None, TypeError), ([1], TypeError), ("soon", ValueError)]
)
def test_every_seconds_refuses_what_float_refuses_saying_what_it_takes(
    interval: Any, error: type[Exception]
) -> None:
    # The exception TorchRL's Every.seconds raises (float()'s), with a message.
    with pytest.raises(error, match=r"Every\.seconds\(\) takes a number of seconds"):
        Every.seconds(interval)


@pytest.mark.parametrize("key", [5, ("frames",), b"frames"])
def test_a_counter_key_is_the_name_of_a_snapshot_entry(key: Any) -> None:
    with pytest.raises(TypeError, match="counter key must be the name"):
        Every.counter(key, 10)
