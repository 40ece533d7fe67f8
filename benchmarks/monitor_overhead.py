"""Monitor overhead: what one poll of one watch costs, rlpulse against TorchRL.

Both monitors run side by side in one process on the same kind of source —
a collector-like object whose ``stats()`` builds a fresh six-key dict from
its attributes, with counters advancing between polls — logging to a sink
that does nothing, so the numbers are the monitor's own work: snapshot,
schedule, rates, payload, hand-over. Each case is measured twice: in manual
mode (``background=False``, explicit ``step()`` calls timed one by one) and
in background mode (each monitor's own polling thread running rounds back
to back, counted over a fixed wall-clock window), where rlpulse's costs
include its per-sink queue and sender thread.
"""

from __future__ import annotations

import gc
import math
import os
import platform
import statistics
import sys
import textwrap
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import rlpulse
from benchmarks import progress

__all__ = [
    "CASES",
    "IDLE_CASE",
    "AdvancingCollectorLike",
    "BackgroundResults",
    "Case",
    "CaseResult",
    "CollectorLike",
    "NullSink",
    "Settings",
    "measure",
    "measure_background",
    "render",
    "run",
]


class CollectorLike:
    """A source shaped like a collector: ``stats()`` builds a fresh six-key dict each call.

    Examples:
        >>> source = CollectorLike()
        >>> source.advance()
        >>> source.stats()["frames"], source.stats()["batches"]
        (200, 1)
    """

    def __init__(self, frames_per_batch: int = 200, workers: int = 4) -> None:
        self.frames = 0
        self.batches = 0
        self.frames_per_batch = frames_per_batch
        self.workers_alive = workers
        self.elapsed_s = 0.0
        self.frames_in_flight = 0

    def advance(self) -> None:
        """Collect one batch: the counters move on, as between two real polls."""
        self.frames += self.frames_per_batch
        self.batches += 1
        self.elapsed_s += 0.01
        self.frames_in_flight = (self.batches % self.workers_alive) * 50

    def stats(self) -> dict[str, float]:
        """Return the current snapshot, built anew from the attributes."""
        return {
            "frames": self.frames,
            "batches": self.batches,
            "frames_per_batch": self.frames_per_batch,
            "workers_alive": self.workers_alive,
            "elapsed_s": self.elapsed_s,
            "frames_in_flight": self.frames_in_flight,
        }


class AdvancingCollectorLike(CollectorLike):
    """A collector-like source whose counters advance by themselves at every ``stats()`` call.

    In background mode nothing runs between two polls of the monitor's
    thread, so the source moves its two counters on itself: two integer
    additions per call, identical for both monitors.

    Examples:
        >>> source = AdvancingCollectorLike()
        >>> source.stats()["frames"], source.stats()["frames"]
        (200, 400)
    """

    def stats(self) -> dict[str, float]:
        """Advance ``frames`` and ``batches``, then return the snapshot built anew."""
        self.frames += self.frames_per_batch
        self.batches += 1
        # The dict is built here rather than by CollectorLike.stats(): the
        # extra call would triple what the harness adds to every poll.
        return {
            "frames": self.frames,
            "batches": self.batches,
            "frames_per_batch": self.frames_per_batch,
            "workers_alive": self.workers_alive,
            "elapsed_s": self.elapsed_s,
            "frames_in_flight": self.frames_in_flight,
        }


class NullSink:
    """A sink that does nothing, so only the monitor's own work is timed.

    Examples:
        >>> NullSink().log_metrics({"collector/frames": 1.0}, step=1) is None
        True
    """

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        """Accept and drop one payload."""


@dataclass(frozen=True)
class Case:
    """One measured situation: a label, how to build its schedule, and rlpulse's budget.

    ``schedule`` receives the implementation's ``Every`` class and returns
    the schedule for every watch (``None``: log every poll). ``budget`` is
    the highest acceptable ratio of rlpulse's cost to TorchRL's.
    ``logs_every_poll`` says whether every timed poll logs (else none does),
    which the benchmark checks so that it never times a monitor skipping
    its work. ``nothing_due``: no watch needs a call after its first poll,
    so a monitor may run no round at all in the background (rlpulse's
    thread sleeps until a watch is due; TorchRL's polls every interval).

    Examples:
        >>> CASES[1].schedule(rlpulse.Every)
        Every(kind='seconds', interval=3600.0, key=None)
    """

    label: str
    schedule: Callable[[Any], Any]
    budget: float
    logs_every_poll: bool
    nothing_due: bool = False


