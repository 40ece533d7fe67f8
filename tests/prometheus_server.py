"""A real Prometheus server on 127.0.0.1 for the tests, scraping exporters every second, queried over its HTTP API.

The server is Debian's ``prometheus`` (``make test`` installs it where
missing), with its own storage in a directory the test gives, killed when
the test is done with it. Tests that need it are marked
:data:`needs_prometheus`, skipped where there is no ``prometheus`` binary.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

DEADLINE_S = 30.0
"""How long the server has to start and to scrape enough samples."""

needs_prometheus = pytest.mark.skipif(
    shutil.which("prometheus") is None,
    reason="needs the Prometheus server: apt-get install prometheus "
    "(make test installs it)",
)


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

    def over(
        self, promql: str, seconds: float
    ) -> list[tuple[dict[str, str], list[float]]]:
        """Each series ``promql`` returns over the last ``seconds``, evaluated every second: its labels and values."""
        end = time.time()
        result = self.get(
            "/api/v1/query_range",
            query=promql,
            start=str(end - seconds),
            end=str(end),
            step="1",
        )["result"]
        return [
            (series["metric"], [float(value) for _, value in series["values"]])
            for series in result
        ]

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

    def wait_gone(self, promql: str) -> None:
        """Return once ``promql`` returns nothing (a series that went stale), within the deadline."""
        deadline = time.monotonic() + DEADLINE_S
        while (value := self.value(promql)) is not None:
            assert time.monotonic() < deadline, (
                f"Prometheus still returned {value} for {promql!r} after "
                f"{DEADLINE_S} s; its log:\n{self.log.read_text()}"
            )
            time.sleep(0.25)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def running_prometheus(
    scrape_urls: Sequence[str], directory: Path, rule_files: Sequence[Path] = ()
) -> Iterator[Prometheus]:
    """A Prometheus server scraping ``scrape_urls`` every second as job ``rlpulse``, evaluating ``rule_files`` every second, its files in ``directory``."""
    targets = ", ".join(f'"{urllib.parse.urlsplit(url).netloc}"' for url in scrape_urls)
    config = directory / "prometheus.yml"
    config.write_text(
        "global:\n"
        "  scrape_interval: 1s\n"
        "  evaluation_interval: 1s\n"
        f"rule_files: {json.dumps([str(path) for path in rule_files])}\n"
        "scrape_configs:\n"
        "  - job_name: rlpulse\n"
        "    static_configs:\n"
        f"      - targets: [{targets}]\n"
    )
    address = f"127.0.0.1:{free_port()}"
    log = directory / "prometheus.log"
    with log.open("wb") as output:
        server = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={directory / 'data'}",
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
