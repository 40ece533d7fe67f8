"""Scale-out: what shared per-worker counters cost to write and to read, and what ``SystemStats`` costs.

Four measurements, in one process (plus the collector's worker processes):

(a) a worker's ``SharedCounters.worker(i).inc(key)`` against a plain
    attribute increment, ``obj.frames += 1``, in the same loop;
(b) ``SharedCounters.stats()`` over 64 workers of 8 keys each, and over
    256 workers of 16 keys each;
(c) the latency of one per-worker snapshot: ``SharedCounters.stats()``
    against TorchRL's ``MultiSyncCollector.stats(workers="both")``, on a
    real collector of two CartPole workers whose environments write the
    shared counters through ``SharedCountersTransform``;
(d) one ``SystemStats.stats()`` call.

Compared implementations run in interleaved rounds, so that the drifts of a
shared machine hit them alike; figures are medians.
"""

from __future__ import annotations

import functools
import gc
import math
import os
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import rlpulse
from benchmarks import progress, reflow
from rlpulse import SharedCounters
from rlpulse.sources.shared import _PythonWorkerCounters

__all__ = [
    "COLLECTOR_WORKERS",
    "INCREMENT_BUDGET",
    "SNAPSHOT_BUDGET",
    "STATS_BUDGET_US",
    "STATS_KEYS",
    "STATS_WORKERS",
    "SYSTEM_BUDGET_US",
    "WIDE_STATS_BUDGET_US",
    "WIDE_STATS_KEYS",
    "WIDE_STATS_WORKERS",
    "IncrementResult",
    "Results",
    "Settings",
    "SnapshotResult",
    "SystemResult",
    "measure_increments",
    "measure_shared_stats",
    "measure_snapshots",
    "measure_system",
    "missed_budgets",
    "percentile",
    "render",
    "run",
    "table",
]

INCREMENT_BUDGET = 3.0
"""(a): ``inc`` may cost at most this many plain attribute increments."""

STATS_WORKERS = 64
STATS_KEYS = 8
STATS_BUDGET_US = 100.0
"""(b): one ``stats()`` over 64 workers x 8 keys may cost at most this many microseconds."""

WIDE_STATS_WORKERS = 256
WIDE_STATS_KEYS = 16
WIDE_STATS_BUDGET_US = 1000.0
"""(b): one ``stats()`` over 256 workers x 16 keys may cost at most this many microseconds."""

SNAPSHOT_BUDGET = 10.0
"""(c): a per-worker snapshot from ``SharedCounters`` must be at least this many times faster than TorchRL's."""

SYSTEM_BUDGET_US = 1000.0
"""(d): one ``SystemStats.stats()`` may cost at most this many microseconds, median and 95th percentile."""

COLLECTOR_WORKERS = 2


@dataclass(frozen=True)
class Settings:
    """How much to measure in each of the four parts, and the deadline of the collector part.

    Examples:
        >>> Settings.quick().increment_rounds < Settings().increment_rounds
        True
    """

    increment_rounds: int = 21
    increments: int = 100_000
    stats_rounds: int = 15
    stats_calls: int = 200
    collector_batches: int = 40
    frames_per_batch: int = 200
    background_poll_s: float = 0.005
    collector_deadline_s: float = 240.0
    system_rounds: int = 15
    system_calls: int = 20

    @classmethod
    def quick(cls) -> Settings:
        """Return settings for a smoke run: a few short rounds, a few batches."""
        return cls(
            increment_rounds=2,
            increments=1_000,
            stats_rounds=2,
            stats_calls=5,
            collector_batches=3,
            frames_per_batch=40,
            system_rounds=2,
            system_calls=3,
        )


def percentile(values: Sequence[float], fraction: float) -> float:
    """Return the ``fraction`` percentile of ``values`` (nearest rank).

    Examples:
        >>> percentile([5.0, 1.0, 3.0, 2.0, 4.0], 0.95)
        5.0
        >>> percentile([5.0, 1.0, 3.0, 2.0, 4.0], 0.5)
        3.0
    """
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


# --- (a) increments ----------------------------------------------------------


