"""The demo pipelines: ring buffer, producer and consumer on their own, monitored together, and the TorchRL pipeline."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rlpulse import Record, SQLiteLogger, read, read_distributions
from rlpulse._demo.common import DemoOutput, DemoResult, DemoSinks, chart_path
from rlpulse._demo.synthetic import (
    Consumer,
    Producer,
    RingBuffer,
    SimulatedEpisodes,
    run_demo,
)
from rlpulse.formats import merge_distributions
from rlpulse.read.records import list_runs
from rlpulse.sinks.registry import SCHEMES, SinkSpecError

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# RingBuffer


def test_ring_buffer_keeps_only_the_newest_capacity_items() -> None:
    buffer: RingBuffer[int] = RingBuffer(capacity=3, seed=0)

    buffer.extend([1, 2, 3, 4, 5])

    assert len(buffer) == 3
    assert set(buffer.sample(200)) == {3, 4, 5}


def test_ring_buffer_stats_count_every_write_and_sample_call() -> None:
    buffer: RingBuffer[int] = RingBuffer(capacity=4)
    buffer.extend([1, 2, 3])
    buffer.extend([4, 5, 6])
    buffer.sample(2)
    buffer.sample(2)

    assert buffer.stats() == {
        "size": 4,
        "write_count": 6,
        "capacity": 4,
        "utilization": 1.0,
        "sample_calls": 2,
        "samples_returned": 4,
    }


@pytest.mark.timeout(30)
def test_ring_buffer_wait_for_writes_returns_once_another_thread_wrote_enough() -> None:
    buffer: RingBuffer[int] = RingBuffer(capacity=10)
    writer = threading.Timer(0.05, buffer.extend, [range(3)])
    writer.start()

    assert buffer.wait_for_writes(3, timeout=10)
    assert not buffer.wait_for_writes(4, timeout=0.01)
    writer.join()


def test_ring_buffer_utilization_is_size_over_capacity() -> None:
    buffer: RingBuffer[str] = RingBuffer(capacity=8)

    buffer.extend(["a", "b"])

    assert buffer.stats()["utilization"] == 0.25


def test_ring_buffer_sampling_is_reproducible_with_a_seed() -> None:
    first: RingBuffer[int] = RingBuffer(capacity=100, seed=7)
    second: RingBuffer[int] = RingBuffer(capacity=100, seed=7)
    first.extend(range(100))
    second.extend(range(100))

    assert first.sample(20) == second.sample(20)


def test_ring_buffer_sample_returns_the_requested_batch_size() -> None:
    buffer: RingBuffer[int] = RingBuffer(capacity=10)
    buffer.extend([1, 2])

    assert len(buffer.sample(5)) == 5


def test_sampling_an_empty_ring_buffer_raises_value_error() -> None:
    with pytest.raises(ValueError, match="empty RingBuffer"):
        RingBuffer[int](capacity=3).sample(1)


def test_sampling_a_non_positive_batch_raises_value_error() -> None:
    buffer: RingBuffer[int] = RingBuffer(capacity=3)
    buffer.extend([1])

    with pytest.raises(ValueError, match="batch_size must be at least 1"):
        buffer.sample(0)


@pytest.mark.parametrize("capacity", [0, -5, 2.5])
def test_ring_buffer_rejects_a_capacity_that_is_not_a_positive_whole_number(
    capacity: int,
) -> None:
    with pytest.raises(ValueError, match="capacity must be a positive whole number"):
        RingBuffer[int](capacity=capacity)


# Producer


def test_producer_collect_writes_one_batch_of_consecutively_numbered_frames() -> None:
    buffer: RingBuffer[int] = RingBuffer(capacity=100, seed=0)
    producer = Producer(buffer, batch_size=5)

    producer.collect()
    producer.collect()

    assert set(buffer.sample(500)) == set(range(10))
    assert producer.stats() == {"frames": 10, "batches": 2}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"frames_per_second": 0}, "frames_per_second must be positive"),
        ({"frames_per_second": float("nan")}, "frames_per_second must be positive"),
        ({"batch_size": 0}, "batch_size must be at least 1"),
    ],
)
def test_producer_rejects_bad_pacing(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Producer(RingBuffer(capacity=10), **kwargs)  # type: ignore[arg-type]


@pytest.mark.timeout(30)
def test_started_producer_writes_frames_until_stopped(
    wait_until: Callable[..., bool],
) -> None:
    buffer: RingBuffer[int] = RingBuffer(capacity=10_000)
    producer = Producer(buffer, frames_per_second=5000, batch_size=50)

    producer.start()
    try:
        assert wait_until(lambda: producer.stats()["frames"] >= 500)
    finally:
        producer.stop()
    frames_at_stop = producer.stats()["frames"]

    assert not producer.running
    assert buffer.stats()["write_count"] == frames_at_stop
    time.sleep(0.05)
    assert producer.stats()["frames"] == frames_at_stop


@pytest.mark.timeout(30)
def test_started_producer_is_busy_all_the_time_it_runs() -> None:
    # Its pace stands for the environment's time; it never waits for a learner.
    producer = Producer(RingBuffer(capacity=100), frames_per_second=1000, batch_size=10)

    started = time.monotonic()
    producer.start()
    try:
        time.sleep(0.5)
    finally:
        producer.stop()
    elapsed = time.monotonic() - started

    assert 0.8 * elapsed <= producer.stats()["busy_s"] <= elapsed
    assert producer.metric_kinds() == {"busy_s": "counter"}


@pytest.mark.timeout(30)
def test_producer_paces_itself_to_its_frame_rate() -> None:
    producer = Producer(RingBuffer(capacity=100), frames_per_second=100, batch_size=10)

    producer.start()
    try:
        time.sleep(0.3)
    finally:
        producer.stop()

    # About 4 batches in 0.3 s at 10 batches/s; unpaced it would be thousands.
    assert 1 <= producer.stats()["batches"] <= 20


@pytest.mark.timeout(30)
def test_producer_asked_for_more_than_it_can_do_runs_flat_out_and_still_stops(
    wait_until: Callable[..., bool],
) -> None:
    producer = Producer(RingBuffer(capacity=100), frames_per_second=1e12, batch_size=1)

    producer.start()
    try:
        assert wait_until(lambda: producer.stats()["frames"] >= 1000)
    finally:
        producer.stop()

    assert not producer.running


@pytest.mark.timeout(30)
def test_starting_a_running_producer_raises_runtime_error() -> None:
    producer = Producer(RingBuffer(capacity=100))
    producer.start()
    try:
        with pytest.raises(RuntimeError, match="already running"):
            producer.start()
    finally:
        producer.stop()


def test_stopping_a_producer_that_never_started_does_nothing() -> None:
    producer = Producer(RingBuffer(capacity=100))

    producer.stop()

    assert producer.stats() == {"frames": 0, "batches": 0}


@pytest.mark.timeout(30)
def test_stopped_producer_can_be_started_again(
    wait_until: Callable[..., bool],
) -> None:
    producer = Producer(RingBuffer(capacity=1000), frames_per_second=5000)
    producer.start()
    producer.stop()
    frames_after_first_start = producer.stats()["frames"]

    producer.start()
    try:
        assert wait_until(lambda: producer.stats()["frames"] > frames_after_first_start)
    finally:
        producer.stop()


# Consumer


def test_consumer_waits_until_the_buffer_holds_a_full_batch() -> None:
    buffer: RingBuffer[int] = RingBuffer(capacity=100)
    consumer = Consumer(buffer, batch_size=8)
    buffer.extend(range(7))

    assert consumer.update() is False
    assert buffer.stats()["sample_calls"] == 0
    assert consumer.stats() == {"updates": 0, "frames_sampled": 0}


def test_consumer_update_samples_one_batch() -> None:
    buffer: RingBuffer[int] = RingBuffer(capacity=100)
    consumer = Consumer(buffer, batch_size=8)
    buffer.extend(range(8))

    assert consumer.update() is True
    assert consumer.update() is True
    assert buffer.stats()["sample_calls"] == 2
    assert consumer.stats() == {"updates": 2, "frames_sampled": 16}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"updates_per_second": -1}, "updates_per_second must be positive"),
        ({"frames_per_update": 0}, "frames_per_update must be positive"),
        ({"batch_size": 0}, "batch_size must be at least 1"),
    ],
)
def test_consumer_rejects_bad_pacing(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Consumer(RingBuffer(capacity=10), **kwargs)  # type: ignore[arg-type]


@pytest.mark.timeout(30)
def test_started_consumer_samples_from_a_filling_buffer(
    wait_until: Callable[..., bool],
) -> None:
    buffer: RingBuffer[int] = RingBuffer(capacity=1000)
    consumer = Consumer(
        buffer, batch_size=16, updates_per_second=200, frames_per_update=4
    )
    consumer.start()
    try:
        buffer.extend(range(16))
        assert wait_until(lambda: consumer.stats()["updates"] >= 3)
    finally:
        consumer.stop()

    assert buffer.stats()["sample_calls"] == consumer.stats()["updates"]


@pytest.mark.timeout(30)
def test_started_consumer_takes_one_update_per_frames_per_update_frames_written(
    wait_until: Callable[..., bool],
) -> None:
    buffer: RingBuffer[int] = RingBuffer(capacity=1000)
    consumer = Consumer(
        buffer, batch_size=16, updates_per_second=1000, frames_per_update=4
    )
    consumer.start()
    try:
        buffer.extend(range(40))
        assert wait_until(lambda: consumer.stats()["updates"] >= 10)
        time.sleep(0.2)  # what more it would take, were it not waiting
        taken = consumer.stats()["updates"]
        buffer.extend(range(8))
        assert wait_until(lambda: consumer.stats()["updates"] >= 12)
    finally:
        consumer.stop()

    assert taken == 10
    assert consumer.stats()["updates"] == 12
    assert consumer.replay_ratio == 4.0


@pytest.mark.timeout(30)
def test_started_consumer_times_its_waiting_for_frames_apart_from_its_updates(
    wait_until: Callable[..., bool],
) -> None:
    buffer: RingBuffer[int] = RingBuffer(capacity=1000)
    # Each update takes 10 ms; frames for one update come every 50 ms.
    consumer = Consumer(
        buffer, batch_size=4, updates_per_second=100, frames_per_update=4
    )
    consumer.start()
    try:
        for _ in range(10):
            buffer.extend(range(4))
            time.sleep(0.05)
    finally:
        consumer.stop()

    stats = consumer.stats()
    assert stats["updates"] == 10
    assert 0.1 <= stats["busy_s"] < 0.3
    assert stats["wait_s"] > 2 * stats["busy_s"]
    # Each update timed too, its distribution for the monitor's quantiles.
    assert stats["update_s_count"] == 10
    assert 0.01 <= stats["update_s_mean"] < 0.03
    assert consumer.histograms()["update_s"].count == 10
    assert consumer.metric_kinds() == {
        "busy_s": "counter",
        "wait_s": "counter",
        "update_s_count": "counter",
        "update_s_sum": "counter",
    }


# SimulatedEpisodes


def test_simulated_episodes_return_rises_with_the_learners_updates() -> None:
    buffer: RingBuffer[int] = RingBuffer(capacity=100)
    buffer.extend(range(100))
    learner = Consumer(buffer, batch_size=10)
    episodes = SimulatedEpisodes(learner, updates_to_learn=100, seed=0)
    episodes.advance(2000)
    untrained = episodes.stats()["episode_return_mean"]

    for _ in range(300):
        learner.update()
    episodes.advance(20_000)

    assert untrained < 40
    assert episodes.stats()["episode_return_mean"] > 3 * untrained


def test_simulated_episodes_pay_one_point_a_frame() -> None:
    learner = Consumer(RingBuffer(capacity=10))
    episodes = SimulatedEpisodes(learner, seed=1)

    episodes.advance(5000)

    stats = episodes.tally.stats()
    assert 0 < 5000 - stats["episode_return_sum"] < 30  # the episode under way


# The monitored demo


@dataclass(frozen=True)
class DemoOutcome:
    """How one demo ended: its result, what it recorded and what it printed."""

    result: DemoResult
    records: list[Record]
    stdout: str
    console: str
    extra_records: list[Record]

    @classmethod
    def record(
        cls,
        demo: Callable[..., DemoResult],
        directory: Path,
        seconds: float,
        extra_scheme: str,
        *,
        chart: bool = True,
        **settings: Any,
    ) -> DemoOutcome:
        """Run a demo into ``directory`` with one extra sink of ``extra_scheme``; ``settings`` are the demo's own."""
        path = directory / "runs" / "demo.sqlite"
        extra = path.with_name(f"extra.{extra_scheme}")
        stdout = io.StringIO()
        console = io.StringIO()
        output = DemoOutput([f"{extra_scheme}:{extra}"], chart, stdout, console)
        result = demo(seconds, path, output=output, **settings)
        return cls(
            result,
            list(read(result.path)),
            stdout.getvalue(),
            console.getvalue(),
            list(read(extra)),
        )

    def values(self, name: str) -> list[float]:
        return [record.value for record in self.records if record.name == name]

    def last_wall_time(self, watch: str) -> float:
        return max(r.wall_time for r in self.records if r.name.startswith(watch))

    def verdict(self) -> tuple[str, str]:
        """The bottleneck verdict the demo's summary ends with: its last window's sentence and the split over the run."""
        return closing_verdict(self.stdout)


