"""What every run file format shares: the records, the errors, the kinds, preparing a file.

A record is one metric value as a file sink stored it, with its kind
(:class:`~rlpulse.naming.Kind`); a format that stores no kind for a metric
(a file of rlpulse 0.1.0) has it guessed from the run's names
(:func:`kinds_completed`). A :class:`DistributionRecord` is one logged
interval's histogram of a distribution; :func:`merge_distributions` adds
intervals up into the histogram of any span of a run.

What the readers that summarise and draw a run need of it, each format
gives where its data is: a :class:`RunAggregate` (each metric's first,
last, extremes, growth and mean: :func:`aggregate` streams records into
one, the SQLite format asks SQL) and a :class:`Downsampled` run (each
metric's points, at most about two a bucket of time: :func:`downsample`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

from rlpulse.distributions import Histogram
from rlpulse.naming import Kind, Unit, inferred_kind, split, unit_of
from rlpulse.runtime.events import Event

__all__ = [
    "DistributionRecord",
    "Downsampled",
    "Followed",
    "MetricAccumulator",
    "MetricAggregate",
    "Points",
    "Record",
    "RunAggregate",
    "RunFileError",
    "RunFileWarning",
    "RunInfo",
    "aggregate",
    "downsample",
    "kind_named",
    "kinds_completed",
    "merge_distributions",
    "not_there_yet",
    "prepare_record_file",
    "unwritable",
]


class Record(NamedTuple):
    """One metric value as stored by a file sink: when, at which step, what, how much, of what kind.

    ``wall_time`` is seconds since the epoch of the poll that produced it and
    ``step`` is ``None`` when the payload had no step. ``name`` is the
    payload key ``<watch>/<metric>`` (:attr:`watch`, :attr:`metric`).
    ``kind`` is the metric's :class:`~rlpulse.naming.Kind`: :func:`read`
    always gives one (stored, or guessed for files that store none); a
    record built without one has ``None``, and the readers that summarise
    records guess it from the run's names.

    >>> record = Record(wall_time=1700000000.0, step=3, name="collector/worker_0/frames", value=96.0)
    >>> record.watch, record.metric, record.value, record.kind
    ('collector', 'worker_0/frames', 96.0, None)
    >>> str(Record(1.5, None, "learner/update_s_p99", 0.01, Kind.GAUGE).unit)
    'seconds'
    """

    wall_time: float
    step: int | None
    name: str
    value: float
    kind: Kind | None = None

    @property
    def watch(self) -> str:
        """The watch the metric was logged under (``""`` for a name without one)."""
        return split(self.name)[0]

    @property
    def metric(self) -> str:
        """The metric's name within its watch."""
        return split(self.name)[1]

    @property
    def unit(self) -> Unit | None:
        """The unit the metric's name says (:func:`rlpulse.naming.unit_of`); ``None`` when it says none."""
        return unit_of(self.metric)


class DistributionRecord(NamedTuple):
    """One logged interval of a distribution as a file sink stored it: when, at which step, what, and its histogram.

    ``histogram`` (:class:`rlpulse.distributions.Histogram`) holds the
    observations of ``name`` (``<watch>/<key>``, a :class:`~rlpulse.Tally`'s
    observed key) over the interval the payload of ``wall_time`` closed:
    since the watch's previous logged snapshot. Intervals do not overlap,
    so the histogram of any span of a run is its intervals' merged
    (:func:`merge_distributions`).

    >>> histogram = Histogram()
    >>> histogram.add(0.25)
    >>> record = DistributionRecord(1700000000.0, 3, "learner/update_s", histogram)
    >>> record.watch, record.histogram.count
    ('learner', 1)
    """

    wall_time: float
    step: int | None
    name: str
    histogram: Histogram

    @property
    def watch(self) -> str:
        """The watch the distribution was logged under (``""`` for a name without one)."""
        return split(self.name)[0]


def merge_distributions(records: Iterable[DistributionRecord]) -> dict[str, Histogram]:
    """The histogram of each distribution over the intervals of ``records``, by name, sorted by name.

    Merging is exact (the buckets are the same for every interval): a
    quantile of the merged histogram is one of everything observed in
    those intervals, within 0.55 %.

    >>> intervals = []
    >>> for wall_time, values in ((1.0, (1.0, 2.0)), (2.0, (3.0, 4.0))):
    ...     histogram = Histogram()
    ...     for value in values:
    ...         histogram.add(value)
    ...     intervals.append(DistributionRecord(wall_time, None, "w/x", histogram))
    >>> merged = merge_distributions(intervals)["w/x"]
    >>> merged.count, merged.min, merged.max, round(merged.quantile(0.5), 1)
    (4, 1.0, 4.0, 2.0)
    """
    merged: dict[str, Histogram] = {}
    for record in records:
        histogram = merged.get(record.name)
        if histogram is None:
            histogram = merged[record.name] = Histogram()
        histogram.merge(record.histogram)
    return dict(sorted(merged.items()))


