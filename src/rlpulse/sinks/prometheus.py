"""Prometheus: the latest value of every metric, served for scraping as a counter, a gauge or a histogram, by its kind.

Needs the ``prometheus`` extra (``pip install 'rlpulse[prometheus]'``);
prometheus_client is imported when a :class:`PrometheusExporter` is created,
never by ``import rlpulse``.
"""

from __future__ import annotations

import errno
import math
import os
import re
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from rlpulse.distributions import SCALE, Histogram
from rlpulse.naming import (
    COUNT_SUFFIX,
    SUM_SUFFIX,
    Kind,
    in_ascii,
    labelled,
    spelled_out,
    split,
)
from rlpulse.runtime.events import Event, EventKind
from rlpulse.sinks.base import BaseSink, Payload

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

__all__ = ["BOUNDS_PER_OCTAVE", "PrometheusExporter", "classic_buckets"]

BOUNDS_PER_OCTAVE = 8
"""How many ``le`` bounds a served histogram has per power of two: ``2**(1/8)`` (about 1.09) apart.

Every 8th bucket boundary of rlpulse's histograms (64 per power of two), so
each classic bucket counts whole buckets of those, exactly; PromQL's
``histogram_quantile`` then answers within a factor ``2**(1/8)`` (9.05 %)
of the quantile, the width of one bucket.
"""

_VALID_PREFIX = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_INVALID_NAME_CHARACTERS = re.compile(r"[^a-zA-Z0-9_]")
_POLL_TIME_FAMILY = "last_poll_timestamp_seconds"
_EVENTS_FAMILY = "events"
# What prometheus_client appends to a counter family's name in its sample.
_COUNTER_SUFFIX = "_total"
# What it appends to a histogram family's name in its samples.
_HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")
# Bucket boundaries of rlpulse's histograms per bound of a served one.
_STRIDE = 2**SCALE // BOUNDS_PER_OCTAVE
_COUNTER, _GAUGE, _HISTOGRAM = "counter", "gauge", "histogram"


class _Family(NamedTuple):
    """The Prometheus metric family serving one rlpulse metric: its name (a counter's without ``_total``), its type."""

    name: str
    type: str
    metric: str

    def exposed_names(self) -> tuple[str, ...]:
        """The names this family takes in a scrape: no other family may use them."""
        if self.type == _COUNTER:
            return (self.name, self.name + _COUNTER_SUFFIX)
        if self.type == _HISTOGRAM:
            return (self.name, *(self.name + suffix for suffix in _HISTOGRAM_SUFFIXES))
        return (self.name,)


_Labels = tuple[tuple[str, str], ...]


class _Series(NamedTuple):
    """One series a scrape shows: its family's name, its watch, the labels of the instance it is of (none for the watch's own)."""

    family: str
    watch: str
    labels: _Labels


class _Snapshot(NamedTuple):
    """What a payload holds of one watch: the series it gives a value, the instances it reports (``()`` the watch's own)."""

    series: set[_Series]
    instances: set[_Labels]

    def add(self, series: _Series) -> None:
        self.series.add(series)
        self.instances.add(series.labels)


def _snapshot_of(reported: dict[str, _Snapshot], watch: str) -> _Snapshot:
    """``watch``'s entry of ``reported``, made empty the first time."""
    snapshot = reported.get(watch)
    if snapshot is None:
        snapshot = reported[watch] = _Snapshot(set(), set())
    return snapshot


class _ServedHistogram(NamedTuple):
    """A histogram as a scrape serves it: cumulative ``(le, count)`` buckets, the sum."""

    buckets: list[tuple[str, float]]
    sum: float


class _CountAndSum:
    """A series' ``<key>_count`` and ``<key>_sum`` that no buckets hold: served as a histogram of the ``+Inf`` bucket alone, or within the series' histogram once it has one.

    An instance of a watch whose histogram holds its observations (a
    :class:`~rlpulse.SharedCounters` worker's) has only these; a series
    whose count was served before its histogram (its first observations
    never reached the exporter) keeps them in its ``+Inf`` bucket, so that
    its count does not fall, which ``rate()`` would read as a reset.
    """

    __slots__ = ("count", "sum")

    def __init__(self) -> None:
        self.count = 0.0
        self.sum = 0.0

    def served(self, histogram: Histogram | None = None) -> _ServedHistogram:
        """The series as a scrape serves it: with ``histogram``'s buckets, where it has one."""
        if histogram is None:
            return _ServedHistogram([("+Inf", self.count)], self.sum)
        buckets = classic_buckets(histogram)
        le, count = buckets[-1]
        buckets[-1] = (le, count + self.count)
        return _ServedHistogram(buckets, histogram.sum + self.sum)


