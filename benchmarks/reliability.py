"""Reliability: what a hung ``stats()``, a slow sink and a sink that never returns cost the rest.

Three measurements, rlpulse's ``LoggerMonitor`` and TorchRL's
(``torchrl.record.loggers.monitoring``) side by side where the case applies,
both in background mode, one after the other in one run:

(a) 20 watches, one of which hangs in ``stats()``: the share of the payloads
    due from the 19 healthy ones that reach the sink.
(b) a sink sleeping one second per call next to a fast one: the share of the
    payloads produced that reach the fast sink.
(c) 100 watches at 10 Hz into a sink that never returns: the resident memory
    of a child process of each monitor, sampled for minutes, once the sink
    queue is full against the end.
"""

from __future__ import annotations

import collections
import contextlib
import inspect
import json
import logging
import os
import platform
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import rlpulse
from benchmarks import progress
from benchmarks.monitor_overhead import AdvancingCollectorLike
from rlpulse.runtime.supervision import MIN_HANDOVER_S

__all__ = [
    "DEFAULT_POLL_TIMEOUT",
    "DEFAULT_QUEUE_SIZE",
    "FLAT_GROWTH",
    "GOAL_SHARE",
    "IMPLEMENTATIONS",
    "BlockingSink",
    "CountingSink",
    "HungResult",
    "HungSource",
    "MemoryResult",
    "MemorySample",
    "SerialSinks",
    "Settings",
    "SinkResult",
    "hung_table",
    "measure_hung_provider",
    "measure_memory",
    "measure_slow_sink",
    "memory_child",
    "memory_table",
    "missed_goals",
    "render",
    "run",
    "sink_table",
]

IMPLEMENTATIONS = ("TorchRL", "rlpulse")
"""The compared monitors, in table order."""

GOAL_SHARE = 0.95
"""The lowest acceptable share of payloads delivered, in cases (a) and (b)."""

FLAT_GROWTH = 0.05
"""Case (c): memory is flat when its peak after the queue filled exceeds the RSS then by less than this share."""

_MONITOR_DEFAULTS = inspect.signature(rlpulse.LoggerMonitor).parameters
DEFAULT_POLL_TIMEOUT: float = _MONITOR_DEFAULTS["poll_timeout"].default
"""rlpulse's default ``poll_timeout``, read from ``LoggerMonitor`` itself."""
DEFAULT_QUEUE_SIZE: int = _MONITOR_DEFAULTS["queue_size"].default
"""rlpulse's default ``queue_size``, read from ``LoggerMonitor`` itself."""

_REPOSITORY = Path(__file__).resolve().parent.parent


class HungSource:
    """A source whose ``stats()`` blocks until :attr:`release` is set: a hung call.

    Examples:
        >>> source = HungSource()
        >>> source.release.set()
        >>> source.stats(), source.calls
        ({'frames': 1}, 1)
    """

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def stats(self) -> dict[str, float]:
        """Block until released, then return a one-entry snapshot."""
        self.calls += 1
        self.release.wait()
        return {"frames": self.calls}


class CountingSink:
    """A sink counting the payloads it receives, per watch (the prefix of their keys).

    Examples:
        >>> sink = CountingSink()
        >>> sink.log_metrics({"a/frames": 1.0})
        >>> sink.log_metrics({"b/frames": 1.0}, step=2)
        >>> sink.total(), sink.total(exclude=("a",))
        (2, 1)
    """

    def __init__(self) -> None:
        self._counts: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        """Count one payload for its watch."""
        watch = next(iter(metrics), "").split("/", 1)[0]
        with self._lock:
            self._counts[watch] += 1

    def total(self, exclude: Sequence[str] = ()) -> int:
        """Payloads received so far, leaving out the watches named in ``exclude``."""
        with self._lock:
            return sum(
                count for watch, count in self._counts.items() if watch not in exclude
            )


class BlockingSink:
    """A sink whose every call blocks ``seconds`` (``None``: until :attr:`release` is set).

    A slow backend (``seconds=1.0``) or a hung one (``None``). Setting
    :attr:`release` makes every call, current and later, return at once, so
    a benchmark can let its queues drain and its threads end.

    Examples:
        >>> sink = BlockingSink(None)
        >>> sink.release.set()
        >>> sink.log_metrics({"a/frames": 1.0})
        >>> sink.calls
        1
    """

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.release = threading.Event()
        self.calls = 0

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        """Block, then drop the payload."""
        self.calls += 1
        self.release.wait(self.seconds)


