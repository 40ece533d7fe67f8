"""PrometheusExporter: real HTTP scrapes on the loopback, parsed with prometheus_client's parser."""

from __future__ import annotations

import errno
import itertools
import math
import multiprocessing
import os
import random
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from rlpulse import Event, LoggerMonitor, Tally
from rlpulse.distributions import Histogram
from rlpulse.naming import Kind, Payload
from rlpulse.sinks.process import SinkProcess
from rlpulse.sinks.prometheus import (
    BOUNDS_PER_OCTAVE,
    PrometheusExporter,
    classic_buckets,
)
from rlpulse.sources import SharedCounters, SystemStats
from tests.prometheus_server import free_port

Samples = dict[tuple[str, str], float]


def parse(page: str) -> tuple[Samples, dict[str, str], dict[str, str]]:
    """Return ``{(sample, watch): value}``, ``{sample: help}`` and ``{sample: type}`` of an exposition page, histogram buckets aside."""
    samples: Samples = {}
    helps: dict[str, str] = {}
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(page):
        for sample in family.samples:
            if "le" in sample.labels:
                continue
            samples[(sample.name, sample.labels["watch"])] = sample.value
            helps[sample.name] = family.documentation
            types[sample.name] = family.type
    return samples, helps, types


Labels = frozenset[tuple[str, str]]


def labelled_series(page: str) -> dict[tuple[str, Labels], float]:
    """Every sample of an exposition page by its name and its labels, an empty label (the same as none in PromQL) left out."""
    return {
        (sample.name, frozenset((k, v) for k, v in sample.labels.items() if v)): (
            sample.value
        )
        for family in text_string_to_metric_families(page)
        for sample in family.samples
    }


def labels(**given: str) -> Labels:
    return frozenset(given.items())


def page_of(exporter: PrometheusExporter) -> str:
    assert exporter.url is not None
    with urllib.request.urlopen(exporter.url, timeout=10) as response:
        return str(response.read().decode())


def scrape(exporter: PrometheusExporter) -> Samples:
    return parse(page_of(exporter))[0]


def served(registry: CollectorRegistry) -> tuple[Samples, dict[str, str]]:
    """The samples of ``registry`` and the type of each sample's family."""
    samples, _, types = parse(generate_latest(registry).decode())
    return samples, types


def buckets_served(
    registry: CollectorRegistry, name: str, watch: str
) -> list[tuple[float, float]]:
    """The ``(le, count)`` buckets of histogram ``name``'s series for ``watch``, in order."""
    return [
        (float(sample.labels["le"]), sample.value)
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for sample in family.samples
        if sample.name == f"{name}_bucket" and sample.labels["watch"] == watch
    ]


def observed(values: list[float]) -> Histogram:
    histogram = Histogram()
    for value in values:
        histogram.add(value)
    return histogram


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """PromQL's ``histogram_quantile`` of cumulative positive buckets: linear within the bucket of rank ``q * count``."""
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    raise AssertionError("no bucket holds the rank")


class Collector:
    def __init__(self) -> None:
        self.frames = 0
        self._lock = threading.Lock()

    def advance(self, frames: int) -> None:
        with self._lock:
            self.frames += frames

    def stats(self) -> dict[str, float]:
        with self._lock:
            return {"frames": self.frames}


def test_a_scrape_serves_counters_as_counters_and_the_rest_as_gauges_labelled_with_their_watch() -> (
    None
):
    with PrometheusExporter() as exporter:
        exporter.log_metrics(
            {"collector/frames": 96.0, "collector/frames_per_second": 12.5},
            step=96,
            timestamp=1000.0,
        )
        exporter.log_metrics(
            {"buffer/size": 10.0, "buffer/samples_count": 3.0}, timestamp=1001.0
        )
        page = page_of(exporter)
    samples, _, types = parse(page)

    assert samples == {
        ("rlpulse_frames_total", "collector"): 96.0,
        ("rlpulse_frames_per_second", "collector"): 12.5,
        ("rlpulse_size", "buffer"): 10.0,
        ("rlpulse_samples_count_total", "buffer"): 3.0,
        ("rlpulse_last_poll_timestamp_seconds", "collector"): 1000.0,
        ("rlpulse_last_poll_timestamp_seconds", "buffer"): 1001.0,
    }
    assert types == {
        "rlpulse_frames_total": "counter",
        "rlpulse_frames_per_second": "gauge",
        "rlpulse_size": "gauge",
        "rlpulse_samples_count_total": "counter",
        "rlpulse_last_poll_timestamp_seconds": "gauge",
    }
    assert "# TYPE rlpulse_frames_total counter" in page.splitlines()


def test_the_kinds_a_payload_carries_decide_the_types_not_the_names() -> None:
    registry = CollectorRegistry()
    kinds = {"loop/episodes": Kind.COUNTER, "loop/frames": Kind.GAUGE}
    with PrometheusExporter(registry=registry) as exporter:
        exporter.log_payloads(
            [Payload({"loop/episodes": 4.0, "loop/frames": 9.0}, None, 1.0, kinds)]
        )
        samples, types = served(registry)

    assert samples[("rlpulse_episodes_total", "loop")] == 4.0
    assert samples[("rlpulse_frames", "loop")] == 9.0
    assert types["rlpulse_episodes_total"] == "counter"
    assert types["rlpulse_frames"] == "gauge"


def test_a_metric_keeps_the_type_it_was_first_served_with() -> None:
    registry = CollectorRegistry()
    with PrometheusExporter(registry=registry) as exporter:
        exporter.log_payloads(
            [Payload({"a/episodes": 1.0}, None, 1.0, {"a/episodes": Kind.COUNTER})]
        )
        # The same metric, a gauge for another watch and later for the first.
        exporter.log_payloads(
            [
                Payload({"b/episodes": 2.0}, None, 2.0, {}),
                Payload({"a/episodes": 3.0}, None, 2.0, {}),
            ]
        )
        samples, types = served(registry)

    assert samples[("rlpulse_episodes_total", "a")] == 3.0
    assert samples[("rlpulse_episodes_total", "b")] == 2.0
    assert types["rlpulse_episodes_total"] == "counter"
    assert ("rlpulse_episodes", "a") not in samples


