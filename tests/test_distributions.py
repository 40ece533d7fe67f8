"""Distributions (SPEC 6.1): OpenTelemetry's exponential buckets, quantiles within 0.55 %, ``Tally.time``, and quantiles a watch logs over its own intervals.

Quantiles are checked against numpy's of the observations themselves; the
bucket index against OpenTelemetry's SDK and exact arithmetic; the monitor
logs into real SQLite files read back with ``rlpulse.read``.
"""

from __future__ import annotations

import itertools
import math
import random
import sys
import threading
import time
from fractions import Fraction
from pathlib import Path

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlpulse import LoggerMonitor, SharedCounters, SQLiteLogger, Tally, read
from rlpulse.distributions import (
    BASE,
    KEPT_EPOCHS,
    MOST_BINS,
    RELATIVE_ERROR,
    SCALE,
    Buckets,
    Histogram,
    bins,
    bucket_index,
)
from rlpulse.testing import InMemorySink

pytestmark = pytest.mark.timeout(60)

QUANTILES = (0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1.0)


def exact(values: list[float], q: float) -> float:
    """The observation a quantile stands for: the nearest rank, ``ceil(q * n)``-th smallest."""
    return sorted(values)[max(math.ceil(round(q * len(values), 9)) - 1, 0)]


def histogram_of(values: list[float]) -> Histogram:
    histogram = Histogram()
    for value in values:
        histogram.add(value)
    return histogram


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


def test_quantiles_are_within_one_percent_from_a_nanosecond_to_a_gigabyte() -> None:
    generator = random.Random(7)
    values = [10 ** generator.uniform(-9, 9) for _ in range(20_000)]
    histogram = Histogram()
    for value in values:
        histogram.add(value)
    assert histogram.count == len(values)
    assert_within_one_percent(histogram, values)
    # 64 buckets per power of two cover the eighteen decades.
    assert len(histogram.positive) <= math.ceil(math.log2(1e18) * 2**SCALE) + 1


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
    sink = InMemorySink()
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
    often, seldom = InMemorySink(), InMemorySink()
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
    monitor = LoggerMonitor(InMemorySink(), background=False)
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

    monitor = LoggerMonitor(InMemorySink(), background=False)
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


def exact_index(value: float) -> int:
    """The bucket of ``value`` by the definition, in exact arithmetic: ``BASE**i < value <= BASE**(i+1)``."""
    # BASE**i < value  <=>  2**i < value**64
    power = Fraction(value) ** 2**SCALE
    index = math.floor(math.log2(value) * 2**SCALE) - 2
    while Fraction(2) ** (index + 1) < power:
        index += 1
    return index


def test_bucket_index_is_opentelemetrys_at_scale_6_and_powers_of_two_close_a_bucket() -> (
    None
):
    generator = random.Random(11)
    values = [10 ** generator.uniform(-9, 9) for _ in range(3_000)]
    powers = [2.0**exponent for exponent in range(-30, 31)]
    for value in values + powers:
        assert bucket_index(value) == exact_index(value), value
    assert [bucket_index(value) for value in (0.5, 1.0, 2.0, 1024.0)] == [
        -65,
        -1,
        63,
        639,
    ]
    assert BASE == 2 ** (2**-6)
    assert RELATIVE_ERROR < 0.0055
    mapping = pytest.importorskip(
        "opentelemetry.sdk.metrics._internal.exponential_histogram.mapping"
        ".logarithm_mapping"
    ).LogarithmMapping(SCALE)
    for value in values + powers:
        assert bucket_index(value) == mapping.map_to_index(value), value


def test_buckets_are_an_offset_and_dense_counts_and_merge_exactly() -> None:
    generator = random.Random(5)
    workers = [
        [generator.lognormvariate(-4, 1.5) for _ in range(2_000)] for _ in range(3)
    ]
    merged = Histogram()
    for values in workers:
        merged.merge(histogram_of(values))
    everything = histogram_of([value for values in workers for value in values])
    assert merged.buckets() == everything.buckets()
    assert merged.count == 6_000
    assert merged.sum == pytest.approx(everything.sum)
    assert merged.min == everything.min
    assert merged.max == everything.max
    offset, counts = everything.buckets()
    assert sum(counts) == 6_000
    assert counts[0] > 0
    assert counts[-1] > 0
    assert offset == bucket_index(min(min(values) for values in workers))
    signed = histogram_of([-3.0, -3.0, 0.0, 0.0, 0.0, 5.0])
    assert signed.buckets(negative=True) == Buckets(bucket_index(3.0), [2])
    assert signed.buckets() == Buckets(bucket_index(5.0), [1])
    assert signed.zero_count == 3