class _Plain:
    # An ordinary object with an ordinary attribute: what a worker that
    # counts in its own memory would increment.
    def __init__(self) -> None:
        self.frames = 0


@dataclass(frozen=True)
class IncrementResult:
    """Per-round costs of one increment, in nanoseconds: plain attribute, ``inc``, and the empty loop.

    ``inc_ns`` is the writer :meth:`SharedCounters.worker` returns;
    ``python_inc_ns`` the pure-Python writer's, measured only when the
    default writer is the compiled one.

    Examples:
        >>> result = IncrementResult((30.0, 40.0), (90.0, 100.0), (10.0, 10.0))
        >>> result.ratio
        2.75
        >>> result.within_budget
        True
    """

    plain_ns: tuple[float, ...]
    inc_ns: tuple[float, ...]
    empty_ns: tuple[float, ...]
    python_inc_ns: tuple[float, ...] = ()

    @property
    def compiled(self) -> bool:
        """Whether ``inc_ns`` is the compiled writer's (the pure-Python one then ran too)."""
        return bool(self.python_inc_ns)

    @property
    def ratio(self) -> float:
        """Median over rounds of ``inc``'s cost divided by the plain increment's in the same round."""
        return _median_ratio(self.inc_ns, self.plain_ns)

    @property
    def python_ratio(self) -> float | None:
        """The same ratio for the pure-Python writer, if it was measured.

        Examples:
            >>> IncrementResult((30.0,), (40.0,), (10.0,), (90.0,)).python_ratio
            3.0
        """
        if not self.python_inc_ns:
            return None
        return _median_ratio(self.python_inc_ns, self.plain_ns)

    @property
    def within_budget(self) -> bool:
        """Whether ``inc`` costs at most :data:`INCREMENT_BUDGET` plain increments."""
        return self.ratio <= INCREMENT_BUDGET


def _median_ratio(ours: Sequence[float], plain: Sequence[float]) -> float:
    return statistics.median(a / b for a, b in zip(ours, plain, strict=True))


def _time_plain(target: _Plain, count: int) -> float:
    clock = time.thread_time_ns
    started = clock()
    for _ in range(count):
        target.frames += 1
    return (clock() - started) / count


def _time_inc(writer: Any, count: int) -> float:
    clock = time.thread_time_ns
    started = clock()
    for _ in range(count):
        writer.inc("frames")
    return (clock() - started) / count


def _time_empty(count: int) -> float:
    clock = time.thread_time_ns
    started = clock()
    for _ in range(count):
        pass
    return (clock() - started) / count


def measure_increments(
    settings: Settings, report: Callable[[str], None] = progress
) -> IncrementResult:
    """Time ``obj.frames += 1`` and ``writer.inc("frames")`` in identical loops, rounds interleaved.

    Where the default writer is the compiled one, the pure-Python writer
    runs a third loop in the same rounds. The order of the loops rotates
    from round to round; the garbage collector is off while a loop runs.
    Afterwards every count is checked.

    Examples:
        >>> tiny = Settings(increment_rounds=2, increments=10)
        >>> result = measure_increments(tiny, report=lambda line: None)
        >>> len(result.plain_ns), len(result.inc_ns)
        (2, 2)
    """
    target = _Plain()
    with SharedCounters(2, counters=("frames",)) as counters:
        writer = counters.worker(0)
        loops: dict[str, Callable[[], float]] = {
            "plain": functools.partial(_time_plain, target, settings.increments),
            "inc": functools.partial(_time_inc, writer, settings.increments),
        }
        if writer.compiled:
            # Worker 1's slots, written by the reference implementation.
            python_writer = _PythonWorkerCounters(counters, 1)
            loops["python"] = functools.partial(
                _time_inc, python_writer, settings.increments
            )
        costs: dict[str, list[float]] = {name: [] for name in loops}
        costs["empty"] = []
        for loop in loops.values():
            loop()
        gc.collect()
        gc.disable()
        try:
            names = list(loops)
            for round_index in range(settings.increment_rounds):
                shift = round_index % len(names)
                for name in names[shift:] + names[:shift]:
                    costs[name].append(loops[name]())
                costs["empty"].append(_time_empty(settings.increments))
                python_text = (
                    f", python inc {costs['python'][-1]:.1f} ns"
                    if "python" in costs
                    else ""
                )
                report(
                    f"scale_out (a) round {round_index + 1}/{settings.increment_rounds}: "
                    f"plain {costs['plain'][-1]:.1f} ns, inc {costs['inc'][-1]:.1f} ns"
                    f"{python_text}"
                )
        finally:
            gc.enable()
        expected = settings.increments * (settings.increment_rounds + 1)
        stats = counters.stats()
    stored = [stats["worker_0/frames"]]
    if "python" in loops:
        stored.append(stats["worker_1/frames"])
    if any(count != expected for count in stored) or target.frames != expected:
        raise RuntimeError(
            f"scale_out (a): counted {stored} shared and {target.frames} plain "
            f"increments, expected {expected} of each."
        )
    return IncrementResult(
        tuple(costs["plain"]),
        tuple(costs["inc"]),
        tuple(costs["empty"]),
        tuple(costs.get("python", ())),
    )