CASES: tuple[Case, ...] = (
    Case("(a) every poll logged (no schedule)", lambda every: None, 0.7, True),
    Case(
        "(b) seconds schedule not due (`Every.seconds(3600)`)",
        lambda every: every.seconds(3600),
        0.2,
        False,
        nothing_due=True,
    ),
    Case(
        '(c) counter schedule not due (`Every.counter("frames", 10**12)`)',
        lambda every: every.counter("frames", 10**12),
        0.5,
        False,
    ),
)
"""The three cases of the monitor-overhead table, with their budgets."""


@dataclass(frozen=True)
class Settings:
    """How much to measure: rounds per implementation, watches per monitor, steps per round.

    ``rounds``, ``steps`` and ``warmup_steps`` are for manual mode;
    ``background_rounds`` and ``background_window_s`` (the wall-clock
    window over which one background round counts polling rounds) for
    background mode.

    Examples:
        >>> Settings.quick().rounds < Settings().rounds
        True
        >>> Settings(background_window_s=0)
        Traceback (most recent call last):
        ...
        ValueError: background_window_s must be a positive number of seconds, got 0.
    """

    rounds: int = 15
    watches: int = 100
    steps: int = 200
    warmup_steps: int = 20
    background_rounds: int = 15
    background_window_s: float = 0.3

    def __post_init__(self) -> None:
        for name in ("rounds", "watches", "steps", "background_rounds"):
            if getattr(self, name) < 1:
                raise ValueError(
                    f"{name} must be at least 1, got {getattr(self, name)}."
                )
        window = self.background_window_s
        if not (window > 0 and math.isfinite(window)):
            raise ValueError(
                "background_window_s must be a positive number of seconds, "
                f"got {window}."
            )

    @classmethod
    def quick(cls) -> Settings:
        """Return settings for a smoke run: a few short rounds."""
        return cls(
            rounds=3,
            watches=20,
            steps=20,
            warmup_steps=2,
            background_rounds=2,
            background_window_s=0.05,
        )


@dataclass(frozen=True)
class CaseResult:
    """The measurement of one case: per-round costs of both monitors, in ns per watch per step.

    Examples:
        >>> result = CaseResult(CASES[0], torchrl_ns=(100.0, 120.0), rlpulse_ns=(50.0, 72.0))
        >>> result.torchrl_median, result.rlpulse_median, result.ratio, result.within_budget
        (110.0, 61.0, 0.55, True)
    """

    case: Case
    torchrl_ns: tuple[float, ...]
    rlpulse_ns: tuple[float, ...]

    @property
    def torchrl_median(self) -> float:
        """Median cost of TorchRL's monitor over the rounds."""
        return statistics.median(self.torchrl_ns)

    @property
    def rlpulse_median(self) -> float:
        """Median cost of rlpulse's monitor over the rounds."""
        return statistics.median(self.rlpulse_ns)

    @property
    def ratios(self) -> tuple[float, ...]:
        """Per round, rlpulse's cost divided by TorchRL's in the round just before."""
        return tuple(
            ours / theirs
            for ours, theirs in zip(self.rlpulse_ns, self.torchrl_ns, strict=True)
        )

    @property
    def ratio(self) -> float:
        """Median of the per-round ratios."""
        # Pairing each rlpulse round with the TorchRL round run just before
        # it cancels the slow drifts of a shared machine.
        return statistics.median(self.ratios)

    @property
    def within_budget(self) -> bool:
        """Whether the ratio is at most the case's budget."""
        return self.ratio <= self.case.budget