class SerialSinks:
    """One logger handing each payload to several sinks in turn.

    TorchRL's monitor takes one logger; this is how its user feeds two.
    :attr:`calls` counts the payloads the monitor produced.

    Examples:
        >>> first, second = CountingSink(), CountingSink()
        >>> both = SerialSinks(first, second)
        >>> both.log_metrics({"a/frames": 1.0}, step=1)
        >>> both.calls, first.total(), second.total()
        (1, 1, 1)
    """

    def __init__(self, *sinks: Any) -> None:
        self.sinks = sinks
        self.calls = 0

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        """Hand the payload to every sink, one after the other."""
        self.calls += 1
        for sink in self.sinks:
            sink.log_metrics(metrics, step=step)


def _handover(poll_timeout: float, settings: Settings) -> float:
    # How long rlpulse's round waits on a slow call before moving on.
    return min(poll_timeout, max(settings.poll_interval, MIN_HANDOVER_S))


@dataclass(frozen=True)
class Settings:
    """How long and how much to measure.

    ``duration_s`` is the window of cases (a) and (b), per monitor;
    ``poll_timeouts`` are rlpulse's settings measured in case (a), the goal
    applying to the first; ``memory_*`` configure case (c), whose RSS
    reference is the first sample at least ``memory_settle_s`` after start.

    Examples:
        >>> Settings.quick().memory_duration_s < Settings().memory_duration_s
        True
        >>> Settings(hung_watches=1)
        Traceback (most recent call last):
        ...
        ValueError: hung_watches must be at least 2, got 1.
    """

    duration_s: float = 30.0
    poll_interval: float = 0.1
    hung_watches: int = 20
    poll_timeouts: tuple[float, ...] = (DEFAULT_POLL_TIMEOUT,)
    sink_watches: int = 10
    slow_sink_s: float = 1.0
    memory_watches: int = 100
    memory_duration_s: float = 600.0
    memory_sample_s: float = 5.0
    memory_settle_s: float = 15.0
    progress_every_s: float = 30.0

    def __post_init__(self) -> None:
        if self.hung_watches < 2:
            raise ValueError(
                f"hung_watches must be at least 2, got {self.hung_watches}."
            )
        if not self.poll_timeouts:
            raise ValueError("poll_timeouts needs at least one value.")
        if self.memory_settle_s >= self.memory_duration_s:
            raise ValueError(
                "memory_settle_s must be shorter than memory_duration_s, got "
                f"{self.memory_settle_s} and {self.memory_duration_s}."
            )

    @classmethod
    def quick(cls) -> Settings:
        """Return settings for a smoke run: seconds, not minutes."""
        return cls(
            duration_s=2.0,
            poll_timeouts=(0.2,),
            memory_duration_s=5.0,
            memory_sample_s=0.5,
            memory_settle_s=2.0,
            progress_every_s=2.0,
        )


# -- (a) a hung stats() -----------------------------------------------------


@dataclass(frozen=True)
class HungResult:
    """Case (a) for one monitor: healthy payloads delivered in the window against those due.

    ``poll_timeout`` is ``None`` for TorchRL (it has no such setting);
    ``goal`` says whether :data:`GOAL_SHARE` applies to this row.

    Examples:
        >>> result = HungResult("rlpulse", 1.0, 30.0, 5700.0, 5500, True, 1, ())
        >>> round(result.share, 3), result.within_goal
        (0.965, True)
    """

    monitor: str
    poll_timeout: float | None
    elapsed_s: float
    expected: float
    delivered: int
    goal: bool
    timeouts: int
    warnings: tuple[str, ...]

    @property
    def share(self) -> float:
        """Delivered payloads over expected ones."""
        return self.delivered / self.expected

    @property
    def within_goal(self) -> bool:
        """Whether the share reaches :data:`GOAL_SHARE`."""
        return self.share >= GOAL_SHARE


def measure_hung_provider(
    settings: Settings, report: Callable[[str], None] = progress
) -> tuple[HungResult, ...]:
    """Run case (a) on TorchRL's monitor, then on rlpulse's with each of ``settings.poll_timeouts``.

    Examples:
        >>> tiny = Settings(duration_s=0.3, poll_interval=0.02, hung_watches=3, poll_timeouts=(0.05,))
        >>> results = measure_hung_provider(tiny, report=lambda line: None)
        >>> [(result.monitor, result.poll_timeout) for result in results]
        [('TorchRL', None), ('rlpulse', 0.05)]
    """
    results = [_hung_run("TorchRL", None, settings, goal=False)]
    for index, poll_timeout in enumerate(settings.poll_timeouts):
        results.append(_hung_run("rlpulse", poll_timeout, settings, goal=index == 0))
    for result in results:
        timeout = (
            ""
            if result.poll_timeout is None
            else f" poll_timeout={result.poll_timeout:g}s"
        )
        report(
            f"reliability (a) {result.monitor}{timeout}: {result.delivered:,} of "
            f"{result.expected:,.0f} healthy payloads due ({result.share:.1%})"
        )
    return tuple(results)