# --- (b) stats over many workers ---------------------------------------------


def _wide_counters(workers: int, keys: int) -> SharedCounters:
    half = keys // 2
    counters = SharedCounters(
        workers,
        counters=[f"counter_{index}" for index in range(half)],
        gauges=[f"gauge_{index}" for index in range(keys - half)],
    )
    for index in range(workers):
        writer = counters.worker(index)
        for key in counters.counters:
            writer.inc(key, index + 1)
        for key in counters.gauges:
            writer.set(key, index / 2)
        writer.heartbeat()
    return counters


def measure_shared_stats(
    settings: Settings,
    report: Callable[[str], None] = progress,
    workers: int = STATS_WORKERS,
    keys: int = STATS_KEYS,
) -> tuple[float, ...]:
    """Return, per round, the microseconds of one ``stats()`` over ``workers`` workers x ``keys`` keys.

    Every worker has written every key and beaten its heartbeat, so each
    snapshot carries all of its entries (checked).

    Examples:
        >>> rounds = measure_shared_stats(Settings(stats_rounds=2, stats_calls=3), lambda line: None)
        >>> len(rounds)
        2
    """
    expected_entries = keys + 3 + workers * (keys + 1)  # + workers, alive, finished
    round_us: list[float] = []
    with _wide_counters(workers, keys) as counters:
        stats = counters.stats
        entries = len(stats())
        if entries != expected_entries:
            raise RuntimeError(
                f"scale_out (b): a snapshot has {entries} entries, expected "
                f"{expected_entries}; the benchmark would not measure what it says."
            )
        clock = time.thread_time_ns
        for round_index in range(settings.stats_rounds):
            gc.collect()
            gc.disable()
            try:
                started = clock()
                for _ in range(settings.stats_calls):
                    stats()
                elapsed = clock() - started
            finally:
                gc.enable()
            round_us.append(elapsed / settings.stats_calls / 1000)
            report(
                f"scale_out (b) round {round_index + 1}/{settings.stats_rounds}: "
                f"{round_us[-1]:.1f} us per stats() of {workers} workers x {keys} keys"
            )
    return tuple(round_us)


# --- (c) per-worker snapshots while a collector runs --------------------------


@dataclass(frozen=True)
class SnapshotResult:
    """Latencies of per-worker snapshots, in microseconds, one per call.

    ``shared_us`` and ``torchrl_us`` are taken at the same points, from the
    training loop between batches; ``background_us`` are ``SharedCounters``
    snapshots taken from a background thread while the loop waited for the
    workers to collect.

    Examples:
        >>> result = SnapshotResult((10.0, 20.0), (1000.0, 2000.0), (20.0,))
        >>> result.speed_up
        100.0
    """

    shared_us: tuple[float, ...]
    torchrl_us: tuple[float, ...]
    background_us: tuple[float, ...]

    @property
    def speed_up(self) -> float:
        """Median over calls of TorchRL's latency divided by ``SharedCounters``' at the same point."""
        return statistics.median(
            theirs / ours
            for ours, theirs in zip(self.shared_us, self.torchrl_us, strict=True)
        )

    @property
    def within_budget(self) -> bool:
        """Whether ``SharedCounters`` is at least :data:`SNAPSHOT_BUDGET` times faster."""
        return self.speed_up >= SNAPSHOT_BUDGET


