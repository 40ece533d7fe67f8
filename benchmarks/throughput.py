"""Sustained sink throughput: the payload rate each sink keeps up with behind a background monitor.

Three measurements, in one process:

(a) every sink alone, ``log_metrics`` called in a loop, one payload a call —
    for TorchRL's ``CSVLogger`` the ratio in the last column;
(b) every sink behind rlpulse's background monitor: 100 watches of
    collector-like sources polled every ``poll_interval`` into that one sink,
    the interval searched downwards (halving, then bisecting) for the highest
    payload rate at which its queue drops nothing and the sink stores every
    payload logged;
(c) what 1,000 payloads a second into ``SQLiteLogger`` cost the process: a
    background monitor of 100 watches at ``poll_interval=0.1`` beside a main
    thread that sleeps, in process CPU time, against the same process without
    a monitor;
(d) TorchRL's own ``LoggerMonitor`` with the same 100 watches into its
    ``CSVLogger``, polling as fast as it goes: the payloads a second it
    delivers, the reference of the budget on (b).

The sinks take turns trial by trial, and the three parts round by round, so
that the drifts of a shared machine hit them alike; figures are medians over
rounds.
"""

from __future__ import annotations

import contextlib
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import rlpulse
from benchmarks import progress, reflow
from benchmarks.monitor_overhead import AdvancingCollectorLike
from benchmarks.sinks import REFERENCE, SINKS, SinkCase

__all__ = [
    "CASES",
    "CPU_BUDGET",
    "CPU_INTERVAL_S",
    "METRICS_PER_PAYLOAD",
    "SINK_PROCESS",
    "SPEED_UP_BUDGET",
    "SQLITE",
    "WATCHES",
    "CpuResult",
    "Results",
    "SearchOutcome",
    "Settings",
    "ThroughputCase",
    "Trial",
    "measure",
    "measure_cpu",
    "measure_loop",
    "missed_budgets",
    "rate_search",
    "render",
    "run",
    "run_trial",
    "table",
]

WATCHES = 100
"""Watches of every monitor in (b) and (c): the distinct payloads a sink receives."""

METRICS_PER_PAYLOAD = len(AdvancingCollectorLike().stats())
"""Metrics in each payload: a collector's six-key snapshot, logged without rates."""

SPEED_UP_BUDGET = 2.0
"""``SQLiteLogger`` behind rlpulse's monitor must sustain this many times what TorchRL's ``CSVLogger`` gets behind TorchRL's monitor (d)."""

TORCHRL_INTERVAL_S = 0.001
"""(d): TorchRL's monitor's poll interval, shorter than a round of 100 polls takes: as fast as it goes."""

CPU_INTERVAL_S = 0.1
"""(c): 100 watches every 0.1 s, about 1,000 payloads a second."""

CPU_BUDGET = 0.03
"""(c): the share of one core those payloads may cost."""

SQLITE = "rlpulse `SQLiteLogger`"

SINK_PROCESS = "rlpulse `SinkProcess` (`sqlite:`)"


@dataclass(frozen=True)
class ThroughputCase:
    """One measured sink: the sink (as the sink-cost section opens it) and how to count what it stored.

    ``stored`` receives the sink's directory after the sink is closed and
    returns how many payloads it holds; ``None`` where the format has no
    cheap reader (TensorBoard's event files).

    Examples:
        >>> CASES[0].label
        'rlpulse `SQLiteLogger`'
    """

    sink: SinkCase
    stored: Callable[[Path], int] | None

    @property
    def label(self) -> str:
        """The sink's label, as in the sink-cost section."""
        return self.sink.label


def _payloads_of(metrics: Callable[[Path], int]) -> Callable[[Path], int]:
    def count(directory: Path) -> int:
        stored = metrics(directory)
        if stored % METRICS_PER_PAYLOAD:
            raise RuntimeError(
                f"{directory} holds {stored} metrics, not a whole number of "
                f"{METRICS_PER_PAYLOAD}-metric payloads."
            )
        return stored // METRICS_PER_PAYLOAD

    return count


def _console_lines(directory: Path) -> int:
    # A payload starts a line with its time stamp; lines fitted to the
    # width go on indented; an event's line has its mark after the time
    # stamp (the monitor's stopped, last).
    with open(directory / "console.log", "rb") as stream:
        return sum(
            1
            for line in stream
            if not line.startswith(b" ") and line[9:12] not in _EVENT_MARKS
        )


_EVENT_MARKS = (b"ok ", b"!! ", b"=> ")


def _torchrl_csv_lines(directory: Path) -> int:
    # One file per metric, one line per logged value.
    total = 0
    for path in directory.rglob("*.csv"):
        with open(path, "rb") as stream:
            total += sum(1 for _ in stream)
    return total