def test_a_metric_in_seconds_spells_its_unit_out_and_a_counter_ends_in_total_after_it() -> (
    None
):
    registry = CollectorRegistry()
    metrics = {
        "learner/update_s_p99": 0.25,
        "learner/update_s": 0.5,
        "monitor/cpu_s": 3.0,
        "learner/update_s_count": 8.0,
        "system/rss_bytes": 4096.0,
        "system/cpu_percent": 50.0,
        "learner/wait_seconds": 1.0,
        "learner/steps_per_second": 2.0,
    }
    kinds = {
        "monitor/cpu_s": Kind.COUNTER,
        "learner/update_s_count": Kind.COUNTER,
        "learner/steps_per_second": Kind.RATE,
    }
    with PrometheusExporter(registry=registry) as exporter:
        exporter.log_payloads([Payload(metrics, None, 1.0, kinds)])
        samples, types = served(registry)

    assert samples == {
        ("rlpulse_update_seconds_p99", "learner"): 0.25,
        ("rlpulse_update_seconds", "learner"): 0.5,
        ("rlpulse_cpu_seconds_total", "monitor"): 3.0,
        ("rlpulse_update_seconds_count_total", "learner"): 8.0,
        ("rlpulse_rss_bytes", "system"): 4096.0,
        ("rlpulse_cpu_percent", "system"): 50.0,
        ("rlpulse_wait_seconds", "learner"): 1.0,
        ("rlpulse_steps_per_second", "learner"): 2.0,
        ("rlpulse_last_poll_timestamp_seconds", "learner"): 1.0,
        ("rlpulse_last_poll_timestamp_seconds", "monitor"): 1.0,
        ("rlpulse_last_poll_timestamp_seconds", "system"): 1.0,
    }
    assert types["rlpulse_cpu_seconds_total"] == "counter"
    assert types["rlpulse_steps_per_second"] == "gauge"


def test_a_counter_whose_name_ends_in_total_is_served_with_one_total() -> None:
    registry = CollectorRegistry()
    with PrometheusExporter(registry=registry) as exporter:
        exporter.log_payloads(
            [
                Payload(
                    {"env/steps_total": 7.0},
                    None,
                    1.0,
                    {"env/steps_total": Kind.COUNTER},
                )
            ]
        )
        samples, types = served(registry)

    assert samples[("rlpulse_steps_total", "env")] == 7.0
    assert types["rlpulse_steps_total"] == "counter"


FRAMES = "rlpulse_frames_total"


@pytest.mark.timeout(60)
def test_what_a_monitor_s_watch_counts_is_served_as_a_counter(
    wait_until: Callable[..., bool],
) -> None:
    tally = Tally()
    tally.inc("episodes", 3)
    tally.set("epsilon", 0.1)
    tally.observe("update_s", 0.5)
    registry = CollectorRegistry()
    with (
        PrometheusExporter(registry=registry) as exporter,
        LoggerMonitor(exporter, poll_interval=0.05) as monitor,
    ):
        monitor.watch(tally, name="learner")
        assert wait_until(
            lambda: ("rlpulse_episodes_total", "learner") in served(registry)[0]
        )
        samples, types = served(registry)

    assert samples[("rlpulse_episodes_total", "learner")] == 3.0
    assert types["rlpulse_episodes_total"] == "counter"
    assert types["rlpulse_update_seconds_mean"] == "gauge"
    assert types["rlpulse_epsilon"] == "gauge"


@pytest.mark.timeout(60)
def test_a_watched_key_s_observations_are_one_histogram_holding_their_count_and_sum(
    wait_until: Callable[..., bool],
) -> None:
    tally = Tally()
    durations = [random.Random(7).lognormvariate(-3.0, 0.8) for _ in range(2000)]
    registry = CollectorRegistry()
    with (
        PrometheusExporter(registry=registry) as exporter,
        LoggerMonitor(exporter, poll_interval=0.05) as monitor,
    ):
        monitor.watch(tally, name="learner")
        for duration in durations:
            tally.observe("update_s", duration)
        assert wait_until(
            lambda: (
                served(registry)[0].get(("rlpulse_update_seconds_count", "learner"))
                == len(durations)
            )
        )
        samples, types = served(registry)
        buckets = buckets_served(registry, "rlpulse_update_seconds", "learner")

    assert types["rlpulse_update_seconds_count"] == "histogram"
    assert samples[("rlpulse_update_seconds_sum", "learner")] == pytest.approx(
        sum(durations)
    )
    # The histogram's count and sum are the key's: no counters repeat them.
    assert ("rlpulse_update_seconds_count_total", "learner") not in samples
    assert ("rlpulse_update_seconds_sum_total", "learner") not in samples
    assert types["rlpulse_update_seconds_p99"] == "gauge"
    for q in (0.5, 0.9, 0.99):
        exact = float(np.quantile(durations, q, method="inverted_cdf"))
        assert histogram_quantile(q, buckets) == pytest.approx(
            exact, rel=2 ** (1 / BOUNDS_PER_OCTAVE) - 1
        )


def test_a_count_and_sum_logged_before_the_first_observation_give_way_to_the_histogram() -> (
    None
):
    # A tally claims a timed key at once: its count and sum (0) come before
    # any observation, as counters; the histogram then serves them, under
    # its own name.
    registry = CollectorRegistry()
    counters = {
        "learner/update_s_count": Kind.COUNTER,
        "learner/update_s_sum": Kind.COUNTER,
    }
    histogram = Histogram()
    histogram.add_all([0.01, 0.02, 0.04])
    with PrometheusExporter(registry=registry) as exporter:
        exporter.log_payloads(
            [
                Payload(
                    {"learner/update_s_count": 0.0, "learner/update_s_sum": 0.0},
                    None,
                    1.0,
                    counters,
                    {},
                )
            ]
        )
        exporter.log_payloads(
            [
                Payload(
                    {"learner/update_s_count": 3.0, "learner/update_s_sum": 0.07},
                    None,
                    2.0,
                    counters,
                    {"learner/update_s": histogram},
                )
            ]
        )
        samples, types = served(registry)

    assert types["rlpulse_update_seconds_count"] == "histogram"
    assert samples[("rlpulse_update_seconds_count", "learner")] == 3
    assert not any("_2" in name or "_total" in name for name, _ in samples)


