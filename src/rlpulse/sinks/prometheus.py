"""Prometheus: the latest value of every metric, served as gauges for scraping.

Needs the ``prometheus`` extra (``pip install 'rlpulse[prometheus]'``);
prometheus_client is imported when a :class:`PrometheusExporter` is created,
never by ``import rlpulse``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from rlpulse.naming import split
from rlpulse.runtime.events import Event
from rlpulse.sinks.base import BaseSink, Payload

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

__all__ = ["PrometheusExporter"]

_VALID_PREFIX = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_INVALID_NAME_CHARACTERS = re.compile(r"[^a-zA-Z0-9_]")
_POLL_TIME_FAMILY = "last_poll_timestamp_seconds"
_EVENTS_FAMILY = "events"


class PrometheusExporter(BaseSink):
    """A sink that serves the latest value of every metric as a Prometheus gauge.

    A payload key ``"<watch>/<metric>"`` becomes the gauge
    ``<prefix>_<metric>`` with the label ``watch="<watch>"``, so one query
    (``rlpulse_frames_per_second``) shows that metric for every watch. Names
    are made valid for Prometheus by turning every character other than
    letters, digits and ``_`` into ``_``; a metric whose name would then
    collide with another metric's gauge gets the first free ``_2``, ``_3``,
    ... suffix, so two metrics never share a gauge. The gauge
    ``<prefix>_last_poll_timestamp_seconds`` gives, per watch, the wall-clock
    time of the poll behind the latest values (Prometheus records its own
    scrape time for every sample; this one says how fresh the data is).

    With ``registry=None`` the exporter has a registry of its own and serves
    it over HTTP on ``addr:port`` (``port=0`` picks a free port; ``url`` gives
    the scrape address), on the loopback interface unless another address is
    given. Given a ``prometheus_client`` registry, it registers its gauges
    there and starts no server: whatever serves that registry serves them.
    ``close()`` stops the server or leaves the registry.

    >>> import urllib.request
    >>> from rlpulse.sinks.prometheus import PrometheusExporter
    >>> with PrometheusExporter(port=0) as exporter:
    ...     exporter.log_metrics({"collector/frames": 96.0}, step=3)
    ...     page = urllib.request.urlopen(exporter.url, timeout=10).read().decode()
    >>> 'rlpulse_frames{watch="collector"} 96.0' in page
    True
    """

    def __init__(
        self,
        port: int = 0,
        addr: str = "127.0.0.1",
        prefix: str = "rlpulse",
        registry: CollectorRegistry | None = None,
    ) -> None:
        if (
            isinstance(port, bool)
            or not isinstance(port, int)
            or not 0 <= port <= 65535
        ):
            raise ValueError(
                f"port must be an integer from 0 to 65535 (0 picks a free port); "
                f"got {port!r}"
            )
        if prefix and not _VALID_PREFIX.fullmatch(prefix):
            raise ValueError(
                f"prefix {prefix!r} is not a valid start of a Prometheus metric name; "
                "use letters, digits, '_' and ':', not starting with a digit"
            )
        prometheus_client = _import_backend()
        super().__init__()
        self.prefix = prefix
        self._latest: dict[tuple[str, str], float] = {}
        self._poll_times: dict[str, float] = {}
        self._gauge_of_metric: dict[str, str] = {}
        self._poll_time_gauge = self._full_name(_POLL_TIME_FAMILY)
        self._metric_of_gauge: dict[str, str] = {self._poll_time_gauge: ""}
        self._server: Any = None
        self._server_thread: threading.Thread | None = None
        self.url: str | None = None
        """The HTTP address to scrape, or ``None`` when registered into a given registry."""
        self._gauge_family = prometheus_client.core.GaugeMetricFamily
        self._counter_family = prometheus_client.core.CounterMetricFamily
        self._events_counter = self._full_name(_EVENTS_FAMILY)
        self._metric_of_gauge[self._events_counter] = ""
        # Events so far by (kind, watch).
        self._events: dict[tuple[str, str], int] = {}
        if registry is None:
            self.registry: CollectorRegistry = prometheus_client.CollectorRegistry()
            self.registry.register(self)
            self._server, self._server_thread = prometheus_client.start_http_server(
                port, addr=addr, registry=self.registry
            )
            # prometheus_client's thread, named as rlpulse's threads are.
            self._server_thread.name = "rlpulse-prometheus"
            host = f"[{addr}]" if ":" in addr else addr
            self.url = f"http://{host}:{self._server.server_port}/metrics"
        else:
            self.registry = registry
            self.registry.register(self)

    def _write_batch(self, payloads: Sequence[Payload]) -> None:
        """Make the payloads' values the latest ones served, the last payload's winning.

        ``step`` is not served (a step is usually one of the payload's own
        counters); ``timestamp`` is the wall-clock time of the poll that
        produced the payload (now when ``None``) and becomes the watch's
        ``<prefix>_last_poll_timestamp_seconds``.

        >>> from prometheus_client import CollectorRegistry, generate_latest
        >>> from rlpulse.sinks.prometheus import PrometheusExporter
        >>> registry = CollectorRegistry()
        >>> with PrometheusExporter(registry=registry) as exporter:
        ...     exporter.log_metrics({"buffer/size": 10.0}, timestamp=1.5)
        ...     page = generate_latest(registry).decode()
        >>> 'rlpulse_size{watch="buffer"} 10.0' in page
        True
        """
        for metrics, _, wall_time, _ in payloads:
            for key, value in metrics.items():
                watch, metric = split(key)
                self._latest[(self._gauge_for(metric), watch)] = float(value)
                self._poll_times[watch] = wall_time

    def _closed_message(self) -> str:
        return (
            "PrometheusExporter is closed; create a new PrometheusExporter "
            "to keep serving metrics"
        )

    def _gauge_for(self, metric: str) -> str:
        gauge = self._gauge_of_metric.get(metric)
        if gauge is None:
            base = self._full_name(_INVALID_NAME_CHARACTERS.sub("_", metric))
            gauge = base
            suffix = 2
            while gauge in self._metric_of_gauge:
                gauge = f"{base}_{suffix}"
                suffix += 1
            self._gauge_of_metric[metric] = gauge
            self._metric_of_gauge[gauge] = metric
        return gauge

    def _full_name(self, name: str) -> str:
        full_name = f"{self.prefix}_{name}" if self.prefix else name
        return full_name if _VALID_PREFIX.match(full_name) else f"_{full_name}"

    def log_event(self, event: Event) -> None:
        """Count ``event`` in ``<prefix>_events_total{kind, watch}``.

        >>> from prometheus_client import CollectorRegistry, generate_latest
        >>> from rlpulse import Event
        >>> from rlpulse.sinks.prometheus import PrometheusExporter
        >>> registry = CollectorRegistry()
        >>> with PrometheusExporter(registry=registry) as exporter:
        ...     exporter.log_event(Event(1.5, "collector", "stalled", "no progress", 30.0))
        ...     page = generate_latest(registry).decode()
        >>> 'rlpulse_events_total{kind="stalled",watch="collector"} 1.0' in page
        True
        """
        self._log_event(self._write_event, event)

    def _write_event(self, event: Event) -> None:
        key = (str(event.kind), str(event.watch))
        self._events[key] = self._events.get(key, 0) + 1

    def collect(self) -> Iterator[Any]:
        """Yield the gauges of the latest values: what a scrape of the registry returns.

        >>> from rlpulse.sinks.prometheus import PrometheusExporter
        >>> from prometheus_client import CollectorRegistry
        >>> with PrometheusExporter(registry=CollectorRegistry()) as exporter:
        ...     exporter.log_metrics({"buffer/size": 10.0}, timestamp=1.5)
        ...     [(family.name, family.samples[0].value) for family in exporter.collect()]
        [('rlpulse_last_poll_timestamp_seconds', 1.5), ('rlpulse_size', 10.0)]
        """
        with self._lock:
            latest = sorted(self._latest.items())
            poll_times = sorted(self._poll_times.items())
            events = sorted(self._events.items())
        if events:
            counter = self._counter_family(
                self._events_counter,
                "rlpulse events (a stall, a hung call, a failing sink, drops) by kind and watch.",
                labels=["kind", "watch"],
            )
            for (kind, watch), count in events:
                counter.add_metric([kind, watch], count)
            yield counter
        if poll_times:
            family = self._gauge_family(
                self._poll_time_gauge,
                "Wall-clock time (seconds since the epoch) of the poll that "
                "produced the watch's latest values.",
                labels=["watch"],
            )
            for watch, wall_time in poll_times:
                family.add_metric([watch], wall_time)
            yield family
        family = None
        for (gauge, watch), value in latest:
            if family is None or family.name != gauge:
                if family is not None:
                    yield family
                family = self._gauge_family(
                    gauge,
                    f"Latest value of the rlpulse metric {self._metric_of_gauge[gauge]!r}.",
                    labels=["watch"],
                )
            family.add_metric([watch], value)
        if family is not None:
            yield family

    def describe(self) -> list[Any]:
        """Return no descriptions: the gauges appear as metrics arrive.

        >>> from rlpulse.sinks.prometheus import PrometheusExporter
        >>> from prometheus_client import CollectorRegistry
        >>> with PrometheusExporter(registry=CollectorRegistry()) as exporter:
        ...     exporter.describe()
        []
        """
        return []

    def flush(self) -> None:
        """Do nothing: every payload is served as soon as ``log_metrics`` returns.

        >>> from rlpulse.sinks.prometheus import PrometheusExporter
        >>> from prometheus_client import CollectorRegistry
        >>> with PrometheusExporter(registry=CollectorRegistry()) as exporter:
        ...     exporter.flush()
        """

    def _close(self) -> None:
        """Stop serving: shut the HTTP server down or leave the given registry.

        It runs under the exporter's lock, which a scrape under way may wait
        for: shutting the server down waits for its serving loop, never for
        the threads answering scrapes, so that wait cannot deadlock.

        >>> from rlpulse.sinks.prometheus import PrometheusExporter
        >>> exporter = PrometheusExporter(port=0)
        >>> exporter.close()
        >>> exporter.close()
        """
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._server_thread is not None:
            self._server_thread.join(timeout=5.0)
        self.registry.unregister(self)

    def __repr__(self) -> str:
        where = self.url if self.url is not None else "a given registry"
        return f"<PrometheusExporter prefix={self.prefix!r} serving {where}>"


def _import_backend() -> Any:
    try:
        import prometheus_client
        import prometheus_client.core
    except ImportError as error:
        raise ImportError(
            "PrometheusExporter needs prometheus_client, which is not installed: "
            "pip install 'rlpulse[prometheus]'"
        ) from error
    return prometheus_client
