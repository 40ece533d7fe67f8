"""Summaries of a recorded run: what ``rlpulse show`` prints.

Computing and printing are kept apart: :func:`summarize` (or
:func:`summarize_file`) turns records into a :class:`RunSummary` of plain
numbers, and :func:`format_summary` renders one as an aligned table. A run
whose file stores its distributions' histograms (SQLite) also gets each
distribution's quantiles over the whole run (:class:`DistributionSummary`),
from every observation, not from the intervals' logged quantiles.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

from rlpulse import formats
from rlpulse.distributions import DEFAULT_QUANTILES, quantile_name
from rlpulse.formats import MetricAggregate, RunAggregate
from rlpulse.naming import Kind, inferred_kind, join, split
from rlpulse.read.match import Match, matching, select_metrics
from rlpulse.read.records import (
    DistributionRecord,
    Record,
    RunFileError,
    RunFileLockedError,
    list_runs,
    read,
)
from rlpulse.read.span import WHOLE_RUN, Span, Within, run_extent
from rlpulse.runtime.events import Event, format_event
from rlpulse.text import (
    format_duration,
    format_exact,
    format_name,
    format_number,
    format_table,
    natural_order,
    plural,
    wrapped,
)
from rlpulse.verdict import is_verdict_metric, run_verdict, speedup_labels

__all__ = [
    "DistributionSummary",
    "FileRun",
    "MetricSummary",
    "RunSummary",
    "VerdictSummary",
    "format_duration",
    "format_event",
    "format_events",
    "format_number",
    "format_summary",
    "format_verdicts",
    "is_counter",
    "narrow_summary",
    "pinned_run",
    "read_file_run",
    "read_run",
    "run_distributions",
    "run_letter",
    "run_name",
    "summarize",
    "summarize_distributions",
    "summarize_file",
    "summary_of",
]


@dataclass(frozen=True)
class MetricSummary:
    """The values one metric took over a run: first, last, extremes and, for counters, the mean rate.

    ``mean_rate``, for a cumulative counter, is its growth over the time it
    grew: from each value to the next, leaving out where it went down (a
    reset, after which the monitor logs no rate either); without resets
    ``(last - first) / (last_wall_time - first_wall_time)``. ``None`` for a
    gauge, for a counter seen at a single instant, or for one that only went
    down.
    NaN values count in ``count`` and may be ``first`` or ``last``, but never
    the extremes.

    >>> metric = MetricSummary(
    ...     name="collector/frames", count=2, first=0.0, last=500.0,
    ...     minimum=0.0, maximum=500.0, first_wall_time=10.0, last_wall_time=12.0,
    ...     is_counter=True, mean_rate=250.0,
    ... )
    >>> metric.watch, metric.key
    ('collector', 'frames')
    """

    name: str
    count: int
    first: float
    last: float
    minimum: float
    maximum: float
    first_wall_time: float
    last_wall_time: float
    is_counter: bool
    mean_rate: float | None
    kind: Kind | None = None
    """The metric's kind, as its records said (``None`` when built without one)."""

    @property
    def watch(self) -> str:
        """The watch the metric was logged under (empty for a bare name): :func:`rlpulse.naming.split`.

        >>> MetricSummary("collector/worker_0/frames", 1, 3.0, 3.0, 3.0, 3.0, 1.0, 1.0, True, None).watch
        'collector'
        """
        return split(self.name)[0]

    @property
    def key(self) -> str:
        """The metric's name within its watch.

        >>> MetricSummary("collector/worker_0/frames", 1, 3.0, 3.0, 3.0, 3.0, 1.0, 1.0, True, None).key
        'worker_0/frames'
        """
        return split(self.name)[1]