def count_and_sum(watch: str, count: float, total: float) -> Payload:
    """A payload of ``watch``'s ``update_s`` count and sum, without observations: what a tally logs before its first."""
    keys = {f"{watch}/update_s_count": count, f"{watch}/update_s_sum": total}
    return Payload(keys, None, 1.0, dict.fromkeys(keys, Kind.COUNTER), {})


def observations(watch: str, values: list[float]) -> Payload:
    """A payload of ``watch``'s ``update_s`` count and sum with the histogram of ``values``."""
    keys = {
        f"{watch}/update_s_count": len(values),
        f"{watch}/update_s_sum": sum(values),
    }
    return Payload(
        {key: float(value) for key, value in keys.items()},
        None,
        2.0,
        dict.fromkeys(keys, Kind.COUNTER),
        {f"{watch}/update_s": observed(values)},
    )


@pytest.mark.parametrize(
    "arrivals",
    [
        ["a counts", "b counts", "a observes", "b observes"],
        ["a counts", "b counts", "b observes", "a observes"],
        ["a counts", "a observes", "b counts", "b observes"],
        ["b counts", "a observes", "b observes", "a counts"],
    ],
    ids=lambda arrivals: ", ".join(arrivals),
)
def test_the_counts_and_sums_several_watches_log_before_their_first_observations_give_way_to_one_histogram(
    arrivals: list[str],
) -> None:
    values = {"a": [0.01, 0.02, 0.04], "b": [0.5]}
    payloads = {
        f"{watch} counts": count_and_sum(watch, 0.0, 0.0) for watch in values
    } | {
        f"{watch} observes": observations(watch, watch_values)
        for watch, watch_values in values.items()
    }
    with PrometheusExporter(port=0) as exporter:
        for arrival in arrivals:
            exporter.log_payloads([payloads[arrival]])
        samples, _, types = parse(page_of(exporter))

    assert types["rlpulse_update_seconds_count"] == "histogram"
    for watch, watch_values in values.items():
        assert samples[("rlpulse_update_seconds_count", watch)] == len(watch_values)
        assert samples[("rlpulse_update_seconds_sum", watch)] == pytest.approx(
            sum(watch_values)
        )
    # No counter repeats them, frozen at what came before the observations.
    assert not any("_2" in name or "_total" in name for name, _ in samples)


def test_a_histogram_accumulates_the_intervals_of_its_payloads() -> None:
    registry = CollectorRegistry()
    with PrometheusExporter(registry=registry) as exporter:
        for interval in ([0.1, 0.2], [0.3], [4.0]):
            exporter.log_payloads(
                [
                    Payload(
                        {"learner/update_s_count": 0.0},
                        None,
                        1.0,
                        {"learner/update_s_count": Kind.COUNTER},
                        {"learner/update_s": observed(interval)},
                    )
                ]
            )
        samples, _ = served(registry)
        buckets = buckets_served(registry, "rlpulse_update_seconds", "learner")

    assert samples[("rlpulse_update_seconds_count", "learner")] == 4.0
    assert samples[("rlpulse_update_seconds_sum", "learner")] == pytest.approx(4.6)
    counts = dict(buckets)
    assert counts[0.125] == 1.0  # 0.1
    assert counts[0.25] == 2.0  # and 0.2
    assert counts[0.5] == 3.0  # and 0.3
    assert counts[4.0] == counts[float("inf")] == 4.0
    assert [count for _, count in buckets] == sorted(count for _, count in buckets)


def test_classic_buckets_count_exactly_the_observations_at_or_below_each_bound() -> (
    None
):
    generator = random.Random(3)
    values = [generator.uniform(-50.0, 50.0) for _ in range(500)]
    values += [0.0] * 5 + [generator.lognormvariate(0, 3) for _ in range(500)]

    buckets = classic_buckets(observed(values))

    for le, count in buckets:
        assert count == sum(value <= float(le) for value in values), le
    bounds = [float(le) for le, _ in buckets]
    assert bounds == sorted(bounds)
    assert bounds[-1] == float("inf")
    # Neighbouring positive bounds are 2**(1/8) apart.
    ratios = {round(b / a, 9) for a, b in itertools.pairwise(bounds[:-1]) if a > 0}
    assert ratios == {round(2 ** (1 / BOUNDS_PER_OCTAVE), 9)}


def test_a_histogram_s_bounds_only_grow_and_only_past_a_power_of_two() -> None:
    first = [le for le, _ in classic_buckets(observed([0.3, 0.4]))]
    within_octaves = [le for le, _ in classic_buckets(observed([0.26, 0.3, 0.4, 0.49]))]
    wider = [le for le, _ in classic_buckets(observed([0.3, 0.4, 0.6]))]

    assert (first[0], first[-2]) == ("0.25", "0.5")
    assert within_octaves == first
    assert set(first) < set(wider)
    assert wider[-2] == "1.0"


def test_a_key_with_negative_observations_serves_its_buckets_without_a_sum() -> None:
    registry = CollectorRegistry()
    with PrometheusExporter(registry=registry) as exporter:
        exporter.log_payloads(
            [
                Payload(
                    {"learner/return_sum": -2.0},
                    None,
                    1.0,
                    {},
                    {"learner/return": observed([-3.0, 1.0])},
                )
            ]
        )
        samples, _ = served(registry)
        buckets = buckets_served(registry, "rlpulse_return", "learner")

    # OpenMetrics: a histogram with negative bounds has no sum (nor count).
    assert ("rlpulse_return_sum", "learner") not in samples
    assert ("rlpulse_return_sum_total", "learner") not in samples
    assert dict(buckets)[0.0] == 1.0
    assert buckets[-1] == (float("inf"), 2.0)