class _Rig:
    """One monitor of one implementation with its sources, ready to be timed."""

    def __init__(
        self, monitor_class: Any, every_class: Any, case: Case, settings: Settings
    ) -> None:
        self.sources = [CollectorLike() for _ in range(settings.watches)]
        self.monitor = monitor_class(NullSink(), background=False)
        for index, source in enumerate(self.sources):
            self.monitor.watch(
                source, name=f"collector_{index}", schedule=case.schedule(every_class)
            )
        self.polls_per_step = settings.watches
        self.last_logged: dict[str, dict[str, float]] = {}

    def warm_up(self, steps: int) -> None:
        # The first step logs every watch (log_on_start); it is not the
        # steady state being measured.
        for _ in range(max(steps, 1)):
            self._advance()
            self.monitor.step()

    def time_round(self, steps: int) -> float:
        step = self.monitor.step
        advance = self._advance
        clock = time.perf_counter_ns
        elapsed = 0
        logged: dict[str, dict[str, float]] = {}
        gc.collect()
        gc.disable()
        try:
            for _ in range(steps):
                advance()
                started = clock()
                logged = step()
                elapsed += clock() - started
        finally:
            gc.enable()
        self.last_logged = logged
        return elapsed / (steps * self.polls_per_step)

    def _advance(self) -> None:
        for source in self.sources:
            source.advance()


def measure(
    settings: Settings,
    cases: tuple[Case, ...] = CASES,
    report: Callable[[str], None] = progress,
) -> tuple[CaseResult, ...]:
    """Time every case on both monitors, rounds interleaved (TorchRL, rlpulse, TorchRL, …).

    ``report`` receives one progress line per round.

    Examples:
        >>> tiny = Settings(rounds=1, watches=2, steps=2, warmup_steps=1)
        >>> results = measure(tiny, report=lambda line: None)
        >>> [result.case.label[:3] for result in results]
        ['(a)', '(b)', '(c)']
    """
    from torchrl.record.loggers import monitoring as torchrl_monitoring

    results = []
    for case in cases:
        torchrl_rig = _Rig(
            torchrl_monitoring.LoggerMonitor, torchrl_monitoring.Every, case, settings
        )
        rlpulse_rig = _Rig(rlpulse.LoggerMonitor, rlpulse.Every, case, settings)
        torchrl_rig.warm_up(settings.warmup_steps)
        rlpulse_rig.warm_up(settings.warmup_steps)
        torchrl_ns: list[float] = []
        rlpulse_ns: list[float] = []
        for round_index in range(settings.rounds):
            torchrl_ns.append(torchrl_rig.time_round(settings.steps))
            rlpulse_ns.append(rlpulse_rig.time_round(settings.steps))
            _check_work_done(case, torchrl_rig, rlpulse_rig)
            report(
                f"monitor {case.label[:3]} round {round_index + 1}/{settings.rounds}: "
                f"TorchRL {torchrl_ns[-1]:,.0f} ns/poll, "
                f"rlpulse {rlpulse_ns[-1]:,.0f} ns/poll"
            )
        results.append(CaseResult(case, tuple(torchrl_ns), tuple(rlpulse_ns)))
    return tuple(results)


def _check_work_done(case: Case, torchrl_rig: _Rig, rlpulse_rig: _Rig) -> None:
    # Both monitors must have done the same observable work, or the ratio
    # compares different things.
    expected = torchrl_rig.polls_per_step if case.logs_every_poll else 0
    for name, rig in (("TorchRL", torchrl_rig), ("rlpulse", rlpulse_rig)):
        if len(rig.last_logged) != expected:
            raise RuntimeError(
                f"{case.label}: {name}'s last timed step logged "
                f"{len(rig.last_logged)} watches, expected {expected}; the "
                "benchmark would not measure what it says."
            )
    for watch_name, payload in torchrl_rig.last_logged.items():
        if set(payload) != set(rlpulse_rig.last_logged[watch_name]):
            raise RuntimeError(
                f"{case.label}: the payloads of watch {watch_name!r} differ: "
                f"TorchRL logs {sorted(payload)}, rlpulse logs "
                f"{sorted(rlpulse_rig.last_logged[watch_name])}."
            )


