"""OTLP: every payload pushed to an OpenTelemetry receiver as OTLP/HTTP protobuf.

Needs the ``otlp`` extra (``pip install 'rlpulse[otlp]'``): the requests are
built with opentelemetry-proto's own message classes, imported when an
:class:`OTLPExporter` is created, never by ``import rlpulse``. The HTTP
request itself is a ``urllib`` POST per batch, made as OpenTelemetry's own
OTLP/HTTP exporters make theirs: configured by the same ``OTEL_EXPORTER_OTLP_*``
variables, retried on the same answers, abandoned when closing takes too
long.
"""

from __future__ import annotations

import email.utils
import gzip
import http.client
import math
import os
import re
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from rlpulse.distributions import SCALE, Histogram
from rlpulse.naming import Kind, in_ascii, labelled, split, statistic_of, unit_of
from rlpulse.runtime.deadline import check_timeout
from rlpulse.runtime.retry import TransientSinkError, retry_delay
from rlpulse.runtime.threads import MonitorThread
from rlpulse.sinks.base import BaseSink, Payload

__all__ = ["OTLPExporter"]

_CONTENT_TYPE = "application/x-protobuf"
_SIGNAL_PATH = "/v1/metrics"
_DEFAULT_ENDPOINT = "http://localhost:4318"
_DEFAULT_TIMEOUT_S = 10.0
_DEFAULT_CLOSE_TIMEOUT_S = 3.0
_FEW_MILLISECONDS_S = 0.1
"""Below this, a timeout from the environment reads as seconds written as milliseconds: warned about."""
_ENVIRONMENT_PREFIX = "OTEL_EXPORTER_OTLP_"
# The answers OTLP/HTTP's specification says to retry; every other error
# answer (a 400 above all) is final.
_RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})
# No such path, or no POST there: the endpoint is no OTLP receiver's.
_NO_RECEIVER_STATUSES = frozenset({404, 405, 501})
# OpenTelemetry's instrument name syntax.
_INSTRUMENT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_./-]{0,254}")
_NOT_IN_A_NAME = re.compile(r"[^A-Za-z0-9_./-]")
_MAX_NAME_LENGTH = 255
# What a name that would not start with a letter starts with instead.
_LETTER_FIRST = "metric_"


