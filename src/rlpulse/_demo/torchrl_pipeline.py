"""The TorchRL pipeline of ``rlpulse demo``: CartPole, a collector, a replay buffer and a learner, monitored.

Needs TorchRL and gymnasium (extra ``rlpulse[torchrl]``), imported here only,
never by ``import rlpulse``.

:func:`run_torchrl_demo` runs, in one process:

- a TorchRL ``Collector`` stepping gymnasium's ``CartPole-v1`` with a random
  policy, from its own thread (``collector.start()``), writing every batch
  into
- a TorchRL ``ReplayBuffer``, from which
- a :class:`DQNLearner` samples batches in the main thread and fits a small
  Q-network to them with TorchRL's ``DQNLoss``;
- an :class:`~rlpulse.sources.torchrl.EpisodeTally`, the collector's
  ``post_collect_hook``, records every finished episode's return in a
  :class:`~rlpulse.Tally`.

A background :class:`~rlpulse.LoggerMonitor` watches all four, as in the
README's quickstart, into the SQLite store, the console and any extra sinks.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, TextIO

import torch
from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.envs import GymEnv
from torchrl.modules import MLP, QValueActor
from torchrl.objectives import DQNLoss, SoftUpdate

from rlpulse._demo.common import (
    DEFAULT_OUT,
    DemoPipeline,
    DemoResult,
    DemoSinks,
    record_demo,
)
from rlpulse.monitor import LoggerMonitor
from rlpulse.read.summary import format_duration, format_number
from rlpulse.schedules import Every
from rlpulse.sources.tally import Tally
from rlpulse.sources.torchrl import EpisodeTally

__all__ = ["ENV_NAME", "DQNLearner", "episode_stats", "run_torchrl_demo"]

ENV_NAME = "CartPole-v1"
"""The gymnasium environment the demo collects from."""

_RETURN_KEY = "episode_return"


class DQNLearner:
    """A small learner: fits a Q-network to batches sampled from a TorchRL replay buffer with ``DQNLoss``.

    Each :meth:`update` samples one batch of ``batch_size`` transitions and
    takes one Adam step on TorchRL's DQN loss, then moves the target network
    a little towards the trained one (``SoftUpdate``). It updates only once
    the buffer holds ``warmup_frames`` transitions, and at most once per
    ``frames_per_update`` frames written to the buffer, so that a learner in
    the main thread leaves the collector's thread its share of the
    interpreter. Its ``stats()`` counts ``updates`` and ``frames_sampled``
    and gives ``loss_mean``, the mean loss of the last 100 updates.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> from torchrl.data import LazyTensorStorage, OneHot, ReplayBuffer
    >>> buffer = ReplayBuffer(storage=LazyTensorStorage(100))
    >>> learner = DQNLearner(buffer, OneHot(2), observation_size=4,
    ...                      batch_size=8, warmup_frames=8, frames_per_update=1)
    >>> learner.update()  # nothing to learn from yet
    False
    >>> def step(n):
    ...     return TensorDict({
    ...         "observation": torch.zeros(n, 4),
    ...         "action": torch.nn.functional.one_hot(torch.zeros(n, dtype=torch.long), 2),
    ...         "next": {"observation": torch.zeros(n, 4), "reward": torch.ones(n, 1),
    ...                  "done": torch.zeros(n, 1, dtype=torch.bool),
    ...                  "terminated": torch.zeros(n, 1, dtype=torch.bool)},
    ...     }, batch_size=[n])
    >>> _ = buffer.extend(step(16))
    >>> learner.update()
    True
    >>> stats = learner.stats()
    >>> stats["updates"], stats["frames_sampled"], stats["loss_mean"] > 0
    (1, 8, True)
    """

    def __init__(
        self,
        buffer: ReplayBuffer,
        action_spec: Any,
        *,
        observation_size: int,
        batch_size: int = 128,
        warmup_frames: int = 1_000,
        frames_per_update: float = 32.0,
        learning_rate: float = 1e-3,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size!r}")
        if not frames_per_update > 0:
            raise ValueError(
                f"frames_per_update must be positive, got {frames_per_update!r}"
            )
        self.buffer = buffer
        self.batch_size = batch_size
        self.warmup_frames = max(warmup_frames, batch_size)
        self.frames_per_update = frames_per_update
        q_network = MLP(
            in_features=observation_size,
            out_features=action_spec.space.n,
            num_cells=[64, 64],
        )
        value_network = QValueActor(
            q_network, in_keys=["observation"], spec=action_spec
        )
        self.loss = DQNLoss(value_network, action_space=action_spec, delay_value=True)
        self.loss.make_value_estimator(gamma=0.99)
        self.target_update = SoftUpdate(self.loss, eps=0.99)
        self.optimizer = torch.optim.Adam(self.loss.parameters(), lr=learning_rate)
        self._tally = Tally(window=100)

    def update(self) -> bool:
        """Take one training step when the buffer allows it; return whether it did."""
        written = self.buffer.write_count
        updates = self._tally.stats().get("updates", 0)
        if written < self.warmup_frames or updates >= written / self.frames_per_update:
            return False
        batch = self.buffer.sample(self.batch_size)
        loss = self.loss(batch)["loss"]
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.target_update.step()
        self._tally.inc("updates")
        self._tally.inc("frames_sampled", batch.numel())
        self._tally.observe("loss", loss.item())
        return True

    def stats(self) -> dict[str, float]:
        """Return the updates made, the frames sampled and the recent mean loss.

        ``loss_mean`` is absent before the first update.
        """
        stats = self._tally.stats()
        snapshot = {
            "updates": stats.get("updates", 0),
            "frames_sampled": stats.get("frames_sampled", 0),
        }
        if "loss_mean" in stats:
            snapshot["loss_mean"] = stats["loss_mean"]
        return snapshot


def episode_stats(tally: Tally) -> dict[str, float]:
    """Return the episode view of an :class:`~rlpulse.sources.torchrl.EpisodeTally`'s tally.

    ``episodes`` finished so far and the mean, smallest and largest return
    of the latest ones: the demo's ``episodes`` watch. CartPole pays one
    point per step, so an episode's length equals its return and is left
    out.

    >>> tally = Tally()
    >>> for episode_return in (12.0, 30.0):
    ...     tally.observe("episode_return", episode_return)
    ...     tally.observe("episode_length", episode_return)
    >>> episode_stats(tally)
    {'episodes': 2, 'episode_return_mean': 21.0, 'episode_return_min': 12.0, 'episode_return_max': 30.0}
    """
    stats = tally.stats()
    view = {"episodes": stats.get(f"{_RETURN_KEY}_count", 0)}
    for part in ("mean", "min", "max"):
        key = f"{_RETURN_KEY}_{part}"
        if key in stats:
            view[key] = stats[key]
    return view


def run_torchrl_demo(
    seconds: float = 30.0,
    out: str | os.PathLike[str] = DEFAULT_OUT,
    *,
    sinks: Sequence[str] = (),
    frames_per_batch: int = 200,
    collector_every: int = 10_000,
    buffer_every: float = 5.0,
    poll_interval: float = 1.0,
    buffer_capacity: int = 100_000,
    batch_size: int = 128,
    warmup_frames: int = 1_000,
    frames_per_update: float = 32.0,
    progress_every: float = 5.0,
    chart: bool = True,
    stdout: TextIO | None = None,
    console: TextIO | None = None,
) -> DemoResult:
    """Drive the monitored TorchRL pipeline for ``seconds``, then print the summary of its run and draw it.

    A ``Collector`` on ``CartPole-v1`` (random policy, ``frames_per_batch``
    frames a batch) fills a ``ReplayBuffer`` of ``buffer_capacity``
    transitions from its own thread; a :class:`DQNLearner` trains on it in
    this thread; an ``EpisodeTally`` records episode returns. A background
    :class:`~rlpulse.LoggerMonitor` polling every ``poll_interval`` seconds
    logs:

    - ``collector`` every ``collector_every`` frames and at least every 5 s
      (``Every.counter("frames", collector_every) | Every.seconds(5)``), at
      step ``frames``;
    - ``replay_buffer`` every ``buffer_every`` seconds, at step ``write_count``;
    - ``episodes`` (see :func:`episode_stats`) and ``learner`` every 2 s;

    into a new run of the SQLite file ``out``, onto ``console`` (standard
    error by default) and into every extra sink opened from the ``sinks``
    specs (see :class:`~rlpulse._demo.common.DemoSinks`). A line every
    ``progress_every`` seconds, then the run's summary and its chart (next to
    ``out``, see :func:`rlpulse._demo.common.report`) go to ``stdout``. Ctrl-C
    ends the demo early; the collector, the monitor and every sink are
    stopped either way, so each watch's final snapshot is recorded.

    While it runs, torch uses one thread per operation and TorchRL's logger
    shows warnings only (both restored after): the collector's thread and
    the learner share the cores, and torch's own worker threads would spin
    against each other.

    >>> import io, tempfile, pathlib
    >>> from rlpulse import read
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     result = run_torchrl_demo(
    ...         1.0, pathlib.Path(tmp) / "demo.sqlite", frames_per_batch=50,
    ...         collector_every=100, chart=False, stdout=io.StringIO(),
    ...         console=io.StringIO())
    ...     frames = [r.value for r in read(result.path) if r.name == "collector/frames"]
    >>> frames[-1] == result.frames > 0
    True
    """
    pipeline = _TorchRLPipeline(
        frames_per_batch=frames_per_batch,
        collector_every=collector_every,
        buffer_every=buffer_every,
        poll_interval=poll_interval,
        buffer_capacity=buffer_capacity,
        batch_size=batch_size,
        warmup_frames=warmup_frames,
        frames_per_update=frames_per_update,
        progress_every=progress_every,
    )
    return record_demo(
        pipeline,
        seconds,
        out,
        sinks=sinks,
        chart=chart,
        stdout=stdout,
        console=console,
    )


@dataclass(frozen=True)
class _Parts:
    """The four parts of the TorchRL pipeline, once built."""

    collector: Collector
    buffer: ReplayBuffer
    episodes: Tally
    learner: DQNLearner


@dataclass
class _TorchRLPipeline(DemoPipeline):
    """The settings of the TorchRL pipeline and, once driven, its collector."""

    frames_per_batch: int
    collector_every: int
    buffer_every: float
    poll_interval: float
    buffer_capacity: int
    batch_size: int
    warmup_frames: int
    frames_per_update: float
    progress_every: float
    collector: Collector | None = field(default=None, init=False)

    def drive(self, sinks: DemoSinks, seconds: float, stdout: TextIO) -> bool:
        deadline = time.monotonic() + seconds
        with _torch_quietly():
            parts = self._build()
            self.collector = parts.collector
            with LoggerMonitor(sinks.all, poll_interval=self.poll_interval) as monitor:
                self._watch(monitor, parts)
                print(
                    f"rlpulse demo: TorchRL Collector on {ENV_NAME} (random policy) "
                    f"-> ReplayBuffer -> DQN learner for {format_duration(seconds)}, "
                    f"monitored into {sinks.describe()}; Ctrl-C stops early",
                    file=stdout,
                    flush=True,
                )
                parts.collector.start()
                try:
                    with _ctrl_c_stops() as stop:
                        _train(parts, deadline, self.progress_every, stdout, stop)
                    return stop.is_set()
                finally:
                    # The pipeline stops first, so the final snapshots (logged
                    # as the monitor stops) show where it ended.
                    parts.collector.async_shutdown(timeout=10)

    def frames(self) -> int:
        if self.collector is None:
            return 0
        return int(self.collector.stats().get("frames", 0))

    def _build(self) -> _Parts:
        env = GymEnv(ENV_NAME)
        buffer = ReplayBuffer(
            storage=LazyTensorStorage(self.buffer_capacity), batch_size=self.batch_size
        )
        episodes = Tally()
        collector = Collector(
            env,
            None,
            frames_per_batch=self.frames_per_batch,
            total_frames=-1,
            replay_buffer=buffer,
            post_collect_hook=EpisodeTally(episodes, return_key=_RETURN_KEY),
        )
        learner = DQNLearner(
            buffer,
            env.action_spec,
            observation_size=env.observation_spec["observation"].shape[-1],
            batch_size=self.batch_size,
            warmup_frames=self.warmup_frames,
            frames_per_update=self.frames_per_update,
        )
        return _Parts(collector, buffer, episodes, learner)

    def _watch(self, monitor: LoggerMonitor, parts: _Parts) -> None:
        monitor.watch(
            parts.collector,
            name="collector",
            # Every collector_every frames, and at least every 5 s however
            # slowly the machine collects.
            schedule=Every.counter("frames", self.collector_every) | Every.seconds(5),
        )
        monitor.watch(
            parts.buffer,
            name="replay_buffer",
            schedule=Every.seconds(self.buffer_every),
            step="write_count",
        )
        monitor.watch(
            parts.episodes,
            name="episodes",
            stats_fn=functools.partial(episode_stats, parts.episodes),
            schedule=Every.seconds(2),
            step="episodes",
            rate_keys=("episodes",),
        )
        monitor.watch(
            parts.learner,
            name="learner",
            schedule=Every.seconds(2),
            step="updates",
            rate_keys=("updates", "frames_sampled"),
        )
        # What monitoring costs: monitor/cpu_s_per_second, a share of a core.
        monitor.watch(
            monitor, name="monitor", schedule=Every.seconds(2), rate_keys=("cpu_s",)
        )


@contextlib.contextmanager
def _torch_quietly() -> Iterator[None]:
    """One torch thread per operation, TorchRL's logger at warnings only; both restored after."""
    torch_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    # TorchRL announces set-up steps (a storage's first allocation) at INFO
    # level on standard output, between the demo's own lines.
    torchrl_logger = logging.getLogger("torchrl")
    torchrl_level = torchrl_logger.level
    torchrl_logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        torchrl_logger.setLevel(torchrl_level)
        torch.set_num_threads(torch_threads)