_NOTHING_ELSE = _CountAndSum()
"""What a histogram that holds all its series' observations adds to its buckets."""


class PrometheusExporter(BaseSink):
    """A sink that serves the latest value of every metric for Prometheus: a counter as a counter, a distribution as a histogram, the rest as gauges.

    A payload key ``"<watch>/<metric>"`` becomes the series
    ``<prefix>_<metric>`` with the label ``watch="<watch>"``, so one query
    (``rlpulse_frames_per_second``) shows that metric for every watch. An
    instance segment of the metric (``<word>_<number>`` before its key,
    :func:`rlpulse.naming.labelled`) is a label too: a
    :class:`~rlpulse.SharedCounters` worker's ``workers/worker_0/frames`` is
    ``rlpulse_frames_total{watch="workers",worker="0"}``, a child process's
    ``system/child_4242/cpu_percent`` is
    ``rlpulse_cpu_percent{watch="system",pid="4242"}``; a series of that
    family without the instance (the watch's own ``frames``, its total over
    the workers) has the label empty, which PromQL reads as none:
    ``rlpulse_frames_total{worker=""}`` is every watch's own,
    ``sum by (watch) (rlpulse_frames_total{worker!=""})`` the workers' sum.
    What is served is what each watch's latest snapshot says, as a target
    that stops exporting a series: a gauge the snapshot no longer holds (a
    quantile over an interval without observations, an unknown verdict's
    ``speedup``) is no longer served, and Prometheus marks it stale, nor is
    any series of an instance none of whose metrics it holds (a child that
    exited); a counter or a histogram, cumulative, keeps its last value.
    Only a monitor's payloads are whole snapshots (:attr:`Payload.whole
    <rlpulse.naming.Payload.whole>`): of what ``log_metrics`` logs by
    hand, every key keeps its last value. What
    the metric is decides the type: a counter (``frames``, a tally's
    ``inc()`` keys and observation counts) is a Prometheus counter, its
    series named with ``_total`` (``rlpulse_frames_total``), for PromQL's
    ``rate()``; everything else, the rates the monitor computes
    (``*_per_second``) included, is a gauge. A metric keeps the type it was
    first served with. The observations of a key (a tally's ``update_s``)
    are served as a cumulative Prometheus histogram
    (``rlpulse_update_seconds_bucket``, ``_count``, ``_sum``) for
    ``histogram_quantile``: its ``le`` bounds are :data:`BOUNDS_PER_OCTAVE`
    per power of two over the range observed (:func:`classic_buckets`); its
    ``_count`` and ``_sum`` take the place of the key's ``_count`` and
    ``_sum`` counters, every watch's, and its quantiles (``_p99``) stay gauges. Names
    follow Prometheus' conventions: the seconds
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
    A registry takes one exporter of each prefix: a second one is refused
    (``ValueError``), for it would serve every family twice.
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
        # The latest value of each series.
        self._latest: dict[_Series, float] = {}
        self._poll_times: dict[str, float] = {}
        # By metric and whether it is a distribution.
        self._family_of_metric: dict[tuple[str, bool], _Family] = {}
        self._family_by_name: dict[str, _Family] = {}
        self._poll_time_gauge = self._full_name(_POLL_TIME_FAMILY)
        self._events_counter = self._full_name(_EVENTS_FAMILY)
        # Every name a scrape shows, so that no metric's family takes one twice.
        self._taken: set[str] = {
            *_Family(self._poll_time_gauge, _GAUGE, "").exposed_names(),
            *_Family(self._events_counter, _COUNTER, "").exposed_names(),
        }
        # The observations so far of each series, and the metrics the
        # histograms serve for every watch (a distribution's count and sum),
        # each with its distribution and whether it is the count.
        self._histograms: dict[_Series, Histogram] = {}
        self._served_by_histograms: dict[str, tuple[str, bool]] = {}
        # The count and sum of a series that no buckets hold (see _CountAndSum).
        self._counts_and_sums: dict[_Series, _CountAndSum] = {}
        # The series of each watch in any of those three: what a whole
        # snapshot of the watch may retire.
        self._series_of_watch: dict[str, set[_Series]] = {}
        self._server: Any = None
        self._server_thread: threading.Thread | None = None
        # The process serving, where this exporter has a server of its own.
        self._serving_pid: int | None = None
        self.url: str | None = None
        """The HTTP address to scrape, or ``None`` when registered into a given registry."""
        self._gauge_family = prometheus_client.core.GaugeMetricFamily
        self._counter_family = prometheus_client.core.CounterMetricFamily
        self._histogram_family = prometheus_client.core.HistogramMetricFamily
        # Events so far by (kind, watch).
        self._events: dict[tuple[str, str], int] = {}
        if registry is None:
            self.registry: CollectorRegistry = prometheus_client.CollectorRegistry()
            self.registry.register(self)
            self._server, self._server_thread = _serve(
                prometheus_client, self.registry, addr, port
            )
            host = f"[{addr}]" if ":" in addr else addr
            self.url = f"http://{host}:{self._server.server_port}/metrics"
            self._serving_pid = os.getpid()
            _SERVING.add(self)
        else:
            self.registry = registry
            try:
                self.registry.register(self)
            except ValueError as clash:  # prometheus_client's DuplicateTimeseries
                raise ValueError(
                    "PrometheusExporter(registry=...): another collector of that "
                    "registry serves names this exporter would, most likely another "
                    f"PrometheusExporter of prefix {prefix!r}; a scrape would show "
                    "every family twice, which Prometheus rejects. Give every monitor "
                    "that one exporter, close it first, or give this one another "
                    f"prefix=, e.g. prefix={(prefix or 'rlpulse') + '_2'!r} ({clash})."
                ) from None

    def _write_batch(self, payloads: Sequence[Payload]) -> None:
        """Make the payloads' values the latest ones served, the last payload's winning.

        ``step`` is not served (a step is usually one of the payload's own
        counters); ``timestamp`` is the wall-clock time of the poll that
        produced the payload (now when ``None``) and becomes the watch's
        ``<prefix>_last_poll_timestamp_seconds``. A whole payload (a
        monitor's) then retires what its watches no longer report
        (:meth:`_retire`).

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
            # What each watch of the payload reports.
            reported: dict[str, _Snapshot] = {}
            for key, interval in payload.distributions.items():
                watch, path = split(key)
                metric, labels = labelled(path)
                if (metric, True) not in self._family_of_metric:
                    self._retire_served_by_histogram(metric)
                family = self._family_for(metric, Kind.DISTRIBUTION)
                series = _Series(family.name, watch, labels)
                self._histograms.setdefault(series, Histogram()).merge(interval)
                self._index(series)
                _snapshot_of(reported, watch).add(series)
                self._poll_times[watch] = payload.wall_time
            for key, value in payload.metrics.items():
                watch, path = split(key)
                metric, labels = labelled(path)
                snapshot = _snapshot_of(reported, watch)
                snapshot.instances.add(labels)
                counted_by = self._served_by_histograms.get(metric)
                if counted_by is not None:
                    self._keep_count_or_sum(counted_by, watch, labels, value, snapshot)
                    continue
                family = self._family_for(metric, payload.kind(key))
                series = _Series(family.name, watch, labels)
                self._latest[series] = float(value)
                self._index(series)
                snapshot.series.add(series)
                self._poll_times[watch] = payload.wall_time
            if payload.whole:
                self._retire(reported)

    def _retire(self, watches: Mapping[str, _Snapshot | None]) -> None:
        """Stop serving what each of ``watches`` no longer reports, given its latest whole snapshot, or everything of it where that is ``None`` (it was unwatched).

        The one place that decides what goes. A watch's whole snapshot is
        what the watch says now, so a scrape serves that, as a target that
        stops exporting a series does (Prometheus marks it stale): a gauge
        it does not hold (a quantile over an interval without
        observations, a verdict's unknown speedup, a rate before a second
        poll) goes, and every series of an instance none of whose metrics
        it holds (a child process that exited). A counter and a histogram
        are cumulative: one missing from a snapshot keeps its last value,
        for ``rate()`` not to read a reset, unless its instance is gone.
        An unwatched watch's series and poll time all go; its events stay
        counted.
        """
        for watch, snapshot in watches.items():
            if snapshot is None:
                self._poll_times.pop(watch, None)
                served = self._series_of_watch.pop(watch, None)
            else:
                served = self._series_of_watch.get(watch)
            if not served:
                continue
            # What the snapshot holds stays: only the rest may go.
            held = set() if snapshot is None else snapshot.series
            gone = [
                series
                for series in served.difference(held)
                if self._gone(series, snapshot)
            ]
            for series in gone:
                served.discard(series)
                self._latest.pop(series, None)
                self._histograms.pop(series, None)
                self._counts_and_sums.pop(series, None)

    def _gone(self, series: _Series, snapshot: _Snapshot | None) -> bool:
        """Whether its watch's latest whole ``snapshot`` (``None``: it was unwatched) retires ``series``."""
        if snapshot is None:
            return True
        if series.labels and series.labels not in snapshot.instances:
            return True
        return (
            series not in snapshot.series
            and self._family_by_name[series.family].type == _GAUGE
        )

    def _closed_message(self) -> str:
        if self._serving_pid not in (None, os.getpid()):
            return (
                f"{self!r} serves from process {self._serving_pid}, not from "
                "this process forked from it; create a PrometheusExporter in "
                "this process, on a port of its own, to serve its metrics"
            )
        return (
            "PrometheusExporter is closed; create a new PrometheusExporter "
            "to keep serving metrics"
        )

    def _forget_server_in_child(self) -> None:
        """Let go of the parent's server in a forked child: close its copy of the listening socket, and close this copy of the exporter.

        Held open by the child, the socket would keep the port taken once
        the parent closes the exporter (or dies), and scrapes would wait
        on it unanswered. The child has no serving thread to shut down;
        a lock a scrape held at the fork stays held in the child, hence a
        new one.
        """
        if self._server is not None:
            self._server.socket.close()
        self._server = None
        self._server_thread = None
        self._lock = threading.Lock()
        self._closed = True

    def _index(self, series: _Series) -> None:
        """Note ``series``, just stored, among its watch's: what a whole snapshot of the watch may retire."""
        served = self._series_of_watch.get(series.watch)
        if served is None:
            self._series_of_watch[series.watch] = served = set()
        served.add(series)

    def _keep_count_or_sum(
        self,
        counted_by: tuple[str, bool],
        watch: str,
        labels: _Labels,
        value: float,
        snapshot: _Snapshot,
    ) -> None:
        """Keep ``value``, a ``<key>_count`` or ``<key>_sum`` whose histogram serves it (``counted_by``: the key, and whether it is the count), where the histogram has no series of ``labels``' instance.

        A :class:`~rlpulse.SharedCounters` watch has one histogram of every
        worker's observations, and each worker's count and sum: these are
        served as the worker's histogram with the ``+Inf`` bucket alone, so
        that ``rate()`` reads each worker's as it did before workers became
        labels. (``histogram_quantile`` over a family's buckets then
        selects ``worker=""``, as a sum over workers selects
        ``worker!=""``.)
        """
        key, counted = counted_by
        series = _Series(self._family_of_metric[(key, True)].name, watch, labels)
        if series in self._histograms:
            return
        count_and_sum = self._counts_and_sums.setdefault(series, _CountAndSum())
        self._index(series)
        if counted:
            count_and_sum.count = float(value)
        else:
            count_and_sum.sum = float(value)
        snapshot.series.add(series)

    def _retire_served_by_histogram(self, metric: str) -> None:
        """Stop serving ``<metric>_count`` and ``_sum`` as series of their own, for every watch: ``metric``'s histogram serves them from now on.

        A tally logs a distribution's count and sum before its first
        observation; served as counters meanwhile, their families would
        take the histogram's names. The histogram is one family for every
        watch, so the counters go for every watch, their names given back,
        and no watch's ``<metric>_count`` or ``_sum`` is served beside it
        again: an instance whose observations it does not hold has its
        count and sum served within it (:meth:`_keep_count_or_sum`).
        """
        for suffix in (COUNT_SUFFIX, SUM_SUFFIX):
            self._served_by_histograms[metric + suffix] = (
                metric,
                suffix == COUNT_SUFFIX,
            )
            plain = self._family_of_metric.pop((metric + suffix, False), None)
            if plain is None:
                continue
            for served in [key for key in self._latest if key.family == plain.name]:
                del self._latest[served]
                self._series_of_watch.get(served.watch, set()).discard(served)
            del self._family_by_name[plain.name]
            self._taken.difference_update(plain.exposed_names())

    def _family_for(self, metric: str, kind: Kind) -> _Family:
        """The family serving ``metric``: made the first time, of ``kind``, and kept.

        A registry cannot change a family's type, so the kind ``metric`` is
        first served with is the kind it keeps; the histogram of its
        observations, if it has any, is a family of its own.
        """
        distribution = kind is Kind.DISTRIBUTION
        family = self._family_of_metric.get((metric, distribution))
        if family is None:
            type_ = (
                _HISTOGRAM
                if distribution
                else _COUNTER
                if kind is Kind.COUNTER
                else _GAUGE
            )
            base = self._full_name(_prometheus_name(metric))
            # prometheus_client takes a counter's name without ``_total``.
            while (
                type_ == _COUNTER
                and base.endswith(_COUNTER_SUFFIX)
                and base != _COUNTER_SUFFIX
            ):
                base = base[: -len(_COUNTER_SUFFIX)]
            family = _Family(base, type_, metric)
            suffix = 2
            while self._taken.intersection(family.exposed_names()):
                family = _Family(f"{base}_{suffix}", type_, metric)
                suffix += 1
            self._taken.update(family.exposed_names())
            self._family_of_metric[(metric, distribution)] = family
            self._family_by_name[family.name] = family
        return family

    def _full_name(self, name: str) -> str:
        full_name = f"{self.prefix}_{name}" if self.prefix else name
        return full_name if _VALID_PREFIX.match(full_name) else f"_{full_name}"

    def log_event(self, event: Event) -> None:
        """Count ``event`` in ``<prefix>_events_total{kind, watch}``; an ``unwatched`` one also stops serving its watch's values.

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
        if event.kind == EventKind.UNWATCHED:
            self._retire({str(event.watch): None})

    def collect(self) -> Iterator[Any]:
        """Yield the metric families of the latest values, the histograms and the events: what a scrape of the registry returns.

        >>> from rlpulse.sinks.prometheus import PrometheusExporter
        >>> from prometheus_client import CollectorRegistry
        >>> with PrometheusExporter(registry=CollectorRegistry()) as exporter:
        ...     exporter.log_metrics({"buffer/size": 10.0}, timestamp=1.5)
        ...     [(family.name, family.samples[0].value) for family in exporter.collect()]
        [('rlpulse_last_poll_timestamp_seconds', 1.5), ('rlpulse_size', 10.0)]
        """
        with self._lock:
            latest: list[tuple[_Series, Any]] = list(self._latest.items())
            counts_and_sums = self._counts_and_sums
            latest.extend(
                (series, counts_and_sums.get(series, _NOTHING_ELSE).served(histogram))
                for series, histogram in self._histograms.items()
            )
            latest.extend(
                (series, counted.served())
                for series, counted in counts_and_sums.items()
                if series not in self._histograms
            )
            families = dict(self._family_by_name)
            poll_times = sorted(self._poll_times.items())
            events = sorted(self._events.items())
        latest.sort(key=lambda entry: entry[0])
        # Every label a family's series have: a family's label names are
        # fixed, so a series without an instance label has it empty, which
        # PromQL reads as no such label.
        label_names: dict[str, set[str]] = {}
        for series, _ in latest:
            names = label_names.setdefault(series.family, set())
            names.update(label for label, _ in series.labels)
        if events:
            counter = self._events_family()
            for (kind, watch), count in events:
                counter.add_metric([kind, watch], count)
            yield counter
        if poll_times:
            family = self._poll_time_family()
            for watch, wall_time in poll_times:
                family.add_metric([watch], wall_time)
            yield family
        served: Any = None
        instance_labels: list[str] = []
        for series, value in latest:
            if served is None or served.name != series.family:
                if served is not None:
                    yield served
                instance_labels = sorted(label_names[series.family])
                served = self._served_family(families[series.family], instance_labels)
            given = dict(series.labels)
            values = [
                series.watch,
                *(given.get(label, "") for label in instance_labels),
            ]
            if isinstance(value, _ServedHistogram):
                served.add_metric(values, value.buckets, value.sum)
            else:
                served.add_metric(values, value)
        if served is not None:
            yield served

    def _events_family(self) -> Any:
        """The empty counter of events, by kind and watch."""
        return self._counter_family(
            self._events_counter,
            "rlpulse events (a stall, a hung call, a failing sink, drops) by kind and watch.",
            labels=["kind", "watch"],
        )

    def _poll_time_family(self) -> Any:
        """The empty gauge of each watch's last poll time."""
        return self._gauge_family(
            self._poll_time_gauge,
            "Wall-clock time (seconds since the epoch) of the poll that "
            "produced the watch's latest values.",
            labels=["watch"],
        )

    def _served_family(self, family: _Family, instance_labels: list[str]) -> Any:
        """An empty prometheus_client metric family for ``family``, labelled by watch and then by ``instance_labels``."""
        labels = ["watch", *instance_labels]
        if family.type == _HISTOGRAM:
            return self._histogram_family(
                family.name,
                f"rlpulse distribution {family.metric!r}: its observations so far.",
                labels=labels,
            )
        if family.type == _COUNTER:
            return self._counter_family(
                family.name,
                f"rlpulse counter {family.metric!r} (cumulative): its latest value.",
                labels=labels,
            )
        return self._gauge_family(
            family.name,
            f"rlpulse gauge {family.metric!r}: its latest value.",
            labels=labels,
        )

    def describe(self) -> list[Any]:
        """Return the families every exporter of this prefix serves: the events counter and the poll times.

        A registry refuses a second collector describing one of them, so
        that no two exporters of one prefix serve every family twice. The
        metrics' own families appear as metrics arrive.

        >>> from rlpulse.sinks.prometheus import PrometheusExporter
        >>> from prometheus_client import CollectorRegistry
        >>> with PrometheusExporter(registry=CollectorRegistry()) as exporter:
        ...     [family.name for family in exporter.describe()]
        ['rlpulse_events', 'rlpulse_last_poll_timestamp_seconds']
        """
        return [self._events_family(), self._poll_time_family()]

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
        _SERVING.discard(self)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._server_thread is not None:
            self._server_thread.join(timeout=5.0)
        self.registry.unregister(self)

    def __repr__(self) -> str:
        where = self.url if self.url is not None else "a given registry"
        return f"<PrometheusExporter prefix={self.prefix!r} serving {where}>"


_SERVING: weakref.WeakSet[PrometheusExporter] = weakref.WeakSet()
"""The exporters of this process serving over HTTP, until closed."""


def _forget_servers_in_child() -> None:
    # A worker forked while an exporter serves (multiprocessing's default
    # start method on Linux) would otherwise hold its port.
    for exporter in list(_SERVING):
        exporter._forget_server_in_child()
    _SERVING.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_servers_in_child)