def _case(label: str, stored: Callable[[Path], int] | None) -> ThroughputCase:
    by_label = {case.label: case for case in SINKS}
    return ThroughputCase(by_label[label], stored)


def _sink_process(directory: Path, stack: contextlib.ExitStack) -> Any:
    # The same SQLite file, written by a child process: this process encodes
    # each batch and writes it into a pipe.
    return stack.enter_context(
        rlpulse.SinkProcess(f"sqlite:{directory / 'metrics.sqlite'}")
    )


def _read_back(label: str) -> Callable[[Path], int]:
    read_back = {case.label: case for case in SINKS}[label].read_back
    assert read_back is not None
    return _payloads_of(read_back)


CASES: tuple[ThroughputCase, ...] = (
    _case(SQLITE, _read_back(SQLITE)),
    ThroughputCase(
        SinkCase(SINK_PROCESS, _sink_process),
        _read_back(SQLITE),
    ),
    _case("rlpulse `CSVLogger`", _read_back("rlpulse `CSVLogger`")),
    _case("rlpulse `JSONLLogger`", _read_back("rlpulse `JSONLLogger`")),
    _case("rlpulse `ConsoleLogger` (to a file)", _console_lines),
    _case("rlpulse `TensorBoardLogger`", None),
    _case(REFERENCE, _payloads_of(_torchrl_csv_lines)),
)
"""Every measured sink, in table order; TorchRL's ``CSVLogger`` is the reference."""


@dataclass(frozen=True)
class Settings:
    """How much to measure: rounds, the windows of trials and loops, the search's steps, the CPU windows.

    A trial (and a loop) lasts until it has logged ``window_payloads`` and
    ``min_window_s`` has passed, or until ``max_window_s``: long enough for
    ``SQLiteLogger`` to checkpoint its write-ahead log several times (every
    10,000 rows, about 1,700 of these payloads), which a sustained rate must
    absorb.

    Examples:
        >>> Settings.quick().rounds < Settings().rounds
        True
    """

    rounds: int = 3
    warmup_s: float = 0.25
    window_payloads: int = 30_000
    min_window_s: float = 0.5
    max_window_s: float = 6.0
    start_interval_s: float = 0.01
    min_interval_s: float = 1e-4
    max_interval_s: float = 1.0
    bisections: int = 2
    cpu_s: float = 3.0
    watches: int = WATCHES

    @classmethod
    def quick(cls) -> Settings:
        """Return settings for a smoke run: one round of short trials, a coarse search."""
        return cls(
            rounds=1,
            warmup_s=0.05,
            window_payloads=100,
            min_window_s=0.05,
            max_window_s=0.2,
            start_interval_s=0.002,
            min_interval_s=1e-3,
            bisections=0,
            cpu_s=0.2,
            watches=10,
        )


# --- (a) a sink alone, called in a loop ---------------------------------------


def _loop_payloads(watches: int, count: int) -> list[tuple[dict[str, float], int]]:
    sources = [AdvancingCollectorLike() for _ in range(watches)]
    payloads = []
    for index in range(count):
        snapshot = sources[index % watches].stats()
        payloads.append(
            (
                {
                    f"collector_{index % watches}/{key}": float(value)
                    for key, value in snapshot.items()
                },
                int(snapshot["frames"]),
            )
        )
    return payloads


def measure_loop(case: ThroughputCase, settings: Settings) -> float:
    """Return the payloads per second ``case``'s sink takes with ``log_metrics`` called in a loop.

    The payloads are built beforehand: those of ``settings.watches`` watches
    in turn, as a monitor would log them. One untimed pass over every watch
    first (TorchRL's ``CSVLogger`` opens a file per metric on first use);
    then chunks of payloads for a window (see :class:`Settings`). A fresh
    sink in a temporary directory, checked afterwards to hold everything.

    Examples:
        >>> tiny = Settings(window_payloads=10, min_window_s=0.0, watches=2)
        >>> measure_loop(CASES[1], tiny) > 0
        True
    """
    chunk = _loop_payloads(settings.watches, max(200, settings.watches))
    clock = time.perf_counter
    with contextlib.ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        with contextlib.ExitStack() as sink_stack:
            sink = case.sink.open(directory, sink_stack)
            log_metrics = sink.log_metrics
            now = time.time()
            if case.sink.takes_timestamp:

                def log(payload: dict[str, float], step: int) -> None:
                    log_metrics(payload, step=step, timestamp=now)

            else:

                def log(payload: dict[str, float], step: int) -> None:
                    log_metrics(payload, step=step)

            for payload, step in chunk[: settings.watches]:
                log(payload, step)
            started = clock()
            timed = 0
            while True:
                for payload, step in chunk:
                    log(payload, step)
                timed += len(chunk)
                elapsed = clock() - started
                if _window_over(settings, timed, elapsed):
                    break
        _check_stored(case, directory, settings.watches + timed)
    os.sync()
    return timed / elapsed