def _hung_run(
    implementation: str, poll_timeout: float | None, settings: Settings, *, goal: bool
) -> HungResult:
    hung = HungSource()
    sink = CountingSink()
    if implementation == "TorchRL":
        from torchrl.record.loggers.monitoring import LoggerMonitor

        monitor: Any = LoggerMonitor(sink, poll_interval=settings.poll_interval)
    else:
        monitor = rlpulse.LoggerMonitor(
            sink, poll_interval=settings.poll_interval, poll_timeout=poll_timeout
        )
    hung_index = settings.hung_watches // 2
    for index in range(settings.hung_watches):
        if index == hung_index:
            monitor.watch(hung, name="hung")
        else:
            monitor.watch(AdvancingCollectorLike(), name=f"healthy_{index}")
    with _rlpulse_warnings() as warnings:
        started = time.monotonic()
        monitor.start()
        try:
            time.sleep(settings.duration_s)
            elapsed = time.monotonic() - started
            delivered = sink.total(exclude=("hung",))
        finally:
            # Both monitors' threads end once the call returns.
            hung.release.set()
            monitor.stop(log_final=False)
    if hung.calls == 0:
        raise RuntimeError(
            f"{implementation}: the hung watch was never polled; the benchmark "
            "would not measure what it says."
        )
    timeouts = monitor.stats()["timeouts"] if implementation == "rlpulse" else 0
    return HungResult(
        implementation,
        poll_timeout,
        elapsed,
        (settings.hung_watches - 1) * elapsed / settings.poll_interval,
        delivered,
        goal,
        int(timeouts),
        tuple(warnings),
    )


@contextlib.contextmanager
def _rlpulse_warnings() -> Iterator[list[str]]:
    # Collected for the report instead of printed (no handler means
    # logging's last resort prints them to standard error).
    messages: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    handler = Collect(logging.WARNING)
    rlpulse_logger = logging.getLogger("rlpulse")
    rlpulse_logger.addHandler(handler)
    try:
        yield messages
    finally:
        rlpulse_logger.removeHandler(handler)


# -- (b) a slow sink next to a fast one --------------------------------------


@dataclass(frozen=True)
class SinkResult:
    """Case (b) for one monitor: what the fast sink got, of the payloads produced and due.

    Examples:
        >>> result = SinkResult("rlpulse", 30.0, 3000.0, 2990, 2990, 31, 1959, ())
        >>> result.share_of_produced, round(result.share_of_expected, 3), result.within_goal
        (1.0, 0.997, True)
    """

    monitor: str
    elapsed_s: float
    expected: float
    produced: int
    fast_delivered: int
    slow_calls: int
    dropped: int
    warnings: tuple[str, ...]

    @property
    def share_of_produced(self) -> float:
        """The fast sink's payloads over the payloads the monitor produced."""
        return self.fast_delivered / self.produced if self.produced else 0.0

    @property
    def share_of_expected(self) -> float:
        """The fast sink's payloads over those due (watches × window / poll interval)."""
        return self.fast_delivered / self.expected

    @property
    def within_goal(self) -> bool:
        """Whether the share of produced payloads reaches :data:`GOAL_SHARE`."""
        return self.share_of_produced >= GOAL_SHARE


def measure_slow_sink(
    settings: Settings, report: Callable[[str], None] = progress
) -> tuple[SinkResult, ...]:
    """Run case (b) on TorchRL's monitor, then on rlpulse's.

    Examples:
        >>> tiny = Settings(duration_s=0.3, poll_interval=0.02, sink_watches=2, slow_sink_s=0.1)
        >>> results = measure_slow_sink(tiny, report=lambda line: None)
        >>> [result.monitor for result in results]
        ['TorchRL', 'rlpulse']
    """
    results = tuple(
        _slow_sink_run(implementation, settings) for implementation in IMPLEMENTATIONS
    )
    for result in results:
        report(
            f"reliability (b) {result.monitor}: fast sink got {result.fast_delivered:,} "
            f"of {result.produced:,} payloads produced ({result.share_of_produced:.1%}), "
            f"{result.expected:,.0f} due ({result.share_of_expected:.1%})"
        )
    return results


