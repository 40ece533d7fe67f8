"""PrometheusExporter: real HTTP scrapes on the loopback, parsed with prometheus_client's parser."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Callable

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from rlpulse import LoggerMonitor
from rlpulse.sinks.prometheus import PrometheusExporter

Samples = dict[tuple[str, str], float]


def parse(page: str) -> tuple[Samples, dict[str, str]]:
    """Return ``{(gauge, watch): value}`` and ``{gauge: help}`` of an exposition page."""
    samples: Samples = {}
    helps: dict[str, str] = {}
    for family in text_string_to_metric_families(page):
        assert family.type == "gauge"
        helps[family.name] = family.documentation
        for sample in family.samples:
            samples[(sample.name, sample.labels["watch"])] = sample.value
    return samples, helps


def scrape(exporter: PrometheusExporter) -> Samples:
    assert exporter.url is not None
    with urllib.request.urlopen(exporter.url, timeout=10) as response:
        return parse(response.read().decode())[0]


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


def test_a_scrape_serves_every_metric_as_a_gauge_labelled_with_its_watch() -> None:
    with PrometheusExporter() as exporter:
        exporter.log_metrics(
            {"collector/frames": 96.0, "collector/frames_per_second": 12.5},
            step=96,
            timestamp=1000.0,
        )
        exporter.log_metrics(
            {"buffer/size": 10.0, "buffer/samples_count": 3.0}, timestamp=1001.0
        )
        samples = scrape(exporter)

    assert samples == {
        ("rlpulse_frames", "collector"): 96.0,
        ("rlpulse_frames_per_second", "collector"): 12.5,
        ("rlpulse_size", "buffer"): 10.0,
        ("rlpulse_samples_count", "buffer"): 3.0,
        ("rlpulse_last_poll_timestamp_seconds", "collector"): 1000.0,
        ("rlpulse_last_poll_timestamp_seconds", "buffer"): 1001.0,
    }


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
        assert wait_until(lambda: ("rlpulse_frames", "collector") in scrape(exporter))
        first = scrape(exporter)
        collector.advance(500)
        assert wait_until(
            lambda: scrape(exporter)[("rlpulse_frames", "collector")] >= 500
        )
        collector.advance(500)
        assert wait_until(
            lambda: scrape(exporter)[("rlpulse_frames", "collector")] >= 1000
        )
        later = scrape(exporter)

    assert (
        first[("rlpulse_frames", "collector")] < later[("rlpulse_frames", "collector")]
    )
    assert later[("rlpulse_frames_per_second", "collector")] >= 0
    assert (
        later[("rlpulse_last_poll_timestamp_seconds", "collector")]
        > first[("rlpulse_last_poll_timestamp_seconds", "collector")]
    )


def test_names_are_made_valid_and_colliding_metrics_never_share_a_gauge() -> None:
    registry = CollectorRegistry()
    with PrometheusExporter(registry=registry) as exporter:
        exporter.log_metrics(
            {
                "env/episode.return": 1.0,
                "env/episode_return": 2.0,
                "env/episode-return": 3.0,
                "env/last_poll_timestamp_seconds": 4.0,
                "worker_0/frames": 5.0,
            },
            timestamp=10.0,
        )
        samples, helps = parse(generate_latest(registry).decode())

    assert samples == {
        ("rlpulse_episode_return", "env"): 1.0,
        ("rlpulse_episode_return_2", "env"): 2.0,
        ("rlpulse_episode_return_3", "env"): 3.0,
        ("rlpulse_last_poll_timestamp_seconds_2", "env"): 4.0,
        ("rlpulse_frames", "worker_0"): 5.0,
        ("rlpulse_last_poll_timestamp_seconds", "env"): 10.0,
        ("rlpulse_last_poll_timestamp_seconds", "worker_0"): 10.0,
    }
    assert "'episode.return'" in helps["rlpulse_episode_return"]
    assert "'episode_return'" in helps["rlpulse_episode_return_2"]


def test_one_metric_of_several_watches_is_one_gauge_with_one_series_per_watch() -> None:
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


def test_a_custom_or_empty_prefix_starts_every_gauge_name() -> None:
    registry = CollectorRegistry()
    with PrometheusExporter(prefix="rl:pipeline", registry=registry) as prefixed:
        prefixed.log_metrics({"collector/frames": 1.0}, timestamp=1.0)
        assert ("rl:pipeline_frames", "collector") in parse(
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