@pytest.mark.timeout(60)
def test_scraped_values_follow_a_background_monitor_as_it_polls(
    wait_until: Callable[..., bool],
) -> None:
    collector = Collector()
    with (
        PrometheusExporter() as exporter,
        LoggerMonitor(exporter, poll_interval=0.05) as monitor,
    ):
        monitor.watch(collector, name="collector")
        assert wait_until(lambda: (FRAMES, "collector") in scrape(exporter))
        first = scrape(exporter)
        collector.advance(500)
        assert wait_until(lambda: scrape(exporter)[(FRAMES, "collector")] >= 500)
        collector.advance(500)
        assert wait_until(lambda: scrape(exporter)[(FRAMES, "collector")] >= 1000)
        later = scrape(exporter)

    assert first[(FRAMES, "collector")] < later[(FRAMES, "collector")]
    assert later[("rlpulse_frames_per_second", "collector")] >= 0
    assert (
        later[("rlpulse_last_poll_timestamp_seconds", "collector")]
        > first[("rlpulse_last_poll_timestamp_seconds", "collector")]
    )


def test_names_are_made_valid_and_colliding_metrics_never_share_a_name() -> None:
    registry = CollectorRegistry()
    with PrometheusExporter(registry=registry) as exporter:
        exporter.log_metrics(
            {
                "env/episode.return": 1.0,
                "env/episode_return": 2.0,
                "env/episode-return": 3.0,
                "env/last_poll_timestamp_seconds": 4.0,
                "worker_0/frames": 5.0,
                "worker_0/frames_total": 6.0,
                "env/events": 7.0,
            },
            timestamp=10.0,
        )
        exporter.log_event(Event(10.0, "env", "stalled", "no progress", 30.0))
        samples, helps, types = parse(generate_latest(registry).decode())

    assert samples == {
        ("rlpulse_episode_return", "env"): 1.0,
        ("rlpulse_episode_return_2", "env"): 2.0,
        ("rlpulse_episode_return_3", "env"): 3.0,
        ("rlpulse_last_poll_timestamp_seconds_2", "env"): 4.0,
        ("rlpulse_frames_total", "worker_0"): 5.0,
        ("rlpulse_frames_total_2", "worker_0"): 6.0,
        ("rlpulse_events_2", "env"): 7.0,
        ("rlpulse_events_total", "env"): 1.0,
        ("rlpulse_last_poll_timestamp_seconds", "env"): 10.0,
        ("rlpulse_last_poll_timestamp_seconds", "worker_0"): 10.0,
    }
    assert "'episode.return'" in helps["rlpulse_episode_return"]
    assert "'episode_return'" in helps["rlpulse_episode_return_2"]
    assert "'frames_total'" in helps["rlpulse_frames_total_2"]
    assert types["rlpulse_frames_total"] == "counter"
    assert types["rlpulse_frames_total_2"] == "gauge"


def test_one_metric_of_several_watches_is_one_family_with_one_series_per_watch() -> (
    None
):
    registry = CollectorRegistry()
    with PrometheusExporter(registry=registry) as exporter:
        exporter.log_metrics({"collector_0/frames": 1.0}, timestamp=1.0)
        exporter.log_metrics({"collector_1/frames": 2.0}, timestamp=1.0)
        families = [
            family
            for family in text_string_to_metric_families(
                generate_latest(registry).decode()
            )
            if family.name == "rlpulse_frames"
        ]

    assert len(families) == 1
    assert families[0].type == "counter"
    assert sorted((s.labels["watch"], s.value) for s in families[0].samples) == [
        ("collector_0", 1.0),
        ("collector_1", 2.0),
    ]


def test_a_later_payload_replaces_the_served_value() -> None:
    with PrometheusExporter() as exporter:
        exporter.log_metrics({"buffer/size": 10.0}, timestamp=1.0)
        exporter.log_metrics({"buffer/size": 20.0}, timestamp=2.0)
        samples = scrape(exporter)
    assert samples[("rlpulse_size", "buffer")] == 20.0
    assert samples[("rlpulse_last_poll_timestamp_seconds", "buffer")] == 2.0


def test_the_server_listens_on_the_loopback_interface_by_default() -> None:
    with PrometheusExporter() as exporter:
        assert exporter.url is not None
        assert exporter.url.startswith("http://127.0.0.1:")
        assert exporter.url.endswith("/metrics")
        port = int(exporter.url.rsplit(":", 1)[1].split("/")[0])
        assert port > 0
        assert "127.0.0.1" in repr(exporter)


def test_closing_stops_the_server_and_further_logging_raises() -> None:
    exporter = PrometheusExporter()
    url = exporter.url
    assert url is not None
    exporter.close()
    exporter.close()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=5)
    with pytest.raises(RuntimeError, match="is closed"):
        exporter.log_metrics({"buffer/size": 1.0})


def test_a_given_registry_gets_the_gauges_without_a_server_until_closed() -> None:
    registry = CollectorRegistry()
    exporter = PrometheusExporter(registry=registry)
    assert exporter.url is None
    assert "given registry" in repr(exporter)
    exporter.log_metrics({"learner/loss": 0.25})
    exporter.flush()
    assert b'rlpulse_loss{watch="learner"} 0.25' in generate_latest(registry)
    exporter.close()
    assert b"rlpulse_loss" not in generate_latest(registry)


def served_page(registry: CollectorRegistry) -> str:
    """A scrape over HTTP of what a server of ``registry`` serves."""
    import prometheus_client

    server, thread = prometheus_client.start_http_server(
        0, addr="127.0.0.1", registry=registry
    )
    try:
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            return str(response.read().decode())
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5.0)


def test_a_second_exporter_of_one_prefix_on_one_registry_is_refused_saying_what_to_do() -> (
    None
):
    registry = CollectorRegistry()
    with PrometheusExporter(registry=registry) as first:
        first.log_metrics({"collector/frames": 1.0}, timestamp=1.0)
        with pytest.raises(ValueError, match="another PrometheusExporter") as refused:
            PrometheusExporter(registry=registry)
        message = str(refused.value)
        assert "'rlpulse'" in message
        assert "Give every monitor that one exporter" in message
        assert "prefix=" in message
        # The registry serves each family once, as Prometheus requires.
        types = [
            line
            for line in served_page(registry).splitlines()
            if line.startswith("# TYPE")
        ]
        assert len(types) == len(set(types))
        assert "# TYPE rlpulse_frames_total counter" in types
    # Closed, the first leaves its place to another.
    with PrometheusExporter(registry=registry) as second:
        second.log_metrics({"collector/frames": 2.0}, timestamp=2.0)
        assert 'rlpulse_frames_total{watch="collector"} 2.0' in served_page(registry)


