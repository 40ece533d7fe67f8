"""The synthetic pipeline of ``rlpulse demo``: standard-library stand-ins for a collector, a replay buffer and a learner.

``rlpulse demo`` runs it when TorchRL is not installed, or with
``--synthetic``. Three stand-ins for the parts of a reinforcement-learning
data pipeline, each with a TorchRL-style ``stats()`` snapshot:

- :class:`Producer` plays a data collector: a thread writing frames in
  batches, at a steady rate, into
- :class:`RingBuffer`, a bounded replay buffer, from which
- :class:`Consumer` plays a learner: a thread that waits for frames and
  samples a batch for each so many written, as a replay ratio asks;
- :class:`SimulatedEpisodes` plays the episodes the collector finishes,
  their return rising with the learner's updates.

:func:`run_demo` wires them to a background :class:`~rlpulse.LoggerMonitor`
recording into the demo's sinks (see :class:`~rlpulse._demo.common.DemoSinks`)
for a while, judges which side holds the pipeline back
(:meth:`~rlpulse.LoggerMonitor.bottleneck`) and prints the summary of the
recorded run.
"""

from __future__ import annotations

import abc
import math
import os
import random
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Generic, TextIO, TypeVar

from rlpulse._demo.common import (
    DEFAULT_OUT,
    EPISODE_WINDOW,
    RETURN_KEY,
    DemoOutput,
    DemoPipeline,
    DemoResult,
    DemoSinks,
    check_cost,
    check_updates,
    demo_length,
    episode_stats,
    record_demo,
    say,
    verdict_window,
    watch_learning,
)
from rlpulse.distributions import Histogram
from rlpulse.monitor import LoggerMonitor
from rlpulse.naming import Kind
from rlpulse.read.summary import format_number
from rlpulse.schedules import Every
from rlpulse.sources.tally import Tally

__all__ = ["Consumer", "Producer", "RingBuffer", "SimulatedEpisodes", "run_demo"]

Item = TypeVar("Item")

_BUFFER_CAPACITY = 20_000
_COLLECTOR_SCHEDULE = Every.counter("frames", 10_000) | Every.seconds(5)
_BUFFER_SCHEDULE = Every.seconds(1)
_STOP_CHECK_S = 0.1  # how soon a consumer waiting for frames sees stop()


