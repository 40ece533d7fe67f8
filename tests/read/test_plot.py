"""Charts of recorded runs: ``rlpulse.read.plot``, drawn from files the real sinks wrote (the command itself: tests/cli/test_plot.py)."""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.text import Text

from rlpulse import (
    CSVLogger,
    Every,
    JSONLLogger,
    LoggerMonitor,
    Record,
    SQLiteLogger,
    Tally,
    formats,
    read,
)
from rlpulse.cli import main
from rlpulse.naming import Kind, Payload
from rlpulse.read.plot import (
    BUCKETS,
    INSTALL_HINT,
    MAX_LINES,
    MAX_PANELS,
    PlotError,
    PlotWarning,
    plot_file,
    plot_files,
    plot_run,
    plot_runs,
)
from rlpulse.sinks.registry import MetricSink
from tests.support import (
    OLD_SQLITE_FILES,
    PNG_SIGNATURE,
    RLPULSE_SCRIPT,
    Filler,
    copy_of_fixture,
    png_size,
    write_three_watches,
)

START = 1_700_000_000.0

SinkFactory = Callable[[Path], MetricSink]
SINKS: dict[str, tuple[str, SinkFactory]] = {
    "sqlite": ("metrics.sqlite", lambda path: SQLiteLogger(path, run="baseline")),
    "csv": ("metrics.csv", CSVLogger),
    "jsonl": ("metrics.jsonl", JSONLLogger),
}


@pytest.fixture(params=sorted(SINKS))
def pipeline_run(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    name, factory = SINKS[request.param]
    path = tmp_path / name
    return write_three_watches(path, factory(path))


def _records(*rows: tuple[float, int | None, str, float]) -> list[Record]:
    return [
        Record(START + seconds, step, name, value)
        for seconds, step, name, value in rows
    ]


def _panels(figure: Figure) -> dict[str, Axes]:
    """The figure's panels by watch name (twin axes have no title and are left out)."""
    return {
        axes.get_title(loc="left"): axes
        for axes in figure.axes
        if axes.get_title(loc="left")
    }


def _y_labels_in_view(figure: Figure, watch: str) -> tuple[Axes, list[str]]:
    """Watch ``watch``'s panel's first axis and its y tick labels in view, once drawn."""
    axes = _panels(figure)[watch]
    figure.canvas.draw()
    low, high = axes.get_ylim()
    labels = [
        label.get_text()
        for label in axes.get_yticklabels()
        if low <= label.get_position()[1] <= high
    ]
    return axes, labels


def _axes_by_unit(figure: Figure, watch: str) -> dict[str, Axes]:
    """A panel's axes, top to bottom, by their y label (the unit)."""
    return {
        axes.get_ylabel(): axes for axes in figure.axes if axes.get_label() == watch
    }


def _labels(axes: Axes) -> list[str]:
    return [str(line.get_label()) for line in axes.get_lines()]


# The image file


def test_plot_file_writes_a_png_of_a_run_from_every_file_sink(
    pipeline_run: Path, tmp_path: Path
) -> None:
    output = tmp_path / "chart.png"

    written = plot_file(pipeline_run, output)

    assert written == output
    width, height = png_size(output)
    assert 800 <= width <= 2000
    assert 400 <= height <= 2000


def test_plot_file_grows_taller_with_more_panels(
    sqlite_run: Path, tmp_path: Path
) -> None:
    one_panel = plot_file(sqlite_run, tmp_path / "one.png", match="learner/")
    three_panels = plot_file(sqlite_run, tmp_path / "three.png")

    one_width, one_height = png_size(one_panel)
    three_width, three_height = png_size(three_panels)
    assert one_width == three_width
    assert three_height > 2 * one_height * 0.8


def test_plot_file_creates_missing_directories(
    sqlite_run: Path, tmp_path: Path
) -> None:
    output = tmp_path / "charts" / "today" / "run.png"

    plot_file(sqlite_run, output)

    assert output.read_bytes()[:8] == PNG_SIGNATURE


def test_plot_file_writes_svg_when_the_output_says_so(
    sqlite_run: Path, tmp_path: Path
) -> None:
    output = plot_file(sqlite_run, tmp_path / "chart.svg")

    assert "<svg" in output.read_text()


def test_plot_file_without_an_extension_writes_png(
    sqlite_run: Path, tmp_path: Path
) -> None:
    output = plot_file(sqlite_run, tmp_path / "chart")

    assert output == tmp_path / "chart"
    assert output.read_bytes()[:8] == PNG_SIGNATURE


def test_plot_file_refuses_an_image_format_matplotlib_cannot_write(
    sqlite_run: Path, tmp_path: Path
) -> None:
    with pytest.raises(PlotError, match=r"cannot write a \.docx image.*\.png"):
        plot_file(sqlite_run, tmp_path / "chart.docx")

    assert not (tmp_path / "chart.docx").exists()


def test_a_chart_that_cannot_be_saved_leaves_the_one_there_and_no_other_file(
    sqlite_run: Path, small_disk: Path
) -> None:
    output = small_disk / "chart.png"
    plot_file(sqlite_run, output, match="learner/*")
    before = output.read_bytes()
    Filler(small_disk).fill()

    # Every panel: a larger image than the one there, on a full disk.
    with pytest.raises(OSError, match="No space left on device") as raised:
        plot_file(sqlite_run, output)

    assert raised.value.filename == str(output)

    assert output.read_bytes() == before
    assert sorted(path.name for path in small_disk.iterdir()) == ["chart.png", "filler"]


def test_a_saved_chart_replaces_the_one_there_with_the_usual_permissions(
    sqlite_run: Path, tmp_path: Path
) -> None:
    output = tmp_path / "chart.png"
    output.write_bytes(b"an older chart")
    umask = os.umask(0o022)
    try:
        plot_file(sqlite_run, output)
    finally:
        os.umask(umask)

    assert output.read_bytes()[:8] == PNG_SIGNATURE
    assert output.stat().st_mode & 0o777 == 0o644
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "chart.png",
        "metrics.sqlite",
    ]