def test_exporters_of_other_prefixes_share_a_registry() -> None:
    registry = CollectorRegistry()
    with (
        PrometheusExporter(registry=registry) as first,
        PrometheusExporter(prefix="node_b", registry=registry) as second,
    ):
        first.log_metrics({"collector/frames": 1.0}, timestamp=1.0)
        second.log_metrics({"collector/frames": 2.0}, timestamp=1.0)
        samples, _, _ = parse(served_page(registry))
    assert samples[("rlpulse_frames_total", "collector")] == 1.0
    assert samples[("node_b_frames_total", "collector")] == 2.0


def test_a_custom_or_empty_prefix_starts_every_gauge_name() -> None:
    registry = CollectorRegistry()
    with PrometheusExporter(prefix="rl:pipeline", registry=registry) as prefixed:
        prefixed.log_metrics({"collector/frames": 1.0}, timestamp=1.0)
        assert ("rl:pipeline_frames_total", "collector") in parse(
            generate_latest(registry).decode()
        )[0]
    with PrometheusExporter(prefix="", registry=registry) as bare:
        bare.log_metrics({"collector/0th": 1.0, "plain": 2.0}, timestamp=1.0)
        samples = parse(generate_latest(registry).decode())[0]
    assert samples[("_0th", "collector")] == 1.0
    assert samples[("plain", "")] == 2.0


@pytest.mark.parametrize("port", [-1, 65536, 1.5, True, "9100"])
def test_a_port_that_is_not_a_port_number_is_refused(port: object) -> None:
    with pytest.raises(ValueError, match="port must be an integer from 0 to 65535"):
        PrometheusExporter(port=port)  # type: ignore[arg-type]


@pytest.mark.parametrize("prefix", ["9lives", "rl-pulse", "rl pulse"])
def test_a_prefix_prometheus_would_reject_is_refused(prefix: str) -> None:
    with pytest.raises(
        ValueError, match="not a valid start of a Prometheus metric name"
    ):
        PrometheusExporter(prefix=prefix, registry=CollectorRegistry())


def events_served(registry: CollectorRegistry) -> dict[tuple[str, str], float]:
    """``rlpulse_events_total`` as a scrape of ``registry`` serves it, by kind and watch."""
    return {
        (sample.labels["kind"], sample.labels["watch"]): sample.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for sample in family.samples
        if sample.name == "rlpulse_events_total"
    }


def test_a_hung_call_that_returns_while_stopped_is_counted_resumed_once_started_again(
    wait_until: Callable[..., bool],
) -> None:
    # What the RlpulseStatsCallHung alert compares: hung, then as many resumed.
    release, returned = threading.Event(), threading.Event()
    calls = itertools.count()

    def stats() -> dict[str, float]:
        if next(calls) == 1:
            release.wait(20)
            returned.set()
        return {"frames": 1.0}

    registry = CollectorRegistry()
    with PrometheusExporter(registry=registry) as exporter:
        monitor = LoggerMonitor(
            exporter, poll_interval=0.02, poll_timeout=0.1, stop_timeout=1
        )
        monitor.watch(object(), name="remote", stats_fn=stats)
        with monitor:
            assert wait_until(lambda: ("hung", "remote") in events_served(registry))
        release.set()
        assert returned.wait(10)
        time.sleep(0.1)  # its thread hands the watch back, the monitor stopped
        with monitor:
            assert wait_until(lambda: ("resumed", "remote") in events_served(registry))
        events = events_served(registry)
    assert events[("hung", "remote")] == events[("resumed", "remote")] == 1.0


def watches_served(registry: CollectorRegistry) -> set[tuple[str, str]]:
    """``(sample name, watch)`` of every sample served but the events."""
    return {
        (sample.name, sample.labels["watch"])
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for sample in family.samples
        if sample.name != "rlpulse_events_total"
    }


def test_an_unwatched_watch_is_no_longer_served_but_its_events_stay_counted(
    wait_until: Callable[..., bool],
) -> None:
    learner, buffer = Tally(), Tally()
    learner.inc("updates")
    learner.observe("update_s", 0.02)
    buffer.set("size", 5.0)
    registry = CollectorRegistry()
    with PrometheusExporter(registry=registry) as exporter:
        monitor = LoggerMonitor(exporter, poll_interval=0.02)
        monitor.watch(learner, name="learner")
        monitor.watch(buffer, name="buffer")
        with monitor:
            assert wait_until(
                lambda: (
                    ("rlpulse_update_seconds_count", "learner")
                    in watches_served(registry)
                )
            )
            monitor.unwatch("learner")
            assert wait_until(
                lambda: {w for _, w in watches_served(registry)} == {"buffer"}
            )
            assert ("rlpulse_size", "buffer") in watches_served(registry)
            events = events_served(registry)
            # Watched again under that name: served again.
            monitor.watch(learner, name="learner")
            assert wait_until(
                lambda: ("rlpulse_updates_total", "learner") in watches_served(registry)
            )
        # Counters that only grow, for the alert rules.
        assert events == {("unwatched", "learner"): 1.0}
        assert events_served(registry) == {**events, ("stopped", ""): 1.0}


def test_a_watch_unwatched_while_the_monitor_is_stopped_is_no_longer_served() -> None:
    registry = CollectorRegistry()
    with PrometheusExporter(registry=registry) as exporter:
        monitor = LoggerMonitor(exporter, poll_interval=3600)
        loop = Tally()
        loop.inc("frames")
        monitor.watch(loop, name="loop")
        with monitor:
            pass  # its final snapshot served
        assert ("rlpulse_frames_total", "loop") in watches_served(registry)
        monitor.unwatch("loop")
        assert watches_served(registry) == set()


def test_a_name_with_letters_outside_ascii_is_spelled_as_otlp_spells_it() -> None:
    registry = CollectorRegistry()
    with PrometheusExporter(registry=registry) as exporter:
        exporter.log_metrics({"buffer/überlauf": 2.0, "buffer/损失": 1.0})
        page = generate_latest(registry).decode()

    assert 'rlpulse_uberlauf{watch="buffer"} 2.0' in page
    assert 'rlpulse___{watch="buffer"} 1.0' in page


def port_of(exporter: PrometheusExporter) -> int:
    assert exporter.url is not None
    return int(exporter.url.rsplit(":", 1)[1].split("/")[0])