class Followed(NamedTuple):
    """What a run file gained since a follower last looked: its new records and events, in order.

    ``more`` says that the follower stopped at its limit with more already
    written: the next look goes on from there. ``new_run`` that it moved on
    to another run (started later in the same file, or in a file written
    anew at the path): what was kept of the one before is to be forgotten.

    >>> Followed([], [], more=False).records
    []
    """

    records: list[Record]
    events: list[Event]
    more: bool = False
    new_run: bool = False


class RunFileError(ValueError):
    """A metrics file that cannot be used as asked: empty, corrupt, foreign, or without that run.

    Raised by ``read`` and ``list_runs``, and by a sink given an existing file
    of another format. Its message is one line naming the file and what is
    wrong with it.

    >>> import tempfile, pathlib
    >>> from rlpulse import read
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     empty = pathlib.Path(tmp) / "metrics.csv"
    ...     _ = empty.write_text("")
    ...     try:
    ...         read(empty)
    ...     except RunFileError as error:
    ...         print("is empty" in str(error))
    True
    """


class RunFileWarning(UserWarning):
    """What reading a CSV or JSON lines file left out: a last line cut short.

    A writer still appending completes it (``rlpulse top`` reads it at its
    next frame); in a finished file it was cut short by a crash, or written
    by hand without its end. Its message is one line naming the file, the
    line and what it lacks; ``rlpulse show`` prints it as a note.

    >>> import tempfile, pathlib, warnings
    >>> from rlpulse import read
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "metrics.csv"
    ...     _ = path.write_text("wall_time,step,name,value\\n1.5,3,c/frames,96\\n2.5,4,c/fr")
    ...     with warnings.catch_warnings(record=True) as caught:
    ...         warnings.simplefilter("always")
    ...         records = list(read(path))
    >>> len(records), str(caught[0].message).split(": ", 1)[1]
    (1, "left out line 3, cut short: no newline at its end: '2.5,4,c/fr'")
    """


class RunInfo(NamedTuple):
    """One run of a SQLite file at a glance: its name, when its records start and end, how many there are.

    ``start_wall_time`` is its first record's time (when it was opened, for
    a run without records) and ``end_wall_time`` its last one's.

    >>> RunInfo("baseline", 100.0, 130.5, 42).seconds
    30.5
    """

    name: str
    start_wall_time: float
    end_wall_time: float
    records: int

    @property
    def seconds(self) -> float:
        """Seconds from the first record to the last."""
        return self.end_wall_time - self.start_wall_time


# The schemes of the file sinks' specs (rlpulse.sinks.registry): a path that
# starts with one was meant as a spec.
_FILE_SCHEMES = frozenset({"sqlite", "csv", "jsonl"})


def prepare_record_file(path: str | os.PathLike[str]) -> Path:
    """Return ``path`` as a ``Path`` to a file that exists and can be appended to.

    Missing parent directories are created (the convention of TensorBoard's
    and TorchRL's loggers for their log directories). An empty path raises
    ``ValueError``, and so does a file sink's spec (``sqlite:runs/a.sqlite``
    would make a folder ``sqlite:runs``); one that cannot be written (a
    directory, a parent that is a file, no permission) raises the matching
    ``OSError`` with a message naming the path.

    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = prepare_record_file(pathlib.Path(tmp) / "new" / "metrics.csv")
    ...     path.exists(), path.stat().st_size
    (True, 0)
    """
    if not os.fspath(path):
        raise ValueError(
            "the path of the metrics file is empty; give a file path such as "
            "'runs/metrics.sqlite'"
        )
    scheme, colon, rest = os.fspath(path).partition(":")
    if colon and scheme in _FILE_SCHEMES and not os.path.lexists(path):
        raise ValueError(
            f"{os.fspath(path)!r} is a sink spec (SCHEME:PATH, as LoggerMonitor, "
            f"SinkProcess and --sink take them), not a file path: a file sink "
            f"takes the path itself, {rest!r}"
        )
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab"):
            pass
    except OSError as error:
        raise unwritable(path, error) from error
    return path