@dataclass(frozen=True)
class DistributionSummary:
    """One distribution over a whole run: how many observations, and their quantiles.

    ``quantiles`` maps a quantile's name (``p50``, as :func:`rlpulse.distributions.quantile_name`
    writes it) to its value over every observation of the run, within
    0.55 %: the stored intervals' histograms merged, not their logged
    quantiles averaged.

    >>> DistributionSummary("learner/update_s", 300, {"p50": 0.05, "p99": 0.099}).key
    'update_s'
    """

    name: str
    count: int
    quantiles: Mapping[str, float]

    @property
    def key(self) -> str:
        """The distribution's name within its watch."""
        return split(self.name)[1]


@dataclass(frozen=True)
class VerdictSummary:
    """What a bottleneck watch (``LoggerMonitor.bottleneck``) said over a run: its last judged window in words, and how its windows split.

    >>> VerdictSummary("bottleneck", "learner-bound: ...", "learner-bound 80%, unknown 20% of 5 windows").split
    'learner-bound 80%, unknown 20% of 5 windows'
    """

    watch: str
    last: str
    split: str
    speedup_of: tuple[str, ...] = ()
    """The labels of its windows that logged a speed-up (:func:`rlpulse.verdict.speedup_labels`): what its mean ``speedup`` is a speed-up of."""


@dataclass(frozen=True)
class RunSummary:
    """One run in numbers: its name, where it is stored, its records and its metrics.

    ``metrics`` are sorted by name, so each watch's metrics sit together,
    as are ``distributions`` (none for a file that stores no histograms).
    ``start_wall_time`` and ``end_wall_time`` are ``None`` for a run without
    records. ``within`` says where the span summarised lies in the run
    (``None``: the whole run); the figures are then the span's alone.

    >>> summary = summarize(
    ...     [Record(100.0, None, "buffer/size", 3.0), Record(104.0, None, "buffer/size", 5.0)],
    ...     run="baseline", source="metrics.db",
    ... )
    >>> summary.records, summary.span, [metric.last for metric in summary.metrics]
    (2, 4.0, [5.0])
    """

    run: str
    source: str
    records: int
    start_wall_time: float | None
    end_wall_time: float | None
    metrics: tuple[MetricSummary, ...]
    distributions: tuple[DistributionSummary, ...] = field(default=())
    verdicts: tuple[VerdictSummary, ...] = field(default=())
    within: Within | None = None

    @property
    def span(self) -> float:
        """Seconds between the first and the last record (``0.0`` without records).

        >>> summarize([], run="empty", source="metrics.db").span
        0.0
        """
        if self.start_wall_time is None or self.end_wall_time is None:
            return 0.0
        return self.end_wall_time - self.start_wall_time


def summarize(
    records: Iterable[Record],
    *,
    run: str,
    source: str,
    distributions: Iterable[DistributionRecord] = (),
) -> RunSummary:
    """Summarize the records of one run, metric by metric, and its ``distributions``' intervals (:func:`summarize_distributions`).

    Each cumulative counter gets its mean rate: a metric is one when its
    records say so (their ``kind``, as :func:`rlpulse.read` gives it);
    for records without a kind, when :func:`is_counter` guesses so from
    the names.

    >>> records = [
    ...     Record(10.0, 0, "collector/frames", 0.0),
    ...     Record(10.0, 0, "collector/queue_depth", 4.0),
    ...     Record(12.0, 500, "collector/frames", 500.0),
    ...     Record(12.0, 500, "collector/queue_depth", 2.0),
    ... ]
    >>> summary = summarize(records, run="baseline", source="metrics.db")
    >>> [(metric.name, metric.is_counter, metric.mean_rate) for metric in summary.metrics]
    [('collector/frames', True, 250.0), ('collector/queue_depth', False, None)]
    >>> polls = [Record(10.0, None, "monitor/polls", 0.0, Kind.COUNTER), Record(12.0, None, "monitor/polls", 20.0, Kind.COUNTER)]
    >>> summarize(polls, run="r", source="r.db").metrics[0].mean_rate
    10.0
    """
    run_aggregate, verdicts = aggregate_and_verdicts(records)
    summary = summary_of(
        run_aggregate, run=run, source=source, distributions=distributions
    )
    return dataclasses.replace(summary, verdicts=verdicts)


