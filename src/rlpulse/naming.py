"""Metric names and what they mean: the one place that joins, splits and classifies them.

A metric leaves a watch as ``"<watch>/<metric>"``: a watch name never holds
``/``, so the first ``/`` separates the two, and the metric keeps any of its
own (``collector/worker_0/frames`` is metric ``worker_0/frames`` of watch
``collector``). Each metric has a :class:`Kind`, decided where it is born
(a watch knows which entries it rates, which it derives, which it
aggregates); :func:`inferred_kind` guesses it back from names only for what
was written without kinds. A unit comes from the name's conventional
suffix (:func:`unit_of`). A backend that names series by labels
(Prometheus, OpenTelemetry) takes a metric's instance segments
(``worker_0``, ``child_<pid>``) as labels (:func:`labelled`). A
:class:`Payload` is one logged snapshot as rlpulse's own sinks take it: its
metrics with their kinds, and whether it is a watch's whole snapshot or
metrics logged by hand (:class:`InferredKinds`).
"""

from __future__ import annotations

import enum
import functools
import re
import unicodedata
from collections.abc import Container, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

__all__ = [
    "CAPACITIES",
    "COUNT_SUFFIX",
    "INSTANCE_LABELS",
    "RATE_NAMES",
    "RATE_SUFFIX",
    "RESERVED_LABELS",
    "SUM_SUFFIX",
    "InferredKinds",
    "Kind",
    "Labelled",
    "Payload",
    "Unit",
    "capacities_of",
    "inferred_kind",
    "inferred_kinds",
    "join",
    "labelled",
    "rate_name",
    "rate_of",
    "spelled_out",
    "split",
    "statistic_of",
    "unit_of",
    "watch_of",
]


class _Named(str, enum.Enum):
    """An enumeration whose members read as their names: ``str(Kind.COUNTER)`` is ``'counter'``."""

    def __str__(self) -> str:
        return str(self.value)


class Kind(_Named):
    """What a metric is: how a reader may add, rate or chart it.

    Examples:
        >>> Kind("counter") is Kind.COUNTER, Kind.RATE.value
        (True, 'rate')
    """

    COUNTER = "counter"
    """Cumulative: only grows, but for a reset; its rate is what moves."""
    GAUGE = "gauge"
    """A level at one moment (a buffer's size, a mean, a quantile)."""
    RATE = "rate"
    """A counter's increase per second over the interval before it."""
    DISTRIBUTION = "distribution"
    """A histogram of observations; its quantiles are gauges."""


class Unit(_Named):
    """The unit a metric's name says it is in.

    Examples:
        >>> Unit.SECONDS.ucum, Unit.BYTES.ucum
        ('s', 'By')
    """

    SECONDS = "seconds"
    BYTES = "bytes"
    PERCENT = "percent"
    FRACTION = "fraction"
    PER_SECOND = "per_second"

    @property
    def ucum(self) -> str:
        """The unit's UCUM code, what OpenTelemetry's ``unit`` field holds."""
        return _UCUM[self]


_UCUM = {
    Unit.SECONDS: "s",
    Unit.BYTES: "By",
    Unit.PERCENT: "%",
    Unit.FRACTION: "1",
    Unit.PER_SECOND: "1/s",
}


RATE_NAMES: Mapping[str, str] = {
    "frames": "frames_per_second",
    "batches": "batches_per_second",
    "write_count": "writes_per_second",
    "worker_frames": "worker_frames_per_second",
    "sample_calls": "samples_per_second",
    "samples_returned": "samples_returned_per_second",
}
"""Known cumulative counters (a collector's, a replay buffer's) and the names of their per-second rates."""

CAPACITIES: Mapping[str, tuple[str, ...]] = {
    "size": ("capacity", "max_size"),
    "workers_alive": ("workers", "num_workers"),
    "workers_finished": ("workers",),
}
"""Gauges that fill up to another gauge of the same watch: a buffer's size its capacity, the workers alive (or finished) the workers."""

RATE_SUFFIX = "_per_second"
"""How a rate's name ends."""

COUNT_SUFFIX = "_count"
"""How the name of a count of observations ends (a :class:`~rlpulse.Tally`'s ``loss_count``)."""

SUM_SUFFIX = "_sum"
"""How the name of a sum of observations ends (a :class:`~rlpulse.Tally`'s ``loss_sum``)."""

# Entries derived from observations of a key keep the key's unit.
_DERIVED = re.compile(r"(_p\d+(_\d+)?|_mean|_min|_max|_last|_sum)$")
# What a tally (or a watch's aggregation) says of a key's observations.
_STATISTIC = re.compile(r"_(p\d+(?:_\d+)?|mean|min|max|last|sum|count)$")