class RingBuffer(Generic[Item]):
    """A bounded, thread-safe replay buffer: the newest ``capacity`` items, sampled uniformly.

    Writing past the capacity overwrites the oldest items. Its ``stats()``
    has the keys of a TorchRL replay buffer's: ``size``, ``write_count``
    (items ever written), ``capacity``, ``utilization`` (``size / capacity``),
    and those :class:`rlpulse.sources.torchrl.SampleCounter` adds to them:
    ``sample_calls`` and ``samples_returned`` (items returned, named as TorchRL's monitor names them). ``seed`` makes the
    sampling reproducible.

    >>> buffer = RingBuffer(capacity=3, seed=0)
    >>> buffer.extend([1, 2, 3, 4])
    >>> sorted(set(buffer.sample(10)))
    [2, 3, 4]
    >>> buffer.stats()
    {'size': 3, 'write_count': 4, 'capacity': 3, 'utilization': 1.0, 'sample_calls': 1, 'samples_returned': 10}
    """

    def __init__(self, capacity: int, *, seed: int | None = None) -> None:
        if not isinstance(capacity, int) or capacity < 1:
            raise ValueError(
                f"capacity must be a positive whole number of items, got {capacity!r}"
            )
        self._capacity = capacity
        self._items: list[Item] = []
        self._next_slot = 0
        self._write_count = 0
        self._sample_calls = 0
        self._samples = 0
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._written = threading.Condition(self._lock)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def extend(self, items: Sequence[Item]) -> None:
        """Write ``items`` in order, overwriting the oldest once the buffer is full.

        >>> buffer = RingBuffer(capacity=2)
        >>> buffer.extend(["a", "b", "c"])
        >>> len(buffer), buffer.stats()["write_count"]
        (2, 3)
        """
        with self._lock:
            for item in items:
                if len(self._items) < self._capacity:
                    self._items.append(item)
                else:
                    self._items[self._next_slot] = item
                self._next_slot = (self._next_slot + 1) % self._capacity
            self._write_count += len(items)
            self._written.notify_all()

    def wait_for_writes(self, count: int, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until ``count`` items were ever written; return whether they were.

        >>> buffer = RingBuffer(capacity=2)
        >>> buffer.extend(["a", "b", "c"])
        >>> buffer.wait_for_writes(3, timeout=0), buffer.wait_for_writes(4, timeout=0.01)
        (True, False)
        """
        with self._written:
            return self._written.wait_for(lambda: self._write_count >= count, timeout)

    def sample(self, batch_size: int) -> list[Item]:
        """Return ``batch_size`` items drawn uniformly, with replacement.

        >>> RingBuffer(capacity=4).sample(1)
        Traceback (most recent call last):
        ...
        ValueError: cannot sample from an empty RingBuffer: extend() it first
        """
        _check_batch_size(batch_size)
        with self._lock:
            if not self._items:
                raise ValueError(
                    "cannot sample from an empty RingBuffer: extend() it first"
                )
            self._sample_calls += 1
            self._samples += batch_size
            return self._random.choices(self._items, k=batch_size)

    def stats(self) -> dict[str, float]:
        """Return the buffer's snapshot: size, writes, capacity, utilization, sample calls and samples.

        >>> RingBuffer(capacity=10).stats()["utilization"]
        0.0
        """
        with self._lock:
            size = len(self._items)
            return {
                "size": size,
                "write_count": self._write_count,
                "capacity": self._capacity,
                "utilization": size / self._capacity,
                "sample_calls": self._sample_calls,
                "samples_returned": self._samples,
            }


class _Worker(abc.ABC):
    """A daemon thread moving batches of ``batch_size`` frames into or out of ``buffer`` until stopped.

    :attr:`stages` is its stage timing, what a bottleneck verdict reads:
    ``busy_s``, the seconds it works, and for a side that waits for the
    other, ``wait_s``.
    """

    def __init__(
        self, buffer: RingBuffer[int], batch_size: int, thread_name: str
    ) -> None:
        _check_batch_size(batch_size)
        self.buffer = buffer
        self.batch_size = batch_size
        self.stages = Tally()
        self._thread_name = thread_name
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None

    @abc.abstractmethod
    def _run(self) -> None:
        """The thread's work, until ``_stop_event`` is set; subclasses say what."""

    def metric_kinds(self) -> dict[str, Kind]:
        """The stage timing's counters, once recorded: ``busy_s`` (and ``wait_s``; a learner's ``update_s_count`` and ``update_s_sum``).

        >>> producer = Producer(RingBuffer(capacity=10))
        >>> producer.start()
        >>> producer.stop()
        >>> producer.metric_kinds()
        {'busy_s': <Kind.COUNTER: 'counter'>}
        """
        return self.stages.metric_kinds()

    @property
    def running(self) -> bool:
        """Whether the thread has been started and not yet stopped.

        >>> Producer(RingBuffer(capacity=10)).running
        False
        """
        return self._thread is not None

    def start(self) -> None:
        """Start the thread.

        >>> producer = Producer(RingBuffer(capacity=1000))
        >>> producer.start()
        >>> producer.running
        True
        >>> producer.stop()
        >>> producer.running
        False
        """
        if self._thread is not None:
            raise RuntimeError(
                f"{type(self).__name__} is already running: stop() it first"
            )
        self._stop_event.clear()
        self._thread = threading.Thread(
            target=self._run, name=self._thread_name, daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread and wait up to ``timeout`` seconds for it; stopping again does nothing.

        >>> consumer = Consumer(RingBuffer(capacity=10))
        >>> consumer.start()
        >>> consumer.stop()
        >>> consumer.stop()
        >>> consumer.running
        False
        """
        thread = self._thread
        if thread is None:
            return
        self._stop_event.set()
        thread.join(timeout)
        self._thread = None


class Producer(_Worker):
    """A stand-in for a data collector: a thread writing frames in batches into a buffer.

    Each :meth:`collect` writes one batch of ``batch_size`` frames (numbered
    from 0) into ``buffer``; :meth:`start` does so from a thread, paced to
    ``frames_per_second``, until :meth:`stop`, each frame costing that
    thread ``env_cost`` seconds (an expensive environment; the pace is the
    slower of the two). Each batch also plays on the ``episodes`` given
    (:meth:`SimulatedEpisodes.advance`). Its ``stats()`` has a TorchRL
    collector's cumulative counters ``frames`` and ``batches``, and once
    started ``busy_s``: the pace stands for the time an environment takes
    to step, and the producer never waits for the learner (the buffer
    overwrites its oldest frames), so it is busy all the time.

    >>> buffer = RingBuffer(capacity=1000)
    >>> producer = Producer(buffer, frames_per_second=4000, batch_size=100)
    >>> producer.collect()
    100
    >>> producer.stats(), buffer.stats()["write_count"]
    ({'frames': 100, 'batches': 1}, 100)
    """

    def __init__(
        self,
        buffer: RingBuffer[int],
        *,
        frames_per_second: float = 4000.0,
        batch_size: int = 100,
        env_cost: float = 0.0,
        episodes: SimulatedEpisodes | None = None,
    ) -> None:
        _check_positive("frames_per_second", frames_per_second)
        check_cost("env_cost", env_cost)
        super().__init__(buffer, batch_size, "rlpulse-demo-producer")
        self._interval = batch_size / frames_per_second
        self._cost = batch_size * env_cost
        self.episodes = episodes
        self._frames = 0
        self._batches = 0

    def collect(self) -> int:
        """Write one batch of frames into the buffer and return how many.

        >>> producer = Producer(RingBuffer(capacity=10), batch_size=4)
        >>> producer.collect(), producer.collect(), producer.buffer.sample(1)[0] < 8
        (4, 4, True)
        """
        first = self._frames
        self.buffer.extend(range(first, first + self.batch_size))
        self._frames += self.batch_size
        self._batches += 1
        if self.episodes is not None:
            self.episodes.advance(self.batch_size)
        return self.batch_size

    def _run(self) -> None:
        next_due = time.monotonic()
        while not self._stop_event.is_set():
            # The cost and the pace are the environment's time: busy.
            with self.stages.busy():
                if self._cost:
                    self._stop_event.wait(self._cost)
                self.collect()
                next_due += self._interval
                delay = next_due - time.monotonic()
                if delay > 0:
                    self._stop_event.wait(delay)
                elif delay < -self._interval:
                    # Fallen behind (a busy machine): keep the pace from now
                    # on rather than catching up in a burst.
                    next_due = time.monotonic()

    def stats(self) -> dict[str, float]:
        """Return the frames and batches written so far, and the seconds busy once started.

        >>> Producer(RingBuffer(capacity=10)).stats()
        {'frames': 0, 'batches': 0}
        """
        return {"frames": self._frames, "batches": self._batches, **self.stages.stats()}


class Consumer(_Worker):
    """A stand-in for a learner: a thread that waits for frames, then samples a batch and updates on it.

    Each :meth:`update` samples one batch of ``batch_size`` frames, once the
    buffer holds that many. :meth:`start` does so from a thread until
    :meth:`stop`, keeping to a replay ratio as a real learner does: one
    update for every ``frames_per_update`` frames written (the first once a
    batch is in), waiting for frames when it is ahead. Each update takes
    ``1 / updates_per_second`` seconds (a sleep that stands for the loss and
    the optimiser step) and ``learner_cost`` more (an expensive learner):
    the slower it is, the further it falls behind its ratio. Its
    ``stats()`` counts ``updates`` and ``frames_sampled``, and once started
    its stage timing: ``wait_s`` waiting for frames, ``busy_s`` updating.
    Given ``updates``, the thread stops after that many, and
    :attr:`finished` is set.

    >>> buffer = RingBuffer(capacity=1000, seed=0)
    >>> consumer = Consumer(buffer, batch_size=32)
    >>> consumer.update()  # nothing to learn from yet
    False
    >>> buffer.extend(range(64))
    >>> consumer.update()
    True
    >>> consumer.stats()
    {'updates': 1, 'frames_sampled': 32}
    """

    def __init__(
        self,
        buffer: RingBuffer[int],
        *,
        batch_size: int = 256,
        updates_per_second: float = 100.0,
        frames_per_update: float = 80.0,
        learner_cost: float = 0.0,
        updates: int | None = None,
    ) -> None:
        _check_positive("updates_per_second", updates_per_second)
        _check_positive("frames_per_update", frames_per_update)
        check_cost("learner_cost", learner_cost)
        check_updates(updates)
        super().__init__(buffer, batch_size, "rlpulse-demo-consumer")
        self.frames_per_update = frames_per_update
        self._update_seconds = 1 / updates_per_second + learner_cost
        self._updates = 0
        self._updates_at_most = updates
        self._frames_sampled = 0
        self.finished = threading.Event()
        """Set once the consumer has made the ``updates`` it was to make."""

    @property
    def replay_ratio(self) -> float:
        """The samples per frame written it keeps to when it keeps up: ``batch_size / frames_per_update``.

        >>> Consumer(RingBuffer(capacity=10), batch_size=256, frames_per_update=80).replay_ratio
        3.2
        """
        return self.batch_size / self.frames_per_update

    def update(self) -> bool:
        """Sample one batch when the buffer holds enough frames; return whether it did.

        >>> Consumer(RingBuffer(capacity=10), batch_size=4).update()
        False
        """
        if len(self.buffer) < self.batch_size:
            return False
        batch = self.buffer.sample(self.batch_size)
        self._updates += 1
        self._frames_sampled += len(batch)
        if self._updates == self._updates_at_most:
            self.finished.set()
        return True

    def _run(self) -> None:
        # Waiting for frames and updating, timed apart: what tells a
        # collector-bound pipeline from a learner-bound one.
        # Each update is timed too (update_s): its distribution is what a
        # dashboard's learner panels and percentiles show.
        for _ in self.stages.waiting(self._updates_due()):
            with self.stages.busy(), self.stages.time("update_s"):
                self.update()
                self._stop_event.wait(self._update_seconds)
            if self.finished.is_set():
                return

    def _updates_due(self) -> Iterator[None]:
        """Yield once for each update the frames written allow, waiting for frames in between, until stopped."""
        due = 0
        while not self._stop_event.is_set():
            needed = max(self.batch_size, math.ceil((due + 1) * self.frames_per_update))
            if self.buffer.wait_for_writes(needed, timeout=_STOP_CHECK_S):
                due += 1
                yield

    def stats(self) -> dict[str, float]:
        """Return the updates made and frames sampled so far, and the stage timing and update times once started.

        >>> Consumer(RingBuffer(capacity=10)).stats()
        {'updates': 0, 'frames_sampled': 0}
        """
        return {
            "updates": self._updates,
            "frames_sampled": self._frames_sampled,
            **self.stages.stats(),
        }

    def histograms(self) -> dict[str, Histogram]:
        """The distribution of its update times (``update_s``), once it has updated: a monitor logs its quantiles.

        >>> Consumer(RingBuffer(capacity=10)).histograms()
        {}
        """
        return self.stages.histograms()


class SimulatedEpisodes:
    """Stand-in episodes whose return rises as a learner updates: what the synthetic collector plays.

    :meth:`advance` plays frames: each episode lasts about
    :meth:`expected_return` frames of the ``learner``'s updates when it
    starts (from half to one and a half times that, at random), and, as in
    CartPole, pays one point a frame. That expected return climbs from
    ``first_return`` towards ``best_return``, two thirds of the way after
    ``updates_to_learn`` updates: a learner made slower learns slower.
    Each finished episode's return is observed in ``tally`` (under
    ``"episode_return"``); ``stats()`` is the demo's episode view (see
    :func:`~rlpulse._demo.common.episode_stats`).

    >>> learner = Consumer(RingBuffer(capacity=10))
    >>> episodes = SimulatedEpisodes(learner, seed=0)
    >>> round(episodes.expected_return())
    20
    >>> episodes.advance(1000)
    >>> stats = episodes.stats()
    >>> stats["episodes"] > 10, 10 <= stats["episode_return_mean"] <= 30
    (True, True)
    """

    def __init__(
        self,
        learner: Consumer,
        *,
        tally: Tally | None = None,
        first_return: float = 20.0,
        best_return: float = 200.0,
        updates_to_learn: float = 500.0,
        seed: int | None = None,
    ) -> None:
        _check_positive("updates_to_learn", updates_to_learn)
        self.learner = learner
        self.tally = Tally(window=EPISODE_WINDOW) if tally is None else tally
        self.first_return = first_return
        self.best_return = best_return
        self.updates_to_learn = updates_to_learn
        self._random = random.Random(seed)
        self._frames_left = self._new_episode()
        self._length = self._frames_left

    def expected_return(self) -> float:
        """The mean return of an episode started now, after the learner's updates so far."""
        learned = 1 - math.exp(-self.learner.stats()["updates"] / self.updates_to_learn)
        return self.first_return + (self.best_return - self.first_return) * learned

    def advance(self, frames: int) -> None:
        """Play ``frames`` more frames, recording each episode that ends in them."""
        while frames >= self._frames_left:
            frames -= self._frames_left
            self.tally.observe(RETURN_KEY, self._length)
            self._frames_left = self._length = self._new_episode()
        self._frames_left -= frames

    def stats(self) -> dict[str, float]:
        """Return the episodes finished so far and the mean, smallest and largest return of the latest ones."""
        return episode_stats(self.tally)

    def _new_episode(self) -> int:
        return max(1, round(self.expected_return() * self._random.uniform(0.5, 1.5)))