def aggregate_and_verdicts(
    records: Iterable[Record],
) -> tuple[RunAggregate, tuple[VerdictSummary, ...]]:
    """A run's aggregate (:func:`rlpulse.formats.aggregate`) and its bottleneck watches' verdicts, in one pass over ``records``."""
    windows: dict[str, dict[float, dict[str, float]]] = {}
    run_aggregate = formats.aggregate(_noting_windows(records, windows))
    return run_aggregate, _verdicts(windows)


def file_verdicts(
    path: Path,
    run: str | None,
    run_aggregate: RunAggregate,
    *,
    since: float | None = None,
    until: float | None = None,
) -> tuple[VerdictSummary, ...]:
    """The verdicts of the bottleneck watches of run ``run`` of file ``path``, whose aggregate is ``run_aggregate``: their few records read apart from the rest, those logged from ``since`` to ``until`` (seconds since the epoch) where given."""
    names = [split(metric.name) for metric in run_aggregate.metrics]
    bottlenecks = {watch for watch, metric in names if metric == "bound_known"}
    if not bottlenecks:
        return ()
    wanted = {
        join(watch, metric)
        for watch, metric in names
        if watch in bottlenecks and is_verdict_metric(metric)
    }
    windows: dict[str, dict[float, dict[str, float]]] = {}
    records = formats.read(path, run, names=wanted, since=since, until=until)
    for _ in _noting_windows(records, windows):
        pass
    return _verdicts(windows)


def _noting_windows(
    records: Iterable[Record], windows: dict[str, dict[float, dict[str, float]]]
) -> Iterator[Record]:
    # ``records``, noting on the way what may be a bottleneck watch's
    # windows: by watch, by time, its metrics.
    for record in records:
        metric = record.metric
        if is_verdict_metric(metric):
            window = windows.setdefault(record.watch, {})
            window.setdefault(record.wall_time, {})[metric] = record.value
        yield record


def summary_of(
    run_aggregate: RunAggregate,
    *,
    run: str,
    source: str,
    distributions: Iterable[DistributionRecord] = (),
) -> RunSummary:
    """The summary of a run from its aggregate (:func:`rlpulse.formats.read_aggregate`), as :func:`summarize` makes it from its records.

    A metric without a kind is a counter when :func:`is_counter` guesses so
    from the run's names.

    >>> run_aggregate = formats.aggregate([Record(1.0, None, "c/frames", 0.0), Record(3.0, None, "c/frames", 10.0)])
    >>> summary_of(run_aggregate, run="r", source="r.db").metrics[0].mean_rate
    5.0
    """
    names = {metric.name for metric in run_aggregate.metrics}
    return RunSummary(
        run=run,
        source=source,
        records=run_aggregate.records,
        start_wall_time=run_aggregate.start_wall_time,
        end_wall_time=run_aggregate.end_wall_time,
        metrics=tuple(
            _metric_summary(metric, names) for metric in run_aggregate.metrics
        ),
        distributions=summarize_distributions(distributions),
    )


def _verdicts(
    windows: Mapping[str, Mapping[float, Mapping[str, float]]],
) -> tuple[VerdictSummary, ...]:
    verdicts = []
    for watch, by_time in sorted(windows.items()):
        in_order = [by_time[when] for when in sorted(by_time)]
        said = run_verdict(in_order)
        if said is not None:
            verdicts.append(VerdictSummary(watch, *said, speedup_labels(in_order)))
    return tuple(verdicts)


