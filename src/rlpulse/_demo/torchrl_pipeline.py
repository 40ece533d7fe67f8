"""The TorchRL pipeline of ``rlpulse demo``: CartPole, a collector, a replay buffer and a learner, monitored.

Needs TorchRL and gymnasium (extra ``rlpulse[torchrl]``), imported here only,
never by ``import rlpulse``.

:func:`run_torchrl_demo` runs, in one process:

- a TorchRL ``Collector`` stepping gymnasium's ``CartPole-v1`` from its own
  thread (``collector.start()``) with the learner's epsilon-greedy policy,
  writing every batch into
- a TorchRL ``ReplayBuffer``, from which
- a :class:`DQNLearner` samples batches in the main thread
  (:func:`sampled_batches`) and trains its Q-network on them with TorchRL's
  ``DQNLoss`` and a target network; after each batch the collector writes,
  the collector's copy of the policy takes the learner's weights
  (``collector.update_policy_weights_``), so the episode return rises as
  the learner learns;
- an :class:`~rlpulse.sources.torchrl.EpisodeTally`, the collector's
  ``post_collect_hook``, records every finished episode's return in a
  :class:`~rlpulse.Tally`.

``env_cost`` and ``learner_cost`` make an environment step or an update
that much slower (a sleep), to show a pipeline held back by its collector
or by its learner.

A background :class:`~rlpulse.LoggerMonitor` watches all four, as in the
README's quickstart, into the SQLite store, the console and any extra
sinks, and judges which side holds the pipeline back
(:meth:`~rlpulse.LoggerMonitor.bottleneck`): from the learner's stage
timing (waiting for a batch, updating), the collector's (:class:`CollectorTiming`)
and the samples drawn per frame (:class:`~rlpulse.sources.torchrl.SampleCounter`)
against the learner's replay ratio.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, TextIO

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictSequential
from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.envs import EnvBase, GymEnv, TransformedEnv
from torchrl.envs.transforms import Transform
from torchrl.modules import MLP, EGreedyModule, QValueActor
from torchrl.objectives import DQNLoss, SoftUpdate

from rlpulse._demo import common
from rlpulse.distributions import Histogram
from rlpulse.monitor import LoggerMonitor
from rlpulse.naming import Kind
from rlpulse.read.summary import format_duration, format_number
from rlpulse.schedules import Every
from rlpulse.sources.tally import Tally
from rlpulse.sources.torchrl import EpisodeTally, SampleCounter

__all__ = [
    "ENV_NAME",
    "CollectorTiming",
    "DQNLearner",
    "StepCost",
    "TorchRLSettings",
    "run_torchrl_demo",
    "sampled_batches",
]

ENV_NAME = "CartPole-v1"
"""The gymnasium environment the demo collects from."""


class DQNLearner:
    """A small DQN learner: a Q-network trained with TorchRL's ``DQNLoss``, and the epsilon-greedy policy that acts with it.

    :attr:`policy` is what a collector acts with: TorchRL's ``QValueActor``
    (the action of the highest Q-value) followed by an ``EGreedyModule``
    that picks a random action instead with probability ``epsilon``, which
    falls from ``eps_init`` to ``eps_end`` over ``annealing_frames`` frames
    as :meth:`explore_less` is told of them. Each :meth:`update` takes one
    Adam step of TorchRL's DQN loss on a batch of transitions, against a
    target network that follows the trained one slowly (``SoftUpdate``,
    ``target_tau`` of the way each update), then spends ``cost`` seconds
    more (a sleep: a learner made expensive on purpose). :attr:`weights`
    are the policy's parameters and buffers (``epsilon`` included), as a
    collector's ``update_policy_weights_`` takes them. Its ``stats()``
    counts ``updates`` and ``frames_sampled`` and gives ``epsilon`` and
    ``loss_mean``, the mean loss of the last 100 updates, and the stage
    timing the training loop records in :attr:`stages` (``wait_s`` waiting
    for a batch with ``stages.waiting()``, ``busy_s`` updating with
    ``stages.busy()``) and each update's seconds (``update_s``, whose
    distribution :meth:`histograms` gives).

    >>> import torch
    >>> from tensordict import TensorDict
    >>> from torchrl.data import OneHot
    >>> learner = DQNLearner(OneHot(2), observation_size=4, annealing_frames=100)
    >>> batch = TensorDict({
    ...     "observation": torch.zeros(8, 4),
    ...     "action": torch.nn.functional.one_hot(torch.zeros(8, dtype=torch.long), 2),
    ...     "next": {"observation": torch.zeros(8, 4), "reward": torch.ones(8, 1),
    ...              "done": torch.zeros(8, 1, dtype=torch.bool),
    ...              "terminated": torch.zeros(8, 1, dtype=torch.bool)},
    ... }, batch_size=[8])
    >>> learner.update(batch) > 0
    True
    >>> learner.explore_less(50)
    >>> stats = learner.stats()
    >>> stats["updates"], stats["frames_sampled"], round(stats["epsilon"], 3)
    (1, 8, 0.525)
    """

    def __init__(
        self,
        action_spec: Any,
        *,
        observation_size: int,
        num_cells: Sequence[int] = (64, 64),
        learning_rate: float = 2.5e-3,
        gamma: float = 0.99,
        target_tau: float = 0.01,
        eps_init: float = 1.0,
        eps_end: float = 0.05,
        annealing_frames: int = 10_000,
        cost: float = 0.0,
    ) -> None:
        common.check_cost("cost", cost)
        self.cost = cost
        self.q_network = QValueActor(
            MLP(
                in_features=observation_size,
                out_features=action_spec.space.n,
                num_cells=list(num_cells),
            ),
            in_keys=["observation"],
            spec=action_spec,
        )
        self.exploration = EGreedyModule(
            action_spec,
            eps_init=eps_init,
            eps_end=eps_end,
            annealing_num_steps=annealing_frames,
        )
        self.policy = TensorDictSequential(self.q_network, self.exploration)
        self.weights = TensorDict.from_module(self.policy)
        self.loss = DQNLoss(self.q_network, action_space=action_spec, delay_value=True)
        self.loss.make_value_estimator(gamma=gamma)
        self.target_update = SoftUpdate(self.loss, tau=target_tau)
        self.optimizer = torch.optim.Adam(self.loss.parameters(), lr=learning_rate)
        self.stages = Tally()
        self._tally = Tally(window=100)

    def update(self, batch: TensorDictBase) -> float:
        """Take one training step on ``batch``, timed as ``update_s``; return its loss."""
        with self.stages.time("update_s"):
            loss = self.loss(batch)["loss"]
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            self.target_update.step()
            if self.cost:
                time.sleep(self.cost)
        value = float(loss.item())
        self._tally.inc("updates")
        self._tally.inc("frames_sampled", batch.numel())
        self._tally.observe("loss", value)
        return value

    def explore_less(self, frames: int) -> None:
        """Lower ``epsilon`` by its share of ``frames`` more frames collected."""
        self.exploration.step(frames)

    def stats(self) -> dict[str, float]:
        """Return the updates made, the frames sampled, the exploration rate, the recent mean loss and the stage timing.

        ``loss_mean`` is absent before the first update, ``wait_s`` and
        ``busy_s`` before the training loop records them.
        """
        stats = self._tally.stats()
        snapshot = {
            "updates": stats.get("updates", 0),
            "frames_sampled": stats.get("frames_sampled", 0),
            "epsilon": float(self.exploration.eps),
        }
        if "loss_mean" in stats:
            snapshot["loss_mean"] = stats["loss_mean"]
        snapshot.update(self.stages.stats())
        return snapshot

    def metric_kinds(self) -> dict[str, Kind]:
        """The counters among :meth:`stats`: ``updates``, ``frames_sampled`` and the stage timing's."""
        return {
            "updates": Kind.COUNTER,
            "frames_sampled": Kind.COUNTER,
            **self.stages.metric_kinds(),
        }

    def histograms(self) -> dict[str, Histogram]:
        """The distribution of its update times (``update_s``), once it has updated: a monitor logs its quantiles."""
        return self.stages.histograms()