def test_a_port_held_by_something_else_is_refused_naming_the_address_and_what_to_do() -> (
    None
):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match="the port is in use") as refused:
            PrometheusExporter(port=port)

    assert refused.value.errno == errno.EADDRINUSE
    message = str(refused.value)
    assert f"cannot listen on 127.0.0.1:{port}:" in message
    assert "another program" in message
    assert "port=0 or 'prometheus:0' picks one that is free" in message


def test_a_second_exporter_on_the_port_of_one_of_this_process_names_the_first() -> None:
    with (
        PrometheusExporter(port=0) as first,
        pytest.raises(OSError, match="the port is in use") as refused,
    ):
        PrometheusExporter(port=port_of(first))

    message = str(refused.value)
    assert repr(first) in message
    assert "give every monitor of this process that one exporter" in message


def test_a_port_is_free_again_once_its_exporter_is_closed() -> None:
    exporter = PrometheusExporter(port=0)
    port = port_of(exporter)
    exporter.close()

    with PrometheusExporter(port=port) as again:
        assert port_of(again) == port


def _close_the_copy(exporter: PrometheusExporter, leave: Any, answers: Any) -> None:
    """What a worker forked while ``exporter`` served does: logs to its copy, closes it, waits to be let go."""
    try:
        exporter.log_metrics({"worker/frames": 1.0})
    except RuntimeError as refused:
        answers.put(str(refused))
    exporter.close()
    answers.put("closed")
    leave.wait(30)


def test_a_forked_worker_holds_neither_the_port_nor_a_copy_that_serves() -> None:
    fork = multiprocessing.get_context("fork")
    leave, answers = fork.Event(), fork.Queue()
    exporter = PrometheusExporter(port=0)
    port = port_of(exporter)
    worker = fork.Process(
        target=_close_the_copy, args=(exporter, leave, answers), daemon=True
    )
    worker.start()
    try:
        refused = answers.get(timeout=10)
        closed = answers.get(timeout=10)
        exporter.close()
        with PrometheusExporter(port=port) as again:
            assert port_of(again) == port
    finally:
        leave.set()
        worker.join(timeout=10)
        worker.kill()

    assert f"process {os.getpid()}" in refused
    assert "create a PrometheusExporter in this process" in refused
    assert closed == "closed"
    assert worker.exitcode == 0


def test_each_worker_of_shared_counters_is_a_series_labelled_by_worker_beside_the_watch_s_total(
    wait_until: Callable[..., bool],
) -> None:
    with (
        SharedCounters(2, counters=("frames",)) as counters,
        PrometheusExporter() as exporter,
        LoggerMonitor(exporter, poll_interval=0.02) as monitor,
    ):
        monitor.watch(counters, name="workers")
        counters.worker(0).inc("frames", 30)
        counters.worker(1).inc("frames", 12)
        counters.worker(1).heartbeat()
        assert wait_until(
            lambda: (
                labelled_series(page_of(exporter)).get(
                    ("rlpulse_frames_total", labels(watch="workers"))
                )
                == 42.0
            )
        )
        series = labelled_series(page_of(exporter))

    frames = {
        labelled: value
        for (name, labelled), value in series.items()
        if name == "rlpulse_frames_total"
    }
    assert frames == {
        labels(watch="workers"): 42.0,
        labels(watch="workers", worker="0"): 30.0,
        labels(watch="workers", worker="1"): 12.0,
    }
    assert ("rlpulse_heartbeat_age_seconds", labels(watch="workers", worker="1")) in (
        series
    )
    assert not [name for name, _ in series if "worker_" in name]


def test_a_family_first_served_without_instances_takes_series_of_instances_later() -> (
    None
):
    with PrometheusExporter() as exporter:
        exporter.log_metrics({"collector/frames": 5.0}, timestamp=1.0)
        before = page_of(exporter)
        exporter.log_metrics(
            {"workers/frames": 3.0, "workers/worker_0/frames": 3.0}, timestamp=2.0
        )
        after = page_of(exporter)

    assert 'rlpulse_frames_total{watch="collector"} 5.0' in before
    served = labelled_series(after)
    assert served[("rlpulse_frames_total", labels(watch="collector"))] == 5.0
    assert served[("rlpulse_frames_total", labels(watch="workers"))] == 3.0
    assert served[("rlpulse_frames_total", labels(watch="workers", worker="0"))] == 3.0
    # One family: every series has every label, empty where it has no instance.
    (family,) = [
        family
        for family in text_string_to_metric_families(after)
        if family.name == "rlpulse_frames"
    ]
    assert {frozenset(sample.labels) for sample in family.samples} == {
        frozenset({"watch", "worker"})
    }


def test_an_instance_s_histogram_and_quantiles_are_labelled_as_its_other_metrics() -> (
    None
):
    registry = CollectorRegistry()
    with PrometheusExporter(registry=registry) as exporter:
        exporter.log_payloads(
            [
                Payload(
                    {"learners/worker_3/update_s_p50": 0.25},
                    None,
                    1.0,
                    {},
                    {"learners/worker_3/update_s": observed([0.25, 0.25, 0.5])},
                )
            ]
        )
        series = labelled_series(generate_latest(registry).decode())

    worker = labels(watch="learners", worker="3")
    assert series[("rlpulse_update_seconds_p50", worker)] == 0.25
    assert series[("rlpulse_update_seconds_count", worker)] == 3.0
    assert series[("rlpulse_update_seconds_sum", worker)] == 1.0
    assert series[("rlpulse_update_seconds_bucket", worker | {("le", "+Inf")})] == 3.0


@pytest.mark.timeout(60)
def test_a_child_process_is_a_series_labelled_by_pid_until_it_exits(
    wait_until: Callable[..., bool],
) -> None:
    pytest.importorskip("psutil")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        pid = labels(watch="system", pid=str(child.pid))
        with (
            PrometheusExporter() as exporter,
            LoggerMonitor(exporter, poll_interval=0.05) as monitor,
        ):
            monitor.watch(SystemStats(children=True, gpus=False), name="system")
            assert wait_until(
                lambda: ("rlpulse_rss_bytes", pid) in labelled_series(page_of(exporter))
            )
            served = labelled_series(page_of(exporter))
            assert served[("rlpulse_threads", pid)] >= 1
            assert not [name for name, _ in served if "child_" in name]
            child.kill()
            child.wait(timeout=10)
            assert wait_until(
                lambda: (
                    not [
                        name
                        for name, labelled in labelled_series(page_of(exporter))
                        if ("pid", str(child.pid)) in labelled
                    ]
                )
            )
            assert ("rlpulse_process_rss_bytes", labels(watch="system")) in (
                labelled_series(page_of(exporter))
            )
    finally:
        child.kill()
        child.wait(timeout=10)


