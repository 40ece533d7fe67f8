"""PrometheusExporter scraped by a real Prometheus server, queried over its HTTP API.

The server is Debian's ``prometheus`` (``make test`` installs it where
missing), started on the loopback interface with its own storage in a
temporary directory, scraping a monitor's exporter every second; it is
killed when the test ends. Without a ``prometheus`` binary the test is
skipped.
"""

from __future__ import annotations

import json
import random
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rlpulse import Event, LoggerMonitor, Tally
from rlpulse.sinks.prometheus import BOUNDS_PER_OCTAVE, PrometheusExporter

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(
        shutil.which("prometheus") is None,
        reason="needs the Prometheus server: apt-get install prometheus "
        "(make test installs it)",
    ),
]

FRAMES_PER_SECOND = 1000.0
# The window of PromQL's rate(), scraped every second.
WINDOW_S = 4
WINDOW = f"{WINDOW_S}s"
# How long the server has to start and to scrape enough samples.
DEADLINE_S = 30.0


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


class Prometheus:
    """A running Prometheus server's HTTP API."""

    def __init__(self, url: str, log: Path) -> None:
        self.url = url
        self.log = log

    def get(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        try:
            with urllib.request.urlopen(
                f"{self.url}{path}{query}", timeout=10
            ) as reply:
                answer = json.load(reply)
        except urllib.error.HTTPError as error:
            raise AssertionError(
                f"Prometheus refused {params}: {error.read()!r}"
            ) from None
        assert answer["status"] == "success", answer
        return answer["data"]

    def value(self, promql: str) -> float | None:
        """The value of the one series ``promql`` returns now; ``None`` when it returns none."""
        result = self.get("/api/v1/query", query=promql)["result"]
        if not result:
            return None
        (series,) = result
        return float(series["value"][1])

    def wait_for(self, promql: str) -> float:
        """The value of ``promql`` once it has one, within the deadline."""
        deadline = time.monotonic() + DEADLINE_S
        while (value := self.value(promql)) is None:
            assert time.monotonic() < deadline, (
                f"Prometheus returned nothing for {promql!r} within {DEADLINE_S} s; "
                f"its log:\n{self.log.read_text()}"
            )
            time.sleep(0.25)
        return value


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def exporter() -> Iterator[PrometheusExporter]:
    with PrometheusExporter(port=0) as exporter:
        yield exporter


@pytest.fixture
def prometheus(exporter: PrometheusExporter, tmp_path: Path) -> Iterator[Prometheus]:
    """A Prometheus server scraping ``exporter`` every second."""
    assert exporter.url is not None
    target = urllib.parse.urlsplit(exporter.url).netloc
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n"
        "  scrape_interval: 1s\n"
        "scrape_configs:\n"
        "  - job_name: rlpulse\n"
        "    static_configs:\n"
        f'      - targets: ["{target}"]\n'
    )
    address = f"127.0.0.1:{free_port()}"
    log = tmp_path / "prometheus.log"
    with log.open("wb") as output:
        server = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address={address}",
                "--log.level=warn",
            ],
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        api = Prometheus(f"http://{address}", log)
        deadline = time.monotonic() + DEADLINE_S
        while True:
            assert server.poll() is None, f"Prometheus exited:\n{log.read_text()}"
            try:
                urllib.request.urlopen(f"{api.url}/-/ready", timeout=5).close()
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline, (
                    f"Prometheus not ready within {DEADLINE_S} s:\n{log.read_text()}"
                )
                time.sleep(0.1)
        yield api
    finally:
        server.kill()
        server.wait(timeout=10)


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
