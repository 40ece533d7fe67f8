"""Distributions: cumulative histograms in base-2 exponential buckets, and quantiles over an interval.

A :class:`Histogram` counts observations in the buckets of OpenTelemetry's
exponential histogram and Prometheus's native histograms at scale
:data:`SCALE` (6): bucket ``i`` holds the values in ``(BASE**i,
BASE**(i+1)]`` with ``BASE = 2**(2**-6)``, 64 buckets per power of two,
exact powers of two in the lower bucket. Zeros are counted apart, negative
values in mirrored buckets. Any quantile read from it is within
:data:`RELATIVE_ERROR` (0.55 %) of the observation it stands for, from
nanoseconds to gigabytes; histograms of several workers merge exactly, and
an exporter hands the buckets over as they are (:meth:`Histogram.buckets`).

A histogram is cumulative and cheap to copy: two copies taken at different
times give the distribution of what was observed in between
(:meth:`Histogram.since`), which is how a watch logs ``<key>_p99`` over the
observations since its previous logged snapshot.

A quantile is clamped to the smallest and largest observation of its
interval, so one observation's p50 is that observation and a constant's
quantiles are the constant. The writer pays two comparisons for that: it
keeps the extremes of the current *epoch*; each :meth:`Histogram.copy` (a
reader) closes the epoch and keeps its extremes, the last
:data:`KEPT_EPOCHS` of them, in the copy it returns. An interval between
two copies spans whole epochs, so its extremes are those of its epochs —
for any number of readers, each with intervals of its own. Where they are
unknown (an interval spanning more epochs than are kept, histograms built
elsewhere such as :class:`~rlpulse.SharedCounters`' merged buckets), an
interval of one observation takes it from the difference of the sums, and
a histogram whose every observation was one value is that value; otherwise
a quantile is its bucket's middle. A copy taken while the writer is
half-way through :meth:`Histogram.add` can see one observation's extremes
an epoch early or late; a clamp never moves a quantile out of its bucket,
so such a quantile is still within that bucket.

A watched target with a ``histograms()`` method returning
``{key: Histogram}`` (copies: see :meth:`rlpulse.Tally.histograms`) gets
those quantiles logged (:class:`IntervalQuantiles`).
"""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import compress
from typing import Any, NamedTuple

__all__ = [
    "BASE",
    "DEFAULT_QUANTILES",
    "HIGHEST_BUCKET",
    "KEPT_EPOCHS",
    "LOWEST_BUCKET",
    "MOST_BINS",
    "RELATIVE_ERROR",
    "SCALE",
    "Bins",
    "Buckets",
    "Histogram",
    "IntervalQuantiles",
    "Intervals",
    "bins",
    "bucket_index",
    "check_quantiles",
    "quantile_name",
]

SCALE = 6
"""The scale of the buckets, as OpenTelemetry and Prometheus (``schema``) name it: ``2**SCALE`` buckets per power of two."""

BASE = 2.0**2.0**-SCALE
"""The ratio of a bucket's upper bound to its lower bound: ``2**(2**-SCALE)``, about 1.0109."""

RELATIVE_ERROR = (BASE - 1) / (BASE + 1)
"""The most a quantile read from a :class:`Histogram` differs from the observation it stands for, relatively: about 0.54 %."""

KEPT_EPOCHS = 64
"""How many epochs' extremes a copy keeps: an interval spanning more (other readers' copies in between) is not clamped."""

MOST_BINS = 64
"""How many bins :func:`bins` gives a histogram at most, by default: what a chart of one shows."""

DEFAULT_QUANTILES = (0.5, 0.9, 0.99)
"""The quantiles a watch logs by default: ``<key>_p50``, ``<key>_p90``, ``<key>_p99``."""

_PER_OCTAVE = float(2**SCALE)
# A bucket (lower, upper] stands for the value within RELATIVE_ERROR of
# both its bounds: upper * _MIDDLE.
_MIDDLE = 2 / (1 + BASE)
# How far outside its bucket an observation may seem: the bounds are
# rounded, and the index of a value within an ulp or two of a bound may
# be its neighbour's.
_SLACK = 1e-12
_INF = math.inf
# Bucket indices from -_REACH to _REACH - 1 (2**-32 to 2**32) are counted in
# a list, quicker to add to than a dict: index i in slot i + _REACH.
_REACH = 32 * 2**SCALE
# The slot of a value, ceil(log2(value) * 64) plus this: its index, shifted.
_SLOT_SHIFT = _REACH - 1
_ceil = math.ceil
_log2 = math.log2
# Readers (copy) close epochs one at a time; writers never take it.
_READERS = threading.Lock()


