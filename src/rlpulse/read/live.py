"""What ``rlpulse top`` keeps of a run it follows: each metric's last value and recent history, each watch's state.

A :class:`LiveRun` takes what a :class:`~rlpulse.formats.RunFollower`
reads, a look at a time (:meth:`LiveRun.add`), and keeps only what a frame
shows: per metric its kind, last value and a bounded history of the last
minutes (:data:`HISTORY_SECONDS`, at most :data:`HISTORY_POINTS` points),
per counter its rate between logged values, the latest events and each
watch's open streaks (stalled, hung, a failing sink). Its memory is bounded
by the number of metrics, not by the run's length. :meth:`LiveRun.block`
says what a watch's block shows, as :class:`Line` values that the live
view (:mod:`rlpulse.read.top`) draws; choosing how to show a metric goes by
its kind (:class:`~rlpulse.naming.Kind`), never by its name.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from rlpulse.formats.records import Followed, Record
from rlpulse.metrics import too_soon_to_rate
from rlpulse.naming import (
    Kind,
    capacities_of,
    inferred_kind,
    rate_of,
    split,
    statistic_of,
)
from rlpulse.read.match import Match, select_metrics
from rlpulse.runtime.events import STREAK_ENDS, Event, EventKind, sink_of

__all__ = [
    "HISTORY_POINTS",
    "HISTORY_SECONDS",
    "MONITOR_WATCH",
    "RECENT_SECONDS",
    "Line",
    "LiveRun",
    "Series",
    "WatchState",
    "event_kind",
]

HISTORY_SECONDS = 300.0
"""How far back a sparkline goes: the last five minutes of the run."""

HISTORY_POINTS = 600
"""The most points kept per metric for its sparkline."""

RECENT_SECONDS = 60.0
"""How long an event without an end (dropping, a worker lost) marks its watch."""

EVENTS_KEPT = 100
"""How many of the latest events a run keeps."""

_GAPS_KEPT = 20

MONITOR_WATCH = "monitor"
"""The watch a monitor logs its own counters under (its cost)."""

# A streak's end, by the start it ends.
_ENDS = {end: start for start, end in STREAK_ENDS.items()}
_STARTS = frozenset(STREAK_ENDS)
_ONE_SHOT = frozenset(
    kind
    for kind in EventKind
    if not kind.good_news and kind not in _STARTS and kind is not EventKind.BOTTLENECK
)


_KINDS = {kind.value: kind for kind in EventKind}


def event_kind(text: str) -> EventKind | None:
    """The :class:`~rlpulse.runtime.events.EventKind` an event's ``kind`` names; ``None`` for one of a later version.

    >>> event_kind("stalled").good_news, event_kind("melted")
    (False, None)
    """
    return _KINDS.get(text)


@dataclass
class Series:
    """One metric as a frame shows it: its kind, last value and time, and its recent history.

    ``history`` holds ``(wall_time, value)`` pairs; for a counter, its rate
    per second between logged values, the counter's last value being
    ``last``.
    """

    kind: Kind
    last: float = math.nan
    last_time: float = math.nan
    history: deque[tuple[float, float]] = field(
        default_factory=lambda: deque(maxlen=HISTORY_POINTS)
    )
    # The counter's value before the last, and its time: what a value too
    # soon after the last rates from.
    _before: tuple[float, float] = field(
        default=(math.nan, math.nan), init=False, repr=False
    )

    def add(self, wall_time: float, value: float) -> None:
        """Take one logged value (a counter keeps its rate since the last one, or the one before when it comes too soon after the last).

        >>> frames = Series(Kind.COUNTER)
        >>> for offset, total in ((0.0, 0.0), (2.5, 10_000.0), (5.0, 20_000.0), (5.004, 20_000.0)):
        ...     frames.add(100.0 + offset, total)
        >>> round(frames.rate)  # a final snapshot 4 ms after the last
        3994
        """
        if self.kind is Kind.COUNTER:
            start_time, start = self.last_time, self.last
            if too_soon_to_rate(wall_time - start_time, start_time - self._before[0]):
                start_time, start = self._before
            elapsed = wall_time - start_time
            if elapsed > 0 and value >= start:
                self.history.append((wall_time, (value - start) / elapsed))
            self._before = (self.last_time, self.last)
        else:
            self.history.append((wall_time, value))
        self.last, self.last_time = value, wall_time
        while self.history and self.history[0][0] < wall_time - HISTORY_SECONDS:
            self.history.popleft()

    @property
    def rate(self) -> float:
        """A counter's latest rate per second (NaN before its second value)."""
        return self.history[-1][1] if self.history else math.nan

    def recent(self, buckets: int, until: float) -> list[float | None]:
        """The history in ``buckets`` equal spans up to ``until``, each span's last value (the one before it for a span without).

        The spans cover the last :data:`HISTORY_SECONDS`, or less for a
        younger history, so that a new run fills its sparkline.

        >>> series = Series(Kind.GAUGE)
        >>> for second in range(4):
        ...     series.add(100.0 + second, float(second))
        >>> series.recent(4, 103.0)
        [0.0, 1.0, 2.0, 3.0]
        """
        if not self.history or buckets <= 0:
            return []
        start = max(self.history[0][0], until - HISTORY_SECONDS)
        span = until - start
        values: list[float | None] = [None] * buckets
        for wall_time, value in self.history:
            if wall_time < start:
                continue
            index = (
                buckets - 1
                if span <= 0
                else int((wall_time - start) / span * (buckets - 1) + 0.5)
            )
            values[min(max(index, 0), buckets - 1)] = value
        previous: float | None = None
        for index, bucket in enumerate(values):
            if bucket is None:
                values[index] = previous
            else:
                previous = bucket
        return values


