"""Real TorchRL pipelines, monitored end to end into a SQLite store.

A single-process ``Collector`` on gymnasium ``CartPole-v1`` with a random
policy feeds a TorchRL ``ReplayBuffer``, watched exactly as the README
shows, by a background monitor whose sinks are rlpulse's ``SQLiteLogger``
and TorchRL's own ``CSVLogger`` and ``TensorboardLogger``. Every assertion
reads what landed in the files: the SQLite store through ``rlpulse.read``,
TorchRL's CSV files as text, the event files through TensorBoard's
``EventAccumulator``.

Three pipelines, each run once for the whole module:

- ``loop``: the training loop iterates the collector and extends the buffer,
  and calls an ``EpisodeTally`` on every batch;
- ``loop_hook``: the same loop, with the ``EpisodeTally`` as the collector's
  ``post_collect_hook``;
- ``started``: ``collector.start()`` collects in the collector's own thread,
  which writes every batch into the buffer given as ``replay_buffer=`` and
  calls the ``EpisodeTally`` hook.
"""

from __future__ import annotations

import itertools
import math
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("gymnasium")
torch = pytest.importorskip("torch")
pytest.importorskip("torchrl")

from tensorboard.backend.event_processing.event_accumulator import (  # noqa: E402
    EventAccumulator,
)
from torchrl.collectors import Collector  # noqa: E402
from torchrl.data import LazyTensorStorage, ReplayBuffer  # noqa: E402
from torchrl.envs import GymEnv  # noqa: E402
from torchrl.envs.utils import RandomPolicy  # noqa: E402
from torchrl.record.loggers import CSVLogger, TensorboardLogger  # noqa: E402

from rlpulse import Every, LoggerMonitor, Record, SQLiteLogger, Tally, read  # noqa: E402
from rlpulse.sources.torchrl import EpisodeTally  # noqa: E402

# Module-scoped pipelines run inside the first test that uses them.
pytestmark = pytest.mark.timeout(180)

FRAMES_PER_BATCH = 50
TOTAL_FRAMES = 1000
FRAMES_INTERVAL = 200
POLL_INTERVAL = 0.02
BUFFER_SECONDS = 0.1
MODES = ("loop", "loop_hook", "started")


@dataclass
class PipelineRun:
    """What one monitored pipeline left behind, and what the test knows independently."""

    records: dict[str, list[Record]]
    collector_frames: int
    buffer_write_count: int
    episode_lengths: list[int]
    elapsed_s: float
    csv_dir: Path
    tensorboard_dir: Path


def episode_lengths(dones: torch.Tensor) -> list[int]:
    """Lengths of the episodes that end in one environment's flat done flags."""
    ends = dones.reshape(-1).nonzero().reshape(-1).tolist()
    return [end - start for start, end in zip([-1, *ends], ends, strict=False)]


def run_pipeline(mode: str, directory: Path) -> PipelineRun:
    env = GymEnv("CartPole-v1")
    tally = Tally()
    episode_tally = EpisodeTally(tally)
    buffer = ReplayBuffer(storage=LazyTensorStorage(2 * TOTAL_FRAMES))
    collector = Collector(
        env,
        RandomPolicy(env.action_spec),
        frames_per_batch=FRAMES_PER_BATCH,
        total_frames=TOTAL_FRAMES,
        replay_buffer=buffer if mode == "started" else None,
        post_collect_hook=None if mode == "loop" else episode_tally,
    )
    csv_logger = CSVLogger(exp_name="csv", log_dir=str(directory))
    tensorboard_logger = TensorboardLogger(exp_name="tb", log_dir=str(directory))
    store = directory / "metrics.sqlite"
    sqlite_logger = SQLiteLogger(store, run=mode)
    monitor = LoggerMonitor(
        [sqlite_logger, csv_logger, tensorboard_logger], poll_interval=POLL_INTERVAL
    )
    monitor.watch(
        collector, name="collector", schedule=Every.counter("frames", FRAMES_INTERVAL)
    )
    monitor.watch(
        buffer,
        name="replay_buffer",
        schedule=Every.seconds(BUFFER_SECONDS),
        step="write_count",
    )
    monitor.watch(tally, name="tally", schedule=Every.seconds(BUFFER_SECONDS))
    started = time.monotonic()
    try:
        with monitor:
            if mode == "started":
                collector.start()
                deadline = time.monotonic() + 120
                while collector.is_running():
                    assert time.monotonic() < deadline, "collector thread never ended"
                    time.sleep(0.01)
            else:
                for batch in collector:
                    if mode == "loop":
                        episode_tally(batch)
                    buffer.extend(batch)
        elapsed = time.monotonic() - started
    finally:
        collector.async_shutdown(timeout=10)
        sqlite_logger.close()
    tensorboard_logger.experiment.flush()
    # Capacity is twice the frames collected: the buffer holds them all, in
    # the order they were collected, to count episodes independently.
    collected = buffer[: len(buffer)]
    records: dict[str, list[Record]] = defaultdict(list)
    for record in read(store, run=mode):
        records[record.name].append(record)
    return PipelineRun(
        records=dict(records),
        collector_frames=collector.stats()["frames"],
        buffer_write_count=buffer.stats()["write_count"],
        episode_lengths=episode_lengths(collected["next", "done"]),
        elapsed_s=elapsed,
        csv_dir=directory / "csv" / "scalars",
        tensorboard_dir=Path(tensorboard_logger.log_dir),
    )