def bucket_index(value: float) -> int:
    """The index of the bucket of positive ``value``: ``i`` such that ``BASE**i < value <= BASE**(i+1)``.

    OpenTelemetry's mapping at scale 6: an exact power of two is the upper
    bound of its bucket (``2.0`` is in bucket 63, ``(BASE**63, 2]``).
    Computed as ``ceil(log2(value) * 64) - 1``: ``log2`` is exact on powers
    of two and the product by 64 is exact, so only values within an ulp or
    two of a bucket's irrational bound can land in its neighbour.

    Examples:
        >>> bucket_index(1.0), bucket_index(1.005), bucket_index(2.0), bucket_index(0.5)
        (-1, 0, 63, -65)
    """
    return math.ceil(math.log2(value) * _PER_OCTAVE) - 1


def _upper_bound(index: int) -> float:
    try:
        return math.pow(2.0, (index + 1) / _PER_OCTAVE)
    except OverflowError:  # the top bucket's bound, 2**1024, is no float
        return sys.float_info.max


LOWEST_BUCKET = bucket_index(1e-9)
"""The bucket of a nanosecond: the lowest a fixed-size histogram (shared memory) keeps."""

HIGHEST_BUCKET = bucket_index(1e9)
"""The bucket of a billion: the highest a fixed-size histogram keeps."""


class Buckets(NamedTuple):
    """One sign's buckets as exporters take them: the index of the first, and the counts from there on.

    ``counts[k]`` is the count of bucket ``offset + k``: OpenTelemetry's
    ``positive.offset`` and ``positive.bucket_counts``; Prometheus's native
    histogram spans hold the same counts, its bucket keys one higher
    (a key is a bucket's upper bound).

    Examples:
        >>> Buckets(offset=-1, counts=[2, 0, 1])
        Buckets(offset=-1, counts=[2, 0, 1])
    """

    offset: int
    counts: list[int]