class OTLPExporter(BaseSink):
    """A sink that pushes every payload to an OpenTelemetry receiver (a collector, a backend) over OTLP/HTTP.

    Each batch is one ``POST`` of an ``ExportMetricsServiceRequest``, done
    before the call returns. Naming mirrors
    :class:`~rlpulse.sinks.prometheus.PrometheusExporter`: the payload key
    ``"<watch>/<metric>"`` is the metric ``<prefix>.<metric>`` (the metric's
    own ``/`` kept) with the attribute ``watch="<watch>"``, and an instance
    segment of the metric (``<word>_<number>`` before its key,
    :func:`rlpulse.naming.labelled`) is an attribute too: a
    :class:`~rlpulse.SharedCounters` worker's ``workers/worker_0/frames`` is
    ``rlpulse.frames`` with ``watch="workers"``, ``worker="0"``, a child
    process's ``system/child_4242/cpu_percent`` ``rlpulse.cpu_percent``
    with ``watch="system"``, ``pid="4242"``; a character an
    OpenTelemetry instrument name cannot hold is spelled in ASCII
    (``überlauf`` as ``uberlauf``) or becomes ``_`` (``episode return`` is
    ``episode_return``), and a metric whose name would then be another's
    gets the first free ``_2``, ``_3``, ... suffix. Counters (``frames``, a
    watch's rated keys, a tally's counts) are monotonic cumulative sums,
    counted from when the exporter was created (or its first point, if
    earlier) or from a reset, where the counter went down; a sum of
    observations (a tally's ``<key>_sum``) is a cumulative sum that is not
    monotonic, which a negative observation makes fall; each distribution
    a watch observed (``payload.distributions``) is an exponential histogram
    of the observations of each logged interval (delta temporality);
    everything else is a gauge. A metric keeps the kind it was first
    exported with. Each point carries its poll's timestamp. The resource has
    ``service.name``; the scope is ``rlpulse``.

    Configured as OpenTelemetry's OTLP exporters are: what is not given here
    comes from ``OTEL_EXPORTER_OTLP_METRICS_*`` or ``OTEL_EXPORTER_OTLP_*``
    (``_ENDPOINT``, ``_HEADERS``, ``_TIMEOUT`` in milliseconds,
    ``_COMPRESSION``, and ``_PROTOCOL``, which must be ``http/protobuf``
    where the endpoint comes from them); see docs/sinks/otlp.md.

    A retryable answer (429, 502, 503, 504) or a receiver that cannot be
    reached is tried again after an exponential back-off with jitter, or
    after the receiver's ``Retry-After``, for as long as ``timeout`` allows
    from the batch's first try; any other error answer is final. A batch
    not delivered makes the call raise ``OSError`` naming the receiver and
    its answer: a :class:`~rlpulse.TransientSinkError` when trying later
    may deliver it (a retryable answer, or none), which a monitor's queue
    keeps at its head and sends again, with what queued up behind it, once
    the receiver takes it; a plain ``OSError`` for a final answer (a 400),
    whose batch a monitor counts and does not send again.
    :meth:`close` waits for a request in flight at most ``close_timeout``
    seconds, then abandons it (that call raises ``OSError``), and retries
    nothing once closing.

    Args:
        endpoint: the receiver's base URL, ``http://HOST:PORT`` (4318 is
            OTLP/HTTP's usual port) or ``https://...``, to which
            ``/v1/metrics`` is appended unless it ends with it already.
            ``None``: ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`` (used as
            given), else ``OTEL_EXPORTER_OTLP_ENDPOINT`` (a base URL), else
            ``http://localhost:4318``.
        service_name: the resource's ``service.name``; ``None``:
            ``OTEL_SERVICE_NAME``, else the ``service.name`` of
            ``OTEL_RESOURCE_ATTRIBUTES``, else ``"rlpulse"``. The resource
            also holds the other attributes of ``OTEL_RESOURCE_ATTRIBUTES``
            and, unless that gives them, this machine's ``host.name`` and a
            ``service.instance.id`` of this exporter's own: the series of
            two processes never mix (:func:`resource_attributes`).
        prefix: the metric names' first part (default ``"rlpulse"``; ``""``
            for none).
        headers: HTTP headers to send (an API key, say); ``None``: those of
            ``OTEL_EXPORTER_OTLP_METRICS_HEADERS`` or
            ``OTEL_EXPORTER_OTLP_HEADERS``.
        timeout: seconds one batch may take, its retries included;
            ``None``: ``OTEL_EXPORTER_OTLP_METRICS_TIMEOUT`` or
            ``OTEL_EXPORTER_OTLP_TIMEOUT`` (milliseconds), else 10 s.
        compression: ``"gzip"`` or ``"none"``; ``None``:
            ``OTEL_EXPORTER_OTLP_METRICS_COMPRESSION`` or
            ``OTEL_EXPORTER_OTLP_COMPRESSION``, else none.
        close_timeout: seconds :meth:`close` waits for a request in flight
            (default 3).

    >>> from rlpulse.sinks.otlp import OTLPExporter
    >>> exporter = OTLPExporter("http://127.0.0.1:4318")
    >>> exporter.url, exporter.timeout
    ('http://127.0.0.1:4318/v1/metrics', 10.0)
    >>> exporter.close()
    """

    def __init__(
        self,
        endpoint: str | None = None,
        *,
        service_name: str | None = None,
        prefix: str = "rlpulse",
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        compression: str | None = None,
        close_timeout: float = _DEFAULT_CLOSE_TIMEOUT_S,
    ) -> None:
        settings = _settings(endpoint, headers, timeout, compression, os.environ)
        check_timeout("close_timeout", close_timeout, optional=False)
        if prefix and not _INSTRUMENT_NAME.fullmatch(prefix):
            raise ValueError(
                f"OTLPExporter(prefix={prefix!r}) is no valid start of an "
                "OpenTelemetry instrument name: use an ASCII letter, then letters, "
                "digits, '_', '.', '-' or '/'"
            )
        super().__init__()
        self._proto = _import_backend()
        self.url = settings.url
        """Where each batch is posted."""
        self.timeout = settings.timeout
        """Seconds one batch may take, its retries included."""
        self.close_timeout = float(close_timeout)
        """Seconds :meth:`close` waits for a request in flight."""
        self._destination = self.url
        self.resource = resource_attributes(service_name, os.environ)
        """The attributes of the resource every request names (``service.name`` and the rest)."""
        self._headers = {**settings.headers, "Content-Type": _CONTENT_TYPE}
        self._gzip = settings.compression == "gzip"
        if self._gzip:
            self._headers["Content-Encoding"] = "gzip"
        self._created_ns = time.time_ns()
        self._instruments = _Instruments(f"{prefix}." if prefix else "")
        # Each counter series' start, and its last value and time delivered.
        self._counters: dict[_Series, _Counted] = {}
        # Each histogram series' latest point: where its next interval starts.
        self._interval_ends: dict[_Series, int] = {}
        self._opener = urllib.request.build_opener(_RefuseRedirects)
        # Wakes a batch waiting for its request or its next try when
        # closing begins; _close_by is the monotonic time closing stops
        # waiting for a request in flight (inf until close()).
        self._wakeup = threading.Condition()
        self._close_by = math.inf

    def _write_batch(self, payloads: Sequence[Payload]) -> None:
        request, points, counted, interval_ends = self._request(payloads)
        if points:
            self._post(request.SerializeToString(), points)
        # Only once delivered: a batch sent again (with what queued behind
        # it) starts from the same counters and covers the same intervals.
        self._counters.update(counted)
        self._interval_ends.update(interval_ends)

    def _request(
        self, payloads: Sequence[Payload]
    ) -> tuple[Any, int, dict[_Series, _Counted], dict[_Series, int]]:
        # The request of ``payloads``, how many points it holds, and, once
        # it is delivered, each counter series' state and where each
        # histogram series' next interval starts.
        proto = self._proto
        metrics: dict[str, Any] = {}
        points = 0
        counted: dict[_Series, _Counted] = {}
        interval_ends: dict[_Series, int] = {}

        def data_of(instrument: _Instrument) -> Any:
            entry = metrics.get(instrument.name)
            if entry is None:
                entry = metrics[instrument.name] = proto.Metric(
                    name=instrument.name, unit=instrument.unit
                )
                data = getattr(entry, instrument.data)
                if instrument.data == "sum":
                    data.aggregation_temporality = proto.CUMULATIVE
                    data.is_monotonic = instrument.monotonic
                elif instrument.data == "exponential_histogram":
                    data.aggregation_temporality = proto.DELTA
            return getattr(entry, instrument.data)

        for payload in payloads:
            at = _nanoseconds(payload.wall_time)
            for key, value in payload.metrics.items():
                watch, path = split(key)
                metric, labels = labelled(path)
                instrument = self._instruments.scalar(
                    metric, payload.kind(key) is Kind.COUNTER
                )
                point = data_of(instrument).data_points.add()
                point.time_unix_nano = at
                point.as_double = float(value)
                if instrument.data == "sum":
                    point.start_time_unix_nano = self._start_of(
                        _Series(instrument.name, watch, labels),
                        float(value),
                        at,
                        counted,
                        instrument.monotonic,
                    )
                _set_attributes(point, watch, labels)
                points += 1
            for key, histogram in payload.distributions.items():
                watch, path = split(key)
                metric, labels = labelled(path)
                instrument = self._instruments.histogram(metric)
                point = data_of(instrument).data_points.add()
                _fill_histogram_point(point, histogram)
                series = _Series(instrument.name, watch, labels)
                start = interval_ends.get(series) or self._interval_ends.get(
                    series, self._created_ns
                )
                point.start_time_unix_nano = min(start, at)
                point.time_unix_nano = at
                interval_ends[series] = at
                _set_attributes(point, watch, labels)
                points += 1
        request = proto.ExportMetricsServiceRequest()
        resource_metrics = request.resource_metrics.add()
        for key, text in self.resource.items():
            attribute = resource_metrics.resource.attributes.add()
            attribute.key = key
            attribute.value.string_value = text
        scope_metrics = resource_metrics.scope_metrics.add()
        scope_metrics.scope.name = "rlpulse"
        scope_metrics.metrics.extend(metrics.values())
        return request, points, counted, interval_ends

    def _start_of(
        self,
        series: _Series,
        value: float,
        at: int,
        counted: dict[_Series, _Counted],
        monotonic: bool = True,
    ) -> int:
        # Where a counter's series counts from at its point ``value`` at
        # ``at``, after its points before in this batch (``counted``, which
        # takes this one) or as delivered: the exporter's creation, or the
        # time of the last point before a monotonic one went down (a reset).
        previous = counted.get(series) or self._counters.get(series)
        if previous is None:
            start = min(self._created_ns, at)
        elif monotonic and value < previous.last:
            start = previous.last_at
        else:
            start = previous.start
        counted[series] = _Counted(start, value, at)
        return start

    def _post(self, body: bytes, points: int) -> None:
        # Tries until delivered, refused for good, out of time or closing.
        if self._gzip:
            body = gzip.compress(body)
        started = time.monotonic()
        deadline = started + self.timeout
        counted = f"{points} point{'' if points == 1 else 's'}"
        tries = 0
        while True:
            tries += 1
            answer = self._try(body, deadline, counted)
            if answer.delivered:
                return
            seconds = time.monotonic() - started
            spent = f"{tries} tr{'y' if tries == 1 else 'ies'} in {seconds:.1f} s"
            if not answer.retryable:
                raise OSError(
                    f"{answer.failure(self.url, counted)} ({spent}; not retried)"
                )
            wait = retry_delay(tries, answer.retry_after)
            if time.monotonic() + wait > deadline:
                asked = "" if wait != answer.retry_after else ", as the receiver asked"
                raise TransientSinkError(
                    f"{answer.failure(self.url, counted)}; gave up after {spent}: "
                    f"the next try, {wait:.1f} s later{asked}, would pass the "
                    f"exporter's timeout ({self.timeout:g} s)",
                    retry_after=answer.retry_after,
                )
            if self._wait(time.monotonic() + wait, self._closing):
                raise OSError(
                    f"{answer.failure(self.url, counted)}; not retried: the "
                    "exporter is closing"
                )

    def _try(self, body: bytes, deadline: float, counted: str) -> _Answer:
        # One POST, on a thread of its own: waited for until the deadline,
        # or until closing has waited close_timeout for it.
        request = urllib.request.Request(
            self.url, data=body, headers=self._headers, method="POST"
        )
        attempt = _Attempt(self._opener, request, deadline - time.monotonic())
        attempt.start(self._wakeup)
        if self._wait(deadline, attempt.finished):
            assert attempt.answer is not None
            return attempt.answer
        if self._closing():
            raise OSError(
                f"abandoned the request in flight to the OTLP receiver at {self.url} "
                f"({counted} not delivered): no answer within close_timeout "
                f"({self.close_timeout:g} s) of closing"
            )
        return _Answer(
            delivered=False,
            retryable=True,
            problem=f"none within the exporter's timeout ({self.timeout:g} s)",
            silent=True,
        )

    def _closing(self) -> bool:
        return self._close_by < math.inf

    def _wait(self, until: float, done: Callable[[], bool]) -> bool:
        # Wait until done() (returned) or the monotonic time ``until``, or,
        # once closing, its close_by, whichever comes first.
        with self._wakeup:
            while not done():
                left = min(until, self._close_by) - time.monotonic()
                if left <= 0:
                    return False
                self._wakeup.wait(left)
            return True

    def close(self) -> None:
        """Close the exporter: a request in flight is waited for at most ``close_timeout`` seconds, then abandoned.

        The call that made an abandoned request raises ``OSError`` saying
        so; a batch waiting to be retried is not retried. Closing again
        does nothing; logging afterwards raises ``RuntimeError``.

        >>> from rlpulse.sinks.otlp import OTLPExporter
        >>> exporter = OTLPExporter("http://127.0.0.1:4318", close_timeout=0.5)
        >>> exporter.close()
        >>> exporter.close()
        """
        with self._wakeup:
            if not self._closing():
                self._close_by = time.monotonic() + self.close_timeout
            self._wakeup.notify_all()
        super().close()

    def __repr__(self) -> str:
        return f"OTLPExporter({self.url.removesuffix(_SIGNAL_PATH)!r})"


