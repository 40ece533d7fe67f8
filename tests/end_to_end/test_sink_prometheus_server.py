"""PrometheusExporter scraped by a real Prometheus server, queried over its HTTP API.

The server (``tests/prometheus_server.py``) is Debian's ``prometheus``,
started on the loopback interface with its own storage in a temporary
directory, scraping a monitor's exporter every second; it is killed when
the test ends. Without a ``prometheus`` binary the test is skipped.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from rlpulse import Event, LoggerMonitor, Tally
from rlpulse.sinks.prometheus import BOUNDS_PER_OCTAVE, PrometheusExporter
from rlpulse.sources import SharedCounters
from tests.prometheus_server import Prometheus, needs_prometheus, running_prometheus

pytestmark = [pytest.mark.timeout(60), needs_prometheus]

FRAMES_PER_SECOND = 1000.0
# The window of PromQL's rate(), scraped every second.
WINDOW_S = 4
WINDOW = f"{WINDOW_S}s"


class SteadyCollector:
    """A collector whose frames grow at a steady ``FRAMES_PER_SECOND`` from its creation."""

    def __init__(self) -> None:
        self._start = time.monotonic()

    def stats(self) -> dict[str, float]:
        return {"frames": int((time.monotonic() - self._start) * FRAMES_PER_SECOND)}


class SteadyLearner:
    """A thread observing ``update_s`` over and over: the same ``durations`` in every cycle, until stopped."""

    def __init__(self, tally: Tally, durations: list[float]) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(tally, durations), daemon=True
        )

    def _run(self, tally: Tally, durations: list[float]) -> None:
        while not self._stop.wait(0.01):
            for duration in durations:
                tally.observe("update_s", duration)

    def __enter__(self) -> SteadyLearner:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


@pytest.fixture
def exporter() -> Iterator[PrometheusExporter]:
    with PrometheusExporter(port=0) as exporter:
        yield exporter


@pytest.fixture
def prometheus(exporter: PrometheusExporter, tmp_path: Path) -> Iterator[Prometheus]:
    """A Prometheus server scraping ``exporter`` every second."""
    assert exporter.url is not None
    with running_prometheus([exporter.url], tmp_path) as server:
        yield server


def test_promql_rates_rlpulse_counters_as_rlpulse_does_and_knows_them_as_counters(
    exporter: PrometheusExporter, prometheus: Prometheus
) -> None:
    exporter.log_event(Event(time.time(), "collector", "stalled", "no progress", 30.0))
    with LoggerMonitor(exporter, poll_interval=0.1) as monitor:
        monitor.watch(SteadyCollector(), name="collector")
        # rate() divides by its whole window: the series must be older.
        prometheus.wait_for(
            f'count_over_time(rlpulse_frames_total{{watch="collector"}}[{WINDOW_S + 2}s]) '
            f">= {WINDOW_S + 2}"
        )
        promql_rate = prometheus.value(
            f'rate(rlpulse_frames_total{{watch="collector"}}[{WINDOW}])'
        )
        rlpulse_rate = prometheus.value('rlpulse_frames_per_second{watch="collector"}')
        events = prometheus.value('rlpulse_events_total{kind="stalled"}')
        metadata = prometheus.get("/api/v1/metadata")

    assert promql_rate == pytest.approx(FRAMES_PER_SECOND, rel=0.25)
    assert rlpulse_rate == pytest.approx(promql_rate, rel=0.25)
    assert events == 1.0
    # Prometheus names a family as the exposition's TYPE line does: without
    # _total in OpenMetrics, which it asks for, with it in the text format.
    types = {name: entries[0]["type"] for name, entries in metadata.items()}
    assert "counter" in {types.get("rlpulse_frames"), types.get("rlpulse_frames_total")}
    assert "counter" in {types.get("rlpulse_events"), types.get("rlpulse_events_total")}
    assert types["rlpulse_frames_per_second"] == "gauge"


def test_promql_quantiles_of_an_observed_key_s_histogram_match_its_observations(
    exporter: PrometheusExporter, prometheus: Prometheus
) -> None:
    generator = random.Random(11)
    durations = [generator.lognormvariate(-4.0, 0.7) for _ in range(1000)]
    bucket = 'rlpulse_update_seconds_bucket{watch="learner"}'
    tally = Tally()
    with (
        LoggerMonitor(exporter, poll_interval=0.1) as monitor,
        SteadyLearner(tally, durations),
    ):
        monitor.watch(tally, name="learner")
        # rate() needs samples over its whole window, every bucket in them.
        prometheus.wait_for(
            f'count_over_time(rlpulse_update_seconds_count{{watch="learner"}}[{WINDOW_S + 2}s]) '
            f">= {WINDOW_S + 2}"
        )
        promql = {
            q: (
                prometheus.value(f"histogram_quantile({q}, {bucket})"),
                prometheus.value(f"histogram_quantile({q}, rate({bucket}[{WINDOW}]))"),
            )
            for q in (0.5, 0.9, 0.99)
        }
        metadata = prometheus.get("/api/v1/metadata")

    # A bucket spans a factor 2**(1/8); the share of a cycle under way at a
    # scrape moves a quantile a little more.
    within = 2 ** (1 / BOUNDS_PER_OCTAVE) - 1 + 0.01
    for q, (over_all, over_window) in promql.items():
        exact = float(np.quantile(durations, q, method="inverted_cdf"))
        assert over_all == pytest.approx(exact, rel=within), q
        assert over_window == pytest.approx(exact, rel=within), q
    assert metadata["rlpulse_update_seconds"][0]["type"] == "histogram"


def test_promql_sums_a_shared_counters_watch_s_workers_by_watch_and_charts_each_by_its_label(
    exporter: PrometheusExporter, prometheus: Prometheus
) -> None:
    frames = (30, 12, 100)
    with (
        SharedCounters(len(frames), counters=("frames",)) as counters,
        LoggerMonitor(exporter, poll_interval=0.1) as monitor,
    ):
        for index, count in enumerate(frames):
            counters.worker(index).inc("frames", count)
            counters.worker(index).heartbeat()
        monitor.watch(counters, name="workers")
        monitor.watch(SteadyCollector(), name="collector")
        prometheus.wait_for('rlpulse_frames_total{watch="workers", worker="2"}')
        prometheus.wait_for('rlpulse_frames_total{watch="collector"}')
        workers_sum = prometheus.get(
            "/api/v1/query",
            query='sum by (watch) (rlpulse_frames_total{worker!=""})',
        )["result"]
        totals = prometheus.value('rlpulse_frames_total{watch="workers", worker=""}')
        by_worker = prometheus.get(
            "/api/v1/query", query="rlpulse_heartbeat_age_seconds"
        )["result"]

    assert [(s["metric"], float(s["value"][1])) for s in workers_sum] == [
        ({"watch": "workers"}, float(sum(frames)))
    ]
    assert totals == float(sum(frames))
    assert sorted(series["metric"]["worker"] for series in by_worker) == ["0", "1", "2"]


class WaitingLearner:
    """A thread logging a learner that waits 63 % of its time, so that its pipeline is collector-bound, until stopped."""

    def __init__(self, tally: Tally) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(tally,), daemon=True)

    def _run(self, tally: Tally) -> None:
        last = time.monotonic()
        while not self._stop.wait(0.01):
            # The time that passed, however late the thread ran.
            now = time.monotonic()
            tally.inc("busy_s", 0.37 * (now - last))
            tally.inc("wait_s", 0.63 * (now - last))
            last = now

    def __enter__(self) -> WaitingLearner:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def test_a_speedup_the_bottleneck_verdict_no_longer_knows_goes_stale_in_promql(
    exporter: PrometheusExporter, prometheus: Prometheus
) -> None:
    speedup = 'rlpulse_speedup{watch="bottleneck"}'
    learner = Tally()
    with LoggerMonitor(exporter, poll_interval=0.1) as monitor:
        monitor.watch(Tally(), name="collector")
        monitor.watch(learner, name="learner")
        monitor.bottleneck(window=0.5)
        with WaitingLearner(learner):
            known = prometheus.wait_for(speedup)
        # Windows in which the learner logs no time: the verdict is unknown.
        prometheus.wait_gone(speedup)
        bound_known = prometheus.value('rlpulse_bound_known{watch="bottleneck"}')
        bound = prometheus.value('rlpulse_bound{watch="bottleneck"}')
        polled = prometheus.value(
            'rlpulse_last_poll_timestamp_seconds{watch="bottleneck"}'
        )

    assert known == pytest.approx(1 / 0.37, rel=0.2)
    assert bound_known == 0.0
    assert bound is None
    assert polled is not None
