"""LoggerMonitor beyond TorchRL: several sinks, wide values, no wasted polls,
its own stats() and poll timestamps, and the arguments of bottleneck()
(SPEC 2.1-2.3, 2.7, 2.10, 6.3).

When a schedule makes a snapshot due: tests/watch/test_schedule.py.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
import torch

from rlpulse import Every, LoggerMonitor, Tally
from rlpulse.testing import InMemorySink
from rlpulse.watch.stages import SNAPSHOTS_TO_APPEAR
from tests.support import Counter, rlpulse_warnings


class PlainSink:
    """A sink with only ``log_metrics``, as TorchRL's loggers are."""

    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, float], int | None]] = []

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        self.calls.append((dict(metrics), step))


class TimestampRecorder:
    def __init__(self) -> None:
        self.calls: list[tuple[dict[str, float], int | None, float | None]] = []

    def log_metrics(
        self,
        metrics: Mapping[str, float],
        step: int | None = None,
        *,
        timestamp: float | None = None,
    ) -> None:
        self.calls.append((dict(metrics), step, timestamp))


class ScalarOnly:
    def __init__(self) -> None:
        self.scalars: list[tuple[str, float, int | None]] = []

    def log_scalar(self, name: str, value: float, step: int | None = None) -> None:
        self.scalars.append((name, value, step))


class Flaky:
    """A sink that raises while ``failing`` is set."""

    def __init__(self) -> None:
        self.failing = True
        self.calls = 0

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        self.calls += 1
        if self.failing:
            raise ConnectionError("backend down")


def test_every_payload_reaches_every_sink() -> None:
    first, second = InMemorySink(), InMemorySink()
    monitor = LoggerMonitor([first, second], background=False)
    monitor.watch(Counter(), name="c")
    monitor.step()
    monitor.step()
    assert first.calls == second.calls
    assert len(first.calls) == 2


def test_a_tuple_of_sinks_works_like_a_list() -> None:
    first, second = InMemorySink(), InMemorySink()
    monitor = LoggerMonitor((first, second), background=False)
    monitor.watch(Counter(), name="c")
    monitor.step()
    assert len(first.calls) == len(second.calls) == 1


def test_a_failing_sink_does_not_stop_delivery_to_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    flaky, good = Flaky(), InMemorySink()
    monitor = LoggerMonitor([flaky, good], background=False)
    monitor.watch(Counter(), name="c")
    with caplog.at_level(logging.WARNING):
        logged = monitor.step()
        monitor.step()
    assert "c" in logged
    assert len(good.calls) == 2
    assert flaky.calls == 2
    warnings = rlpulse_warnings(caplog)
    assert len(warnings) == 1
    assert "Flaky" in warnings[0]
    assert "backend down" in warnings[0]


def test_a_sink_warns_again_after_it_recovered_and_failed_anew(
    caplog: pytest.LogCaptureFixture,
) -> None:
    flaky = Flaky()
    monitor = LoggerMonitor([flaky, InMemorySink()], background=False)
    monitor.watch(Counter(), name="c")
    with caplog.at_level(logging.WARNING):
        monitor.step()
        flaky.failing = False
        monitor.step()
        flaky.failing = True
        monitor.step()
    assert len(rlpulse_warnings(caplog)) == 2


def test_the_end_of_a_failure_streak_is_logged_a_level_below_its_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Warnings stay one a streak, as TorchRL's monitor gives them; the end
    # is said at INFO.
    class Failing:
        error: Exception | None = None

        def stats(self) -> dict[str, float]:
            if self.error is not None:
                raise self.error
            return {"frames": 1.0}

    flaky = Flaky()
    source = Failing()
    monitor = LoggerMonitor([flaky, InMemorySink()], background=False)
    monitor.watch(source, name="c")
    with caplog.at_level(logging.INFO, logger="rlpulse"):
        monitor.step()
        flaky.failing = False
        monitor.step()
        source.error = RuntimeError("stats exploded")
        monitor.step()
        source.error = None
        monitor.step()
    said = [
        (r.levelname, r.getMessage()) for r in caplog.records if r.name == "rlpulse"
    ]
    assert [level for level, _ in said] == ["WARNING", "INFO", "WARNING", "INFO"]
    assert said[1][1] == "LoggerMonitor logs to sink Flaky again."
    assert said[3][1] == "LoggerMonitor polls and logs watch 'c' again."