class _Answer(NamedTuple):
    """What one try got: delivered, or why not, and whether trying again may help."""

    delivered: bool
    retryable: bool
    problem: str = ""
    """The receiver's error answer, or why none came."""
    refused: bool = False
    """Whether the receiver answered (with an error)."""
    retry_after: float | None = None
    """The seconds the receiver asked to wait before trying again."""
    silent: bool = False
    """Whether the request went unanswered within its time (a receiver may have taken it and hung)."""

    @classmethod
    def unreachable(cls, problem: str, *, retryable: bool = True) -> _Answer:
        return cls(False, retryable, problem)

    def failure(self, url: str, counted: str) -> str:
        """What went wrong, for the error message."""
        if self.refused:
            return f"the OTLP receiver at {url} refused {counted}: {self.problem}"
        if self.silent:
            return (
                f"no answer from the OTLP receiver at {url} ({counted} not "
                f"delivered): {self.problem}; is it overloaded or hung?"
            )
        return (
            f"cannot reach the OTLP receiver at {url} ({counted} not delivered): "
            f"{self.problem}; is it running, and is the endpoint right?"
        )


class _Attempt:
    """One POST on a :class:`~rlpulse.runtime.threads.MonitorThread`, so that its caller can stop waiting for it."""

    def __init__(
        self,
        opener: urllib.request.OpenerDirector,
        request: urllib.request.Request,
        timeout: float,
    ) -> None:
        self._opener = opener
        self._request = request
        self._timeout = max(timeout, 0.001)
        self.answer: _Answer | None = None

    def finished(self) -> bool:
        return self.answer is not None

    def start(self, wakeup: threading.Condition) -> None:
        def post() -> None:
            answer = self._post()
            with wakeup:
                self.answer = answer
                wakeup.notify_all()

        MonitorThread("rlpulse-otlp-post", post).start()

    def _post(self) -> _Answer:
        try:
            with self._opener.open(self._request, timeout=self._timeout) as response:
                response.read()
            return _Answer(delivered=True, retryable=False)
        except urllib.error.HTTPError as error:
            # One line, whatever the answer's body (a web server's HTML page).
            detail = " ".join(error.read(300).decode("utf-8", "replace").split())
            problem = f"HTTP {error.code} {error.reason}" + (
                f": {detail}" if detail else ""
            )
            if error.code in _NO_RECEIVER_STATUSES:
                problem += (
                    "; is the endpoint an OTLP/HTTP receiver's (port 4318 and "
                    "path /v1/metrics by convention)?"
                )
            return _Answer(
                delivered=False,
                retryable=error.code in _RETRYABLE_STATUSES,
                problem=problem,
                refused=True,
                retry_after=_retry_after(error.headers.get("Retry-After")),
            )
        except TimeoutError as error:  # connected or not, no answer in time
            return _Answer(
                delivered=False,
                retryable=True,
                problem=f"none within {self._timeout:.1f} s ({error})",
                silent=True,
            )
        except (urllib.error.URLError, http.client.HTTPException, OSError) as error:
            reason = getattr(error, "reason", error)
            # A certificate refused stays refused; the network comes back.
            retryable = not isinstance(reason, ssl.SSLError)
        except Exception as error:  # a header urllib refuses, say: no retry mends it
            reason, retryable = error, False
        return _Answer.unreachable(
            " ".join(str(reason).split()) or type(reason).__name__,
            retryable=retryable,
        )


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """Answers a redirect with the error it is: followed, a POST would become a GET without its body."""

    def redirect_request(self, *args: Any) -> None:
        return None