def summarize_distributions(
    intervals: Iterable[DistributionRecord],
    quantiles: Iterable[float] = DEFAULT_QUANTILES,
) -> tuple[DistributionSummary, ...]:
    """Each distribution's count and ``quantiles`` over all of ``intervals`` (merged), sorted by name.

    >>> from rlpulse.distributions import Histogram
    >>> histogram = Histogram()
    >>> for milliseconds in range(1, 101):
    ...     histogram.add(milliseconds / 1000)
    >>> intervals = [DistributionRecord(float(at), None, "learner/update_s", histogram) for at in range(3)]
    >>> (summary,) = summarize_distributions(intervals)
    >>> summary.count, {name: round(value, 3) for name, value in summary.quantiles.items()}
    (300, {'p50': 0.05, 'p90': 0.09, 'p99': 0.099})
    """
    wanted = [(quantile_name(q), q) for q in quantiles]
    summaries = []
    for name, histogram in formats.merge_distributions(intervals).items():
        values = {label: histogram.quantile(q) for label, q in wanted}
        summaries.append(
            DistributionSummary(
                name,
                histogram.count,
                MappingProxyType(
                    {
                        label: value
                        for label, value in values.items()
                        if value is not None
                    }
                ),
            )
        )
    return tuple(summaries)


def summarize_file(
    path: str | os.PathLike[str], run: str | None = None, span: Span = WHOLE_RUN
) -> RunSummary:
    """Summarize a run stored in any file an rlpulse file sink writes, or a ``span`` of it.

    For SQLite, ``run`` picks the run and ``None`` means the latest one; a CSV
    or JSON lines file holds one run, named after the file. A SQLite run's
    distributions are summarised over the whole run
    (:attr:`RunSummary.distributions`); other files store no histograms.
    A ``span`` (:class:`~rlpulse.read.span.Span`) other than the whole run
    summarises only the records (and distributions' intervals) logged in
    it, as :func:`read_file_run` reads them.
    Errors are those of :func:`rlpulse.read.records.read`:
    ``FileNotFoundError`` for a missing file,
    :class:`~rlpulse.read.records.RunFileError` for an empty or corrupt file or an
    unknown run; and :class:`~rlpulse.read.span.SpanError` for a span
    without records.

    >>> import tempfile, pathlib
    >>> from rlpulse.sinks import CSVLogger
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "metrics.csv"
    ...     with CSVLogger(path) as sink:
    ...         sink.log_metrics({"buffer/size": 3.0}, step=1, timestamp=100.0)
    ...         sink.log_metrics({"buffer/size": 5.0}, step=2, timestamp=101.0)
    ...     summary = summarize_file(path)
    ...     last_second = summarize_file(path, span=Span(since=-0.5))
    >>> summary.run, summary.records, summary.metrics[0].maximum
    ('metrics.csv', 2, 5.0)
    >>> last_second.records, last_second.metrics[0].minimum
    (1, 5.0)
    """
    file_run = read_file_run(Path(path), run, span)
    summary = summary_of(
        file_run.aggregate,
        run=file_run.name,
        source=str(path),
        distributions=file_run.distributions,
    )
    return dataclasses.replace(
        summary, verdicts=file_run.verdicts, within=file_run.within
    )


class FileRun(NamedTuple):
    """A run of a file as ``show`` and ``compare`` read it: its name, its aggregate, its distributions' intervals and its verdicts, over the span ``within`` (``None``: the whole run)."""

    name: str
    aggregate: RunAggregate
    distributions: Iterator[DistributionRecord]
    verdicts: tuple[VerdictSummary, ...]
    within: Within | None


def read_file_run(path: Path, run: str | None, span: Span = WHOLE_RUN) -> FileRun:
    """Read run ``run`` of the file at ``path`` (``None``: its latest run) over ``span``, as ``show`` and ``compare`` summarise it.

    The whole run comes from the file's aggregate (for SQLite, its stored
    summaries); a span from the records logged in it alone, selected by
    the query for SQLite, as the file is read for a line file, and the
    distributions' intervals logged in it. Raises
    :class:`~rlpulse.read.span.SpanError` for a span without records.
    """
    run = pinned_run(path, run)
    name = run_name(path, run)
    within = None
    if not span.is_whole_run and (extent := run_extent(path, run)) is not None:
        within = span.within(*extent, run=name)
    since, until = (None, None) if within is None else within[:2]
    run_aggregate = formats.read_aggregate(path, run, since=since, until=until)
    if within is not None and not run_aggregate.records:
        raise span.no_records(within, run=name)
    return FileRun(
        name,
        run_aggregate,
        run_distributions(path, run, since=since, until=until),
        file_verdicts(path, run, run_aggregate, since=since, until=until),
        within,
    )