def _slow_sink_run(implementation: str, settings: Settings) -> SinkResult:
    slow = BlockingSink(settings.slow_sink_s)
    fast = CountingSink()
    serial = SerialSinks(slow, fast)
    if implementation == "TorchRL":
        from torchrl.record.loggers.monitoring import LoggerMonitor

        monitor: Any = LoggerMonitor(serial, poll_interval=settings.poll_interval)
    else:
        monitor = rlpulse.LoggerMonitor(
            [slow, fast], poll_interval=settings.poll_interval
        )
    for index in range(settings.sink_watches):
        monitor.watch(AdvancingCollectorLike(), name=f"source_{index}")
    with _rlpulse_warnings() as warnings:
        started = time.monotonic()
        monitor.start()
        try:
            time.sleep(settings.duration_s)
            elapsed = time.monotonic() - started
            fast_delivered = fast.total()
            slow_calls = slow.calls
            if implementation == "TorchRL":
                produced, dropped = serial.calls, 0
            else:
                stats = monitor.stats()
                produced, dropped = int(stats["logged"]), int(stats["dropped"])
        finally:
            # The slow sink's pending calls return at once: queues drain.
            slow.release.set()
            monitor.stop(log_final=False)
    return SinkResult(
        implementation,
        elapsed,
        settings.sink_watches * elapsed / settings.poll_interval,
        produced,
        fast_delivered,
        slow_calls,
        dropped,
        tuple(warnings),
    )


# -- (c) memory with a sink that never returns --------------------------------


@dataclass(frozen=True)
class MemorySample:
    """One sample of a memory child: its RSS and its monitor's counters at ``elapsed_s``.

    ``produced`` counts the payloads the monitor produced (for TorchRL, the
    calls its sink received); ``queued`` and ``dropped`` are rlpulse's.

    Examples:
        >>> MemorySample(5.0, 30_000_000, 5000, 1000, 4000).rss_mb
        30.0
    """

    elapsed_s: float
    rss: int
    produced: int
    queued: int
    dropped: int

    @property
    def rss_mb(self) -> float:
        """RSS in megabytes (10⁶ bytes)."""
        return self.rss / 1e6


@dataclass(frozen=True)
class MemoryResult:
    """Case (c) for one monitor: its child's samples, from start to end.

    The reference is the first sample at least ``settle_s`` after start
    (rlpulse's queue is full by then); ``growth`` is the highest RSS
    sampled from then on minus the reference.

    Examples:
        >>> samples = (MemorySample(0.0, 20_000_000, 0, 0, 0),
        ...            MemorySample(10.0, 30_000_000, 10_000, 1000, 9000),
        ...            MemorySample(600.0, 30_500_000, 600_000, 1000, 599_000))
        >>> result = MemoryResult("rlpulse", samples, settle_s=10.0, goal=True)
        >>> result.reference.elapsed_s, result.growth_mb, round(result.growth_share, 3)
        (10.0, 0.5, 0.017)
        >>> result.flat
        True
    """

    monitor: str
    samples: tuple[MemorySample, ...]
    settle_s: float
    goal: bool

    @property
    def reference(self) -> MemorySample:
        """The first sample at least ``settle_s`` after start."""
        for sample in self.samples:
            if sample.elapsed_s >= self.settle_s:
                return sample
        raise RuntimeError(
            f"{self.monitor}: no memory sample {self.settle_s:g} s after start; "
            "the child ended early."
        )

    @property
    def end(self) -> MemorySample:
        """The last sample."""
        return self.samples[-1]

    @property
    def peak(self) -> MemorySample:
        """The sample with the highest RSS from the reference on."""
        reference = self.reference
        return max(
            (s for s in self.samples if s.elapsed_s >= reference.elapsed_s),
            key=lambda sample: sample.rss,
        )

    @property
    def growth_mb(self) -> float:
        """Peak RSS from the reference on, minus the reference's, in MB."""
        return self.peak.rss_mb - self.reference.rss_mb

    @property
    def growth_share(self) -> float:
        """:attr:`growth_mb` over the reference's RSS."""
        return self.growth_mb / self.reference.rss_mb

    @property
    def flat(self) -> bool:
        """Whether the growth stays under :data:`FLAT_GROWTH`."""
        return self.growth_share < FLAT_GROWTH


