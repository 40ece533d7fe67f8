"""The bottleneck verdict on a real TorchRL pipeline whose costs the test changes mid-run.

A TorchRL ``Collector`` steps gymnasium's ``CartPole-v1`` with a random
policy in its own thread, writing each batch into a ``ReplayBuffer``
watched through ``SampleCounter``; a learner in the main thread samples one
batch for every ``FRAMES_PER_UPDATE`` frames written (waiting for frames
when it is ahead) and "updates" by sleeping. Both sides record their stage
timing: the collector its busy time, the learner its waiting and updating.
The run goes through three phases: an expensive environment, then an
expensive learner, then the expensive environment again; the verdict of
each window well inside a phase must name the side the phase made slow,
and the ``bottleneck`` events must follow the changes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

pytest.importorskip("gymnasium")
pytest.importorskip("torchrl")

from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.envs import GymEnv, TransformedEnv
from torchrl.envs.utils import RandomPolicy

from rlpulse import LoggerMonitor, Tally
from rlpulse._demo.torchrl_pipeline import StepCost
from rlpulse.sources.torchrl import SampleCounter
from rlpulse.testing import InMemorySink
from rlpulse.verdict import Bound

pytestmark = pytest.mark.timeout(120)

# Windows long enough for hundreds of frames and dozens of sample calls each:
# one call or one collector batch more or less in a window moves its replay
# ratio by a few percent, well inside the 15 % that is on target.
WINDOW = 1.0
FRAMES_PER_BATCH = 20
BATCH_SIZE = 32
FRAMES_PER_UPDATE = 8  # a replay ratio of 32 / 8 = 4 samples per frame
PHASE_SECONDS = 6.0


@dataclass(frozen=True)
class Phase:
    """What one phase of the run costs: each environment step, each update."""

    bound: Bound
    env_step_s: float
    update_s: float


# An expensive environment: 20 frames in 40 ms or more, 60 updates a second
# at most of 1 ms each. An expensive learner: 50 ms an update, 20 a second at
# most, sampling 640 frames' worth a second where CartPole's random steps come
# by the thousand a second (a few hundred on a loaded machine).
EXPENSIVE_ENV = Phase(Bound.PRODUCER, env_step_s=0.002, update_s=0.001)
EXPENSIVE_LEARNER = Phase(Bound.CONSUMER, env_step_s=0.0, update_s=0.05)
PHASES = (EXPENSIVE_ENV, EXPENSIVE_LEARNER, EXPENSIVE_ENV)


@dataclass(frozen=True)
class JudgedWindow:
    """One window the bottleneck watch logged: when it ended, how long it was, its verdict (``None``: unknown)."""

    end: float
    seconds: float
    verdict: float | None


@dataclass(frozen=True)
class PipelineRun:
    """What the monitored run left: its windows, its events, and when each phase began and ended."""

    windows: list[JudgedWindow]
    events: list[float]
    phase_times: list[tuple[float, float]]

    def verdicts_inside(self, index: int) -> list[float | None]:
        """The verdicts of the windows wholly inside phase ``index``, but its first (the pipeline settling)."""
        start, end = self.phase_times[index]
        inside = [
            window.verdict
            for window in self.windows
            if window.end - window.seconds >= start and window.end <= end
        ]
        return inside[1:]


def ratio_gated_batches(buffer: ReplayBuffer, until: float) -> Iterator[object]:
    """A batch for every ``FRAMES_PER_UPDATE`` frames written, until ``until``; in between, wait for frames."""
    sampled = 0
    while time.monotonic() < until:
        if buffer.write_count >= max(BATCH_SIZE, (sampled + 1) * FRAMES_PER_UPDATE):
            sampled += 1
            yield buffer.sample(BATCH_SIZE)
        else:
            time.sleep(0.002)


@pytest.fixture(scope="module")
def pipeline_run() -> PipelineRun:
    step_cost = StepCost(PHASES[0].env_step_s)
    env = TransformedEnv(GymEnv("CartPole-v1"), step_cost)
    collector = Collector(
        env,
        RandomPolicy(env.action_spec),
        frames_per_batch=FRAMES_PER_BATCH,
        total_frames=-1,
    )
    buffer = ReplayBuffer(storage=LazyTensorStorage(100_000))
    collecting, learning = Tally(), Tally()
    update_s = PHASES[0].update_s
    stop = threading.Event()

    def collect() -> None:
        batches = iter(collector)
        while not stop.is_set():
            with collecting.busy():  # the collector's stage timing
                batch = next(batches)
            buffer.extend(batch)

    sink = InMemorySink()
    monitor = LoggerMonitor(sink, poll_interval=0.02)
    monitor.watch(collecting, name="collector")
    monitor.watch(learning, name="learner")
    monitor.watch(SampleCounter(buffer), name="buffer")
    monitor.bottleneck(
        "collector",
        "learner",
        buffer="buffer",
        target_ratio=BATCH_SIZE / FRAMES_PER_UPDATE,
        window=WINDOW,
    )
    producer = threading.Thread(target=collect, name="collector")
    phase_times: list[tuple[float, float]] = []
    with monitor:
        producer.start()
        try:
            for phase in PHASES:
                step_cost.seconds, update_s = phase.env_step_s, phase.update_s
                started = time.time()
                until = time.monotonic() + PHASE_SECONDS
                # The learner's stage timing: waiting for a batch, updating.
                for _ in learning.waiting(ratio_gated_batches(buffer, until)):
                    with learning.busy():
                        time.sleep(update_s)
                phase_times.append((started, time.time()))
        finally:
            stop.set()
            producer.join(timeout=30)
            collector.shutdown()
    windows = [
        JudgedWindow(
            payload.wall_time,
            payload.metrics["bottleneck/window_s"],
            payload.metrics.get("bottleneck/bound"),
        )
        for payload in sink.payloads
        if "bottleneck/bound_known" in payload.metrics
    ]
    events = [event.value for event in sink.events if event.kind == "bottleneck"]
    return PipelineRun(windows, events, phase_times)


@pytest.mark.parametrize("index", [0, 2], ids=["first", "again"])
def test_an_expensive_environment_makes_the_pipeline_collector_bound(
    pipeline_run: PipelineRun, index: int
) -> None:
    verdicts = pipeline_run.verdicts_inside(index)

    assert len(verdicts) >= 3, pipeline_run.windows
    assert verdicts == [Bound.PRODUCER] * len(verdicts), pipeline_run.windows


def test_an_expensive_learner_makes_the_pipeline_learner_bound(
    pipeline_run: PipelineRun,
) -> None:
    verdicts = pipeline_run.verdicts_inside(1)

    assert len(verdicts) >= 3, pipeline_run.windows
    assert verdicts == [Bound.CONSUMER] * len(verdicts), pipeline_run.windows


def test_the_bottleneck_events_follow_the_costs_as_they_change(
    pipeline_run: PipelineRun,
) -> None:
    assert pipeline_run.events == [-1.0, 1.0, -1.0], pipeline_run.windows