def test_one_warning_per_sink_per_failure_streak_across_watches(
    caplog: pytest.LogCaptureFixture,
) -> None:
    monitor = LoggerMonitor([Flaky(), InMemorySink()], background=False)
    monitor.watch(Counter(), name="a")
    monitor.watch(Counter(), name="b")
    with caplog.at_level(logging.WARNING):
        monitor.step()
        monitor.step()
    assert len(rlpulse_warnings(caplog)) == 1


def test_a_watch_whose_every_sink_failed_is_not_in_the_step_result() -> None:
    flaky = Flaky()
    monitor = LoggerMonitor(flaky, background=False, on_error="ignore")
    monitor.watch(Counter(), name="c")
    assert monitor.step() == {}
    flaky.failing = False
    assert "c" in monitor.step()


def test_on_error_raise_propagates_a_sink_error_after_the_others_got_it() -> None:
    good = InMemorySink()
    monitor = LoggerMonitor([Flaky(), good], background=False, on_error="raise")
    monitor.watch(Counter(), name="c")
    with pytest.raises(ConnectionError, match="backend down"):
        monitor.step()
    assert len(good.calls) == 1


def test_on_error_ignore_is_silent_for_sinks(caplog: pytest.LogCaptureFixture) -> None:
    monitor = LoggerMonitor(
        [Flaky(), InMemorySink()], background=False, on_error="ignore"
    )
    monitor.watch(Counter(), name="c")
    with caplog.at_level(logging.DEBUG):
        monitor.step()
    assert rlpulse_warnings(caplog) == []


def test_a_log_scalar_only_sink_gets_one_call_per_metric() -> None:
    sink = ScalarOnly()
    monitor = LoggerMonitor(sink, background=False)
    monitor.watch(Counter(), name="c", step="frames")
    monitor.step()
    assert sink.scalars == [("c/frames", 0.0, 0)]


@pytest.mark.parametrize("bad", [object(), 42, "console", [InMemorySink(), object()]])
def test_an_object_that_cannot_log_is_refused_at_construction(bad: Any) -> None:
    with pytest.raises(TypeError, match="log_metrics"):
        LoggerMonitor(bad, background=False)


@pytest.mark.parametrize("bad", [InMemorySink, [InMemorySink(), InMemorySink]])
def test_a_sink_class_given_for_a_sink_is_refused_at_construction(bad: Any) -> None:
    with pytest.raises(
        TypeError, match=r"the class InMemorySink: .* InMemorySink\(\.\.\.\)"
    ):
        LoggerMonitor(bad, background=False)


def test_a_target_class_given_for_a_target_is_refused_when_watched() -> None:
    monitor = LoggerMonitor(InMemorySink(), background=False)
    with pytest.raises(
        TypeError, match=r"the class Tally: .* watch\(Tally\(\), \.\.\.\)"
    ):
        monitor.watch(Tally, name="learner")
    assert monitor.stats()["watches"] == 0


@pytest.mark.parametrize("spec", ["sqlite:runs/train.sqlite", ["console:"]])
def test_a_sink_spec_given_for_a_sink_is_refused_naming_open_sink(spec: Any) -> None:
    with pytest.raises(TypeError, match=r"log_metrics.*open_sink\(spec\)"):
        LoggerMonitor(spec, background=False)


def test_an_empty_sequence_of_sinks_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one sink"):
        LoggerMonitor([], background=False)


def test_wide_values_reach_the_sink_as_floats() -> None:
    sink = InMemorySink()
    monitor = LoggerMonitor(sink, background=False)
    monitor.watch(
        object(),
        name="w",
        stats_fn=lambda: {
            "np_float": np.float32(0.5),
            "np_int": np.int64(3),
            "np_0d": np.array(2.0),
            "tensor": torch.tensor(7),
            "nested": {"frames": 5},
            "huge": 10**400,
            "text": "skip me",
        },
    )
    monitor.step()
    metrics, _ = sink.calls[0]
    assert metrics == {
        "w/np_float": 0.5,
        "w/np_int": 3.0,
        "w/np_0d": 2.0,
        "w/tensor": 7.0,
        "w/nested/frames": 5.0,
    }
    assert all(type(value) is float for value in metrics.values())


