"""Watch count: a round costs what is due, not how many watches there are.

A monitor of 10,000 watches of which 100 are due every round (9,900 on an
hourly ``Every.seconds`` schedule, polled once and not due again; 100
without schedule) against a monitor of those 100 alone, side by side in one
process, rounds alternating.
"""

from __future__ import annotations

import gc
import statistics
import time
from dataclasses import dataclass

import rlpulse
from benchmarks import machine, progress, reflow
from benchmarks.monitor_overhead import AdvancingCollectorLike, NullSink

__all__ = [
    "BUDGET",
    "Settings",
    "WatchCountResult",
    "build",
    "measure",
    "render",
    "run",
]

BUDGET = 2.0
"""The highest acceptable cost ratio: all watches against the due ones alone."""


@dataclass(frozen=True)
class Settings:
    """Sizes and rounds.

    Examples:
        >>> Settings().watches, Settings().due
        (10000, 100)
    """

    watches: int = 10_000
    due: int = 100
    rounds: int = 15
    steps: int = 50
    background_window_s: float = 2.0
    poll_interval: float = 0.05


@dataclass
class WatchCountResult:
    """Per round, the cost of one round of each monitor: manual (ns a step) and background (CPU ns a round)."""

    manual_all: list[float]
    manual_due: list[float]
    background_all: list[float]
    background_due: list[float]

    @staticmethod
    def _ratio(all_: list[float], due: list[float]) -> float:
        return statistics.median(a / d for a, d in zip(all_, due, strict=True))

    @property
    def manual_ratio(self) -> float:
        """Median over rounds of the step cost ratio, all watches against the due ones."""
        return self._ratio(self.manual_all, self.manual_due)

    @property
    def background_ratio(self) -> float:
        """Median over rounds of the CPU-per-round ratio, all watches against the due ones."""
        return self._ratio(self.background_all, self.background_due)


def build(
    total: int, due: int, *, background: bool, poll_interval: float = 1.0
) -> rlpulse.LoggerMonitor:
    """A monitor of ``total`` watches, of which ``due`` have no schedule and the rest an hourly one.

    Every watch has had its first poll, so the hourly ones are not due.

    Examples:
        >>> monitor = build(30, 3, background=False)
        >>> len(monitor.step())
        3
    """
    monitor = rlpulse.LoggerMonitor(
        NullSink(), background=background, poll_interval=poll_interval
    )
    for index in range(total - due):
        monitor.watch(
            AdvancingCollectorLike(),
            name=f"hourly_{index}",
            schedule=rlpulse.Every.seconds(3600),
        )
    for index in range(due):
        monitor.watch(AdvancingCollectorLike(), name=f"every_{index}")
    if background:
        monitor.start()
        monitor.step()  # on the polling thread: its first poll of every watch
        monitor.stop(log_final=False)
    else:
        monitor.step()
    return monitor


def _manual_ns(monitor: rlpulse.LoggerMonitor, steps: int) -> float:
    gc.disable()
    try:
        started = time.perf_counter_ns()
        for _ in range(steps):
            monitor.step()
        return (time.perf_counter_ns() - started) / steps
    finally:
        gc.enable()


def _background_cpu_ns(monitor: rlpulse.LoggerMonitor, window_s: float) -> float:
    # The main thread sleeps: the process's CPU time is the monitor's.
    rounds_before = monitor.stats()["rounds"]
    monitor.start()
    started = time.process_time_ns()
    time.sleep(window_s)
    cpu = time.process_time_ns() - started
    rounds = monitor.stats()["rounds"] - rounds_before
    monitor.stop(log_final=False)
    return cpu / max(1, rounds)


def measure(settings: Settings) -> WatchCountResult:
    """Time both monitors, rounds alternating, manual then background."""
    manual = {
        key: build(n, settings.due, background=False) for key, n in _sizes(settings)
    }
    background = {
        key: build(
            n, settings.due, background=True, poll_interval=settings.poll_interval
        )
        for key, n in _sizes(settings)
    }
    result = WatchCountResult([], [], [], [])
    for round_index in range(settings.rounds):
        result.manual_due.append(_manual_ns(manual["due"], settings.steps))
        result.manual_all.append(_manual_ns(manual["all"], settings.steps))
        result.background_due.append(
            _background_cpu_ns(background["due"], settings.background_window_s)
        )
        result.background_all.append(
            _background_cpu_ns(background["all"], settings.background_window_s)
        )
        progress(f"watch_count: round {round_index + 1}/{settings.rounds}")
    return result


def _sizes(settings: Settings) -> list[tuple[str, int]]:
    return [("due", settings.due), ("all", settings.watches)]


def render(result: WatchCountResult, settings: Settings) -> str:
    """The section's markdown."""
    rows = [
        (
            "manual: one `step()`, ns",
            result.manual_due,
            result.manual_all,
            result.manual_ratio,
        ),
        (
            "background: CPU of one round, ns",
            result.background_due,
            result.background_all,
            result.background_ratio,
        ),
    ]
    lines = [
        "## Watch count: a round costs what is due",
        "",
        f"A monitor of {settings.watches:,} watches of which {settings.due} are "
        f"due every round ({settings.watches - settings.due:,} on "
        "`Every.seconds(3600)`, each polled once and not due again; "
        f"{settings.due} without schedule), against a monitor of those "
        f"{settings.due} alone; collector-like sources, a sink that does "
        "nothing. Manual mode times "
        f"{settings.steps} `step()` calls per round (garbage collector off); "
        "background mode counts the process's CPU time over a "
        f"{settings.background_window_s:g} s window of rounds every "
        f"{settings.poll_interval:g} s while the main thread sleeps, per round. "
        f"Rounds alternate the two monitors, {settings.rounds} rounds; the "
        "ratio is the median of the per-round ratios. Time-gated watches wait "
        "in a heap by due time (`runtime/agenda.py`), so a round does not look "
        "at the watches that are not due.",
        "",
        f"| figure | {settings.due} watches | {settings.watches:,} watches | ratio | budget | result |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for label, due, all_, ratio in rows:
        verdict = "pass" if ratio <= BUDGET else "OVER BUDGET"
        lines.append(
            f"| {label} | {statistics.median(due):,.0f} | "
            f"{statistics.median(all_):,.0f} | {ratio:.2f} | <= {BUDGET:.2f} | {verdict} |"
        )
    lines += [
        "",
        machine(),
    ]
    return reflow("\n".join(lines))


def run(*, quick: bool = False) -> str:
    """Measure and render the section (``quick``: a smoke run whose numbers mean nothing)."""
    settings = (
        Settings(watches=200, due=10, rounds=1, steps=3, background_window_s=0.2)
        if quick
        else Settings()
    )
    return render(measure(settings), settings)