BACKGROUND_POLL_INTERVAL_S = 1e-6
"""The ``poll_interval`` of both background monitors: rounds run back to back."""

_SETTLE_S = 0.02


class _RoundCounter:
    """Stands in for a TorchRL monitor's ``step`` to count its thread's rounds."""

    def __init__(self, step: Callable[[], dict[str, dict[str, float]]]) -> None:
        self._step = step
        self.rounds = 0
        self.last_logged: dict[str, dict[str, float]] = {}

    def __call__(self) -> dict[str, dict[str, float]]:
        logged = self._step()
        self.rounds += 1
        self.last_logged = logged
        return logged


class _BackgroundRig:
    """One background monitor of one implementation with its sources, ready to be timed."""

    def __init__(
        self, monitor_class: Any, every_class: Any, case: Case, watches: int
    ) -> None:
        self.monitor = monitor_class(
            NullSink(), background=True, poll_interval=BACKGROUND_POLL_INTERVAL_S
        )
        for index in range(watches):
            self.monitor.watch(
                AdvancingCollectorLike(),
                name=f"collector_{index}",
                schedule=case.schedule(every_class),
            )
        self.watches = watches
        self.nothing_due = case.nothing_due

    def rounds(self) -> int:
        """Polling rounds completed so far."""
        raise NotImplementedError

    def warm_up(self) -> None:
        # The first round logs every watch (log_on_start); it is not the
        # steady state being measured.
        self.monitor.start()
        deadline = time.monotonic() + (0.5 if self.nothing_due else 5.0)
        target = self.rounds() + 2
        while self.rounds() < target and time.monotonic() < deadline:
            time.sleep(0.001)
        self.monitor.stop(log_final=False)

    def time_round(self, window_s: float) -> float:
        """Run the monitor once; return the wall-clock nanoseconds per polling round.

        0 when nothing is due and the monitor ran no round: it spent nothing.
        """
        rounds = self.rounds
        clock = time.perf_counter_ns
        started_with = rounds()
        self.monitor.start()
        try:
            if self.nothing_due:
                # The first round after a start runs whatever is due: before the window.
                deadline = time.monotonic() + 5.0
                while rounds() == started_with and time.monotonic() < deadline:
                    time.sleep(0.001)
            time.sleep(_SETTLE_S)
            gc.collect()
            gc.disable()
            try:
                first = rounds()
                started = clock()
                time.sleep(window_s)
                completed = rounds() - first
                elapsed = clock() - started
            finally:
                gc.enable()
        finally:
            self.monitor.stop(log_final=False)
        if completed < 1 and self.nothing_due:
            return 0.0
        if completed < 1:
            raise RuntimeError(
                f"{type(self.monitor).__module__}'s monitor completed no polling "
                f"round within the {window_s} s window; lengthen "
                "background_window_s."
            )
        return elapsed / completed


class _TorchRLBackgroundRig(_BackgroundRig):
    def __init__(self, every_class: Any, *args: Any) -> None:
        from torchrl.record.loggers import monitoring as torchrl_monitoring

        super().__init__(torchrl_monitoring.LoggerMonitor, every_class, *args)
        # TorchRL's thread calls self.step(), so an instance attribute
        # counts its rounds.
        self.counter = _RoundCounter(self.monitor.step)
        self.monitor.step = self.counter

    def rounds(self) -> int:
        return self.counter.rounds


class _RlpulseBackgroundRig(_BackgroundRig):
    def __init__(self, *args: Any) -> None:
        super().__init__(rlpulse.LoggerMonitor, rlpulse.Every, *args)

    def rounds(self) -> int:
        rounds: int = self.monitor.stats()["rounds"]
        return rounds