LAST_WINDOW = "bottleneck, the last window: "
OVER_THE_RUN = "bottleneck over the run: "


def judged_mostly(over_the_run: str, verdict: str) -> bool:
    """Whether a run's split names ``verdict`` first and no other side: a window may be unknown (a learner still warming up waits for frames while it draws fewer than its ratio: signals that disagree), none wrong."""
    other = {"collector-bound": "learner-bound", "learner-bound": "collector-bound"}
    return over_the_run.startswith(f"{verdict} ") and other[verdict] not in over_the_run


def closing_verdict(stdout: str) -> tuple[str, str]:
    """The two verdict lines a demo's summary ends with (before its chart and how to show it again), without their labels."""
    lines = stdout.splitlines()
    last_window = [line for line in lines if line.startswith(LAST_WINDOW)]
    assert len(last_window) == 1, stdout
    at = lines.index(last_window[0])
    assert lines[at + 1].startswith(OVER_THE_RUN), stdout
    assert lines[at + 2] == "", stdout  # the summary ends here
    assert lines[-1].startswith("See it again with: rlpulse show "), stdout
    return (
        last_window[0].removeprefix(LAST_WINDOW),
        lines[at + 1].removeprefix(OVER_THE_RUN),
    )


def frame_rate(outcome: DemoOutcome) -> float:
    """The frames the demo's collector wrote per second of the demo."""
    return outcome.result.frames / outcome.result.seconds