def test_an_instance_missing_from_a_snapshot_of_another_watch_stays_served() -> None:
    with PrometheusExporter() as exporter:
        exporter.log_metrics({"workers/worker_0/frames": 1.0}, timestamp=1.0)
        exporter.log_metrics({"buffer/size": 2.0}, timestamp=2.0)
        served = labelled_series(page_of(exporter))

    assert served[("rlpulse_frames_total", labels(watch="workers", worker="0"))] == 1.0


class Readings:
    """A target whose ``stats()`` returns whatever its ``readings`` hold at the time."""

    def __init__(self, **readings: float) -> None:
        self.readings = readings

    def stats(self) -> dict[str, float]:
        return dict(self.readings)


def test_a_gauge_a_watch_s_later_snapshot_lacks_is_no_longer_served() -> None:
    target = Readings(frames=10, temperature=71.0)
    with PrometheusExporter() as exporter:
        monitor = LoggerMonitor(exporter, background=False)
        monitor.watch(target, name="gpu")
        monitor.step()
        before = scrape(exporter)
        del target.readings["temperature"]
        target.readings["frames"] = 20
        monitor.step()
        after = scrape(exporter)
        monitor.stop()

    assert before[("rlpulse_temperature", "gpu")] == 71.0
    assert ("rlpulse_temperature", "gpu") not in after
    assert after[("rlpulse_frames_total", "gpu")] == 20.0


def test_a_rate_is_not_served_from_a_counter_s_reset_until_it_can_be_rated_again() -> (
    None
):
    target = Readings(frames=10)
    rate = ("rlpulse_frames_per_second", "collector")
    with PrometheusExporter() as exporter:
        monitor = LoggerMonitor(exporter, background=False)
        monitor.watch(target, name="collector")

        def polled_at(frames: int) -> Samples:
            time.sleep(0.05)
            target.readings["frames"] = frames
            monitor.step()
            return scrape(exporter)

        first = polled_at(10)
        rated = polled_at(20)
        reset = polled_at(5)  # the collector restarted from zero
        again = polled_at(9)
        monitor.stop()

    assert rate not in first
    assert rated[rate] > 0
    assert rate not in reset
    assert reset[("rlpulse_frames_total", "collector")] == 5.0
    assert again[rate] > 0


def test_a_counter_a_watch_s_later_snapshot_lacks_keeps_its_last_value() -> None:
    target = Readings(frames=10, size=3.0)
    with PrometheusExporter() as exporter:
        monitor = LoggerMonitor(exporter, background=False)
        monitor.watch(target, name="collector")
        monitor.step()
        del target.readings["frames"]
        target.readings["size"] = 4.0
        monitor.step()
        served = scrape(exporter)
        monitor.stop()

    assert served[("rlpulse_frames_total", "collector")] == 10.0
    assert served[("rlpulse_size", "collector")] == 4.0


def test_a_tally_s_quantiles_are_served_only_after_intervals_with_observations() -> (
    None
):
    tally = Tally()
    quantiles = [f"rlpulse_update_seconds_{q}" for q in ("p50", "p90", "p99")]
    with PrometheusExporter() as exporter:
        monitor = LoggerMonitor(exporter, background=False)
        monitor.watch(tally, name="learner")
        tally.observe("update_s", 0.25)
        monitor.step()
        observed_once = scrape(exporter)
        monitor.step()  # an interval without observations
        idle = scrape(exporter)
        tally.observe("update_s", 0.5)
        monitor.step()
        observed_again = scrape(exporter)
        monitor.stop()

    assert {name: observed_once[(name, "learner")] for name in quantiles} == (
        dict.fromkeys(quantiles, pytest.approx(0.25, rel=0.01))
    )
    assert not [name for name in quantiles if (name, "learner") in idle]
    # The tally's own statistics, over its most recent observations, stay.
    assert idle[("rlpulse_update_seconds_mean", "learner")] == 0.25
    # The histogram is cumulative: it keeps what it counted.
    assert idle[("rlpulse_update_seconds_count", "learner")] == 1.0
    assert observed_again[("rlpulse_update_seconds_p99", "learner")] == (
        pytest.approx(0.5, rel=0.01)
    )
    assert observed_again[("rlpulse_update_seconds_count", "learner")] == 2.0


def test_a_key_logged_by_hand_keeps_its_last_value_when_a_later_payload_lacks_it() -> (
    None
):
    with PrometheusExporter() as exporter:
        exporter.log_metrics(
            {"gpu/temperature": 71.0, "gpu/worker_0/memory_bytes": 5.0}, timestamp=1.0
        )
        exporter.log_metrics({"gpu/utilization": 0.5}, timestamp=2.0)
        exporter.log_batch([({"gpu/power_watts": 250.0}, None, 3.0)])
        served = labelled_series(page_of(exporter))

    gpu = labels(watch="gpu")
    assert served[("rlpulse_temperature", gpu)] == 71.0
    assert served[("rlpulse_utilization", gpu)] == 0.5
    assert served[("rlpulse_power_watts", gpu)] == 250.0
    assert served[("rlpulse_memory_bytes", labels(watch="gpu", worker="0"))] == 5.0


def test_a_payload_a_monitor_hands_over_retires_only_what_its_watch_no_longer_reports() -> (
    None
):
    gauges = {"gpu/temperature": Kind.GAUGE}
    with PrometheusExporter() as exporter:
        exporter.log_payloads(
            [
                Payload({"gpu/temperature": 71.0}, None, 1.0, gauges),
                Payload({"buffer/size": 3.0}, None, 1.0, {}),
            ]
        )
        exporter.log_payloads([Payload({"buffer/size": 4.0}, None, 2.0, {})])
        kept = scrape(exporter)
        exporter.log_payloads([Payload({"gpu/power_watts": 250.0}, None, 3.0, {})])
        retired = scrape(exporter)

    # Another watch's snapshot says nothing about gpu's temperature.
    assert kept[("rlpulse_temperature", "gpu")] == 71.0
    assert ("rlpulse_temperature", "gpu") not in retired
    assert retired[("rlpulse_size", "buffer")] == 4.0
    assert retired[("rlpulse_last_poll_timestamp_seconds", "gpu")] == 3.0