def test_a_provider_returning_a_non_mapping_is_an_error_not_a_crash(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = InMemorySink()
    monitor = LoggerMonitor(sink, background=False)
    monitor.watch(object(), name="broken", stats_fn=lambda: [1, 2, 3])
    monitor.watch(Counter(), name="fine")
    with caplog.at_level(logging.WARNING):
        logged = monitor.step()
    assert list(logged) == ["fine"]
    warnings = rlpulse_warnings(caplog)
    assert len(warnings) == 1
    assert "broken" in warnings[0]
    assert "mapping" in warnings[0]


def test_a_seconds_schedule_does_not_call_the_provider_while_not_due() -> None:
    source = Counter()
    monitor = LoggerMonitor(InMemorySink(), background=False)
    monitor.watch(source, name="c", schedule=Every.seconds(3600))
    monitor.step()
    for _ in range(10):
        monitor.step()
    assert source.calls == 1


def test_a_seconds_schedule_calls_the_provider_again_once_due() -> None:
    source = Counter()
    sink = InMemorySink()
    monitor = LoggerMonitor(sink, background=False)
    monitor.watch(source, name="c", schedule=Every.seconds(0.05))
    monitor.step()
    deadline = time.monotonic() + 10
    while source.calls < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
        monitor.step()
    assert source.calls == 2
    assert len(sink.calls) == 2


def test_a_counter_schedule_polls_every_time() -> None:
    source = Counter()
    monitor = LoggerMonitor(InMemorySink(), background=False)
    monitor.watch(source, name="c", schedule=Every.counter("frames", 100))
    for _ in range(5):
        monitor.step()
    assert source.calls == 5


def test_the_monitor_can_watch_itself() -> None:
    sink = InMemorySink()
    monitor = LoggerMonitor(sink, background=False)
    monitor.watch(Counter(), name="c")
    monitor.watch(monitor, name="monitor")
    monitor.step()
    monitor.step()
    metrics, _ = sink.calls[-1]
    assert metrics["monitor/watches"] == 2.0
    assert (
        metrics["monitor/polls"] == 4.0
    )  # c twice, monitor twice (this poll included)
    assert metrics["monitor/logged"] == 3.0
    assert metrics["monitor/errors"] == 0.0
    assert metrics["monitor/last_poll_duration_s"] >= 0.0


def test_monitor_stats_count_errors() -> None:
    monitor = LoggerMonitor(
        [Flaky(), InMemorySink()], background=False, on_error="ignore"
    )
    monitor.watch(object(), name="broken", stats_fn=lambda: 1 / 0)
    monitor.watch(Counter(), name="c")
    monitor.step()
    stats = monitor.stats()
    assert stats["errors"] == 2  # the broken provider and the flaky sink
    assert stats["logged"] == 1


def test_a_sink_accepting_timestamp_gets_the_poll_wall_time() -> None:
    sink = TimestampRecorder()
    monitor = LoggerMonitor(sink, background=False)
    monitor.watch(Counter(), name="c")
    before = time.time()
    monitor.step()
    after = time.time()
    ((_, _, timestamp),) = sink.calls
    assert timestamp is not None
    assert before <= timestamp <= after


def test_a_sink_without_timestamp_is_called_without_it() -> None:
    plain, stamped = InMemorySink(), TimestampRecorder()
    monitor = LoggerMonitor([plain, stamped], background=False)
    monitor.watch(Counter(), name="c")
    monitor.step()
    assert len(plain.calls) == 1
    assert stamped.calls[0][2] is not None


def test_final_snapshots_flush_sinks_that_can_flush() -> None:
    class Flushable(PlainSink):
        flushed = 0

        def flush(self) -> None:
            self.flushed += 1

    sink = Flushable()
    monitor = LoggerMonitor(sink, background=False)
    monitor.watch(Counter(), name="c")
    monitor.stop()
    assert len(sink.calls) == 1
    assert sink.flushed == 1


def test_a_failing_flush_follows_on_error(caplog: pytest.LogCaptureFixture) -> None:
    class BadFlush(PlainSink):
        def flush(self) -> None:
            raise OSError("disk full")

    monitor = LoggerMonitor(BadFlush(), background=False)
    with caplog.at_level(logging.WARNING):
        monitor.stop()
    assert any("disk full" in message for message in rlpulse_warnings(caplog))
    raising = LoggerMonitor(BadFlush(), background=False, on_error="raise")
    with pytest.raises(OSError, match="disk full"):
        raising.stop()


def test_repr_says_what_the_monitor_holds() -> None:
    monitor = LoggerMonitor([InMemorySink(), InMemorySink()], background=False)
    monitor.watch(Counter())
    assert repr(monitor) == "LoggerMonitor(1 watch, 2 sinks, idle)"
    monitor.watch(Counter(), name="second")
    assert repr(monitor) == "LoggerMonitor(2 watches, 2 sinks, idle)"


def test_repr_of_one_sink_says_sink() -> None:
    monitor = LoggerMonitor([InMemorySink()], background=False)
    assert repr(monitor) == "LoggerMonitor(0 watches, 1 sink, idle)"


@pytest.mark.parametrize("interval", [float("nan"), float("inf")])
def test_a_poll_interval_that_is_not_finite_is_refused(interval: float) -> None:
    with pytest.raises(ValueError, match="positive, finite number of seconds"):
        LoggerMonitor(InMemorySink(), poll_interval=interval)


@pytest.mark.parametrize("interval", ["1", True, None])
def test_a_poll_interval_that_is_not_a_number_is_refused_saying_so(
    interval: object,
) -> None:
    # A TypeError, as TorchRL's comparison raises for one that is no number.
    with pytest.raises(TypeError, match=f"poll_interval must .* got {interval!r}"):
        LoggerMonitor(InMemorySink(), poll_interval=interval)  # type: ignore[arg-type]


@pytest.mark.parametrize("size", [1.5, "10", True])
def test_a_queue_size_that_is_not_a_whole_number_is_refused(size: object) -> None:
    with pytest.raises(ValueError, match="queue_size must be a whole number"):
        LoggerMonitor(InMemorySink(), queue_size=size)  # type: ignore[arg-type]


def test_stop_inside_a_sinks_call_is_refused_and_the_monitor_stops_later(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class StopsTheMonitor:
        def __init__(self) -> None:
            self.monitor: LoggerMonitor | None = None
            self.refused: list[BaseException] = []

        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            assert self.monitor is not None
            try:
                self.monitor.stop()
            except RuntimeError as error:
                self.refused.append(error)
                raise

    # Threads other tests left to finish a call (a slow sink's) are not this one's.
    others = set(threading.enumerate())
    sink = StopsTheMonitor()
    monitor = sink.monitor = LoggerMonitor(sink, poll_interval=0.01, stop_timeout=5)
    monitor.watch(Counter(), name="c")
    with caplog.at_level(logging.WARNING, logger="rlpulse"):
        monitor.start()
        deadline = time.monotonic() + 20
        while not sink.refused and time.monotonic() < deadline:
            time.sleep(0.01)
        monitor.stop()
    assert "inside a call of sink StopsTheMonitor" in str(sink.refused[0])
    assert any("call it from another thread" in m for m in rlpulse_warnings(caplog))
    assert not any(
        thread.name.startswith("rlpulse-")
        for thread in set(threading.enumerate()) - others
    )


def test_a_monitor_started_again_rates_nothing_over_the_time_it_was_stopped() -> None:
    source = Counter()
    sink = InMemorySink()
    monitor = LoggerMonitor(sink, background=False)
    monitor.watch(source, name="c")
    monitor.step()
    monitor.stop()
    monitor.start()
    first = monitor.step()
    assert "c/frames_per_second" not in first["c"]
    assert "c/frames_per_second" in monitor.step()["c"]


class Fixed:
    """A source whose snapshot is what it was given."""

    def __init__(self, **entries: Any) -> None:
        self.entries = entries

    def stats(self) -> dict[str, Any]:
        return dict(self.entries)


@pytest.mark.parametrize(
    ("options", "named", "consequence"),
    [
        (
            {"schedule": Every.counter("frame", 10)},
            "Every.counter names 'frame'",
            "never fires",
        ),
        ({"step": "write_cout"}, "step names 'write_cout'", "no step"),
        ({"rate_keys": ("franes",)}, "rate_keys names 'franes'", "no rate"),
        (
            {"stall_after": 5.0, "progress_key": "frame"},
            "progress_key names 'frame'",
            "no progress",
        ),
    ],
)
def test_an_entry_name_the_snapshot_lacks_is_warned_once_with_the_entries_it_has(
    caplog: pytest.LogCaptureFixture,
    options: dict[str, Any],
    named: str,
    consequence: str,
) -> None:
    monitor = LoggerMonitor(InMemorySink(), background=False)
    monitor.watch(Fixed(frames=5, write_count=3), name="c", **options)
    for _ in range(SNAPSHOTS_TO_APPEAR - 1):
        monitor.step()
    assert rlpulse_warnings(caplog) == []  # it may still appear
    for _ in range(3):
        monitor.step()
    warnings = rlpulse_warnings(caplog)
    assert len(warnings) == 1
    assert named in warnings[0]
    assert "it has: frames, write_count" in warnings[0]
    assert consequence in warnings[0]


def test_entries_the_snapshot_has_are_not_warned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    monitor = LoggerMonitor(InMemorySink(), background=False)
    monitor.watch(
        Fixed(frames=5, write_count=3),
        name="c",
        schedule=Every.counter("frames", 10),
        step="write_count",
        rate_keys=("frames",),
    )
    monitor.step()
    assert rlpulse_warnings(caplog) == []


def test_an_empty_snapshot_is_not_judged_the_first_with_entries_is(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A tally nothing was written to yet has no entries at all.
    tally = Tally()
    monitor = LoggerMonitor(InMemorySink(), background=False)
    monitor.watch(tally, name="t", schedule=Every.counter("episodes", 10))
    monitor.step()
    assert rlpulse_warnings(caplog) == []
    tally.inc("episode")
    for _ in range(SNAPSHOTS_TO_APPEAR):
        monitor.step()
    assert "names 'episodes'" in rlpulse_warnings(caplog)[0]


def test_an_entry_that_appears_after_a_warm_up_is_not_warned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A learner's updates, counted once it has enough frames to learn from:
    # every ordinary run was warned of a typo.
    learner = Tally()
    learner.set("epsilon", 1.0)
    monitor = LoggerMonitor(InMemorySink(), background=False)
    monitor.watch(learner, name="learner", rate_keys=("updates",), step="updates")
    for poll in range(SNAPSHOTS_TO_APPEAR + 5):
        if poll == SNAPSHOTS_TO_APPEAR - 2:
            learner.inc("updates")
        monitor.step()
    assert rlpulse_warnings(caplog) == []


def test_monitor_bottleneck_refuses_a_watch_it_does_not_know() -> None:
    monitor = LoggerMonitor(InMemorySink(), background=False)
    monitor.watch(Tally(), name="learner")
    with pytest.raises(KeyError, match=r"producer='collector'.*watch\(\) it first"):
        monitor.bottleneck("collector", "learner")


def test_monitor_bottleneck_refuses_the_object_watched_for_its_watch_s_name() -> None:
    monitor = LoggerMonitor(InMemorySink(), background=False)
    collector, buffer = Tally(), collections.deque([1.0])
    monitor.watch(collector, name="collector")
    monitor.watch(Tally(), name="learner")
    with pytest.raises(TypeError, match=r"producer=\.\.\.\) takes the name of a watch"):
        monitor.bottleneck(collector, "learner")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"buffer='buffer'.*got deque"):
        monitor.bottleneck(buffer=buffer)  # type: ignore[arg-type]


def test_a_second_bottleneck_under_a_taken_name_is_refused_saying_to_name_it() -> None:
    monitor = LoggerMonitor(InMemorySink(), background=False)
    for name in ("collector", "learner", "sampler"):
        monitor.watch(Tally(), name=name)
    monitor.bottleneck("collector", "learner")
    with pytest.raises(ValueError, match=r"already registered.*name='bottleneck_2'"):
        monitor.bottleneck("collector", "sampler")

    assert monitor.bottleneck("collector", "sampler", name="bottleneck_2") == (
        "bottleneck_2"
    )


@pytest.mark.parametrize("window", [0, -1.0, float("inf")])
def test_monitor_bottleneck_refuses_a_window_that_is_no_time(window: float) -> None:
    monitor = LoggerMonitor(InMemorySink(), background=False)
    monitor.watch(Tally(), name="collector")
    monitor.watch(Tally(), name="learner")
    with pytest.raises(ValueError, match="positive, finite number of seconds"):
        monitor.bottleneck(window=window)