def _counted_cartpole(counters: SharedCounters, worker: int) -> Any:
    from torchrl.envs import GymEnv, TransformedEnv

    from rlpulse.sources.torchrl import SharedCountersTransform

    return TransformedEnv(
        GymEnv("CartPole-v1"), SharedCountersTransform(counters, worker)
    )


def _per_worker_frames(snapshot: dict[str, Any]) -> list[float]:
    return [
        float(snapshot[f"worker_{index}/frames"]) for index in range(COLLECTOR_WORKERS)
    ]


def measure_snapshots(
    settings: Settings, report: Callable[[str], None] = progress
) -> SnapshotResult:
    """Time per-worker snapshots of both kinds while a two-worker ``MultiSyncCollector`` runs.

    The collector iterates in this (the main) thread. After each batch, the
    loop takes one ``SharedCounters.stats()`` and one
    ``collector.stats(workers="both")``, in alternating order (TorchRL's
    per-worker view must be polled from the loop: from a background thread
    while the loop iterates, it deadlocks the collector). A background
    thread meanwhile snapshots the shared counters every few milliseconds,
    while the workers collect. A watchdog kills the workers if the whole run
    overruns ``settings.collector_deadline_s``; the collector is shut down
    whatever happens. Afterwards both views must agree on every worker's
    frames.
    """
    from torchrl.collectors import MultiSyncCollector

    shared_us: list[float] = []
    torchrl_us: list[float] = []
    background_us: list[float] = []
    shared_snapshot: dict[str, Any] = {}
    torchrl_snapshot: dict[str, Any] = {}
    clock = time.perf_counter_ns
    with SharedCounters(COLLECTOR_WORKERS, counters=("frames", "episodes")) as counters:
        collector = MultiSyncCollector(
            [
                functools.partial(_counted_cartpole, counters, index)
                for index in range(COLLECTOR_WORKERS)
            ],
            policy=None,
            frames_per_batch=settings.frames_per_batch,
            total_frames=settings.frames_per_batch * settings.collector_batches,
        )
        overran = threading.Event()

        def kill_workers() -> None:
            overran.set()
            for process in collector.procs:
                process.kill()

        watchdog = threading.Timer(settings.collector_deadline_s, kill_workers)
        watchdog.daemon = True
        collecting = threading.Event()
        stop_polling = threading.Event()

        def poll_in_background() -> None:
            while not stop_polling.wait(settings.background_poll_s):
                if collecting.is_set():
                    started = clock()
                    counters.stats()
                    background_us.append((clock() - started) / 1000)

        poller = threading.Thread(target=poll_in_background, daemon=True)
        try:
            watchdog.start()
            poller.start()
            batches = iter(collector)
            for batch_index in range(settings.collector_batches):
                collecting.set()
                next(batches)
                collecting.clear()
                snapshots: list[tuple[str, Callable[[], dict[str, Any]]]] = [
                    ("shared", counters.stats),
                    ("torchrl", functools.partial(collector.stats, workers="both")),
                ]
                if batch_index % 2:
                    snapshots.reverse()
                for kind, take_snapshot in snapshots:
                    started = clock()
                    snapshot = take_snapshot()
                    latency_us = (clock() - started) / 1000
                    if kind == "shared":
                        shared_us.append(latency_us)
                        shared_snapshot = snapshot
                    else:
                        torchrl_us.append(latency_us)
                        torchrl_snapshot = snapshot
                report(
                    f"scale_out (c) batch {batch_index + 1}/{settings.collector_batches}: "
                    f"SharedCounters {shared_us[-1]:,.1f} us, "
                    f"TorchRL {torchrl_us[-1]:,.1f} us"
                )
        except BaseException as error:
            if overran.is_set():
                raise TimeoutError(
                    f"scale_out (c): the collector run overran its deadline of "
                    f"{settings.collector_deadline_s:.0f} s; its workers were killed."
                ) from error
            raise
        finally:
            watchdog.cancel()
            stop_polling.set()
            poller.join(timeout=5)
            collector.shutdown(timeout=10, raise_on_error=False)
    ours, theirs = (
        _per_worker_frames(shared_snapshot),
        _per_worker_frames(torchrl_snapshot),
    )
    if ours != theirs:
        raise RuntimeError(
            f"scale_out (c): SharedCounters saw per-worker frames {ours}, the "
            f"collector {theirs}; the two views must agree between batches."
        )
    return SnapshotResult(tuple(shared_us), tuple(torchrl_us), tuple(background_us))