def _check_batch_size(batch_size: int) -> None:
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size!r}")


def _check_positive(name: str, value: float) -> None:
    # Written so that NaN is refused too.
    if not value > 0:
        raise ValueError(f"{name} must be positive, got {value!r}")


class _SyntheticPipeline(DemoPipeline):
    """A producer filling a ring buffer that a consumer samples from, watched by one monitor."""

    def __init__(
        self,
        frames_per_second: float,
        poll_interval: float,
        env_cost: float = 0.0,
        learner_cost: float = 0.0,
        window: float | None = None,
        updates: int | None = None,
    ) -> None:
        self.buffer: RingBuffer[int] = RingBuffer(_BUFFER_CAPACITY)
        self.consumer = Consumer(
            self.buffer, learner_cost=learner_cost, updates=updates
        )
        self.updates = updates
        self.episodes = SimulatedEpisodes(self.consumer)
        self.producer = Producer(
            self.buffer,
            frames_per_second=frames_per_second,
            env_cost=env_cost,
            episodes=self.episodes,
        )
        self.frames_per_second = frames_per_second
        self.poll_interval = poll_interval
        self.window = window

    def drive(self, sinks: DemoSinks, seconds: float, stdout: TextIO) -> bool:
        window = verdict_window(seconds) if self.window is None else self.window
        monitor = self._monitor(sinks, window)
        try:
            self.producer.start()
            self.consumer.start()
            monitor.start()
            say(
                f"rlpulse demo: collector -> ring buffer -> learner "
                f"(~{format_number(self.frames_per_second)} frames/s) "
                f"for {demo_length(seconds, self.updates)}, monitored into "
                f"{sinks.describe()}; Ctrl-C stops early",
                stdout,
            )
            self.consumer.finished.wait(seconds)
        finally:
            # The pipeline stops first, so the final snapshots show where it ended.
            self.producer.stop()
            self.consumer.stop()
            monitor.stop()
        return False

    def frames(self) -> int:
        return int(self.producer.stats()["frames"])

    def updates_reached(self) -> int | None:
        return self.updates if self.consumer.finished.is_set() else None

    def _monitor(self, sinks: DemoSinks, window: float) -> LoggerMonitor:
        monitor = LoggerMonitor(sinks.all, poll_interval=self.poll_interval)
        monitor.watch(self.producer, name="collector", schedule=_COLLECTOR_SCHEDULE)
        monitor.watch(
            self.buffer, name="buffer", schedule=_BUFFER_SCHEDULE, step="write_count"
        )
        watch_learning(
            monitor,
            learner=self.consumer,
            episodes=self.episodes,
            buffer="buffer",
            target_ratio=self.consumer.replay_ratio,
            window=window,
        )
        return monitor