class Line(NamedTuple):
    """One line of a watch's block: what it is, and its figures.

    ``label`` names it (a metric, a counter, the key of percentiles);
    ``value`` is its main figure (a counter's rate, a gauge's last value,
    the lowest percentile) and ``per_second`` whether it is a rate;
    ``series`` draws its sparkline (``None``: none); ``fill`` is a gauge's
    share of its capacity (``None``: no bar), ``capacity`` that capacity;
    ``total`` a counter's count; ``quantiles`` the other percentiles, in
    order, as ``(statistic, value)``.
    """

    label: str
    value: float
    per_second: bool = False
    series: Series | None = None
    fill: float | None = None
    capacity: float | None = None
    total: float | None = None
    quantiles: tuple[tuple[str, float], ...] = ()


class WatchState(NamedTuple):
    """A watch's health from the run's events: its open streaks and recent one-off events, newest first; none is running.

    >>> WatchState((), ()).word
    'running'
    """

    streaks: tuple[Event, ...]
    recent: tuple[Event, ...]

    @property
    def word(self) -> str:
        """How the frame says it: ``running``, or the kinds of what is wrong (``stalled``, ``hung, dropping``)."""
        kinds = [str(event.kind) for event in (*self.streaks, *self.recent)]
        return ", ".join(dict.fromkeys(kinds)) if kinds else "running"

    @property
    def healthy(self) -> bool:
        """Whether nothing is wrong."""
        return not (self.streaks or self.recent)