# --- (d) SystemStats ----------------------------------------------------------


@dataclass(frozen=True)
class SystemResult:
    """Microseconds of each ``SystemStats.stats()`` call, in CPU time and wall time, and how many GPUs it read.

    The budget holds on CPU time (what a snapshot costs the process); wall
    time adds whatever the shared machine gave to other processes meanwhile.

    Examples:
        >>> calls = tuple(float(us) for us in range(1, 101))
        >>> result = SystemResult(cpu_us=calls, wall_us=calls, gpus=0)
        >>> result.median_us, result.p95_us, result.within_budget
        (50.5, 95.0, True)
    """

    cpu_us: tuple[float, ...]
    wall_us: tuple[float, ...]
    gpus: int

    @property
    def median_us(self) -> float:
        """Median CPU time of one call."""
        return statistics.median(self.cpu_us)

    @property
    def p95_us(self) -> float:
        """95th percentile of the CPU time of one call."""
        return percentile(self.cpu_us, 0.95)

    @property
    def within_budget(self) -> bool:
        """Whether median and 95th percentile are both within :data:`SYSTEM_BUDGET_US`."""
        return max(self.median_us, self.p95_us) <= SYSTEM_BUDGET_US


def measure_system(
    settings: Settings, report: Callable[[str], None] = progress
) -> SystemResult:
    """Time ``SystemStats().stats()`` call by call (GPUs included when NVML can read them).

    Examples:
        >>> result = measure_system(Settings(system_rounds=1, system_calls=2), lambda line: None)
        >>> len(result.cpu_us), len(result.wall_us)
        (2, 2)
    """
    from rlpulse.sources.system import SystemStats

    system = SystemStats()
    system.stats()
    cpu_clock, wall_clock = time.thread_time_ns, time.perf_counter_ns
    cpu_us: list[float] = []
    wall_us: list[float] = []
    for round_index in range(settings.system_rounds):
        for _ in range(settings.system_calls):
            wall_started, cpu_started = wall_clock(), cpu_clock()
            system.stats()
            cpu_us.append((cpu_clock() - cpu_started) / 1000)
            wall_us.append((wall_clock() - wall_started) / 1000)
        report(
            f"scale_out (d) round {round_index + 1}/{settings.system_rounds}: "
            f"last call {cpu_us[-1]:,.1f} us CPU, {wall_us[-1]:,.1f} us wall"
        )
    return SystemResult(tuple(cpu_us), tuple(wall_us), system.gpu_count)


# --- rendering ----------------------------------------------------------------


@dataclass(frozen=True)
class Results:
    """The four parts' results together."""

    increments: IncrementResult
    shared_stats_us: tuple[float, ...]
    wide_stats_us: tuple[float, ...]
    snapshots: SnapshotResult
    system: SystemResult


def _verdict(passed: bool) -> str:
    return "pass" if passed else "**OVER BUDGET**"


