"""TorchRL helpers: episode statistics into a :class:`~rlpulse.Tally`, worker progress into :class:`~rlpulse.SharedCounters`.

Needs TorchRL (extra ``rlpulse[torchrl]``), imported here only, never by
``import rlpulse``.

- :class:`EpisodeTally` reads the finished episodes of each collected batch
  (from ``("next", "done")`` and ``("next", "reward")``) and records their
  returns and lengths in a tally. Pass it as a single-process collector's
  ``post_collect_hook``, or call it on every batch in the training loop.
- :class:`SharedCountersTransform` is an environment transform that, inside
  each worker process of a ``MultiSyncCollector`` or ``MultiAsyncCollector``,
  writes that worker's frames, finished episodes and heartbeat into
  :class:`~rlpulse.SharedCounters`, so a background monitor sees every
  worker's progress and liveness without asking the collector anything.
- :class:`SampleCounter` counts a replay buffer's ``sample()`` calls, the
  samples they return and the seconds spent inside them, which TorchRL's
  own ``ReplayBuffer.stats()`` lacks: what a bottleneck verdict reads of an
  asynchronous pipeline's learner, with no change to its loop.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import deque
from typing import Any

import torch
from tensordict import TensorDictBase
from torchrl.envs.transforms import Transform

from rlpulse.naming import Kind
from rlpulse.sources.shared import SharedCounters
from rlpulse.sources.tally import Tally

__all__ = [
    "WORKER_COUNTERS",
    "EpisodeTally",
    "SampleCounter",
    "SharedCountersTransform",
]

WORKER_COUNTERS: tuple[str, ...] = ("frames", "episodes")
"""The counters :class:`SharedCountersTransform` writes by default: ``SharedCounters(n, counters=WORKER_COUNTERS)``."""

_TRAJECTORY_IDS = ("collector", "traj_ids")
_PADDING_MASK = ("collector", "mask")
# Trajectories a batch leaves unfinished wait here for the batch that
# finishes them; one that never continues (its worker was reset) must not
# stay forever.
_MAX_UNFINISHED = 10_000
# How many sample() calls may wait for a reader before the sampling thread
# adds them up itself: what a counter no monitor reads holds at most.
_ADD_UP_AT = 1024


_NOT_FOR_WORKERS = (
    "EpisodeTally cannot run in a collector's worker processes: it records into "
    "a tally of the process that created it. With MultiSyncCollector or "
    "MultiAsyncCollector, whose post_collect_hook runs in the workers, call "
    "episode_tally(batch) in the training loop instead, or count per worker with "
    "SharedCountersTransform."
)


class EpisodeTally:
    """Records the return and length of every episode that finishes in a collected batch.

    Each call reads one batch from a TorchRL collector: the per-step
    reward at ``reward_key`` and the end-of-episode flag at ``done_key``
    (terminated or truncated). For each episode that ends in the batch it
    calls ``tally.observe(return_key, episode_return)`` and
    ``tally.observe(length_key, episode_length)``, so the tally's
    ``stats()`` carry ``episode_return_mean``, ``episode_return_count``
    (episodes finished so far), ``episode_length_max`` and so on. Episodes
    that span batches are carried over: by trajectory id
    (``("collector", "traj_ids")``, which collectors add) when the batch has
    one, else by position in the batch. Zero-padded batches
    (``split_trajs=True``) are read through their ``("collector", "mask")``.

    Two ways to wire it, both in the process that owns the tally:

    - ``Collector(..., post_collect_hook=EpisodeTally(tally))`` — the
      collector calls it on every batch, also when it runs in its own thread
      after ``start()``;
    - ``for batch in collector: episode_tally(batch)`` — an explicit call in
      the training loop. This is the way with ``MultiSyncCollector`` and
      ``MultiAsyncCollector``, whose ``post_collect_hook`` runs inside every
      worker process, far from the tally: given as their hook, this object
      makes the collector's constructor raise ``TypeError`` before any
      worker starts; it refuses to be pickled for a worker, and to record
      from a process it was not created in.

    Args:
        tally: where episode returns and lengths are recorded.

    Keyword Args:
        return_key: the tally key of episode returns (default ``"episode_return"``).
        length_key: the tally key of episode lengths, in steps (default ``"episode_length"``).
        reward_key: the batch entry of per-step rewards (default ``("next", "reward")``).
        done_key: the batch entry of end-of-episode flags (default ``("next", "done")``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> tally = Tally()
        >>> record = EpisodeTally(tally)
        >>> def batch(rewards, dones):
        ...     return TensorDict(
        ...         {"next": {"reward": torch.tensor(rewards).unsqueeze(-1),
        ...                   "done": torch.tensor(dones).unsqueeze(-1)}},
        ...         batch_size=[len(rewards)],
        ...     )
        >>> record(batch([1.0, 1.0, 1.0], [False, True, False]))
        >>> record(batch([2.0, 2.0], [False, True]))  # the second episode ends here
        >>> stats = tally.stats()
        >>> stats["episode_return_count"], stats["episode_return_last"], stats["episode_length_last"]
        (2, 5.0, 3.0)
    """

    def __init__(
        self,
        tally: Tally,
        *,
        return_key: str = "episode_return",
        length_key: str = "episode_length",
        reward_key: str | tuple[str, ...] = ("next", "reward"),
        done_key: str | tuple[str, ...] = ("next", "done"),
    ) -> None:
        if not isinstance(tally, Tally):
            raise TypeError(
                f"EpisodeTally(tally=...) needs an rlpulse.Tally, got "
                f"{type(tally).__name__}; create one with rlpulse.Tally()."
            )
        self._tally = tally
        self._return_key = return_key
        self._length_key = length_key
        self._reward_key = reward_key
        self._done_key = done_key
        self._owner_pid = os.getpid()
        # Unfinished episodes at the end of earlier batches: (return, length).
        self._unfinished: dict[Any, tuple[float, int]] = {}

    def __call__(self, batch: TensorDictBase) -> None:
        """Record the episodes that finish in ``batch``; carry the unfinished ones over.

        Examples:
            >>> import torch
            >>> from tensordict import TensorDict
            >>> tally = Tally()
            >>> batch = TensorDict(
            ...     {"next": {"reward": torch.ones(2, 3, 1),
            ...               "done": torch.tensor([[0, 0, 1], [0, 1, 0]]).bool().unsqueeze(-1)}},
            ...     batch_size=[2, 3],
            ... )
            >>> EpisodeTally(tally)(batch)  # two environments, three steps each
            >>> tally.stats()["episode_length_mean"]
            2.5
        """
        if os.getpid() != self._owner_pid:
            raise RuntimeError(
                f"EpisodeTally was called in process {os.getpid()}, but its tally "
                f"lives in process {self._owner_pid}: a multiprocess collector runs "
                "post_collect_hook inside its workers. Call episode_tally(batch) in "
                "the training loop instead."
            )
        rows, steps = self._layout(batch)
        rewards = _per_step(batch, self._reward_key, "reward_key", rows, steps)
        dones = _per_step(batch, self._done_key, "done_key", rows, steps).bool()
        if _PADDING_MASK in batch.keys(True):
            valid_steps = batch.get(_PADDING_MASK).reshape(rows, steps).sum(1).tolist()
        else:
            valid_steps = [steps] * rows
        if _TRAJECTORY_IDS in batch.keys(True):
            trajectory_ids = batch.get(_TRAJECTORY_IDS).reshape(rows, steps).tolist()
        else:
            trajectory_ids = None
        cumulative_returns = rewards.to(torch.float64).cumsum(1).tolist()
        done_steps: list[list[int]] = [[] for _ in range(rows)]
        for row, step in dones.nonzero().tolist():
            done_steps[row].append(step)
        for row in range(rows):
            last = valid_steps[row] - 1
            if last < 0:
                continue
            if trajectory_ids is None:
                first_key: Any = ("row", row)
                last_key: Any = first_key
            else:
                first_key = trajectory_ids[row][0]
                last_key = trajectory_ids[row][last]
            self._record_row(
                cumulative_returns[row],
                [step for step in done_steps[row] if step <= last],
                last,
                first_key,
                last_key,
            )
        while len(self._unfinished) > _MAX_UNFINISHED:
            del self._unfinished[next(iter(self._unfinished))]

    def _record_row(
        self,
        cumulative_returns: list[float],
        done_steps: list[int],
        last: int,
        first_key: Any,
        last_key: Any,
    ) -> None:
        episode_return, episode_length = self._unfinished.pop(first_key, (0.0, 0))
        previous_cumulative, previous_step = 0.0, -1
        for step in done_steps:
            episode_return += cumulative_returns[step] - previous_cumulative
            episode_length += step - previous_step
            self._tally.observe(self._return_key, episode_return)
            self._tally.observe(self._length_key, episode_length)
            episode_return, episode_length = 0.0, 0
            previous_cumulative, previous_step = cumulative_returns[step], step
        if previous_step != last:
            self._unfinished[last_key] = (
                episode_return + cumulative_returns[last] - previous_cumulative,
                episode_length + last - previous_step,
            )

    def _layout(self, batch: TensorDictBase) -> tuple[int, int]:
        if not isinstance(batch, TensorDictBase):
            raise TypeError(
                f"EpisodeTally expects a collected batch (a TensorDict), got "
                f"{type(batch).__name__}."
            )
        if batch.batch_dims == 0:
            raise ValueError(
                "EpisodeTally expects a batch whose last dimension is time, got a "
                "batch with no dimensions; pass the collector's batch unchanged."
            )
        steps = batch.batch_size[-1]
        rows = batch.numel() // steps if steps else 0
        return rows, steps

    def __reduce__(self) -> Any:
        raise TypeError(_NOT_FOR_WORKERS)

    @property
    def forward(self) -> Any:
        """Refuses: TorchRL looks this up only to send the object to worker processes."""
        # A multiprocess collector wraps its hooks for the workers
        # (CloudpickleWrapper), looking up ``forward`` first: in this process,
        # before any worker starts. Refused here, the collector's constructor
        # raises this error, not a worker failing to start.
        raise TypeError(_NOT_FOR_WORKERS)

    def __repr__(self) -> str:
        return (
            f"EpisodeTally(return_key={self._return_key!r}, "
            f"length_key={self._length_key!r})"
        )


# TorchRL ships no type information, so its Transform is Any to the checker.
class SharedCountersTransform(Transform):  # type: ignore[misc]
    """An environment transform that writes one worker's frames, episodes and heartbeat to shared memory.

    Append it to the environment each worker of a ``MultiSyncCollector`` or
    ``MultiAsyncCollector`` builds, with that worker's index: on every step
    it adds the step's frames to the ``frames`` counter and its finished
    episodes (``done``) to ``episodes``, and it beats the worker's heartbeat
    on every step and reset. A :class:`~rlpulse.LoggerMonitor` in the parent
    watches the :class:`~rlpulse.SharedCounters` directly — per-worker
    progress and liveness from a background thread, with no message to the
    workers, which the collector's own pipe-based per-worker statistics
    cannot offer while it runs.

    A worker counts as alive while it steps: one that waits longer than the
    counters' ``liveness`` (a collector paused while the learner trains)
    drops out of ``workers_alive`` until it steps again. Choose a liveness
    longer than the longest expected pause. Closing the environment (a
    collector's worker does at shutdown) says the worker finished: it is
    counted in ``workers_finished``, not told lost.

    Args:
        counters: shared counters with the counters ``frames_key`` and
            ``episodes_key``, e.g. ``SharedCounters(n, counters=WORKER_COUNTERS)``.
        worker: this worker's index (``0`` to ``counters.workers - 1``); give
            each worker's environment factory its own, e.g. through
            ``create_env_fn=[functools.partial(make_env, worker=i) for i in range(n)]``.

    Keyword Args:
        frames_key: the counter of frames (default ``"frames"``).
        episodes_key: the counter of finished episodes (default ``"episodes"``).
        done_key: the step's end-of-episode entry (default ``"done"``).

    Examples:
        >>> from torchrl.envs import GymEnv, TransformedEnv
        >>> counters = SharedCounters(2, counters=WORKER_COUNTERS)
        >>> env = TransformedEnv(GymEnv("CartPole-v1"), SharedCountersTransform(counters, 1))
        >>> _ = env.rollout(5, break_when_any_done=False)
        >>> counters.stats()["worker_1/frames"], counters.stats()["workers_alive"]
        (5.0, 1)
        >>> counters.close()
    """

    def __init__(
        self,
        counters: SharedCounters,
        worker: int,
        *,
        frames_key: str = "frames",
        episodes_key: str = "episodes",
        done_key: str | tuple[str, ...] = "done",
    ) -> None:
        if not isinstance(counters, SharedCounters):
            raise TypeError(
                "SharedCountersTransform(counters=...) needs an rlpulse.SharedCounters, "
                f"got {type(counters).__name__}; create one in the parent with "
                "SharedCounters(workers, counters=WORKER_COUNTERS)."
            )
        missing = [
            key for key in (frames_key, episodes_key) if key not in counters.counters
        ]
        if missing:
            raise KeyError(
                f"SharedCountersTransform writes the counters {[frames_key, episodes_key]}, "
                f"but the SharedCounters has counters {list(counters.counters)} "
                f"(missing {missing}); create it with "
                f"SharedCounters(workers, counters=({frames_key!r}, {episodes_key!r}))."
            )
        super().__init__(in_keys=[], out_keys=[])
        self.writer = counters.worker(worker)
        self.frames_key = frames_key
        self.episodes_key = episodes_key
        self.done_key = done_key

    def _step(
        self, tensordict: TensorDictBase, next_tensordict: TensorDictBase
    ) -> TensorDictBase:
        writer = self.writer
        writer.inc(self.frames_key, next_tensordict.numel())
        finished = int(next_tensordict.get(self.done_key).sum())
        if finished:
            writer.inc(self.episodes_key, finished)
        writer.heartbeat()
        return next_tensordict

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        self.writer.heartbeat()
        return tensordict_reset

    def close(self) -> None:
        """Say this worker finished (:meth:`~rlpulse.sources.shared.WorkerCounters.finish`): its environment is closed, as a collector's worker closes it at shutdown.

        Counters already closed in this process are left as they are.
        """
        with contextlib.suppress(ValueError):
            self.writer.finish()

    def __repr__(self) -> str:
        # TorchRL's Transform.__repr__ shows only its in_keys (none here).
        return (
            f"{type(self).__name__}(worker={self.writer.index}, "
            f"frames_key={self.frames_key!r}, episodes_key={self.episodes_key!r})"
        )


class SampleCounter:
    """Counts a replay buffer's ``sample()`` calls, the samples returned and the seconds inside, on top of its own ``stats()``.

    Watch it instead of the buffer: its ``stats()`` are the buffer's
    (``size``, ``write_count``: the frames written through ``add`` and
    ``extend``, ``capacity``, ``utilization``) and ``sample_calls``,
    ``samples_returned`` (the batch's first dimension, its ``numel()`` for a
    TensorDict) and ``sample_s``, all three counters (the first two named as
    TorchRL's monitor knows them: their rates are ``samples_per_second`` and
    ``samples_returned_per_second``). It wraps ``sample``
    on this buffer instance only (iterating the buffer samples through it
    too), returning exactly what the buffer returns; the learner's loop does
    not change. Several threads may sample the buffer at once: every call
    is counted. :meth:`close` gives the buffer its own ``sample`` back.

    Examples:
        >>> import torch
        >>> from torchrl.data import LazyTensorStorage, ReplayBuffer
        >>> buffer = ReplayBuffer(storage=LazyTensorStorage(100))
        >>> _ = buffer.extend(torch.arange(10))
        >>> counted = SampleCounter(buffer)
        >>> buffer.sample(4).shape
        torch.Size([4])
        >>> stats = counted.stats()
        >>> stats["sample_calls"], stats["samples_returned"], stats["write_count"], stats["sample_s"] > 0
        (1, 4, 10, True)
        >>> counted.close()
    """

    def __init__(self, buffer: Any) -> None:
        if not callable(getattr(buffer, "sample", None)) or not callable(
            getattr(buffer, "stats", None)
        ):
            raise TypeError(
                f"SampleCounter needs a replay buffer with sample() and stats(), got "
                f"{type(buffer).__name__}; pass a torchrl.data.ReplayBuffer."
            )
        self.buffer = buffer
        self.calls = 0
        self.samples = 0
        self.seconds = 0.0
        # Learner threads may sample one buffer at once, and an increment two
        # of them interleave would be lost: a counter read going backwards
        # reads as its reset. So a call only appends what it counted
        # (deque.append is atomic) and whoever holds the lock adds it up, as
        # a tally's observations are filed by its readers.
        pending: deque[tuple[float, int]] = deque()
        self._pending = pending
        self._lock = threading.Lock()
        original = buffer.sample

        def sample(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                result = original(*args, **kwargs)
            except BaseException:
                pending.append((time.perf_counter() - start, 0))
                raise
            elapsed = time.perf_counter() - start
            data = result[0] if isinstance(result, tuple) else result
            pending.append((elapsed, _batch_length(data)))
            if len(pending) >= _ADD_UP_AT and self._lock.acquire(blocking=False):
                # No reader lately: add up here, unless one is adding up.
                try:
                    self._add_up()
                finally:
                    self._lock.release()
            return result

        buffer.sample = sample

    def _add_up(self) -> None:
        """Add the calls counted since to the totals (holding :attr:`_lock`)."""
        pending = self._pending
        # popleft is atomic against the samplers' append: exactly the calls
        # counted here are taken, whatever is appended meanwhile.
        for _ in range(len(pending)):
            elapsed, returned = pending.popleft()
            self.seconds += elapsed
            self.calls += 1
            self.samples += returned

    def stats(self) -> dict[str, Any]:
        """The buffer's ``stats()`` and ``sample_calls``, ``samples_returned``, ``sample_s``."""
        stats = dict(self.buffer.stats())
        with self._lock:
            self._add_up()
            stats["sample_calls"] = self.calls
            stats["samples_returned"] = self.samples
            stats["sample_s"] = self.seconds
        return stats

    def metric_kinds(self) -> dict[str, Kind]:
        """The counters: the three it adds and the buffer's ``write_count``."""
        return dict.fromkeys(
            ("sample_calls", "samples_returned", "sample_s", "write_count"),
            Kind.COUNTER,
        )

    def close(self) -> None:
        """Give the buffer its own ``sample`` back; counting stops."""
        self.buffer.__dict__.pop("sample", None)

    def __repr__(self) -> str:
        with self._lock:
            self._add_up()
            calls = self.calls
        return f"SampleCounter({type(self.buffer).__name__}, sample_calls={calls})"


def _batch_length(data: Any) -> int:
    if isinstance(data, TensorDictBase):
        return int(data.numel())
    try:
        return len(data)
    except TypeError:
        return 1


def _per_step(
    batch: TensorDictBase, key: Any, argument: str, rows: int, steps: int
) -> torch.Tensor:
    values: torch.Tensor | None = batch.get(key, None)
    if values is None:
        raise KeyError(
            f"EpisodeTally: the batch has no entry {key!r}; pass {argument}= naming "
            f"the per-step entry (the batch has {sorted(map(str, batch.keys(True)))})."
        )
    if values.numel() != rows * steps:
        raise ValueError(
            f"EpisodeTally: {key!r} has shape {tuple(values.shape)}, not one value per "
            f"step of a batch of size {tuple(batch.batch_size)}; pass {argument}= "
            "naming a per-step entry."
        )
    return values.reshape(rows, steps)