def narrow_summary(summary: RunSummary, match: Match) -> RunSummary:
    """Return ``summary`` with only the metrics ``match`` keeps (see :func:`rlpulse.read.match.select_metrics`).

    Raises :class:`~rlpulse.read.match.MatchError`, listing the run's
    metrics, when the run has metrics and ``match`` keeps none of them.

    >>> summary = summarize(
    ...     [Record(1.0, None, "buffer/size", 3.0), Record(1.0, None, "collector/frames", 8.0)],
    ...     run="r", source="r.csv",
    ... )
    >>> [metric.name for metric in narrow_summary(summary, "collector/*").metrics]
    ['collector/frames']
    """
    if match is None:
        return summary
    kept = set(matching((m.name for m in summary.metrics), match, run=summary.run))
    distributions = summary.distributions
    kept_distributions = set(select_metrics((d.name for d in distributions), match))
    return dataclasses.replace(
        summary,
        metrics=tuple(m for m in summary.metrics if m.name in kept),
        distributions=tuple(d for d in distributions if d.name in kept_distributions),
    )


def read_run(
    path: str | os.PathLike[str], run: str | None = None
) -> tuple[str, Iterator[Record]]:
    """Return the name and the records of a run stored in any file an rlpulse file sink writes.

    For SQLite, ``run`` picks the run and ``None`` means the latest one; a CSV
    or JSON lines file holds one run, named after the file. Errors are those
    of :func:`rlpulse.read.records.read`, raised before this returns.

    >>> import tempfile, pathlib
    >>> from rlpulse.sinks import SQLiteLogger
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "metrics.sqlite"
    ...     SQLiteLogger(path, run="first").close()
    ...     with SQLiteLogger(path, run="second") as sink:
    ...         sink.log_metrics({"buffer/size": 3.0}, step=1, timestamp=100.0)
    ...     run, records = read_run(path)
    ...     run, [record.value for record in records]
    ('second', [3.0])
    """
    path = Path(path)
    records = read(path, run)
    return run_name(path, run), records


def pinned_run(path: Path, run: str | None) -> str | None:
    """``run``, or for ``None`` the name of a SQLite file's latest run now, so that the several reads of one summary read one run though another starts meanwhile; ``None`` for a line file.

    A file that cannot be read is left to the reader that follows, to say
    why as it says it.
    """
    if run is not None:
        return run
    try:
        if formats.detect_format(path) == "sqlite":
            runs = list_runs(path)
            return runs[-1] if runs else None
    except RunFileLockedError:
        raise
    except (OSError, RunFileError):
        pass
    return None


def run_name(path: str | os.PathLike[str], run: str | None = None) -> str:
    """The name of run ``run`` of the file at ``path``: ``run`` itself, the latest run of a SQLite file for ``None``, the file's name for a line file.

    >>> run_name("metrics.csv", "baseline")
    'baseline'
    """
    if run is not None:
        return run
    path = Path(path)
    try:
        return list_runs(path)[-1]
    except RunFileLockedError:
        raise
    except RunFileError:
        return path.name


def run_distributions(
    path: str | os.PathLike[str],
    run: str | None = None,
    *,
    since: float | None = None,
    until: float | None = None,
) -> Iterator[DistributionRecord]:
    """The stored intervals of the distributions of a run that :func:`read_run` read; none for a file that stores no histograms (CSV, JSON lines).

    Only those logged from ``since`` to ``until`` (seconds since the
    epoch, each inclusive) where given.

    >>> import tempfile, pathlib
    >>> from rlpulse.sinks import CSVLogger
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     with CSVLogger(pathlib.Path(tmp) / "metrics.csv") as sink:
    ...         sink.log_metrics({"learner/loss_p50": 0.5})
    ...     list(run_distributions(sink.path))
    []
    """
    try:
        return formats.read_distributions(path, run, since=since, until=until)
    except RunFileLockedError:
        raise
    except RunFileError:
        # Read after read_run(), which raised for a missing, empty or
        # corrupt file: this is one that stores no histograms.
        return iter(())