def mean_rate(outcome: DemoOutcome, name: str) -> float:
    """The mean of a rate over the run, without the final snapshot (taken once the pipeline stopped)."""
    rates = outcome.values(name)[:-1]
    assert rates, f"{name} was logged at most once"
    return sum(rates) / len(rates)


# Windows of the bottleneck verdict short enough for a demo of 1.5 s.
SYNTHETIC_SETTINGS: dict[str, float] = {"poll_interval": 0.1, "window": 0.5}


@pytest.fixture(scope="module")
def demo_outcome(tmp_path_factory: pytest.TempPathFactory) -> DemoOutcome:
    return DemoOutcome.record(
        run_demo, tmp_path_factory.mktemp("demo"), 1.5, "jsonl", **SYNTHETIC_SETTINGS
    )


@pytest.fixture(scope="module")
def env_cost_outcome(tmp_path_factory: pytest.TempPathFactory) -> DemoOutcome:
    # 1 ms a frame: at most 1000 frames/s where the demo paces itself to 4000.
    return DemoOutcome.record(
        run_demo,
        tmp_path_factory.mktemp("env_cost"),
        1.5,
        "jsonl",
        env_cost=0.001,
        chart=False,
        **SYNTHETIC_SETTINGS,
    )


@pytest.fixture(scope="module")
def learner_cost_outcome(tmp_path_factory: pytest.TempPathFactory) -> DemoOutcome:
    # 100 ms an update: at most 10 updates/s where the frames allow 50.
    return DemoOutcome.record(
        run_demo,
        tmp_path_factory.mktemp("learner_cost"),
        1.5,
        "jsonl",
        learner_cost=0.1,
        chart=False,
        **SYNTHETIC_SETTINGS,
    )


@pytest.mark.timeout(60)
def test_demo_records_collector_frames_that_increase(demo_outcome: DemoOutcome) -> None:
    frames = demo_outcome.values("collector/frames")

    assert len(frames) >= 2
    assert frames == sorted(frames)
    assert frames[-1] > frames[0]


@pytest.mark.timeout(60)
def test_demo_records_a_positive_collector_frame_rate(
    demo_outcome: DemoOutcome,
) -> None:
    rates = demo_outcome.values("collector/frames_per_second")

    assert rates
    assert all(rate > 0 for rate in rates)


@pytest.mark.timeout(60)
def test_demo_buffer_size_never_exceeds_its_capacity(demo_outcome: DemoOutcome) -> None:
    sizes = demo_outcome.values("buffer/size")
    (capacity,) = set(demo_outcome.values("buffer/capacity"))

    assert sizes
    assert all(0 <= size <= capacity for size in sizes)


@pytest.mark.timeout(60)
def test_demo_logs_final_snapshots_after_the_pipeline_stopped(
    demo_outcome: DemoOutcome,
) -> None:
    frames = demo_outcome.result.frames

    assert demo_outcome.values("collector/frames")[-1] == frames
    assert demo_outcome.values("buffer/write_count")[-1] == frames
    assert (
        demo_outcome.values("learner/updates")[-1]
        == demo_outcome.values("buffer/sample_calls")[-1]
    )


@pytest.mark.timeout(60)
def test_demo_steps_the_buffer_by_its_write_count(demo_outcome: DemoOutcome) -> None:
    buffer_records = [r for r in demo_outcome.records if r.name == "buffer/write_count"]

    assert all(record.step == record.value for record in buffer_records)


@pytest.mark.timeout(60)
def test_demo_logs_the_learner_update_rate(demo_outcome: DemoOutcome) -> None:
    assert demo_outcome.values("learner/updates_per_second")


@pytest.mark.timeout(60)
def test_demo_records_the_episodes_the_collector_finishes(
    demo_outcome: DemoOutcome,
) -> None:
    means = demo_outcome.values("episodes/episode_return_mean")

    assert demo_outcome.values("episodes/episodes")[-1] > 0
    assert means
    assert all(mean >= 1 for mean in means)


@pytest.mark.timeout(60)
def test_demo_env_cost_lowers_the_frame_rate(
    demo_outcome: DemoOutcome, env_cost_outcome: DemoOutcome
) -> None:
    assert frame_rate(env_cost_outcome) < 0.5 * frame_rate(demo_outcome)


@pytest.mark.timeout(60)
def test_demo_learner_cost_lowers_the_update_rate(
    demo_outcome: DemoOutcome, learner_cost_outcome: DemoOutcome
) -> None:
    assert learner_cost_outcome.values("learner/updates")[-1] <= 16
    assert demo_outcome.values("learner/updates")[-1] >= 40


@pytest.mark.timeout(60)
def test_demo_records_the_distribution_of_its_learners_update_times(
    learner_cost_outcome: DemoOutcome,
) -> None:
    # Each update costs 100 ms more than the learner's own 20 ms: the
    # learner's update_s histograms hold every update, their median that.
    (histogram,) = merge_distributions(
        read_distributions(learner_cost_outcome.result.path, name="learner/update_s")
    ).values()
    updates = learner_cost_outcome.values("learner/updates")[-1]

    assert histogram.count == updates > 0
    assert 0.1 <= histogram.quantile(0.5) < 0.5
    assert learner_cost_outcome.values("learner/update_s_p50")


@pytest.mark.timeout(60)
def test_demo_with_an_expensive_env_ends_its_summary_collector_bound(
    env_cost_outcome: DemoOutcome,
) -> None:
    last_window, over_the_run = env_cost_outcome.verdict()

    assert last_window.startswith("collector-bound: the learner waited ")
    assert judged_mostly(over_the_run, "collector-bound"), over_the_run


