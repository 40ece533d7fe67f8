"""Charts of a recorded run: what ``rlpulse plot`` draws.

One figure per run, one panel per watch (the part of a metric name before
the first ``/``), the watch's rates and gauges over time since the start of
the run, or over the logging step. Needs matplotlib (extra ``rlpulse[plot]``),
imported only when a chart is drawn, always through the Agg backend: no
window ever opens.

What a panel shows:

- rates (``frames_per_second``, …) on the left axis, in units per second;
- gauges (``size``, ``utilization``, a tally's ``episode_return_mean``, …) on
  the left axis too, or on a right axis of their own when the panel also has
  rates;
- a cumulative counter only when its rate is not drawn (``frames`` is shown
  through ``frames_per_second``);
- metrics that never changed over the run as a note under the panel's title
  (``capacity = 100k``) instead of flat lines.

Legends sit to the right of the panels, never over the data.
"""

from __future__ import annotations

import fnmatch
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from rlpulse.metrics import rate_name
from rlpulse.read.records import Record
from rlpulse.read.summary import format_duration, format_number, read_run

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "INSTALL_HINT",
    "PlotError",
    "plot_file",
    "plot_run",
    "select_metrics",
]

INSTALL_HINT = "pip install 'rlpulse[plot]'"
"""How to install what ``rlpulse plot`` needs."""

XAxis = Literal["time", "step"]

_RATE_SUFFIX = "_per_second"
_PANEL_WIDTH_INCHES = 11.0
_PANEL_HEIGHT_INCHES = 2.8
_HEADER_INCHES = 0.7
_DPI = 110
# Fewer points than this get a marker on each, so that sparse series (a
# counter schedule logging every 10,000 frames) read as measurements.
_MARKERS_BELOW = 40
_MAX_NAMES_IN_ERROR = 12
# Lines on one axis whose largest values differ by more than this factor
# share a logarithmic axis.
_LOG_SCALE_SPREAD = 30.0


class PlotError(ValueError):
    """A run that cannot be drawn as asked: no records, no metric matching, no steps.

    Its message is one line that says what is missing and what to try.

    >>> try:
    ...     plot_run([], run="empty")
    ... except PlotError as error:
    ...     print(error)
    run empty has no records to plot
    """


@dataclass
class _Series:
    name: str
    xs: list[float] = field(default_factory=list)
    ys: list[float] = field(default_factory=list)

    @property
    def key(self) -> str:
        return self.name.partition("/")[2] or self.name

    @property
    def is_rate(self) -> bool:
        return self.key.endswith(_RATE_SUFFIX)

    @property
    def constant(self) -> float | None:
        """The series' only value when it never changed (NaN aside), else ``None``."""
        values = {y for y in self.ys if not math.isnan(y)}
        return values.pop() if len(values) == 1 else None

    @property
    def label(self) -> str:
        if self.is_rate:
            return f"{self.key.removesuffix(_RATE_SUFFIX)}/s"
        return self.key


def select_metrics(names: Iterable[str], match: str | None = None) -> list[str]:
    """Return the metric names ``rlpulse plot --match`` keeps, sorted.

    ``match`` is a glob pattern when it holds ``*``, ``?`` or ``[`` (matched
    against the whole name, case-sensitively, as in ``collector/*`` or
    ``*_per_second``), else a substring of the name (``buffer``,
    ``episode_return``). ``None`` keeps every name.

    >>> names = ["collector/frames", "collector/frames_per_second", "buffer/size"]
    >>> select_metrics(names, "*_per_second")
    ['collector/frames_per_second']
    >>> select_metrics(names, "frames")
    ['collector/frames', 'collector/frames_per_second']
    >>> select_metrics(names)
    ['buffer/size', 'collector/frames', 'collector/frames_per_second']
    """
    unique = sorted(set(names))
    if match is None:
        return unique
    if any(character in match for character in "*?["):
        return [name for name in unique if fnmatch.fnmatchcase(name, match)]
    return [name for name in unique if match in name]