@pytest.fixture(scope="module")
def pipelines(
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[str], PipelineRun]:
    """Return ``get(mode)``: the pipeline of that mode, run on first use."""
    runs: dict[str, PipelineRun] = {}

    def get(mode: str) -> PipelineRun:
        if mode not in runs:
            runs[mode] = run_pipeline(mode, tmp_path_factory.mktemp(mode))
        return runs[mode]

    return get


@pytest.fixture(params=MODES)
def run(
    request: pytest.FixtureRequest, pipelines: Callable[[str], PipelineRun]
) -> PipelineRun:
    return pipelines(request.param)


def logged(run: PipelineRun, name: str) -> list[Record]:
    assert name in run.records, f"{name} never logged; got {sorted(run.records)}"
    return run.records[name]


def test_the_pipeline_collects_every_frame_into_the_buffer(run: PipelineRun) -> None:
    assert run.collector_frames == TOTAL_FRAMES
    assert run.buffer_write_count == TOTAL_FRAMES


def test_the_final_collector_snapshot_after_stop_carries_the_total_frames(
    run: PipelineRun,
) -> None:
    final = logged(run, "collector/frames")[-1]
    assert final.value == run.collector_frames
    assert final.step == run.collector_frames


def test_collector_snapshots_are_logged_once_per_crossed_frames_interval(
    run: PipelineRun,
) -> None:
    steps = [record.step for record in logged(run, "collector/frames")]
    assert all(step is not None for step in steps)
    # The last snapshot is the one forced by stop(), due or not.
    scheduled = steps[:-1]
    for previous, step in itertools.pairwise(scheduled):
        assert step // FRAMES_INTERVAL > previous // FRAMES_INTERVAL, steps
    assert len(scheduled) <= TOTAL_FRAMES // FRAMES_INTERVAL + 1


def test_collector_steps_are_the_frames_of_each_snapshot(run: PipelineRun) -> None:
    for record in logged(run, "collector/frames"):
        assert record.step == record.value
        assert record.value % FRAMES_PER_BATCH == 0


def rates_against_counters(
    run: PipelineRun, counter: str, rate: str
) -> list[tuple[float, float, float]]:
    """``(rate, counter delta, wall-clock delta)`` of every logged rate, from the store."""
    counters = logged(run, counter)
    rates = {record.wall_time: record.value for record in logged(run, rate)}
    triples = []
    for previous, current in itertools.pairwise(counters):
        if current.wall_time in rates:
            triples.append(
                (
                    rates[current.wall_time],
                    current.value - previous.value,
                    current.wall_time - previous.wall_time,
                )
            )
    assert len(triples) == len(rates), "a rate without a previous snapshot"
    return triples


@pytest.mark.parametrize(
    ("counter", "rate"),
    [
        ("collector/frames", "collector/frames_per_second"),
        ("replay_buffer/write_count", "replay_buffer/writes_per_second"),
    ],
)
def test_rates_match_the_counter_deltas_between_logged_snapshots(
    run: PipelineRun, counter: str, rate: str
) -> None:
    triples = rates_against_counters(run, counter, rate)
    assert triples
    for value, delta, seconds in triples[:-1]:
        assert rate_matches(value, delta, seconds), (value, delta, seconds)
    # The final snapshot, taken soon after the last log, may rate the
    # interval before that log too (see Watch._rates_from).
    value, delta, seconds = triples[-1]
    candidates = [(delta, seconds)]
    if len(triples) > 1:
        _, before_delta, before_seconds = triples[-2]
        candidates.append((delta + before_delta, seconds + before_seconds))
    assert any(rate_matches(value, *candidate) for candidate in candidates), (
        value,
        candidates,
    )