@pytest.mark.timeout(60)
def test_demo_with_an_expensive_learner_ends_its_summary_learner_bound(
    learner_cost_outcome: DemoOutcome,
) -> None:
    last_window, over_the_run = learner_cost_outcome.verdict()

    # It draws far fewer samples per frame than the 3.2 it keeps to when it keeps up.
    assert last_window.startswith("learner-bound: the learner drew ")
    assert "against a target of 3.2" in last_window
    assert judged_mostly(over_the_run, "learner-bound"), over_the_run


def test_demo_prints_its_runs_events_as_rlpulse_show_does(
    learner_cost_outcome: DemoOutcome,
) -> None:
    from rlpulse.read.records import read_events
    from rlpulse.read.summary import format_events

    result = learner_cost_outcome.result
    events = format_events(read_events(result.path, result.run))

    assert "=> bottleneck: learner-bound" in events  # the verdict it came to
    assert events in learner_cost_outcome.stdout


@pytest.mark.timeout(60)
def test_demo_without_costs_is_collector_bound_its_learner_waiting_half_the_time(
    demo_outcome: DemoOutcome,
) -> None:
    # The frames allow 50 updates a second; each takes 10 ms.
    waits = demo_outcome.values("bottleneck/consumer_wait_share")
    last_window, over_the_run = demo_outcome.verdict()

    assert waits
    assert all(0.3 <= wait <= 0.7 for wait in waits), waits
    assert last_window.startswith("collector-bound: the learner waited ")
    assert judged_mostly(over_the_run, "collector-bound"), over_the_run


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("cost", "verdict"),
    [("--learner-cost", "learner-bound"), ("--env-cost", "collector-bound")],
)
def test_demo_command_makes_the_side_it_names_the_bottleneck(
    tmp_path: Path, cost: str, verdict: str
) -> None:
    path = tmp_path / "demo.sqlite"
    command = [sys.executable, "-m", "rlpulse", "demo", "--synthetic"]
    seconds = {"--learner-cost": "0.2", "--env-cost": "0.002"}[cost]
    options = ["--seconds", "2.5", "--out", str(path), cost, seconds]

    # Into a pipe, as CI reads it: lines whole, whatever width pytest was
    # given (pytest sets COLUMNS in its own environment).
    piped = {name: value for name, value in os.environ.items() if name != "COLUMNS"}
    shown = subprocess.run(
        [*command, *options],
        check=True,
        capture_output=True,
        text=True,
        timeout=50,
        env=piped,
    )

    last_window, over_the_run = closing_verdict(shown.stdout)
    assert last_window.startswith(f"{verdict}: ")
    assert judged_mostly(over_the_run, verdict), over_the_run
    if cost == "--learner-cost":
        updates = [r.value for r in read(path) if r.name == "learner/updates"]
        assert 0 < updates[-1] <= 16


@pytest.mark.parametrize(
    ("cost", "value"), [("env_cost", -0.001), ("learner_cost", float("nan"))]
)
def test_demo_refuses_a_cost_that_is_not_zero_or_more_seconds(
    tmp_path: Path, cost: str, value: float
) -> None:
    with pytest.raises(ValueError, match=f"{cost} must be a finite number"):
        run_demo(1.0, tmp_path / "demo.sqlite", **{cost: value})

    assert list(tmp_path.iterdir()) == []


@pytest.mark.timeout(60)
def test_demo_runs_for_about_the_requested_time(demo_outcome: DemoOutcome) -> None:
    assert 1.5 <= demo_outcome.result.seconds < 30
    assert not demo_outcome.result.interrupted


@pytest.mark.timeout(60)
def test_demo_prints_a_progress_line_naming_duration_and_file(
    demo_outcome: DemoOutcome,
) -> None:
    first_line = demo_outcome.stdout.splitlines()[0]

    assert "1.5 s" in first_line
    assert str(demo_outcome.result.path) in first_line
    assert demo_outcome.result.run in first_line


@pytest.mark.timeout(60)
def test_demo_prints_the_summary_of_its_run_and_how_to_show_it_again(
    demo_outcome: DemoOutcome,
) -> None:
    lines = demo_outcome.stdout.splitlines()

    assert (
        f"run {demo_outcome.result.run} in {demo_outcome.result.path}"
        in demo_outcome.stdout
    )
    assert any(line.startswith("collector/frames ") for line in lines)
    assert lines[-1] == f"See it again with: rlpulse show {demo_outcome.result.path}"


@pytest.mark.timeout(60)
def test_demo_prints_each_payload_on_the_console(demo_outcome: DemoOutcome) -> None:
    console_lines = demo_outcome.console.splitlines()

    assert any(" collector  frames=" in line for line in console_lines)
    assert any(" buffer  size=" in line for line in console_lines)


@pytest.mark.timeout(60)
def test_demo_adds_a_new_run_to_an_existing_file(
    demo_outcome: DemoOutcome,
) -> None:
    result = run_demo(
        0.2,
        demo_outcome.result.path,
        output=DemoOutput(chart=False, stdout=io.StringIO(), console=io.StringIO()),
    )

    assert list_runs(result.path)[-2:] == [demo_outcome.result.run, result.run]


@pytest.mark.parametrize("seconds", [0, -1.0])
def test_demo_rejects_a_non_positive_duration(tmp_path: Path, seconds: float) -> None:
    with pytest.raises(ValueError, match="seconds must be positive"):
        run_demo(seconds, tmp_path / "demo.sqlite")

    assert not (tmp_path / "demo.sqlite").exists()


@pytest.mark.timeout(60)
def test_demo_logs_every_payload_to_its_extra_sinks_too(
    demo_outcome: DemoOutcome,
) -> None:
    assert sorted(demo_outcome.extra_records) == sorted(demo_outcome.records)


@pytest.mark.timeout(60)
def test_demo_names_its_extra_sinks_in_the_progress_line(
    demo_outcome: DemoOutcome,
) -> None:
    assert ", jsonl:" in demo_outcome.stdout.splitlines()[0]


@pytest.mark.timeout(60)
def test_demo_draws_its_chart_next_to_the_store(demo_outcome: DemoOutcome) -> None:
    chart = demo_outcome.result.chart

    assert chart == demo_outcome.result.path.with_suffix(".png")
    assert chart.read_bytes()[:8] == PNG_SIGNATURE
    assert f"Chart of the run: {chart} (redraw it with: rlpulse plot " in (
        demo_outcome.stdout
    )


@pytest.mark.timeout(60)
def test_demo_without_matplotlib_skips_the_chart_with_a_one_line_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [
        name for name in sys.modules if name.partition(".")[0] == "matplotlib"
    ]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    stdout = io.StringIO()

    result = run_demo(
        0.2,
        tmp_path / "demo.sqlite",
        output=DemoOutput(stdout=stdout, console=io.StringIO()),
    )

    assert result.chart is None
    assert not (tmp_path / "demo.png").exists()
    notes = [line for line in stdout.getvalue().splitlines() if "No chart" in line]
    assert notes == [
        "No chart: matplotlib is not installed (pip install 'rlpulse[plot]')."
    ]