def _retry_after(value: str | None) -> float | None:
    """The seconds a ``Retry-After`` header asks to wait: a number of seconds or an HTTP date; ``None`` for none.

    >>> _retry_after("2"), _retry_after(None), _retry_after("soon")
    (2.0, None, None)
    >>> _retry_after("Thu, 01 Jan 1970 00:00:00 GMT")  # passed already
    0.0
    """
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class _Series(NamedTuple):
    """One series of points: its instrument's name, its watch, the attributes of the instance it is of (none for the watch's own)."""

    instrument: str
    watch: str
    labels: tuple[tuple[str, str], ...]


class _Counted(NamedTuple):
    """A counter series as exported: where it counts from, and its last value and time."""

    start: int
    last: float
    last_at: int


class _Instrument(NamedTuple):
    """How one rlpulse metric is exported: its instrument's name, which of a Metric's data fields holds its points, and for a sum whether it only goes up."""

    name: str
    data: str  # "sum", "gauge" or "exponential_histogram"
    unit: str = ""  # UCUM, from the metric's name; "" where it says none
    # A sum of observations (a tally's "<key>_sum") falls with a negative
    # one: an up-down sum, whose fall is no reset.
    monotonic: bool = True


class _Instruments:
    """Each metric's instrument: a valid OpenTelemetry name of its own and a type, both kept for good.

    A receiver refuses a metric whose type changes, and two metrics must not
    share a name: the first to take a name keeps it, a later one gets the
    first free ``_2``, ``_3``, ... suffix. A distribution is an instrument
    apart from a number of the same name.

    >>> instruments = _Instruments("rlpulse.")
    >>> instruments.scalar("episode return", counter=False)
    _Instrument(name='rlpulse.episode_return', data='gauge', unit='', monotonic=True)
    >>> instruments.scalar("episode_return", counter=True).name
    'rlpulse.episode_return_2'
    >>> instruments.scalar("episode return", counter=True).data  # as first exported
    'gauge'
    >>> instruments.histogram("episode return")
    _Instrument(name='rlpulse.episode_return_3', data='exponential_histogram', unit='', monotonic=True)
    >>> instruments.histogram("update_s").unit
    's'
    """

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._of: dict[tuple[str, bool], _Instrument] = {}
        self._taken: set[str] = set()

    def scalar(self, metric: str, counter: bool) -> _Instrument:
        """The instrument of number ``metric``: a sum when first seen as a ``counter`` (a sum of observations one that may fall), else a gauge.

        >>> instruments = _Instruments("rlpulse.")
        >>> instruments.scalar("frames", True).monotonic, instruments.scalar("return_sum", True).monotonic
        (True, False)
        """
        known = self._of.get((metric, False))
        if known is not None:
            return known
        instrument = self._new(metric, False, "sum" if counter else "gauge")
        if counter and statistic_of(metric)[1] == "sum":
            instrument = self._of[metric, False] = instrument._replace(monotonic=False)
        return instrument

    def histogram(self, metric: str) -> _Instrument:
        """The instrument of distribution ``metric``: an exponential histogram."""
        known = self._of.get((metric, True))
        if known is not None:
            return known
        return self._new(metric, True, "exponential_histogram")

    def _new(self, metric: str, distribution: bool, data: str) -> _Instrument:
        base = _instrument_name(self._prefix + metric)
        name, suffix = base, 2
        while name in self._taken:
            tail = f"_{suffix}"
            name = base[: _MAX_NAME_LENGTH - len(tail)] + tail
            suffix += 1
        self._taken.add(name)
        unit = unit_of(metric)
        instrument = self._of[metric, distribution] = _Instrument(
            name, data, "" if unit is None else unit.ucum
        )
        return instrument