def is_counter(name: str, names: Container[str]) -> bool:
    """Return whether metric ``name``, among the metric ``names`` of a run or a payload, is a cumulative counter, guessed from the names alone.

    For what carries no kind (records built by hand; :func:`rlpulse.read`
    gives every record its kind): :func:`rlpulse.naming.inferred_kind`'s
    guess, a known counter (``frames``, ``write_count``, …), one whose
    per-second rate is among ``names``, or a count of observations
    (``*_count``).

    >>> names = {"c/frames", "c/episodes", "c/episodes_per_second", "t/return_count", "b/size"}
    >>> [name for name in sorted(names) if is_counter(name, names)]
    ['c/episodes', 'c/frames', 't/return_count']
    """
    return inferred_kind(name, names) is Kind.COUNTER


def _metric_summary(metric: MetricAggregate, names: Container[str]) -> MetricSummary:
    kind = inferred_kind(metric.name, names) if metric.kind is None else metric.kind
    is_counter = kind is Kind.COUNTER
    mean_rate = None
    if is_counter and metric.growth_s > 0:
        mean_rate = metric.growth / metric.growth_s
    return MetricSummary(
        name=metric.name,
        count=metric.records,
        first=metric.first,
        last=metric.last,
        minimum=metric.minimum,
        maximum=metric.maximum,
        first_wall_time=metric.first_wall_time,
        last_wall_time=metric.last_wall_time,
        is_counter=is_counter,
        mean_rate=mean_rate,
        kind=kind,
    )


# Printing


def run_letter(index: int) -> str:
    """The name of the ``index``-th of several runs compared or drawn together: ``A``, ``B``, …

    >>> run_letter(0), run_letter(25), run_letter(26)
    ('A', 'Z', 'R27')
    """
    return chr(ord("A") + index) if index < 26 else f"R{index + 1}"


def format_events(events: Iterable[Event]) -> str:
    """Return the events of a run as ``rlpulse show`` lists them: a count, then a line each; ``""`` for none.

    >>> print(format_events([Event(0.0, "c", "hung", "stats() has not returned", 5.0)]))  # doctest: +ELLIPSIS
    1 event:
    ... !! hung c: stats() has not returned
    """
    lines = [format_event(event) for event in events]
    if not lines:
        return ""
    return "\n".join([f"{plural(len(lines), 'event')}:", *lines])


