"""Four environment worker processes counted in shared memory, watched from the learner.

Four worker processes each step an environment of their own (a small
pure-Python pole-balancing task with random actions) and count their
progress into one ``SharedCounters`` segment: ``frames`` and ``episodes``
(counters), ``episode_return`` (a gauge: the return of the worker's last
finished episode; like every key, it is also reported summed over the
workers) and a heartbeat. Writing is a store into shared memory —
no lock, no message, nothing the worker waits for.

The learner, the main process, trains (here: sleeps in small steps and
counts its updates in a ``Tally``) while a background ``LoggerMonitor``
reads every worker's slots at once, without asking any worker anything,
and writes the metrics to a SQLite file and to the console: per-worker and
total frames, frames per second, episodes, ``workers_alive`` (workers
whose heartbeat is younger than five seconds). At the end the workers are
stopped, the monitor logs its final snapshots, and the run's summary is
printed, as ``rlpulse show`` prints it.

    python examples/multiprocess_pipeline.py --seconds 5
    rlpulse show runs/multiprocess_pipeline.sqlite

Needs nothing beyond rlpulse itself. A worker killed with ``kill -9``
leaves its last counts readable and drops out of ``workers_alive`` once its
heartbeat is older than the liveness (``--liveness``, in seconds).
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlpulse import ConsoleLogger, LoggerMonitor, SharedCounters, SQLiteLogger, Tally
from rlpulse.read.summary import format_summary, summarize_file

WORKERS = 4
STEPS_PER_BATCH = 64
# Workers rest this long between batches, as they would while a policy
# runs on a shared accelerator; it keeps the example light on a small machine.
BATCH_PAUSE_S = 0.005


class PoleEnv:
    """A pole balanced on a cart, in plain Python: CartPole's dynamics and its termination rule.

    ``step(action)`` pushes the cart left (0) or right (1) and returns
    ``(reward, done)``; an episode ends when the pole tips past 12 degrees,
    the cart leaves the track, or after 500 steps.
    """

    GRAVITY, CART_MASS, POLE_MASS, HALF_LENGTH = 9.8, 1.0, 0.1, 0.5
    FORCE, TAU, MAX_ANGLE, MAX_POSITION, MAX_STEPS = 10.0, 0.02, 0.2094, 2.4, 500

    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)
        self.reset()

    def reset(self) -> None:
        """Start a new episode from a small random state."""
        self._x, self._x_dot, self._theta, self._theta_dot = (
            self._random.uniform(-0.05, 0.05) for _ in range(4)
        )
        self._steps = 0

    def step(self, action: int) -> tuple[float, bool]:
        """Apply one push; return the reward and whether the episode is over."""
        force = self.FORCE if action else -self.FORCE
        total_mass = self.CART_MASS + self.POLE_MASS
        cos, sin = math.cos(self._theta), math.sin(self._theta)
        pole_moment = self.POLE_MASS * self.HALF_LENGTH
        temp = (force + pole_moment * self._theta_dot**2 * sin) / total_mass
        theta_acc = (self.GRAVITY * sin - cos * temp) / (
            self.HALF_LENGTH * (4.0 / 3.0 - self.POLE_MASS * cos**2 / total_mass)
        )
        x_acc = temp - pole_moment * theta_acc * cos / total_mass
        self._x += self.TAU * self._x_dot
        self._x_dot += self.TAU * x_acc
        self._theta += self.TAU * self._theta_dot
        self._theta_dot += self.TAU * theta_acc
        self._steps += 1
        done = (
            abs(self._theta) > self.MAX_ANGLE
            or abs(self._x) > self.MAX_POSITION
            or self._steps >= self.MAX_STEPS
        )
        return 1.0, done

    def random_action(self) -> int:
        """A random push, as an untrained policy would choose."""
        return self._random.randrange(2)


def run_worker(counters: SharedCounters, index: int, stop: Any) -> None:
    """Step one environment in batches until ``stop`` is set, counting into worker ``index``'s slots."""
    writer = counters.worker(index)
    env = PoleEnv(seed=index)
    episode_return = 0.0
    writer.heartbeat()
    while not stop.is_set():
        for _ in range(STEPS_PER_BATCH):
            reward, done = env.step(env.random_action())
            episode_return += reward
            writer.inc("frames")
            if done:
                writer.inc("episodes")
                writer.set("episode_return", episode_return)
                episode_return = 0.0
                env.reset()
        writer.heartbeat()
        time.sleep(BATCH_PAUSE_S)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Four env workers counted in shared memory, watched by the learner."
    )
    parser.add_argument(
        "--seconds", type=float, default=10.0, help="how long to run (default 10)"
    )
    parser.add_argument(
        "--db",
        type=Path,
        default=Path("runs/multiprocess_pipeline.sqlite"),
        help="SQLite file to write (default runs/multiprocess_pipeline.sqlite)",
    )
    parser.add_argument(
        "--run", default=None, help="run name in the file (default: the start time)"
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=1.0,
        help="seconds between the monitor's polls (default 1)",
    )
    parser.add_argument(
        "--liveness",
        type=float,
        default=5.0,
        help="seconds a worker counts as alive after its last heartbeat (default 5)",
    )
    args = parser.parse_args(argv)
    if not args.seconds > 0 or not args.interval > 0 or not args.liveness > 0:
        parser.error("--seconds, --interval and --liveness must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the workers for ``--seconds`` under a background monitor; print the run's summary."""
    args = parse_args(argv)
    # spawn: each worker starts a fresh interpreter on every platform, and the
    # counters travel to it by the segment's name.
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    learner = Tally()
    with (
        SharedCounters(
            WORKERS,
            counters=("frames", "episodes"),
            gauges=("episode_return",),
            liveness=args.liveness,
        ) as counters,
        SQLiteLogger(args.db, run=args.run) as store,
        ConsoleLogger() as console,
    ):
        workers = [
            context.Process(
                target=run_worker,
                args=(counters, index, stop),
                name=f"env-worker-{index}",
                daemon=True,
            )
            for index in range(WORKERS)
        ]
        monitor = LoggerMonitor([store, console], poll_interval=args.interval)
        monitor.watch(counters, name="workers")
        monitor.watch(learner, name="learner")
        try:
            for worker in workers:
                worker.start()
            with monitor:
                deadline = time.monotonic() + args.seconds
                while time.monotonic() < deadline:
                    # One "update" of the learner: the work it would do on a batch.
                    time.sleep(0.05)
                    learner.inc("updates")
                stop.set()
                for worker in workers:
                    worker.join(timeout=10)
        finally:
            stop.set()
            for worker in workers:
                if worker.is_alive():
                    worker.kill()
                    worker.join(timeout=5)
        failed = [worker.name for worker in workers if worker.exitcode != 0]
        run = store.run
    print(format_summary(summarize_file(args.db, run)))
    if failed:
        print(f"workers that failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