def sampled_batches(
    buffer: ReplayBuffer,
    batch_size: int,
    *,
    warmup_frames: int,
    frames_per_update: float,
    running: Callable[[], bool],
    poll_interval: float = 0.005,
) -> Iterator[TensorDictBase]:
    """Yield batches of ``batch_size`` transitions sampled from ``buffer``, each once its writes allow it, while ``running()``.

    The first batch comes once the buffer holds ``warmup_frames``
    transitions, then one for every ``frames_per_update`` frames written: a
    replay ratio of ``batch_size / frames_per_update`` samples per frame.
    A learner faster than its collector waits here for data, checking
    every ``poll_interval`` seconds; a slower one finds its next batch at
    once.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> from torchrl.data import LazyTensorStorage, ReplayBuffer
    >>> buffer = ReplayBuffer(storage=LazyTensorStorage(100))
    >>> _ = buffer.extend(TensorDict({"x": torch.arange(40)}, batch_size=[40]))
    >>> checks = iter([True] * 10 + [False])
    >>> batches = sampled_batches(buffer, 4, warmup_frames=20, frames_per_update=10,
    ...                           running=lambda: next(checks))
    >>> [batch.numel() for batch in batches]  # 40 frames written: 4 batches
    [4, 4, 4, 4]
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size!r}")
    if not frames_per_update > 0:
        raise ValueError(
            f"frames_per_update must be positive, got {frames_per_update!r}"
        )
    warmup_frames = max(warmup_frames, batch_size)
    sampled = 0
    while running():
        written = buffer.write_count
        if written >= warmup_frames and sampled < written / frames_per_update:
            sampled += 1
            yield buffer.sample(batch_size)
        else:
            time.sleep(poll_interval)


class CollectorTiming:
    """A collector's stage timing through its hooks: the seconds it spends collecting each batch, as ``busy_s`` in :attr:`stages`.

    Pass :meth:`before` as the collector's ``pre_collect_hook`` and
    :meth:`after` as its ``post_collect_hook``; :meth:`after` then calls
    ``then`` (another hook, such as an
    :class:`~rlpulse.sources.torchrl.EpisodeTally`) with the batch. A
    collector started with ``collector.start()`` never waits for the
    learner: between two batches it only writes the replay buffer, so it
    records no ``wait_s`` and its busy share is close to 1.

    >>> from torchrl.envs.utils import RandomPolicy
    >>> env = GymEnv(ENV_NAME)
    >>> timing = CollectorTiming()
    >>> collector = Collector(env, RandomPolicy(env.action_spec), frames_per_batch=20,
    ...                       total_frames=40, pre_collect_hook=timing.before,
    ...                       post_collect_hook=timing.after)
    >>> batches = [batch.numel() for batch in collector]
    >>> batches, timing.stages.stats()["busy_s"] > 0
    ([20, 20], True)
    >>> collector.shutdown()
    """

    def __init__(self, then: Callable[[TensorDictBase], object] | None = None) -> None:
        self.stages = Tally()
        self._then = then
        self._timer = self.stages.busy()

    def before(self) -> None:
        """The ``pre_collect_hook``: a batch's collection starts."""
        self._timer.__enter__()

    def after(self, batch: TensorDictBase) -> None:
        """The ``post_collect_hook``: ``batch`` is collected; then ``then``, if any."""
        self._timer.__exit__(None, None, None)
        if self._then is not None:
            self._then(batch)