def join(watch: str, metric: str) -> str:
    """The payload key of ``metric`` logged under ``watch``.

    Examples:
        >>> join("collector", "worker_0/frames")
        'collector/worker_0/frames'
    """
    return f"{watch}/{metric}"


def split(name: str) -> tuple[str, str]:
    """The watch and the metric of payload key ``name``: at the first ``/``; no ``/``, no watch (``""``).

    Examples:
        >>> split("collector/worker_0/frames")
        ('collector', 'worker_0/frames')
        >>> split("loss")
        ('', 'loss')
    """
    watch, separator, metric = name.partition("/")
    return (watch, metric) if separator else ("", name)


def watch_of(name: str) -> str:
    """The watch of payload key ``name`` (``""`` when it has none).

    Examples:
        >>> watch_of("replay_buffer/size"), watch_of("loss")
        ('replay_buffer', '')
    """
    return split(name)[0]


INSTANCE_LABELS: Mapping[str, str] = {"child": "pid"}
"""The label of an instance segment whose word is not its label: ``child_<pid>`` (a process of :class:`~rlpulse.SystemStats`' tree) is ``pid``."""

RESERVED_LABELS = frozenset({"watch", "le", "quantile", "job", "instance"})
"""Labels an instance segment never takes: the watch's, a histogram's and a summary's own, and those Prometheus gives every series of a scrape target."""

# An instance segment: a word (a letter first) and, after its last "_", a number.
_INSTANCE = re.compile(r"([A-Za-z][A-Za-z0-9_]*)_([0-9]+)")


class Labelled(NamedTuple):
    """A metric as a backend that names series by labels serves it: its name without instance segments, each instance a ``(label, id)`` pair."""

    metric: str
    labels: tuple[tuple[str, str], ...]


def labelled(metric: str) -> Labelled:
    """Metric ``metric`` (without its watch's name) with its instance segments taken out as labels.

    An instance segment is a segment before the last of the form
    ``<word>_<number>``: one of several instances of something, a
    :class:`~rlpulse.SharedCounters` worker's ``worker_0``, a
    :class:`~rlpulse.SystemStats` child process's ``child_4242``, a GPU's
    ``gpu_0``, a nested ``{"env_3": {...}}`` of a target's own. Its label
    is the word (``child``'s is ``pid``: :data:`INSTANCE_LABELS`), its
    value the number. A segment stays in the name where its label would be
    one of :data:`RESERVED_LABELS` or one an earlier segment took. The last
    segment, the metric's own key, is never an instance. The labels are in
    the order of their names: one instance is one series, whichever
    order its path names its segments in.

    Examples:
        >>> labelled("worker_0/frames")
        Labelled(metric='frames', labels=(('worker', '0'),))
        >>> labelled("child_4242/cpu_percent"), labelled("tree/cpu_percent")
        (Labelled(metric='cpu_percent', labels=(('pid', '4242'),)), Labelled(metric='tree/cpu_percent', labels=()))
        >>> labelled("worker_0/env_3/steps"), labelled("worker_frames")
        (Labelled(metric='steps', labels=(('env', '3'), ('worker', '0'))), Labelled(metric='worker_frames', labels=()))
        >>> labelled("watch_1/le_2/x")
        Labelled(metric='watch_1/le_2/x', labels=())
    """
    return _labelled(metric)


# Sinks ask for every metric of every payload: the answers are kept, a
# bounded number of them (a run's metrics are few; its instances may not be).
@functools.lru_cache(maxsize=4096)
def _labelled(metric: str) -> Labelled:
    if "/" not in metric:
        return Labelled(metric, ())
    *heads, key = metric.split("/")
    kept: list[str] = []
    labels: dict[str, str] = {}
    for segment in heads:
        instance = _INSTANCE.fullmatch(segment)
        if instance is not None:
            word, number = instance.groups()
            label = INSTANCE_LABELS.get(word, word)
            if label not in RESERVED_LABELS and label not in labels:
                labels[label] = number
                continue
        kept.append(segment)
    if not labels:
        return Labelled(metric, ())
    return Labelled("/".join([*kept, key]), tuple(sorted(labels.items())))


def rate_name(key: str) -> str:
    """Return the name of the per-second rate of counter ``key``.

    Examples:
        >>> rate_name("write_count"), rate_name("episodes")
        ('writes_per_second', 'episodes_per_second')
    """
    return RATE_NAMES.get(key) or f"{key}{RATE_SUFFIX}"