def memory_child(arguments: Sequence[str]) -> None:
    """Run one memory child: a monitor into a sink that never returns, one JSON line per sample.

    ``arguments`` holds one JSON object: ``implementation``, ``watches``,
    ``poll_interval``, ``duration_s``, ``sample_s``. Prints a
    :class:`MemorySample` as JSON every ``sample_s`` seconds on standard
    output, then releases the sink and stops the monitor.
    """
    import psutil

    config = json.loads(arguments[0])
    sink = BlockingSink(None)
    serial = SerialSinks(sink)
    if config["implementation"] == "TorchRL":
        from torchrl.record.loggers.monitoring import LoggerMonitor

        monitor: Any = LoggerMonitor(serial, poll_interval=config["poll_interval"])
    else:
        monitor = rlpulse.LoggerMonitor(sink, poll_interval=config["poll_interval"])
    for index in range(config["watches"]):
        monitor.watch(AdvancingCollectorLike(), name=f"w{index}")
    process = psutil.Process()
    started = next_sample = time.monotonic()
    monitor.start()
    try:
        while True:
            elapsed = time.monotonic() - started
            if config["implementation"] == "TorchRL":
                produced, queued, dropped = serial.calls, 0, 0
            else:
                stats = monitor.stats()
                produced = int(stats["logged"])
                queued, dropped = int(stats["queued"]), int(stats["dropped"])
            sample = MemorySample(
                elapsed, process.memory_info().rss, produced, queued, dropped
            )
            print(json.dumps(asdict(sample)), flush=True)
            if elapsed >= config["duration_s"]:
                break
            next_sample += config["sample_s"]
            time.sleep(max(0.0, next_sample - time.monotonic()))
    finally:
        sink.release.set()
        monitor.stop(log_final=False)


class _Child:
    """One memory child process and the thread reading its samples."""

    def __init__(self, implementation: str, settings: Settings) -> None:
        self.implementation = implementation
        config = {
            "implementation": implementation,
            "watches": settings.memory_watches,
            "poll_interval": settings.poll_interval,
            "duration_s": settings.memory_duration_s,
            "sample_s": settings.memory_sample_s,
        }
        environment = dict(os.environ)
        environment["PYTHONPATH"] = os.pathsep.join(
            filter(None, (str(_REPOSITORY), environment.get("PYTHONPATH")))
        )
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys; from benchmarks.reliability import memory_child; "
                "memory_child(sys.argv[1:])",
                json.dumps(config),
            ],
            stdout=subprocess.PIPE,
            text=True,
            env=environment,
        )
        self.samples: list[MemorySample] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.samples.append(MemorySample(**json.loads(line)))

    @property
    def running(self) -> bool:
        return self.process.poll() is None or self._reader.is_alive()

    def describe(self) -> str:
        if not self.samples:
            return f"{self.implementation} starting"
        last = self.samples[-1]
        text = (
            f"{self.implementation} at {last.elapsed_s:,.0f} s: {last.rss_mb:,.1f} MB, "
            f"payloads produced {last.produced:,}"
        )
        if self.implementation == "rlpulse":
            text += f", {last.queued:,} queued, {last.dropped:,} dropped"
        return text

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def measure_memory(
    settings: Settings, report: Callable[[str], None] = progress
) -> tuple[MemoryResult, ...]:
    """Run case (c): one child process per monitor, both at once, sampled until they end.

    Reports progress every ``settings.progress_every_s``. Raises
    :class:`RuntimeError` when a child fails, outlives its duration by
    three minutes, or when rlpulse's queue was not full at the reference
    sample (the benchmark would not measure what it says).
    """
    children = [_Child(implementation, settings) for implementation in IMPLEMENTATIONS]
    deadline = time.monotonic() + settings.memory_duration_s + 180
    next_report = time.monotonic() + settings.progress_every_s
    try:
        while any(child.running for child in children):
            time.sleep(0.1)
            now = time.monotonic()
            if now >= deadline:
                raise RuntimeError(
                    "A memory child outlived its duration by three minutes."
                )
            if now >= next_report:
                next_report += settings.progress_every_s
                report(
                    f"reliability (c) memory, {settings.memory_duration_s:,.0f} s each: "
                    + "; ".join(child.describe() for child in children)
                )
    finally:
        for child in children:
            child.kill()
    for child in children:
        if child.process.returncode != 0:
            raise RuntimeError(
                f"The {child.implementation} memory child exited with "
                f"{child.process.returncode}."
            )
    results = tuple(
        MemoryResult(
            child.implementation,
            tuple(child.samples),
            settings.memory_settle_s,
            goal=child.implementation == "rlpulse",
        )
        for child in children
    )
    _check_queue_full(results[-1])
    return results


def _check_queue_full(result: MemoryResult) -> None:
    reference = result.reference
    if reference.queued < DEFAULT_QUEUE_SIZE or reference.dropped == 0:
        raise RuntimeError(
            f"rlpulse's sink queue held {reference.queued} payloads and had dropped "
            f"{reference.dropped} at {reference.elapsed_s:.1f} s, not full; the "
            "benchmark would not measure what it says."
        )


