"""Prometheus: the latest value of every metric, served for scraping as a counter or a gauge, by its kind.

Needs the ``prometheus`` extra (``pip install 'rlpulse[prometheus]'``);
prometheus_client is imported when a :class:`PrometheusExporter` is created,
never by ``import rlpulse``.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from rlpulse.naming import Kind, Unit, split
from rlpulse.runtime.events import Event
from rlpulse.sinks.base import BaseSink, Payload

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

__all__ = ["PrometheusExporter"]

_VALID_PREFIX = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_INVALID_NAME_CHARACTERS = re.compile(r"[^a-zA-Z0-9_]")
_POLL_TIME_FAMILY = "last_poll_timestamp_seconds"
_EVENTS_FAMILY = "events"
# The words of rlpulse's names that abbreviate a unit, as Prometheus spells them.
_SPELLED_OUT_UNITS = {"s": str(Unit.SECONDS)}
# What prometheus_client appends to a counter family's name in its sample.
_COUNTER_SUFFIX = "_total"


class _Family(NamedTuple):
    """The Prometheus metric family serving one rlpulse metric: its name (a counter's without ``_total``), its type."""

    name: str
    counter: bool
    metric: str

    def exposed_names(self) -> tuple[str, ...]:
        """The names this family takes in a scrape: no other family may use them."""
        if self.counter:
            return (self.name, self.name + _COUNTER_SUFFIX)
        return (self.name,)


class PrometheusExporter(BaseSink):
    """A sink that serves the latest value of every metric for Prometheus: a counter as a counter, the rest as gauges.

    A payload key ``"<watch>/<metric>"`` becomes the series
    ``<prefix>_<metric>`` with the label ``watch="<watch>"``, so one query
    (``rlpulse_frames_per_second``) shows that metric for every watch. What
    the metric is decides the type: a counter (``frames``, a tally's
    ``inc()`` keys and observation counts) is a Prometheus counter, its
    series named with ``_total`` (``rlpulse_frames_total``), for PromQL's
    ``rate()``; everything else, the rates the monitor computes
    (``*_per_second``) included, is a gauge. A metric keeps the type it was
    first served with. Names follow Prometheus' conventions: the seconds
    rlpulse's names abbreviate to ``s`` are spelled out (``update_s_p99`` is
    served as ``rlpulse_update_seconds_p99``, ``cpu_s`` as
    ``rlpulse_cpu_seconds_total``), and every character other than letters,
    digits and ``_`` becomes ``_``; a metric whose name would then collide
    with another metric's gets the first free ``_2``, ``_3``, ... suffix, so
    two metrics never share a series. The gauge ``<prefix>_last_poll_timestamp_seconds`` gives, per
    watch, the wall-clock time of the poll behind the latest values
    (Prometheus records its own scrape time for every sample; this one says
    how fresh the data is).

    With ``registry=None`` the exporter has a registry of its own and serves
    it over HTTP on ``addr:port`` (``port=0`` picks a free port; ``url`` gives
    the scrape address), on the loopback interface unless another address is
    given. Given a ``prometheus_client`` registry, it registers its gauges
    there and starts no server: whatever serves that registry serves them.
    ``close()`` stops the server or leaves the registry.

    >>> import urllib.request
    >>> from rlpulse.sinks.prometheus import PrometheusExporter
    >>> with PrometheusExporter(port=0) as exporter:
    ...     exporter.log_metrics({"collector/frames": 96.0, "buffer/size": 5.0}, step=3)
    ...     page = urllib.request.urlopen(exporter.url, timeout=10).read().decode()
    >>> print("\\n".join(line for line in page.splitlines() if "poll" not in line))
    # HELP rlpulse_frames_total rlpulse counter 'frames' (cumulative): its latest value.
    # TYPE rlpulse_frames_total counter
    rlpulse_frames_total{watch="collector"} 96.0
    # HELP rlpulse_size rlpulse gauge 'size': its latest value.
    # TYPE rlpulse_size gauge
    rlpulse_size{watch="buffer"} 5.0
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
        # The latest value by (family name, watch).
        self._latest: dict[tuple[str, str], float] = {}
        self._poll_times: dict[str, float] = {}
        self._family_of_metric: dict[str, _Family] = {}
        self._family_by_name: dict[str, _Family] = {}
        self._poll_time_gauge = self._full_name(_POLL_TIME_FAMILY)
        self._events_counter = self._full_name(_EVENTS_FAMILY)
        # Every name a scrape shows, so that no metric's family takes one twice.
        self._taken: set[str] = {
            *_Family(self._poll_time_gauge, False, "").exposed_names(),
            *_Family(self._events_counter, True, "").exposed_names(),
        }
        self._server: Any = None
        self._server_thread: threading.Thread | None = None
        self.url: str | None = None
        """The HTTP address to scrape, or ``None`` when registered into a given registry."""
        self._gauge_family = prometheus_client.core.GaugeMetricFamily
        self._counter_family = prometheus_client.core.CounterMetricFamily
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
        for payload in payloads:
            for key, value in payload.metrics.items():
                watch, metric = split(key)
                family = self._family_for(metric, payload.kind(key))
                self._latest[(family.name, watch)] = float(value)
                self._poll_times[watch] = payload.wall_time

    def _closed_message(self) -> str:
        return (
            "PrometheusExporter is closed; create a new PrometheusExporter "
            "to keep serving metrics"
        )

    def _family_for(self, metric: str, kind: Kind) -> _Family:
        """The family serving ``metric``: made the first time, of ``kind``, and kept.

        A registry cannot change a family's type, so the kind ``metric`` is
        first served with is the kind it keeps.
        """
        family = self._family_of_metric.get(metric)
        if family is None:
            counter = kind is Kind.COUNTER
            base = self._full_name(_prometheus_name(metric))
            # prometheus_client takes a counter's name without ``_total``.
            while (
                counter and base.endswith(_COUNTER_SUFFIX) and base != _COUNTER_SUFFIX
            ):
                base = base[: -len(_COUNTER_SUFFIX)]
            family = _Family(base, counter, metric)
            suffix = 2
            while self._taken.intersection(family.exposed_names()):
                family = _Family(f"{base}_{suffix}", counter, metric)
                suffix += 1
            self._taken.update(family.exposed_names())
            self._family_of_metric[metric] = family
            self._family_by_name[family.name] = family
        return family

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
        """Yield the metric families of the latest values and the events: what a scrape of the registry returns.

        >>> from rlpulse.sinks.prometheus import PrometheusExporter
        >>> from prometheus_client import CollectorRegistry
        >>> with PrometheusExporter(registry=CollectorRegistry()) as exporter:
        ...     exporter.log_metrics({"buffer/size": 10.0}, timestamp=1.5)
        ...     [(family.name, family.samples[0].value) for family in exporter.collect()]
        [('rlpulse_last_poll_timestamp_seconds', 1.5), ('rlpulse_size', 10.0)]
        """
        with self._lock:
            latest = [
                (self._family_by_name[name], watch, value)
                for (name, watch), value in sorted(self._latest.items())
            ]
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
        served: Any = None
        for family, watch, value in latest:
            if served is None or served.name != family.name:
                if served is not None:
                    yield served
                served = self._served_family(family)
            served.add_metric([watch], value)
        if served is not None:
            yield served

    def _served_family(self, family: _Family) -> Any:
        """An empty prometheus_client metric family for ``family``, labelled by watch."""
        if family.counter:
            return self._counter_family(
                family.name,
                f"rlpulse counter {family.metric!r} (cumulative): its latest value.",
                labels=["watch"],
            )
        return self._gauge_family(
            family.name,
            f"rlpulse gauge {family.metric!r}: its latest value.",
            labels=["watch"],
        )

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


def _prometheus_name(metric: str) -> str:
    """The name Prometheus' conventions give rlpulse metric ``metric``, before its prefix.

    The word ``s``, how rlpulse's names say seconds (:func:`rlpulse.naming.unit_of`),
    is spelled out, as Prometheus' base units want: in a metric in seconds
    and in those counting or summing its observations alike
    (``update_s_count`` is ``update_seconds_count``). Every character other
    than letters, digits and ``_`` becomes ``_``.

    >>> _prometheus_name("update_s_p99"), _prometheus_name("update_s_count")
    ('update_seconds_p99', 'update_seconds_count')
    >>> _prometheus_name("episode.return"), _prometheus_name("episode's_return")
    ('episode_return', 'episode_s_return')
    """
    words = [_SPELLED_OUT_UNITS.get(word, word) for word in metric.split("_")]
    return _INVALID_NAME_CHARACTERS.sub("_", "_".join(words))