@pytest.mark.timeout(60)
def test_demo_with_chart_false_draws_nothing(tmp_path: Path) -> None:
    result = run_demo(
        0.2,
        tmp_path / "demo.sqlite",
        output=DemoOutput(chart=False, stdout=io.StringIO(), console=io.StringIO()),
    )

    assert result.chart is None
    assert list(tmp_path.iterdir()) == [tmp_path / "demo.sqlite"]


def test_chart_path_swaps_the_extension_for_png() -> None:
    assert chart_path("runs/demo.sqlite") == Path("runs/demo.png")
    assert chart_path(Path("runs/demo")) == Path("runs/demo.png")


def test_chart_path_never_overwrites_the_store() -> None:
    assert chart_path("runs/demo.png") == Path("runs/demo.png.png")


# Demo sinks


def _wal(path: Path) -> Path:
    return path.with_name(path.name + "-wal")


def test_demo_sinks_open_the_store_the_console_and_each_spec(tmp_path: Path) -> None:
    sinks = DemoSinks(
        tmp_path / "demo.sqlite",
        [f"csv:{tmp_path / 'demo.csv'}", f"sqlite:{tmp_path / 'copy.sqlite'}"],
        io.StringIO(),
    )
    try:
        names = [type(sink).__name__ for sink in sinks.all]
    finally:
        sinks.close()

    assert names == ["SQLiteLogger", "ConsoleLogger", "CSVLogger", "SQLiteLogger"]


def test_demo_sinks_close_closes_every_sink(tmp_path: Path) -> None:
    sinks = DemoSinks(
        tmp_path / "demo.sqlite", [f"csv:{tmp_path / 'demo.csv'}"], io.StringIO()
    )

    sinks.close()

    for sink in (sinks.store, *sinks.extra):
        with pytest.raises((RuntimeError, ValueError)):
            sink.log_metrics({"a/b": 1.0})


def test_demo_sinks_refuse_an_unknown_scheme_naming_the_known_ones(
    tmp_path: Path,
) -> None:
    with pytest.raises(SinkSpecError) as error:
        DemoSinks(tmp_path / "demo.sqlite", ["postgres:db"])

    assert "unknown sink scheme 'postgres'" in str(error.value)
    assert ", ".join(sorted(SCHEMES)) in str(error.value)
    assert list(tmp_path.iterdir()) == []


def test_demo_sinks_close_the_sinks_opened_before_a_bad_spec(tmp_path: Path) -> None:
    opened = tmp_path / "opened.sqlite"

    with pytest.raises(SinkSpecError):
        DemoSinks(tmp_path / "demo.sqlite", [f"sqlite:{opened}", "csv:"])

    # Closed, and the file it made for a run that got nothing taken back.
    assert not opened.exists()
    assert not _wal(opened).exists()
    assert not (tmp_path / "demo.sqlite").exists()


def test_demo_sinks_close_the_extra_sinks_when_the_store_cannot_open(
    tmp_path: Path,
) -> None:
    opened = tmp_path / "opened.sqlite"
    not_sqlite = tmp_path / "notes.sqlite"
    not_sqlite.write_text("these are my notes\n" * 10)

    with pytest.raises(ValueError, match=r"notes\.sqlite"):
        DemoSinks(not_sqlite, [f"sqlite:{opened}"])

    assert not _wal(opened).exists()


@pytest.mark.timeout(60)
def test_demo_closes_its_extra_sinks(tmp_path: Path) -> None:
    extra = tmp_path / "extra.sqlite"

    run_demo(
        0.2,
        tmp_path / "demo.sqlite",
        output=DemoOutput(
            [f"sqlite:{extra}"],
            chart=False,
            stdout=io.StringIO(),
            console=io.StringIO(),
        ),
    )

    assert any(record.name == "collector/frames" for record in read(extra))
    assert not _wal(extra).exists()


def test_demo_with_a_bad_sink_spec_records_nothing(tmp_path: Path) -> None:
    with pytest.raises(SinkSpecError, match="known schemes"):
        run_demo(0.2, tmp_path / "demo.sqlite", output=DemoOutput(["nosuch:place"]))

    assert list(tmp_path.iterdir()) == []


def test_demo_sink_store_is_a_new_run_of_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "demo.sqlite"
    SQLiteLogger(path, run="earlier").close()

    sinks = DemoSinks(path, console=io.StringIO())
    sinks.close()

    assert list_runs(path) == ["earlier", sinks.store.run]


# The TorchRL pipeline


@pytest.fixture(scope="module")
def torchrl_demo_outcome(tmp_path_factory: pytest.TempPathFactory) -> DemoOutcome:
    torch = pytest.importorskip("torch")
    from rlpulse._demo.torchrl_pipeline import TorchRLSettings, run_torchrl_demo

    threads_before = torch.get_num_threads()
    outcome = DemoOutcome.record(
        run_torchrl_demo,
        tmp_path_factory.mktemp("torchrl_demo"),
        TORCHRL_DEMO_SECONDS,
        "csv",
        settings=TorchRLSettings(**TORCHRL_SETTINGS),
    )
    assert torch.get_num_threads() == threads_before
    return outcome


# Long enough for CartPole's return to climb with a margin (a quiet machine
# collects about 4,800 frames in 10 s, a busy one two thirds of that), with
# exploration falling to its floor within the first 2,000 frames rather
# than the demo's 10,000.
TORCHRL_DEMO_SECONDS = 14.0
TORCHRL_SETTINGS: dict[str, float] = {
    "frames_per_batch": 50,
    "collector_every": 200,
    "buffer_every": 0.5,
    "poll_interval": 0.1,
    "warmup_frames": 500,
    "annealing_frames": 2000,
    "progress_every": 1.0,
}
FRAMES_PER_UPDATE = 4  # the demo's default


def torchrl_cost_outcome(directory: Path, **costs: float) -> DemoOutcome:
    """A short TorchRL demo with the settings of ``torchrl_demo_outcome`` and ``costs``, learning from the first 100 frames."""
    from rlpulse._demo.torchrl_pipeline import TorchRLSettings, run_torchrl_demo

    settings = TorchRLSettings(**{**TORCHRL_SETTINGS, "warmup_frames": 100, **costs})
    return DemoOutcome.record(
        run_torchrl_demo, directory, 4.0, "jsonl", chart=False, settings=settings
    )


@pytest.fixture(scope="module")
def torchrl_env_cost_outcome(tmp_path_factory: pytest.TempPathFactory) -> DemoOutcome:
    pytest.importorskip("torchrl")
    # 10 ms a step: at most 100 frames/s, several times fewer than without.
    return torchrl_cost_outcome(tmp_path_factory.mktemp("env_cost"), env_cost=0.01)