def rate_of(name: str) -> str:
    """The name of the rate of counter ``name``, a payload key or a metric, nested or not.

    Examples:
        >>> rate_of("collector/worker_0/frames"), rate_of("episodes")
        ('collector/worker_0/frames_per_second', 'episodes_per_second')
    """
    head, separator, key = name.rpartition("/")
    return f"{head}{separator}{rate_name(key)}"


def capacities_of(name: str) -> tuple[str, ...]:
    """The names a gauge's capacity may be logged under, a payload key or a metric (none for a gauge without one).

    Examples:
        >>> capacities_of("buffer/size"), capacities_of("loss")
        (('buffer/capacity', 'buffer/max_size'), ())
    """
    head, separator, key = name.rpartition("/")
    return tuple(f"{head}{separator}{other}" for other in CAPACITIES.get(key, ()))


def unit_of(metric: str) -> Unit | None:
    """The unit metric name ``metric`` says, by its suffix; ``None`` when it says none.

    A window summary, sum or quantile of observations keeps the unit of
    what it summarises. A part of a whole, from 0 to 1 (a buffer's
    ``utilization``, a bottleneck watch's ``consumer_wait_share`` and
    ``fill``, any ``_fraction``), is a :attr:`Unit.FRACTION`; a ``_ratio`` is not, since
    rlpulse's own (``replay_ratio``, samples per write) is no part of a
    whole.

    Examples:
        >>> unit_of("update_s_p99"), unit_of("rss_bytes"), unit_of("cpu_percent")
        (<Unit.SECONDS: 'seconds'>, <Unit.BYTES: 'bytes'>, <Unit.PERCENT: 'percent'>)
        >>> unit_of("frames_per_second"), unit_of("frames")
        (<Unit.PER_SECOND: 'per_second'>, None)
        >>> unit_of("utilization"), unit_of("consumer_wait_share"), unit_of("replay_ratio")
        (<Unit.FRACTION: 'fraction'>, <Unit.FRACTION: 'fraction'>, None)
        >>> unit_of("fill"), unit_of("fill_trend")
        (<Unit.FRACTION: 'fraction'>, None)
    """
    if metric.endswith(RATE_SUFFIX):
        return Unit.PER_SECOND
    base = _DERIVED.sub("", metric.rpartition("/")[2])
    if base == "bytes" or base.endswith("_bytes"):
        return Unit.BYTES
    if base == "percent" or base.endswith("_percent"):
        return Unit.PERCENT
    if base.endswith(("_s", "_seconds")):
        return Unit.SECONDS
    if base.rpartition("_")[2] in _FRACTIONS:
        return Unit.FRACTION
    return None


_FRACTIONS = frozenset({"utilization", "share", "fraction", "fill"})
# The last words of the names of parts of a whole, from 0 to 1.


def spelled_out(metric: str) -> str:
    """Metric name ``metric`` with its unit in full, as Prometheus names base units: ``_s`` is ``_seconds``.

    The unit of an observed key stays in its place before the statistic.

    Examples:
        >>> spelled_out("update_s_p99"), spelled_out("update_s_count"), spelled_out("wait_s")
        ('update_seconds_p99', 'update_seconds_count', 'wait_seconds')
        >>> spelled_out("episode_s_return"), spelled_out("rss_bytes")
        ('episode_s_return', 'rss_bytes')
    """
    key, statistic = statistic_of(metric)
    if key.endswith("_s") and unit_of(key) is Unit.SECONDS:
        key = key[: -len("_s")] + "_" + str(Unit.SECONDS)
    return f"{key}_{statistic}" if statistic else key


def in_ascii(name: str) -> str:
    """``name`` in ASCII, for a backend whose names allow no other: a character with an ASCII spelling keeps it (``ü`` is ``u``), any other is ``_``.

    Examples:
        >>> in_ascii("überlauf"), in_ascii("损失/p99"), in_ascii("episode return")
        ('uberlauf', '__/p99', 'episode return')
    """
    if name.isascii():
        return name
    return "".join(
        character
        if character.isascii()
        else unicodedata.normalize("NFKD", character).encode("ascii", "ignore").decode()
        or "_"
        for character in name
    )


def statistic_of(metric: str) -> tuple[str, str]:
    """The observed key and the statistic of metric ``metric``, one derived from observations; ``""`` for none.

    A :class:`~rlpulse.Tally`'s ``episode_return_p50`` is statistic
    ``p50`` of the observations of ``episode_return``.

    Examples:
        >>> statistic_of("episode_return_p50"), statistic_of("loss_mean"), statistic_of("size")
        (('episode_return', 'p50'), ('loss', 'mean'), ('size', ''))
    """
    match = _STATISTIC.search(metric)
    if match is None:
        return metric, ""
    return metric[: match.start()], match[1]