def not_there_yet(path: Path) -> str:
    """What a follower waiting for the file at ``path`` says: that it does not exist yet, and that its folder does not either where so (a mistyped folder).

    >>> not_there_yet(Path("/no/such/folder/run.sqlite"))
    '/no/such/folder/run.sqlite does not exist yet, nor its folder /no/such/folder'
    """
    if path.parent.is_dir():
        return f"{path} does not exist yet"
    return f"{path} does not exist yet, nor its folder {path.parent}"


def unwritable(path: Path, error: OSError) -> OSError:
    reason = error.strerror or str(error)
    message = (
        f"cannot write metrics to {path}: {reason}; "
        "give the path of a file in a directory you can write to"
    )
    return type(error)(error.errno, message)


def kind_named(text: object) -> Kind | None:
    """The kind ``text`` names; ``None`` for a kind this version does not know (guessed from the name instead).

    >>> kind_named("counter"), kind_named("histogram")
    (<Kind.COUNTER: 'counter'>, None)
    """
    try:
        return Kind(text)
    except ValueError:
        return None


def kinds_completed(
    records: Iterator[Record], names: Callable[[], Iterable[str]]
) -> Iterator[Record]:
    """``records``, each whose kind the file does not store given the kind guessed from the run's names.

    ``names()`` reads every name of the run, once, when a record first
    needs it: a file that stores every kind is read once.
    """
    guessed: dict[str, Kind] = {}
    run_names: set[str] | None = None
    for record in records:
        if record.kind is not None:
            yield record
            continue
        kind = guessed.get(record.name)
        if kind is None:
            if run_names is None:
                run_names = set(names())
            kind = guessed[record.name] = inferred_kind(record.name, run_names)
        yield Record(record.wall_time, record.step, record.name, record.value, kind)


# Summarising and downsampling a run


class MetricAggregate(NamedTuple):
    """One metric over a run, in the figures a summary needs: how many records, the first and last value, the extremes, its growth, its mean.

    ``first``, ``last`` and their wall times are those of its first and last
    record in the order they were written; NaN values count in ``records``
    and may be ``first`` or ``last``, never the extremes (NaN when every
    value is). ``growth`` is what the metric grew by from each non-NaN
    value to the next, leaving out where it went down (a counter's reset),
    and ``growth_s`` the seconds over which it grew: a counter's mean rate
    is their ratio (a format that knows the kinds before reading, SQLite,
    computes them for counters only: 0 for the rest). ``finite_sum`` and ``finite_count`` are the sum and the
    number of its finite values. ``kind`` is what its records say (a
    counter if any says so), ``None`` when none says.

    >>> (frames,) = aggregate([Record(10.0, 0, "c/frames", 0.0), Record(12.0, 1, "c/frames", 500.0)]).metrics
    >>> frames.growth / frames.growth_s, frames.finite_sum / frames.finite_count
    (250.0, 250.0)
    """

    name: str
    kind: Kind | None
    records: int
    first: float
    last: float
    minimum: float
    maximum: float
    first_wall_time: float
    last_wall_time: float
    growth: float
    growth_s: float
    finite_sum: float
    finite_count: int


class RunAggregate(NamedTuple):
    """A run in aggregate: how many records, from when to when, and each metric's :class:`MetricAggregate`, sorted by name.

    ``start_wall_time`` and ``end_wall_time`` are ``None`` without records.

    >>> aggregate([]).records, aggregate([]).start_wall_time
    (0, None)
    """

    records: int
    start_wall_time: float | None
    end_wall_time: float | None
    metrics: tuple[MetricAggregate, ...]