@contextlib.contextmanager
def _ctrl_c_stops() -> Iterator[threading.Event]:
    # The first Ctrl-C asks the training loop to stop at its next step
    # rather than raising KeyboardInterrupt wherever the main thread is:
    # inside torch or tensordict, that can surface as another error. A
    # second Ctrl-C interrupts at once.
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def request_stop(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = signal.signal(signal.SIGINT, request_stop)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)


def _train(
    parts: _Parts,
    deadline: float,
    progress_every: float,
    stdout: TextIO,
    stop: threading.Event,
) -> None:
    started = time.monotonic()
    next_progress = started + progress_every
    while (now := time.monotonic()) < deadline and not stop.is_set():
        if not parts.collector.is_running():
            raise RuntimeError(
                "TorchRL's collector thread stopped on its own; its error is "
                "printed above"
            )
        if not parts.learner.update():
            time.sleep(0.005)
        if now >= next_progress:
            next_progress += progress_every
            print(_progress(now - started, parts), file=stdout)


def _progress(elapsed: float, parts: _Parts) -> str:
    frames = parts.collector.stats().get("frames", 0)
    learned = parts.learner.stats()
    watched = episode_stats(parts.episodes)
    line = (
        f"  {format_duration(elapsed):>7}  {format_number(frames)} frames "
        f"({format_number(frames / elapsed)}/s), {format_number(watched['episodes'])} "
        f"episodes"
    )
    if "episode_return_mean" in watched:
        line += f" (mean return {watched['episode_return_mean']:.1f})"
    line += f", {format_number(learned['updates'])} updates"
    if "loss_mean" in learned:
        line += f" (loss {learned['loss_mean']:.3g})"
    return line