@pytest.fixture(scope="module")
def torchrl_learner_cost_outcome(
    tmp_path_factory: pytest.TempPathFactory,
) -> DemoOutcome:
    pytest.importorskip("torchrl")
    # 50 ms an update: at most 20 updates/s, several times fewer than without.
    return torchrl_cost_outcome(
        tmp_path_factory.mktemp("learner_cost"), learner_cost=0.05
    )


@pytest.mark.timeout(120)
def test_torchrl_demo_records_collector_frames_that_increase(
    torchrl_demo_outcome: DemoOutcome,
) -> None:
    frames = torchrl_demo_outcome.values("collector/frames")

    assert len(frames) >= 2
    assert frames == sorted(frames)
    assert frames[-1] == torchrl_demo_outcome.result.frames > frames[0]


@pytest.mark.timeout(120)
def test_torchrl_demo_records_a_positive_collector_frame_rate(
    torchrl_demo_outcome: DemoOutcome,
) -> None:
    rates = torchrl_demo_outcome.values("collector/frames_per_second")

    assert rates
    # The final snapshot, taken once the collector stopped, may see no new frames.
    assert all(rate > 0 for rate in rates[:-1])
    assert rates[-1] >= 0


@pytest.mark.timeout(120)
def test_torchrl_demo_steps_the_collector_by_its_frames(
    torchrl_demo_outcome: DemoOutcome,
) -> None:
    collector = [
        r for r in torchrl_demo_outcome.records if r.name == "collector/frames"
    ]

    assert all(record.step == record.value for record in collector)


@pytest.mark.timeout(120)
def test_torchrl_demo_records_every_collected_frame_as_a_buffer_write(
    torchrl_demo_outcome: DemoOutcome,
) -> None:
    writes = torchrl_demo_outcome.values("replay_buffer/write_count")
    buffer_records = [
        r for r in torchrl_demo_outcome.records if r.name == "replay_buffer/write_count"
    ]

    assert writes[-1] == torchrl_demo_outcome.values("collector/frames")[-1]
    assert torchrl_demo_outcome.values("replay_buffer/writes_per_second")
    assert all(record.step == record.value for record in buffer_records)
    assert torchrl_demo_outcome.values("replay_buffer/capacity") == [100_000.0] * len(
        writes
    )


@pytest.mark.timeout(120)
def test_torchrl_demo_records_cartpole_episode_returns(
    torchrl_demo_outcome: DemoOutcome,
) -> None:
    episodes = torchrl_demo_outcome.values("episodes/episodes")
    means = torchrl_demo_outcome.values("episodes/episode_return_mean")
    lowest = torchrl_demo_outcome.values("episodes/episode_return_min")
    highest = torchrl_demo_outcome.values("episodes/episode_return_max")

    assert episodes[-1] > 0
    assert means
    # CartPole pays one point per step; no episode lasts past 500 steps.
    assert all(
        1 <= low <= mean <= high <= 500
        for low, mean, high in zip(lowest, means, highest, strict=True)
    )


@pytest.mark.timeout(120)
def test_torchrl_demo_learner_trains_on_sampled_batches(
    torchrl_demo_outcome: DemoOutcome,
) -> None:
    updates = torchrl_demo_outcome.values("learner/updates")
    sampled = torchrl_demo_outcome.values("learner/frames_sampled")

    assert updates[-1] > 0
    assert sampled[-1] == 64 * updates[-1]
    assert all(loss >= 0 for loss in torchrl_demo_outcome.values("learner/loss_mean"))


@pytest.mark.timeout(120)
def test_torchrl_demo_records_the_distribution_of_its_learners_update_times(
    torchrl_demo_outcome: DemoOutcome,
) -> None:
    (histogram,) = merge_distributions(
        read_distributions(torchrl_demo_outcome.result.path, name="learner/update_s")
    ).values()

    assert histogram.count == torchrl_demo_outcome.values("learner/updates")[-1]
    assert 0.0 < histogram.quantile(0.5) < 1.0


@pytest.mark.timeout(120)
def test_torchrl_demo_learner_keeps_to_its_replay_ratio(
    torchrl_demo_outcome: DemoOutcome,
) -> None:
    updates = torchrl_demo_outcome.values("learner/updates")[-1]
    frames = torchrl_demo_outcome.result.frames

    assert updates <= frames / FRAMES_PER_UPDATE + 1


# What the learner learns depends on its updates, and a machine busy with
# other work (or tracing every call, as coverage does) makes fewer of them
# in a given time: the demo that shows learning ends at an update count.
# About 1,000 updates take 20 s here, and bring the return from about 20 to
# 90-270 (seven runs).
LEARNING_UPDATES = 1_000
LEARNING_SECONDS_AT_MOST = 150.0


@pytest.fixture(scope="module")
def torchrl_learning_outcome(tmp_path_factory: pytest.TempPathFactory) -> DemoOutcome:
    pytest.importorskip("torchrl")
    from rlpulse._demo.torchrl_pipeline import TorchRLSettings, run_torchrl_demo

    return DemoOutcome.record(
        run_torchrl_demo,
        tmp_path_factory.mktemp("torchrl_learning"),
        LEARNING_SECONDS_AT_MOST,
        "csv",
        chart=False,
        settings=TorchRLSettings(**TORCHRL_SETTINGS, updates=LEARNING_UPDATES),
    )