@pytest.mark.parametrize(
    "shape",
    ["lognormal", "bimodal", "constant", "pareto", "signed"],
)
def test_quantiles_are_within_half_a_percent_of_numpys(shape: str) -> None:
    generator = numpy.random.default_rng(17)
    values = {
        "lognormal": lambda: generator.lognormal(-3.0, 1.0, 4_000),
        "bimodal": lambda: numpy.concatenate(
            [generator.normal(0.010, 0.001, 2_000), generator.normal(0.5, 0.05, 2_000)]
        ),
        "constant": lambda: numpy.full(3_000, 0.1),
        "pareto": lambda: generator.pareto(1.2, 5_000) + 1.0,
        "signed": lambda: generator.normal(0.0, 10.0, 4_000),
    }[shape]()
    histogram = histogram_of(values.tolist())
    for q in QUANTILES:
        truth = float(numpy.quantile(values, q, method="inverted_cdf"))
        estimate = histogram.quantile(q)
        assert estimate is not None
        assert abs(estimate - truth) <= RELATIVE_ERROR * abs(truth) * (1 + 1e-9), (
            q,
            estimate,
            truth,
        )
    if shape == "constant":
        assert {histogram.quantile(q) for q in QUANTILES} == {0.1}


def test_one_observations_quantiles_are_the_observation() -> None:
    tally = Tally()
    sink = InMemorySink()
    monitor = LoggerMonitor(sink, background=False)
    monitor.watch(tally, name="t", quantiles=(0.0, 0.5, 1.0))
    tally.observe("episode_length", 59.0)
    first = monitor.step()["t"]
    tally.observe("episode_length", 1234.5)
    second = monitor.step()["t"]
    for name in ("p0", "p50", "p100"):
        assert first[f"t/episode_length_{name}"] == 59.0
        assert second[f"t/episode_length_{name}"] == 1234.5


def test_each_readers_interval_is_clamped_to_its_own_extremes() -> None:
    tally = Tally()
    often, seldom = InMemorySink(), InMemorySink()
    every_step = LoggerMonitor(often, background=False)
    every_step.watch(tally, name="t", quantiles=(0.0, 1.0))
    twice = LoggerMonitor(seldom, background=False)
    twice.watch(tally, name="t", quantiles=(0.0, 1.0))
    batches = [[0.0103, 0.0107], [3.0, 3.01, 3.02], [-7.5, 2.5]]
    twice.step()  # nothing yet: nothing logged
    for batch in batches:
        for value in batch:
            tally.observe("x", value)
        logged = every_step.step()["t"]
        assert (logged["t/x_p0"], logged["t/x_p100"]) == (min(batch), max(batch))
    logged = twice.step()["t"]
    everything = [value for batch in batches for value in batch]
    assert (logged["t/x_p0"], logged["t/x_p100"]) == (min(everything), max(everything))
    # A constant interval, after others, is the constant.
    for _ in range(500):
        tally.observe("x", 0.25)
    assert every_step.step()["t"]["t/x_p0"] == 0.25
    assert twice.step()["t"]["t/x_p100"] == 0.25


def test_an_interval_spanning_more_epochs_than_kept_is_within_its_buckets() -> None:
    live = Histogram()
    live.add(1.0)
    start = live.copy()
    for _ in range(KEPT_EPOCHS + 1):  # other readers' copies in between
        live.add(1.0)
        live.copy()
    live.add(1.001)
    interval = live.copy().since(start)
    assert interval.min is None
    assert interval.max is None
    assert interval.quantile(1.0) == pytest.approx(1.001, rel=RELATIVE_ERROR)
    assert interval.count == KEPT_EPOCHS + 2


def test_a_shared_counters_interval_of_one_observation_is_that_observation() -> None:
    with SharedCounters(2, histograms=("step_s",)) as counters:
        counters.worker(0).observe("step_s", 0.5)
        counters.worker(1).observe("step_s", 0.5)
        before = counters.histograms()["step_s"]
        assert before.quantile(0.5) == 0.5  # every observation one value
        counters.worker(1).observe("step_s", 0.0731)
        interval = counters.histograms()["step_s"].since(before)
        assert interval.quantile(0.5) == pytest.approx(0.0731, rel=1e-12)
        counters.worker(0).observe("step_s", 0.0731)
        counters.worker(0).observe("step_s", 0.08)
        after = counters.histograms()["step_s"]
        wider = after.since(before)
        # Two observations: extremes unknown, each quantile its bucket's middle.
        assert wider.min is None
        assert wider.quantile(1.0) == pytest.approx(0.08, rel=RELATIVE_ERROR)
        assert (after.min, after.max, after.sum) == (0.0731, 0.5, pytest.approx(1.2262))