def _instrument_name(name: str) -> str:
    """``name`` made a valid OpenTelemetry instrument name: ASCII, a letter first, at most 255 characters.

    A character with an ASCII spelling keeps it (``ü`` is ``u``,
    :func:`rlpulse.naming.in_ascii`); any other character outside letters,
    digits and ``_ . - /`` becomes ``_``.

    >>> _instrument_name("rlpulse.episode return"), _instrument_name("überlauf")
    ('rlpulse.episode_return', 'uberlauf')
    >>> _instrument_name("损失/p99"), _instrument_name("0_loss")
    ('metric___/p99', 'metric_0_loss')
    """
    valid = _NOT_IN_A_NAME.sub("_", in_ascii(name))
    if not valid[:1].isascii() or not valid[:1].isalpha():
        valid = _LETTER_FIRST + valid
    return valid[:_MAX_NAME_LENGTH]


def _set_attributes(
    point: Any, watch: str, labels: tuple[tuple[str, str], ...]
) -> None:
    """Give ``point`` its attributes: its watch, then the instance it is of, if any."""
    for key, value in (("watch", watch), *labels):
        attribute = point.attributes.add()
        attribute.key = key
        attribute.value.string_value = value


def _fill_histogram_point(point: Any, histogram: Histogram) -> None:
    """Set an ``ExponentialHistogramDataPoint``'s counts from ``histogram``: its buckets are OpenTelemetry's at scale 6 already."""
    point.scale = SCALE
    point.count = histogram.count
    point.sum = histogram.sum
    point.zero_count = histogram.zero_count
    for side, negative in ((point.positive, False), (point.negative, True)):
        buckets = histogram.buckets(negative=negative)
        if buckets.counts:
            side.offset = buckets.offset
            side.bucket_counts.extend(buckets.counts)
    if histogram.min is not None:
        point.min = histogram.min
    if histogram.max is not None:
        point.max = histogram.max