def run_demo(
    seconds: float = 30.0,
    out: str | os.PathLike[str] = DEFAULT_OUT,
    *,
    poll_interval: float = 0.25,
    frames_per_second: float = 4000.0,
    env_cost: float = 0.0,
    learner_cost: float = 0.0,
    window: float | None = None,
    output: DemoOutput | None = None,
    updates: int | None = None,
) -> DemoResult:
    """Drive the synthetic demo pipeline (standard library only) for ``seconds`` (or until the learner's ``updates``-th update), then print the summary of its run.

    A :class:`Producer` fills a :class:`RingBuffer` that a :class:`Consumer`
    samples from (each frame ``env_cost`` seconds of the producer's
    time, each update ``learner_cost`` of the consumer's, see
    :class:`Producer` and :class:`Consumer`), while a background
    :class:`~rlpulse.LoggerMonitor`
    (polling every ``poll_interval`` seconds) logs them as ``collector``
    (every 10,000 frames, and at least every 5 s), ``buffer`` (every second,
    at step ``write_count``), ``learner`` and ``episodes`` (every 2 s; the
    return rising with the learner's updates, see :class:`SimulatedEpisodes`),
    and every ``window`` seconds (:func:`~rlpulse._demo.common.verdict_window`
    of ``seconds`` unless given) the ``bottleneck`` verdict of the
    collector's and the learner's stage timing and the learner's replay
    ratio against its target, into a new run of the SQLite file ``out``,
    onto the console and into every extra sink of ``output`` (see
    :class:`~rlpulse._demo.common.DemoOutput`). A progress line, the run's
    summary, the chart (drawn next to ``out`` unless ``output.chart`` is
    false, when matplotlib is installed, see
    :func:`~rlpulse._demo.common.report`) and how to show the run again go
    to ``output.stdout``. Ctrl-C ends
    the demo early; the threads and the monitor are stopped and every sink
    the demo opened is closed either way, so every watch's final snapshot is
    recorded.

    >>> import io, tempfile, pathlib
    >>> from rlpulse.read.records import read
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     output = io.StringIO()
    ...     result = run_demo(0.3, pathlib.Path(tmp) / "demo.sqlite", output=DemoOutput(
    ...         chart=False, stdout=output, console=io.StringIO()))
    ...     final_frames = [r.value for r in read(result.path) if r.name == "collector/frames"][-1]
    >>> final_frames == result.frames > 0
    True
    >>> "rlpulse show" in output.getvalue()
    True
    """
    pipeline = _SyntheticPipeline(
        frames_per_second, poll_interval, env_cost, learner_cost, window, updates
    )
    return record_demo(pipeline, seconds, out, output)
