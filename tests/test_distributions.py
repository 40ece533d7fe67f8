"""Distributions (SPEC 6.1): histograms within 1 %, ``Tally.time``, and quantiles a watch logs over its own intervals.

Quantiles are checked against the observations themselves, sorted; the
monitor logs into real SQLite files read back with ``rlpulse.read``.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from rlpulse import LoggerMonitor, SQLiteLogger, Tally, read
from rlpulse.distributions import RELATIVE_ERROR, Histogram

pytestmark = pytest.mark.timeout(60)

QUANTILES = (0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1.0)


def exact(values: list[float], q: float) -> float:
    """The observation a quantile stands for: the nearest rank, ``ceil(q * n)``-th smallest."""
    return sorted(values)[max(math.ceil(round(q * len(values), 9)) - 1, 0)]


def assert_within_one_percent(histogram: Histogram, values: list[float]) -> None:
    for q in QUANTILES:
        estimate = histogram.quantile(q)
        truth = exact(values, q)
        assert estimate is not None
        assert abs(estimate - truth) <= RELATIVE_ERROR * abs(truth) * (1 + 1e-9), (
            q,
            estimate,
            truth,
        )


class Recorder:
    def __init__(self) -> None:
        self.payloads: list[dict[str, float]] = []

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        self.payloads.append(dict(metrics))


def test_quantiles_are_within_one_percent_from_a_nanosecond_to_a_gigabyte() -> None:
    generator = random.Random(7)
    values = [10 ** generator.uniform(-9, 9) for _ in range(20_000)]
    histogram = Histogram()
    for value in values:
        histogram.add(value)
    assert histogram.count == len(values)
    assert_within_one_percent(histogram, values)
    # A few hundred buckets cover the eighteen decades.
    assert len(histogram.positive) < 2100


def test_negative_values_and_zeros_take_their_place_in_order() -> None:
    generator = random.Random(3)
    values = [generator.uniform(-50, 50) for _ in range(5_000)] + [0.0] * 500
    histogram = Histogram()
    for value in values:
        histogram.add(value)
    assert_within_one_percent(histogram, values)
    assert histogram.quantile(0.0) == pytest.approx(min(values), rel=RELATIVE_ERROR)


def test_an_interval_holds_only_what_came_since_and_merging_adds_workers() -> None:
    histogram = Histogram()
    for value in range(1, 1001):
        histogram.add(float(value))
    before = histogram.copy()
    later = [float(value) for value in range(5000, 5100)]
    for value in later:
        histogram.add(value)
    interval = histogram.since(before)
    assert interval.count == 100
    assert_within_one_percent(interval, later)
    assert before.count == 1000  # the copy did not move
    merged = Histogram()
    merged.merge(before)
    merged.merge(interval)
    assert merged.count == histogram.count
    assert merged.quantile(0.5) == histogram.quantile(0.5)
    assert Histogram().quantile(0.5) is None


def test_a_watched_tally_logs_quantiles_of_the_observations_since_its_previous_log() -> (
    None
):
    tally = Tally()
    sink = Recorder()
    monitor = LoggerMonitor(sink, background=False)
    monitor.watch(tally, name="train")
    first = [float(v) for v in range(1, 101)]
    for value in first:
        tally.observe("latency_ms", value)
    payload = monitor.step()["train"]
    for q, name in ((0.5, "p50"), (0.9, "p90"), (0.99, "p99")):
        assert payload[f"train/latency_ms_{name}"] == pytest.approx(
            exact(first, q), rel=0.01
        )
    second = [float(v) for v in range(1000, 1101)]
    for value in second:
        tally.observe("latency_ms", value)
    payload = monitor.step()["train"]
    assert payload["train/latency_ms_p50"] == pytest.approx(
        exact(second, 0.5), rel=0.01
    )
    assert payload["train/latency_ms_sum"] == sum(first) + sum(second)
    # Nothing observed since: no quantile, the rest as before.
    payload = monitor.step()["train"]
    assert "train/latency_ms_count" in payload
    assert not [key for key in payload if "_p" in key]


def test_each_watch_of_one_tally_has_intervals_of_its_own() -> None:
    tally = Tally()
    often, seldom = Recorder(), Recorder()
    every_step = LoggerMonitor(often, background=False)
    every_step.watch(tally, name="t")
    once = LoggerMonitor(seldom, background=False)
    once.watch(tally, name="t", quantiles=[0.0, 1.0], log_on_start=False)
    for value in (1.0, 2.0, 3.0):
        tally.observe("loss", value)
    every_step.step()
    for value in (10.0, 20.0, 30.0):
        tally.observe("loss", value)
    assert every_step.step()["t"]["t/loss_p50"] == pytest.approx(20.0, rel=0.01)
    once.step()  # its first poll: the baseline only, nothing logged
    assert seldom.payloads == []
    logged = once.step()["t"]
    # Never logged before: its interval is everything observed.
    assert logged["t/loss_p0"] == pytest.approx(1.0, rel=0.01)
    assert logged["t/loss_p100"] == pytest.approx(30.0, rel=0.01)
    assert "t/loss_p50" not in logged


def test_quantiles_are_chosen_per_watch_and_checked_when_watched() -> None:
    tally = Tally()
    tally.observe("loss", 1.0)
    monitor = LoggerMonitor(Recorder(), background=False)
    monitor.watch(tally, name="fine", quantiles=(0.999,))
    monitor.watch(tally, name="none", quantiles=())
    logged = monitor.step()
    assert logged["fine"]["fine/loss_p99_9"] == pytest.approx(1.0, rel=0.01)
    assert not [key for key in logged["none"] if "_p" in key]
    with pytest.raises(ValueError, match="from 0 to 1"):
        monitor.watch(tally, name="percent", quantiles=(50,))
    with pytest.raises(TypeError, match="tuple or list"):
        monitor.watch(tally, name="text", quantiles="0.5")
    with pytest.raises(TypeError, match="numbers from 0 to 1"):
        monitor.watch(tally, name="flag", quantiles=(True,))


def test_a_histograms_method_that_is_not_rlpulses_is_left_alone() -> None:
    class Plotter:
        def stats(self) -> dict[str, float]:
            return {"figures": 2.0}

        def histograms(self) -> dict[str, object]:
            return {"weights": [1, 2, 3]}

    monitor = LoggerMonitor(Recorder(), background=False)
    monitor.watch(Plotter(), name="p")
    assert monitor.step() == {"p": {"p/figures": 2.0}}


def test_a_background_monitor_stores_the_quantiles_of_timed_work_in_sqlite(
    tmp_path: Path,
) -> None:
    tally = Tally()
    store = tmp_path / "run.sqlite"

    @tally.time("update_s")
    def update(seconds: float) -> None:
        time.sleep(seconds)

    with (
        SQLiteLogger(store) as sink,
        LoggerMonitor(sink, poll_interval=0.05) as monitor,
    ):
        monitor.watch(tally, name="learner")
        deadline = time.monotonic() + 0.6
        while time.monotonic() < deadline:
            update(0.002)
    records = list(read(store))
    p50 = [r.value for r in records if r.name == "learner/update_s_p50"]
    p99 = [r.value for r in records if r.name == "learner/update_s_p99"]
    counts = [r.value for r in records if r.name == "learner/update_s_count"]
    assert len(p50) >= 3
    assert all(0.002 * 0.99 <= value < 0.5 for value in p50 + p99)
    assert counts[-1] >= 20


def test_time_observes_blocks_and_calls_also_when_they_raise() -> None:
    tally = Tally()
    with tally.time("block_s"):
        time.sleep(0.01)
    timer = tally.time("nested_s")
    with timer, timer:  # entered again before it exits
        pass

    @tally.time("call_s")
    def failing() -> None:
        raise KeyError("missing")

    with pytest.raises(KeyError):
        failing()
    stats = tally.stats()
    assert stats["block_s_min"] >= 0.01
    assert stats["nested_s_count"] == 2
    assert stats["call_s_count"] == 1
    assert failing.__name__ == "failing"


def test_time_refuses_a_bad_key_before_the_block_runs() -> None:
    tally = Tally()
    tally.inc("update_s_count")
    ran = []
    with pytest.raises(ValueError, match="update_s_count"), tally.time("update_s"):
        ran.append(True)
    with pytest.raises(TypeError, match="non-empty strings"):
        tally.time("")
    assert ran == []
    assert tally.stats() == {"update_s_count": 1}


def test_histograms_can_be_read_while_one_thread_observes() -> None:
    tally = Tally()
    done = threading.Event()

    def write() -> None:
        generator = random.Random(1)
        for _ in range(100_000):
            tally.observe("x", generator.lognormvariate(0, 3))
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    reads = 0
    while not done.is_set():
        histogram = tally.histograms().get("x")
        if histogram is not None:
            assert histogram.count <= 100_000
        reads += 1
    writer.join()
    assert reads > 0
    assert tally.histograms()["x"].count == 100_000


def test_a_p99_of_fewer_than_a_hundred_observations_shows_the_slowest() -> None:
    histogram = Histogram()
    for _ in range(49):
        histogram.add(0.010)
    histogram.add(2.0)  # one slow call among 50
    assert histogram.quantile(0.99) == pytest.approx(2.0, rel=0.01)
    assert histogram.quantile(0.98) == pytest.approx(0.010, rel=0.01)
    # 90 % of 100 observations: the 90th smallest, whatever 0.9 * 100 rounds to.
    hundred = Histogram()
    for value in range(1, 101):
        hundred.add(float(value))
    assert hundred.quantile(0.9) == pytest.approx(90.0, rel=0.01)