class MetricAccumulator:
    """The running aggregate of one metric while its values stream past: what :func:`aggregate` and a SQLite run's summaries keep.

    Built from the metric's first record (its value and wall time, and its
    kind where known), then given every record, the first included, in
    order. :meth:`take` takes in a value alone; :meth:`add` a record, its
    kind too.

    >>> metric = MetricAccumulator(3.0, 10.0)
    >>> for wall_time, value in ((10.0, 3.0), (11.0, 5.0), (12.0, 2.0), (13.0, 4.0)):
    ...     metric.take(value, wall_time)
    >>> metric.records, metric.growth, metric.minimum, metric.maximum
    (4, 4.0, 2.0, 5.0)
    """

    __slots__ = (
        "end_wall_time",
        "finite_count",
        "finite_sum",
        "first",
        "first_wall_time",
        "growth",
        "growth_s",
        "kind",
        "last",
        "last_wall_time",
        "maximum",
        "minimum",
        "previous",
        "previous_wall_time",
        "records",
        "start_wall_time",
    )

    def __init__(
        self, value: float, wall_time: float, kind: Kind | None = None
    ) -> None:
        self.records = 0
        self.first = value
        self.first_wall_time = wall_time
        self.last = value
        self.last_wall_time = wall_time
        # The span of the times taken in; a time that is NaN is none.
        self.start_wall_time = math.inf
        self.end_wall_time = -math.inf
        self.minimum = math.nan
        self.maximum = math.nan
        self.growth = 0.0
        self.growth_s = 0.0
        self.finite_sum = 0.0
        self.finite_count = 0
        self.previous = math.nan
        self.previous_wall_time = wall_time
        self.kind = kind

    def add(self, record: Record) -> None:
        """Take in ``record``: its value, and its kind where it says more than the kind so far."""
        if record.kind is not self.kind and (
            self.kind is None or record.kind is Kind.COUNTER
        ):
            self.kind = record.kind
        self.take(record.value, record.wall_time)

    def take(self, value: float, wall_time: float) -> None:
        """Take in the metric's next value, logged at ``wall_time``."""
        self.records += 1
        self.last = value
        self.last_wall_time = wall_time
        if wall_time < self.start_wall_time:
            self.start_wall_time = wall_time
        if wall_time > self.end_wall_time:
            self.end_wall_time = wall_time
        if value != value:  # NaN
            return
        if -math.inf < value < math.inf:
            self.finite_sum += value
            self.finite_count += 1
        if value >= self.previous:
            self.growth += value - self.previous
            self.growth_s += wall_time - self.previous_wall_time
        self.previous = value
        self.previous_wall_time = wall_time
        # NaN compares false with everything, so a NaN extreme is replaced at
        # once by the first real value.
        if not value >= self.minimum:
            self.minimum = value
        if not value <= self.maximum:
            self.maximum = value

    def aggregate(self, name: str) -> MetricAggregate:
        return MetricAggregate(
            name,
            self.kind,
            self.records,
            self.first,
            self.last,
            self.minimum,
            self.maximum,
            self.first_wall_time,
            self.last_wall_time,
            self.growth,
            self.growth_s,
            self.finite_sum,
            self.finite_count,
        )


def aggregate(records: Iterable[Record]) -> RunAggregate:
    """Aggregate ``records`` in one pass, keeping nothing but a few figures per metric.

    >>> run = aggregate([Record(1.0, None, "b/size", 3.0), Record(2.0, None, "b/size", math.nan)])
    >>> run.records, run.metrics[0].records, run.metrics[0].last, run.metrics[0].maximum
    (2, 2, nan, 3.0)
    """
    accumulators: dict[str, MetricAccumulator] = {}
    for record in records:
        accumulator = accumulators.get(record.name)
        if accumulator is None:
            accumulator = accumulators[record.name] = MetricAccumulator(
                record.value, record.wall_time, record.kind
            )
        accumulator.add(record)
    # The run's count and span are its metrics', which each accumulator keeps.
    metrics = accumulators.values()
    return RunAggregate(
        sum(metric.records for metric in metrics),
        min((metric.start_wall_time for metric in metrics), default=None),
        max((metric.end_wall_time for metric in metrics), default=None),
        tuple(accumulators[name].aggregate(name) for name in sorted(accumulators)),
    )


class Points(NamedTuple):
    """One metric's points as a chart draws them: columns of wall times, steps and values, in time order.

    A step is ``None`` where the payload had none, a value NaN where the
    metric was NaN, or where a bucket of a downsampled line held a NaN (a
    gap in the line).

    >>> points = Points([10.0, 11.0], [0, None], [0.5, math.nan])
    >>> len(points.wall_times), points.values[0]
    (2, 0.5)
    """

    wall_times: list[float]
    steps: list[int | None]
    values: list[float]


class Downsampled(NamedTuple):
    """A run as a chart can show it: its records' count and span, every metric's kind, and some metrics' points, downsampled.

    ``points`` holds, by metric name, its :class:`Points` in time order:
    all of its records when there are at most twice as many as buckets,
    else, in each of about that many buckets of time, the record of its
    smallest and of its largest value (so that spikes survive) and one NaN
    where the bucket holds any (a gap in the line). ``kinds`` has every
    metric of the run, ``points`` those asked for (and, in a SQLite file,
    any whose kind the file does not store).

    >>> records = [Record(float(t), t, "c/x", float(t % 7)) for t in range(10_000)]
    >>> run = downsample(records, buckets=100)
    >>> points = run.points["c/x"]
    >>> len(points.values) <= 200, min(points.values), max(points.values)
    (True, 0.0, 6.0)
    """

    records: int
    start_wall_time: float
    end_wall_time: float
    kinds: dict[str, Kind | None]
    points: dict[str, Points]