def test_adding_in_a_batch_counts_as_adding_one_by_one() -> None:
    rng = numpy.random.default_rng(3)
    values = [*rng.lognormal(0, 2, 5000), 0.0, -3.5, *(-rng.lognormal(0, 1, 500))]
    one_by_one, batched = Histogram(), Histogram()
    for value in values:
        one_by_one.add(value)
    batched.add_all(values[:2000])
    batched.add_all(values[2000:])
    assert batched.positive == one_by_one.positive
    assert batched.negative == one_by_one.negative
    assert batched.zero_count == one_by_one.zero_count == 1
    assert (batched.min, batched.max) == (one_by_one.min, one_by_one.max)
    assert batched.sum == pytest.approx(one_by_one.sum, rel=1e-12)
    assert batched.quantile(0.99) == one_by_one.quantile(0.99)


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(
        st.floats(allow_nan=False, allow_infinity=False).filter(bool),
        min_size=1,
        max_size=20,
    )
)
def test_every_finite_value_is_counted_in_its_own_bucket(values: list[float]) -> None:
    # A value near 1 first: the list that counts the buckets near 1 exists.
    histogram = Histogram()
    histogram.add(1.0)
    histogram.add(-1.0)
    for value in values:
        histogram.add(value)
    positive: dict[int, int] = {bucket_index(1.0): 1}
    negative: dict[int, int] = {bucket_index(1.0): 1}
    for value in values:
        counts = positive if value > 0 else negative
        index = bucket_index(abs(value))
        counts[index] = counts.get(index, 0) + 1
    assert histogram.positive == positive
    assert histogram.negative == negative


def test_quantiles_of_values_beyond_four_billion_or_below_a_quarter_nanosecond() -> (
    None
):
    histogram = Histogram()
    histogram.add(1.0)  # a value near 1: counted in a list from 2**-32 to 2**32
    large = [2e10, 2.5e10, 3e10, 6e12]  # bytes: 20 GB to 6 TB
    small = [1e-10, 3e-12, -1e-11]
    for value in large + small:
        histogram.add(value)
    everything = [1.0, *large, *small]
    assert_within_one_percent(histogram, everything)


def test_the_largest_floats_have_quantiles() -> None:
    largest = sys.float_info.max
    histogram = histogram_of([1.0, largest, -largest])
    assert histogram.quantile(1.0) == largest
    assert histogram.quantile(0.0) == -largest
    interval = histogram_of([largest, largest * 0.9999])
    assert interval.quantile(0.5) == pytest.approx(largest * 0.9999, rel=RELATIVE_ERROR)


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(
        st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=30
    )
)
def test_bins_are_at_most_64_contiguous_ones_each_counting_the_values_within_it(
    values: list[float],
) -> None:
    edges, counts, _ = bins(histogram_of(values))

    assert len(counts) <= MOST_BINS
    assert len(edges) == len(counts) + 1
    assert edges == sorted(edges)
    assert sum(counts) == len(values)
    # A value within an ulp or two of an edge may be counted on either side.
    slack = 1e-9
    for low, high, count in zip(edges, edges[1:], counts, strict=False):
        surely_within = [
            v for v in values if low + slack * abs(low) < v < high - slack * abs(high)
        ]
        maybe_within = [
            v for v in values if low - slack * abs(low) <= v <= high + slack * abs(high)
        ]
        assert len(surely_within) <= count <= len(maybe_within)


def test_bins_of_a_wide_range_merge_whole_buckets_into_coarser_powers_of_two() -> None:
    values = [1e-9, 3e-6, 0.02, 1.0, 70.0, 4e5, 1e9, 0.0, 0.0, -0.5, -3e3]
    edges, counts, sum_of_squares = bins(histogram_of(values))

    assert len(counts) <= MOST_BINS
    assert sum(counts) == len(values)
    # Every edge a power of 2**(2**-s) for one scale s: whole buckets merged.
    exponents = [math.log2(abs(edge)) for edge in edges if edge]
    step = min(abs(b - a) for a, b in itertools.pairwise(exponents) if a != b)
    assert all(abs(e / step - round(e / step)) < 1e-9 for e in exponents)
    assert sum_of_squares == pytest.approx(sum(v * v for v in values), rel=0.011)
    # The zeros' bin reaches from the negative bins to the positive ones.
    zeros_bin = next(k for k, edge in enumerate(edges) if edge > 0) - 1
    assert edges[zeros_bin] < 0 < edges[zeros_bin + 1]
    assert counts[zeros_bin] == 2


def test_bins_of_values_near_one_are_the_buckets_themselves() -> None:
    values = [1.0 + k / 1000 for k in range(200)]
    histogram = histogram_of(values)
    edges, counts, _ = bins(histogram)
    buckets = histogram.buckets()
    assert counts == buckets.counts
    assert edges[0] == pytest.approx(BASE**buckets.offset)


def test_bins_refuse_fewer_than_three() -> None:
    with pytest.raises(ValueError, match="most=3 or more"):
        bins(histogram_of([1.0]), most=2)