class StepCost(Transform):  # type: ignore[misc]
    """An environment transform that makes every step ``seconds`` slower (a sleep): an expensive environment.

    >>> env = TransformedEnv(GymEnv(ENV_NAME), StepCost(0.01))
    >>> started = time.monotonic()
    >>> _ = env.rollout(5, break_when_any_done=False)
    >>> time.monotonic() - started >= 0.05
    True
    """

    def __init__(self, seconds: float) -> None:
        common.check_cost("seconds", seconds)
        super().__init__(in_keys=[], out_keys=[])
        self.seconds = seconds

    def _step(
        self, tensordict: TensorDictBase, next_tensordict: TensorDictBase
    ) -> TensorDictBase:
        time.sleep(self.seconds)
        return next_tensordict

    def __repr__(self) -> str:
        return f"{type(self).__name__}(seconds={self.seconds!r})"


@dataclass(frozen=True)
class TorchRLSettings:
    """The TorchRL demo's settings: its pipeline's sizes, costs, schedules and seed; :func:`run_torchrl_demo` says what each does.

    >>> TorchRLSettings(learner_cost=0.05).batch_size
    64
    >>> TorchRLSettings(env_cost=-1)
    Traceback (most recent call last):
    ...
    ValueError: env_cost must be a finite number of seconds, zero or more, got -1
    """

    env_cost: float = 0.0
    learner_cost: float = 0.0
    frames_per_batch: int = 50
    collector_every: int = 10_000
    buffer_every: float = 5.0
    poll_interval: float = 1.0
    buffer_capacity: int = 100_000
    batch_size: int = 64
    warmup_frames: int = 1_000
    frames_per_update: float = 4.0
    annealing_frames: int = 10_000
    seed: int | None = 0
    progress_every: float = 5.0
    window: float | None = None
    updates: int | None = None

    def __post_init__(self) -> None:
        common.check_cost("env_cost", self.env_cost)
        common.check_cost("learner_cost", self.learner_cost)
        common.check_updates(self.updates)