@pytest.mark.timeout(LEARNING_SECONDS_AT_MOST + 60)
def test_torchrl_demo_episode_return_rises_as_the_learner_learns(
    torchrl_learning_outcome: DemoOutcome,
) -> None:
    means = torchrl_learning_outcome.values("episodes/episode_return_mean")
    updates = torchrl_learning_outcome.values("learner/updates")

    # A random policy keeps CartPole up for about 20 steps; the collector acts
    # with the learner's Q-network, so the latest episodes last longer.
    assert updates[-1] == LEARNING_UPDATES
    assert len(means) >= 4
    assert means[0] < 40
    assert max(means[len(means) // 2 :]) > 2 * means[0], (means, updates)


@pytest.mark.timeout(LEARNING_SECONDS_AT_MOST + 60)
def test_torchrl_demo_given_an_update_count_ends_there_and_says_so(
    torchrl_learning_outcome: DemoOutcome,
) -> None:
    result = torchrl_learning_outcome.result

    assert result.seconds < LEARNING_SECONDS_AT_MOST
    assert not result.interrupted
    assert "for 2 min 30 s or 1,000 updates" in torchrl_learning_outcome.stdout


@pytest.mark.timeout(120)
def test_torchrl_demo_explores_less_as_frames_are_collected(
    torchrl_demo_outcome: DemoOutcome,
) -> None:
    epsilon = torchrl_demo_outcome.values("learner/epsilon")
    written = torchrl_demo_outcome.values("replay_buffer/write_count")[-1]
    annealing = TORCHRL_SETTINGS["annealing_frames"]

    assert epsilon == sorted(epsilon, reverse=True)
    assert epsilon[0] > 0.5
    # Down by 0.95 over the annealing frames, from 1 to its floor of 0.05:
    # never lower than the frames written allow; at the floor once a busy
    # machine, which collects fewer, has written them with a margin.
    assert epsilon[-1] >= max(0.05, 1 - 0.95 * written / annealing) - 1e-6
    if written >= annealing + 10 * TORCHRL_SETTINGS["frames_per_batch"]:
        assert epsilon[-1] == pytest.approx(0.05, rel=1e-4)
    else:
        assert epsilon[-1] < epsilon[0]


@pytest.mark.timeout(120)
def test_torchrl_demo_env_cost_lowers_the_frame_rate(
    torchrl_demo_outcome: DemoOutcome, torchrl_env_cost_outcome: DemoOutcome
) -> None:
    rate = "collector/frames_per_second"

    assert mean_rate(torchrl_env_cost_outcome, rate) < 0.5 * mean_rate(
        torchrl_demo_outcome, rate
    )
    assert "each env step +10 ms" in torchrl_env_cost_outcome.stdout.splitlines()[0]


@pytest.mark.timeout(120)
def test_torchrl_demo_with_an_expensive_env_has_its_learner_wait_for_frames(
    torchrl_env_cost_outcome: DemoOutcome,
) -> None:
    updates = torchrl_env_cost_outcome.values("learner/updates")[-1]
    frames = torchrl_env_cost_outcome.result.frames

    # The learner keeps up: it takes every batch the frames written allow,
    # bar those of the last batches the collector wrote as the demo ended.
    assert (frames - 2 * 50) / FRAMES_PER_UPDATE <= updates
    assert updates <= frames / FRAMES_PER_UPDATE + 1


@pytest.mark.timeout(120)
def test_torchrl_demo_learner_cost_lowers_the_update_rate(
    torchrl_demo_outcome: DemoOutcome, torchrl_learner_cost_outcome: DemoOutcome
) -> None:
    rate = "learner/updates_per_second"

    assert mean_rate(torchrl_learner_cost_outcome, rate) < 0.5 * mean_rate(
        torchrl_demo_outcome, rate
    )
    assert "each update +50 ms" in torchrl_learner_cost_outcome.stdout.splitlines()[0]


@pytest.mark.timeout(120)
def test_torchrl_demo_with_an_expensive_learner_falls_behind_its_collector(
    torchrl_learner_cost_outcome: DemoOutcome,
) -> None:
    updates = torchrl_learner_cost_outcome.values("learner/updates")[-1]
    frames = torchrl_learner_cost_outcome.result.frames

    assert updates < 0.5 * frames / FRAMES_PER_UPDATE


@pytest.mark.timeout(120)
def test_torchrl_demo_with_an_expensive_env_ends_its_summary_collector_bound(
    torchrl_env_cost_outcome: DemoOutcome,
) -> None:
    last_window, over_the_run = torchrl_env_cost_outcome.verdict()

    assert last_window.startswith("collector-bound: ")
    assert judged_mostly(over_the_run, "collector-bound"), over_the_run


@pytest.mark.timeout(120)
def test_torchrl_demo_with_an_expensive_learner_ends_its_summary_learner_bound(
    torchrl_learner_cost_outcome: DemoOutcome,
) -> None:
    last_window, over_the_run = torchrl_learner_cost_outcome.verdict()

    # 64 samples per 4 frames when the learner keeps up.
    assert last_window.startswith("learner-bound: the learner drew ")
    assert "against a target of 16" in last_window
    assert judged_mostly(over_the_run, "learner-bound"), over_the_run


@pytest.mark.timeout(120)
def test_torchrl_demo_times_both_sides_and_counts_the_samples_drawn(
    torchrl_demo_outcome: DemoOutcome,
) -> None:
    collecting = torchrl_demo_outcome.values("collector/busy_s")
    waiting = torchrl_demo_outcome.values("learner/wait_s")
    updating = torchrl_demo_outcome.values("learner/busy_s")
    samples = torchrl_demo_outcome.values("replay_buffer/samples_returned")
    seconds = torchrl_demo_outcome.result.seconds

    # The collector's thread never waits for the learner.
    assert 0.5 * seconds < collecting[-1] <= seconds
    # A counter, rated: the share of the time the collector collects.
    kinds = {record.name: record.kind for record in torchrl_demo_outcome.records}
    assert str(kinds["collector/busy_s"]) == "counter"
    shares = torchrl_demo_outcome.values("collector/busy_s_per_second")
    assert shares
    assert all(0 <= share <= 1.05 for share in shares), shares
    assert 0 < waiting[-1] + updating[-1] <= seconds
    assert samples[-1] == torchrl_demo_outcome.values("learner/frames_sampled")[-1]
    assert torchrl_demo_outcome.values("bottleneck/replay_ratio_target") == [16.0] * (
        len(torchrl_demo_outcome.values("bottleneck/window_s"))
    )
    torchrl_demo_outcome.verdict()  # a summary that ends with a verdict


@pytest.mark.timeout(120)
def test_torchrl_demo_logs_every_payload_to_its_extra_sinks(
    torchrl_demo_outcome: DemoOutcome,
) -> None:
    assert sorted(torchrl_demo_outcome.extra_records) == sorted(
        torchrl_demo_outcome.records
    )


@pytest.mark.timeout(120)
def test_torchrl_demo_draws_its_chart_next_to_the_store(
    torchrl_demo_outcome: DemoOutcome,
) -> None:
    chart = torchrl_demo_outcome.result.chart

    assert chart == torchrl_demo_outcome.result.path.with_suffix(".png")
    assert chart.read_bytes()[:8] == PNG_SIGNATURE


@pytest.mark.timeout(120)
def test_torchrl_demo_prints_progress_lines_while_it_runs(
    torchrl_demo_outcome: DemoOutcome,
) -> None:
    lines = torchrl_demo_outcome.stdout.splitlines()
    progress = [line for line in lines if " frames (" in line and "episodes" in line]

    assert lines[0].startswith("rlpulse demo: TorchRL Collector on CartPole-v1")
    assert str(torchrl_demo_outcome.result.path) in lines[0]
    assert ", csv:" in lines[0]
    assert len(progress) >= 2


@pytest.mark.timeout(120)
def test_torchrl_demo_prints_the_summary_and_how_to_show_it_again(
    torchrl_demo_outcome: DemoOutcome,
) -> None:
    lines = torchrl_demo_outcome.stdout.splitlines()
    result = torchrl_demo_outcome.result

    assert f"run {result.run} in {result.path}" in torchrl_demo_outcome.stdout
    assert any(line.startswith("replay_buffer/write_count ") for line in lines)
    assert lines[-1] == f"See it again with: rlpulse show {result.path}"


@pytest.mark.timeout(120)
def test_torchrl_demo_prints_each_payload_on_the_console(
    torchrl_demo_outcome: DemoOutcome,
) -> None:
    console = torchrl_demo_outcome.console

    for watch in ("collector", "replay_buffer", "episodes", "learner"):
        assert f" {watch}  " in console


@pytest.mark.timeout(120)
def test_torchrl_demo_runs_for_about_the_requested_time(
    torchrl_demo_outcome: DemoOutcome,
) -> None:
    assert TORCHRL_DEMO_SECONDS <= torchrl_demo_outcome.result.seconds < 90
    assert not torchrl_demo_outcome.result.interrupted


def test_torchrl_demo_rejects_a_non_positive_duration(tmp_path: Path) -> None:
    pytest.importorskip("torchrl")
    from rlpulse._demo.torchrl_pipeline import run_torchrl_demo

    with pytest.raises(ValueError, match="seconds must be positive"):
        run_torchrl_demo(0, tmp_path / "demo.sqlite")

    assert not (tmp_path / "demo.sqlite").exists()


def test_torchrl_demo_with_a_bad_sink_spec_records_nothing(tmp_path: Path) -> None:
    pytest.importorskip("torchrl")
    from rlpulse._demo.torchrl_pipeline import run_torchrl_demo

    with pytest.raises(SinkSpecError, match="known schemes"):
        run_torchrl_demo(
            1.0, tmp_path / "demo.sqlite", output=DemoOutput(["nosuch:place"])
        )

    assert list(tmp_path.iterdir()) == []


def test_dqn_learner_refuses_a_negative_cost() -> None:
    pytest.importorskip("torchrl")
    from torchrl.data import OneHot

    from rlpulse._demo.torchrl_pipeline import DQNLearner

    with pytest.raises(ValueError, match="cost must be a finite number of seconds"):
        DQNLearner(OneHot(2), observation_size=4, cost=-0.1)


def test_dqn_learner_stats_have_no_loss_before_the_first_update() -> None:
    pytest.importorskip("torchrl")
    from torchrl.data import OneHot

    from rlpulse._demo.torchrl_pipeline import DQNLearner

    learner = DQNLearner(OneHot(2), observation_size=4, eps_init=0.5)

    assert learner.stats() == {"updates": 0, "frames_sampled": 0, "epsilon": 0.5}


def test_dqn_learner_policy_takes_its_q_networks_best_action_without_exploration() -> (
    None
):
    torch = pytest.importorskip("torch")
    from tensordict import TensorDict
    from torchrl.data import OneHot

    from rlpulse._demo.torchrl_pipeline import DQNLearner

    learner = DQNLearner(OneHot(2), observation_size=4, eps_init=0.0, eps_end=0.0)
    observations = TensorDict({"observation": torch.randn(32, 4)}, batch_size=[32])

    acted = learner.policy(observations)

    assert torch.equal(acted["action"].argmax(-1), acted["action_value"].argmax(-1))


def test_dqn_learner_explores_less_as_frames_are_collected() -> None:
    pytest.importorskip("torchrl")
    from torchrl.data import OneHot

    from rlpulse._demo.torchrl_pipeline import DQNLearner

    learner = DQNLearner(OneHot(2), observation_size=4, annealing_frames=100)
    learner.explore_less(50)
    halfway = learner.stats()["epsilon"]
    learner.explore_less(500)

    assert halfway == pytest.approx(0.525, rel=1e-4)
    assert learner.stats()["epsilon"] == pytest.approx(0.05, rel=1e-4)


def sampled_from(
    written: int, *, warmup_frames: int, frames_per_update: float, checks: int = 50
) -> int:
    """How many batches ``sampled_batches`` yields from a buffer of ``written`` frames."""
    torch = pytest.importorskip("torch")
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage, ReplayBuffer

    from rlpulse._demo.torchrl_pipeline import sampled_batches

    buffer = ReplayBuffer(storage=LazyTensorStorage(1000))
    buffer.extend(TensorDict({"x": torch.arange(written)}, batch_size=[written]))
    running = iter([True] * checks + [False])
    batches = sampled_batches(
        buffer,
        8,
        warmup_frames=warmup_frames,
        frames_per_update=frames_per_update,
        running=lambda: next(running),
        poll_interval=0,
    )
    return sum(1 for _ in batches)


def test_sampled_batches_wait_for_the_warmup_frames() -> None:
    assert sampled_from(99, warmup_frames=100, frames_per_update=4) == 0


def test_sampled_batches_keep_to_one_batch_per_frames_per_update_frames() -> None:
    assert sampled_from(100, warmup_frames=100, frames_per_update=4) == 25


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_size": 0}, "batch_size must be at least 1"),
        ({"frames_per_update": 0}, "frames_per_update must be positive"),
    ],
)
def test_sampled_batches_refuse_bad_settings(
    kwargs: dict[str, float], message: str
) -> None:
    pytest.importorskip("torchrl")
    from torchrl.data import LazyTensorStorage, ReplayBuffer

    from rlpulse._demo.torchrl_pipeline import sampled_batches

    settings = {"batch_size": 8, "frames_per_update": 4.0, **kwargs}
    batches = sampled_batches(
        ReplayBuffer(storage=LazyTensorStorage(10)),
        int(settings["batch_size"]),
        warmup_frames=0,
        frames_per_update=settings["frames_per_update"],
        running=lambda: True,
    )
    with pytest.raises(ValueError, match=message):
        next(batches)


