"""Keeping up beside a busy loop: every due payload stored, every watch served alike.

A CPU-bound pure-Python loop runs on the main thread while a background
monitor polls many watches at 10 Hz into a store: rlpulse's ``LoggerMonitor``
into ``SQLiteLogger``, TorchRL's into its ``CSVLogger``, 100 watches and 500,
configurations alternating round by round in one process. Each window counts
the payloads that reached the store per watch (read back afterwards) against
those due, and rlpulse's drop warnings.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import statistics
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import rlpulse
from benchmarks import Budget, machine, progress, reflow
from benchmarks.loop_slowdown import cpu_loop
from benchmarks.monitor_overhead import AdvancingCollectorLike

__all__ = [
    "BUDGETS",
    "MONITORS",
    "Result",
    "Sample",
    "Settings",
    "measure",
    "render",
    "run",
]

MONITORS = ("rlpulse", "TorchRL")
"""The monitors compared, each at every watch count."""

_DROP_WARNING = "dropped the oldest pending payload"


@dataclass(frozen=True)
class Settings:
    """How long and how big: rounds of one window per monitor and watch count.

    Examples:
        >>> Settings().watch_counts, Settings().due_per_watch
        ((100, 500), 150)
    """

    rounds: int = 3
    # Half an interval past a round, so that the last round due is not
    # raced by the window's end.
    window_s: float = 15.05
    watch_counts: tuple[int, ...] = (100, 500)
    poll_interval: float = 0.1

    @property
    def due_per_watch(self) -> int:
        """The payloads due of each watch in a window: polls are due one interval after start, then every interval."""
        return int(self.window_s / self.poll_interval)


@dataclass(frozen=True)
class Sample:
    """One window of one monitor: the payloads each watch got into the store.

    Examples:
        >>> sample = Sample(watches=2, due=20, rows={"a": 10, "b": 8}, warnings=0, dropped=0)
        >>> sample.delivered, sample.fairness
        (0.9, 0.8)
        >>> Sample(watches=3, due=30, rows={"a": 10, "b": 10}).fairness  # a watch with no row
        0.0
    """

    watches: int
    due: int
    rows: dict[str, int]
    # rlpulse's drop warnings and dropped payloads (None for TorchRL's monitor).
    warnings: int | None = None
    dropped: int | None = None

    @property
    def delivered(self) -> float:
        """The share of the due payloads that reached the store."""
        return sum(self.rows.values()) / self.due if self.due else 1.0

    @property
    def fairness(self) -> float:
        """The rows of the least-served watch over the rows of the most-served (0 when a watch has none)."""
        if len(self.rows) < self.watches or not self.rows:
            return 0.0
        most = max(self.rows.values())
        return min(self.rows.values()) / most if most else 0.0


@dataclass
class Result:
    """Every window of one monitor at one watch count, in round order.

    Examples:
        >>> result = Result("rlpulse", 2, [Sample(2, 20, {"a": 10, "b": 10}, 0, 0)])
        >>> result.delivered, result.fairness, result.warnings
        (1.0, 1.0, 0)
    """

    monitor: str
    watches: int
    samples: list[Sample] = field(default_factory=list)

    @property
    def delivered(self) -> float:
        """Median over rounds of the share of due payloads stored."""
        return statistics.median(s.delivered for s in self.samples)

    @property
    def fairness(self) -> float:
        """Median over rounds of least-served over most-served watch."""
        return statistics.median(s.fairness for s in self.samples)

    @property
    def warnings(self) -> int | None:
        """The most drop warnings of one window (None for TorchRL's monitor)."""
        counts = [s.warnings for s in self.samples if s.warnings is not None]
        return max(counts) if counts else None

    @property
    def dropped(self) -> int | None:
        """The payloads dropped by the queue, all windows together (None for TorchRL's monitor)."""
        counts = [s.dropped for s in self.samples if s.dropped is not None]
        return sum(counts) if counts else None


def _warnings_beyond_drops(result: Result) -> float:
    # A window's drops form one streak at most at these rates: one warning
    # if it dropped, none if it did not.
    return max((s.warnings or 0) - (1 if s.dropped else 0) for s in result.samples)


BUDGETS: tuple[Budget[Result], ...] = (
    Budget("delivered, of due", lambda r: r.delivered, 0.99, at_least=True),
    Budget(
        "least-served watch, of the most-served",
        lambda r: r.fairness,
        0.80,
        at_least=True,
    ),
    Budget("drop warnings beyond one a window with drops", _warnings_beyond_drops, 1),
)
"""rlpulse's budgets, applied at every watch count."""


class _DropWarnings(logging.Handler):
    """Counts rlpulse's drop warnings while installed."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if _DROP_WARNING in record.getMessage():
            self.count += 1


@contextlib.contextmanager
def _counting_drop_warnings() -> Iterator[_DropWarnings]:
    handler = _DropWarnings()
    logger = logging.getLogger("rlpulse")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def _watched(monitor: Any, watches: int) -> Any:
    for index in range(watches):
        monitor.watch(AdvancingCollectorLike(), name=f"worker_{index}")
    return monitor


def _window(loop: Callable[[float], int], seconds: float, monitor: Any) -> None:
    monitor.start()
    loop(seconds)
    monitor.stop(log_final=False)


def _rlpulse_sample(
    loop: Callable[[float], int], settings: Settings, watches: int, directory: Path
) -> Sample:
    store = directory / "rlpulse.sqlite"
    with (
        rlpulse.SQLiteLogger(store, run="window") as sink,
        _counting_drop_warnings() as warnings,
    ):
        monitor = _watched(
            rlpulse.LoggerMonitor(sink, poll_interval=settings.poll_interval), watches
        )
        _window(loop, settings.window_s, monitor)
    with contextlib.closing(sqlite3.connect(store)) as connection:
        rows = dict(
            connection.execute(
                "SELECT substr(name, 1, instr(name, '/') - 1), count(*) "
                "FROM metrics WHERE name LIKE '%/frames' GROUP BY 1"
            ).fetchall()
        )
    return Sample(
        watches,
        watches * settings.due_per_watch,
        rows,
        warnings=warnings.count,
        dropped=int(monitor.stats()["dropped"]),
    )


def _torchrl_sample(
    loop: Callable[[float], int], settings: Settings, watches: int, directory: Path
) -> Sample:
    from torchrl.record.loggers.csv import CSVLogger
    from torchrl.record.loggers.monitoring import LoggerMonitor

    logger = CSVLogger("window", log_dir=str(directory))
    monitor = _watched(
        LoggerMonitor(logger, poll_interval=settings.poll_interval), watches
    )
    _window(loop, settings.window_s, monitor)
    scalars = logger.experiment.scalars
    rows = Counter(
        {
            name.partition("/")[0]: len(values)
            for name, values in scalars.items()
            if name.endswith("/frames") and values
        }
    )
    for handle in logger.experiment.files.values():
        handle.close()
    return Sample(watches, watches * settings.due_per_watch, dict(rows))


def measure(settings: Settings) -> list[Result]:
    """Run every round: each watch count, each monitor, one window each, the order rotating."""
    results = {
        (monitor, watches): Result(monitor, watches)
        for watches in settings.watch_counts
        for monitor in MONITORS
    }
    configurations = list(results)
    loop = cpu_loop()
    loop(1.0)  # warm-up
    with tempfile.TemporaryDirectory() as tmp:
        for round_index in range(settings.rounds):
            turn = round_index % len(configurations)
            for monitor, watches in configurations[turn:] + configurations[:turn]:
                directory = Path(tmp) / f"{round_index}-{monitor}-{watches}"
                directory.mkdir()
                sample = (_rlpulse_sample if monitor == "rlpulse" else _torchrl_sample)(
                    loop, settings, watches, directory
                )
                results[monitor, watches].samples.append(sample)
            progress(f"keeping_up: round {round_index + 1}/{settings.rounds}")
    return list(results.values())


def _percent(value: float) -> str:
    return f"{100 * value:.1f} %"


def _range(values: list[float]) -> str:
    low, high = min(values), max(values)
    return _percent(low) if low == high else f"{_percent(low)}–{_percent(high)}"


def table(results: list[Result]) -> str:
    """The markdown table: per watch count and monitor, what reached the store and how evenly."""
    lines = [
        "| watches | monitor | delivered, of due (rounds) | least-served watch, of the most-served (rounds) | drop warnings, most in a window | dropped by the queue |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for result in results:
        warnings, dropped = result.warnings, result.dropped
        lines.append(
            f"| {result.watches} | {result.monitor} | {_percent(result.delivered)} "
            f"({_range([s.delivered for s in result.samples])}) | "
            f"{_percent(result.fairness)} "
            f"({_range([s.fairness for s in result.samples])}) | "
            f"{'—' if warnings is None else warnings} | "
            f"{'—' if dropped is None else f'{dropped:,}'} |"
        )
    return "\n".join(lines)


def render(results: list[Result], settings: Settings) -> str:
    """The section's markdown: method, the table, rlpulse's budgets."""
    counts = " and ".join(str(count) for count in settings.watch_counts)
    parts = [
        "## Keeping up beside a busy loop: every payload stored, every watch alike",
        "",
        "A CPU-bound pure-Python loop runs on the main thread (as a training "
        "loop's Python side does) while a background monitor polls "
        f"{counts} collector-like watches (six-key `stats()`, counters moving "
        f"at every call) every {settings.poll_interval:g} s, no schedule, for a "
        f"{settings.window_s:g} s window: rlpulse's `LoggerMonitor` into "
        "`SQLiteLogger`, TorchRL's into its `CSVLogger`. Monitors and watch "
        "counts alternate in one process, their order rotating each round, for "
        f"{settings.rounds} rounds. *Delivered* counts the payloads that reached "
        "the store (rlpulse: rows of the SQLite file, read back; TorchRL: its "
        "logger's scalars) against those due at the poll rate "
        f"({settings.due_per_watch} a watch); *least-served* is the rows of the "
        "watch with fewest over the rows of the watch with most. Figures are "
        "medians over rounds, the range in brackets. Drop warnings are rlpulse's "
        "(one is promised per drop streak); TorchRL's monitor has no queue to drop "
        "from: what its thread does not reach is not polled.",
        "",
        table(results),
        "",
        "### rlpulse's budgets",
        "",
        "| watches | figure | rlpulse | budget | result |",
        "|---:|---|---:|---:|---|",
    ]
    for result in results:
        if result.monitor != "rlpulse":
            continue
        for budget in BUDGETS:
            value = budget.figure(result)
            shown = _percent(value) if budget.at_least else f"{value:g}"
            limit = _percent(budget.limit) if budget.at_least else f"{budget.limit:g}"
            verdict = "pass" if budget.passes(result) else "OVER BUDGET"
            parts.append(
                f"| {result.watches} | {budget.label} | {shown} | {budget.sign} {limit} "
                f"| {verdict} |"
            )
    parts += ["", machine("torchrl")]
    return reflow("\n".join(parts))


def run(*, quick: bool = False) -> str:
    """Measure and render the section (``quick``: a smoke run whose numbers mean nothing)."""
    settings = (
        Settings(rounds=1, window_s=0.35, watch_counts=(5,)) if quick else Settings()
    )
    return render(measure(settings), settings)