def run_torchrl_demo(
    seconds: float = 30.0,
    out: str | os.PathLike[str] = common.DEFAULT_OUT,
    *,
    settings: TorchRLSettings | None = None,
    output: common.DemoOutput | None = None,
) -> common.DemoResult:
    """Drive the monitored TorchRL pipeline for ``seconds``, then print the summary of its run and draw it.

    Each name below is one of ``settings`` (a :class:`TorchRLSettings`,
    its defaults when ``None``). A ``Collector`` on ``CartPole-v1`` (``frames_per_batch`` frames a
    batch; each step ``env_cost`` seconds slower, see :class:`StepCost`)
    fills a ``ReplayBuffer`` of ``buffer_capacity`` transitions from its own
    thread, acting with the epsilon-greedy policy of a :class:`DQNLearner`
    (epsilon from 1 to 0.05 over ``annealing_frames`` frames). The learner
    trains in this thread on batches of ``batch_size`` (see
    :func:`sampled_batches`: after ``warmup_frames``, one per
    ``frames_per_update`` frames written), each update ``learner_cost``
    seconds slower; after each batch the collector writes, the collector's
    policy takes the learner's weights (``update_policy_weights_``). An
    ``EpisodeTally`` records episode returns. ``seed`` seeds torch and the
    environment (``None``: unseeded); the collector's thread makes a run
    vary a little all the same. Given ``updates``, the demo ends after the
    learner's ``updates``-th update if that comes before ``seconds``: how
    much the policy has learned then depends on the updates, not on how
    fast the machine is. A background
    :class:`~rlpulse.LoggerMonitor` polling every ``poll_interval`` seconds
    logs:

    - ``collector`` every ``collector_every`` frames and at least every 5 s
      (``Every.counter("frames", collector_every) | Every.seconds(5)``), at
      step ``frames``;
    - ``replay_buffer`` every ``buffer_every`` seconds, at step
      ``write_count``, with the samples drawn from it
      (:class:`~rlpulse.sources.torchrl.SampleCounter`);
    - ``episodes`` (see :func:`episode_stats`) and ``learner`` every 2 s;
    - ``bottleneck`` every ``window`` seconds
      (:func:`~rlpulse._demo.common.verdict_window` of ``seconds`` unless
      given): which side holds the pipeline back, from the learner's stage
      timing (``wait_s`` in :func:`sampled_batches`, ``busy_s`` updating),
      the collector's (``busy_s``, see :class:`CollectorTiming`) and the
      samples drawn per frame against ``batch_size / frames_per_update``;

    into a new run of the SQLite file ``out``, onto the console and into
    every extra sink of ``output`` (see
    :class:`~rlpulse._demo.common.DemoOutput`). A line every
    ``progress_every`` seconds, then the run's summary and its chart (next to
    ``out``, see :func:`rlpulse._demo.common.report`) go to
    ``output.stdout``. Ctrl-C
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
    ...         1.0, pathlib.Path(tmp) / "demo.sqlite",
    ...         settings=TorchRLSettings(frames_per_batch=50, collector_every=100),
    ...         output=common.DemoOutput(chart=False, stdout=io.StringIO(),
    ...                                  console=io.StringIO()))
    ...     frames = [r.value for r in read(result.path) if r.name == "collector/frames"]
    >>> frames[-1] == result.frames > 0
    True
    """
    pipeline = _TorchRLPipeline(TorchRLSettings() if settings is None else settings)
    return common.record_demo(pipeline, seconds, out, output)