# -- report --------------------------------------------------------------------


def missed_goals(
    hung: Sequence[HungResult],
    sinks: Sequence[SinkResult],
    memory: Sequence[MemoryResult],
) -> list[str]:
    """Return one line per goal rlpulse misses.

    Examples:
        >>> missed_goals([HungResult("rlpulse", 1.0, 30.0, 5700.0, 5000, True, 1, ())], [], [])
        ['(a) rlpulse poll_timeout=1s: 87.7% of the healthy payloads due, goal >= 95%']
    """
    lines = [
        f"(a) rlpulse poll_timeout={result.poll_timeout:g}s: {result.share:.1%} of "
        f"the healthy payloads due, goal >= {GOAL_SHARE:.0%}"
        for result in hung
        if result.goal and not result.within_goal
    ]
    lines += [
        f"(b) rlpulse: the fast sink got {result.share_of_produced:.1%} of the "
        f"payloads produced, goal >= {GOAL_SHARE:.0%}"
        for result in sinks
        if result.monitor == "rlpulse" and not result.within_goal
    ]
    lines += [
        f"(c) rlpulse: RSS grew {result.growth_mb:,.1f} MB ({result.growth_share:.1%}) "
        f"after the queue filled, goal < {FLAT_GROWTH:.0%}"
        for result in memory
        if result.goal and not result.flat
    ]
    return lines


def _verdict(goal: bool, met: bool) -> tuple[str, str]:
    if not goal:
        return "", ""
    return f">= {GOAL_SHARE:.0%}", "pass" if met else "**OVER BUDGET**"