def _window_over(settings: Settings, payloads: float, elapsed_s: float) -> bool:
    if elapsed_s >= settings.max_window_s:
        return True
    return payloads >= settings.window_payloads and elapsed_s >= settings.min_window_s


def _check_stored(case: ThroughputCase, directory: Path, expected: int) -> None:
    if case.stored is None:
        return
    stored = case.stored(directory)
    if stored != expected:
        raise RuntimeError(
            f"{case.label} stored {stored} payloads, expected {expected}; "
            "the benchmark would not measure what it says."
        )


# --- (b) a sink behind the background monitor ----------------------------------


@dataclass(frozen=True)
class Trial:
    """One run of a background monitor into one sink: poll interval, rate achieved, drops, longest sink call.

    Examples:
        >>> Trial(0.01, 9_500.0, 0).passed, Trial(0.005, 15_000.0, 12).passed
        (True, False)
    """

    interval_s: float
    rate: float
    dropped: int
    longest_call_s: float = 0.0

    @property
    def passed(self) -> bool:
        """Whether the sink's queue dropped nothing."""
        return self.dropped == 0


class _TimedSink:
    # What the monitor is given: the sink, its longest call timed. Anything
    # else (flush, name) is the sink's own.
    def __init__(self, sink: Any) -> None:
        self._sink = sink
        self.longest_s = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sink, name)

    def _timed(self, call: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            self.longest_s = max(self.longest_s, time.perf_counter() - started)

    def log_metrics(self, *args: Any, **kwargs: Any) -> Any:
        return self._timed(self._sink.log_metrics, *args, **kwargs)


class _TimedBatchSink(_TimedSink):
    # The same for a sink with log_batch, which the monitor then uses.
    def log_batch(self, payloads: Any) -> Any:
        return self._timed(self._sink.log_batch, payloads)


class _TimedPayloadsSink(_TimedBatchSink):
    # The same for rlpulse's own sinks, which the monitor hands payloads
    # with their kinds (log_payloads).
    def log_payloads(self, payloads: Any) -> Any:
        return self._timed(self._sink.log_payloads, payloads)


def _timed(sink: Any) -> _TimedSink:
    if hasattr(sink, "log_payloads"):
        return _TimedPayloadsSink(sink)
    return _TimedBatchSink(sink) if hasattr(sink, "log_batch") else _TimedSink(sink)


def run_trial(case: ThroughputCase, interval_s: float, settings: Settings) -> Trial:
    """Run one background monitor of ``settings.watches`` watches into a fresh ``case`` sink.

    The monitor runs ``settings.warmup_s``; the rate is then the payloads it
    logs over a window (see :class:`Settings`) divided by the window. It is
    stopped without final snapshots (its queue drained) and the sink closed;
    when nothing was dropped, the sink must hold every payload logged.

    Examples:
        >>> tiny = Settings(warmup_s=0.02, window_payloads=1, min_window_s=0.05, watches=2)
        >>> trial = run_trial(CASES[0], 0.01, tiny)
        >>> trial.passed, trial.rate > 0
        (True, True)
    """
    clock = time.monotonic
    with contextlib.ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        with contextlib.ExitStack() as sink_stack:
            sink = _timed(case.sink.open(directory, sink_stack))
            # Drops are counted and read below; a warning per failing trial
            # would only clutter the output. Errors are checked too.
            monitor = rlpulse.LoggerMonitor(
                sink, background=True, poll_interval=interval_s, on_error="ignore"
            )
            for index in range(settings.watches):
                monitor.watch(
                    AdvancingCollectorLike(), name=f"collector_{index}", rate_keys=()
                )
            monitor.start()
            try:
                time.sleep(settings.warmup_s)
                before, started = monitor.stats(), clock()
                while True:
                    time.sleep(0.02)
                    after, ended = monitor.stats(), clock()
                    logged = after["logged"] - before["logged"]
                    if _window_over(settings, logged, ended - started):
                        break
            finally:
                monitor.stop(log_final=False)
            final = monitor.stats()
        if final["errors"] or final["timeouts"]:
            raise RuntimeError(
                f"{case.label}: {final['errors']} errors and {final['timeouts']} "
                "timeouts in a throughput trial; it would not measure the sink."
            )
        if not final["dropped"]:
            _check_stored(case, directory, int(final["logged"]))
    # What this trial wrote is on disk before the next trial starts: no
    # trial pays for its predecessor's writeback.
    os.sync()
    return Trial(
        interval_s, logged / (ended - started), int(final["dropped"]), sink.longest_s
    )


@dataclass
class SearchOutcome:
    """The trials of one search for one sink's highest sustained rate, and where it ended.

    ``limited`` is true when no trial dropped anything: the search stopped
    because a shorter interval no longer raised the rate (or reached its
    floor), so the figure is what the monitor offered, a lower bound of the
    sink's.

    Examples:
        >>> outcome = SearchOutcome([Trial(0.01, 9e3, 0), Trial(0.005, 15e3, 4)])
        >>> outcome.sustained, outcome.limited
        (9000.0, False)
    """

    trials: list[Trial] = field(default_factory=list)
    limited: bool = False

    @property
    def sustained(self) -> float:
        """The highest rate among the trials that dropped nothing (0 if none did)."""
        return max((trial.rate for trial in self.trials if trial.passed), default=0.0)


def rate_search(settings: Settings, outcome: SearchOutcome) -> float | None:
    """Return the next poll interval to try given ``outcome``'s trials, or ``None`` when done.

    Halve the interval while trials pass and the rate still grows by at
    least a tenth (else, or below ``settings.min_interval_s``, the monitor
    is the limit: done, ``limited``); double it while they fail (up to
    ``settings.max_interval_s``); once one passed and one failed, bisect
    (geometrically) ``settings.bisections`` times between the fastest
    interval that passed and the slowest that failed.

    Examples:
        >>> settings = Settings(start_interval_s=0.01, bisections=1)
        >>> outcome = SearchOutcome()
        >>> rate_search(settings, outcome)
        0.01
        >>> outcome.trials.append(Trial(0.01, 9e3, 0))
        >>> rate_search(settings, outcome)
        0.005
        >>> outcome.trials.append(Trial(0.005, 15e3, 3))
        >>> round(rate_search(settings, outcome), 5)
        0.00707
    """
    trials = outcome.trials
    if not trials:
        return settings.start_interval_s
    passed = [trial for trial in trials if trial.passed]
    failed = [trial for trial in trials if not trial.passed]
    if passed and failed:
        fastest_pass = min(trial.interval_s for trial in passed)
        slowest_fail = max(trial.interval_s for trial in failed)
        bisected = len(trials) - _bracketing_trial(trials)
        if bisected >= settings.bisections or fastest_pass <= slowest_fail:
            return None
        return math.sqrt(fastest_pass * slowest_fail)
    last = trials[-1]
    if failed:
        longer = last.interval_s * 2
        return longer if longer <= settings.max_interval_s else None
    shorter = last.interval_s / 2
    previous = trials[-2].rate if len(trials) > 1 else 0.0
    if shorter < settings.min_interval_s or last.rate < previous * 1.1:
        outcome.limited = True
        return None
    return shorter


def _bracketing_trial(trials: list[Trial]) -> int:
    # The number of trials up to the first whose outcome differs from the first's.
    first = trials[0].passed
    for index, trial in enumerate(trials):
        if trial.passed != first:
            return index + 1
    return len(trials)


def _search_all(
    cases: tuple[ThroughputCase, ...],
    settings: Settings,
    starts: dict[str, float],
    report: Callable[[str], None],
) -> dict[str, SearchOutcome]:
    # Every sink's search advances one trial at a time, the sinks in turn.
    outcomes = {case.label: SearchOutcome() for case in cases}
    active = list(cases)
    while active:
        for case in list(active):
            outcome = outcomes[case.label]
            start = replace(settings, start_interval_s=starts[case.label])
            interval = rate_search(start, outcome)
            if interval is None:
                active.remove(case)
                continue
            trial = run_trial(case, interval, settings)
            outcome.trials.append(trial)
            report(
                f"throughput (b) {case.label}: interval {interval * 1000:.3f} ms, "
                f"{trial.rate:,.0f} payloads/s, dropped {trial.dropped}, "
                f"longest sink call {trial.longest_call_s * 1000:,.1f} ms"
            )
    return outcomes


# --- (c) what 1,000 payloads a second cost -------------------------------------


@dataclass(frozen=True)
class CpuResult:
    """Per round: process CPU seconds over the window with the monitor and without, the window, the rate.

    Examples:
        >>> result = CpuResult((0.035,), (0.005,), (3.0,), (996.0,))
        >>> result.share, result.rate
        (0.01, 996.0)
    """

    monitor_cpu_s: tuple[float, ...]
    idle_cpu_s: tuple[float, ...]
    window_s: tuple[float, ...]
    rates: tuple[float, ...]

    @property
    def share(self) -> float:
        """Median over rounds of the monitor's CPU time beyond the idle process's, per second of wall time."""
        return statistics.median(
            (ours - idle) / window
            for ours, idle, window in zip(
                self.monitor_cpu_s, self.idle_cpu_s, self.window_s, strict=True
            )
        )

    @property
    def rate(self) -> float:
        """Median over rounds of the payloads logged per second."""
        return statistics.median(self.rates)


def measure_cpu(settings: Settings) -> tuple[float, float, float, float]:
    """Return one round of (c): monitor CPU s, idle CPU s, window s, payloads per second.

    First the process alone, its main thread sleeping ``settings.cpu_s``;
    then the same with a background monitor of ``settings.watches`` watches
    at ``poll_interval=0.1`` into a fresh ``SQLiteLogger``, started
    ``settings.warmup_s`` before the window. Both in ``time.process_time``
    (every thread of the process).

    Examples:
        >>> monitor_s, idle_s, window_s, rate = measure_cpu(
        ...     Settings(cpu_s=0.2, warmup_s=0.02, watches=2)
        ... )
        >>> window_s >= 0.2, rate > 0
        (True, True)
    """
    cpu, wall = time.process_time, time.monotonic
    idle_started = cpu()
    time.sleep(settings.cpu_s)
    idle_cpu = cpu() - idle_started
    with contextlib.ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        sink = stack.enter_context(rlpulse.SQLiteLogger(directory / "metrics.sqlite"))
        monitor = rlpulse.LoggerMonitor(
            sink, background=True, poll_interval=CPU_INTERVAL_S
        )
        for index in range(settings.watches):
            monitor.watch(
                AdvancingCollectorLike(), name=f"collector_{index}", rate_keys=()
            )
        with monitor:
            time.sleep(settings.warmup_s)
            before, cpu_started, started = monitor.stats(), cpu(), wall()
            time.sleep(settings.cpu_s)
            after, monitor_cpu, window = monitor.stats(), cpu(), wall()
        if monitor.stats()["dropped"]:
            raise RuntimeError("throughput (c): the monitor dropped payloads.")
    window -= started
    rate = (after["logged"] - before["logged"]) / window
    # The idle window is scaled to the monitor's (a sleep overshoots a little).
    return (
        monitor_cpu - cpu_started,
        idle_cpu * window / settings.cpu_s,
        window,
        rate,
    )


# --- (d) TorchRL's CSVLogger behind TorchRL's own monitor ------------------------


def measure_torchrl_monitor(settings: Settings) -> float:
    """Return one round of (d): the payloads a second TorchRL's ``LoggerMonitor`` delivers into its ``CSVLogger``.

    Its background monitor polls ``settings.watches`` watches every
    :data:`TORCHRL_INTERVAL_S` (as fast as it goes; it logs each poll on
    its own thread), started ``settings.warmup_s`` before a window of
    ``settings.cpu_s``; the payloads are the ``frames`` scalars its logger
    wrote meanwhile.

    Examples:
        >>> measure_torchrl_monitor(Settings(cpu_s=0.2, warmup_s=0.02, watches=2)) > 0
        True
    """
    from torchrl.record.loggers.csv import CSVLogger
    from torchrl.record.loggers.monitoring import LoggerMonitor

    with tempfile.TemporaryDirectory() as directory:
        logger = CSVLogger("throughput", log_dir=directory)
        monitor = LoggerMonitor(logger, poll_interval=TORCHRL_INTERVAL_S)
        for index in range(settings.watches):
            monitor.watch(AdvancingCollectorLike(), name=f"collector_{index}")
        scalars = logger.experiment.scalars

        def delivered() -> int:
            return sum(
                len(scalars.get(f"collector_{index}/frames", ()))
                for index in range(settings.watches)
            )

        monitor.start()
        try:
            time.sleep(settings.warmup_s)
            before, started = delivered(), time.monotonic()
            time.sleep(settings.cpu_s)
            after, ended = delivered(), time.monotonic()
        finally:
            monitor.stop(log_final=False)
            for handle in logger.experiment.files.values():
                handle.close()
    return (after - before) / (ended - started)


# --- the whole section ----------------------------------------------------------


@dataclass(frozen=True)
class Results:
    """Per sink, the loop rate of every round and the search of every round; and (c).

    Examples:
        >>> results = Results({}, {}, CpuResult((), (), (), ()))
        >>> results.loop_rates
        {}
    """

    loop_rates: dict[str, tuple[float, ...]]
    searches: dict[str, tuple[SearchOutcome, ...]]
    cpu: CpuResult
    watches: int = WATCHES
    # (d), per round: TorchRL's CSVLogger behind TorchRL's monitor, payloads/s.
    torchrl_monitor_rates: tuple[float, ...] = ()

    def sustained(self, label: str) -> float:
        """Median over rounds of ``label``'s highest rate without drops behind the monitor."""
        return statistics.median(outcome.sustained for outcome in self.searches[label])

    def limited(self, label: str) -> bool:
        """Whether most of ``label``'s searches ended on the monitor's limit, not on a drop."""
        outcomes = self.searches[label]
        return sum(outcome.limited for outcome in outcomes) * 2 > len(outcomes)

    def longest_call_s(self, label: str) -> float:
        """Median over rounds of the longest single sink call in any trial of ``label``'s search."""
        return statistics.median(
            max((trial.longest_call_s for trial in outcome.trials), default=0.0)
            for outcome in self.searches[label]
        )

    def speed_up(self, label: str) -> float:
        """Median over rounds of ``label``'s sustained rate over TorchRL's ``CSVLogger`` loop rate."""
        return statistics.median(
            outcome.sustained / reference
            for outcome, reference in zip(
                self.searches[label], self.loop_rates[REFERENCE], strict=True
            )
        )

    def over_torchrl_monitor(self, label: str) -> float:
        """Median over rounds of ``label``'s sustained rate over what TorchRL's monitor delivers into its ``CSVLogger`` (d)."""
        return statistics.median(
            outcome.sustained / reference
            for outcome, reference in zip(
                self.searches[label], self.torchrl_monitor_rates, strict=True
            )
        )


def measure(
    settings: Settings,
    cases: tuple[ThroughputCase, ...] = CASES,
    report: Callable[[str], None] = progress,
) -> Results:
    """Measure (a), (b) and (c) in rounds; each round's search starts near the previous round's result.

    Examples:
        >>> results = measure(Settings.quick(), cases=CASES[:1], report=lambda line: None)
        >>> len(results.loop_rates[CASES[0].label]), len(results.cpu.rates)
        (1, 1)
    """
    loops: dict[str, list[float]] = {case.label: [] for case in cases}
    searches: dict[str, list[SearchOutcome]] = {case.label: [] for case in cases}
    starts = {case.label: settings.start_interval_s for case in cases}
    cpu_rounds: list[tuple[float, float, float, float]] = []
    torchrl_monitor_rates: list[float] = []
    for round_index in range(settings.rounds):
        for case in cases:
            loops[case.label].append(measure_loop(case, settings))
        report(
            f"throughput (a) round {round_index + 1}/{settings.rounds}: "
            + ", ".join(f"{label} {rates[-1]:,.0f}/s" for label, rates in loops.items())
        )
        for label, outcome in _search_all(cases, settings, starts, report).items():
            searches[label].append(outcome)
            passed = [trial for trial in outcome.trials if trial.passed]
            if passed:
                # Next round: one doubling below this round's result.
                fastest = min(trial.interval_s for trial in passed)
                starts[label] = min(settings.max_interval_s, fastest * 2)
        cpu_rounds.append(measure_cpu(settings))
        torchrl_monitor_rates.append(measure_torchrl_monitor(settings))
        report(
            f"throughput round {round_index + 1}/{settings.rounds}: "
            + ", ".join(
                f"{label} {outcomes[-1].sustained:,.0f}/s"
                for label, outcomes in searches.items()
            )
            + f"; (c) {cpu_rounds[-1][3]:,.0f} payloads/s, "
            f"{(cpu_rounds[-1][0] - cpu_rounds[-1][1]) / cpu_rounds[-1][2]:.2%} of a core"
            f"; (d) TorchRL's monitor {torchrl_monitor_rates[-1]:,.0f} payloads/s"
        )
    monitor_s, idle_s, window_s, rates = zip(*cpu_rounds, strict=True)
    return Results(
        {label: tuple(rates) for label, rates in loops.items()},
        {label: tuple(outcomes) for label, outcomes in searches.items()},
        CpuResult(monitor_s, idle_s, window_s, rates),
        settings.watches,
        tuple(torchrl_monitor_rates),
    )


def _verdict(passed: bool) -> str:
    return "pass" if passed else "**OVER BUDGET**"


def _budget_rows(results: Results) -> list[tuple[str, str, str, bool]]:
    rows = []
    if SQLITE in results.searches and results.torchrl_monitor_rates:
        speed_up = results.over_torchrl_monitor(SQLITE)
        rows.append(
            (
                f"{SQLITE} behind rlpulse's monitor / TorchRL `CSVLogger` behind "
                "TorchRL's monitor, payloads/s",
                f"{results.sustained(SQLITE):,.0f} / "
                f"{statistics.median(results.torchrl_monitor_rates):,.0f} = "
                f"{speed_up:.1f}x",
                f">= {SPEED_UP_BUDGET:.0f}x",
                speed_up >= SPEED_UP_BUDGET,
            )
        )
    cpu = results.cpu
    if cpu.rates:
        rows.append(
            (
                f"{results.watches} watches every {CPU_INTERVAL_S} s into {SQLITE}, "
                "share of one core",
                f"{cpu.rate:,.0f} payloads/s: {cpu.share:.2%}",
                f"< {CPU_BUDGET:.0%}",
                cpu.share < CPU_BUDGET,
            )
        )
    return rows


def table(results: Results) -> str:
    """Return the markdown tables: the budgets, then every sink's rates.

    Examples:
        >>> outcome = SearchOutcome([Trial(0.001, 60_000.0, 0), Trial(0.0005, 90_000.0, 7)])
        >>> results = Results(
        ...     {SQLITE: (70_000.0,), REFERENCE: (7_000.0,)},
        ...     {SQLITE: (outcome,), REFERENCE: (SearchOutcome([Trial(0.05, 2e3, 0), Trial(0.025, 4e3, 1)]),)},
        ...     CpuResult((0.035,), (0.005,), (3.0,), (996.0,)),
        ...     torchrl_monitor_rates=(40_000.0,),
        ... )
        >>> print(table(results).splitlines()[2])
        | rlpulse `SQLiteLogger` behind rlpulse's monitor / TorchRL `CSVLogger` behind TorchRL's monitor, payloads/s | 60,000 / 40,000 = 1.5x | >= 2x | **OVER BUDGET** |
    """
    lines = ["| measurement | figure | budget | result |", "|---|---:|---:|---|"]
    lines += [
        f"| {label} | {figure} | {budget} | {_verdict(passed)} |"
        for label, figure, budget, passed in _budget_rows(results)
    ]
    lines += [
        "",
        "| sink | (a) alone, in a loop, payloads/s | (b) behind the monitor, "
        "payloads/s without a drop | (b) / TorchRL `CSVLogger` in a loop "
        "| (b) longest sink call, ms |",
        "|---|---:|---:|---:|---:|",
    ]
    reference = results.loop_rates.get(REFERENCE)
    for label, rates in results.loop_rates.items():
        sustained = results.sustained(label)
        bound = ">= " if results.limited(label) else ""
        ratio = f"{results.speed_up(label):.1f}x" if reference else ""
        lines.append(
            f"| {label} | {statistics.median(rates):,.0f} | {bound}{sustained:,.0f} "
            f"| {bound}{ratio} | {results.longest_call_s(label) * 1000:,.1f} |"
        )
    return "\n".join(lines)


def missed_budgets(results: Results) -> list[str]:
    """Return one line per budget the results miss.

    Examples:
        >>> missed_budgets(Results({}, {}, CpuResult((0.12,), (0.0,), (3.0,), (1e3,))))
        ['100 watches every 0.1 s into rlpulse `SQLiteLogger`, share of one core: 1,000 payloads/s: 4.00%, budget < 3%']
    """
    return [
        f"{label}: {figure}, budget {budget}"
        for label, figure, budget, passed in _budget_rows(results)
        if not passed
    ]


def _stalled_by_checkpoints(results: Results) -> bool:
    # Whether SQLiteLogger's searches ended on drops while one of its calls
    # took ten times what the other sinks' longest calls typically took: its
    # checkpoints.
    if not results.searches.get(SQLITE) or results.limited(SQLITE):
        return False
    return results.longest_call_s(SQLITE) >= 10 * _typical_longest_call_s(results)


def _typical_longest_call_s(results: Results) -> float:
    # The median of the other sinks' longest calls.
    others = [
        results.longest_call_s(label) for label in results.searches if label != SQLITE
    ]
    return statistics.median(others) if others else 0.0


def render(results: Results, settings: Settings) -> str:
    """Return this section's markdown: heading, budgets, rates, method and machine.

    Examples:
        >>> results = Results({}, {}, CpuResult((), (), (), ()))
        >>> render(results, Settings()).splitlines()[0]
        '## Sustained sink throughput: payloads per second without a drop'
    """
    import torchrl

    trials = sum(
        len(outcome.trials)
        for outcomes in results.searches.values()
        for outcome in outcomes
    )
    sqlite_text = ""
    if _stalled_by_checkpoints(results):
        sqlite_text = f"""
`SQLiteLogger`'s figure is set by its write-ahead log's checkpoints: every
10,000 rows (about 1,700 of these payloads) one runs beside the writes, on a
thread of the store's; when the log has not started afresh over 30,000 rows
(the thread's copies outlasting the pauses between writes), the writer's call
checkpoints it itself, copying what was written since and syncing the
database to disk; that call took up to
{results.longest_call_s(SQLITE) * 1000:,.0f} ms here (median over rounds of
the longest call in a search) against
{_typical_longest_call_s(results) * 1000:,.1f} ms for the other sinks (the
median of theirs); meanwhile
the queue of 1,000 payloads fills and drops once the rate times that stall
exceeds it."""
    budget_text = ""
    if results.torchrl_monitor_rates:
        reference = statistics.median(results.torchrl_monitor_rates)
        budget_text = f"""
**(d) TorchRL's `CSVLogger` behind TorchRL's monitor**, the reference of the
budget: TorchRL's `LoggerMonitor` in background mode with the same
{settings.watches} watches, polling every {TORCHRL_INTERVAL_S * 1000:g} ms (as
fast as it goes: it polls and logs each watch in turn on its one thread),
delivered {reference:,.0f} payloads a second into its `CSVLogger` over
{settings.cpu_s} s windows (median over rounds), counted from the logger's
scalars; the budget asks `SQLiteLogger` behind rlpulse's monitor to sustain
{SPEED_UP_BUDGET:g} times that in the same round."""
    return reflow(f"""\
## Sustained sink throughput: payloads per second without a drop

How many payloads a second each sink keeps up with when rlpulse's background
monitor feeds it — its queue never dropping, the sink storing everything —
against TorchRL's `CSVLogger` called in a loop and behind TorchRL's own
monitor; and what the monitor itself costs at 1,000 payloads a second into
`SQLiteLogger`.

{table(results)}

Every payload is one watch's snapshot of {METRICS_PER_PAYLOAD} metrics
(`frames`, `batches`, `frames_per_batch`, `workers_alive`, `elapsed_s`,
`frames_in_flight`, as a collector's `stats()` gives them; logged without
rates), from {settings.watches} watches, so a sink receives
{settings.watches * METRICS_PER_PAYLOAD} distinct metric names (TorchRL's
`CSVLogger` keeps a file open for each). Every sink writes into a fresh
temporary directory on the machine's disk; after each trial and loop
`os.sync()` puts what it wrote on disk, so that no trial pays for its
predecessor's writeback. A trial or loop lasts until it has logged
{settings.window_payloads:,} payloads and {settings.min_window_s} s have
passed, or {settings.max_window_s} s.

**(a) Alone, in a loop.** Each round, a fresh sink gets `log_metrics` called
in a loop, one payload a call (rlpulse's sinks with `timestamp=`), the
payloads built beforehand, the {settings.watches} watches' in turn, after one
untimed pass over them. This is how a training loop calling TorchRL's
`CSVLogger` itself pays for it.

**(b) Behind the monitor.** A background `LoggerMonitor` with
{settings.watches} watches (no schedule: every poll is logged) into one fresh
sink, `poll_interval` searched: starting at {settings.start_interval_s * 1000:g}
ms in the first round (twice the shortest interval that passed, in the next),
halved while the queue drops nothing — until the rate grows by less than a
tenth or the interval reaches {settings.min_interval_s * 1000:g} ms: then the
monitor's polling, not the sink, is the limit, marked `>=` — then bisected
{settings.bisections} times between the shortest interval that passed and the
longest that dropped (doubled instead while none passed). A trial lets the
monitor run {settings.warmup_s} s, takes its rate over the window from
`monitor.stats()["logged"]`, stops it (draining the queue) and, when
`stats()["dropped"]` is 0, checks that the sink's files hold every payload
logged (not for `TensorBoardLogger`, whose event files have no cheap reader).
The queue is the default 1,000 payloads; rlpulse's sinks get everything
pending through `log_payloads`, TorchRL's `CSVLogger` (which has none)
`log_metrics` per payload. The figure is the highest rate of a trial that
dropped nothing; {trials} trials in all, the sinks taking turns trial by
trial. The ratio is the median over rounds of the sink's figure over TorchRL's
`CSVLogger`'s loop rate in the same round. Each sink call is timed; the last
column is the longest single call. {SINK_PROCESS} writes the same SQLite
file from a child process: here each call encodes its payloads once and
writes them into a pipe (blocking while the pipe is full), the child stores
each batch in one transaction; the file is read back as `SQLiteLogger`'s is.
{sqlite_text}

**(c) The monitor's own cost.** The process's CPU time (`time.process_time`,
every thread) over {settings.cpu_s} s while a background monitor of
{settings.watches} watches at `poll_interval={CPU_INTERVAL_S}` logs into a
fresh `SQLiteLogger` and the main thread sleeps, minus the same process over
the same time without a monitor, per second of wall time; once a round.
{budget_text}

All figures are medians over {settings.rounds} rounds, (a), (b), (c) and (d)
in turn in each. Measured on {platform.system()} {platform.machine()}
({os.cpu_count()} CPUs), Python {platform.python_version()}, TorchRL
{torchrl.__version__}, rlpulse {rlpulse.__version__}. Rerun with
`python -m benchmarks --only throughput`.
""")


def run(*, quick: bool = False) -> str:
    """Measure the four parts, print the tables, and return the section's markdown."""
    settings = Settings.quick() if quick else Settings()
    results = measure(settings)
    print(table(results), flush=True)
    for line in missed_budgets(results):
        print(f"OVER BUDGET: {line}", file=sys.stdout, flush=True)
    return render(results, settings)
