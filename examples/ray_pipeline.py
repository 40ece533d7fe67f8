"""A Ray pipeline watched from the driver: two collector actors feed a buffer actor.

Each collector actor steps its own gymnasium CartPole with random actions,
on a thread of its own, and ships batches of transitions to a replay-buffer
actor; the driver samples from the buffer as a learner would. A background
``LoggerMonitor`` on the driver polls every actor's ``stats()`` — one remote
call per actor per poll, each with a deadline — and writes the metrics to a
SQLite file, which ``rlpulse show`` summarises.

    python examples/ray_pipeline.py --seconds 5
    rlpulse show runs/ray_pipeline.db

Needs ``pip install 'rlpulse[ray]' gymnasium``. ``--address`` connects to a
running Ray cluster instead of starting a local one.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import gymnasium as gym
import ray

from rlpulse import Every, LoggerMonitor, SQLiteLogger, Tally
from rlpulse._demo.synthetic import RingBuffer
from rlpulse.read.summary import format_summary, summarize_file

BATCH_FRAMES = 64
LEARNER_BATCH = 256


@ray.remote(num_cpus=1, max_concurrency=2)
class Collector:
    """Steps CartPole with random actions and ships batches to the buffer actor.

    Collection runs on a thread of the actor's own; ``max_concurrency=2``
    lets ``stats()`` answer while that thread works.
    """

    def __init__(self, buffer: Any, seed: int) -> None:
        self._buffer = buffer
        self._env = gym.make("CartPole-v1")
        self._env.action_space.seed(seed)
        self._observation, _ = self._env.reset(seed=seed)
        self._lock = threading.Lock()
        self._frames = 0
        self._batches = 0
        self._episodes = 0
        self._returns: deque[float] = deque(maxlen=100)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._collect, daemon=True)
        self._thread.start()

    def _collect(self) -> None:
        batch: list[tuple[Any, ...]] = []
        episode_return = 0.0
        while not self._stopping.is_set():
            action = self._env.action_space.sample()
            observation, reward, terminated, truncated, _ = self._env.step(action)
            batch.append((self._observation, action, reward, observation, terminated))
            episode_return += float(reward)
            self._observation = observation
            if terminated or truncated:
                self._observation, _ = self._env.reset()
                with self._lock:
                    self._episodes += 1
                    self._returns.append(episode_return)
                episode_return = 0.0
            if len(batch) == BATCH_FRAMES:
                # Waiting for the buffer keeps at most one batch in flight.
                ray.get(self._buffer.extend.remote(batch))
                batch = []
                with self._lock:
                    self._frames += BATCH_FRAMES
                    self._batches += 1

    def stats(self) -> dict[str, float]:
        """Frames and batches shipped, episodes finished, recent mean return."""
        with self._lock:
            returns = list(self._returns)
            return {
                "frames": self._frames,
                "batches": self._batches,
                "episodes": self._episodes,
                "episode_return_mean": sum(returns) / len(returns) if returns else 0.0,
            }

    def stop(self) -> None:
        """Stop collecting."""
        self._stopping.set()
        self._thread.join(10)


def run(seconds: float, db: Path, address: str | None) -> None:
    """Run the pipeline for ``seconds``, monitored into ``db``, and print a summary."""
    if address is None:
        ray.init(num_cpus=3, include_dashboard=False, log_to_driver=False)
    else:
        ray.init(address=address, log_to_driver=False)
    try:
        buffer = ray.remote(num_cpus=0)(RingBuffer).remote(capacity=50_000, seed=0)
        collectors = [Collector.remote(buffer, seed) for seed in range(2)]
        learner = Tally()
        # Wait for every actor to be up before the clock starts.
        ray.get([actor.stats.remote() for actor in [buffer, *collectors]])
        with SQLiteLogger(db) as sink:
            monitor = LoggerMonitor(sink, poll_interval=0.5, poll_timeout=2.0)
            for collector in collectors:
                # Ray actor handles are watched like local objects:
                # "collector", "collector_1".
                monitor.watch(collector, schedule=Every.seconds(1))
            monitor.watch(buffer)  # "ringbuffer", every poll
            monitor.watch(learner, name="learner", schedule=Every.seconds(1))
            with monitor:
                deadline = time.monotonic() + seconds
                while time.monotonic() < deadline:
                    if ray.get(buffer.stats.remote())["size"] < LEARNER_BATCH:
                        time.sleep(0.05)
                        continue
                    started = time.perf_counter()
                    ray.get(buffer.sample.remote(LEARNER_BATCH))
                    learner.observe("sample_ms", 1000 * (time.perf_counter() - started))
                    learner.inc("updates")
            ray.get([collector.stop.remote() for collector in collectors])
            print(format_summary(summarize_file(db, run=sink.run)))
    finally:
        ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(
        description="A Ray pipeline monitored from the driver into SQLite."
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="how long to run")
    parser.add_argument(
        "--db", type=Path, default=Path("runs/ray_pipeline.db"), help="SQLite file"
    )
    parser.add_argument(
        "--address", default=None, help="a running Ray cluster to connect to"
    )
    args = parser.parse_args()
    args.db.parent.mkdir(parents=True, exist_ok=True)
    run(args.seconds, args.db, args.address)


if __name__ == "__main__":
    main()