def _rows(results: Results) -> list[tuple[str, str, str, bool]]:
    increments = results.increments
    stats_us = statistics.median(results.shared_stats_us)
    wide_stats_us = statistics.median(results.wide_stats_us)
    snapshots = results.snapshots
    system = results.system
    return [
        (
            "(a) `worker(i).inc(key)` / `obj.frames += 1`, same loop",
            f"{statistics.median(increments.inc_ns):.1f} ns / "
            f"{statistics.median(increments.plain_ns):.1f} ns = "
            f"{increments.ratio:.2f}x",
            f"<= {INCREMENT_BUDGET:.1f}x",
            increments.within_budget,
        ),
        (
            f"(b) `SharedCounters.stats()`, {STATS_WORKERS} workers x {STATS_KEYS} keys",
            f"{stats_us:.1f} us",
            f"<= {STATS_BUDGET_US:.0f} us",
            stats_us <= STATS_BUDGET_US,
        ),
        (
            f"(b) `SharedCounters.stats()`, {WIDE_STATS_WORKERS} workers x "
            f"{WIDE_STATS_KEYS} keys",
            f"{wide_stats_us:,.1f} us",
            f"<= {WIDE_STATS_BUDGET_US:,.0f} us",
            wide_stats_us <= WIDE_STATS_BUDGET_US,
        ),
        (
            '(c) per-worker snapshot, TorchRL `stats(workers="both")` / `SharedCounters.stats()`',
            f"{statistics.median(snapshots.torchrl_us):,.1f} us / "
            f"{statistics.median(snapshots.shared_us):,.1f} us = "
            f"{snapshots.speed_up:,.0f}x faster",
            f">= {SNAPSHOT_BUDGET:.0f}x",
            snapshots.within_budget,
        ),
        (
            "(d) `SystemStats().stats()`, CPU time, median / p95",
            f"{system.median_us:,.1f} us / {system.p95_us:,.1f} us",
            f"<= {SYSTEM_BUDGET_US:,.0f} us",
            system.within_budget,
        ),
    ]


def table(results: Results) -> str:
    """Return the markdown table of the four figures, each against its budget."""
    lines = ["| measurement | figure | budget | result |", "|---|---:|---:|---|"]
    lines += [
        f"| {label} | {figure} | {budget} | {_verdict(passed)} |"
        for label, figure, budget, passed in _rows(results)
    ]
    return "\n".join(lines)


def missed_budgets(results: Results) -> list[str]:
    """Return one line per budget the results miss."""
    return [
        f"{label}: {figure}, budget {budget}"
        for label, figure, budget, passed in _rows(results)
        if not passed
    ]