def format_summary(
    summary: RunSummary, *, exact: bool = False, width: int | None = None
) -> str:
    """Render a run summary as a header line and an aligned table, one metric a row.

    Columns: the last, smallest and largest value, and for counters the mean
    rate per second over the run. The header names the run and its file, the
    number of records, the time span and the local start time. A run with
    distributions gets a second table, "distributions over the whole run":
    each one's count of observations and its quantiles over all of them.
    Numbers are written as :func:`rlpulse.text.format_number` writes them,
    or in full with ``exact=True`` (:func:`rlpulse.text.format_exact`).
    With a ``width`` (a terminal's), the tables' names are shortened where
    their lines would be wider (:func:`rlpulse.text.format_table`).
    A run's bottleneck verdicts are :func:`format_verdicts`'s.

    >>> records = [
    ...     Record(1700000000.0, 0, "collector/frames", 0.0),
    ...     Record(1700000000.0, 0, "buffer/utilization", 0.0),
    ...     Record(1700000004.0, 19999, "collector/frames", 19999.0),
    ...     Record(1700000004.0, 19999, "buffer/utilization", 0.45),
    ... ]
    >>> summary = summarize(records, run="baseline", source="runs/demo.sqlite")
    >>> print(format_summary(summary))  # doctest: +ELLIPSIS
    run baseline in runs/demo.sqlite: 4 records over 4.0 s, from ...
    <BLANKLINE>
    metric                last  min     max  mean rate/s
    buffer/utilization    0.45    0    0.45
    collector/frames    19,999    0  19,999         4999
    >>> print(format_summary(summary, exact=True).splitlines()[-1])
    collector/frames    19999    0  19999      4999.75
    >>> returns = DistributionSummary("tally/episode_return", 434, {"p50": 18.0, "p90": 39.0, "p99": 66.0})
    >>> print(format_summary(dataclasses.replace(summary, distributions=(returns,))))  # doctest: +ELLIPSIS
    run baseline in runs/demo.sqlite: 4 records over 4.0 s, from ...
    <BLANKLINE>
    metric                last  min     max  mean rate/s
    buffer/utilization    0.45    0    0.45
    collector/frames    19,999    0  19,999         4999
    <BLANKLINE>
    distributions over the whole run:
    distribution          count  p50  p90  p99
    tally/episode_return    434   18   39   66
    """
    header = f"run {format_name(summary.run)} in {summary.source}: "
    if summary.start_wall_time is None:
        return header + "no records"
    within = summary.within
    if within is None:
        header += (
            f"{plural(summary.records, 'record')} over "
            f"{format_duration(summary.span)}, from {_local_time(summary.start_wall_time)}"
        )
    else:
        header += (
            f"{plural(summary.records, 'record')} {within.describe()}, "
            f"the run from {_local_time(within.run_start)}"
        )
    number = format_exact if exact else format_number
    rows = [("metric", "last", "min", "max", "mean rate/s")]
    for metric in sorted(
        summary.metrics, key=lambda metric: natural_order(metric.name)
    ):
        rate = "" if metric.mean_rate is None else number(metric.mean_rate)
        rows.append(
            (
                metric.name,
                number(metric.last),
                number(metric.minimum),
                number(metric.maximum),
                rate,
            )
        )
    lines = [wrapped(header, width), "", format_table(rows, width=width)]
    if summary.distributions:
        lines += [
            "",
            "distributions over the "
            + ("whole run:" if summary.within is None else "span:"),
            _distributions_table(summary.distributions, number, width),
        ]
    return "\n".join(lines)


def format_verdicts(summary: RunSummary, width: int | None = None) -> str:
    """The verdict of each bottleneck watch of a run, as ``rlpulse show`` ends: the last judged window's sentence, and how the verdict split over the run; ``""`` for none.

    With a ``width`` (a terminal's), a line longer than it is broken
    between words (:func:`rlpulse.text.wrapped`).

    >>> verdict = VerdictSummary("bottleneck", "learner-bound: ...", "learner-bound 80%, unknown 20% of 5 windows")
    >>> summary = dataclasses.replace(summarize([], run="r", source="r.db"), verdicts=(verdict,))
    >>> print(format_verdicts(summary))
    bottleneck, the last window: learner-bound: ...
    bottleneck over the run: learner-bound 80%, unknown 20% of 5 windows
    """
    said = "\n".join(
        f"{format_name(verdict.watch)}, the last window: {verdict.last}\n"
        f"{format_name(verdict.watch)} over the {_over(summary)}: {verdict.split}"
        for verdict in summary.verdicts
    )
    return wrapped(said, width)


def _local_time(wall_time: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(wall_time))


def _over(summary: RunSummary) -> str:
    # What a summary's figures are over, as its tables say it.
    return "run" if summary.within is None else "span"


def _distributions_table(
    distributions: Iterable[DistributionSummary],
    number: Callable[[float], str],
    width: int | None,
) -> str:
    distributions = tuple(distributions)
    labels = list(dict.fromkeys(label for d in distributions for label in d.quantiles))
    rows = [("distribution", "count", *labels)]
    for distribution in distributions:
        quantiles = distribution.quantiles
        rows.append(
            (
                distribution.name,
                number(distribution.count),
                *(
                    number(quantiles[label]) if label in quantiles else ""
                    for label in labels
                ),
            )
        )
    return format_table(rows, width=width)