def test_step_cost_makes_every_environment_step_slower() -> None:
    pytest.importorskip("torchrl")
    from torchrl.envs import GymEnv, TransformedEnv

    from rlpulse._demo.torchrl_pipeline import ENV_NAME, StepCost

    env = TransformedEnv(GymEnv(ENV_NAME), StepCost(0.02))
    started = time.monotonic()
    env.rollout(10, break_when_any_done=False)

    assert time.monotonic() - started >= 10 * 0.02


def test_torchrl_demo_refuses_a_negative_cost_before_recording(tmp_path: Path) -> None:
    pytest.importorskip("torchrl")
    from rlpulse._demo.torchrl_pipeline import TorchRLSettings, run_torchrl_demo

    with pytest.raises(ValueError, match="env_cost must be a finite number"):
        run_torchrl_demo(
            1.0, tmp_path / "demo.sqlite", settings=TorchRLSettings(env_cost=-1)
        )

    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("updates", [0, -3, 2.5, True])
def test_torchrl_demo_refuses_an_update_count_that_is_not_a_positive_whole_number(
    updates: object,
) -> None:
    pytest.importorskip("torchrl")
    from rlpulse._demo.torchrl_pipeline import TorchRLSettings

    with pytest.raises(ValueError, match="updates must be a whole number"):
        TorchRLSettings(updates=updates)  # type: ignore[arg-type]


def test_episode_stats_of_an_empty_tally_count_no_episodes() -> None:
    pytest.importorskip("torchrl")
    from rlpulse import Tally
    from rlpulse._demo.common import episode_stats

    assert episode_stats(Tally()) == {"episodes": 0}