def test_plot_file_draws_the_latest_run_of_a_sqlite_file_unless_told(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.sqlite"
    with SQLiteLogger(path, run="first") as sink:
        sink.log_metrics({"buffer/size": 1.0}, timestamp=START)
    SQLiteLogger(path, run="second").close()

    with pytest.raises(PlotError, match="run second has no records"):
        plot_file(path, tmp_path / "latest.png")
    chosen = plot_file(path, tmp_path / "first.png", run="first")

    assert chosen.read_bytes()[:8] == PNG_SIGNATURE


def plot_run_of(path: Path, run: str | None = None) -> Figure:
    from rlpulse import read

    return plot_run(read(path, run), run=run or "latest")


def test_plot_file_title_names_the_run_and_the_file(
    sqlite_run: Path, tmp_path: Path
) -> None:
    from rlpulse import read

    figure = plot_run(read(sqlite_run), run="baseline", source=str(sqlite_run))

    title = figure.get_suptitle()
    assert f"rlpulse run baseline — {sqlite_run}" in title
    assert "70 records over 9.0 s" in title


# Panels and lines


def test_plot_draws_one_panel_per_watch_in_name_order(sqlite_run: Path) -> None:
    figure = plot_run_of(sqlite_run)

    assert list(_panels(figure)) == ["buffer", "collector", "learner"]


def test_rates_are_labelled_per_second_and_replace_their_counter(
    sqlite_run: Path,
) -> None:
    collector = _panels(plot_run_of(sqlite_run))["collector"]

    assert _labels(collector) == ["batches/s", "frames/s"]
    assert collector.get_ylabel().startswith("per second (/s)")


def test_a_counter_without_its_logged_rate_is_drawn_as_its_rate_between_records(
    sqlite_run: Path,
) -> None:
    from rlpulse import read

    figure = plot_run(read(sqlite_run), run="baseline", match="*/frames")

    (collector,) = _panels(figure).values()
    assert _labels(collector) == ["frames/s"]
    assert collector.get_ylabel().startswith("per second (/s)")
    assert list(collector.get_lines()[0].get_xdata()) == [
        float(s) for s in range(1, 10)
    ]
    assert list(collector.get_lines()[0].get_ydata()) == [1000.0] * 9


def test_cumulative_totals_asked_for_are_drawn_in_a_full_panel() -> None:
    # Four counters and six gauges: their rates and the four totals first.
    records = []
    for second in range(6):
        at = 100.0 + 2 * second
        for index in range(4):
            value = (index + 1) * 10.0 * second**2
            records.append(Record(at, None, f"l/c{index}", value, Kind.COUNTER))
        for index in range(6):
            value = index + second / (index + 1)
            records.append(Record(at, None, f"l/g{index}", value, Kind.GAUGE))
    with pytest.warns(PlotWarning, match="left out"):
        figure = plot_run(records, run="r", cumulative=True)
    labels = {line.get_label() for axes in figure.axes for line in axes.get_lines()}
    assert {"c0", "c1", "c2", "c3"} <= labels
    assert {"c0/s", "c1/s", "c2/s", "c3/s"} <= labels


def test_cumulative_draws_each_counter_itself_beside_its_rate(sqlite_run: Path) -> None:
    from rlpulse import read

    figure = plot_run(read(sqlite_run), run="baseline", cumulative=True)

    axes = _axes_by_unit(figure, "collector")
    assert list(axes) == ["per second (/s), log scale", "total (cumulative)"]
    assert _labels(axes["total (cumulative)"]) == ["frames"]
    (line,) = axes["total (cumulative)"].get_lines()
    assert list(line.get_ydata()) == [1000.0 * second for second in range(10)]
    assert line.get_linestyle() == ":"


def test_a_tallys_episode_count_is_drawn_as_episodes_per_second(
    tmp_path: Path,
) -> None:
    tally = Tally()
    path = tmp_path / "metrics.sqlite"
    with SQLiteLogger(path, run="episodes") as sink:
        for second in range(6):
            for _ in range(second % 2 + 1):  # one, then two episodes a second
                tally.observe("episode_return", 20.0 + second)
            stats = {f"tally/{key}": value for key, value in tally.stats().items()}
            sink.log_metrics(stats, timestamp=START + second)

    figure = plot_run_of(path)

    axes = _axes_by_unit(figure, "tally")
    assert list(axes) == ["per second (/s)", "value"]
    (rate,) = axes["per second (/s)"].get_lines()
    assert rate.get_label() == "episode_return_count/s"
    assert list(rate.get_ydata()) == [2.0, 1.0, 2.0, 1.0, 2.0]
    assert "episode_return_count" not in _labels(axes["value"])
    assert "episode_return_mean" in _labels(axes["value"])


def test_a_counter_no_name_says_is_drawn_as_its_rate_by_its_stored_kind(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.sqlite"
    kinds = {"monitor/polls": Kind.COUNTER}
    with SQLiteLogger(path, run="r") as sink:
        sink.log_payloads(
            Payload({"monitor/polls": 10.0 * second}, None, START + second, kinds)
            for second in range(4)
        )

    figure = plot_run_of(path)

    assert _labels(_axes_by_unit(figure, "monitor")["per second (/s)"]) == ["polls/s"]


def test_an_episode_tallys_chart_draws_the_return_before_the_rest(
    tmp_path: Path,
) -> None:
    # What a watched Tally holds when an EpisodeTally records into it.
    tally = Tally(window=5)
    path = tmp_path / "metrics.sqlite"
    monitor = LoggerMonitor(SQLiteLogger(path, run="r"), background=False)
    monitor.watch(tally, name="episodes")
    for episode in range(20):
        tally.observe("episode_return", 10.0 + episode % 7)
        tally.observe("episode_length", 30.0 + episode % 5)
        monitor.step()
        time.sleep(0.002)
    monitor.stop()

    figure = plot_run_of(path)

    drawn = [
        label
        for axes in _axes_by_unit(figure, "episodes").values()
        for label in _labels(axes)
    ]
    returns = [
        label
        for label in drawn
        if label.startswith("episode_return_") and not label.endswith("/s")
    ]
    assert returns[:3] == [
        "episode_return_p50",
        "episode_return_mean",
        "episode_return_last",
    ]
    assert {"episode_return_min", "episode_return_max"} <= set(returns)
    # Both tallies count each episode: their rates are one line, drawn once.
    rates = [label for label in drawn if label.endswith("_count/s")]
    assert rates == ["episode_return_count/s"]


def test_a_bottleneck_watchs_verdicts_are_shaded_behind_its_lines_not_drawn() -> None:
    # Windows of 5 s: collector-bound twice, learner-bound, unknown, balanced.
    bounds = [-1.0, -1.0, 1.0, None, 0.0]
    records = []
    for index, bound in enumerate(bounds):
        at = 100.0 + 5.0 * (index + 1)
        window = {
            "bottleneck/bound_known": 0.0 if bound is None else 1.0,
            "bottleneck/consumer_wait_share": 0.2 + 0.1 * index,
            "bottleneck/side/collector": -1.0,
            "bottleneck/side/learner": 1.0,
        }
        if bound is not None:
            window["bottleneck/bound"] = bound
        records += [Record(at, None, name, value) for name, value in window.items()]

    figure = plot_run(records, run="r")

    axes = _panels(figure)["bottleneck"]
    assert _labels(axes) == ["consumer_wait_share"]  # no line of -1, 0 and 1
    spans = [
        (round(patch.get_x(), 6), round(patch.get_x() + patch.get_width(), 6))
        for patch in axes.patches
    ]
    # Seconds since the run's first record (at 105 s): the first window
    # starts 5 s before it; the two collector-bound windows are one span.
    assert spans == [(-5.0, 5.0), (5.0, 10.0), (15.0, 20.0)]
    _, labels = axes.get_legend_handles_labels()
    assert set(labels) == {
        "collector-bound",
        "learner-bound",
        "balanced",
        "consumer_wait_share",
    }


def test_a_bottleneck_watchs_one_window_is_shaded_over_its_window_s() -> None:
    # A run that ended after one window (rlpulse demo --updates): no window
    # before it says where it started; its window_s does.
    window = {
        "bottleneck/window_s": 4.0,
        "bottleneck/bound_known": 1.0,
        "bottleneck/bound": -1.0,
        "bottleneck/consumer_wait_share": 0.6,
        "bottleneck/side/collector": -1.0,
        "bottleneck/side/learner": 1.0,
    }
    records = [Record(100.0, None, "collector/frames", 0.0)]
    records += [Record(105.0, None, name, value) for name, value in window.items()]
    records += [Record(106.0, None, "collector/frames", 60.0)]

    figure = plot_run(records, run="r")

    axes = _panels(figure)["bottleneck"]
    spans = [
        (round(patch.get_x(), 6), round(patch.get_x() + patch.get_width(), 6))
        for patch in axes.patches
    ]
    assert spans == [(1.0, 5.0)]  # seconds since the run's first record
    assert "bound" not in _labels(axes)


def _learner_bound_records() -> list[Record]:
    """What a learner-bound bottleneck watch logs each window of 1.25 s, six windows."""
    records = []
    for index in range(6):
        at, wobble = 100.0 + 1.25 * (index + 1), 0.01 * index
        window = {
            "window_s": 1.25 + wobble,
            "producer_busy_share": 0.99 - wobble,
            "producer_wait_share": 0.01 + wobble,
            "consumer_busy_share": 0.98 - wobble,
            "consumer_wait_share": 0.02 + wobble,
            "replay_ratio": 1.05 + wobble,
            "replay_ratio_target": 3.2,
            "fill": 0.4 + wobble,
            "fill_trend": 0.2 - wobble,
            "speedup": 3.0 + wobble,
            "samples_drawn": 5000.0 + index,
            "frames_produced": 4800.0 + index,
            "bound_known": 1.0,
            "bound": 1.0,
            "side/collector": -1.0,
            "side/learner": 1.0,
        }
        records += [
            Record(at, None, f"bottleneck/{name}", value)
            for name, value in window.items()
        ]
    return records


def test_a_bottleneck_panel_draws_its_speedup_not_the_counts_behind_its_ratio() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PlotWarning)  # its window_s: 9 lines
        figure = plot_run(_learner_bound_records(), run="r")

    drawn = {
        label
        for axes in _axes_by_unit(figure, "bottleneck").values()
        for label in _labels(axes)
    }
    assert "speedup" in drawn
    assert not drawn & {"samples_drawn", "frames_produced", "bound", "bound_known"}


def test_a_bottleneck_panel_never_judged_draws_no_counts_nor_codes_either() -> None:
    # Every window unknown (the signals disagreed): no span to shade, and
    # the panel drew its counts and codes as another watch's lines.
    records = [
        record._replace(value=0.0)
        if record.name == "bottleneck/bound_known"
        else record
        for record in _learner_bound_records()
        if record.name != "bottleneck/bound"
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PlotWarning)
        figure = plot_run(records, run="r")

    drawn = {
        label
        for axes in _axes_by_unit(figure, "bottleneck").values()
        for label in _labels(axes)
    }
    assert {"speedup", "replay_ratio"} <= drawn
    assert not drawn & {"samples_drawn", "frames_produced", "bound_known"}


def test_runs_drawn_together_keep_the_speedup_and_waits_of_a_bottleneck_watch() -> None:
    records = _learner_bound_records()

    with pytest.warns(PlotWarning) as warned:
        figure = plot_runs([("a", records), ("b", records)], match="bottleneck/*")

    drawn = {
        label
        for axes in _axes_by_unit(figure, "bottleneck").values()
        for label in _labels(axes)
    }
    assert {"speedup [A]", "speedup [B]"} <= drawn
    assert {"consumer_wait_share [A]", "producer_wait_share [B]"} <= drawn
    said = str(warned[0].message)
    assert "as in --match 'bottleneck/" in said
    assert "as in --match 'bottleneck/*'" not in said  # a metric, not what was given


def _verdict_records(start: float, bounds: list[float | None]) -> list[Record]:
    """A bottleneck watch's windows of 5 s from ``start``, one per bound (``None``: unknown)."""
    records = []
    for index, bound in enumerate(bounds):
        at = start + 5.0 * (index + 1)
        window = {
            "bottleneck/bound_known": 0.0 if bound is None else 1.0,
            "bottleneck/consumer_wait_share": 0.2 + 0.1 * index,
            "bottleneck/side/collector": -1.0,
            "bottleneck/side/learner": 1.0,
        }
        if bound is not None:
            window["bottleneck/bound"] = bound
        records += [Record(at, None, name, value) for name, value in window.items()]
    return records


def test_runs_drawn_together_shade_each_runs_verdicts_in_a_band_of_its_own() -> None:
    collector_bound = _verdict_records(100.0, [-1.0, -1.0, -1.0])
    learner_bound = _verdict_records(900.0, [1.0, 1.0, None])

    figure = plot_runs([("a.sqlite", collector_bound), ("b.sqlite", learner_bound)])

    axes = _panels(figure)["bottleneck"]
    # The codes are the shading: neither lines nor constants above the panel.
    assert _labels(axes) == ["consumer_wait_share [A]", "consumer_wait_share [B]"]
    assert "bound" not in axes.get_title(loc="right")
    shaded = sorted(
        (
            round(patch.get_y(), 6),
            round(patch.get_y() + patch.get_height(), 6),
            patch.get_label(),
            round(patch.get_x(), 6),
            round(patch.get_x() + patch.get_width(), 6),
        )
        for patch in axes.patches
    )
    # Run B (learner-bound twice, then unknown) in the lower half, run A
    # (collector-bound) in the upper half, each over the seconds since its
    # own first record (its first window starting 5 s before).
    assert shaded == [
        (0.0, 0.5, "learner-bound", -5.0, 5.0),
        (0.5, 1.0, "collector-bound", -5.0, 10.0),
    ]
    bands = {text.get_text(): text.get_position()[1] for text in axes.texts}
    assert bands == {"[A]": 0.75, "[B]": 0.25}


def test_a_counter_rate_has_a_gap_where_the_counter_went_down() -> None:
    figure = plot_run(
        _records(
            (0, None, "learner/update_count", 10.0),
            (1, None, "learner/update_count", 30.0),
            (2, None, "learner/update_count", 0.0),  # restored from a checkpoint
            (3, None, "learner/update_count", 20.0),
        ),
        run="reset",
    )

    (line,) = _panels(figure)["learner"].get_lines()
    assert line.get_label() == "update_count/s"
    ys = list(line.get_ydata())
    assert ys[0] == 20.0
    assert math.isnan(ys[1])
    assert ys[2] == 20.0


def test_a_final_snapshot_soon_after_the_last_log_keeps_the_counters_rate() -> None:
    # What stop() logs a few milliseconds after a scheduled snapshot: the
    # collector, which counts its frames a batch at a time, has not
    # counted since.
    figure = plot_run(
        _records(
            (0.0, None, "collector/frames", 0.0),
            (2.5, None, "collector/frames", 10_000.0),
            (5.0, None, "collector/frames", 20_000.0),
            (5.004, None, "collector/frames", 20_000.0),
        ),
        run="stopped",
    )

    (line,) = _panels(figure)["collector"].get_lines()
    assert line.get_label() == "frames/s"
    assert [round(y) for y in line.get_ydata()] == [4000, 4000, 3994]


def test_a_counter_seen_once_is_drawn_itself() -> None:
    figure = plot_run(_records((0, None, "collector/frames", 600.0)), run="short")

    collector = _panels(figure)["collector"]
    assert _labels(collector) == ["frames"]
    assert collector.get_ylabel() == "total (cumulative)"


def test_a_counter_rate_over_steps_is_placed_at_each_records_step() -> None:
    figure = plot_run(
        _records(
            (0, 0, "buffer/write_count", 0.0),
            (2, 400, "buffer/write_count", 400.0),
            (4, 1000, "buffer/write_count", 1000.0),
        ),
        run="stepped",
        x="step",
    )

    (line,) = _panels(figure)["buffer"].get_lines()
    assert line.get_label() == "writes/s"
    assert list(line.get_xdata()) == [400.0, 1000.0]
    assert list(line.get_ydata()) == [200.0, 300.0]


def test_constant_metrics_are_listed_above_their_panel_instead_of_drawn(
    sqlite_run: Path,
) -> None:
    figure = plot_run_of(sqlite_run)
    buffer = _panels(figure)["buffer"]

    assert buffer.get_title(loc="right") == "constant: capacity = 5000"
    assert "capacity" not in _labels(buffer)


def test_a_panel_of_constants_only_draws_them(tmp_path: Path) -> None:
    figure = plot_run(
        _records(
            (0, None, "buffer/capacity", 10.0), (1, None, "buffer/capacity", 10.0)
        ),
        run="flat",
    )

    (buffer,) = _panels(figure).values()
    assert _labels(buffer) == ["capacity"]
    assert buffer.get_title(loc="right") == ""


def test_rates_and_gauges_of_a_panel_get_an_axis_each(sqlite_run: Path) -> None:
    figure = plot_run(
        _records(
            (0, None, "buffer/writes_per_second", 100.0),
            (0, None, "buffer/size", 5.0),
            (1, None, "buffer/writes_per_second", 120.0),
            (1, None, "buffer/size", 9.0),
        ),
        run="mixed",
    )

    axes = _axes_by_unit(figure, "buffer")
    assert list(axes) == ["per second (/s)", "value"]
    assert _labels(axes["per second (/s)"]) == ["writes/s"]
    assert _labels(axes["value"]) == ["size"]
    assert axes["per second (/s)"].get_lines()[0].get_linestyle() == "-"
    assert axes["value"].get_lines()[0].get_linestyle() == "--"
    assert axes["per second (/s)"].get_title(loc="left") == "buffer"


def test_a_downsampled_gauge_is_drawn_solid_under_the_line_that_comes_first() -> None:
    # The queue's depth goes up and down at every record: downsampled to
    # each bucket's extremes, it fills its band; dashes would hatch it.
    rows = []
    for second in range(3 * BUCKETS):
        rows += [
            (second, None, "learner/episode_return_mean", second / 100),
            (second, None, "learner/queue_depth", float(second % 2) * 9),
        ]
    figure = plot_run(_records(*rows), run="long")

    (axes,) = _axes_by_unit(figure, "learner").values()
    by_label = {line.get_label(): line for line in axes.get_lines()}
    assert list(by_label) == ["episode_return_mean", "queue_depth"]
    depth, episode_return = by_label["queue_depth"], by_label["episode_return_mean"]
    assert len(depth.get_xdata()) > BUCKETS
    assert depth.get_linestyle() == episode_return.get_linestyle() == "-"
    assert episode_return.get_zorder() > depth.get_zorder()


def test_a_panel_has_one_axis_per_unit_bytes_percent_seconds_and_plain() -> None:
    rows = []
    for second in range(3):
        rows += [
            (second, None, "system/process/rss_bytes", 4.0e8 + 1e6 * second),
            (second, None, "system/host/memory_used_bytes", 8.0e9 + 1e7 * second),
            (second, None, "system/process/cpu_percent", 90.0 + second),
            (second, None, "system/host/memory_percent", 40.0 - second),
            (second, None, "system/worker_0/heartbeat_age_s", 0.1 * second),
            (second, None, "system/latency_s_mean", 0.02 + 0.01 * second),
            (second, None, "system/process/threads", 12.0 + second),
        ]

    figure = plot_run(_records(*rows), run="machine")

    axes = _axes_by_unit(figure, "system")
    assert list(axes) == ["bytes", "percent (%)", "seconds (s)", "value"]
    assert _labels(axes["bytes"]) == ["host/memory_used_bytes", "process/rss_bytes"]
    assert _labels(axes["percent (%)"]) == [
        "host/memory_percent",
        "process/cpu_percent",
    ]
    assert _labels(axes["seconds (s)"]) == [
        "worker_0/heartbeat_age_s",
        "latency_s_mean",
    ]
    assert _labels(axes["value"]) == ["process/threads"]
    assert axes["bytes"].yaxis.get_major_formatter()(4.0e8, 0) == "400M"
    assert axes["bytes"].get_title(loc="left") == "system"
    assert all(a.get_title(loc="left") == "" for a in list(axes.values())[1:])


def test_a_fraction_has_an_axis_of_its_own_from_0_to_1_apart_from_counts() -> None:
    rows = []
    for second in range(3):
        rows += [
            (second, None, "replay_buffer/size", 3600.0 + 3200 * second),
            (second, None, "replay_buffer/utilization", 0.036 + 0.032 * second),
            (second, None, "bottleneck/consumer_wait_share", 0.4),
        ]

    figure = plot_run(_records(*rows), run="cartpole")

    buffer = _axes_by_unit(figure, "replay_buffer")
    assert list(buffer) == ["fraction (0 to 1)", "value"]
    fraction, value = buffer.values()
    assert _labels(fraction) == ["utilization"]
    assert _labels(value) == ["size"]
    assert fraction.get_yscale() == value.get_yscale() == "linear"
    assert fraction.get_ylim() == (0.0, 1.05)
    (share,) = _axes_by_unit(figure, "bottleneck").values()
    assert share.get_ylabel() == "fraction (0 to 1)"


def test_a_panel_of_gauges_only_has_a_single_value_axis(sqlite_run: Path) -> None:
    figure = plot_run_of(sqlite_run)

    learner = _panels(figure)["learner"]
    assert _labels(learner) == ["loss"]
    assert learner.get_ylabel() == "value"
    # collector: rates; buffer: a fraction and counts; learner: a value.
    assert len(figure.axes) == 4


def test_lines_of_very_different_size_share_a_log_axis(sqlite_run: Path) -> None:
    figure = plot_run_of(sqlite_run)

    collector = _panels(figure)["collector"]  # 10 batches/s next to 1000 frames/s
    assert collector.get_yscale() == "log"
    assert collector.get_ylabel() == "per second (/s), log scale"


def test_a_log_axis_over_few_decades_is_ticked_at_1_2_and_5_of_each() -> None:
    figure = plot_run(
        _records(
            (0, None, "collector/batches_per_second", 12.0),
            (0, None, "collector/frames_per_second", 900.0),
            (1, None, "collector/batches_per_second", 14.0),
            (1, None, "collector/frames_per_second", 950.0),
        ),
        run="r",
    )
    collector, labels = _y_labels_in_view(figure, "collector")
    # Between 12 and 950 the decades are 100 and, at the axis' ends, maybe
    # 10 and 1000: 2 and 5 of each are ticked too.
    assert collector.get_yscale() == "log"
    assert {"20", "50", "100", "200", "500"} <= set(labels)
    assert set(labels) <= {"10", "20", "50", "100", "200", "500", "1000"}


def test_a_log_axis_with_zeros_is_symmetric_log(tmp_path: Path) -> None:
    figure = plot_run(
        _records(
            (0, None, "buffer/size", 0.0),
            (0, None, "buffer/pending", 0.0),
            (1, None, "buffer/size", 5000.0),
            (1, None, "buffer/pending", 0.5),
        ),
        run="filling",
    )

    assert _panels(figure)["buffer"].get_yscale() == "symlog"


def test_a_symmetric_log_axis_over_many_decades_labels_every_few_apart_from_zero() -> (
    None
):
    figure = plot_run(
        _records(
            (0, None, "bottleneck/replay_ratio", 0.0),
            (0, None, "bottleneck/speedup", 5000.0),
            (1, None, "bottleneck/replay_ratio", 0.001),
            (1, None, "bottleneck/speedup", 1.0),
        ),
        run="r",
    )
    bottleneck, labels = _y_labels_in_view(figure, "bottleneck")
    # Seven decades: every other one (every one's labels touched), and zero
    # a decade below the smallest.
    assert labels == ["0", "0.001", "0.1", "10", "1000"]
    transform = bottleneck.transScale.transform
    zero, smallest, next_tick = (transform((0, y))[1] for y in (0.0, 0.001, 0.1))
    assert smallest - zero >= (next_tick - smallest) / 2  # a decade at least


def test_lines_of_similar_size_share_a_linear_axis_from_zero() -> None:
    figure = plot_run(
        _records(
            (0, None, "learner/loss", 0.8),
            (0, None, "learner/loss_min", 0.5),
            (1, None, "learner/loss", 0.6),
            (1, None, "learner/loss_min", 0.4),
        ),
        run="learning",
    )

    learner = _panels(figure)["learner"]
    assert learner.get_yscale() == "linear"
    assert learner.get_ylim()[0] == 0.0


def test_a_nearly_constant_line_keeps_room_above_it() -> None:
    figure = plot_run(
        _records(
            (0, None, "collector/frames_per_second", 1000.0),
            (1, None, "collector/frames_per_second", 1001.0),
            (2, None, "collector/frames_per_second", 1000.5),
        ),
        run="steady",
    )

    low, high = _panels(figure)["collector"].get_ylim()
    assert low == 0.0
    assert high >= 1001.0 * 1.05  # not on the frame's top edge


def test_negative_values_keep_zero_in_view() -> None:
    figure = plot_run(
        _records(
            (0, None, "learner/advantage", -3.0), (1, None, "learner/advantage", -1.0)
        ),
        run="negative",
    )

    assert _panels(figure)["learner"].get_ylim()[1] == 0.0


def test_a_linear_axis_has_a_few_ticks_and_ticks_only_within_its_view() -> None:
    figure = plot_run(
        _records(
            *(
                row
                for second in range(600)
                for row in (
                    (second, None, "w/frames_per_second", 1000.0 + second % 3),
                    (second, None, "w/latency_s", 0.01 + (second % 7) / 1000),
                    (second, None, "w/queue_depth", float(second % 10)),
                )
            )
        ),
        run="r",
    )
    figure.canvas.draw()

    assert [axes.get_yscale() for axes in figure.axes] == ["linear"] * 3
    for axes in figure.axes:
        for ticks, (low, high) in (
            (axes.yaxis.get_majorticklocs(), axes.get_ylim()),
            (axes.xaxis.get_majorticklocs(), axes.get_xlim()),
        ):
            assert 2 <= len(ticks) <= 6
            assert all(low <= at <= high for at in ticks)


def test_legends_sit_beside_their_axis_within_the_figure(sqlite_run: Path) -> None:
    # Never over the lines: on the right of the axis, from its top down.
    figure = plot_run(read(sqlite_run), run="baseline", cumulative=True)
    figure.canvas.draw()

    assert len(figure.axes) == 5
    for axes in figure.axes:
        legend = axes.get_legend()
        assert legend is not None
        beside, axis = legend.get_window_extent(), axes.get_window_extent()
        assert axis.x1 < beside.x0
        assert beside.x1 <= figure.bbox.x1
        assert axis.y0 <= beside.y0
        assert beside.y1 <= axis.y1 + 1


def test_a_long_label_is_shortened_in_the_legend_only() -> None:
    name = "learner/a_very_long_metric_name_of_a_users_own"
    figure = plot_run(_records((0, None, name, 1.0), (1, None, name, 2.0)), run="r")
    figure.canvas.draw()

    (axes,) = _axes_by_unit(figure, "learner").values()
    assert _labels(axes) == ["a_very_long_metric_name_of_a_users_own"]
    legend = axes.get_legend()
    assert legend is not None
    [text] = [text.get_text() for text in legend.get_texts()]
    assert text == "a_very_long_…_a_users_own"
    assert legend.get_window_extent().x1 <= figure.bbox.x1


def test_metrics_without_a_watch_get_a_panel_of_their_own() -> None:
    figure = plot_run(
        _records((0, None, "loss", 1.0), (1, None, "loss", 0.5)), run="bare"
    )

    assert list(_panels(figure)) == ["(no watch)"]


def test_nan_values_leave_a_gap_instead_of_failing() -> None:
    figure = plot_run(
        _records(
            (0, None, "learner/loss", 1.0),
            (1, None, "learner/loss", math.nan),
            (2, None, "learner/loss", 0.5),
        ),
        run="gap",
    )

    (line,) = _panels(figure)["learner"].get_lines()
    assert math.isnan(line.get_ydata()[1])


# Bounds: what a chart leaves out


def _wide_records(watches: int, metrics: int) -> list[Record]:
    return _records(
        *[
            (second, None, f"w{watch:02d}/m{metric:02d}", float(second * metric + 1))
            for second in range(2)
            for watch in range(watches)
            for metric in range(metrics)
        ]
    )


def test_a_chart_draws_the_first_watches_by_name_and_says_how_many_it_left_out() -> (
    None
):
    with pytest.warns(PlotWarning) as caught:
        figure = plot_run(_wide_records(MAX_PANELS + 3, 2), run="wide")

    assert list(_panels(figure)) == [f"w{watch:02d}" for watch in range(MAX_PANELS)]
    (warning,) = caught
    message = str(warning.message)
    assert message.startswith(
        f"left out 3 of {MAX_PANELS + 3} watches (6 metrics: w12, w13, w14)"
    )
    assert "--match 'w12/*'" in message
    assert message in " ".join(figure.get_suptitle().split())  # wrapped to fit


def _wide_run(path: Path, watches: int, payloads: int) -> Path:
    """``watches`` watches of a counter and its logged rate, one payload a second, every record stepped."""
    with SQLiteLogger(path, run="wide") as sink:
        sink.log_payloads(
            [
                Payload(
                    {
                        name: value
                        for watch in range(watches)
                        for name, value in (
                            (f"w{watch:02d}/frames", 100.0 * index),
                            (f"w{watch:02d}/frames_per_second", 100.0 + index % 7),
                        )
                    },
                    index,
                    START + index,
                    {
                        name: kind
                        for watch in range(watches)
                        for name, kind in (
                            (f"w{watch:02d}/frames", Kind.COUNTER),
                            (f"w{watch:02d}/frames_per_second", Kind.RATE),
                        )
                    },
                )
                for index in range(payloads)
            ]
        )
    return path


@pytest.mark.parametrize("payloads", [5, 2_000], ids=["short", "long"])
@pytest.mark.parametrize("x", ["time", "step"])
def test_plot_file_says_how_many_watches_it_left_out_and_nothing_else(
    tmp_path: Path, payloads: int, x: str
) -> None:
    # A long run (52,000 records) is downsampled by SQLite, reading only the
    # watches the chart draws.
    path = _wide_run(tmp_path / "wide.sqlite", MAX_PANELS + 1, payloads)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plot_file(path, tmp_path / "wide.png", x=x)

    assert [str(warning.message).split(": a chart")[0] for warning in caught] == [
        f"left out 1 of {MAX_PANELS + 1} watches (2 metrics: w12)"
    ]


def test_plot_file_counts_the_metrics_it_shows_as_a_chart_of_the_records_does(
    tmp_path: Path,
) -> None:
    import matplotlib

    path = _wide_run(tmp_path / "long.sqlite", 2, 13_000)  # SQLite downsamples it
    figure = plot_run(read(path), run="wide")
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # text kept as text
        image = plot_file(path, tmp_path / "long.svg")

    assert "4 of 4 metrics" in figure.get_suptitle()
    assert "4 of 4 metrics" in image.read_text()
    assert [_labels(axes) for axes in _panels(figure).values()] == [
        ["frames/s"],
        ["frames/s"],
    ]


def test_a_panel_draws_at_most_max_lines_lines_rates_first() -> None:
    rows = [
        (second, None, f"learner/gauge_{metric:02d}", float(second + metric))
        for second in range(2)
        for metric in range(MAX_LINES)
    ] + [
        (second, None, f"learner/r{rate}_per_second", float(second + rate))
        for second in range(2)
        for rate in range(3)
    ]

    # Named, and one of them given as the pattern that draws it.
    left_out = (
        r"left out 3 lines of the watches drawn \(learner: gauge_05, gauge_06, "
        r"gauge_07\): .* as in --match 'learner/gauge_05'"
    )
    with pytest.warns(PlotWarning, match=left_out):
        figure = plot_run(_records(*rows), run="busy")

    axes = _axes_by_unit(figure, "learner")
    assert _labels(axes["per second (/s)"]) == ["r0/s", "r1/s", "r2/s"]
    assert _labels(axes["value"]) == [f"gauge_{m:02d}" for m in range(MAX_LINES - 3)]


def test_the_constants_note_names_a_few_and_counts_the_rest() -> None:
    rows = [
        (second, None, f"config/c{index}", float(index))
        for second in range(2)
        for index in range(10)
    ] + [(0, None, "config/lr", 0.1), (1, None, "config/lr", 0.2)]

    figure = plot_run(_records(*rows), run="configured")

    note = _panels(figure)["config"].get_title(loc="right")
    assert note.startswith("constant: c0 = 0   c1 = 1")
    assert note.endswith("and 4 more")


@pytest.mark.timeout(180)
def test_a_run_of_20000_metrics_is_drawn_quickly_and_says_what_it_left_out(
    tmp_path: Path,
) -> None:
    path = tmp_path / "wide.sqlite"
    with SQLiteLogger(path, run="wide") as sink:
        for second in range(5):
            sink.log_metrics(
                {
                    f"w{watch:02d}/{kind}{metric:03d}{suffix}": float(
                        second * metric + watch
                    )
                    for watch in range(40)
                    for metric in range(125)
                    for kind, suffix in (
                        ("m", ""),
                        ("r", "_per_second"),
                        ("b", "_bytes"),
                        ("e", "_count"),
                    )
                },
                step=second,
                timestamp=START + second,
            )
    output = tmp_path / "wide.png"

    started = time.perf_counter()
    result = subprocess.run(
        [str(RLPULSE_SCRIPT), "plot", str(path), "-o", str(output)],
        capture_output=True,
        text=True,
        timeout=150,
    )
    elapsed = time.perf_counter() - started

    assert result.returncode == 0, result.stderr
    assert elapsed < 60  # a liveness bound; it takes a few seconds
    assert png_size(output)[0] > 0
    assert result.stderr.startswith(
        "rlpulse: note: left out 28 of 40 watches (14,000 metrics: w12, w13, w14, …) "
        "and "
    )
    assert "narrow it with --match" in result.stderr
    assert result.stderr.count("\n") == 1


# The x axis


def test_time_axis_is_seconds_since_the_first_record_of_the_run(
    sqlite_run: Path,
) -> None:
    figure = plot_run_of(sqlite_run)

    learner = _panels(figure)["learner"]
    assert list(learner.get_lines()[0].get_xdata()) == [float(s) for s in range(10)]
    assert learner.get_xlabel() == "seconds since the start of the run"


def test_long_runs_are_drawn_over_minutes() -> None:
    figure = plot_run(
        _records((0, None, "buffer/size", 1.0), (1200, None, "buffer/size", 2.0)),
        run="long",
    )

    (buffer,) = _panels(figure).values()
    assert list(buffer.get_lines()[0].get_xdata()) == [0.0, 20.0]
    assert buffer.get_xlabel() == "minutes since the start of the run"


def test_very_long_runs_are_drawn_over_hours() -> None:
    figure = plot_run(
        _records((0, None, "buffer/size", 1.0), (7200 * 3, None, "buffer/size", 2.0)),
        run="longer",
    )

    (buffer,) = _panels(figure).values()
    assert list(buffer.get_lines()[0].get_xdata()) == [0.0, 6.0]


def test_time_axis_draws_each_line_in_time_order() -> None:
    figure = plot_run(
        _records(
            (0, None, "buffer/size", 1.0),
            (2, None, "buffer/size", 3.0),
            (1, None, "buffer/size", 2.0),
        ),
        run="unordered",
    )

    (line,) = _panels(figure)["buffer"].get_lines()
    assert list(line.get_xdata()) == [0.0, 1.0, 2.0]
    assert list(line.get_ydata()) == [1.0, 2.0, 3.0]


def test_step_axis_uses_each_records_step_and_skips_records_without_one() -> None:
    figure = plot_run(
        _records(
            (0, 100, "buffer/size", 1.0),
            (1, None, "buffer/size", 2.0),
            (2, 300, "buffer/size", 3.0),
        ),
        run="stepped",
        x="step",
    )

    (buffer,) = _panels(figure).values()
    assert list(buffer.get_lines()[0].get_xdata()) == [100.0, 300.0]
    assert buffer.get_xlabel() == "step"


def test_step_axis_spans_every_line_of_a_panel_not_its_first_axis_alone() -> None:
    # A rate starts a snapshot after its counter: the panel's range was its
    # first axis's (the rate's), the first value of each gauge off the chart.
    figure = plot_run(
        _records(
            (0, 2000, "buffer/size", 2000.0),
            (1, 6200, "buffer/size", 6200.0),
            (1, 6200, "buffer/writes_per_second", 4200.0),
            (2, 10_000, "buffer/size", 10_000.0),
            (2, 10_000, "buffer/writes_per_second", 3800.0),
        ),
        run="stepped",
        x="step",
    )

    for axes in _axes_by_unit(figure, "buffer").values():
        low, high = axes.get_xlim()
        assert low < 2000.0
        assert high > 10_000.0


def test_step_axis_names_the_watches_and_metrics_left_out_without_a_step() -> None:
    records = _records(
        (0, 100, "buffer/size", 1.0),
        (1, 200, "buffer/size", 2.0),
        (0, 100, "collector/frames_per_second", 5.0),
        (0, None, "collector/workers_alive", 2.0),
        (0, None, "learner/loss", 0.9),
        (1, None, "learner/loss", 0.7),
        (0, None, "tally/episode_return_mean", 20.0),
    )

    with pytest.warns(PlotWarning) as caught:
        figure = plot_run(records, run="mixed", x="step")

    assert list(_panels(figure)) == ["buffer", "collector"]
    (warning,) = caught
    assert str(warning.message) == (
        "left out 2 watches without a step: learner, tally; metrics without a "
        "step: collector/workers_alive (draw them over time: x='time', --x time)"
    )
    assert str(warning.message) in " ".join(figure.get_suptitle().split())


def test_step_axis_names_a_metric_left_out_of_a_watch_it_draws() -> None:
    records = _records(
        (0, 100, "buffer/size", 1.0),
        (0, None, "buffer/capacity", 10.0),
    )

    with pytest.warns(PlotWarning) as caught:
        plot_run(records, run="partial", x="step")

    assert [str(warning.message) for warning in caught] == [
        "left out metrics without a step: buffer/capacity "
        "(draw it over time: x='time', --x time)"
    ]


def test_step_axis_with_every_metric_stepped_warns_of_nothing(
    sqlite_run: Path,
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plot_run(read(sqlite_run), run="baseline", x="step")


def test_step_axis_of_a_run_without_steps_is_a_plot_error() -> None:
    with pytest.raises(PlotError, match=r"no step.*--x time"):
        plot_run(_records((0, None, "buffer/size", 1.0)), run="stepless", x="step")


def test_an_x_axis_that_is_no_counter_of_the_run_is_a_plot_error_naming_its_counters() -> (
    None
):
    records = _records((0, None, "buffer/size", 1.0), (0, None, "c/frames", 1.0))

    with pytest.raises(PlotError, match=r"no counter 'frames'.*counters: c/frames"):
        plot_run(records, run="r", x="frames")
    # A gauge goes up and down: the lines over it would fold back.
    with pytest.raises(
        PlotError,
        match=r"run r's 'buffer/size' is a gauge, .* not a counter.*: c/frames",
    ):
        plot_run(records, run="r", x="buffer/size")


# Choosing metrics


def test_several_patterns_keep_the_panels_matching_any(sqlite_run: Path) -> None:
    figure = plot_run(read(sqlite_run), run="baseline", match=["buffer/*", "learner/*"])

    assert list(_panels(figure)) == ["buffer", "learner"]
    assert "4 of 7 metrics" in figure.get_suptitle()


def test_no_metric_matching_several_patterns_names_them_all(sqlite_run: Path) -> None:
    with pytest.raises(PlotError, match="no metric matching 'zz' or 'yy/\\*'"):
        plot_run(read(sqlite_run), run="baseline", match=["zz", "yy/*"])


def test_match_keeps_only_the_matching_panels(sqlite_run: Path) -> None:
    from rlpulse import read

    figure = plot_run(read(sqlite_run), run="baseline", match="_per_second")

    assert list(_panels(figure)) == ["collector"]
    assert "2 of 7 metrics" in figure.get_suptitle()


# Nothing to draw


def test_a_run_without_records_is_a_plot_error(tmp_path: Path) -> None:
    path = tmp_path / "metrics.sqlite"
    SQLiteLogger(path, run="idle").close()

    with pytest.raises(PlotError, match="run idle has no records"):
        plot_file(path, tmp_path / "chart.png")


def test_no_matching_metric_is_a_plot_error_naming_the_metrics(
    sqlite_run: Path, tmp_path: Path
) -> None:
    with pytest.raises(PlotError) as error:
        plot_file(sqlite_run, tmp_path / "chart.png", match="episodes")

    message = str(error.value)
    assert "no metric matching 'episodes'" in message
    assert "buffer/size" in message
    assert not (tmp_path / "chart.png").exists()


def test_the_error_lists_at_most_a_dozen_metric_names() -> None:
    records = _records(*[(0, None, f"w/metric_{i:02d}", 1.0) for i in range(20)])

    with pytest.raises(PlotError, match=r"w/metric_11 and 8 more$"):
        plot_run(records, run="wide", match="nothing")


def test_the_error_names_the_watches_of_a_run_of_many_metrics_of_several() -> None:
    records = _records(
        *[
            (0, None, f"{watch}/metric_{i:02d}", 1.0)
            for watch in "uvw"
            for i in range(9)
        ]
    )

    with pytest.raises(PlotError) as error:
        plot_run(records, run="wide", match="nothing")

    assert str(error.value) == (
        "run wide has no metric matching 'nothing'; its 27 metrics are those of "
        "the watches u (9), v (9) and w (9), as 'u/*' matches"
    )


@pytest.mark.usefixtures("without_matplotlib")
def test_without_matplotlib_plotting_raises_import_error_naming_the_extra(
    sqlite_run: Path, tmp_path: Path
) -> None:
    with pytest.raises(ImportError, match=r"pip install 'rlpulse\[plot\]'") as error:
        plot_file(sqlite_run, tmp_path / "chart.png")

    assert error.value.name == "matplotlib"
    assert INSTALL_HINT in str(error.value)


@pytest.mark.usefixtures("without_matplotlib")
def test_without_matplotlib_a_run_the_file_lacks_is_said_before_the_missing_extra(
    sqlite_run: Path, tmp_path: Path
) -> None:
    # The run is read while matplotlib would be imported: its error comes first.
    with pytest.raises(formats.RunFileError, match="has no run named 'missing'"):
        plot_file(sqlite_run, tmp_path / "chart.png", run="missing")


def test_importing_rlpulse_plot_does_not_import_matplotlib() -> None:
    code = (
        "import sys, rlpulse, rlpulse.read.plot, rlpulse.cli; "
        "print(any(n.partition('.')[0] == 'matplotlib' for n in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )

    assert result.stdout.strip() == "False", result.stderr


# A run recorded by a real monitor


def test_plot_of_a_monitored_run_draws_its_rates(tmp_path: Path) -> None:
    path = tmp_path / "metrics.sqlite"
    frames = {"frames": 0}
    with SQLiteLogger(path, run="monitored") as store:
        monitor = LoggerMonitor(store, background=False)
        monitor.watch(
            lambda: None,
            name="collector",
            stats_fn=lambda: dict(frames),
            schedule=Every.counter("frames", 100),
        )
        for _ in range(5):
            frames["frames"] += 150
            monitor.step()
        monitor.stop()

    figure = plot_run_of(path)

    (collector,) = _panels(figure).values()
    assert _labels(collector) == ["frames/s"]


def _collector_run(sink: MetricSink, start: float, rate: float) -> None:
    with sink:
        for second in range(6):
            sink.log_metrics(
                {
                    "collector/frames": rate * second,
                    "collector/frames_per_second": rate + second,
                    "buffer/size": 10.0 * second,
                },
                step=second,
                timestamp=start + second,
            )


def test_runs_drawn_together_share_a_colour_per_metric_and_a_style_per_run(
    tmp_path: Path,
) -> None:
    store = tmp_path / "runs.sqlite"
    _collector_run(SQLiteLogger(store, run="old"), 1000.0, 100.0)
    _collector_run(SQLiteLogger(store, run="new"), 5000.0, 150.0)
    figure = plot_runs(
        [("old", list(read(store, run="old"))), ("new", list(read(store, run="new")))],
        match="collector/*",
    )
    [axes] = figure.axes
    lines = axes.get_lines()
    assert [line.get_label() for line in lines] == ["frames/s [A]", "frames/s [B]"]
    assert lines[0].get_color() == lines[1].get_color()
    assert lines[0].get_linestyle() != lines[1].get_linestyle()
    # Each run over its own time: both start at 0 though started 4000 s apart.
    assert lines[0].get_xdata()[0] == lines[1].get_xdata()[0] == 0.0
    assert "A: old" in figure.texts[0].get_text()
    image = plot_files([(store, "old"), (store, "new")], tmp_path / "both.png")
    assert image.read_bytes()[:4] == b"\x89PNG"


def test_a_run_with_nothing_to_draw_among_several_is_named(tmp_path: Path) -> None:
    stepped, stepless = tmp_path / "a.csv", tmp_path / "b.csv"
    _collector_run(CSVLogger(stepped), 1000.0, 100.0)
    with CSVLogger(stepless) as sink:
        sink.log_metrics({"collector/frames_per_second": 5.0}, timestamp=1.0)
        sink.log_metrics({"collector/frames_per_second": 6.0}, timestamp=2.0)
    with pytest.warns(
        PlotWarning, match=r"left out run B \(.*b.csv.*\): no metric with a step"
    ):
        plot_files([(stepped, None), (stepless, None)], tmp_path / "o.png", x="step")


def test_runs_over_a_panels_bounds_lose_whole_metrics_not_a_run(tmp_path: Path) -> None:
    names = [f"w/gauge_{index}" for index in range(6)]
    runs = []
    for label in ("a", "b"):
        runs.append(
            (
                label,
                [
                    Record(100.0 + second, second, name, float(second * (index + 1)))
                    for second in range(3)
                    for index, name in enumerate(names)
                ],
            )
        )
    with pytest.warns(PlotWarning, match="lines of the watches drawn"):
        figure = plot_runs(runs)
    labels = [line.get_label() for axes in figure.axes for line in axes.get_lines()]
    assert len(labels) == MAX_LINES
    assert labels[:2] == ["gauge_0 [A]", "gauge_0 [B]"]
    assert sum(label.endswith("[A]") for label in labels) == MAX_LINES // 2


def test_runs_over_a_panels_bounds_lose_whole_metrics_where_one_runs_line_is_constant() -> (
    None
):
    # Run B's gauge_0 never moves (a constant, said beside the panel): the
    # varying lines came in an odd number, and a cut by count kept gauge_3
    # of run A without run B's.
    names = [f"w/gauge_{index}" for index in range(6)]
    runs = []
    for label in ("a", "b"):
        runs.append(
            (
                label,
                [
                    Record(
                        100.0 + second,
                        second,
                        name,
                        1.0
                        if (label, index) == ("b", 0)
                        else float(second * (index + 1)),
                    )
                    for second in range(3)
                    for index, name in enumerate(names)
                ],
            )
        )
    with pytest.warns(PlotWarning, match="lines of the watches drawn"):
        figure = plot_runs(runs)
    labels = [line.get_label() for axes in figure.axes for line in axes.get_lines()]
    drawn = [label for label in labels if not label.startswith("_")]
    metrics = {label.split()[0] for label in drawn if label != "gauge_0 [A]"}
    for metric in metrics:
        assert {f"{metric} [A]", f"{metric} [B]"} <= set(drawn), drawn


@pytest.mark.parametrize("name", OLD_SQLITE_FILES)
def test_cli_plot_of_a_sqlite_file_of_format_version_1_or_2_writes_a_png_of_each_watch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    path = copy_of_fixture(name, tmp_path)
    output = tmp_path / "chart.png"

    assert main(["plot", str(path), "-o", str(output)]) == 0

    assert capsys.readouterr().out == f"wrote {output}\n"
    assert png_size(output)[0] > 0
    assert list(_panels(plot_run_of(path))) == ["buffer", "collector", "learner"]


def test_rlpulse_plot_draws_several_runs_and_refuses_run_with_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = tmp_path / "a.csv", tmp_path / "b.jsonl"
    _collector_run(CSVLogger(first), 1000.0, 100.0)
    _collector_run(JSONLLogger(second), 2000.0, 120.0)
    output = tmp_path / "both.png"
    assert main(["plot", str(first), str(second), "-o", str(output)]) == 0
    assert output.read_bytes()[:4] == b"\x89PNG"
    assert main(["plot", str(first), str(second), "-o", str(output), "--run", "x"]) == 2
    assert "name each run as FILE:NAME" in capsys.readouterr().err


def _inside_the_figure(figure: Figure, texts: list[Text]) -> bool:
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
    width = figure.bbox.width
    return all(
        text.get_window_extent(renderer).x0 >= 0
        and text.get_window_extent(renderer).x1 <= width
        for text in texts
        if text.get_text()
    )


def test_a_charts_long_notes_are_wrapped_to_fit_its_width() -> None:
    records = [
        Record(float(t), t, f"w{watch:02d}/metric_{index}", float(t * index))
        for t in range(3)
        for watch in range(14)
        for index in range(10)
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PlotWarning)
        figure = plot_run(records, run="r", source="/a/long/path/" + "d" * 60)

    suptitle = figure.get_suptitle()
    assert "left out" in suptitle
    assert "--match PATTERN" in suptitle
    assert _inside_the_figure(figure, [figure._suptitle])  # type: ignore[list-item]


def test_constants_of_two_runs_are_wrapped_beside_their_panel() -> None:
    names = [f"b/constant_number_{index}" for index in range(6)] + ["b/size"]
    runs = [
        (
            label,
            [
                Record(float(t), t, name, float(t) if name == "b/size" else 1e6 + 7)
                for t in range(3)
                for name in names
            ],
        )
        for label in ("first.sqlite", "second.sqlite")
    ]

    figure = plot_runs(runs)

    right_titles = [axes._right_title for axes in figure.axes]  # type: ignore[attr-defined]
    assert any("constant:" in title.get_text() for title in right_titles)
    assert any("\n" in title.get_text() for title in right_titles)
    assert _inside_the_figure(figure, right_titles)


def test_every_panel_draws_the_same_time_from_the_first_point_of_any_watch() -> None:
    # The collector logs from 5 s on, the tally from the start: the chart
    # shows both over 0 to 9 s, the ticks alike on every axis.
    records = []
    for second in range(10):
        records.append(
            Record(100.0 + second, None, "tally/loss_mean", 1.0 / (second + 1))
        )
        records.append(Record(100.0 + second, None, "tally/queue", float(second)))
    for second in range(5, 10):
        records.append(Record(100.0 + second, None, "collector/size", 10.0 * second))
    figure = plot_run(sorted(records), run="late")
    limits = {tuple(round(v, 6) for v in axes.get_xlim()) for axes in figure.axes}
    assert len(limits) == 1
    low, high = limits.pop()
    assert low <= 0.0
    assert high >= 9.0


# Long runs, counters on the x axis, smoothing, bands


def _spiky_run(path: Path, payloads: int) -> None:
    """A gauge between 0 and 1 but for one spike to 50 and one dip to -7, and a counter."""
    with SQLiteLogger(path, run="long") as sink:
        sink.log_payloads(
            [
                Payload(
                    {
                        "learner/loss": 50.0
                        if index == payloads // 3
                        else -7.0
                        if index == 2 * payloads // 3
                        else (index % 10) / 10,
                        "collector/frames": 100.0 * index,
                    },
                    index,
                    START + index * 0.5,
                    {"collector/frames": Kind.COUNTER},
                )
                for index in range(payloads)
            ]
        )


@pytest.mark.parametrize("source", ["sqlite", "records"])
def test_a_long_lines_points_are_downsampled_keeping_each_spike(
    tmp_path: Path, source: str
) -> None:
    path = tmp_path / "long.sqlite"
    _spiky_run(path, 40_000)  # 80,000 records: SQLite downsamples them itself
    if source == "sqlite":
        image = plot_file(path, tmp_path / "long.png")
        assert image.exists()
        data = formats.read_downsampled(path, buckets=BUCKETS)
        ys = data.points["learner/loss"].values
    else:
        figure = plot_run(read(path), run="long", match="learner/*")
        (line,) = _panels(figure)["learner"].get_lines()
        ys = list(line.get_ydata())

    assert len(ys) <= 2 * BUCKETS + 2
    assert max(ys) == 50.0
    assert min(ys) == -7.0


def test_plot_file_of_a_long_sqlite_run_draws_only_the_axes_its_panels_have(
    tmp_path: Path,
) -> None:
    # Axes are made while SQLite reads the run, before it is known how many
    # the chart has: those left over are not drawn.
    path = tmp_path / "long.sqlite"
    _spiky_run(path, 40_000)

    image = plot_file(path, tmp_path / "long.svg")

    assert image.read_text().count('<g id="axes_') == 2  # collector, learner


def test_a_downsampled_sqlite_run_keeps_the_extremes_a_line_file_keeps(
    tmp_path: Path,
) -> None:
    path = tmp_path / "long.sqlite"
    _spiky_run(path, 30_000)

    from_sql = formats.read_downsampled(path, buckets=200)
    from_records = formats.downsample(read(path), buckets=200)

    for name in ("learner/loss", "collector/frames"):
        sql_values = from_sql.points[name].values
        python_values = from_records.points[name].values
        assert (min(sql_values), max(sql_values)) == (
            min(python_values),
            max(python_values),
        )
    assert from_sql.kinds == from_records.kinds
    assert from_sql.records == from_records.records == 60_000


def test_a_downsampled_sqlite_run_keeps_a_gap_where_a_bucket_holds_a_nan(
    tmp_path: Path,
) -> None:
    path = tmp_path / "long.sqlite"
    with SQLiteLogger(path, run="long") as sink:
        sink.log_payloads(
            [
                Payload(
                    {
                        "learner/loss": math.nan if index == 30_000 else 1.0,
                        "learner/steps": float(index),
                    },
                    index,
                    START + index,
                    {"learner/steps": Kind.COUNTER},
                )
                for index in range(40_000)
            ]
        )

    points = formats.read_downsampled(path, buckets=100).points
    loss, steps = points["learner/loss"], points["learner/steps"]

    gaps = [
        at
        for at, value in zip(loss.wall_times, loss.values, strict=True)
        if math.isnan(value)
    ]
    assert len(gaps) == 1
    assert START + 29_600 <= gaps[0] <= START + 30_400  # in the NaN's bucket
    assert {value for value in loss.values if not math.isnan(value)} == {1.0}
    assert loss.wall_times == sorted(loss.wall_times)
    assert len(steps.values) == len(set(steps.wall_times)) <= 2 * 100 + 2
    assert (steps.values[0], steps.values[-1]) == (0.0, 39_999.0)
    assert steps.steps[-1] == 39_999


def test_a_downsampled_sqlite_run_counts_its_summarized_rows_and_those_after_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "long.sqlite"
    _spiky_run(path, 30_000)  # summarized as the logger closes
    with contextlib.closing(sqlite3.connect(path)) as connection, connection:
        # Rows no summary counts yet, as another writer leaves them.
        connection.executemany(
            "INSERT INTO metrics (run, wall_time, step, name, value)"
            " VALUES (1, ?, NULL, 'learner/loss', 1000.0)",
            [(START - 10.0,), (START + 20_000.0,)],
        )

    run = formats.read_downsampled(path, buckets=100)

    records = list(read(path))
    assert run.records == len(records) == 60_002
    assert run.start_wall_time == START - 10.0
    assert run.end_wall_time == START + 20_000.0
    assert {START - 10.0, START + 20_000.0} <= set(
        run.points["learner/loss"].wall_times
    )


def test_a_downsampled_sqlite_run_begun_without_kinds_reads_the_metrics_lacking_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "long.sqlite"
    with SQLiteLogger(path, run="long") as sink:
        sink.log_payloads(
            [
                Payload(
                    {"old/loss": 1.0 / (1 + index), "new/size": float(index % 10)},
                    index,
                    START + index,
                    {},
                )
                for index in range(30_000)
            ]
        )
    with contextlib.closing(sqlite3.connect(path)) as connection, connection:
        # As a run rlpulse 0.1.0 began (storing no kind) and a logger that
        # stores kinds resumed leaves it.
        connection.execute("DELETE FROM kinds WHERE name = 'old/loss'")

    run = formats.read_downsampled(path, buckets=100, keep=lambda kinds: set())

    assert set(run.points) == {"old/loss"}
    assert run.kinds == {"old/loss": Kind.GAUGE, "new/size": Kind.GAUGE}
    assert max(run.points["old/loss"].values) == 1.0


def test_a_downsampled_sqlite_run_reads_only_the_metrics_kept(tmp_path: Path) -> None:
    path = _wide_run(tmp_path / "long.sqlite", 3, 9_000)

    run = formats.read_downsampled(
        path, buckets=100, keep=lambda kinds: {"w01/frames_per_second"}
    )

    assert set(run.points) == {"w01/frames_per_second"}
    assert len(run.kinds) == 6


def _tensorboard_smoothing(values: list[float], weight: float) -> list[float]:
    # TensorBoard's scalar smoothing (vz_line_chart2), written out here.
    last, smoothed = 0.0, []
    for accumulated, value in enumerate(values, start=1):
        last = last * weight + (1 - weight) * value
        smoothed.append(last / (1 - weight**accumulated))
    return smoothed


def test_smoothing_draws_tensorboards_moving_average_over_the_faint_line_as_logged() -> (
    None
):
    records = _records(
        *(
            (second, second, "learner/loss", 1.0 / (1 + second) + (second % 3) * 0.1)
            for second in range(60)
        )
    )

    figure = plot_run(records, run="r", smooth=0.9)

    faint, drawn = _panels(figure)["learner"].get_lines()
    assert faint.get_alpha() == 0.25
    assert list(faint.get_ydata()) == [record.value for record in records]
    assert list(drawn.get_ydata()) == pytest.approx(
        _tensorboard_smoothing(list(faint.get_ydata()), 0.9)
    )
    assert drawn.get_label() == "loss"


def test_a_distributions_p50_is_drawn_with_a_band_to_its_p99() -> None:
    rows = []
    for second in range(20):
        rows += [
            (second, None, "learner/update_s_p50", 0.010 + second / 1000),
            (second, None, "learner/update_s_p90", 0.020 + second / 1000),
            (second, None, "learner/update_s_p99", 0.040 + second / 1000),
        ]

    figure = plot_run(_records(*rows), run="r")

    axes = _panels(figure)["learner"]
    assert _labels(axes) == ["update_s_p50", "update_s_p90"]
    (band,) = axes.patches
    assert band.get_label() == "update_s p50–p99"
    vertices = band.get_path().vertices
    assert vertices[:, 1].max() == pytest.approx(0.040 + 19 / 1000)
    assert vertices[:, 1].min() == pytest.approx(0.010)
    assert axes.get_ylim()[1] > 0.040 + 19 / 1000  # the band in view


def test_a_smoothed_p50s_band_is_smoothed_as_its_line() -> None:
    rows = []
    for second in range(30):
        jitter = 0.005 * (second % 2)
        rows += [
            (second, None, "learner/update_s_p50", 0.010 + jitter),
            (second, None, "learner/update_s_p99", 0.040 + jitter),
        ]

    figure = plot_run(_records(*rows), run="r", smooth=0.9)

    (band,) = _panels(figure)["learner"].patches
    tops = sorted({round(y, 9) for _, y in band.get_path().vertices if y > 0.03})
    highs = _tensorboard_smoothing([0.040 + 0.005 * (s % 2) for s in range(30)], 0.9)
    assert tops == sorted({round(y, 9) for y in highs})


def test_a_band_leaves_a_gap_where_a_bound_is_nan() -> None:
    rows = []
    for second in range(20):
        rows += [
            (second, None, "learner/update_s_p50", 0.010),
            (second, None, "learner/update_s_p99", math.nan if second == 9 else 0.04),
        ]

    figure = plot_run(_records(*rows), run="r")

    (band,) = _panels(figure)["learner"].patches
    path = band.get_path()
    assert list(path.codes).count(path.MOVETO) == 2  # a polygon each side
    assert not any(math.isnan(value) for value in path.vertices.flat)
    assert 9.0 not in path.vertices[:, 0]  # seconds since the start


def test_a_band_whose_bound_is_never_known_is_left_out_and_the_rest_drawn() -> None:
    rows = []
    for second in range(20):
        rows += [
            (second, None, "learner/update_s_p50", 0.010),
            (second, None, "learner/update_s_p99", math.nan),
        ]

    figure = plot_run(_records(*rows), run="r")

    learner = _panels(figure)["learner"]
    assert not learner.patches
    assert [line.get_label() for line in learner.get_lines()] == ["update_s_p50"]


def test_a_counter_on_the_x_axis_places_every_watch_at_its_value_at_their_time() -> (
    None
):
    records = _records(
        (0, None, "collector/frames", 0.0),
        (10, None, "collector/frames", 1000.0),
        (20, None, "collector/frames", 3000.0),
        (5, None, "buffer/size", 7.0),
        (15, None, "buffer/size", 9.0),
        (20, None, "buffer/size", 9.0),
    )

    figure = plot_run(records, run="r", x="collector/frames")

    (size,) = _panels(figure)["buffer"].get_lines()
    assert list(size.get_xdata()) == [500.0, 2000.0, 3000.0]
    assert figure.axes[-1].get_xlabel() == "collector/frames"


def test_plot_with_a_smoothing_weight_of_one_or_more_is_refused_with_the_range(
    pipeline_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(
            ["plot", str(pipeline_run), "-o", str(tmp_path / "x.png"), "--smooth", "1"]
        )

    assert exit_info.value.code == 2
    assert "from 0 (none) to below 1" in capsys.readouterr().err


def test_a_returns_sum_that_runs_as_fast_as_the_frames_leaves_the_frames_drawn() -> (
    None
):
    # A reward of one a frame: the returns' sum grows as the frames do.
    records = []
    for second in range(6):
        at = 100.0 + 2 * second
        frames = 200.0 * second + 20.0 * second**2
        records += [
            Record(at, None, "actor/frames", frames, Kind.COUNTER),
            Record(at, None, "actor/episode_return_sum", frames, Kind.COUNTER),
            Record(at, None, "actor/episode_return_mean", 20.0 + second, Kind.GAUGE),
        ]
    figure = plot_run(records, run="r")
    labels = [line.get_label() for axes in figure.axes for line in axes.get_lines()]
    assert "frames/s" in labels
    assert "episode_return_sum/s" not in labels
    assert "episode_return_mean" in labels


def test_a_tallys_count_rated_beside_the_counter_it_counts_with_is_drawn_once() -> None:
    # The learner's logged updates/s and its update_s_count's derived rate
    # differ by their clocks and one update at the end: one line.
    records = []
    for second in range(6):
        at = 100.0 + 2 * second
        updates = 13.0 + 100 * second
        records += [
            Record(at, None, "learner/updates", updates, Kind.COUNTER),
            Record(at, None, "learner/update_s_count", updates - 1, Kind.COUNTER),
        ]
        if second:
            rate = 50.0 * (1 + 0.002 * second)
            records.append(
                Record(at, None, "learner/updates_per_second", rate, Kind.RATE)
            )
    figure = plot_run(records, run="r")
    labels = [line.get_label() for axes in figure.axes for line in axes.get_lines()]
    assert labels == ["updates/s"]


def test_runs_past_a_panel_s_lines_are_left_out_whole_saying_to_draw_them_apart() -> (
    None
):
    runs = [
        (
            f"seed{seed}",
            [
                Record(100.0 + second, None, "e/return_mean", seed + second, Kind.GAUGE)
                for second in range(5)
            ],
        )
        for seed in range(10)
    ]
    with pytest.warns(PlotWarning, match=r"left out 2 runs \(I: seed8, J: seed9\)"):
        figure = plot_runs(runs)
    labels = [line.get_label() for axes in figure.axes for line in axes.get_lines()]
    assert sorted(labels) == [f"return_mean [{letter}]" for letter in "ABCDEFGH"]
    assert "J: seed9" not in figure.texts[0].get_text().splitlines()[0]


def test_a_run_without_records_drawn_with_others_is_left_out_saying_so() -> None:
    drawn = [
        Record(100.0 + second, None, "e/return_mean", second**2, Kind.GAUGE)
        for second in range(5)
    ]
    with pytest.warns(PlotWarning, match=r"left out run B \(empty\): no records"):
        figure = plot_runs([("a", drawn), ("empty", []), ("c", drawn)])
    labels = [line.get_label() for axes in figure.axes for line in axes.get_lines()]
    assert sorted(labels) == ["return_mean [A]", "return_mean [C]"]
    with pytest.raises(PlotError, match="no run has records to plot: x, y"):
        plot_runs([("x", []), ("y", [])])


def test_runs_drawn_together_draw_each_run_s_lines_as_its_own_chart_does() -> None:
    # A rate drawn once, a distribution's p50 with its band, per run.
    def learner(speed: float) -> list[Record]:
        records = []
        for second in range(6):
            at = 100.0 + 2 * second
            updates = 13.0 + speed * second**2
            records += [
                Record(at, None, "learner/updates", updates, Kind.COUNTER),
                Record(at, None, "learner/update_s_count", updates - 1, Kind.COUNTER),
                Record(at, None, "learner/update_s_p50", at * speed, Kind.GAUGE),
                Record(at, None, "learner/update_s_p99", 3 * at * speed, Kind.GAUGE),
            ]
        return records

    figure = plot_runs([("a", learner(10.0)), ("b", learner(20.0))])
    labels = sorted(
        label for axes in figure.axes for label in axes.get_legend_handles_labels()[1]
    )
    assert labels == [
        "update_s p50–p99 [A]",
        "update_s p50–p99 [B]",
        "update_s_p50 [A]",
        "update_s_p50 [B]",
        "updates/s [A]",
        "updates/s [B]",
    ]