Keep = Callable[[Mapping[str, Kind | None]], Collection[str]]
"""Which metrics' points a downsampled run keeps: given every metric's kind (``None`` where unknown), their names."""


class _Reducer:
    """One metric's points while the records stream past: raw while few, then each bucket's extremes (and a NaN)."""

    __slots__ = ("buckets", "cells", "origin", "raw", "width")

    def __init__(self, buckets: int) -> None:
        self.buckets = buckets
        self.raw: list[Record] | None = []
        self.cells: dict[int, list[Record | None]] = {}
        self.origin = 0.0
        self.width = 0.0

    def add(self, record: Record) -> None:
        if self.raw is not None:
            self.raw.append(record)
            if len(self.raw) > 2 * self.buckets:
                self._start_bucketing()
            return
        self._put(record)

    def _start_bucketing(self) -> None:
        raw, self.raw = self.raw or [], None
        times = [record.wall_time for record in raw]
        self.origin = min(times)
        # The points so far fill the buckets (the last one's end inclusive).
        self.width = (max(times) - self.origin) / max(self.buckets - 1, 1) or 1e-9
        for record in raw:
            self._put(record)

    def _put(self, record: Record) -> None:
        index = math.floor((record.wall_time - self.origin) / self.width)
        cell = self.cells.get(index)
        if cell is None:
            self.cells[index] = cell = [None, None, None]
            if len(self.cells) > self.buckets:
                self._coarsen()
                cell = self.cells.setdefault(index // 2, [None, None, None])
        _keep(cell, record)

    def _coarsen(self) -> None:
        # Buckets twice as wide: each pair of neighbours merged.
        self.width *= 2
        cells: dict[int, list[Record | None]] = {}
        for index, cell in self.cells.items():
            merged = cells.setdefault(index // 2, [None, None, None])
            for record in cell:
                if record is not None:
                    _keep(merged, record)
        self.cells = cells

    def points(self) -> Points:
        if self.raw is not None:
            kept = self.raw
        else:
            kept = list(
                {
                    id(record): record
                    for index in sorted(self.cells)
                    for record in self.cells[index]
                    if record is not None
                }.values()
            )
        kept.sort(key=lambda record: record.wall_time)
        return Points(
            [record.wall_time for record in kept],
            [record.step for record in kept],
            [record.value for record in kept],
        )


def _keep(cell: list[Record | None], record: Record) -> None:
    # cell: [the smallest value's record, the largest's, a NaN's]
    value = record.value
    if math.isnan(value):
        if cell[2] is None:
            cell[2] = record
        return
    low, high = cell[0], cell[1]
    if low is None or value < low.value:
        cell[0] = record
    if high is None or value > high.value:
        cell[1] = record


def downsample(
    records: Iterable[Record],
    buckets: int,
    keep: Keep | None = None,
) -> Downsampled:
    """Downsample ``records`` in one pass to about ``buckets`` buckets of time per metric (see :class:`Downsampled`); keep the points of the names ``keep(kinds)`` returns, when given.

    Memory stays within a few points per bucket and metric, whatever the
    run's length: buckets that grow too many are merged in pairs.
    """
    reducers: dict[str, _Reducer] = {}
    kinds: dict[str, Kind | None] = {}
    count = 0
    start_wall_time = math.inf
    end_wall_time = -math.inf
    for record in records:
        count += 1
        start_wall_time = min(start_wall_time, record.wall_time)
        end_wall_time = max(end_wall_time, record.wall_time)
        name = record.name
        kind = kinds.get(name)
        if name not in kinds or (
            record.kind is not kind and (kind is None or record.kind is Kind.COUNTER)
        ):
            kinds[name] = record.kind
        reducer = reducers.get(name)
        if reducer is None:
            reducer = reducers[name] = _Reducer(buckets)
        reducer.add(record)
    kept = reducers.keys() if keep is None else set(keep(kinds))
    return Downsampled(
        count,
        start_wall_time,
        end_wall_time,
        kinds,
        {name: reducer.points() for name, reducer in reducers.items() if name in kept},
    )