def plot_run(
    records: Iterable[Record],
    *,
    run: str,
    source: str | None = None,
    match: str | None = None,
    x: XAxis = "time",
) -> Figure:
    """Draw the records of one run and return the matplotlib figure, one panel per watch.

    ``x="time"`` puts the time since the run's first record on the x axis
    (seconds, or minutes or hours for long runs); ``x="step"`` puts each
    record's step there and leaves out records without one. ``match`` keeps
    only some metrics (see :func:`select_metrics`). The title names ``run``
    and, when given, ``source`` (the file it came from).

    The figure is drawn on an Agg canvas: save it with ``savefig`` or read
    its panels (``figure.axes``), lines and labels. Raises :class:`PlotError`
    when there is nothing to draw, and ``ImportError`` naming
    :data:`INSTALL_HINT` when matplotlib is not installed.

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
    if x not in ("time", "step"):
        raise ValueError(f"x must be 'time' or 'step', got {x!r}")
    matplotlib = _matplotlib()
    records = list(records)
    if not records:
        raise PlotError(f"run {run} has no records to plot")
    start = min(record.wall_time for record in records)
    end = max(record.wall_time for record in records)
    names = {record.name for record in records}
    selected = set(select_metrics(names, match))
    if not selected:
        raise PlotError(
            f"run {run} has no metric matching {match!r}; its metrics are "
            f"{_some_names(names)}"
        )
    time_scale, time_unit = _time_unit(end - start)
    series = _series(records, selected, x, start, time_scale)
    if not series:
        raise PlotError(
            f"run {run} logged no step with {_some_names(selected)}; "
            "plot it over time instead (x='time', --x time)"
        )
    figure = _figure(_panels(series), x, time_unit, matplotlib)
    title = f"rlpulse run {run}"
    if source:
        title += f" — {source}"
    subtitle = (
        f"{len(records)} records over {format_duration(end - start)}, "
        f"{len(series)} of {len(names)} metrics"
    )
    figure.suptitle(f"{title}\n{subtitle}", fontsize="large", x=0.01, ha="left")
    return figure


def plot_file(
    path: str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    run: str | None = None,
    match: str | None = None,
    x: XAxis = "time",
) -> Path:
    """Draw a run stored by any rlpulse file sink into an image file and return its path.

    For SQLite, ``run`` picks the run and ``None`` means the latest one; CSV
    and JSON lines files hold one run, named after the file. The image format
    follows ``output``'s extension (``.png``, ``.svg``, ``.pdf``; PNG when it
    has none); missing parent directories are created. ``match`` and ``x``
    are those of :func:`plot_run`.

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
    path = Path(path)
    output = Path(output)
    run, records = read_run(path, run)
    figure = plot_run(records, run=run, source=str(path), match=match, x=x)
    output.parent.mkdir(parents=True, exist_ok=True)
    image_format = output.suffix.lstrip(".").lower() or "png"
    supported = figure.canvas.get_supported_filetypes()
    if image_format not in supported:
        raise PlotError(
            f"cannot write a .{image_format} image; name the output with one of "
            f"{', '.join('.' + name for name in sorted(supported))}"
        )
    figure.savefig(output, format=image_format)
    return output


class _Matplotlib:
    """The few matplotlib names this module uses, imported on first use."""

    def __init__(self) -> None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import FuncFormatter, NullFormatter

        self.Figure = Figure
        self.FigureCanvasAgg = FigureCanvasAgg
        self.FuncFormatter = FuncFormatter
        self.NullFormatter = NullFormatter


def _matplotlib() -> _Matplotlib:
    try:
        return _Matplotlib()
    except ImportError as error:
        raise ImportError(
            f"plotting needs matplotlib, which is not installed: {INSTALL_HINT}",
            name="matplotlib",
        ) from error


def _series(
    records: list[Record],
    selected: set[str],
    x: XAxis,
    start: float,
    time_scale: float,
) -> dict[str, _Series]:
    """The lines of the ``selected`` metrics, over their step or the time since ``start`` in ``time_scale`` units."""
    series: dict[str, _Series] = {}
    for record in records:
        if record.name not in selected:
            continue
        if x == "step":
            if record.step is None:
                continue
            position = float(record.step)
        else:
            position = (record.wall_time - start) / time_scale
        line = series.get(record.name)
        if line is None:
            line = series[record.name] = _Series(record.name)
        line.xs.append(position)
        line.ys.append(record.value)
    if x == "time":
        # Sinks fed from several threads may store payloads slightly out of
        # time order; a line drawn in storage order would zigzag.
        for line in series.values():
            order = sorted(range(len(line.xs)), key=line.xs.__getitem__)
            line.xs = [line.xs[index] for index in order]
            line.ys = [line.ys[index] for index in order]
    return series


def _figure(
    panels: dict[str, list[_Series]],
    x: XAxis,
    time_unit: str,
    matplotlib: _Matplotlib,
) -> Figure:
    """A figure of one panel per watch, stacked, on an Agg canvas."""
    figure = matplotlib.Figure(
        figsize=(
            _PANEL_WIDTH_INCHES,
            _HEADER_INCHES + _PANEL_HEIGHT_INCHES * len(panels),
        ),
        dpi=_DPI,
        layout="constrained",
    )
    matplotlib.FigureCanvasAgg(figure)
    all_axes = figure.subplots(len(panels), 1, squeeze=False, sharex=x == "time")
    for axes, (watch, lines) in zip(all_axes[:, 0], panels.items(), strict=True):
        _draw_panel(axes, watch, lines, matplotlib)
    if x == "step":
        for axes in all_axes[:, 0]:
            axes.set_xlabel("step")
    else:
        all_axes[-1, 0].set_xlabel(f"{time_unit} since the start of the run")
    return figure