@dataclass(frozen=True)
class _Parts:
    """The four parts of the TorchRL pipeline, once built, and what counts and times them."""

    collector: Collector
    buffer: ReplayBuffer
    episodes: Tally
    learner: DQNLearner
    samples: SampleCounter
    collecting: CollectorTiming


@dataclass
class _TorchRLPipeline(common.DemoPipeline):
    """The TorchRL pipeline: its settings and, once driven, its collector."""

    settings: TorchRLSettings
    collector: Collector | None = field(default=None, init=False)
    reached: bool = field(default=False, init=False)

    def drive(self, sinks: common.DemoSinks, seconds: float, stdout: TextIO) -> bool:
        deadline = time.monotonic() + seconds
        with _torch_quietly():
            parts = self._build()
            self.collector = parts.collector
            with LoggerMonitor(
                sinks.all, poll_interval=self.settings.poll_interval
            ) as monitor:
                self._watch(monitor, parts, seconds)
                common.say(
                    f"rlpulse demo: TorchRL Collector on {ENV_NAME} "
                    f"(epsilon-greedy from the learner's Q-network{self._costs()}) "
                    f"-> ReplayBuffer -> DQN learner for {common.demo_length(seconds, self.settings.updates)}, "
                    f"monitored into {sinks.describe()}; Ctrl-C stops early",
                    stdout,
                )
                parts.collector.start()
                try:
                    with _ctrl_c_stops() as stop:
                        clock = _TrainingClock(
                            parts, deadline, self.settings.progress_every, stdout, stop
                        )
                        self._train(parts, clock)
                    return stop.is_set()
                finally:
                    # The pipeline stops first, so the final snapshots (logged
                    # as the monitor stops) show where it ended.
                    parts.collector.async_shutdown(timeout=10)

    def updates_reached(self) -> int | None:
        return self.settings.updates if self.reached else None

    def frames(self) -> int:
        if self.collector is None:
            return 0
        return int(self.collector.stats().get("frames", 0))

    def _costs(self) -> str:
        costs = [
            f"{what} +{cost * 1000:g} ms"
            for what, cost in (
                ("each env step", self.settings.env_cost),
                ("each update", self.settings.learner_cost),
            )
            if cost
        ]
        return "".join(f"; {cost}" for cost in costs)

    def _build(self) -> _Parts:
        settings = self.settings
        if settings.seed is not None:
            torch.manual_seed(settings.seed)
        env: EnvBase = GymEnv(ENV_NAME)
        if settings.env_cost:
            env = TransformedEnv(env, StepCost(settings.env_cost))
        if settings.seed is not None:
            env.set_seed(settings.seed)
        buffer = ReplayBuffer(storage=LazyTensorStorage(settings.buffer_capacity))
        learner = DQNLearner(
            env.action_spec,
            observation_size=env.observation_spec["observation"].shape[-1],
            annealing_frames=settings.annealing_frames,
            cost=settings.learner_cost,
        )
        episodes = Tally(window=common.EPISODE_WINDOW)
        collecting = CollectorTiming(
            EpisodeTally(episodes, return_key=common.RETURN_KEY)
        )
        collector = Collector(
            env,
            # The collector acts with a copy of the learner's policy, which
            # takes the learner's weights when the training loop hands them
            # over, as it would in another process or on another device.
            copy.deepcopy(learner.policy),
            frames_per_batch=settings.frames_per_batch,
            total_frames=-1,
            replay_buffer=buffer,
            pre_collect_hook=collecting.before,
            post_collect_hook=collecting.after,
            # The policy keeps no state between steps: no transform to add.
            auto_register_policy_transforms=False,
        )
        return _Parts(
            collector, buffer, episodes, learner, SampleCounter(buffer), collecting
        )

    def _train(self, parts: _Parts, clock: _TrainingClock) -> None:
        settings = self.settings
        learner, collector = parts.learner, parts.collector
        handed_over = 0
        batches = sampled_batches(
            parts.buffer,
            settings.batch_size,
            warmup_frames=settings.warmup_frames,
            frames_per_update=settings.frames_per_update,
            running=clock.running,
        )
        # The learner waits for data in this loop's iteration and is busy in
        # its body: two places, timed apart, tell a collector-bound pipeline
        # from a learner-bound one.
        for updates, batch in enumerate(learner.stages.waiting(batches), start=1):
            with learner.stages.busy():
                learner.update(batch)
                written = parts.buffer.write_count
                if written - handed_over >= settings.frames_per_batch:
                    # Once per batch collected, as TorchRL's DQN examples do.
                    learner.explore_less(written - handed_over)
                    collector.update_policy_weights_(learner.weights)
                    handed_over = written
            if updates == settings.updates:
                self.reached = True
                return

    def _watch(self, monitor: LoggerMonitor, parts: _Parts, seconds: float) -> None:
        settings = self.settings
        monitor.watch(
            parts.collector,
            name="collector",
            stats_fn=functools.partial(_collector_stats, parts),
            # Every collector_every frames, and at least every 5 s however
            # slowly the machine collects.
            schedule=Every.counter("frames", settings.collector_every)
            | Every.seconds(5),
            # Its stage timing is a counter too: busy_s_per_second is the
            # share of the time the collector collects.
            rate_keys=("frames", "batches", "busy_s"),
        )
        monitor.watch(
            parts.samples,
            name="replay_buffer",
            schedule=Every.seconds(settings.buffer_every),
            step="write_count",
        )
        common.watch_learning(
            monitor,
            learner=parts.learner,
            episodes=parts.episodes,
            buffer="replay_buffer",
            # The samples per frame the learner keeps to when it keeps up.
            target_ratio=settings.batch_size / settings.frames_per_update,
            window=common.verdict_window(seconds)
            if settings.window is None
            else settings.window,
        )


def _collector_stats(parts: _Parts) -> dict[str, Any]:
    """The collector's ``stats()`` and its stage timing: what its watch logs."""
    return {**parts.collector.stats(), **parts.collecting.stages.stats()}


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


@dataclass
class _TrainingClock:
    """Whether training goes on (before the deadline, not stopped, the collector alive); prints progress when due."""

    parts: _Parts
    deadline: float
    progress_every: float
    stdout: TextIO
    stop: threading.Event
    started: float = field(default_factory=time.monotonic, init=False)
    next_progress: float = field(init=False)

    def __post_init__(self) -> None:
        self.next_progress = self.started + self.progress_every

    def running(self) -> bool:
        now = time.monotonic()
        if now >= self.deadline or self.stop.is_set():
            return False
        if not self.parts.collector.is_running():
            raise RuntimeError(
                "TorchRL's collector thread stopped on its own; its error is "
                "printed above"
            )
        if now >= self.next_progress:
            self.next_progress += self.progress_every
            common.say(_progress(now - self.started, self.parts), self.stdout)
        return True


def _progress(elapsed: float, parts: _Parts) -> str:
    frames = parts.collector.stats().get("frames", 0)
    learned = parts.learner.stats()
    watched = common.episode_stats(parts.episodes)
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