class Histogram:
    """Cumulative counts of observations in base-2 exponential buckets; quantiles within 0.55 %.

    The buckets of OpenTelemetry's exponential histogram at scale 6
    (:func:`bucket_index`): :attr:`positive` counts by bucket index the
    values in ``(BASE**i, BASE**(i+1)]``, :attr:`negative` the values whose
    negation is there, :attr:`zero_count` the zeros; :attr:`sum`,
    :attr:`min` and :attr:`max` go with them. :meth:`add` takes a finite
    value. One thread may add while others :meth:`copy`.

    Examples:
        >>> histogram = Histogram()
        >>> for latency_ms in range(1, 101):
        ...     histogram.add(latency_ms / 1000)
        >>> histogram.count, round(histogram.sum, 3), histogram.min, histogram.max
        (100, 5.05, 0.001, 0.1)
        >>> round(histogram.quantile(0.5), 4), round(histogram.quantile(0.99), 4)
        (0.0501, 0.099)
        >>> later = histogram.copy()
        >>> later.add(5.0)
        >>> later.since(histogram).quantile(0.5)  # only what came since
        5.0
        >>> histogram.buckets().offset  # 0.001 is in (BASE**-638, BASE**-637]
        -638
    """

    __slots__ = (
        "_epoch",
        "_high",
        "_lineage",
        "_low",
        "_max",
        "_min",
        "_negative",
        "_negative_dense",
        "_positive",
        "_positive_dense",
        "_sealed",
        "sum",
        "zero_count",
    )

    def __init__(
        self,
        *,
        positive: Mapping[int, int] | None = None,
        negative: Mapping[int, int] | None = None,
        zero_count: int = 0,
        sum: float = 0.0,
        min: float | None = None,
        max: float | None = None,
    ) -> None:
        # Counts by bucket index: those of add() from -_REACH to _REACH - 1
        # in a list, made on the first such add() (index i in slot
        # i + _REACH), the others in a dict.
        self._positive: dict[int, int] = dict(positive or {})
        self._negative: dict[int, int] = dict(negative or {})
        self._positive_dense: list[int] = []
        self._negative_dense: list[int] = []
        self.zero_count = zero_count
        self.sum = sum
        empty = not (self._positive or self._negative or zero_count)
        # The extremes of the closed epochs; -inf and inf where unknown.
        self._min = min if min is not None else _INF if empty else -_INF
        self._max = max if max is not None else -_INF if empty else _INF
        # The extremes of the current epoch: what add() compares with.
        self._low = _INF
        self._high = -_INF
        # Epochs closed so far, the extremes of the last KEPT_EPOCHS of
        # them, and what tells copies of this histogram from others'.
        self._epoch = 0
        self._sealed: tuple[tuple[float, float], ...] = ()
        self._lineage = object()

    def add(self, value: float) -> None:
        """Count one finite observation ``value``."""
        self.add_all((value,))

    def add_all(self, values: Sequence[float]) -> None:
        """Count each of ``values``, finite observations.

        Examples:
            >>> histogram = Histogram()
            >>> histogram.add_all([0.5, 2.0, 0.0, -1.0])
            >>> histogram.count, histogram.sum, histogram.min, histogram.max
            (4, 1.5, -1.0, 2.0)
        """
        if not values:
            return
        # bucket_index, inline, over locals: a tally files its observations
        # here in batches, on the thread that reads it.
        positive, negative, zeros = self._positive_dense, self._negative_dense, 0
        # A slot past the list's end raises IndexError; one below 0 would
        # count from its end (another bucket's), so it is checked.
        shift = _SLOT_SHIFT
        for value in values:
            if value > 0.0:
                slot = _ceil(_log2(value) * _PER_OCTAVE) + shift
                dense = positive
            elif value < 0.0:
                slot = _ceil(_log2(-value) * _PER_OCTAVE) + shift
                dense = negative
            else:
                zeros += 1
                continue
            if slot >= 0:
                try:
                    dense[slot] += 1
                    continue
                except IndexError:
                    pass
            # Beyond the dense slots (rare): counted in the sparse ones.
            if dense is positive:
                positive = _count_beyond(self._positive, positive, slot - _REACH)
            else:
                negative = _count_beyond(self._negative, negative, slot - _REACH)
        self._positive_dense, self._negative_dense = positive, negative
        self.zero_count += zeros
        # Added in order, as one by one.
        self.sum = sum(values, self.sum)
        self._low = min(self._low, min(values))
        self._high = max(self._high, max(values))

    @property
    def positive(self) -> dict[int, int]:
        """The counts of the positive values by bucket index (a copy; empty buckets left out)."""
        return _merged(self._positive, self._positive_dense)

    @property
    def negative(self) -> dict[int, int]:
        """The counts of the negative values by the bucket index of their negation (a copy)."""
        return _merged(self._negative, self._negative_dense)

    @property
    def count(self) -> int:
        """How many observations were counted."""
        return (
            self.zero_count
            + sum(self._positive.values())
            + sum(self._positive_dense)
            + sum(self._negative.values())
            + sum(self._negative_dense)
        )

    @property
    def min(self) -> float | None:
        """The smallest observation counted; ``None`` when there is none or it is unknown."""
        low = self._min if self._min < self._low else self._low
        return low if -_INF < low < _INF else None

    @property
    def max(self) -> float | None:
        """The largest observation counted; ``None`` when there is none or it is unknown."""
        high = self._max if self._max > self._high else self._high
        return high if -_INF < high < _INF else None

    def buckets(self, negative: bool = False) -> Buckets:
        """The positive buckets (``negative=True``: the negative ones) as an offset and dense counts.

        Examples:
            >>> histogram = Histogram()
            >>> for value in (1.0, 1.01, 1.03, -2.0):
            ...     histogram.add(value)
            >>> histogram.buckets(), histogram.buckets(negative=True)
            (Buckets(offset=-1, counts=[1, 1, 0, 1]), Buckets(offset=63, counts=[1]))
            >>> Histogram().buckets()
            Buckets(offset=0, counts=[])
        """
        counted = self.negative if negative else self.positive
        if not counted:
            return Buckets(0, [])
        offset = min(counted)
        counts = [0] * (max(counted) - offset + 1)
        for index, count in counted.items():
            counts[index - offset] = count
        return Buckets(offset, counts)

    def copy(self) -> Histogram:
        """A copy that later :meth:`add` calls leave as it is; it closes the current epoch (see the module's docs)."""
        with _READERS:
            low, high = self._low, self._high
            if low <= high:  # observed since the last copy: close the epoch
                self._low, self._high = _INF, -_INF
                self._sealed = (*self._sealed[1 - KEPT_EPOCHS :], (low, high))
                self._epoch += 1
                if low < self._min:
                    self._min = low
                if high > self._max:
                    self._max = high
            # Copying a list or a dict is one step a thread adding cannot
            # interleave with.
            copied = Histogram(
                positive=_merged(self._positive.copy(), self._positive_dense[:]),
                negative=_merged(self._negative.copy(), self._negative_dense[:]),
                zero_count=self.zero_count,
                sum=self.sum,
            )
            copied._min, copied._max = self._min, self._max
            copied._epoch, copied._sealed = self._epoch, self._sealed
            copied._lineage = self._lineage
        return copied

    def merge(self, other: Histogram) -> None:
        """Add the counts of ``other`` to these (workers' histograms merged into one)."""
        low, high = other.min, other.max
        unknown = other.count and (low is None or high is None)
        for buckets, more in (
            (self._positive, other.positive),
            (self._negative, other.negative),
        ):
            for index, count in more.items():
                buckets[index] = buckets.get(index, 0) + count
        self.zero_count += other.zero_count
        self.sum += other.sum
        if unknown:
            self._min, self._max = -_INF, _INF
        else:
            self._min = min(self._min, self._low, _INF if low is None else low)
            self._max = max(self._max, self._high, -_INF if high is None else high)
        self._low, self._high = _INF, -_INF
        # Merged, its epochs are no copy's.
        self._epoch, self._sealed, self._lineage = 0, (), object()

    def since(self, earlier: Histogram | None) -> Histogram:
        """The observations counted here and not in ``earlier``, a copy of this histogram taken before.

        Its :attr:`min` and :attr:`max` are the interval's, where known
        (see the module's docs).
        """
        if earlier is None:
            return self
        interval = Histogram(
            positive=_difference(self.positive, earlier.positive),
            negative=_difference(self.negative, earlier.negative),
            zero_count=max(0, self.zero_count - earlier.zero_count),
            sum=self.sum - earlier.sum,
        )
        interval._min, interval._max = self._extremes_since(earlier, interval)
        return interval

    def _extremes_since(
        self, earlier: Histogram, interval: Histogram
    ) -> tuple[float, float]:
        # The extremes of what was observed between earlier and this, or
        # -inf and inf where they are unknown.
        count = interval.count
        if not count:
            return _INF, -_INF
        epochs = self._epoch - earlier._epoch
        if self._lineage is earlier._lineage and 0 <= epochs <= len(self._sealed):
            low, high = self._low, self._high
            for sealed_low, sealed_high in self._sealed[len(self._sealed) - epochs :]:
                low = min(low, sealed_low)
                high = max(high, sealed_high)
            return low, high
        if count == 1:
            return interval.sum, interval.sum
        if self.min is not None and self.min == self.max:
            return self.min, self.min
        return -_INF, _INF

    def quantile(self, q: float) -> float | None:
        """The smallest observation with at least a share ``q`` of them at or below it, within 0.55 %; ``None`` when empty.

        The nearest rank (numpy's ``method="inverted_cdf"``): of 50
        observations, ``q=0.99`` gives the largest (49 of them are only
        98 %), so one slow call among 50 shows in a p99. ``q`` from 0 (the
        smallest) to 1 (the largest). Clamped to :attr:`min` and
        :attr:`max` where known, and those where ``q`` is 0 or 1: one
        observation's quantiles are the observation.

        >>> Histogram().quantile(50)
        Traceback (most recent call last):
        ...
        ValueError: Histogram.quantile(q) takes a share from 0 to 1 (0.99 for the 99th percentile), got 50.
        """
        if not 0 <= q <= 1:  # NaN too
            raise ValueError(
                "Histogram.quantile(q) takes a share from 0 to 1 (0.99 for the "
                f"99th percentile), got {q!r}."
            )
        count = self.count
        if not count:
            return None
        # The 0-based index of the observation that is the quantile.
        # (Rounded first: 0.9 * 100 is 90.00000000000001.)
        rank = max(math.ceil(round(q * count, 9)) - 1, 0)
        seen = 0
        negative = self.negative
        for index in sorted(negative, reverse=True):  # most negative first
            seen += negative[index]
            if seen > rank:
                upper = _upper_bound(index)
                return self._clamped(
                    rank, count, -upper * _MIDDLE, -upper, -upper / BASE
                )
        seen += self.zero_count
        if seen > rank:
            return 0.0
        positive = self.positive
        for index in sorted(positive):
            seen += positive[index]
            if seen > rank:
                upper = _upper_bound(index)
                return self._clamped(rank, count, upper * _MIDDLE, upper / BASE, upper)
        return None  # not reached: seen ends at count > rank

    def _clamped(
        self, rank: int, count: int, estimate: float, lower: float, upper: float
    ) -> float:
        # The observation of 0-based rank, estimated as the middle of its
        # bucket [lower, upper]: clamped to the extremes that lie in that
        # bucket, or the extreme itself if it is the first or last. An
        # extreme outside the bucket (a copy taken half-way through an add)
        # is not this bucket's observation.
        slack = _SLACK * abs(upper if upper else lower)
        low, high = self.min, self.max
        if (
            low is not None
            and (estimate < low or rank == 0)
            and lower - slack <= low <= upper + slack
        ):
            estimate = low
        if (
            high is not None
            and (estimate > high or rank == count - 1)
            and lower - slack <= high <= upper + slack
        ):
            estimate = high
        return estimate

    def __repr__(self) -> str:
        return f"Histogram(count={self.count})"


