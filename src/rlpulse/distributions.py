"""Distributions: cumulative histograms in logarithmic buckets, and quantiles over an interval.

A :class:`Histogram` counts observations in buckets whose bounds grow by a
constant factor, so that any quantile read from it is within
:data:`RELATIVE_ERROR` of the observation it stands for, from nanoseconds to
gigabytes, in a few hundred buckets. It is cumulative and cheap to copy:
two copies taken at different times give the distribution of what was
observed in between (:meth:`Histogram.since`), which is how a watch logs
``<key>_p99`` over the observations since its previous logged snapshot.

A watched target with a ``histograms()`` method returning
``{key: Histogram}`` (copies: see :meth:`rlpulse.Tally.histograms`) gets
those quantiles logged (:class:`IntervalQuantiles`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = [
    "DEFAULT_QUANTILES",
    "HIGHEST_BUCKET",
    "LOWEST_BUCKET",
    "RELATIVE_ERROR",
    "Histogram",
    "IntervalQuantiles",
    "bucket_index",
    "check_quantiles",
    "quantile_name",
]

RELATIVE_ERROR = 0.01
"""The most a quantile read from a :class:`Histogram` differs from the observation it stands for, relatively."""

DEFAULT_QUANTILES = (0.5, 0.9, 0.99)
"""The quantiles a watch logs by default: ``<key>_p50``, ``<key>_p90``, ``<key>_p99``."""

_GAMMA = (1 + RELATIVE_ERROR) / (1 - RELATIVE_ERROR)
_LOG_GAMMA = math.log(_GAMMA)
# A bucket (gamma**(i-1), gamma**i] stands for the value within
# RELATIVE_ERROR of both its bounds.
_MIDDLE = 2 / (_GAMMA + 1)


def bucket_index(value: float) -> int:
    """The index of the bucket of positive ``value`` in :attr:`Histogram.positive`.

    Examples:
        >>> bucket_index(1.0), bucket_index(1.02), bucket_index(1.03)
        (0, 1, 2)
    """
    return math.ceil(math.log(value) / _LOG_GAMMA)


LOWEST_BUCKET = bucket_index(1e-9)
"""The bucket of a nanosecond: the lowest a fixed-size histogram (shared memory) keeps."""

HIGHEST_BUCKET = bucket_index(1e9)
"""The bucket of a billion: the highest a fixed-size histogram keeps."""


class Histogram:
    """Cumulative counts of observations in logarithmic buckets; quantiles within 1 %.

    Bucket ``i`` of the positive values holds those in
    ``(gamma**(i-1), gamma**i]`` with ``gamma = 1.01 / 0.99``; negative values
    are mirrored, zeros counted apart. :meth:`add` takes a finite value.
    One thread may add while others :meth:`copy`.

    Examples:
        >>> histogram = Histogram()
        >>> for latency_ms in range(1, 101):
        ...     histogram.add(latency_ms / 1000)
        >>> histogram.count
        100
        >>> round(histogram.quantile(0.5), 4), round(histogram.quantile(0.99), 4)
        (0.0503, 0.0992)
        >>> later = histogram.copy()
        >>> later.add(5.0)
        >>> round(later.since(histogram).quantile(0.5), 2)  # only what came since
        5.0
    """

    __slots__ = ("negative", "positive", "zeros")

    def __init__(self) -> None:
        self.positive: dict[int, int] = {}
        self.negative: dict[int, int] = {}
        self.zeros = 0

    def add(self, value: float) -> None:
        """Count one finite observation ``value``."""
        if value > 0.0:
            buckets = self.positive
            index = math.ceil(math.log(value) / _LOG_GAMMA)
        elif value < 0.0:
            buckets = self.negative
            index = math.ceil(math.log(-value) / _LOG_GAMMA)
        else:
            self.zeros += 1
            return
        buckets[index] = buckets.get(index, 0) + 1

    @property
    def count(self) -> int:
        """How many observations were counted."""
        return self.zeros + sum(self.positive.values()) + sum(self.negative.values())

    def copy(self) -> Histogram:
        """A copy that later :meth:`add` calls leave as it is."""
        copied = Histogram()
        # dict.copy() is one step a thread adding cannot interleave with.
        copied.positive = self.positive.copy()
        copied.negative = self.negative.copy()
        copied.zeros = self.zeros
        return copied

    def merge(self, other: Histogram) -> None:
        """Add the counts of ``other`` to these (workers' histograms merged into one)."""
        for buckets, more in (
            (self.positive, other.positive),
            (self.negative, other.negative),
        ):
            for index, count in more.items():
                buckets[index] = buckets.get(index, 0) + count
        self.zeros += other.zeros

    def since(self, earlier: Histogram | None) -> Histogram:
        """The observations counted here and not in ``earlier``, a copy of this histogram taken before."""
        if earlier is None:
            return self
        interval = Histogram()
        interval.positive = _difference(self.positive, earlier.positive)
        interval.negative = _difference(self.negative, earlier.negative)
        interval.zeros = max(0, self.zeros - earlier.zeros)
        return interval

    def quantile(self, q: float) -> float | None:
        """The smallest observation with at least a share ``q`` of them at or below it, within 1 %; ``None`` when empty.

        The nearest rank: of 50 observations, ``q=0.99`` gives the largest
        (49 of them are only 98 %), so one slow call among 50 shows in a
        p99. ``q`` from 0 (the smallest) to 1 (the largest).
        """
        count = self.count
        if not count:
            return None
        # The 0-based index of the observation that is the quantile.
        # (Rounded first: 0.9 * 100 is 90.00000000000001.)
        rank = max(math.ceil(round(q * count, 9)) - 1, 0)
        seen = 0
        for index in sorted(self.negative, reverse=True):  # most negative first
            seen += self.negative[index]
            if seen > rank:
                return -(_GAMMA**index) * _MIDDLE
        seen += self.zeros
        if seen > rank:
            return 0.0
        for index in sorted(self.positive):
            seen += self.positive[index]
            if seen > rank:
                return _GAMMA**index * _MIDDLE
        return None  # not reached: seen ends at count > rank

    def __repr__(self) -> str:
        return f"Histogram(count={self.count})"


def _difference(now: dict[int, int], before: dict[int, int]) -> dict[int, int]:
    return {
        index: count - before.get(index, 0)
        for index, count in now.items()
        if count > before.get(index, 0)
    }


def quantile_name(q: float) -> str:
    """The suffix of quantile ``q``'s entry: ``p`` and the percentile, a dot written ``_``.

    Examples:
        >>> [quantile_name(q) for q in (0.5, 0.99, 0.999, 1)]
        ['p50', 'p99', 'p99_9', 'p100']
    """
    return "p" + format(q * 100, "g").replace(".", "_")


def check_quantiles(quantiles: Any) -> tuple[float, ...]:
    """``quantiles`` as a tuple, each a number from 0 to 1; raises what is wrong otherwise.

    Examples:
        >>> check_quantiles([0.5, 0.95])
        (0.5, 0.95)
        >>> check_quantiles((0.5, 50))
        Traceback (most recent call last):
        ...
        ValueError: quantiles must each be from 0 to 1 (0.99 for the 99th percentile), got 50.
    """
    if isinstance(quantiles, (str, bytes)) or not isinstance(quantiles, Iterable):
        raise TypeError(
            "quantiles takes a tuple or list of numbers from 0 to 1, got "
            f"{type(quantiles).__name__} {quantiles!r}: write quantiles=(0.5, 0.99)."
        )
    checked = tuple(quantiles)
    for q in checked:
        if isinstance(q, bool) or not isinstance(q, (int, float)):
            raise TypeError(
                f"quantiles must be numbers from 0 to 1, got {type(q).__name__} {q!r}."
            )
        if not 0 <= q <= 1:
            raise ValueError(
                "quantiles must each be from 0 to 1 (0.99 for the 99th "
                f"percentile), got {q!r}."
            )
    return checked


class IntervalQuantiles:
    """What a watch logs of its target's histograms: quantiles over the observations since its previous logged snapshot.

    ``histograms()`` returns the target's cumulative histograms by key
    (entries that are not :class:`Histogram` are left out). A key with no
    observation since the previous logged snapshot gets no entry.

    Examples:
        >>> latency = Histogram()
        >>> quantiles = IntervalQuantiles(lambda: {"latency": latency.copy()}, (0.5,))
        >>> latency.add(2.0)
        >>> payload = {}
        >>> quantiles.add_to(payload, "w/")
        >>> round(payload["w/latency_p50"], 1)
        2.0
        >>> quantiles.commit()  # logged: the next interval starts here
        >>> payload = {}
        >>> quantiles.add_to(payload, "w/")
        >>> payload
        {}
    """

    def __init__(
        self,
        histograms: Callable[[], Mapping[str, Histogram]],
        quantiles: tuple[float, ...],
    ) -> None:
        self._histograms = histograms
        self._names = [(q, quantile_name(q)) for q in quantiles]
        self._baseline: Mapping[str, Histogram] = {}
        self._pending: Mapping[str, Histogram] = {}

    def add_to(self, payload: dict[str, float], prefix: str) -> None:
        """Add ``<prefix><key>_<quantile>`` entries of the observations since the last :meth:`commit`."""
        current = self._histograms()
        if not isinstance(current, Mapping):
            return
        for key, histogram in current.items():
            if not isinstance(histogram, Histogram):
                continue
            interval = histogram.since(self._baseline.get(key))
            for q, name in self._names:
                value = interval.quantile(q)
                if value is None:
                    break  # no observation since
                payload[f"{prefix}{key}_{name}"] = value
        self._pending = current

    def commit(self) -> None:
        """The payload :meth:`add_to` filled was logged: the next interval starts there."""
        self._baseline = self._pending
