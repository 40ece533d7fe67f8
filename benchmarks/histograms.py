"""Histograms: the cost of ``Tally.observe`` and ``Tally.time()`` against prometheus_client's ``Histogram``; and of stage timing.

Both record one latency into a histogram on the training loop's hot path;
prometheus_client's is the usual choice in Python. Side by side in one
process, rounds interleaving the measurements. Beside them, what stage
timing costs per recorded interval (``Tally.busy()``, ``Tally.waiting()``),
against ``Tally.time()``.
"""

from __future__ import annotations

import gc
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import rlpulse
from benchmarks import machine, progress, reflow

__all__ = [
    "OBSERVE_BUDGET",
    "TIME_BUDGET",
    "HistogramResult",
    "Settings",
    "measure",
    "render",
    "run",
]

OBSERVE_BUDGET = 0.35
"""The highest acceptable cost ratio of ``Tally.observe`` to prometheus_client's ``Histogram.observe``."""

TIME_BUDGET = 0.5
"""The highest acceptable cost ratio of ``with Tally.time(key)`` to prometheus_client's ``with Histogram.time()``."""


@dataclass(frozen=True)
class Settings:
    """Rounds and calls per round.

    Examples:
        >>> Settings().rounds, Settings().calls
        (41, 20000)
    """

    rounds: int = 41
    calls: int = 20_000


@dataclass
class HistogramResult:
    """Per round, ns per call of each: prometheus_client's and rlpulse's observe and timer."""

    prometheus_observe: list[float]
    tally_observe: list[float]
    prometheus_time: list[float]
    tally_time: list[float]
    tally_busy: list[float] = field(default_factory=list)
    tally_waiting: list[float] = field(default_factory=list)

    @property
    def observe_ratio(self) -> float:
        """Median over rounds of ``Tally.observe``'s cost over prometheus_client's."""
        return _median_ratio(self.tally_observe, self.prometheus_observe)

    @property
    def time_ratio(self) -> float:
        """Median over rounds of ``Tally.time()``'s cost over prometheus_client's."""
        return _median_ratio(self.tally_time, self.prometheus_time)


def _median_ratio(ours: list[float], theirs: list[float]) -> float:
    return statistics.median(a / b for a, b in zip(ours, theirs, strict=True))


def _loops(
    values: list[float],
) -> dict[str, Callable[[], None]]:
    # The four measured loops, each over the same values.
    from prometheus_client import CollectorRegistry
    from prometheus_client import Histogram as PrometheusHistogram

    histogram = PrometheusHistogram(
        "latency_seconds", "latency", registry=CollectorRegistry()
    )
    tally = rlpulse.Tally()

    def prometheus_observe() -> None:
        observe = histogram.observe
        for value in values:
            observe(value)

    def tally_observe() -> None:
        observe = tally.observe
        for value in values:
            observe("latency_s", value)

    def prometheus_time() -> None:
        timer = histogram.time
        for _ in values:
            with timer():
                pass

    def tally_time() -> None:
        timer = tally.time
        for _ in values:
            with timer("step_s"):
                pass

    def tally_busy() -> None:
        busy = tally.busy
        for _ in values:
            with busy():
                pass

    def tally_waiting() -> None:
        for _ in tally.waiting(values):
            pass

    return {
        "prometheus_observe": prometheus_observe,
        "tally_observe": tally_observe,
        "prometheus_time": prometheus_time,
        "tally_time": tally_time,
        "tally_busy": tally_busy,
        "tally_waiting": tally_waiting,
    }


def _ns_per_call(loop: Callable[[], None], calls: int) -> float:
    gc.disable()
    try:
        started = time.perf_counter_ns()
        loop()
        return (time.perf_counter_ns() - started) / calls
    finally:
        gc.enable()


def measure(settings: Settings) -> HistogramResult:
    """Time the four loops, rounds interleaving them (the order alternating)."""
    generator = random.Random(3)
    values = [generator.lognormvariate(-4.0, 1.0) for _ in range(settings.calls)]
    loops = _loops(values)
    for loop in loops.values():  # warm up: buckets made, code paths taken
        loop()
    result = HistogramResult([], [], [], [], [], [])
    names = list(loops)
    for round_index in range(settings.rounds):
        order = names if round_index % 2 == 0 else names[::-1]
        for name in order:
            getattr(result, name).append(_ns_per_call(loops[name], settings.calls))
        progress(f"histograms: round {round_index + 1}/{settings.rounds}")
    return result


def render(result: HistogramResult, settings: Settings) -> str:
    """The section's markdown."""
    rows = [
        (
            "`observe(value)`",
            result.prometheus_observe,
            result.tally_observe,
            result.observe_ratio,
            OBSERVE_BUDGET,
        ),
        (
            "`with time():` an empty block",
            result.prometheus_time,
            result.tally_time,
            result.time_ratio,
            TIME_BUDGET,
        ),
    ]
    lines = [
        "## Histograms: the cost of an observation",
        "",
        "rlpulse's `Tally.observe(key, value)` and `with tally.time(key):` "
        "against prometheus_client's `Histogram.observe(value)` and `with "
        "histogram.time():` (default buckets), in one process. Each round "
        f"times {settings.calls:,} calls of each of the four, garbage "
        "collector off, the order reversed every other round; "
        f"{settings.rounds} rounds, the ratio is the median of the per-round "
        "ratios. A Tally observation also keeps the key's window (mean, min, "
        "max, last) and the extremes that clamp its quantiles; its bucket is "
        "OpenTelemetry's exponential bucket at scale 6.",
        "",
        "| call | prometheus_client, ns | rlpulse, ns | ratio | budget | result |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for label, theirs, ours, ratio, budget in rows:
        verdict = "pass" if ratio <= budget else "OVER BUDGET"
        lines.append(
            f"| {label} | {statistics.median(theirs):,.0f} | "
            f"{statistics.median(ours):,.0f} | {ratio:.2f} | <= {budget:.2f} | {verdict} |"
        )
    time_ns = statistics.median(result.tally_time)
    lines += [
        "",
        "Stage timing, what a bottleneck verdict reads "
        "(docs/finding-the-bottleneck.md): seconds added to a counter per "
        "recorded interval, against `with tally.time(key):`, in the same rounds.",
        "",
        "| call | rlpulse, ns | against `time()` |",
        "|---|---:|---:|",
    ]
    for label, ours in (
        ("`with busy():` an empty block", result.tally_busy),
        ("`for item in waiting(items):` one item", result.tally_waiting),
    ):
        median = statistics.median(ours)
        lines.append(f"| {label} | {median:,.0f} | {median / time_ns:.2f}x |")
    lines += ["", machine("prometheus_client")]
    return reflow("\n".join(lines))


def run(*, quick: bool = False) -> str:
    """Measure and render the section (``quick``: a smoke run whose numbers mean nothing)."""
    settings = Settings(rounds=2, calls=200) if quick else Settings()
    return render(measure(settings), settings)