def rate_matches(value: float, delta: float, seconds: float) -> bool:
    """Whether a logged rate is that of a counter delta over a wall-clock span.

    Rates use the monotonic clock of the polls, the store their wall clock:
    a generous factor absorbs the scheduling between the two.
    """
    if delta == 0:
        return value == 0.0
    expected = delta / seconds
    return expected / 3 <= value <= expected * 3


@pytest.mark.parametrize(
    "rate", ["collector/frames_per_second", "replay_buffer/writes_per_second"]
)
def test_rates_are_positive_and_of_the_order_of_the_runs_mean_rate(
    run: PipelineRun, rate: str
) -> None:
    values = [record.value for record in logged(run, rate)]
    positive = [value for value in values if value > 0]
    assert positive
    assert all(math.isfinite(value) and value >= 0 for value in values)
    mean_rate = TOTAL_FRAMES / run.elapsed_s
    assert mean_rate / 10 <= statistics.median(positive) <= mean_rate * 10


def test_replay_buffer_snapshots_are_stepped_by_write_count(run: PipelineRun) -> None:
    records = logged(run, "replay_buffer/write_count")
    assert [record.step for record in records] == [
        int(record.value) for record in records
    ]
    assert records[-1].value == TOTAL_FRAMES
    sizes = logged(run, "replay_buffer/size")
    assert sizes[-1].value == TOTAL_FRAMES
    assert logged(run, "replay_buffer/capacity")[-1].value == 2 * TOTAL_FRAMES


def test_finished_episodes_arrive_in_the_store_through_the_episode_tally(
    run: PipelineRun,
) -> None:
    lengths = run.episode_lengths
    assert lengths, "no episode finished: the test needs a longer run"
    count = logged(run, "tally/episode_return_count")[-1]
    assert count.value == len(lengths)
    window = lengths[-Tally().window :]
    mean = logged(run, "tally/episode_length_mean")[-1].value
    assert mean == pytest.approx(statistics.fmean(window))
    assert logged(run, "tally/episode_length_max")[-1].value == max(window)
    # CartPole pays 1 per step: an episode's return is its length.
    assert logged(run, "tally/episode_return_mean")[-1].value == pytest.approx(mean)


def stepped_metrics(run: PipelineRun) -> dict[str, list[tuple[int, float]]]:
    """Every stepped metric in the SQLite store, as ``(step, value)`` in order."""
    return {
        name: [(record.step, record.value) for record in records]
        for name, records in run.records.items()
        if records[0].step is not None
        and name.split("/")[0] in ("collector", "replay_buffer")
    }


def read_torchrl_csv(directory: Path) -> dict[str, list[tuple[int, float]]]:
    metrics = {}
    for path in directory.rglob("*.csv"):
        name = path.relative_to(directory).with_suffix("").as_posix()
        rows = [line.split(",") for line in path.read_text().splitlines()]
        metrics[name] = [(int(step), float(value)) for step, value in rows]
    return metrics


def read_tensorboard(directory: Path) -> dict[str, list[tuple[int, float]]]:
    accumulator = EventAccumulator(str(directory))
    accumulator.Reload()
    return {
        tag: [(event.step, event.value) for event in accumulator.Scalars(tag)]
        for tag in accumulator.Tags()["scalars"]
    }


@pytest.mark.parametrize("mode", ["loop", "started"])
def test_torchrl_csv_logger_beside_sqlite_receives_the_same_metrics(
    pipelines: Callable[[str], PipelineRun], mode: str
) -> None:
    run = pipelines(mode)
    expected = stepped_metrics(run)
    assert "collector/frames_per_second" in expected
    csv = read_torchrl_csv(run.csv_dir)
    assert {name: csv[name] for name in expected if name in csv} == expected
    assert set(expected) <= set(csv)


@pytest.mark.parametrize("mode", ["loop", "started"])
def test_torchrl_tensorboard_logger_beside_sqlite_receives_the_same_metrics(
    pipelines: Callable[[str], PipelineRun], mode: str
) -> None:
    run = pipelines(mode)
    expected = stepped_metrics(run)
    assert "replay_buffer/writes_per_second" in expected
    events = read_tensorboard(run.tensorboard_dir)
    assert set(expected) <= set(events)
    for name, points in expected.items():
        # Event files store scalars as float32.
        assert [step for step, _ in events[name]] == [step for step, _ in points]
        assert [value for _, value in events[name]] == pytest.approx(
            [value for _, value in points], rel=1e-6
        )