def _downscaled(counts: dict[int, int], shift: int) -> dict[int, int]:
    # Bucket i is within bucket i >> shift of the scale SCALE - shift.
    merged: dict[int, int] = {}
    for index, count in counts.items():
        merged[index >> shift] = merged.get(index >> shift, 0) + count
    return merged


def _count_beyond(sparse: dict[int, int], dense: list[int], index: int) -> list[int]:
    # add()'s slow path: the first count near 1 makes the list, one beyond
    # it goes to the dict. Returns the list add() keeps.
    if not dense and -_REACH <= index < _REACH:
        dense = [0] * (2 * _REACH)
        dense[index + _REACH] = 1
    else:
        sparse[index] = sparse.get(index, 0) + 1
    return dense


def _merged(sparse: dict[int, int], dense: list[int]) -> dict[int, int]:
    # The counts of both, by bucket index: the list's slot s is index
    # s - _REACH.
    counts = sparse.copy()
    for slot in compress(range(len(dense)), dense):
        index = slot - _REACH
        counts[index] = counts.get(index, 0) + dense[slot]
    return counts


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


class Bins(NamedTuple):
    """A histogram as charting backends take it: ``counts[k]`` observations between ``edges[k]`` and ``edges[k + 1]``.

    What ``numpy.histogram`` returns, the other way round; ``edges[1:]``
    are the upper bounds TensorBoard's ``HistogramProto`` takes.

    Examples:
        >>> Bins(edges=[1.0, 2.0, 4.0], counts=[3, 1], sum_of_squares=9.5)
        Bins(edges=[1.0, 2.0, 4.0], counts=[3, 1], sum_of_squares=9.5)
    """

    edges: list[float]
    counts: list[int]
    sum_of_squares: float
    """Estimated: each observation taken as the middle of its bucket (within 1.1 %)."""