def inferred_kind(name: str, names: Container[str]) -> Kind:
    """The kind of payload key ``name`` among the keys ``names`` of a run, guessed from names alone.

    For what was written without kinds: a rate ends ``_per_second``; a
    counter is a known one (``frames``, ``write_count``, …), one whose rate
    is among ``names`` (``collector/episodes`` beside
    ``collector/episodes_per_second``) or a count of observations
    (``*_count``); everything else is a gauge.

    Examples:
        >>> names = {"c/frames", "c/episodes", "c/episodes_per_second", "t/return_count", "b/size"}
        >>> {name: str(inferred_kind(name, names)) for name in sorted(names)}
        {'b/size': 'gauge', 'c/episodes': 'counter', 'c/episodes_per_second': 'rate', 'c/frames': 'counter', 't/return_count': 'counter'}
    """
    key = name.rpartition("/")[2]
    if key.endswith(RATE_SUFFIX) and key not in RATE_NAMES:
        return Kind.RATE
    if key in RATE_NAMES or key.endswith(COUNT_SUFFIX) or rate_of(name) in names:
        return Kind.COUNTER
    return Kind.GAUGE


class InferredKinds(dict[str, Kind]):
    """The kinds of a payload's metrics guessed from their names: what marks a payload logged by hand.

    A payload of metrics logged with ``log_metrics`` or ``log_batch`` has
    its kinds guessed (:func:`inferred_kinds`) and may hold any of a
    watch's keys; one a monitor logs has the kinds its watch decided and
    is that watch's whole snapshot (:attr:`Payload.whole`).

    Examples:
        >>> kinds = inferred_kinds({"b/size": 3.0})
        >>> isinstance(kinds, InferredKinds), kinds == {"b/size": Kind.GAUGE}
        (True, True)
    """

    __slots__ = ()


def inferred_kinds(metrics: Mapping[str, float]) -> InferredKinds:
    """The kind of each key of ``metrics``, a payload whose kinds were not given, guessed from its names.

    Examples:
        >>> kinds = inferred_kinds({"c/frames": 10.0, "c/frames_per_second": 5.0, "b/size": 3.0})
        >>> {name: str(kind) for name, kind in kinds.items()}
        {'c/frames': 'counter', 'c/frames_per_second': 'rate', 'b/size': 'gauge'}
    """
    return InferredKinds(
        (name, inferred_kind(name, metrics))
        for name in metrics
        if isinstance(name, str)
    )


class Payload(NamedTuple):
    """One logged snapshot as rlpulse's own sinks take it: its metrics, step, time, and each metric's kind.

    ``kinds`` maps a key of ``metrics`` to its :class:`Kind`; a key it
    lacks is a gauge (:meth:`kind`). ``distributions`` holds, keyed
    ``<watch>/<key>``, the histogram (:class:`rlpulse.distributions.Histogram`)
    of each distribution's observations over the interval this payload
    closes (since the watch's previous logged snapshot): the metrics of
    kind :attr:`Kind.DISTRIBUTION`, whose quantiles ``metrics`` holds.

    Examples:
        >>> payload = Payload({"c/frames": 10.0, "c/size": 2.0}, 10, 1.5, {"c/frames": Kind.COUNTER})
        >>> str(payload.kind("c/frames")), str(payload.kind("c/size"))
        ('counter', 'gauge')
    """

    metrics: Mapping[str, float]
    step: int | None
    wall_time: float
    kinds: Mapping[str, Kind]
    distributions: Mapping[str, Any] = MappingProxyType({})
    watch: str = ""
    """The watch whose snapshot it is, where a monitor logged it in this process (``""``: not known, as for metrics logged by hand)."""

    def kind(self, name: str) -> Kind:
        """The kind of metric ``name`` of this payload."""
        return self.kinds.get(name, Kind.GAUGE)

    @property
    def whole(self) -> bool:
        """Whether this payload is the whole snapshot of each watch its keys name, as a monitor logs it.

        A watch's metric missing from its whole snapshot is one it no
        longer reports (a quantile over an interval without observations,
        a verdict unknown). A payload logged by hand (``log_metrics``,
        ``log_batch``: its kinds guessed from the names,
        :class:`InferredKinds`) is not whole: it may hold any of a watch's
        keys, and a key it lacks says nothing.

        Examples:
            >>> Payload({"c/frames": 10.0}, 10, 1.5, {"c/frames": Kind.COUNTER}).whole
            True
            >>> Payload({"c/frames": 10.0}, 10, 1.5, inferred_kinds({"c/frames": 10.0})).whole
            False
        """
        return not isinstance(self.kinds, InferredKinds)