def _nanoseconds(wall_time: float) -> int:
    """``wall_time`` in whole nanoseconds, its seconds kept exact (``int(t * 1e9)`` rounds them by 256 ns).

    >>> _nanoseconds(1700000000.25)
    1700000000250000000
    """
    seconds = math.floor(wall_time)
    return seconds * 1_000_000_000 + round((wall_time - seconds) * 1e9)


class _Settings(NamedTuple):
    """Where and how batches are posted: the constructor's arguments, else OpenTelemetry's variables, else defaults."""

    url: str
    headers: dict[str, str]
    timeout: float
    compression: str


def _settings(
    endpoint: str | None,
    headers: Mapping[str, str] | None,
    timeout: float | None,
    compression: str | None,
    environ: Mapping[str, str],
) -> _Settings:
    """The exporter's settings: each argument given wins; what is ``None`` comes from ``environ`` as OpenTelemetry reads it.

    ``OTEL_EXPORTER_OTLP_METRICS_<X>`` comes before ``OTEL_EXPORTER_OTLP_<X>``;
    an empty variable is unset. The metrics endpoint is a full URL, used as
    given; the other is a base URL. Where the endpoint comes from
    ``environ``, a ``PROTOCOL`` other than ``http/protobuf`` is refused.

    >>> environ = {
    ...     "OTEL_EXPORTER_OTLP_ENDPOINT": "https://otlp.example.com/otlp",
    ...     "OTEL_EXPORTER_OTLP_HEADERS": "api-key=abc%3D%3D, team=rl",
    ...     "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": "2500",
    ...     "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
    ... }
    >>> _settings(None, None, None, None, environ)
    _Settings(url='https://otlp.example.com/otlp/v1/metrics', headers={'api-key': 'abc==', 'team': 'rl'}, timeout=2.5, compression='gzip')
    >>> _settings("http://127.0.0.1:4318/v1/metrics", {}, 1, "none", environ)
    _Settings(url='http://127.0.0.1:4318/v1/metrics', headers={}, timeout=1.0, compression='none')
    """

    def variable(setting: str) -> tuple[str, str] | None:
        for name in (
            f"{_ENVIRONMENT_PREFIX}METRICS_{setting}",
            f"{_ENVIRONMENT_PREFIX}{setting}",
        ):
            value = environ.get(name, "").strip()
            if value:
                return name, value
        return None

    if endpoint is not None:
        url = _signal_url(
            _checked_url(endpoint, f"OTLPExporter(endpoint={endpoint!r})")
        )
    else:
        # Where the environment says where to post, it says how as well:
        # an endpoint for gRPC or JSON would refuse every request.
        protocol = variable("PROTOCOL")
        if protocol is not None and protocol[1] != "http/protobuf":
            name, value = protocol
            raise ValueError(
                f"{name}={value!r}: OTLPExporter sends OTLP over HTTP as protobuf "
                "only ('http/protobuf', port 4318 by default); give it an "
                "endpoint for that (OTLPExporter(endpoint=...) or "
                "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT with "
                "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL=http/protobuf)"
            )
        found = variable("ENDPOINT")
        if found is None:
            url = _signal_url(_DEFAULT_ENDPOINT)
        else:
            name, value = found
            url = _checked_url(value, f"{name}={value!r}")
            if not name.endswith("_METRICS_ENDPOINT"):
                url = _signal_url(url)

    if headers is None:
        found = variable("HEADERS")
        headers = {} if found is None else _parsed_headers(*found)

    if timeout is None:
        found = variable("TIMEOUT")
        if found is None:
            timeout = _DEFAULT_TIMEOUT_S
        else:
            name, value = found
            try:
                timeout = float(value) / 1000
            except ValueError:
                timeout = math.nan
            if not (timeout > 0 and math.isfinite(timeout)):
                raise ValueError(
                    f"{name}={value!r} must be a positive number of milliseconds "
                    "(OpenTelemetry's unit for it: 10000 is 10 s)"
                )
            if timeout < _FEW_MILLISECONDS_S:
                # Seconds written where milliseconds are read (some
                # OpenTelemetry Python releases read seconds): every batch
                # would fail for want of time.
                warnings.warn(
                    f"{name}={value!r} gives each batch {value} ms, its retries "
                    "included: OpenTelemetry counts it in milliseconds (10000 is "
                    f"10 s); for {value} s write {float(value) * 1000:g}",
                    UserWarning,
                    stacklevel=3,
                )
    else:
        check_timeout("OTLPExporter(timeout=...)", timeout, optional=False)

    if compression is None:
        found = variable("COMPRESSION")
        name, compression = found or ("", "none")
        where = f"{name}={compression!r}"
    else:
        where = f"OTLPExporter(compression={compression!r})"
    if compression.strip().lower() not in ("gzip", "none"):
        raise ValueError(
            f"{where} is no compression the exporter knows: use 'gzip' or 'none'"
        )
    return _Settings(url, dict(headers), float(timeout), compression.strip().lower())