def _latency_table(snapshots: SnapshotResult) -> str:
    rows = [
        (
            'TorchRL `collector.stats(workers="both")`, from the loop',
            snapshots.torchrl_us,
        ),
        ("`SharedCounters.stats()`, from the loop", snapshots.shared_us),
        (
            "`SharedCounters.stats()`, from a background thread while workers collect",
            snapshots.background_us,
        ),
    ]
    lines = [
        "| per-worker snapshot | calls | median us | p95 us | max us |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, values in rows:
        if values:
            lines.append(
                f"| {label} | {len(values):,} | {statistics.median(values):,.1f} "
                f"| {percentile(values, 0.95):,.1f} | {max(values):,.1f} |"
            )
        else:
            lines.append(f"| {label} | 0 |  |  |  |")
    return "\n".join(lines)


def render(results: Results, settings: Settings) -> str:
    """Return this section's markdown: heading, method, tables and machine."""
    import torchrl

    increments = results.increments
    writer_text = (
        "the compiled writer, which rlpulse builds where a C compiler is present"
        if increments.compiled
        else "the pure-Python writer (rlpulse was built without its compiled one, "
        "or `RLPULSE_PURE_PYTHON` is set)"
    )
    python_ratio = increments.python_ratio
    python_text = (
        ""
        if python_ratio is None
        else f""" In the same rounds a third loop ran the pure-Python writer
(`RLPULSE_PURE_PYTHON=1`, or an install without a C compiler):
{statistics.median(increments.python_inc_ns):.1f} ns per increment,
{python_ratio:.2f}x the plain increment."""
    )
    gpus = results.system.gpus
    gpu_text = (
        f"process, host and {gpus} GPU{'s' if gpus != 1 else ''} through NVML"
        if gpus
        else "process and host; no GPU visible to NVML on this machine"
    )
    return reflow(f"""\
## Scale-out: shared per-worker counters and system metrics

What it costs a worker process to count into `SharedCounters`, what it costs
the monitor to read every worker at once, how that compares with asking
TorchRL's multiprocess collector for its per-worker view, and what one
`SystemStats` snapshot costs.

{table(results)}

**(a) Writing.** Identical loops of {settings.increments:,} iterations,
one doing `obj.frames += 1` on an ordinary object, the other
`writer.inc("frames")` with `writer = counters.worker(0)` — {writer_text} —
timed in the CPU time of the calling thread (`time.thread_time_ns`, so that
time the shared machine gives to other processes is not counted) with the
garbage collector off, in {settings.increment_rounds} interleaved rounds (the
order rotating); the ratio is the median over rounds of the two costs in the
same round. Both figures include the loop itself: an empty loop costs
{statistics.median(increments.empty_ns):.1f} ns per iteration here.{python_text}

**(b) Reading many workers.** `stats()` of a `SharedCounters` with
{STATS_WORKERS} workers of {STATS_KEYS} keys each ({STATS_KEYS // 2} counters,
{STATS_KEYS - STATS_KEYS // 2} gauges), every key written and every
heartbeat beaten, so each snapshot carries all
{STATS_KEYS + 3 + STATS_WORKERS * (STATS_KEYS + 1)} entries: {settings.stats_calls}
calls per round in thread CPU time, {settings.stats_rounds} rounds, median
over rounds. The same for {WIDE_STATS_WORKERS} workers of {WIDE_STATS_KEYS}
keys each ({WIDE_STATS_KEYS + 3 + WIDE_STATS_WORKERS * (WIDE_STATS_KEYS + 1):,}
entries a snapshot).

**(c) Per-worker snapshots while a collector runs.** A TorchRL
`MultiSyncCollector` with {COLLECTOR_WORKERS} CartPole workers (random policy,
{settings.frames_per_batch} frames per batch, {settings.collector_batches}
batches), each worker's environment carrying a `SharedCountersTransform`
that writes its frames, episodes and heartbeat into the shared counters.
The main thread iterates the collector; after each batch it takes one
`SharedCounters.stats()` and one `collector.stats(workers="both")`, in
alternating order, each timed on its own in wall time (the latency the
caller sees). TorchRL's per-worker view travels
over each worker's control pipe and may only be asked for from the loop
(polled from a background thread while the loop iterates, it deadlocks the
collector, and rlpulse's background monitor refuses such a watch); between
two batches of a `MultiSyncCollector` the workers are
idle, waiting for the next request, so its figures are a best case — a busy
worker answers only once its batch is done. A background thread meanwhile
snapshots the shared counters every {settings.background_poll_s * 1000:.0f} ms
while the workers collect; its latencies are wall time too, so they include
waiting for the interpreter lock while the main thread holds it (up to the
{sys.getswitchinterval() * 1000:.0f} ms switch interval) and whatever the shared
machine ran meanwhile, but no wait on a worker. The speed-up is the median over batches of the
two latencies at the same point; at the end both views must agree on every
worker's frames.

{_latency_table(results.snapshots)}

**(d) System metrics.** `SystemStats().stats()` ({gpu_text}),
{len(results.system.cpu_us)} calls timed one by one in thread CPU time
(what a snapshot costs; the budget's figure) and in wall time (median
{statistics.median(results.system.wall_us):,.1f} us, p95
{percentile(results.system.wall_us, 0.95):,.1f} us, which adds whatever the
shared machine ran meanwhile).

Measured on {platform.system()} {platform.machine()} ({os.cpu_count()} CPUs), Python
{platform.python_version()}, TorchRL {torchrl.__version__}, rlpulse
{rlpulse.__version__}. Rerun with `python -m benchmarks --only scale_out`.
""")


def run(*, quick: bool = False) -> str:
    """Measure the four parts, print the table, and return the section's markdown."""
    settings = Settings.quick() if quick else Settings()
    results = Results(
        increments=measure_increments(settings),
        shared_stats_us=measure_shared_stats(settings),
        wide_stats_us=measure_shared_stats(
            settings, workers=WIDE_STATS_WORKERS, keys=WIDE_STATS_KEYS
        ),
        snapshots=measure_snapshots(settings),
        system=measure_system(settings),
    )
    print(table(results), flush=True)
    print(_latency_table(results.snapshots), flush=True)
    for line in missed_budgets(results):
        print(f"OVER BUDGET: {line}", file=sys.stdout, flush=True)
    return render(results, settings)