class LiveRun:
    """One run as ``rlpulse top`` follows it: what it keeps of the records and events read so far, bounded.

    ``label`` names the run in a frame (its name, or its file); ``match``
    (as ``--match`` takes it) selects the metrics its blocks show
    (:meth:`watches`, :meth:`block`); every metric is kept, for what the
    header says of the whole run and for a bar's capacity.

    >>> from rlpulse.formats.records import Followed, Record
    >>> from rlpulse.naming import Kind
    >>> run = LiveRun("live")
    >>> run.add(Followed([Record(100.0, 1, "c/frames", 0.0, Kind.COUNTER)], []))
    >>> run.add(Followed([Record(102.0, 2, "c/frames", 50.0, Kind.COUNTER)], []))
    >>> [(line.label, line.value, line.total) for line in run.block("c")]
    [('frames', 25.0, 50.0)]
    """

    def __init__(self, label: str, *, match: Match = None) -> None:
        self.label = label
        self._match = match
        self._forget()

    def _forget(self) -> None:
        # Nothing kept yet: a new run, or the run before one that followed.
        self._kept: dict[str, bool] = {}
        self._times: deque[float] = deque(maxlen=_GAPS_KEPT + 1)
        self.series: dict[str, Series] = {}
        self.events: deque[Event] = deque(maxlen=EVENTS_KEPT)
        self.first_time = math.nan
        self.last_time = math.nan
        # Keyed by watch, sink (a sink's events are of no watch) and kind.
        self._streaks: dict[tuple[str, str | None, EventKind], Event] = {}
        self._one_shots: dict[tuple[str, str | None, EventKind], Event] = {}
        # When its monitor last said it stopped (NaN: never).
        self.stopped_at = math.nan

    def add(self, followed: Followed) -> None:
        """Take what one look read (after forgetting the run before, where the follower moved on to a new one)."""
        if followed.new_run:
            self._forget()
        self._add_records(followed.records)
        for event in followed.events:
            self._add_event(event)

    def _add_records(self, records: Iterable[Record]) -> None:
        # Every metric is kept, those --match leaves out too: the run's age
        # and silence, the monitor's cost and the verdict in the header are
        # the whole run's; blocks show what it selects (shows()).
        series = self.series
        for record in records:
            line = series.get(record.name)
            if line is None:
                kind = record.kind or inferred_kind(record.name, series)
                line = series[record.name] = Series(kind)
            line.add(record.wall_time, record.value)
            if not record.wall_time <= self.last_time:
                self.last_time = record.wall_time
                self._times.append(record.wall_time)
            if not record.wall_time >= self.first_time:
                self.first_time = record.wall_time

    def shows(self, name: str) -> bool:
        """Whether metric ``name`` is one ``match`` selects (every one without a match)."""
        kept = self._kept.get(name)
        if kept is None:
            kept = self._kept[name] = bool(select_metrics([name], self._match))
        return kept

    @property
    def match(self) -> Match:
        """The metrics the run's blocks show, as ``--match`` takes them (``None``: all)."""
        return self._match

    def matches_nothing(self) -> bool:
        """Whether the run has metrics but ``match`` selects none of them.

        >>> from rlpulse.formats.records import Followed, Record
        >>> run = LiveRun("live", match="zzz")
        >>> run.matches_nothing()
        False
        >>> run.add(Followed([Record(100.0, 1, "c/frames", 0.0)], []))
        >>> run.matches_nothing()
        True
        """
        return bool(self.series) and not any(map(self.shows, self.series))

    def quiet_after(self, minimum: float) -> float:
        """How long without new data reads as the writer having stopped: ``minimum``, or three times the longest of the latest gaps between payloads.

        >>> from rlpulse.formats.records import Followed, Record
        >>> run = LiveRun("live")
        >>> run.add(Followed([Record(100.0 + 4 * index, None, "c/size", 1.0) for index in range(3)], []))
        >>> run.quiet_after(5.0)
        12.0
        """
        times = list(self._times)
        gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
        return max(minimum, 3 * max(gaps, default=0.0))

    def _add_event(self, event: Event) -> None:
        self.events.append(event)
        kind = event_kind(event.kind)
        if kind is None:
            return  # a kind of a later version
        if kind is EventKind.STOPPED:
            self.stopped_at = max(event.wall_time, self.stopped_at)
            return
        sink = sink_of(event)
        if kind in _STARTS:
            self._streaks[event.watch, sink, kind] = event
        elif kind in _ENDS:
            self._streaks.pop((event.watch, sink, _ENDS[kind]), None)
        elif kind in _ONE_SHOT:
            self._one_shots[event.watch, sink, kind] = event

    @property
    def ended(self) -> bool:
        """Whether the run's monitor stopped and nothing was logged after: a run that ended, where one that only went quiet was cut short (its writer killed) or waits.

        >>> from rlpulse.formats.records import Followed, Record
        >>> run = LiveRun("live")
        >>> run.add(Followed([Record(100.0, 1, "c/frames", 0.0)], []))
        >>> run.ended
        False
        >>> run.add(Followed([], [Event(100.5, "", "stopped", "LoggerMonitor stopped", 1.0)]))
        >>> run.ended
        True
        >>> run.add(Followed([Record(130.0, 2, "c/frames", 5.0)], []))  # started again
        >>> run.ended
        False
        """
        return not (math.isnan(self.stopped_at) or self.last_time > self.stopped_at)

    def watches(self, *, every: bool = False) -> list[str]:
        """The watches that logged what ``match`` selects (``every``: anything), in order of name, the monitor's own last."""
        names = {split(name)[0] for name in self.series if every or self.shows(name)}
        return sorted(names, key=lambda watch: (watch == MONITOR_WATCH, watch))

    def last_time_of(self, watch: str) -> float:
        """When watch ``watch`` last logged (NaN before it has).

        >>> from rlpulse.formats.records import Followed, Record
        >>> run = LiveRun("live")
        >>> run.add(Followed([Record(100.0, 1, "c/frames", 0.0), Record(104.0, 2, "b/size", 1.0)], []))
        >>> run.last_time_of("c"), run.last_time_of("b"), run.last_time_of("x")
        (100.0, 104.0, nan)
        """
        times = [
            series.last_time
            for name, series in self.series.items()
            if split(name)[0] == watch
        ]
        return max(times, default=math.nan)

    def state(self, watch: str, now: float) -> WatchState:
        """Watch ``watch``'s open streaks, and its one-off events of the :data:`RECENT_SECONDS` before ``now``; ``""`` for the monitor's sinks, each sink's apart.

        >>> run = LiveRun("live")
        >>> run.add(Followed([], [
        ...     Event(1.0, "", "sink_failing", "sink A failed: OSError()", 0.0),
        ...     Event(2.0, "", "sink_failing", "sink B failed: OSError()", 0.0),
        ...     Event(3.0, "", "sink_recovered", "sink A writes again", 0.0),
        ... ]))
        >>> [event.message for event in run.state("", 4.0).streaks]
        ['sink B failed: OSError()']
        """
        streaks = [
            event for (name, _, _), event in self._streaks.items() if name == watch
        ]
        recent = [
            event
            for (name, _, _), event in self._one_shots.items()
            if name == watch and now - event.wall_time < RECENT_SECONDS
        ]
        newest_first = sorted(streaks, key=lambda event: -event.wall_time)
        return WatchState(
            tuple(newest_first),
            tuple(sorted(recent, key=lambda event: -event.wall_time)),
        )

    def latest(self, watch: str) -> dict[str, float]:
        """The metrics of watch ``watch``'s latest payload, by name within the watch.

        >>> from rlpulse.formats.records import Followed, Record
        >>> run = LiveRun("live")
        >>> run.add(Followed([Record(1.0, None, "b/bound", -1.0), Record(1.0, None, "b/speedup", 2.0)], []))
        >>> run.add(Followed([Record(2.0, None, "b/bound_known", 0.0)], []))
        >>> run.latest("b")
        {'bound_known': 0.0}
        """
        kept = {
            split(name)[1]: series
            for name, series in self.series.items()
            if split(name)[0] == watch
        }
        newest = max((series.last_time for series in kept.values()), default=math.nan)
        return {
            metric: series.last
            for metric, series in kept.items()
            if series.last_time == newest
        }

    def value(self, name: str) -> float | None:
        """The last value of metric ``name`` (``None`` when it was not logged)."""
        series = self.series.get(name)
        return None if series is None else series.last

    def block(self, watch: str) -> list[Line]:
        """The lines of watch ``watch``'s block: counters with their rates, rates of counters not logged, gauges filling a capacity, percentiles, other gauges."""
        names = sorted(
            name for name in self.series if split(name)[0] == watch and self.shows(name)
        )
        shown: set[str] = set()
        counters, rates, bars, quantiles, gauges = [], [], [], [], []
        for name in names:
            series = self.series[name]
            if series.kind is Kind.COUNTER:
                shown.add(rate_of(name))
                counters.append(
                    Line(
                        split(name)[1],
                        series.rate,
                        per_second=True,
                        series=series,
                        total=series.last,
                    )
                )
            elif series.kind is Kind.GAUGE and (bar := self._bar(name)) is not None:
                shown.update(capacities_of(name))
                bars.append(bar)
        for name in names:
            series = self.series[name]
            metric = split(name)[1]
            if name in shown or series.kind is Kind.COUNTER:
                continue
            if series.kind is Kind.RATE:
                rates.append(Line(metric, series.last, per_second=True, series=series))
            elif statistic_of(metric)[1].startswith("p"):
                quantiles.append((name, series))
            elif not any(line.label == metric for line in bars):
                gauges.append(Line(metric, series.last, series=series))
        return [*counters, *rates, *bars, *_quantile_lines(quantiles), *gauges]

    def _bar(self, name: str) -> Line | None:
        """Gauge ``name``'s line with a bar: its share of the first of its capacities logged, ``None`` when none is, or it is not positive."""
        capacity = next(
            (
                self.series[other]
                for other in capacities_of(name)
                if other in self.series
            ),
            None,
        )
        if capacity is None or not capacity.last > 0:
            return None
        series = self.series[name]
        fill = min(1.0, max(0.0, series.last / capacity.last))
        metric = split(name)[1]
        return Line(
            metric, series.last, series=series, fill=fill, capacity=capacity.last
        )


def _quantile_lines(quantiles: list[tuple[str, Series]]) -> list[Line]:
    # One line per observed key: its lowest percentile first, the others after.
    by_key: dict[str, list[tuple[float, str, Series]]] = {}
    for name, series in quantiles:
        key, statistic = statistic_of(split(name)[1])
        level = float(statistic[1:].replace("_", "."))
        by_key.setdefault(key, []).append((level, statistic, series))
    lines = []
    for key, levels in by_key.items():
        (_, statistic, lowest), *others = sorted(levels, key=lambda item: item[0])
        lines.append(
            Line(
                f"{key} {statistic}",
                lowest.last,
                series=lowest,
                quantiles=tuple((other, series.last) for _, other, series in others),
            )
        )
    return lines