def _panels(series: dict[str, _Series]) -> dict[str, list[_Series]]:
    """Group the series by watch, leaving out counters whose rate is drawn."""
    panels: dict[str, list[_Series]] = {}
    for name in sorted(series):
        watch, separator, key = name.partition("/")
        if separator and f"{watch}/{rate_name(key)}" in series:
            continue
        panels.setdefault(watch if separator else "", []).append(series[name])
    return panels


def _draw_panel(
    axes: Axes, watch: str, lines: list[_Series], matplotlib: _Matplotlib
) -> None:
    varying = [line for line in lines if line.constant is None]
    constants = [line for line in lines if line.constant is not None]
    if not varying:
        varying, constants = constants, []
    rates = [line for line in varying if line.is_rate]
    gauges = [line for line in varying if not line.is_rate]
    axes.set_title(watch or "(no watch)", loc="left", fontweight="bold")
    if constants:
        note = "   ".join(
            f"{line.key} = {format_number(line.constant or 0.0)}" for line in constants
        )
        axes.set_title(f"constant: {note}", loc="right", fontsize="small")
    colors = iter(f"C{index}" for index in range(len(varying) + 10))
    handles = []
    gauge_axes = axes
    if rates:
        handles += [_draw(axes, line, next(colors), "-", line.label) for line in rates]
        _scale(axes, rates, "per second (/s)", matplotlib)
        if gauges:
            gauge_axes = axes.twinx()
    right = " (right axis)" if gauge_axes is not axes else ""
    if gauges:
        handles += [
            _draw(gauge_axes, line, next(colors), "--", line.label + right)
            for line in gauges
        ]
        _scale(gauge_axes, gauges, "value", matplotlib)
    axes.grid(True, alpha=0.3)
    axes.legend(
        handles=handles,
        loc="upper left",
        bbox_to_anchor=(1.08 if gauge_axes is not axes else 1.01, 1.0),
        borderaxespad=0.0,
        fontsize="small",
        frameon=False,
    )


def _draw(axes: Axes, line: _Series, color: str, style: str, label: str) -> object:
    marker = "o" if len(line.xs) < _MARKERS_BELOW else None
    (drawn,) = axes.plot(
        line.xs,
        line.ys,
        style,
        color=color,
        marker=marker,
        markersize=3.5,
        linewidth=1.6,
        label=label,
    )
    return drawn


def _scale(
    axes: Axes, lines: list[_Series], label: str, matplotlib: _Matplotlib
) -> None:
    """Label an axis, in linear scale from zero, or logarithmic when its lines' sizes differ widely.

    On one linear axis, 50 samples/s next to 4000 writes/s is a flat line at
    zero; a log axis shows both.
    """
    peaks = [
        max((abs(y) for y in line.ys if math.isfinite(y)), default=0.0)
        for line in lines
    ]
    positive_peaks = [peak for peak in peaks if peak > 0]
    spread = (
        max(positive_peaks) / min(positive_peaks) if len(positive_peaks) > 1 else 1.0
    )
    if spread > _LOG_SCALE_SPREAD:
        values = [y for line in lines for y in line.ys if math.isfinite(y)]
        smallest = min((abs(y) for y in values if y != 0), default=1.0)
        if min(values) > 0:
            axes.set_yscale("log")
        else:
            axes.set_yscale("symlog", linthresh=smallest, linscale=0.5)
        axes.yaxis.set_minor_formatter(matplotlib.NullFormatter())
        label += ", log scale"
    else:
        low, high = axes.get_ylim()
        if low > 0:
            axes.set_ylim(bottom=0.0)
        elif high < 0:
            axes.set_ylim(top=0.0)
    axes.yaxis.set_major_formatter(
        matplotlib.FuncFormatter(lambda value, _: format_number(value))
    )
    axes.set_ylabel(label)


def _time_unit(span: float) -> tuple[float, str]:
    if span <= 300:
        return 1.0, "seconds"
    if span <= 3 * 3600:
        return 60.0, "minutes"
    return 3600.0, "hours"


def _some_names(names: Iterable[str]) -> str:
    ordered = sorted(names)
    shown = ", ".join(ordered[:_MAX_NAMES_IN_ERROR])
    if len(ordered) > _MAX_NAMES_IN_ERROR:
        shown += f" and {len(ordered) - _MAX_NAMES_IN_ERROR} more"
    return shown