def _checked_url(url: str, given: str) -> str:
    parts = urllib.parse.urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"{given} needs the receiver's base URL, as in 'http://127.0.0.1:4318' "
            "(http or https, and a host)"
        )
    return url


def _signal_url(base: str) -> str:
    """The metrics URL of receiver URL ``base``: ``/v1/metrics`` appended to its path, unless it ends with it already.

    >>> _signal_url("http://collector:4318"), _signal_url("https://example.com/otlp/")
    ('http://collector:4318/v1/metrics', 'https://example.com/otlp/v1/metrics')
    >>> _signal_url("http://collector:4318/v1/metrics")
    'http://collector:4318/v1/metrics'
    """
    parts = urllib.parse.urlsplit(base)
    path = parts.path.rstrip("/")
    if not path.endswith(_SIGNAL_PATH):
        path += _SIGNAL_PATH
    return urllib.parse.urlunsplit(parts._replace(path=path))


def resource_attributes(
    service_name: str | None, environ: Mapping[str, str]
) -> dict[str, str]:
    """The resource's attributes, as OpenTelemetry's SDK makes them from ``environ``, with what tells this exporter's series from another's.

    ``OTEL_RESOURCE_ATTRIBUTES`` (``key=value`` pairs, comma-separated,
    URL-encoded) first; then ``service.name``: ``service_name`` when given,
    else ``OTEL_SERVICE_NAME``, else the variable's, else ``"rlpulse"``;
    then, unless the variable gives them, ``host.name`` (this machine's)
    and ``service.instance.id`` (new for each exporter: two processes on one
    machine, or one exporter made again, are two instances, whose
    cumulative counters a backend keeps apart).

    >>> environ = {"OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod,host.name=node-7",
    ...            "OTEL_SERVICE_NAME": "learner"}
    >>> attributes = resource_attributes(None, environ)
    >>> {key: attributes[key] for key in ("service.name", "deployment.environment", "host.name")}
    {'service.name': 'learner', 'deployment.environment': 'prod', 'host.name': 'node-7'}
    >>> len(attributes["service.instance.id"])
    36
    >>> resource_attributes("actor", environ)["service.name"], resource_attributes(None, {})["service.name"]
    ('actor', 'rlpulse')
    """
    found = environ.get("OTEL_RESOURCE_ATTRIBUTES", "").strip()
    attributes = _parsed_headers("OTEL_RESOURCE_ATTRIBUTES", found) if found else {}
    name = service_name or environ.get("OTEL_SERVICE_NAME", "").strip()
    attributes["service.name"] = name or attributes.get("service.name") or "rlpulse"
    attributes.setdefault("host.name", socket.gethostname())
    attributes.setdefault("service.instance.id", str(uuid.uuid4()))
    return attributes