@dataclass(frozen=True)
class BackgroundResults:
    """The background-mode measurements: per case, the cost a watch adds to a polling round.

    ``cases`` hold, per case and round, the marginal cost of one watch-poll:
    a monitor's round with its watches minus the same monitor's round
    without watches (timed just after it), divided by the watches — the
    budgeted figure. ``gross`` holds the whole round divided by the
    watches, the thread's wake-up included; ``idle`` the idle rounds
    themselves, in ns per round. ``payloads`` counts what rlpulse logged
    during the timed rounds, ``dropped`` how many of those its full sink
    queue dropped instead of delivering (its sender thread did not keep up).

    Examples:
        >>> idle = CaseResult(IDLE_CASE, torchrl_ns=(90_000.0,), rlpulse_ns=(100_000.0,))
        >>> results = BackgroundResults(cases=(), gross=(), idle=idle, payloads=0, dropped=0)
        >>> results.idle.rlpulse_median
        100000.0
    """

    cases: tuple[CaseResult, ...]
    gross: tuple[CaseResult, ...]
    idle: CaseResult
    payloads: int
    dropped: int


IDLE_CASE = Case(
    "idle round (no watches)", lambda every: None, math.inf, False, nothing_due=True
)
"""The pseudo-case of an idle background round: no watches, so no budget."""


def measure_background(
    settings: Settings,
    cases: tuple[Case, ...] = CASES,
    report: Callable[[str], None] = progress,
) -> BackgroundResults:
    """Measure every case on both monitors polling from their own threads, rounds interleaved.

    Each round starts one monitor, counts the polling rounds its thread
    completes over ``settings.background_window_s`` of wall-clock time and
    stops it, then does the same with a monitor of the same implementation
    without watches. A watch-poll's cost is the difference of the two round
    costs divided by the watches; the gross cost, the whole round divided
    by the watches, is kept too. ``report`` receives one progress line per
    round.

    Examples:
        >>> tiny = Settings(watches=2, background_rounds=1, background_window_s=0.01)
        >>> results = measure_background(tiny, report=lambda line: None)
        >>> [len(result.rlpulse_ns) for result in results.cases]
        [1, 1, 1]
        >>> results.idle.torchrl_median > 0, results.idle.rlpulse_median  # rlpulse: no idle round
        (True, 0.0)
    """
    marginal = []
    gross = []
    torchrl_idle: list[float] = []
    rlpulse_idle: list[float] = []
    payloads = dropped = 0
    watches = settings.watches
    for case in cases:
        rounds = _time_background(case, case.label[:3], watches, settings, report)
        payloads += rounds.logged
        dropped += rounds.dropped
        torchrl_idle += rounds.torchrl_idle
        rlpulse_idle += rounds.rlpulse_idle
        gross.append(
            CaseResult(
                case,
                tuple(ns / watches for ns in rounds.torchrl),
                tuple(ns / watches for ns in rounds.rlpulse),
            )
        )
        marginal.append(
            CaseResult(
                case,
                tuple(
                    (full - idle) / watches
                    for full, idle in zip(
                        rounds.torchrl, rounds.torchrl_idle, strict=True
                    )
                ),
                tuple(
                    (full - idle) / watches
                    for full, idle in zip(
                        rounds.rlpulse, rounds.rlpulse_idle, strict=True
                    )
                ),
            )
        )
    return BackgroundResults(
        tuple(marginal),
        tuple(gross),
        CaseResult(IDLE_CASE, tuple(torchrl_idle), tuple(rlpulse_idle)),
        payloads,
        dropped,
    )


@dataclass(frozen=True)
class _BackgroundRounds:
    # Per round, ns per polling round of each monitor with and without
    # watches; and the payloads rlpulse logged and dropped meanwhile.
    torchrl: tuple[float, ...]
    torchrl_idle: tuple[float, ...]
    rlpulse: tuple[float, ...]
    rlpulse_idle: tuple[float, ...]
    logged: int
    dropped: int