def bins(histogram: Histogram, most: int = MOST_BINS) -> Bins:
    """``histogram``'s buckets merged into at most ``most`` contiguous bins (``most`` of 3 or more), in increasing order.

    Adjacent buckets merge as OpenTelemetry downscales an exponential
    histogram: by powers of two, so every bin is still a bucket of a
    coarser scale (its edges powers of ``2**(2**-s)``) and its count is
    exact. The bins span the buckets observed; negative values' bins come
    first, then one bin holding the zeros that reaches from the negative
    bins to the positive ones (left out when there are neither zeros nor
    values of both signs).

    Examples:
        >>> observed = Histogram()
        >>> observed.add_all([1.5, 3.0, 3.5, 12.0])
        >>> edges, counts, sum_of_squares = bins(observed, most=4)
        >>> edges, counts  # (1, 2], (2, 4], (4, 8], (8, 16]
        ([1.0, 2.0, 4.0, 8.0, 16.0], [1, 2, 0, 1])
        >>> round(sum_of_squares, 1)  # 167.5 exactly
        167.7
        >>> bins(observed, most=3).counts  # (1, 4], (4, 16]
        [3, 1]
        >>> observed.add_all([0.0, -3.0])
        >>> bins(observed, most=4)[:2]  # [-4, -1), [-1, 1] holding the zero, (1, 4], (4, 16]
        ([-4.0, -1.0, 1.0, 4.0, 16.0], [1, 1, 3, 1])
    """
    if most < 3:
        raise ValueError(
            f"bins takes most=3 or more (the negative values, the zeros and "
            f"the positive ones may each need a bin), got {most!r}"
        )
    positive, negative = histogram.positive, histogram.negative
    # Squared by multiplying: beyond 1e154 it is infinite, where ** raises.
    middles = [
        (_upper_bound(index) * _MIDDLE, count)
        for counted in (positive, negative)
        for index, count in counted.items()
    ]
    sum_of_squares = sum(count * value * value for value, count in middles)
    zeros_bin = 1 if histogram.zero_count or (positive and negative) else 0
    shift = 0
    while True:
        spans = [
            (max(counted) >> shift) - (min(counted) >> shift) + 1
            for counted in (positive, negative)
            if counted
        ]
        if sum(spans) + zeros_bin <= most or max(spans, default=1) == 1:
            break
        shift += 1

    def lower_bound(coarse: int) -> float:
        return _upper_bound((coarse << shift) - 1)

    merged_negative = _downscaled(negative, shift)
    merged_positive = _downscaled(positive, shift)
    edges: list[float] = []
    counts: list[int] = []
    if merged_negative:
        # Bin j holds [-lower_bound(j + 1), -lower_bound(j)), the largest first.
        low, high = min(merged_negative), max(merged_negative)
        edges.append(-lower_bound(high + 1))
        for coarse in range(high, low - 1, -1):
            counts.append(merged_negative.get(coarse, 0))
            edges.append(-lower_bound(coarse))
    if zeros_bin:
        edges = edges or [0.0]
        counts.append(histogram.zero_count)
        edges.append(lower_bound(min(merged_positive)) if merged_positive else 0.0)
    if merged_positive:
        # Bin j holds (lower_bound(j), lower_bound(j + 1)].
        low, high = min(merged_positive), max(merged_positive)
        edges = edges or [lower_bound(low)]
        for coarse in range(low, high + 1):
            counts.append(merged_positive.get(coarse, 0))
            edges.append(lower_bound(coarse + 1))
    return Bins(edges, counts, sum_of_squares)


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
        >>> interval = quantiles.add_to(payload, "w/")
        >>> round(payload["w/latency_p50"], 1), interval.histograms["w/latency"].count
        (2.0, 1)
        >>> quantiles.commit(interval.marks)  # logged: the next interval starts here
        >>> payload = {}
        >>> quantiles.add_to(payload, "w/").histograms, payload
        ({}, {})
    """

    def __init__(
        self,
        histograms: Callable[[], Mapping[str, Histogram]],
        quantiles: tuple[float, ...],
    ) -> None:
        self._histograms = histograms
        self._names = [(q, quantile_name(q)) for q in quantiles]
        self._baseline: Mapping[str, Histogram] = {}

    def add_to(self, payload: dict[str, float], prefix: str) -> Intervals:
        """Add ``<prefix><key>_<quantile>`` entries of the observations since the last :meth:`commit`; return those observations.

        The :class:`Intervals` returned holds, by ``<prefix><key>``, the
        histogram of each key's observations since (keys without any are
        left out), and what :meth:`commit` takes once the payload is logged.
        """
        current = self._histograms()
        if not isinstance(current, Mapping):
            return Intervals({}, self._baseline)
        intervals: dict[str, Histogram] = {}
        for key, histogram in current.items():
            if not isinstance(histogram, Histogram):
                continue
            interval = histogram.since(self._baseline.get(key))
            if not interval.count:
                continue  # no observation since
            intervals[f"{prefix}{key}"] = interval
            for q, name in self._names:
                value = interval.quantile(q)
                if value is not None:
                    payload[f"{prefix}{key}_{name}"] = value
        return Intervals(intervals, current)

    def commit(self, marks: Mapping[str, Histogram]) -> None:
        """The payload :meth:`add_to` filled was logged: the next interval starts at ``marks``, the :attr:`Intervals.marks` it returned."""
        self._baseline = marks


class Intervals(NamedTuple):
    """The observations of one logged interval, by payload key, and where the next interval starts."""

    histograms: dict[str, Histogram]
    """Each key's observations since the previous logged snapshot, keyed ``<watch>/<key>``."""
    marks: Mapping[str, Histogram]
    """The cumulative histograms read: the start of the next interval once this one is logged."""