def _parsed_headers(name: str, value: str) -> dict[str, str]:
    """The headers of variable ``name``'s ``value``: ``key=value`` pairs, comma-separated, each part URL-decoded.

    >>> _parsed_headers("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Basic%20YWJj, x-team = rl%20")
    {'Authorization': 'Basic YWJj', 'x-team': 'rl'}
    >>> _parsed_headers("OTEL_EXPORTER_OTLP_HEADERS", "token")
    Traceback (most recent call last):
    ...
    ValueError: OTEL_EXPORTER_OTLP_HEADERS='token' holds 'token', no key=value pair: write it as key1=value1,key2=value2 (values URL-encoded)
    """
    headers: dict[str, str] = {}
    for pair in value.split(","):
        if not pair.strip():
            continue
        key, equals, header_value = pair.partition("=")
        # Decoded, then stripped, as OpenTelemetry's exporters read it: an
        # encoded space at either end goes too.
        key = urllib.parse.unquote(key).strip()
        if not equals or not key:
            raise ValueError(
                f"{name}={value!r} holds {pair.strip()!r}, no key=value pair: write it "
                "as key1=value1,key2=value2 (values URL-encoded)"
            )
        headers[key] = urllib.parse.unquote(header_value).strip()
    return headers


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
        self.DELTA = metrics_pb2.AGGREGATION_TEMPORALITY_DELTA


def _import_backend() -> _Proto:
    try:
        return _Proto()
    except ImportError as error:
        raise ImportError(
            "OTLPExporter needs opentelemetry-proto, which is not installed: "
            "pip install 'rlpulse[otlp]'"
        ) from error