def _time_background(
    case: Case,
    short_label: str,
    watches: int,
    settings: Settings,
    report: Callable[[str], None],
) -> _BackgroundRounds:
    from torchrl.record.loggers import monitoring as torchrl_monitoring

    torchrl_rig = _TorchRLBackgroundRig(torchrl_monitoring.Every, case, watches)
    torchrl_idle_rig = _TorchRLBackgroundRig(torchrl_monitoring.Every, IDLE_CASE, 0)
    rlpulse_rig = _RlpulseBackgroundRig(case, watches)
    rlpulse_idle_rig = _RlpulseBackgroundRig(IDLE_CASE, 0)
    for rig in (torchrl_rig, torchrl_idle_rig, rlpulse_rig, rlpulse_idle_rig):
        rig.warm_up()
    window = settings.background_window_s
    torchrl_ns: list[float] = []
    torchrl_idle_ns: list[float] = []
    rlpulse_ns: list[float] = []
    rlpulse_idle_ns: list[float] = []
    first = rlpulse_rig.monitor.stats()
    for round_index in range(settings.background_rounds):
        torchrl_ns.append(torchrl_rig.time_round(window))
        torchrl_idle_ns.append(torchrl_idle_rig.time_round(window))
        before = rlpulse_rig.monitor.stats()
        rlpulse_ns.append(rlpulse_rig.time_round(window))
        _check_background_work_done(
            case, torchrl_rig, before, rlpulse_rig.monitor.stats()
        )
        rlpulse_idle_ns.append(rlpulse_idle_rig.time_round(window))
        report(
            f"monitor background {short_label} round {round_index + 1}/"
            f"{settings.background_rounds}: TorchRL {torchrl_ns[-1]:,.0f} ns/round "
            f"(idle {torchrl_idle_ns[-1]:,.0f}), rlpulse {rlpulse_ns[-1]:,.0f} "
            f"ns/round (idle {rlpulse_idle_ns[-1]:,.0f})"
        )
    last = rlpulse_rig.monitor.stats()
    return _BackgroundRounds(
        tuple(torchrl_ns),
        tuple(torchrl_idle_ns),
        tuple(rlpulse_ns),
        tuple(rlpulse_idle_ns),
        int(last["logged"] - first["logged"]),
        int(last["dropped"] - first["dropped"]),
    )


def _check_background_work_done(
    case: Case,
    torchrl_rig: _TorchRLBackgroundRig,
    before: Mapping[str, float],
    after: Mapping[str, float],
) -> None:
    expected = torchrl_rig.watches if case.logs_every_poll else 0
    torchrl_logged = len(torchrl_rig.counter.last_logged)
    if torchrl_logged != expected:
        raise RuntimeError(
            f"{case.label}: TorchRL's last background round logged "
            f"{torchrl_logged} watches, expected {expected}; the benchmark would "
            "not measure what it says."
        )
    # The counters include the round in progress, and stop() ends a round
    # early, so the first and the last round may be partial; on a loaded
    # machine a round may also hand its last watches on to a fresh thread
    # once. Every poll of the rounds between, and each one logged or none.
    rounds = after["rounds"] - before["rounds"]
    polls = after["polls"] - before["polls"]
    logged = after["logged"] - before["logged"]
    every_watch = polls >= (rounds - 2) * torchrl_rig.watches
    # A poll under way when the counters are read is counted, not yet logged.
    every_poll_logged = polls - 2 <= logged <= polls
    if (not every_watch or not every_poll_logged) if expected else logged != 0:
        raise RuntimeError(
            f"{case.label}: rlpulse's background rounds logged {logged:.0f} "
            f"payloads of {polls:.0f} polls in {rounds:.0f} rounds of "
            f"{torchrl_rig.watches} watches, expected "
            f"{'every poll' if expected else 'none'} logged; the benchmark would "
            "not measure what it says."
        )


