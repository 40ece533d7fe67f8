"""Charts of a recorded run: what ``rlpulse plot`` draws.

One figure per run, one panel per watch (the part of a metric name before
the first ``/``), the watch's rates and gauges over time since the start of
the run, or over the logging step. Needs matplotlib (extra ``rlpulse[plot]``),
imported only when a chart is drawn, always through the Agg backend: no
window ever opens.

What a panel shows, one axis per unit, stacked, each with a single scale,
each metric drawn by its kind (as the records say it, see
:attr:`rlpulse.read.records.Record.kind`):

- per second: rates (``frames_per_second``, drawn as ``frames/s``), solid;
- bytes (``*_bytes``), percent (``*_percent``), seconds (``*_s``,
  ``*_seconds``) and plain values (``size``, ``utilization``, a tally's
  ``episode_return_mean``, …): gauges, dashed;
- a cumulative counter as its rate: the rate the monitor logged
  (``frames`` through ``frames_per_second``), else the rate between its
  consecutive records (a tally's ``episode_return_count`` as
  ``episode_return_count/s``, a monitor's ``polls`` as ``polls/s``; a
  final snapshot a few milliseconds after the last log rated over the
  interval before too); the
  cumulative line itself, dotted on an axis of its own below the others,
  only on request (``cumulative=True``, ``--cumulative``) or when the
  counter has no two records to rate;
- metrics that never changed over the run as a note above the panel
  (``constant: capacity = 100k``) instead of flat lines.

A panel with more lines than it draws keeps those that say most, in this
order: rates (of counts and counters); what a run learns (an episode's
return or reward: its mean, last value, median, then its extremes and
other quantiles); the other gauges (their mean, last value, median, then
extremes and other quantiles); the rates of sums of observations; the
cumulative lines.

An axis is linear from zero, or logarithmic when its lines' sizes differ
widely. Legends sit inside their axis, where they cover the fewest points.

A chart stays readable and quick to draw whatever the run holds: at most
:data:`MAX_PANELS` panels of at most :data:`MAX_LINES` lines each. What it
leaves out (and, with ``x="step"``, the watches without a step) is said in
the chart's subtitle and in a :class:`PlotWarning`, which ``rlpulse plot``
prints on standard error.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import itertools
import math
import os
import re
import textwrap
import uuid
import warnings
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NamedTuple, TypeVar

from rlpulse.formats import (
    Downsampled,
    Points,
    detect_format,
    downsample,
    read_downsampled,
)
from rlpulse.metrics import too_soon_to_rate
from rlpulse.naming import (
    RATE_SUFFIX,
    Kind,
    Unit,
    inferred_kind,
    rate_of,
    split,
    statistic_of,
    unit_of,
)
from rlpulse.read.match import (
    Match,
    metrics_there,
    no_metric_matching,
    patterns_text,
    select_metrics,
    some_names,
    unmatched,
)
from rlpulse.read.records import Record
from rlpulse.read.summary import run_letter, run_name
from rlpulse.runtime.threads import MonitorThread
from rlpulse.text import format_duration, format_number, plural, shortened
from rlpulse.verdict import Bound, drawn_rank, is_drawn, window_verdict

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

__all__ = [
    "BUCKETS",
    "INSTALL_HINT",
    "MAX_LINES",
    "MAX_PANELS",
    "PlotError",
    "PlotWarning",
    "plot_file",
    "plot_files",
    "plot_run",
    "plot_runs",
    "select_metrics",
    "smoothed",
]

INSTALL_HINT = "pip install 'rlpulse[plot]'"
"""How to install what ``rlpulse plot`` needs."""

MAX_PANELS = 12
"""The most panels (watches) one chart draws, the first by name."""

MAX_LINES = 8
"""The most lines one panel draws: rates first, then what a run learns (returns), then the other gauges, then cumulative counters."""

XAxis = str
"""The x axis: ``"time"`` (since the run's start), ``"step"``, or the name of a counter of the run (``"collector/frames"``)."""

BUCKETS = 1000
"""The buckets of time each line is downsampled to: about the width of a panel in pixels."""

_Read = TypeVar("_Read")

# Matplotlib's path codes: where an outline starts, goes on, and closes.
_MOVETO, _LINETO, _CLOSEPOLY = 1, 2, 79

_BANDS = (("p10", "p90"), ("p50", "p99"))
# A distribution's band: the first pair of quantiles it logged, around its p50.

_Unit = Literal["rate", "bytes", "percent", "fraction", "seconds", "value", "total"]
# The axes of a panel, top to bottom, and their labels.
_UNIT_LABELS: dict[_Unit, str] = {
    "rate": "per second (/s)",
    "bytes": "bytes",
    "percent": "percent (%)",
    "fraction": "fraction (0 to 1)",
    "seconds": "seconds (s)",
    "value": "value",
    "total": "total (cumulative)",
}
# The axes a gauge's unit puts it on; any other shares "value".
_GAUGE_UNITS: dict[Unit | None, _Unit] = {
    Unit.BYTES: "bytes",
    Unit.PERCENT: "percent",
    Unit.FRACTION: "fraction",
    Unit.SECONDS: "seconds",
}
_RATE, _GAUGE, _CUMULATIVE = 0, 1, 2
_STYLES = {_RATE: "-", _GAUGE: "--", _CUMULATIVE: ":"}
# Which observations say what a run learns: drawn before the other gauges.
_LEARNING_WORDS = ("return", "reward")
# The statistics of observations that say where they stand, before their
# extremes and tails, in this order: a distribution's median (drawn with
# its band) before its mean, and the last observation after both.
_CENTRAL_STATISTICS = ("", "p50", "mean", "last")
# Two rates that differ by less than this share at every point draw one
# line at a panel's scale (two counters of one thing, read a moment apart,
# differ by one count over a short final interval: 1 % here).
_SAME_RATE = 0.05
# Runs drawn together: one line style each, a metric keeping its colour.
_RUN_STYLES = ("-", "--", ":", "-.")
_PANEL_WIDTH_INCHES = 11.0
_AXES_HEIGHT_INCHES = 2.3
_PANEL_TITLE_INCHES = 0.5
# Where the axes sit, laid out once from these sizes rather than measured
# by a layout engine (which draws every text of the figure to measure it):
# room on the left for an axis's tick labels and unit, on the right for
# its legend (beside the lines, never over them), between axes of a panel
# for ticks, under a panel's last axis for its tick labels and the x
# axis's label.
_LEFT_INCHES = 1.05
_RIGHT_INCHES = 2.3
# The longest label a legend shows whole, in the room on the right; a
# longer one keeps its start and end around an ellipsis.
_LEGEND_CHARACTERS = 25
_AXES_GAP_INCHES = 0.3
_X_LABEL_INCHES = 0.65
# The x axis's label, under its one line of tick labels: its top this far
# below the axis, placed rather than measured against every axis's ticks.
_X_LABEL_TOP_INCHES = 0.29
# A y axis's label, its right edge this far left of the axis: beside tick
# labels of up to nine characters (0.0001234), within the room on the left.
_Y_LABEL_RIGHT_INCHES = 0.86
# A header line, and the margin under the header; lines of text that fit the
# figure's width (large type for the header, small for a panel's constants).
_HEADER_LINE_INCHES = 0.25
_HEADER_MARGIN_INCHES = 0.2
_TITLE_LINE_INCHES = 0.15
_HEADER_CHARACTERS = 105
_CONSTANTS_CHARACTERS = 80
_DPI = 110
# Ticks at multiples of these (times a power of ten), as matplotlib's
# default; at most this many intervals between a linear y axis's ticks.
_TICK_STEPS = [1.0, 2.0, 2.5, 5.0, 10.0]
_Y_TICKS = 5
# The ticks an axis made ahead of its chart has: as many as the time axis
# of a chart's width takes (its locator's "auto" bins), and as many as a
# linear y axis's bins take.
_X_TICKS_AHEAD = 9
_Y_TICKS_AHEAD = _Y_TICKS + 1
# Fewer points than this get a marker on each, so that sparse series (a
# counter schedule logging every 10,000 frames) read as measurements.
_MARKERS_BELOW = 40
# A line of more points than this (about the panel's width in pixels) is
# drawn solid whatever its kind: its points are a bucket's extremes.
_STYLED_UP_TO = BUCKETS
# Matplotlib's for lines: a band (a patch, at 1) under them, the grid below.
_LINE_ZORDER = 2.0
# The shade of a bottleneck watch's windows, by what they said.
_SPAN_COLORS = {
    Bound.PRODUCER: "tab:orange",
    Bound.CONSUMER: "tab:blue",
    Bound.BALANCED: "tab:green",
}
_MAX_CONSTANTS_NOTED = 6
# Lines on one axis whose largest values differ by more than this factor
# share a logarithmic axis.
_LOG_SCALE_SPREAD = 30.0
# A log axis over fewer decades than this is ticked at 1, 2 and 5 of each.
_FEW_DECADES = 1000.0


class PlotError(ValueError):
    """A run that cannot be drawn as asked: no records, no metric matching, no steps.

    Its message is one line that says what is missing and what to try.

    >>> try:
    ...     plot_run([], run="empty")
    ... except PlotError as error:
    ...     print(error)
    run empty has no records to plot
    """


class PlotWarning(UserWarning):
    """What a chart was asked for but leaves out: watches without a step, panels or lines past the bounds.

    Its message is one line that says what was left out and how to draw it.

    >>> import warnings
    >>> records = [Record(100.0, None, "learner/loss", 0.5), Record(100.0, 7, "buffer/size", 3.0)]
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     figure = plot_run(records, run="r", x="step")
    >>> print(caught[0].message)
    left out 1 watch without a step: learner (draw it over time: x='time', --x time)
    """


@dataclass
class _Series:
    """One metric's records, in time order: wall times, x positions, values, and the metric's kind."""

    name: str
    times: list[float] = field(default_factory=list)
    xs: list[float] = field(default_factory=list)
    ys: list[float] = field(default_factory=list)
    kind: Kind | None = None
    # The watch it was logged under and its name there.
    watch: str = field(init=False)
    key: str = field(init=False)

    def __post_init__(self) -> None:
        self.watch, self.key = split(self.name)


@dataclass
class _Line:
    """What one drawn line shows: its label, axis, kind and points."""

    label: str
    unit: _Unit
    kind: int
    xs: list[float]
    ys: list[float]
    # Where it goes among the panel's lines, what it says first (_rank).
    rank: int = 0
    # Runs drawn together: which run (its style), and the label without it
    # (its colour).
    run: int | None = None
    metric: str = ""
    # A distribution's p50 line: the band between two of its quantiles,
    # its label and its bounds' values at xs.
    band: tuple[str, list[float], list[float]] | None = None

    @property
    def constant(self) -> float | None:
        """The line's only value when it never changed (NaN aside), else ``None``."""
        values = {y for y in self.ys if not math.isnan(y)}
        return values.pop() if len(values) == 1 else None


class _Span(NamedTuple):
    """Where a bottleneck watch's verdict held: from ``start`` to ``end`` along the x axis; ``run``: which of runs drawn together."""

    start: float
    end: float
    bound: Bound
    label: str
    run: int | None = None


@dataclass
class _Panel:
    watch: str
    lines: list[_Line]
    constants: list[_Line]
    # A bottleneck watch's verdicts, shaded behind its lines; of runs drawn
    # together, each run's in a band of its own, as many bands as runs.
    spans: list[_Span] = field(default_factory=list)
    bands: int = 1

    @property
    def units(self) -> list[_Unit]:
        drawn = {line.unit for line in self.lines}
        return [unit for unit in _UNIT_LABELS if unit in drawn]


def plot_run(
    records: Iterable[Record],
    *,
    run: str,
    source: str | None = None,
    match: Match = None,
    x: XAxis = "time",
    cumulative: bool = False,
    smooth: float = 0.0,
) -> Figure:
    """Draw the records of one run and return the matplotlib figure, one panel per watch.

    ``x="time"`` puts the time since the run's first record on the x axis
    (seconds, or minutes or hours for long runs); ``x="step"`` puts each
    record's step there and leaves out records without one (a
    :class:`PlotWarning` names the watches left out); the name of a
    counter (``x="collector/frames"``) puts that counter there, every
    point placed at the counter's value at its time (interpolated between
    the counter's records). ``match`` keeps only some metrics (see
    :func:`select_metrics`). ``cumulative=True`` draws each cumulative
    counter itself too, beside its rate. ``smooth`` (from 0, none, to
    below 1) draws each line smoothed as TensorBoard smooths it (a
    debiased exponential moving average, :func:`smoothed`) over the line as
    logged, drawn faint. A distribution's p50 is drawn with a band between
    two of its quantiles where they were logged: p10 to p90, else p50 to
    p99. The title names ``run`` and, when given, ``source`` (the file it
    came from).

    A line of more points than a panel is pixels wide is downsampled to
    :data:`BUCKETS` buckets of time, each keeping its smallest and its
    largest value, so that spikes survive.

    The figure is drawn on an Agg canvas: save it with ``savefig`` or read
    its axes (``figure.axes``: each axis's label is its watch, its y label
    its unit), lines and labels. Raises :class:`PlotError` when there is
    nothing to draw, and ``ImportError`` naming :data:`INSTALL_HINT` when
    matplotlib is not installed.

    >>> records = [
    ...     Record(100.0, 0, "collector/frames", 0.0),
    ...     Record(102.0, 500, "collector/frames", 500.0),
    ...     Record(102.0, 500, "collector/frames_per_second", 250.0),
    ...     Record(104.0, 1000, "collector/frames", 1000.0),
    ...     Record(104.0, 1000, "collector/frames_per_second", 250.0),
    ...     Record(101.0, 40, "buffer/size", 40.0),
    ...     Record(103.0, 90, "buffer/size", 90.0),
    ... ]
    >>> figure = plot_run(records, run="baseline")
    >>> [axes.get_title(loc="left") for axes in figure.axes]
    ['buffer', 'collector']
    >>> [line.get_label() for line in figure.axes[1].get_lines()]
    ['frames/s']
    """
    return _plot_run(
        downsample(records, BUCKETS),
        run=run,
        source=source,
        options=_Options(match, x, cumulative, smooth),
    )


@dataclass(frozen=True)
class _Options:
    match: Match
    x: XAxis
    cumulative: bool
    smooth: float

    def __post_init__(self) -> None:
        if not 0.0 <= self.smooth < 1.0:
            raise ValueError(
                f"smooth must be from 0 (none) to below 1, as TensorBoard's "
                f"smoothing, got {self.smooth!r}; 0.6 to 0.99 is usual"
            )

    def keep(self, kinds: Mapping[str, Kind | None]) -> set[str]:
        """Of a run's metrics (by kind), those a chart draws: the metrics of its first watches, and the counter on the x axis.

        A counter whose rate was logged beside it is drawn as that rate:
        left out, unless drawn itself (``cumulative``) or the steps decide
        what is drawn.
        """
        names = kinds.keys()
        selected = set(select_metrics(names, self.match) or names)
        watches = sorted({split(name)[0] for name in selected})[:MAX_PANELS]
        kept = {
            name
            for name in selected
            if split(name)[0] in watches
            and not (
                not self.cumulative
                and self.x != "step"
                and rate_of(name) in selected
                and (kinds[name] or inferred_kind(name, names)) is Kind.COUNTER
            )
        }
        if self.x not in ("time", "step"):
            kept.add(self.x)
        return kept


def _plot_run(
    data: Downsampled,
    *,
    run: str,
    source: str | None,
    options: _Options,
    sheet: _Sheet | None = None,
) -> Figure:
    x, match = options.x, options.match
    matplotlib = _matplotlib()
    if not data.records:
        raise PlotError(f"run {run} has no records to plot")
    start, end = data.start_wall_time, data.end_wall_time
    names = set(data.kinds)
    if missing := unmatched(names, match):
        raise PlotError(no_metric_matching(run, missing, names))
    selected = set(select_metrics(names, match))
    time_scale, time_unit = _time_unit(end - start)
    series = _series(data, selected, x, start, time_scale, run)
    if not series:
        raise PlotError(
            f"run {run} logged no step with {some_names(selected)}; "
            "plot it over time instead (x='time', --x time)"
        )
    notes = []
    # The run was read for what a chart draws (_Options.keep): what it did
    # not read counts among what the chart leaves out, never as stepless.
    unread = selected - data.points.keys()
    if x == "step" and (stepless := _stepless(selected - unread, series)):
        notes.append(stepless)
    seconds_per_x = time_scale if x == "time" else None
    panels, left_out = _panels(series, options.cumulative, unread, seconds_per_x)
    if left_out:
        notes.append(left_out)
    for note in notes:
        warnings.warn(note, PlotWarning, stacklevel=3)
    title = f"rlpulse run {run}"
    if source:
        title += f" — {source}"
    # A counter drawn as the rate logged beside it counts as shown, read or not.
    drawn = {panel.watch for panel in panels}
    shown = len(series) + sum(_watch_of(name) in drawn for name in unread)
    subtitle = (
        f"{plural(data.records, 'record')} over {format_duration(end - start)}, "
        f"{shown:,} of {plural(len(names), 'metric')}"
    )
    if options.smooth:
        subtitle += f", smoothed {options.smooth:g} (faint: as logged)"
    header = [title, subtitle, *notes]
    return _figure(panels, options, time_unit, sheet or _Sheet(matplotlib), header)


def plot_runs(
    runs: Sequence[tuple[str, Iterable[Record]]],
    *,
    match: Match = None,
    x: XAxis = "time",
    cumulative: bool = False,
    smooth: float = 0.0,
) -> Figure:
    """Draw several runs over each other and return the figure: a panel per watch, a colour per metric, a line style per run.

    ``runs`` are ``(label, records)`` pairs; the legend tells them apart as
    ``[A]``, ``[B]``, …, the title names them. A bottleneck watch's panel
    shades each run's verdicts in a horizontal band of its own, the first
    run's on top, each marked with its letter. With ``x="time"`` each run is
    drawn over the time since its own first record, so runs started at
    different times line up. ``match``, ``x``, ``cumulative`` and ``smooth``
    are those of :func:`plot_run`; one run is drawn as :func:`plot_run` draws it.

    >>> first = [Record(100.0, 0, "c/frames_per_second", 10.0), Record(102.0, 1, "c/frames_per_second", 12.0)]
    >>> second = [Record(500.0, 0, "c/frames_per_second", 20.0), Record(503.0, 1, "c/frames_per_second", 18.0)]
    >>> figure = plot_runs([("a.sqlite", first), ("b.sqlite", second)])
    >>> [line.get_label() for line in figure.axes[0].get_lines()]
    ['frames/s [A]', 'frames/s [B]']
    """
    options = _Options(match, x, cumulative, smooth)
    return _plot_runs(
        [(label, downsample(records, BUCKETS)) for label, records in runs], options
    )


def _plot_runs(
    loaded: list[tuple[str, Downsampled]],
    options: _Options,
    sheet: _Sheet | None = None,
) -> Figure:
    if len(loaded) == 1:
        label, data = loaded[0]
        return _plot_run(data, run=label, source=None, options=options, sheet=sheet)
    match, x = options.match, options.x
    matplotlib = _matplotlib()
    if not any(data.records for _, data in loaded):
        labels = ", ".join(label for label, _ in loaded)
        raise PlotError(f"no run has records to plot: {labels}")
    notes = []
    if len(loaded) > MAX_LINES:
        # A line a run of each metric: past a panel's lines, the later runs
        # would each be left out of every panel, whatever --match keeps.
        cut = [
            f"{run_letter(index)}: {label}"
            for index, (label, _) in enumerate(loaded)
            if index >= MAX_LINES
        ]
        notes.append(
            f"left out {plural(len(cut), 'run')} ({', '.join(cut)}): a panel "
            f"draws at most {MAX_LINES} lines, a run's line of each metric; draw "
            "the rest in a chart of their own"
        )
        loaded = loaded[:MAX_LINES]
    longest = max(
        data.end_wall_time - data.start_wall_time for _, data in loaded if data.records
    )
    time_scale, time_unit = _time_unit(longest)
    lines_of: dict[str, list[_Line]] = {}
    metrics_of: dict[str, set[str]] = {}
    spans_of: dict[str, list[_Span]] = {}
    for index, (label, data) in enumerate(loaded):
        if not data.records:  # a logger closed before its first payload
            notes.append(f"left out run {run_letter(index)} ({label}): no records")
            continue
        names = set(data.kinds)
        start = data.start_wall_time
        selected = set(select_metrics(names, match))
        series = _series(data, selected, x, start, time_scale, label)
        for name in selected - data.points.keys():
            metrics_of.setdefault(_watch_of(name), set()).add(name)
        if not series:
            matching = "" if match is None else f" matching {patterns_text(match)}"
            notes.append(
                f"left out run {run_letter(index)} ({label}): no metric{matching}"
                + (" with a step" if x == "step" else "")
            )
        by_watch: dict[str, list[_Series]] = {}
        for metric in series.values():
            by_watch.setdefault(metric.watch, []).append(metric)
        judged = set()
        for watch, watch_series in by_watch.items():
            if spans := _verdict_spans(
                watch_series, time_scale if x == "time" else None
            ):
                judged.add(watch)
                spans_of.setdefault(watch, []).extend(
                    span._replace(run=index) for span in spans
                )
        letter = run_letter(index)
        for watch, watch_series in sorted(by_watch.items()):
            metrics_of.setdefault(watch, set()).update(m.name for m in watch_series)
            # A verdict's figures but those drawn are shaded in the run's band.
            drawn = [
                metric
                for metric in sorted(watch_series, key=lambda line: line.name)
                if watch not in judged or is_drawn(metric.key)
            ]
            # The watch's lines as one run's chart draws them (a distribution's
            # band, one line of rates that run alike), each marked with its run.
            for line in _lines(drawn, series, options.cumulative):
                line.run, line.metric = index, line.label
                line.label = f"{line.label} [{letter}]"
                if line.band is not None:
                    band_label, lows, highs = line.band
                    line.band = (f"{band_label} [{letter}]", lows, highs)
                if watch in judged:
                    line.rank = drawn_rank(line.metric)
                lines_of.setdefault(watch, []).append(line)
    every = set().union(*(data.kinds for _, data in loaded))
    if missing := unmatched(every, match):
        raise PlotError(
            f"no run has a metric matching {patterns_text(missing)}; their "
            f"{metrics_there(every)}"
        )
    if not lines_of:
        raise PlotError(
            f"no run has a metric matching {patterns_text(match)}"
            + (" with a step" if x == "step" else "")
        )
    panels, left_out = _arranged(
        {watch: len(names) for watch, names in metrics_of.items()},
        lambda watch: lines_of.get(watch, []),
    )
    for panel in panels:
        panel.spans, panel.bands = spans_of.get(panel.watch, []), len(loaded)
    if left_out:
        notes.append(left_out)
    for note in notes:
        warnings.warn(note, PlotWarning, stacklevel=3)
    legend = ", ".join(
        f"{run_letter(index)}: {label}" for index, (label, _) in enumerate(loaded)
    )
    header = [f"rlpulse runs {legend}", *notes]
    return _figure(panels, options, time_unit, sheet or _Sheet(matplotlib), header)


def plot_file(
    path: str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    run: str | None = None,
    match: Match = None,
    x: XAxis = "time",
    cumulative: bool = False,
    smooth: float = 0.0,
) -> Path:
    """Draw a run stored by any rlpulse file sink into an image file and return its path.

    For SQLite, ``run`` picks the run and ``None`` means the latest one; CSV
    and JSON lines files hold one run, named after the file. The image format
    follows ``output``'s extension (``.png``, ``.svg``, ``.pdf``; PNG when it
    has none); missing parent directories are created. The image is written
    to a file beside ``output`` and then renamed onto it, so a save that
    fails (a full disk) or is interrupted leaves the file that was there.
    ``match``, ``x``,
    ``cumulative`` and ``smooth`` are those of :func:`plot_run`, and so are
    its warnings. The file is read as a chart can show it
    (:func:`rlpulse.formats.read_downsampled`): a long SQLite run is
    downsampled by SQLite, a line file in one pass.

    Errors: those of :func:`rlpulse.read` for the file (``FileNotFoundError``,
    :class:`~rlpulse.read.records.RunFileError`), :class:`PlotError` when nothing
    matches, ``ImportError`` naming :data:`INSTALL_HINT` without matplotlib,
    ``OSError`` when ``output`` cannot be written.

    >>> import tempfile, pathlib
    >>> from rlpulse import JSONLLogger
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     sink = JSONLLogger(pathlib.Path(tmp) / "metrics.jsonl")
    ...     for step, size in enumerate((3.0, 5.0), start=1):
    ...         sink.log_metrics({"buffer/size": size}, step=step, timestamp=99.0 + step)
    ...     sink.close()
    ...     image = plot_file(sink.path, pathlib.Path(tmp) / "charts" / "metrics.png")
    ...     image.name, image.read_bytes()[:4]
    ('metrics.png', b'\\x89PNG')
    """
    options = _Options(match, x, cumulative, smooth)
    path = Path(path)
    data, sheet = _read_while_preparing(
        [path], lambda: read_downsampled(path, run, buckets=BUCKETS, keep=options.keep)
    )
    figure = _plot_run(
        data, run=run_name(path, run), source=str(path), options=options, sheet=sheet
    )
    return _save(figure, Path(output))


def plot_files(
    runs: Sequence[tuple[str | os.PathLike[str], str | None]],
    output: str | os.PathLike[str],
    *,
    match: Match = None,
    x: XAxis = "time",
    cumulative: bool = False,
    smooth: float = 0.0,
) -> Path:
    """Draw runs stored by rlpulse's file sinks over each other (:func:`plot_runs`) into an image file; return its path.

    ``runs`` are ``(path, run)`` pairs, ``run`` ``None`` for a file's latest
    run; one pair is drawn as :func:`plot_file` draws it. Errors as for
    :func:`plot_file`.
    """
    if len(runs) == 1:
        ((path, run),) = runs
        return plot_file(
            path,
            output,
            run=run,
            match=match,
            x=x,
            cumulative=cumulative,
            smooth=smooth,
        )
    options = _Options(match, x, cumulative, smooth)
    loaded, sheet = _read_while_preparing(
        [path for path, _ in runs],
        lambda: [
            (
                f"{path} (run {run_name(path, run)})",
                read_downsampled(path, run, buckets=BUCKETS, keep=options.keep),
            )
            for path, run in runs
        ],
    )
    return _save(_plot_runs(loaded, options, sheet), Path(output))


def _read_while_preparing(
    paths: Iterable[str | os.PathLike[str]], read: Callable[[], _Read]
) -> tuple[_Read, _Sheet | None]:
    """What ``read()`` returns (or raises), reading the files at ``paths``, and a sheet prepared meanwhile where they are SQLite files.

    SQLite scans a run without holding the GIL: while it reads on a thread
    of its own, this one imports matplotlib and makes the chart's figure
    and axes ahead, as many as a chart of :data:`MAX_PANELS` panels of
    three axes has, until the run is read. A line file is read in Python,
    which holds the GIL: read first, on this thread. Without matplotlib, a
    file's error comes first all the same.
    """
    if any(detect_format(Path(path)) != "sqlite" for path in paths):
        return read(), None
    done: Future[_Read] = Future()

    def work() -> None:
        try:
            done.set_result(read())
        except BaseException as error:  # raised where the caller waits
            done.set_exception(error)

    # A daemon: a process interrupted while waiting need not wait for the scan.
    MonitorThread("rlpulse-plot-read", work).start()
    sheet = None
    with contextlib.suppress(ImportError):
        sheet = _Sheet(_matplotlib())
        while not done.done() and sheet.spares < 3 * MAX_PANELS:
            sheet.make_spare()
    return done.result(), sheet


class _Sheet:
    """A figure on an Agg canvas, and axes made for it before it is known where they go.

    A chart's axes take the longest to make of its parts that need no data:
    made while its run is read, they are ready when it is.
    """

    def __init__(self, matplotlib: _Matplotlib) -> None:
        self.matplotlib = matplotlib
        self.figure = matplotlib.Figure(figsize=(_PANEL_WIDTH_INCHES, 1.0), dpi=_DPI)
        matplotlib.FigureCanvasAgg(self.figure)
        self._spare: list[Axes] = []

    @property
    def spares(self) -> int:
        return len(self._spare)

    def make_spare(self) -> None:
        axes = self.figure.add_axes((0.0, 0.0, 1.0, 1.0))
        # Matplotlib makes an axis's ticks as it draws it, as many as its
        # locator places: those most charts need, made now, are not then.
        axes.xaxis.get_major_ticks(_X_TICKS_AHEAD)
        axes.yaxis.get_major_ticks(_Y_TICKS_AHEAD)
        # An axis draws its first minor tick's properties even when its
        # locator places none: made now too.
        axes.xaxis.get_minor_ticks(1)
        axes.yaxis.get_minor_ticks(1)
        self._spare.append(axes)

    def add_axes(self, place: tuple[float, float, float, float]) -> Axes:
        """Axes at ``place`` (as ``Figure.add_axes`` takes it): the first spare, else new ones."""
        if not self._spare:
            return self.figure.add_axes(place)
        axes = self._spare.pop(0)
        axes.set_position(place)
        return axes

    def finish(self) -> Figure:
        """The figure, without the spare axes no panel took."""
        for axes in self._spare:
            self.figure.delaxes(axes)
        self._spare.clear()
        return self.figure


def _save(figure: Figure, output: Path) -> Path:
    if output.is_dir():
        raise PlotError(
            f"{output} is a folder: name the image to write, as in {output / 'chart.png'}"
        )
    output.parent.mkdir(parents=True, exist_ok=True)
    image_format = output.suffix.lstrip(".").lower() or "png"
    supported = figure.canvas.get_supported_filetypes()
    if image_format not in supported:
        raise PlotError(
            f"cannot write a .{image_format} image; name the output with one of "
            f"{', '.join('.' + name for name in sorted(supported))}"
        )
    # Written beside the output, then renamed onto it: a save that fails or
    # is interrupted leaves the chart that was there, not half an image.
    temporary = output.with_name(f".{output.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        # Created as open() creates a file: the chart gets the usual permissions.
        with open(temporary, "xb") as file:
            if image_format == "png":
                # A chart is a few flat colours: zlib's fastest level packs it
                # nearly as small as its default, in a third of the time.
                figure.savefig(file, format="png", pil_kwargs={"compress_level": 1})
            else:
                figure.savefig(file, format=image_format)
        os.replace(temporary, output)
    except BaseException as error:
        with contextlib.suppress(OSError):
            temporary.unlink()
        if isinstance(error, OSError) and error.filename is None:
            # A failed write names no file: say which chart it was.
            raise OSError(
                error.errno, error.strerror or str(error), str(output)
            ) from error
        raise
    return output


class _Matplotlib:
    """The few matplotlib names this module uses, imported on first use."""

    def __init__(self) -> None:
        from matplotlib import ticker
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.patches import PathPatch
        from matplotlib.path import Path

        self.Figure = Figure
        self.FigureCanvasAgg = FigureCanvasAgg
        self.Path = Path
        self.PathPatch = PathPatch
        # Its FuncFormatter, LogLocator, NullFormatter.
        self.ticker = ticker
        self.InViewLocator = _in_view_locator()


@functools.cache
def _in_view_locator() -> type[MaxNLocator]:
    from matplotlib.ticker import MaxNLocator

    class InViewLocator(MaxNLocator):
        """Ticks where ``MaxNLocator`` puts them, but only within the axis's view.

        Matplotlib makes a tick (five artists) for each place its locator
        gives, drawn or not, and ``MaxNLocator`` gives one beyond each end.
        """

        def __call__(self) -> Sequence[float]:
            ticks = super().__call__()
            if self.axis is None:
                return ticks
            low, high = sorted(self.axis.get_view_interval())
            slack = (high - low) * 1e-9
            return [at for at in ticks if low - slack <= at <= high + slack]

    return InViewLocator


def _matplotlib() -> _Matplotlib:
    try:
        return _Matplotlib()
    except ImportError as error:
        raise ImportError(
            f"plotting needs matplotlib, which is not installed: {INSTALL_HINT}",
            name="matplotlib",
        ) from error


def _series(
    data: Downsampled,
    selected: set[str],
    x: XAxis,
    start: float,
    time_scale: float,
    run: str,
) -> dict[str, _Series]:
    """The ``selected`` metrics' points, over their step, the time since ``start`` in ``time_scale`` units, or counter ``x``."""
    positions = _positions(data, x, start, time_scale, run)
    names = data.kinds.keys()
    series: dict[str, _Series] = {}
    for name in sorted(selected & data.points.keys()):
        kind = data.kinds.get(name)
        points = data.points[name]
        xs = positions(points)
        times, ys = points.wall_times, points.values
        if None in xs:
            kept = [index for index, at in enumerate(xs) if at is not None]
            times = [times[index] for index in kept]
            ys = [ys[index] for index in kept]
        if times:
            series[name] = _Series(
                name,
                times,
                [at for at in xs if at is not None],
                ys,
                inferred_kind(name, names) if kind is None else kind,
            )
    return series


def _positions(
    data: Downsampled, x: XAxis, start: float, time_scale: float, run: str
) -> Callable[[Points], list[float | None]]:
    """Where points go on the x axis ``x``; ``None`` for a point without a step on the step axis."""
    if x == "time":
        return lambda points: [
            (wall_time - start) / time_scale for wall_time in points.wall_times
        ]
    if x == "step":
        return lambda points: [
            None if step is None else float(step) for step in points.steps
        ]
    counter = data.points.get(x, Points([], [], []))
    finite = [
        index for index, value in enumerate(counter.values) if math.isfinite(value)
    ]
    names = data.kinds.keys()

    def kind_of(name: str) -> Kind | None:
        kind = data.kinds.get(name)
        return inferred_kind(name, names) if kind is None else kind

    if not finite or kind_of(x) is not Kind.COUNTER:
        counters = sorted(name for name in names if kind_of(name) is Kind.COUNTER)
        choices = (
            f"one of its counters: {some_names(counters)}"
            if counters
            else ("it has no counter")
        )
        what = (
            f"'s {x!r} is a {kind_of(x)}, which goes up and down, not a counter"
            if finite
            else f" has no counter {x!r}"
        )
        raise PlotError(
            f"run {run}{what} to draw on the x axis; draw it "
            f"over time, step or a counter (x=, --x): {choices}"
        )
    times = [counter.wall_times[index] for index in finite]
    values = [counter.values[index] for index in finite]
    # A counter only grows (a reset aside): its value at any time lies
    # between its records'.
    return lambda points: [
        _interpolated(times, values, wall_time) for wall_time in points.wall_times
    ]


def _interpolated(times: list[float], values: list[float], at: float) -> float:
    """The value at time ``at`` on the line through ``(times, values)`` (``times`` sorted), its ends beyond them.

    >>> _interpolated([0.0, 10.0], [100.0, 200.0], 2.5), _interpolated([0.0, 10.0], [100.0, 200.0], 11.0)
    (125.0, 200.0)
    """
    index = bisect.bisect_left(times, at)
    if index == 0:
        return values[0]
    if index == len(times):
        return values[-1]
    before, after = times[index - 1], times[index]
    share = (at - before) / (after - before)
    return values[index - 1] + share * (values[index] - values[index - 1])


def _stepless(selected: set[str], series: dict[str, _Series]) -> str | None:
    """Say which selected watches (and metrics of the others) logged no step, if any."""
    missing = selected - series.keys()
    if not missing:
        return None
    stepped = {line.watch for line in series.values()}
    watches = sorted({_watch_of(name) for name in missing} - stepped)
    metrics = [name for name in missing if _watch_of(name) in stepped]
    parts = []
    if watches:
        shown = ", ".join(watch or "(no watch)" for watch in watches)
        parts.append(f"{plural(len(watches), 'watch')} without a step: {shown}")
    if metrics:
        parts.append(f"metrics without a step: {some_names(metrics)}")
    it = "it" if len(watches) + len(metrics) == 1 else "them"
    return f"left out {'; '.join(parts)} (draw {it} over time: x='time', --x time)"


def _panels(
    series: dict[str, _Series],
    cumulative: bool,
    unread: Collection[str],
    seconds_per_x: float | None = None,
) -> tuple[list[_Panel], str | None]:
    """The panels to draw, within the bounds, and what they leave out (``None`` when nothing); ``unread``: metrics not read, left out; ``seconds_per_x``: see :func:`_verdict_spans`."""
    by_watch: dict[str, list[_Series]] = {}
    for name in sorted(series):
        by_watch.setdefault(series[name].watch, []).append(series[name])
    metrics_of = {watch: len(metrics) for watch, metrics in by_watch.items()}
    for name in unread:
        watch = _watch_of(name)
        metrics_of[watch] = metrics_of.get(watch, 0) + 1
    spans = {
        watch: _verdict_spans(metrics, seconds_per_x)
        for watch, metrics in by_watch.items()
    }
    # A bottleneck watch's, judged or not: one whose every window was
    # unknown has no span to shade, and draws its lines as any judged one.
    judging = {
        watch
        for watch, metrics in by_watch.items()
        if any(metric.key == "bound_known" for metric in metrics)
    }

    def lines_of(watch: str) -> list[_Line]:
        drawn = by_watch.get(watch, [])
        if watch not in judging:
            return _lines(drawn, series, cumulative)
        # The verdict is shaded, its codes (-1, 0, 1) not drawn as lines,
        # nor the counts behind its replay ratio; what says most of it
        # comes first (the gain of fixing it).
        drawn = [metric for metric in drawn if is_drawn(metric.key)]
        lines = _lines(drawn, series, cumulative)
        for line in lines:
            line.rank = drawn_rank(line.label)
        return lines

    panels, left_out = _arranged(metrics_of, lines_of)
    for panel in panels:
        panel.spans = spans.get(panel.watch, [])
    return panels, left_out


def _verdict_spans(
    watch_series: list[_Series], seconds_per_x: float | None = None
) -> list[_Span]:
    """Where a bottleneck watch's verdict held, window after window, along the x axis (none for another watch, or one never judged).

    Each window ends at its point and starts at the point before (the
    first, as long before it as the next is after; a window alone, as long
    as its ``window_s`` where the x axis is time, ``seconds_per_x`` seconds
    a unit); neighbours that say the same are one span; unknown windows
    are none.
    """
    by_key = {metric.key: metric for metric in watch_series}
    windows, bound = by_key.get("bound_known"), by_key.get("bound")
    if windows is None or bound is None:
        return []
    lasted = by_key.get("window_s")
    sides = {
        key: metric.ys[-1] for key, metric in by_key.items() if key.startswith("side/")
    }
    bound_at = dict(zip(bound.xs, bound.ys, strict=True))
    xs = windows.xs
    spans: list[_Span] = []
    for index, (end, known) in enumerate(zip(xs, windows.ys, strict=True)):
        if index:
            start = xs[index - 1]
        elif len(xs) > 1:
            start = end - (xs[1] - end)
        elif (
            seconds_per_x is not None
            and lasted is not None
            and math.isfinite(lasted.ys[-1])
        ):
            start = end - lasted.ys[-1] / seconds_per_x
        else:
            continue
        said, label = window_verdict(
            {**sides, "bound_known": known, "bound": bound_at.get(end, math.nan)}
        )
        if said is None:
            continue
        if spans and spans[-1].label == label and spans[-1].end == start:
            spans[-1] = spans[-1]._replace(end=end)
        else:
            spans.append(_Span(start, end, said, label))
    return spans


def _whole_metrics(lines: list[_Line], most: int) -> list[_Line]:
    """The first of ``lines`` (a metric's lines side by side), at most ``most``, ending at a metric's last line: each run's line of a metric kept, or none.

    Only where the first metric alone has more lines than ``most`` (more
    runs drawn together) is it cut.
    """
    end = 0
    for index, line in enumerate(lines):
        last_of_metric = (
            index + 1 == len(lines) or lines[index + 1].metric != line.metric
        )
        if index >= most:
            break
        if last_of_metric:
            end = index + 1
    return lines[: end or most]


def _arranged(
    metrics_of: dict[str, int], lines_of: Callable[[str], list[_Line]]
) -> tuple[list[_Panel], str | None]:
    """Panels of the first watches by name, each of the lines that say most (:func:`_rank`), and what they leave out.

    ``metrics_of``: how many metrics each watch has; ``lines_of(watch)`` its lines.
    """
    watches = sorted(metrics_of)
    panels = []
    lines_left_out: dict[str, list[_Line]] = {}
    for watch in watches[:MAX_PANELS]:
        lines = lines_of(watch)
        varying = [line for line in lines if line.constant is None]
        constants = [line for line in lines if line.constant is not None]
        if not varying:
            varying, constants = constants, []
        # What says most first; runs drawn together keep a metric's lines
        # side by side, so that a panel over its bounds leaves out whole
        # metrics.
        varying.sort(key=lambda line: (line.rank, line.metric))
        kept = _whole_metrics(varying, MAX_LINES)
        if len(kept) < len(varying):
            lines_left_out[watch] = varying[len(kept) :]
        panels.append(_Panel(watch, kept, constants))
    omitted = watches[MAX_PANELS:]
    parts = []
    if omitted:
        metrics = sum(metrics_of[watch] for watch in omitted)
        shown = ", ".join(watch or "(no watch)" for watch in omitted[:3])
        parts.append(
            f"{len(omitted):,} of {plural(len(watches), 'watch')} "
            f"({plural(metrics, 'metric')}: {shown}{', …' if len(omitted) > 3 else ''})"
        )
    example = f"'{omitted[0] or '*'}/*'" if omitted else None
    if lines_left_out:
        count = sum(map(len, lines_left_out.values()))
        watch, left = next(iter(lines_left_out.items()))
        named = ", ".join(line.label for line in left[:3]) + (
            ", …" if count > 3 else ""
        )
        parts.append(
            f"{plural(count, 'line')} of the watches drawn ({watch or '(no watch)'}: "
            f"{named})"
        )
        if example is None:
            # One of those lines, by its metric's name (a rate's counter's
            # name and what follows: the counter, its logged rate).
            metric = left[0].metric or left[0].label
            if metric.endswith("/s"):
                metric = metric.removesuffix("/s") + "*"
            if not re.fullmatch(r"[\w.*-]+", metric):
                metric = "*"
            example = f"'{watch or '*'}/{metric}'"
    if not parts:
        return panels, None
    return panels, (
        f"left out {' and '.join(parts)}: a chart draws at most {MAX_PANELS} "
        f"watches of {MAX_LINES} lines each; narrow it with --match PATTERN "
        f"(repeatable; match= in Python), as in --match {example}, or to a "
        f"kind of metric, as in --match '*_per_second'"
    )


def _lines(
    watch_series: list[_Series], series: dict[str, _Series], cumulative: bool
) -> list[_Line]:
    """A watch's lines, by kind: its rates, its gauges (a distribution's p50 with its band), each counter as its rate (and itself when ``cumulative``)."""
    bands, banded = _bands(watch_series, series)
    lines = []
    for metric in watch_series:
        key = metric.key
        if metric.kind is Kind.RATE:
            label = f"{key.removesuffix(RATE_SUFFIX)}/s"
            rank = _rank(_RATE, key.removesuffix(RATE_SUFFIX))
            lines.append(_Line(label, "rate", _RATE, metric.xs, metric.ys, rank))
            continue
        if metric.kind is not Kind.COUNTER:
            if metric.name in banded:
                continue
            rank = _rank(_GAUGE, key)
            line = _Line(key, _unit_of(key), _GAUGE, metric.xs, metric.ys, rank)
            line.band = bands.get(metric.name)
            lines.append(line)
            continue
        rate = rate_of(metric.name)
        derived = None if rate in series else _derived_rate(metric)
        if derived is not None:
            lines.append(derived)
        if cumulative or (derived is None and rate not in series):
            # Asked for (--cumulative), a total ranks as a gauge's value:
            # last of a full panel, it would be left out.
            rank = _rank(_GAUGE if cumulative else _CUMULATIVE, key)
            lines.append(_Line(key, "total", _CUMULATIVE, metric.xs, metric.ys, rank))
    return _without_repeated_rates(lines)


def _without_repeated_rates(lines: list[_Line]) -> list[_Line]:
    """``lines`` less each rate another draws, point for point within :data:`_SAME_RATE`: a distribution's count (a tally's ``update_s_count``) beside the counter it counts with (``updates``), two tallies of one episode.

    The rate named for what it counts stays (``frames``, not a return's
    sum that runs as fast where each frame earns a reward of one), else one
    of what a run learns.
    """

    def preference(line: _Line) -> tuple[bool, bool]:
        observed, statistic = statistic_of(line.label.removesuffix("/s"))
        learns = any(word in observed for word in _LEARNING_WORDS)
        return statistic in ("count", "sum"), not learns

    kept: list[_Line] = []
    repeated: set[int] = set()
    for line in sorted((line for line in lines if line.kind == _RATE), key=preference):
        if any(_same_rate(line, other) for other in kept):
            repeated.add(id(line))
        else:
            kept.append(line)
    return [line for line in lines if id(line) not in repeated]


def _same_rate(line: _Line, other: _Line) -> bool:
    """Whether two rate lines have the same points, their values within :data:`_SAME_RATE` (a logged rate and one derived from the counter's records differ by their clocks)."""
    if line.xs != other.xs:
        return False
    for y, other_y in zip(line.ys, other.ys, strict=True):
        if math.isnan(y) or math.isnan(other_y):
            if math.isnan(y) != math.isnan(other_y):
                return False
        elif not math.isclose(y, other_y, rel_tol=_SAME_RATE, abs_tol=1e-12):
            return False
    return True


def _bands(
    watch_series: list[_Series], series: dict[str, _Series]
) -> tuple[dict[str, tuple[str, list[float], list[float]]], set[str]]:
    """The band of each distribution's p50 that has one (by the p50's name), and the names of the quantiles drawn as bands."""
    bands: dict[str, tuple[str, list[float], list[float]]] = {}
    banded: set[str] = set()
    for metric in watch_series:
        observed, statistic = statistic_of(metric.key)
        if statistic != "p50" or metric.kind is Kind.COUNTER:
            continue
        stem = metric.name.removesuffix("p50")
        for low, high in _BANDS:
            bounds = [series.get(stem + quantile) for quantile in (low, high)]
            if all(bound is not None for bound in bounds):
                lows, highs = (
                    metric.ys if bound is metric else _at(bound, metric.times)
                    for bound in bounds
                    if bound is not None
                )
                bands[metric.name] = (f"{observed} {low}–{high}", lows, highs)
                banded.update(stem + quantile for quantile in (low, high))
                break
    banded -= bands.keys()
    return bands, banded


def _at(line: _Series, times: list[float]) -> list[float]:
    """``line``'s values at ``times``, interpolated between its points."""
    return [_interpolated(line.times, line.ys, at) for at in times]


def _rank(kind: int, key: str) -> int:
    """Where a line of metric ``key`` drawn as ``kind`` goes among its panel's: what says most first.

    Rates first (a sum's rate last of them: the return per second says
    little), then what a run learns (a return, a reward), then the other
    gauges, each where it stands (median, mean, last:
    :data:`_CENTRAL_STATISTICS`) before its extremes and tails, then the
    cumulative lines.

    >>> keys = [(_RATE, "episode_return_sum"), (_GAUGE, "latency_s_p99"), (_GAUGE, "update_s_last"),
    ...         (_GAUGE, "update_s_mean"), (_GAUGE, "update_s_p50"), (_GAUGE, "size"),
    ...         (_GAUGE, "episode_return_max"), (_GAUGE, "episode_return_mean"), (_RATE, "frames")]
    >>> [key for kind, key in sorted(keys, key=lambda line: _rank(*line))]
    ['frames', 'episode_return_mean', 'episode_return_max', 'size', 'update_s_p50', 'update_s_mean', 'update_s_last', 'latency_s_p99', 'episode_return_sum']
    """
    classes = len(_CENTRAL_STATISTICS)
    if kind == _CUMULATIVE:
        return 6 * classes
    observed, statistic = statistic_of(key)
    if kind == _RATE:
        return 5 * classes if statistic == "sum" else 0
    central = statistic in _CENTRAL_STATISTICS
    within = _CENTRAL_STATISTICS.index(statistic) if central else 0
    if any(word in observed for word in _LEARNING_WORDS):
        return (1 if central else 2) * classes + within
    return (3 if central else 4) * classes + within


def _derived_rate(counter: _Series) -> _Line | None:
    """A counter's per-second rate between consecutive records; ``None`` with no two records to rate.

    A record too soon after the one before (a final snapshot a few
    milliseconds after the last scheduled one,
    :func:`~rlpulse.metrics.too_soon_to_rate`) is rated from the record
    before that. No rate where the counter went down (a reset) or two
    records share a time.
    """
    xs: list[float] = []
    ys: list[float] = []
    times, values = counter.times, counter.ys
    for index in range(1, len(times)):
        start = index - 1
        if index > 1 and too_soon_to_rate(
            times[index] - times[start], times[start] - times[start - 1]
        ):
            start -= 1
        elapsed = times[index] - times[start]
        increase = values[index] - values[start]
        xs.append(counter.xs[index])
        ys.append(increase / elapsed if elapsed > 0 and increase >= 0 else math.nan)
    if not any(math.isfinite(y) for y in ys):
        return None
    key = counter.key
    label = f"{rate_of(key).removesuffix(RATE_SUFFIX)}/s"
    return _Line(label, "rate", _RATE, xs, ys, _rank(_RATE, key))


def _unit_of(key: str) -> _Unit:
    """The axis of a gauge whose name says its unit (``rss_bytes``, ``cpu_percent``, ``heartbeat_age_s``)."""
    return _GAUGE_UNITS.get(unit_of(key), "value")


def _watch_of(name: str) -> str:
    return split(name)[0]


def _figure(
    panels: list[_Panel],
    options: _Options,
    time_unit: str,
    sheet: _Sheet,
    header: list[str],
) -> Figure:
    """A figure of one panel per watch, stacked, each one axis per unit, on ``sheet``, under ``header``'s lines."""
    x = options.x
    header = _wrapped(header, _HEADER_CHARACTERS)
    heights = [
        _PANEL_TITLE_INCHES
        + _TITLE_LINE_INCHES * (len(_constants_lines(panel.constants)) - 1)
        + _AXES_HEIGHT_INCHES * len(panel.units)
        for panel in panels
    ]
    header_inches = _HEADER_MARGIN_INCHES + _HEADER_LINE_INCHES * len(header)
    height = header_inches + sum(heights)
    figure = sheet.figure
    figure.set_size_inches(_PANEL_WIDTH_INCHES, height)
    figure.suptitle(
        "\n".join(header),
        fontsize="large",
        x=0.01,
        y=1.0 - _HEADER_MARGIN_INCHES / 2 / height,
        ha="left",
        va="top",
    )
    # The span every panel draws (over time or a counter): from the first
    # point of any to the last. Over steps, each panel's own.
    span = None
    if x != "step":
        span = _x_span(panels)
    shared: Axes | None = None
    top = height - header_inches
    for panel, panel_height in zip(panels, heights, strict=True):
        places = _axes_places(len(panel.units), top, panel_height, height)
        top -= panel_height
        all_axes = _draw_panel(sheet, places, panel, options.smooth)
        # Every axis of the figure over one x range, with one set of ticks
        # (over time; steps differ from watch to watch): a panel's axes
        # share it with the first panel's first axis.
        leader = all_axes[0] if shared is None or x == "step" else shared
        if x == "step":
            # The panel's first axis alone would end its range where its
            # own lines do: a rate starts a snapshot after the counters.
            own = _x_span([panel])
            if own is not None:
                leader.set_xlim(*own)
        elif shared is None:
            shared = leader
            if span is not None:
                leader.set_xlim(*span)
        for axes in all_axes:
            if axes is not leader:
                axes.sharex(leader)
        for axes in all_axes[:-1]:
            axes.tick_params(labelbottom=False)
        xlabel = f"{time_unit} since the start of the run" if x == "time" else x
        all_axes[-1].set_xlabel(xlabel)
    return sheet.finish()


def _x_span(panels: list[_Panel]) -> tuple[float, float] | None:
    """From the first point of any line of ``panels`` to the last, with a margin; ``None`` without a point."""
    xs = [at for panel in panels for line in panel.lines for at in line.xs]
    if not xs:
        return None
    low, high = min(xs), max(xs)
    margin = 0.02 * (high - low) or 0.5
    return (low - margin, high + margin)


def _axes_places(
    count: int, top: float, panel_height: float, height: float
) -> list[tuple[float, float, float, float]]:
    """Where a panel's ``count`` axes go, top to bottom, as ``add_axes`` takes them (fractions of the figure).

    The panel spans ``panel_height`` inches down from ``top`` inches above
    the bottom of a figure ``height`` inches high; its title above the axes.

    >>> [round(bottom * 10, 2) for _, bottom, _, _ in _axes_places(2, 10.0, 5.1, 10.0)]  # inches up
    [7.67, 5.55]
    """
    axes_top = top - (panel_height - _AXES_HEIGHT_INCHES * count)
    room = _AXES_HEIGHT_INCHES * count - _X_LABEL_INCHES
    axes_height = (room - _AXES_GAP_INCHES * (count - 1)) / count
    left = _LEFT_INCHES / _PANEL_WIDTH_INCHES
    width = 1.0 - (_LEFT_INCHES + _RIGHT_INCHES) / _PANEL_WIDTH_INCHES
    places = []
    for index in range(count):
        bottom = axes_top - (index + 1) * axes_height - index * _AXES_GAP_INCHES
        places.append((left, bottom / height, width, axes_height / height))
    return places


def _draw_panel(
    sheet: _Sheet,
    places: list[tuple[float, float, float, float]],
    panel: _Panel,
    smooth: float,
) -> list[Axes]:
    """Draw one watch at ``places``: an axis per unit, the watch's name and constants above."""
    units = panel.units
    figure, matplotlib = sheet.figure, sheet.matplotlib
    all_axes = [sheet.add_axes(place) for place in places]
    for axes, (_, _, axes_width, axes_height) in zip(all_axes, places, strict=True):
        axes.xaxis.set_major_locator(
            matplotlib.InViewLocator(nbins="auto", steps=_TICK_STEPS)
        )
        axes.xaxis.set_label_coords(
            0.5, -_X_LABEL_TOP_INCHES / (axes_height * figure.get_figheight())
        )
        axes.yaxis.set_label_coords(
            -_Y_LABEL_RIGHT_INCHES / (axes_width * figure.get_figwidth()), 0.5
        )
    top = all_axes[0]
    # Titles placed on the axis's top edge (y=1.0), not measured against
    # the ticks above it: there are none.
    top.set_title(panel.watch or "(no watch)", loc="left", fontweight="bold", y=1.0)
    if panel.constants:
        note = "\n".join(_constants_lines(panel.constants))
        top.set_title(note, loc="right", fontsize="small", y=1.0)
    colors = iter(f"C{index}" for index in range(len(panel.lines) + 10))
    # One colour per metric: runs drawn together share it.
    color_of: dict[str, str] = {}
    labelled: set[str] = set()
    band = 1.0 / panel.bands
    for axes in all_axes:
        for span in panel.spans:
            # Named once, in the legend of the panel's first axis.
            named = axes is top and span.label not in labelled
            labelled.update([span.label] if named else [])
            # Runs drawn together: each run's verdicts in a band of its own,
            # the first run's on top.
            high = 1.0 - band * (span.run or 0)
            axes.axvspan(
                span.start,
                span.end,
                ymin=high - band,
                ymax=high,
                color=_SPAN_COLORS[span.bound],
                alpha=0.15,
                linewidth=0,
                zorder=0.5,
                label=span.label if named else "_nolegend_",
            )
        if panel.spans and panel.bands > 1:
            for run in range(panel.bands):
                axes.text(
                    0.005,
                    1.0 - band * (run + 0.5),
                    f"[{run_letter(run)}]",
                    transform=axes.transAxes,
                    va="center",
                    fontsize="small",
                    alpha=0.6,
                )
    for axes, unit in zip(all_axes, units, strict=True):
        lines = [line for line in panel.lines if line.unit == unit]
        for rank, line in enumerate(lines):
            color = color_of.setdefault(line.metric or line.label, next(colors))
            # The first line of an axis (a return before a queue's depth) on top.
            zorder = _LINE_ZORDER + (len(lines) - rank) / len(lines)
            _draw(axes, line, color, smooth, matplotlib, zorder)
        _scale(axes, lines, unit, matplotlib)
        axes.set_label(panel.watch)
        axes.grid(True, alpha=0.3)
        handles, labels = axes.get_legend_handles_labels()
        axes.legend(
            handles,
            [shortened(label, _LEGEND_CHARACTERS) for label in labels],
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            borderaxespad=0.0,
            fontsize="small",
            frameon=False,
        )
    return all_axes


def _constants_lines(constants: list[_Line]) -> list[str]:
    """The note of a panel's metrics that never changed, in lines that fit beside its title; none without any."""
    if not constants:
        return [""]
    shown = [
        f"{line.label} = {format_number(line.constant or 0.0)}"
        for line in constants[:_MAX_CONSTANTS_NOTED]
    ]
    if len(constants) > _MAX_CONSTANTS_NOTED:
        shown.append(f"and {len(constants) - _MAX_CONSTANTS_NOTED} more")
    lines = ["constant:"]
    for item in shown:
        if len(lines[-1]) + 3 + len(item) > _CONSTANTS_CHARACTERS:
            lines.append(item)
        else:
            lines[-1] += ("   " if lines[-1] != "constant:" else " ") + item
    return lines


def _wrapped(lines: list[str], width: int) -> list[str]:
    """``lines`` broken between words into lines of at most ``width`` characters."""
    return [part for line in lines for part in textwrap.wrap(line, width) or [""]]


def _draw(
    axes: Axes,
    line: _Line,
    color: str,
    smooth: float,
    matplotlib: _Matplotlib,
    zorder: float,
) -> None:
    if line.band is not None:
        label, lows, highs = line.band
        if smooth:  # as smoothed as the line it surrounds
            lows, highs = smoothed(lows, smooth), smoothed(highs, smooth)
        # One patch, drawn as a path: fill_between's collection of one
        # polygon is drawn as a marker, several times slower. Its vertices
        # widen the axis's limits at once (add_patch would measure the
        # patch a segment at a time); the line drawn next rescales it.
        vertices, codes = _band_outline(line.xs, lows, highs)
        if vertices:  # none where a bound is never known
            axes.update_datalim(vertices)
            axes.add_artist(
                matplotlib.PathPatch(
                    matplotlib.Path(vertices, codes),
                    color=color,
                    alpha=0.2,
                    linewidth=0,
                    label=label,
                )
            )
    ys = line.ys
    if smooth and line.kind != _CUMULATIVE:
        # The line as logged, faint, under its smoothed self.
        axes.plot(
            line.xs, ys, "-", color=color, alpha=0.25, linewidth=1.0, zorder=zorder
        )
        ys = smoothed(ys, smooth)
    marker = "o" if len(line.xs) < _MARKERS_BELOW else None
    if line.run is not None and line.run >= len(_RUN_STYLES):
        marker = "^"  # past the line styles: the fifth run on is marked
    if line.run is not None:
        style = _RUN_STYLES[line.run % len(_RUN_STYLES)]
    elif len(line.xs) > _STYLED_UP_TO:
        # Downsampled to each bucket's extremes, the line goes up and down
        # within a pixel: dashes along it would only hatch it.
        style = "-"
    else:
        style = _STYLES[line.kind]
    axes.plot(
        line.xs,
        ys,
        style,
        color=color,
        marker=marker,
        markersize=3.5,
        linewidth=1.6,
        label=line.label,
        zorder=zorder,
    )


def _band_outline(
    xs: list[float], lows: list[float], highs: list[float]
) -> tuple[list[tuple[float, float]], list[int]]:
    """The vertices and path codes of the band between ``lows`` and ``highs`` at ``xs``: a polygon over each run of points where both are known.

    A NaN leaves a gap, as ``fill_between`` leaves one.

    >>> vertices, codes = _band_outline([0.0, 1.0, 2.0, 3.0], [1.0, 1.0, math.nan, 1.0], [2.0, 3.0, 2.0, 2.0])
    >>> vertices[:4], codes[:5]
    ([(0.0, 2.0), (1.0, 3.0), (1.0, 1.0), (0.0, 1.0)], [1, 2, 2, 2, 79])
    """
    vertices: list[tuple[float, float]] = []
    codes: list[int] = []
    known = [
        index
        for index, bounds in enumerate(zip(xs, lows, highs, strict=True))
        if all(math.isfinite(bound) for bound in bounds)
    ]
    runs = [
        [index for _, index in run]
        for _, run in itertools.groupby(
            enumerate(known), lambda pair: pair[1] - pair[0]
        )
    ]
    for run in runs:
        outline = [(xs[index], highs[index]) for index in run]
        outline += [(xs[index], lows[index]) for index in reversed(run)]
        vertices += [*outline, outline[0]]
        codes += [_MOVETO] + [_LINETO] * (len(outline) - 1) + [_CLOSEPOLY]
    return vertices, codes


def smoothed(values: Sequence[float], weight: float) -> list[float]:
    """``values`` smoothed as TensorBoard smooths a scalar's line: an exponential moving average debiased at its start.

    Each value ``v`` moves the average to ``last * weight + (1 - weight) * v``,
    divided by ``1 - weight ** n`` after ``n`` values, so that the first
    ones are not pulled towards zero. Values that are not finite stay as
    they are and move nothing; a line that never changes is left as it is.

    >>> smoothed([1.0, 2.0, 3.0], 0.5)
    [1.0, 1.6666666666666667, 2.4285714285714284]
    >>> smoothed([4.0, 4.0], 0.9), smoothed([1.0, float("nan"), 3.0], 0.0)
    ([4.0, 4.0], [1.0, nan, 3.0])
    """
    if all(value == values[0] for value in values):
        return list(values)
    result = []
    last = 0.0
    accumulated = 0
    for value in values:
        if not math.isfinite(value):
            result.append(value)
            continue
        last = last * weight + (1 - weight) * value
        accumulated += 1
        result.append(last / (1 - weight**accumulated))
    return result


def _symlog_ticks(values: list[float]) -> list[float]:
    """Where a symmetric log axis over ``values`` is ticked: zero, and powers of ten on each side, every decade or, over many, every few (at most :data:`_Y_TICKS` a side).

    >>> _symlog_ticks([0.0, 0.001, 5000.0])  # seven decades: every other
    [0.0, 0.001, 0.1, 10.0, 1000.0]
    >>> _symlog_ticks([-2.0, 0.0, 30.0])
    [-10.0, -1.0, 0.0, 10.0, 100.0]
    """
    ticks = [0.0]
    for sign in (1.0, -1.0):
        sizes = [abs(value) for value in values if value * sign > 0]
        if not sizes:
            continue
        low = math.floor(math.log10(min(sizes)))
        high = math.ceil(math.log10(max(sizes)))
        stride = max(1, math.ceil((high - low) / _Y_TICKS))
        ticks += [sign * 10.0**power for power in range(low, high + 1, stride)]
    return sorted(ticks)


def _scale(
    axes: Axes, lines: list[_Line], unit: _Unit, matplotlib: _Matplotlib
) -> None:
    """Label an axis of ``unit``, in linear scale from zero, or logarithmic when its lines' sizes differ widely.

    On one linear axis, 50 samples/s next to 4000 writes/s is a flat line at
    zero; a log axis shows both. A fraction's axis is always linear, from 0
    to 1: a buffer a tenth full reads as a tenth of the axis.
    """
    label = _UNIT_LABELS[unit]
    peaks = [
        max((abs(y) for y in line.ys if math.isfinite(y)), default=0.0)
        for line in lines
    ]
    positive_peaks = [peak for peak in peaks if peak > 0]
    spread = (
        max(positive_peaks) / min(positive_peaks) if len(positive_peaks) > 1 else 1.0
    )
    if unit == "fraction":
        # Room above 1, as above any line: a full buffer is not on the frame.
        axes.set_ylim(0.0, max(1.0, *peaks) * 1.05)
        axes.yaxis.set_major_locator(
            matplotlib.InViewLocator(nbins=_Y_TICKS, steps=_TICK_STEPS)
        )
    elif spread > _LOG_SCALE_SPREAD:
        values = [y for line in lines for y in line.ys if math.isfinite(y)]
        smallest = min((abs(y) for y in values if y != 0), default=1.0)
        if min(values) > 0:
            axes.set_yscale("log")
            # Decades alone over a few would leave one tick, or none, in view;
            # over many, every other one (their labels would touch).
            few = max(values) / min(values) < _FEW_DECADES
            axes.yaxis.set_major_locator(
                matplotlib.ticker.LogLocator(
                    base=10.0,
                    subs=(1.0, 2.0, 5.0) if few else (1.0,),
                    numticks=_Y_TICKS + 1,
                )
            )
        else:
            # Zero a decade's height below the smallest value: their labels
            # apart.
            axes.set_yscale("symlog", linthresh=smallest, linscale=1.0)
            axes.yaxis.set_major_locator(
                matplotlib.ticker.FixedLocator(_symlog_ticks(values))
            )
        axes.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        label += ", log scale"
    else:
        # From zero, with room beyond the lines' farthest value: a nearly
        # constant line (1000 to 1001 frames/s) does not sit on the frame.
        low, high = axes.get_ylim()
        if low > 0:
            axes.set_ylim(0.0, max(high, max(peaks, default=high) * 1.05))
        elif high < 0:
            axes.set_ylim(min(low, -max(peaks, default=-low) * 1.05), 0.0)
        axes.yaxis.set_major_locator(
            matplotlib.InViewLocator(nbins=_Y_TICKS, steps=_TICK_STEPS)
        )
    axes.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(_tick_label))
    axes.set_ylabel(label)


def _tick_label(value: float, _: object = None) -> str:
    """A y tick's label: its value as a number is written, the locator's float noise rounded off first (a tick at 1e-05 comes as 9.999999999999999e-06, which format_number, cutting short of a power of ten, writes 9.999e-06).

    >>> _tick_label(9.999999999999999e-06), _tick_label(0.30000000000000004), _tick_label(2500.0)
    ('1e-05', '0.3', '2500')
    """
    return format_number(float(f"{value:.12g}"))


def _time_unit(span: float) -> tuple[float, str]:
    if span <= 300:
        return 1.0, "seconds"
    if span <= 3 * 3600:
        return 60.0, "minutes"
    return 3600.0, "hours"
