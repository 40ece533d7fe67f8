"""OTLP: every payload pushed to an OpenTelemetry receiver as OTLP/HTTP protobuf.

Needs the ``otlp`` extra (``pip install 'rlpulse[otlp]'``): the requests are
built with opentelemetry-proto's own message classes, imported when an
:class:`OTLPExporter` is created, never by ``import rlpulse``. The HTTP
request itself is one ``urllib`` POST per batch.
"""

from __future__ import annotations

import http.client
import math
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from rlpulse.naming import Kind, split
from rlpulse.sinks.base import BaseSink, Payload

__all__ = ["OTLPExporter"]

_CONTENT_TYPE = "application/x-protobuf"


class OTLPExporter(BaseSink):
    """A sink that pushes every payload to an OpenTelemetry receiver (a collector, a backend) over OTLP/HTTP.

    Each batch is one ``POST`` of an ``ExportMetricsServiceRequest`` to
    ``<endpoint>/v1/metrics``, done before the call returns. Naming mirrors
    :class:`~rlpulse.sinks.prometheus.PrometheusExporter`: the payload key
    ``"<watch>/<metric>"`` is the metric ``<prefix>.<metric>`` (the metric's
    own ``/`` kept) with the attribute ``watch="<watch>"``. The known
    cumulative counters (``frames``, ``write_count``, … and every
    ``*_count``) are monotonic cumulative sums, counted from when the
    exporter was created (or its first point, if earlier) or from a reset,
    where the counter went down; everything else is a gauge, so a metric's
    kind never changes. Each point carries its poll's timestamp. The
    resource has ``service.name``; the scope is ``rlpulse``.

    A receiver that refuses a batch (any answer but 2xx: a redirect too,
    which would turn the POST into a GET), or cannot be reached within
    ``timeout`` seconds, makes the call raise ``OSError`` naming it: a
    monitor counts and warns, and the next batch is tried as usual.

    Args:
        endpoint: the receiver's base URL, ``http://HOST:PORT`` (4318 is
            OTLP/HTTP's usual port) or ``https://...``.
        service_name: the resource's ``service.name`` (default ``"rlpulse"``).
        prefix: the metric names' first part (default ``"rlpulse"``; ``""``
            for none).
        headers: extra HTTP headers (an API key, say).
        timeout: seconds one request may take (default ``10``).

    >>> from rlpulse.sinks.otlp import OTLPExporter
    >>> exporter = OTLPExporter("http://127.0.0.1:4318")
    >>> exporter.url
    'http://127.0.0.1:4318/v1/metrics'
    >>> exporter.close()
    """

    def __init__(
        self,
        endpoint: str,
        *,
        service_name: str = "rlpulse",
        prefix: str = "rlpulse",
        headers: Mapping[str, str] | None = None,
        timeout: float = 10.0,
    ) -> None:
        parts = urllib.parse.urlsplit(endpoint) if isinstance(endpoint, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"OTLPExporter(endpoint={endpoint!r}) needs the receiver's base URL, "
                "as in 'http://127.0.0.1:4318'"
            )
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or not timeout > 0
        ):
            raise ValueError(
                f"OTLPExporter(timeout={timeout!r}) must be a positive number of seconds"
            )
        super().__init__()
        self._proto = _import_backend()
        self.url = endpoint.rstrip("/") + "/v1/metrics"
        self._destination = self.url
        self._service_name = service_name
        self._prefix = f"{prefix}." if prefix else ""
        self._headers = {**(headers or {}), "Content-Type": _CONTENT_TYPE}
        self._timeout = float(timeout)
        self._created_ns = time.time_ns()
        # Whether each metric name is exported as a counter (a sum).
        self._counters: dict[str, bool] = {}
        # Each counter series' start and last value, for resets.
        self._series: dict[str, tuple[int, float]] = {}
        self._opener = urllib.request.build_opener(_RefuseRedirects)

    def _write_batch(self, payloads: Sequence[Payload]) -> None:
        request = self._request(payloads)
        self._post(
            request.SerializeToString(),
            sum(len(payload.metrics) for payload in payloads),
        )

    def _request(self, payloads: Sequence[Payload]) -> Any:
        proto = self._proto
        metrics: dict[str, Any] = {}
        for payload in payloads:
            at = _nanoseconds(payload.wall_time)
            for key, value in payload.metrics.items():
                watch, metric = split(key)
                name = self._prefix + metric
                # A name keeps the kind it was first exported with: a
                # receiver refuses a metric whose type changes.
                counter = self._counters.setdefault(
                    name, payload.kind(key) is Kind.COUNTER
                )
                entry = metrics.get(name)
                if entry is None:
                    entry = metrics[name] = proto.Metric(name=name)
                    if counter:
                        entry.sum.aggregation_temporality = proto.CUMULATIVE
                        entry.sum.is_monotonic = True
                is_sum = entry.HasField("sum")
                point = (entry.sum if is_sum else entry.gauge).data_points.add()
                point.time_unix_nano = at
                point.as_double = float(value)
                if is_sum:
                    point.start_time_unix_nano = self._start_of(key, float(value), at)
                attribute = point.attributes.add()
                attribute.key = "watch"
                attribute.value.string_value = watch
        request = proto.ExportMetricsServiceRequest()
        resource_metrics = request.resource_metrics.add()
        service = resource_metrics.resource.attributes.add()
        service.key = "service.name"
        service.value.string_value = self._service_name
        scope_metrics = resource_metrics.scope_metrics.add()
        scope_metrics.scope.name = "rlpulse"
        scope_metrics.metrics.extend(metrics.values())
        return request

    def _start_of(self, key: str, value: float, at: int) -> int:
        # A counter's series counts from the exporter's creation, or from
        # where it went down (a reset).
        start, last = self._series.get(key, (min(self._created_ns, at), value))
        if value < last:
            start = at
        self._series[key] = (start, value)
        return start

    def _post(self, body: bytes, points: int) -> None:
        request = urllib.request.Request(
            self.url, data=body, headers=self._headers, method="POST"
        )
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                response.read()
        except urllib.error.HTTPError as error:
            detail = error.read(300).decode("utf-8", "replace").strip()
            raise OSError(
                f"the OTLP receiver at {self.url} refused {points} "
                f"point{'' if points == 1 else 's'}: HTTP "
                f"{error.code} {error.reason}{': ' + detail if detail else ''}"
            ) from error
        except (
            urllib.error.URLError,
            http.client.HTTPException,
            TimeoutError,
            ConnectionError,
        ) as error:
            reason = " ".join(str(getattr(error, "reason", error)).split())
            raise OSError(
                f"cannot reach the OTLP receiver at {self.url}: {reason}; is it "
                "running, and is the endpoint right?"
            ) from error

    def __repr__(self) -> str:
        return f"OTLPExporter({self.url.removesuffix('/v1/metrics')!r})"


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """Answers a redirect with the error it is: followed, a POST would become a GET without its body."""

    def redirect_request(self, *args: Any) -> None:
        return None


def _nanoseconds(wall_time: float) -> int:
    """``wall_time`` in whole nanoseconds, its seconds kept exact (``int(t * 1e9)`` rounds them by 256 ns).

    >>> _nanoseconds(1700000000.25)
    1700000000250000000
    """
    seconds = math.floor(wall_time)
    return seconds * 1_000_000_000 + round((wall_time - seconds) * 1e9)


class _Proto:
    """opentelemetry-proto's classes this exporter builds requests with."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
        from opentelemetry.proto.metrics.v1 import metrics_pb2

        self.ExportMetricsServiceRequest = (
            metrics_service_pb2.ExportMetricsServiceRequest
        )
        self.Metric = metrics_pb2.Metric
        self.CUMULATIVE = metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE


def _import_backend() -> _Proto:
    try:
        return _Proto()
    except ImportError as error:
        raise ImportError(
            "OTLPExporter needs opentelemetry-proto, which is not installed: "
            "pip install 'rlpulse[otlp]'"
        ) from error