def table(results: tuple[CaseResult, ...]) -> str:
    """Return the markdown table of ``results``: costs, ratio, budget, verdict.

    Examples:
        >>> print(table((CaseResult(CASES[2], (1000.0,), (600.0,)),)))  # doctest: +NORMALIZE_WHITESPACE
        | case | TorchRL ns/poll | rlpulse ns/poll | ratio rlpulse/TorchRL | budget | result |
        |---|---:|---:|---:|---:|---|
        | (c) counter schedule not due (`Every.counter("frames", 10**12)`) | 1,000 | 600 | 0.60 | <= 0.50 | **OVER BUDGET** |
    """
    lines = [
        "| case | TorchRL ns/poll | rlpulse ns/poll | ratio rlpulse/TorchRL "
        "| budget | result |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for result in results:
        verdict = "pass" if result.within_budget else "**OVER BUDGET**"
        lines.append(
            f"| {result.case.label} | {result.torchrl_median:,.0f} "
            f"| {result.rlpulse_median:,.0f} | {result.ratio:.2f} "
            f"| <= {result.case.budget:.2f} | {verdict} |"
        )
    return "\n".join(lines)


def render(
    results: tuple[CaseResult, ...],
    settings: Settings,
    background: BackgroundResults | None = None,
) -> str:
    """Return this section's markdown: heading, method, the manual and background tables, machine.

    ``results`` are the manual-mode measurements, ``background`` the
    background-mode ones (their subsection is left out when ``None``).

    Examples:
        >>> results = (CaseResult(CASES[0], (1000.0,), (500.0,)),)
        >>> idle = CaseResult(IDLE_CASE, (90_000.0,), (100_000.0,))
        >>> background = BackgroundResults(results, results, idle, payloads=0, dropped=0)
        >>> markdown = render(results, Settings(rounds=1), background)
        >>> print(markdown.splitlines()[0])
        ## Monitor overhead: rlpulse against TorchRL's `LoggerMonitor`
        >>> [line for line in markdown.splitlines() if line.startswith("###")]
        ['### Manual mode', '### Background mode']
    """
    import torchrl

    common = (
        "The cost of one poll of one watch, in nanoseconds, for rlpulse's "
        "`LoggerMonitor` and TorchRL's (`torchrl.record.loggers.monitoring`) "
        f"side by side in one process. Each monitor has {settings.watches} "
        "watches on collector-like sources whose `stats()` builds a fresh "
        "six-key dict (`frames`, `batches`, `frames_per_batch`, "
        "`workers_alive`, `elapsed_s`, `frames_in_flight`) from attributes, "
        "and logs to a sink whose `log_metrics` does nothing. The budget is "
        "the highest acceptable ratio rlpulse/TorchRL, the same in both "
        "modes; the ratio is the median of the per-round ratios (each rlpulse "
        "round against the TorchRL round just before it), the costs the "
        "medians over rounds."
    )
    manual = (
        "Driven by explicit `step()` calls (`background=False`). Between "
        "steps every source collects one batch (its counters advance); that "
        f"is not timed. Each round times {settings.steps} steps with "
        "`time.perf_counter_ns` and the garbage collector disabled, after "
        f"{settings.warmup_steps} untimed warm-up steps (the first logs every "
        "watch, as `log_on_start` asks). Rounds alternate TorchRL, rlpulse, "
        f"TorchRL, rlpulse, … for {settings.rounds} rounds each. Both monitors "
        "are checked to have logged the same payload keys (case a) or nothing "
        "(cases b and c)."
    )
    parts = [
        "## Monitor overhead: rlpulse against TorchRL's `LoggerMonitor`",
        _paragraph(common),
        "### Manual mode",
        _paragraph(manual),
        table(results),
        _paragraph(_spread(results)),
    ]
    if background is not None:
        parts += [
            "### Background mode",
            _paragraph(_background_method(settings)),
            table(background.cases),
            _paragraph(
                _spread(background.cases)
                + " "
                + _idle_round(background, settings.watches)
            ),
        ]
    machine = (
        f"Measured on {platform.system()} {platform.machine()} "
        f"({os.cpu_count()} CPUs), Python {platform.python_version()}, "
        f"TorchRL {torchrl.__version__}, rlpulse {rlpulse.__version__}."
    )
    parts.append(
        _paragraph(machine) + "\nRerun with `python -m benchmarks --only monitor`."
    )
    return "\n\n".join(parts) + "\n"


def _background_method(settings: Settings) -> str:
    return (
        "Both monitors poll from their own threads (`background=True`, "
        f"`poll_interval={_short_float(BACKGROUND_POLL_INTERVAL_S)}`), so their rounds run "
        "back to back while the main thread sleeps. Nothing runs between two "
        "polls, so each source's `stats()` moves `frames` and `batches` on "
        "itself (two integer additions per call, the same for both "
        "monitors). A round starts one monitor, lets it run "
        f"{_SETTLE_S * 1000:.0f} ms, counts the polling rounds it completes "
        f"over a {settings.background_window_s:g} s wall-clock window (garbage "
        "collector disabled), and stops it with `stop(log_final=False)`; "
        "then the same for a monitor of the same implementation without "
        "watches. The cost of a watch-poll is what the watches add to a "
        "polling round: the window divided by the rounds, minus the same for "
        "the monitor without watches, divided by the watches; this is the "
        "figure in the table and the one the budget applies to. It includes "
        "everything the watches cause: for rlpulse its per-sink queue and "
        "the sender thread delivering from it, which competes for the GIL. "
        'rlpulse\'s rounds are read from `LoggerMonitor.stats()["rounds"]`; '
        "TorchRL's are counted by a wrapper around the instance's `step`, "
        "which its thread calls. Rounds alternate TorchRL, TorchRL without "
        f"watches, rlpulse, rlpulse without watches, … for {settings.background_rounds} "
        "rounds each, after one untimed warm-up start of each monitor. Both "
        "monitors are checked to have logged every watch (case a) or nothing "
        "(cases b and c) in each round."
    )


def _short_float(value: float) -> str:
    # 1e-06 reads better as 1e-6.
    return f"{value:g}".replace("e-0", "e-")


def _idle_round(background: BackgroundResults, watches: int) -> str:
    idle = background.idle
    gross = "; ".join(
        f"{result.case.label[:3]} {result.torchrl_median:,.0f} and "
        f"{result.rlpulse_median:,.0f} ns, ratio {result.ratio:.2f}"
        for result in background.gross
    )
    if background.dropped:
        dropped = (
            f"rlpulse's sink queue dropped {background.dropped:,} of the "
            f"{background.payloads:,} payloads it logged in the timed rounds "
            "(its sender thread did not get the GIL in time), sparing it "
            "their delivery."
        )
    else:
        dropped = (
            "rlpulse's sink queue delivered all "
            f"{background.payloads:,} payloads it logged in the timed rounds."
        )
    if idle.rlpulse_median > 0:
        rlpulse_idle = f"and rlpulse {idle.rlpulse_median / 1000:,.0f} µs "
    else:
        rlpulse_idle = (
            "while rlpulse's runs no round at all (with nothing due its thread "
            "sleeps until a watch is: nothing is taken off its rounds) "
        )
    return (
        "An idle round (the same monitor without watches) takes TorchRL "
        f"{idle.torchrl_median / 1000:,.0f} µs {rlpulse_idle}(medians over "
        f"{len(idle.rlpulse_ns)} rounds each): the polling thread's wait and "
        "wake-up, paid once per round whatever the watches, and on this "
        "machine mostly the operating system's (a blocking wait with a "
        "timeout costs tens of µs here, for any thread). Whole rounds divided "
        f"by the {watches} watches, that wake-up included, come to (TorchRL "
        f"and rlpulse per watch-poll): {gross}. " + dropped
    )


def _spread(results: tuple[CaseResult, ...]) -> str:
    return (
        "Per-round ratios ranged "
        + "; ".join(
            f"{result.case.label[:3]} {min(result.ratios):.2f}–{max(result.ratios):.2f}"
            for result in results
        )
        + "."
    )


def _paragraph(text: str) -> str:
    return textwrap.fill(text, width=79, break_on_hyphens=False)


def run(*, quick: bool = False) -> str:
    """Measure the monitor overhead in both modes, print the tables, and return the section's markdown."""
    settings = Settings.quick() if quick else Settings()
    manual = measure(settings)
    background = measure_background(settings)
    for mode, results in (("manual", manual), ("background", background.cases)):
        print(f"{mode} mode:\n{table(results)}", flush=True)
        for result in results:
            if not result.within_budget:
                print(
                    f"OVER BUDGET ({mode} mode): {result.case.label}: ratio "
                    f"{result.ratio:.2f} > budget {result.case.budget:.2f}",
                    file=sys.stdout,
                    flush=True,
                )
    return render(manual, settings, background)
