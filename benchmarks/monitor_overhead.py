"""Monitor overhead: what one poll of one watch costs, rlpulse against TorchRL.

Both monitors run side by side in one process on the same kind of source —
a collector-like object whose ``stats()`` builds a fresh six-key dict from
its attributes, with counters advancing between polls — logging to a sink
that does nothing, in manual mode (``background=False``, explicit
``step()``), so the numbers are the monitor's own work: snapshot, schedule,
rates, payload, hand-over.
"""

from __future__ import annotations

import gc
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
    "Case",
    "CaseResult",
    "CollectorLike",
    "NullSink",
    "Settings",
    "measure",
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
    its work.

    Examples:
        >>> CASES[1].schedule(rlpulse.Every)
        Every(kind='seconds', interval=3600.0, key=None)
    """

    label: str
    schedule: Callable[[Any], Any]
    budget: float
    logs_every_poll: bool


CASES: tuple[Case, ...] = (
    Case("(a) every poll logged (no schedule)", lambda every: None, 0.7, True),
    Case(
        "(b) seconds schedule not due (`Every.seconds(3600)`)",
        lambda every: every.seconds(3600),
        0.2,
        False,
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

    Examples:
        >>> Settings.quick().rounds < Settings().rounds
        True
    """

    rounds: int = 15
    watches: int = 100
    steps: int = 200
    warmup_steps: int = 20

    @classmethod
    def quick(cls) -> Settings:
        """Return settings for a smoke run: a few short rounds."""
        return cls(rounds=3, watches=20, steps=20, warmup_steps=2)


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


def render(results: tuple[CaseResult, ...], settings: Settings) -> str:
    """Return this section's markdown: heading, method, table and machine.

    Examples:
        >>> results = (CaseResult(CASES[0], (1000.0,), (500.0,)),)
        >>> print(render(results, Settings(rounds=1)).splitlines()[0])
        ## Monitor overhead: rlpulse against TorchRL's `LoggerMonitor`
    """
    import torchrl

    method = (
        "The cost of one poll of one watch, in nanoseconds, for rlpulse's "
        "`LoggerMonitor` and TorchRL's (`torchrl.record.loggers.monitoring`) "
        f"side by side in one process. Each monitor has {settings.watches} "
        "watches on collector-like sources whose `stats()` builds a fresh "
        "six-key dict (`frames`, `batches`, `frames_per_batch`, "
        "`workers_alive`, `elapsed_s`, `frames_in_flight`) from attributes, "
        "logs to a sink whose `log_metrics` does nothing, and is driven by "
        "explicit `step()` calls (`background=False`). Between steps every "
        "source collects one batch (its counters advance); that is not timed. "
        f"Each round times {settings.steps} steps with `time.perf_counter_ns` "
        f"and the garbage collector disabled, after {settings.warmup_steps} "
        "untimed warm-up steps (the first logs every watch, as `log_on_start` "
        "asks). Rounds alternate TorchRL, rlpulse, TorchRL, rlpulse, … for "
        f"{settings.rounds} rounds each; the costs are the medians over rounds, "
        "the ratio the median of the per-round ratios (each rlpulse round "
        "against the TorchRL round just before it). The budget is the highest "
        "acceptable ratio; both monitors are checked to have logged the same "
        "payload keys (case a) or nothing (cases b and c)."
    )
    spread = "Per-round ratios ranged " + "; ".join(
        f"{result.case.label[:3]} {min(result.ratios):.2f}–{max(result.ratios):.2f}"
        for result in results
    )
    machine = (
        f"Measured on {platform.system()} {platform.machine()} "
        f"({os.cpu_count()} CPUs), Python {platform.python_version()}, "
        f"TorchRL {torchrl.__version__}, rlpulse {rlpulse.__version__}."
    )
    return (
        "\n\n".join(
            [
                "## Monitor overhead: rlpulse against TorchRL's `LoggerMonitor`",
                textwrap.fill(method, width=79, break_on_hyphens=False),
                table(results),
                textwrap.fill(spread + ". " + machine, width=79, break_on_hyphens=False)
                + "\nRerun with `python -m benchmarks --only monitor`.",
            ]
        )
        + "\n"
    )


def run(*, quick: bool = False) -> str:
    """Measure the monitor overhead, print the table, and return the section's markdown."""
    settings = Settings.quick() if quick else Settings()
    results = measure(settings)
    print(table(results), flush=True)
    for result in results:
        if not result.within_budget:
            print(
                f"OVER BUDGET: {result.case.label}: ratio {result.ratio:.2f} "
                f"> budget {result.case.budget:.2f}",
                file=sys.stdout,
                flush=True,
            )
    return render(results, settings)