@pytest.mark.timeout(60)
def test_an_exporter_in_a_sink_process_retires_what_a_watch_stops_reporting_but_not_what_was_logged_by_hand() -> (
    None
):
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    target = Readings(temperature=71.0)

    def served() -> Samples:
        sink.flush(timeout=10)
        with urllib.request.urlopen(url, timeout=10) as response:
            return parse(response.read().decode())[0]

    with SinkProcess(f"prometheus:{port}") as sink:
        monitor = LoggerMonitor(sink, background=False)
        monitor.watch(target, name="gpu")
        monitor.step()
        sink.log_metrics({"fan/speed_rpm": 900.0}, timestamp=1.0)
        before = served()
        del target.readings["temperature"]
        target.readings["power_watts"] = 250.0
        monitor.step()
        sink.log_metrics({"fan/duty": 0.5}, timestamp=2.0)
        after = served()
        monitor.stop()

    assert before[("rlpulse_temperature", "gpu")] == 71.0
    assert ("rlpulse_temperature", "gpu") not in after
    assert after[("rlpulse_power_watts", "gpu")] == 250.0
    assert after[("rlpulse_speed_rpm", "fan")] == 900.0
    assert after[("rlpulse_duty", "fan")] == 0.5


def test_each_worker_s_count_and_sum_of_shared_counters_are_served_beside_the_watch_s_histogram(
    wait_until: Callable[..., bool],
) -> None:
    with (
        SharedCounters(2, histograms=("batch_s",)) as counters,
        PrometheusExporter() as exporter,
        LoggerMonitor(exporter, poll_interval=0.02) as monitor,
    ):
        monitor.watch(counters, name="workers")
        for value in (0.25, 0.5):
            counters.worker(0).observe("batch_s", value)
        counters.worker(1).observe("batch_s", 2.0)
        total = ("rlpulse_batch_seconds_count", labels(watch="workers"))
        assert wait_until(lambda: labelled_series(page_of(exporter)).get(total) == 3.0)
        page = page_of(exporter)

    series = labelled_series(page)
    first, second = (labels(watch="workers", worker=str(i)) for i in (0, 1))
    # Each worker's count and sum, as a histogram of one bucket (its buckets
    # are the watch's only), so that rate() reads each worker's.
    assert series[("rlpulse_batch_seconds_count", first)] == 2.0
    assert series[("rlpulse_batch_seconds_sum", first)] == 0.75
    assert series[("rlpulse_batch_seconds_bucket", first | {("le", "+Inf")})] == 2.0
    assert series[("rlpulse_batch_seconds_count", second)] == 1.0
    assert series[("rlpulse_batch_seconds_sum", second)] == 2.0
    assert not [
        key
        for key in series
        if key[0] == "rlpulse_batch_seconds_bucket"
        and dict(key[1]).get("worker")
        and dict(key[1])["le"] != "+Inf"
    ]
    # The watch's own histogram keeps its buckets.
    assert (
        series[
            ("rlpulse_batch_seconds_bucket", labels(watch="workers") | {("le", "+Inf")})
        ]
        == 3.0
    )
    assert "# TYPE rlpulse_batch_seconds histogram" in page


def test_what_a_payload_stored_before_it_failed_is_retired_with_its_watch() -> None:
    registry = CollectorRegistry()
    observed = Histogram()
    observed.add(1.0)
    with PrometheusExporter(registry=registry) as exporter:
        with pytest.raises((TypeError, ValueError)):
            exporter.log_metrics({"v/update_s_count": 1.0, "v/bad": "x"})  # type: ignore[dict-item]
        # The histogram of the count logged before takes its name all the same.
        exporter.log_payloads([Payload({}, None, 1.0, {}, {"w/update_s": observed})])
        exporter.log_event(Event(2.0, "v", "unwatched", "", 0.0))
        samples, types = served(registry)

    assert types["rlpulse_update_seconds_count"] == "histogram"
    assert samples[("rlpulse_update_seconds_count", "w")] == 1.0
    # Its events stay counted; nothing else of it is served.
    assert [key for key in samples if key[1] == "v"] == [("rlpulse_events_total", "v")]


def test_a_count_served_before_its_histogram_stays_in_the_histogram_s_inf_bucket() -> (
    None
):
    # Watch "b"'s first observations never reached the exporter (their
    # payload was dropped): its count and sum were served alone; when its
    # histogram arrives, the count goes on from them instead of falling,
    # which rate() would read as a reset.
    registry = CollectorRegistry()
    with PrometheusExporter(registry=registry) as exporter:
        exporter.log_payloads(
            [Payload({}, None, 1.0, {}, {"a/update_s": observed([1.0])})]
        )
        counted = {"b/update_s_count": 5.0, "b/update_s_sum": 2.5}
        exporter.log_payloads([Payload(counted, None, 2.0, {})])
        before, _ = served(registry)
        later = {"b/update_s_count": 7.0, "b/update_s_sum": 3.5}
        interval = observed([0.25, 0.75])
        exporter.log_payloads([Payload(later, None, 3.0, {}, {"b/update_s": interval})])
        after, types = served(registry)
        buckets = buckets_served(registry, "rlpulse_update_seconds", "b")

    assert before[("rlpulse_update_seconds_count", "b")] == 5.0
    assert after[("rlpulse_update_seconds_count", "b")] == 7.0
    assert after[("rlpulse_update_seconds_sum", "b")] == 3.5
    assert types["rlpulse_update_seconds_count"] == "histogram"
    # The two observations it has are in their buckets; the five before, in +Inf.
    assert buckets[-1] == (math.inf, 7.0)
    assert buckets[-2][1] == 2.0
    assert after[("rlpulse_update_seconds_count", "a")] == 1.0