def _serve(
    prometheus_client: Any, registry: CollectorRegistry, addr: str, port: int
) -> tuple[Any, threading.Thread]:
    """Serve ``registry`` on ``addr:port`` from a thread of its own: the server and its thread.

    An address that cannot be listened on is an ``OSError`` saying which,
    and what to do: a port in use most often, by another program or by
    another exporter of this process.
    """
    try:
        server, thread = prometheus_client.start_http_server(
            port, addr=addr, registry=registry
        )
    except OSError as error:
        where = f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"
        if error.errno != errno.EADDRINUSE:
            raise OSError(
                error.errno,
                f"PrometheusExporter cannot listen on {where}: "
                f"{error.strerror or error}; give an address of this machine "
                "(addr=) and a port it may listen on (port=0 or 'prometheus:0' "
                "picks one that is free)",
            ) from None
        holders = [
            exporter
            for exporter in _SERVING
            if exporter._server is not None and exporter._server.server_port == port
        ]
        holder = (
            f"by {holders[0]!r}: give every monitor of this process that one "
            "exporter, or this one another port"
            if holders
            else "by another program, or another run of this one (ss -ltnp "
            f"'sport = :{port}' names it): stop it, or choose another port"
        )
        raise OSError(
            error.errno,
            f"PrometheusExporter cannot listen on {where}: the port is in use "
            f"{holder} (port=0 or 'prometheus:0' picks one that is free; "
            "exporter.url names it)",
        ) from None
    # prometheus_client's thread, named as rlpulse's threads are.
    thread.name = "rlpulse-prometheus"
    return server, thread


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

    Its unit in full (:func:`rlpulse.naming.spelled_out`: ``_s`` is
    ``_seconds``, in a metric in seconds and in those counting or summing
    its observations alike); a character with an ASCII spelling keeps it
    (``ü`` is ``u``, as OTLPExporter names it: :func:`rlpulse.naming.in_ascii`),
    and every character other than letters, digits and ``_`` becomes ``_``.

    >>> _prometheus_name("update_s_p99"), _prometheus_name("update_s_count")
    ('update_seconds_p99', 'update_seconds_count')
    >>> _prometheus_name("episode.return"), _prometheus_name("episode's_return")
    ('episode_return', 'episode_s_return')
    >>> _prometheus_name("überlauf")
    'uberlauf'
    """
    return _INVALID_NAME_CHARACTERS.sub("_", in_ascii(spelled_out(metric)))


def classic_buckets(histogram: Histogram) -> list[tuple[str, float]]:
    """The cumulative ``(le, count)`` buckets of a Prometheus histogram counting ``histogram``'s observations.

    The bounds are powers of ``2**(1/BOUNDS_PER_OCTAVE)`` from the power
    of two at or below the smallest observation to the one at or above the
    largest (mirrored below zero for negative observations, with a bound
    at 0 for them and zeros), then ``+Inf``: each bucket gathers whole
    buckets of ``histogram``, so the counts are exact, and new bounds
    appear only when observations cross a power of two beyond those seen
    before. A bucket therefore spans a factor ``2**(1/8)``:
    ``histogram_quantile``, interpolating within it, is within 9.05 % of
    the quantile. (A negative value on a bound exactly counts in the
    bucket above it.)

    >>> observed = Histogram()
    >>> for value in (0.3, 0.4, 0.5, 0.7):
    ...     observed.add(value)
    >>> buckets = classic_buckets(observed)
    >>> len(buckets), buckets[:4], buckets[-2:]
    (18, [('0.25', 0.0), ('0.2726269331663144', 0.0), ('0.29730177875068026', 0.0), ('0.3242098886627524', 1.0)], [('1.0', 4.0), ('+Inf', 4.0)])
    """
    from prometheus_client import utils

    # How prometheus_client writes its own histograms' bounds.
    bound_label = cast(Callable[[float], str], utils.floatToGoString)
    bounds: list[tuple[float, int]] = []
    below = 0
    negative = _counts_by_bound(histogram.negative)
    if negative:
        # Bound -B counts the values of the buckets from B's up.
        for bound in range(max(negative) + 1, min(negative) - 1, -1):
            below += negative.get(bound, 0)
            bounds.append((-_bound_value(bound), below))
    if negative or histogram.zero_count:
        below += histogram.zero_count
        bounds.append((0.0, below))
    positive = _counts_by_bound(histogram.positive)
    if positive:
        # Bound B counts the values of the buckets below it.
        for bound in range(min(positive), max(positive) + 2):
            bounds.append((_bound_value(bound), below))
            below += positive.get(bound, 0)
    buckets = [(bound_label(bound), float(count)) for bound, count in bounds]
    buckets.append(("+Inf", float(below)))
    return buckets


def _counts_by_bound(counts: dict[int, int]) -> dict[int, int]:
    """The counts of ``counts``' buckets, by the index of the served bound at or below each, from whole octaves."""
    octave = BOUNDS_PER_OCTAVE
    by_bound: dict[int, int] = {}
    for index, count in counts.items():
        bound = index // _STRIDE
        by_bound[bound] = by_bound.get(bound, 0) + count
    if by_bound:
        # The range rounded out to whole octaves: zero counts at both ends.
        by_bound.setdefault(min(by_bound) // octave * octave, 0)
        by_bound.setdefault(-(-(max(by_bound) + 1) // octave) * octave - 1, 0)
    return by_bound


def _bound_value(bound: int) -> float:
    return math.pow(2.0, bound / BOUNDS_PER_OCTAVE)