def hung_table(results: Sequence[HungResult]) -> str:
    """Return the markdown table of case (a).

    Examples:
        >>> print(hung_table([HungResult("TorchRL", None, 30.0, 5700.0, 10, False, 0, ())]))
        | monitor | `poll_timeout` | healthy payloads due | delivered | share | goal | result |
        |---|---:|---:|---:|---:|---:|---|
        | TorchRL | (none) | 5,700 | 10 | 0.2% |  |  |
    """
    lines = [
        "| monitor | `poll_timeout` | healthy payloads due | delivered | share "
        "| goal | result |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for result in results:
        timeout = (
            "(none)" if result.poll_timeout is None else f"{result.poll_timeout:g} s"
        )
        if result.poll_timeout == DEFAULT_POLL_TIMEOUT:
            timeout += " (default)"
        goal, verdict = _verdict(result.goal, result.within_goal)
        if not result.goal and result.monitor == "rlpulse":
            goal = "for information"
        lines.append(
            f"| {result.monitor} | {timeout} | {result.expected:,.0f} "
            f"| {result.delivered:,} | {result.share:.1%} | {goal} | {verdict} |"
        )
    return "\n".join(lines)


def sink_table(results: Sequence[SinkResult]) -> str:
    """Return the markdown table of case (b).

    Examples:
        >>> print(sink_table([SinkResult("TorchRL", 30.0, 3000.0, 30, 30, 30, 0, ())]))  # doctest: +NORMALIZE_WHITESPACE
        | monitor | payloads due | produced | slow sink calls | dropped | fast sink got | of produced | of due | goal | result |
        |---|---:|---:|---:|---:|---:|---:|---:|---:|---|
        | TorchRL | 3,000 | 30 | 30 | (none) | 30 | 100.0% | 1.0% |  |  |
    """
    lines = [
        "| monitor | payloads due | produced | slow sink calls | dropped "
        "| fast sink got | of produced | of due | goal | result |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for result in results:
        rlpulse_row = result.monitor == "rlpulse"
        goal, verdict = _verdict(rlpulse_row, result.within_goal)
        dropped = f"{result.dropped:,}" if rlpulse_row else "(none)"
        lines.append(
            f"| {result.monitor} | {result.expected:,.0f} | {result.produced:,} "
            f"| {result.slow_calls:,} | {dropped} | {result.fast_delivered:,} "
            f"| {result.share_of_produced:.1%} | {result.share_of_expected:.1%} "
            f"| {goal} | {verdict} |"
        )
    return "\n".join(lines)


def memory_table(results: Sequence[MemoryResult]) -> str:
    """Return the markdown table of case (c).

    Examples:
        >>> samples = (MemorySample(15.0, 30_000_000, 15_000, 1000, 14_000),
        ...            MemorySample(600.0, 33_000_000, 600_000, 1000, 599_000))
        >>> print(memory_table([MemoryResult("rlpulse", samples, 15.0, True)]))  # doctest: +NORMALIZE_WHITESPACE
        | monitor | payloads produced | dropped | RSS at 15 s | RSS at end | peak RSS since | growth | goal | result |
        |---|---:|---:|---:|---:|---:|---:|---:|---|
        | rlpulse | 600,000 | 599,000 | 30.0 MB | 33.0 MB | 33.0 MB | +3.0 MB (+10.0%) | < 5% | **OVER BUDGET** |
    """
    lines = [
        "| monitor | payloads produced | dropped | RSS at "
        f"{results[0].settle_s:g} s | RSS at end | peak RSS since | growth | goal "
        "| result |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for result in results:
        goal = verdict = ""
        if result.goal:
            goal = f"< {FLAT_GROWTH:.0%}"
            verdict = "pass" if result.flat else "**OVER BUDGET**"
        dropped = f"{result.end.dropped:,}" if result.monitor == "rlpulse" else "(none)"
        lines.append(
            f"| {result.monitor} | {result.end.produced:,} | {dropped} "
            f"| {result.reference.rss_mb:,.1f} MB | {result.end.rss_mb:,.1f} MB "
            f"| {result.peak.rss_mb:,.1f} MB | {result.growth_mb:+,.1f} MB "
            f"({result.growth_share:+.1%}) | {goal} | {verdict} |"
        )
    return "\n".join(lines)


def render(
    hung: Sequence[HungResult],
    sinks: Sequence[SinkResult],
    memory: Sequence[MemoryResult],
    settings: Settings,
) -> str:
    """Return this section's markdown: heading, the three cases, the machine.

    Examples:
        >>> hung = [HungResult("rlpulse", 1.0, 30.0, 5700.0, 5500, True, 1, ("a warning",))]
        >>> sinks = [SinkResult("rlpulse", 30.0, 3000.0, 2990, 2990, 31, 1959, ())]
        >>> samples = (MemorySample(15.0, 30_000_000, 1, 1000, 1),)
        >>> memory = [MemoryResult("rlpulse", samples, 15.0, True)]
        >>> markdown = render(hung, sinks, memory, Settings())
        >>> print(markdown.splitlines()[0])
        ## Reliability: a hung `stats()`, a slow sink, a sink that never returns
        >>> [line for line in markdown.splitlines() if line.startswith("###")]  # doctest: +NORMALIZE_WHITESPACE
        ['### (a) One hung `stats()` among 20 watches', '### (b) A slow sink next to a fast one',
         '### (c) Memory while a sink never returns']
    """
    import torchrl

    interval = f"`poll_interval={settings.poll_interval:g}`"
    common = (
        "What a misbehaving source or sink costs everything else, for rlpulse's "
        "`LoggerMonitor` and TorchRL's (`torchrl.record.loggers.monitoring`), "
        f"both in background mode with {interval} and no schedule (every poll "
        "of every watch is due), one monitor after the other in one process "
        "(case c: two child processes at once). The healthy sources are the "
        "collector-like ones of the monitor-overhead section (six-key "
        "`stats()`, counters advancing per call). Payloads due are watches × "
        "window / `poll_interval`; a round takes a little longer than "
        "`poll_interval` (both monitors wait `poll_interval` after a round "
        "ends, not from when it started), so even an undisturbed monitor "
        "delivers slightly under 100 %. The goals apply to rlpulse; "
        "TorchRL's figures show what the same situation does to its monitor."
    )
    timeouts = settings.poll_timeouts
    hung_text = (
        f"{settings.hung_watches} watches; the one at position "
        f"{settings.hung_watches // 2 + 1} has a `stats()` that blocks on an "
        "event from its first call, released only after the window. Over a "
        f"{settings.duration_s:g} s window per monitor, the sink counts the "
        f"payloads of the {settings.hung_watches - 1} healthy watches. "
        f"rlpulse runs with `poll_timeout={timeouts[0]:g}` (the goal applies "
        "to that row)"
        + (
            f" and with its default `poll_timeout={DEFAULT_POLL_TIMEOUT:g}`"
            if DEFAULT_POLL_TIMEOUT in timeouts[1:]
            else ""
        )
        + ". Once the call has held the round up for about a `poll_interval` "
        f"(at least {MIN_HANDOVER_S * 1000:.0f} ms, at most `poll_timeout`), "
        "rlpulse's watchdog has a new worker thread carry on with the rest of "
        "the round, and the hung watch is skipped until its call returns "
        "(warned about and counted once it overruns `poll_timeout`): the "
        "healthy watches lose about one hand-over delay of polls, once, so "
        f"over a {settings.duration_s:g} s window one expects about "
        + ", ".join(
            f"{max(0.0, 1 - _handover(timeout, settings) / settings.duration_s):.1%}"
            f" with `poll_timeout={timeout:g}`"
            for timeout in timeouts
        )
        + ", and more the longer the run. TorchRL's monitor polls its watches "
        "one after the other on one thread, so its first round stops at the "
        "hung call: it delivers the healthy watches before it once, then "
        "nothing."
    )
    sink_text = (
        f"{settings.sink_watches} watches; two sinks: one whose `log_metrics` "
        f"sleeps {settings.slow_sink_s:g} s per call, listed first, and a fast "
        "one counting payloads. rlpulse gets both "
        "(`LoggerMonitor([slow, fast], ...)`, each fed from its own queue of "
        f"{DEFAULT_QUEUE_SIZE:,}); TorchRL's monitor takes one logger, so it "
        "gets one object whose `log_metrics` calls the slow sink then the fast "
        "one, which is what its user would write. Over a "
        f"{settings.duration_s:g} s window per monitor: payloads produced "
        '(rlpulse: `stats()["logged"]`; TorchRL: calls of its logger), the '
        "fast sink's count, its share of those produced (the goal) and of "
        "those due. TorchRL's fast sink gets everything produced because its "
        "monitor produces only one payload per slow call."
    )
    memory_text = (
        f"{settings.memory_watches} watches at {1 / settings.poll_interval:g} Hz "
        "into a sink whose `log_metrics` never returns, for "
        f"{settings.memory_duration_s:g} s, each monitor in a child process of "
        "its own (both at once) so that its resident set size (RSS, from "
        f"psutil every {settings.memory_sample_s:g} s) is its own; the TorchRL "
        "child imports torch, hence its size. rlpulse's queue "
        f"({DEFAULT_QUEUE_SIZE:,} payloads) is full within seconds and drops "
        "its oldest payload for each new one; the benchmark checks it is full "
        f"at the reference sample, the first at least {settings.memory_settle_s:g} s "
        "after start. Flat means the highest RSS sampled from the reference "
        f"on exceeds the reference by less than {FLAT_GROWTH:.0%} (the growth "
        "column). TorchRL's monitor blocks in its first sink call and polls "
        "nothing more, so its memory is flat for that reason."
    )
    warnings = _warnings_text(hung, sinks)
    machine = (
        f"Measured on {platform.system()} {platform.machine()} "
        f"({os.cpu_count()} CPUs), Python {platform.python_version()}, "
        f"TorchRL {torchrl.__version__}, rlpulse {rlpulse.__version__}."
    )
    parts = [
        "## Reliability: a hung `stats()`, a slow sink, a sink that never returns",
        _paragraph(common),
        f"### (a) One hung `stats()` among {settings.hung_watches} watches",
        _paragraph(hung_text),
        hung_table(hung),
        "### (b) A slow sink next to a fast one",
        _paragraph(sink_text),
        sink_table(sinks),
        "### (c) Memory while a sink never returns",
        _paragraph(memory_text),
        memory_table(memory),
    ]
    if warnings:
        parts.append(warnings)
    parts.append(
        _paragraph(machine) + "\nRerun with `python -m benchmarks --only reliability`."
    )
    return "\n\n".join(parts) + "\n"


def _warnings_text(hung: Sequence[HungResult], sinks: Sequence[SinkResult]) -> str:
    lines = []
    for label, results in (("(a)", hung), ("(b)", sinks)):
        for result in results:
            for message in dict.fromkeys(result.warnings):
                lines.append(f"- {label} {result.monitor}: {message}")
    if not lines:
        return ""
    return (
        "rlpulse's warnings during the windows (each distinct one once):\n\n"
        + "\n".join(lines)
    )


def _paragraph(text: str) -> str:
    return textwrap.fill(text, width=79, break_on_hyphens=False)


def run(*, quick: bool = False) -> str:
    """Measure the three cases, print the tables, and return the section's markdown."""
    settings = Settings.quick() if quick else Settings()
    hung = measure_hung_provider(settings)
    sinks = measure_slow_sink(settings)
    memory = measure_memory(settings)
    print(
        f"(a)\n{hung_table(hung)}\n(b)\n{sink_table(sinks)}\n(c)\n{memory_table(memory)}",
        flush=True,
    )
    for line in missed_goals(hung, sinks, memory):
        print(f"OVER BUDGET: {line}", file=sys.stdout, flush=True)
    return render(hung, sinks, memory, settings)
