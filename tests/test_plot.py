"""Charts of recorded runs: ``rlpulse.read.plot`` and ``rlpulse plot``, drawn from files the real sinks wrote."""

from __future__ import annotations

import math
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from rlpulse import CSVLogger, Every, JSONLLogger, LoggerMonitor, Record, SQLiteLogger
from rlpulse.cli import main
from rlpulse.read.plot import (
    INSTALL_HINT,
    PlotError,
    plot_file,
    plot_run,
    select_metrics,
)
from rlpulse.sinks.registry import MetricSink

RLPULSE_SCRIPT = Path(sys.executable).with_name("rlpulse")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
START = 1_700_000_000.0

SinkFactory = Callable[[Path], MetricSink]
SINKS: dict[str, tuple[str, SinkFactory]] = {
    "sqlite": ("metrics.sqlite", lambda path: SQLiteLogger(path, run="baseline")),
    "csv": ("metrics.csv", CSVLogger),
    "jsonl": ("metrics.jsonl", JSONLLogger),
}


def _write_pipeline_run(path: Path, sink: MetricSink) -> Path:
    """Ten payloads of a collector, a buffer and a learner, one a second."""
    with sink:
        for second in range(10):
            frames = 1000.0 * second
            sink.log_metrics(
                {
                    "collector/frames": frames,
                    "collector/frames_per_second": 1000.0 + second,
                    "collector/batches_per_second": 10.0 + second % 3,
                    "buffer/size": min(frames, 5000.0),
                    "buffer/capacity": 5000.0,
                    "buffer/utilization": min(frames, 5000.0) / 5000.0,
                    "learner/loss": 1.0 / (second + 1),
                },
                step=int(frames),
                timestamp=START + second,
            )
    return path


@pytest.fixture(params=sorted(SINKS))
def pipeline_run(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    name, factory = SINKS[request.param]
    path = tmp_path / name
    return _write_pipeline_run(path, factory(path))


@pytest.fixture
def sqlite_run(tmp_path: Path) -> Path:
    path = tmp_path / "metrics.sqlite"
    return _write_pipeline_run(path, SQLiteLogger(path, run="baseline"))


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


def _twin(figure: Figure, panel: Axes) -> Axes:
    (twin,) = [
        axes
        for axes in figure.axes
        if axes is not panel and axes.bbox.bounds == panel.bbox.bounds
    ]
    return twin


def _labels(axes: Axes) -> list[str]:
    return [str(line.get_label()) for line in axes.get_lines()]


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


# The image file


def test_plot_file_writes_a_png_of_a_run_from_every_file_sink(
    pipeline_run: Path, tmp_path: Path
) -> None:
    output = tmp_path / "chart.png"

    written = plot_file(pipeline_run, output)

    assert written == output
    width, height = _png_size(output)
    assert 800 <= width <= 2000
    assert 400 <= height <= 2000


def test_plot_file_grows_taller_with_more_panels(
    sqlite_run: Path, tmp_path: Path
) -> None:
    one_panel = plot_file(sqlite_run, tmp_path / "one.png", match="learner/")
    three_panels = plot_file(sqlite_run, tmp_path / "three.png")

    one_width, one_height = _png_size(one_panel)
    three_width, three_height = _png_size(three_panels)
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


def test_a_counter_without_its_rate_is_drawn_itself(sqlite_run: Path) -> None:
    from rlpulse import read

    figure = plot_run(read(sqlite_run), run="baseline", match="*/frames")

    (collector,) = _panels(figure).values()
    assert _labels(collector) == ["frames"]
    assert list(collector.get_lines()[0].get_ydata()) == [
        1000.0 * second for second in range(10)
    ]


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


def test_gauges_next_to_rates_get_a_right_hand_axis(sqlite_run: Path) -> None:
    figure = plot_run(
        _records(
            (0, None, "buffer/writes_per_second", 100.0),
            (0, None, "buffer/size", 5.0),
            (1, None, "buffer/writes_per_second", 120.0),
            (1, None, "buffer/size", 9.0),
        ),
        run="mixed",
    )

    buffer = _panels(figure)["buffer"]
    twin = _twin(figure, buffer)
    assert _labels(buffer) == ["writes/s"]
    assert _labels(twin) == ["size (right axis)"]
    assert twin.get_ylabel() == "value"
    assert buffer.get_lines()[0].get_linestyle() == "-"
    assert twin.get_lines()[0].get_linestyle() == "--"


def test_a_panel_of_gauges_only_has_a_single_value_axis(sqlite_run: Path) -> None:
    figure = plot_run_of(sqlite_run)

    learner = _panels(figure)["learner"]
    assert _labels(learner) == ["loss"]
    assert learner.get_ylabel() == "value"
    assert len(figure.axes) == 3  # no panel has both rates and gauges


def test_lines_of_very_different_size_share_a_log_axis(sqlite_run: Path) -> None:
    figure = plot_run_of(sqlite_run)

    collector = _panels(figure)["collector"]  # 10 batches/s next to 1000 frames/s
    assert collector.get_yscale() == "log"
    assert collector.get_ylabel() == "per second (/s), log scale"


def test_a_log_axis_with_zeros_is_symmetric_log(tmp_path: Path) -> None:
    figure = plot_run(
        _records(
            (0, None, "buffer/size", 0.0),
            (0, None, "buffer/utilization", 0.0),
            (1, None, "buffer/size", 5000.0),
            (1, None, "buffer/utilization", 0.5),
        ),
        run="filling",
    )

    assert _panels(figure)["buffer"].get_yscale() == "symlog"


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


def test_negative_values_keep_zero_in_view() -> None:
    figure = plot_run(
        _records(
            (0, None, "learner/advantage", -3.0), (1, None, "learner/advantage", -1.0)
        ),
        run="negative",
    )

    assert _panels(figure)["learner"].get_ylim()[1] == 0.0


def test_legends_sit_to_the_right_of_their_panel(sqlite_run: Path) -> None:
    figure = plot_run_of(sqlite_run)
    figure.canvas.draw()

    for panel in _panels(figure).values():
        legend = panel.get_legend()
        assert legend is not None
        assert legend.get_window_extent().x0 >= panel.get_window_extent().x1


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


def test_step_axis_of_a_run_without_steps_is_a_plot_error() -> None:
    with pytest.raises(PlotError, match=r"no step.*--x time"):
        plot_run(_records((0, None, "buffer/size", 1.0)), run="stepless", x="step")


def test_an_unknown_x_axis_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="x must be 'time' or 'step'"):
        plot_run(_records((0, None, "buffer/size", 1.0)), run="r", x="frames")  # type: ignore[arg-type]


# Choosing metrics


def test_select_metrics_reads_a_pattern_with_wildcards_as_a_glob() -> None:
    names = ["collector/frames", "collector/frames_per_second", "buffer/size"]

    assert select_metrics(names, "collector/*") == [
        "collector/frames",
        "collector/frames_per_second",
    ]
    assert select_metrics(names, "*/size") == ["buffer/size"]
    assert select_metrics(names, "buffer/[st]ize") == ["buffer/size"]


def test_select_metrics_glob_matches_the_whole_name() -> None:
    assert select_metrics(["collector/frames_per_second"], "*frames") == []


def test_select_metrics_reads_a_plain_pattern_as_a_substring() -> None:
    names = ["collector/frames", "learner/frames_sampled", "buffer/size"]

    assert select_metrics(names, "frames") == [
        "collector/frames",
        "learner/frames_sampled",
    ]


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


@pytest.fixture
def without_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every matplotlib import fail, as in an installation without it."""
    for name in [
        name for name in sys.modules if name.partition(".")[0] == "matplotlib"
    ]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "matplotlib", None)


@pytest.mark.usefixtures("without_matplotlib")
def test_without_matplotlib_plotting_raises_import_error_naming_the_extra(
    sqlite_run: Path, tmp_path: Path
) -> None:
    with pytest.raises(ImportError, match=r"pip install 'rlpulse\[plot\]'") as error:
        plot_file(sqlite_run, tmp_path / "chart.png")

    assert error.value.name == "matplotlib"
    assert INSTALL_HINT in str(error.value)


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


# The command line


def test_cli_plot_writes_the_image_and_says_where(
    sqlite_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "chart.png"

    assert main(["plot", str(sqlite_run), "-o", str(output)]) == 0

    assert capsys.readouterr().out == f"wrote {output}\n"
    assert _png_size(output)[0] > 0


def test_cli_plot_passes_match_x_and_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.sqlite"
    with SQLiteLogger(path, run="first") as sink:
        sink.log_metrics({"collector/frames_per_second": 5.0}, step=10, timestamp=START)
    SQLiteLogger(path, run="second").close()
    output = tmp_path / "chart.png"

    assert (
        main(
            [
                "plot",
                str(path),
                "-o",
                str(output),
                "--run",
                "first",
                "--match",
                "collector/*",
                "--x",
                "step",
            ]
        )
        == 0
    )

    assert output.read_bytes()[:8] == PNG_SIGNATURE


def test_cli_plot_of_a_run_with_no_matching_metric_is_a_one_line_error(
    sqlite_run: Path, tmp_path: Path, error_line: Callable[[], str]
) -> None:
    assert (
        main(["plot", str(sqlite_run), "-o", str(tmp_path / "c.png"), "--match", "zz"])
        == 2
    )

    line = error_line()
    assert line.startswith("rlpulse: error: run baseline has no metric matching 'zz'")


@pytest.mark.usefixtures("without_matplotlib")
def test_cli_plot_without_matplotlib_is_a_one_line_error_naming_the_extra(
    sqlite_run: Path, tmp_path: Path, error_line: Callable[[], str]
) -> None:
    assert main(["plot", str(sqlite_run), "-o", str(tmp_path / "c.png")]) == 2

    line = error_line()
    assert line.startswith("rlpulse: error: ")
    assert "pip install 'rlpulse[plot]'" in line


@pytest.mark.parametrize(
    ("make_path", "message"),
    [
        (lambda tmp: tmp / "missing.sqlite", "no such file"),
        (lambda tmp: tmp, "is a directory"),
    ],
)
def test_cli_plot_of_no_metrics_file_is_a_one_line_error(
    tmp_path: Path,
    error_line: Callable[[], str],
    make_path: Callable[[Path], Path],
    message: str,
) -> None:
    assert main(["plot", str(make_path(tmp_path)), "-o", str(tmp_path / "c.png")]) == 2

    assert message in error_line()


def test_cli_plot_of_an_unknown_run_is_a_one_line_error(
    sqlite_run: Path, tmp_path: Path, error_line: Callable[[], str]
) -> None:
    assert (
        main(["plot", str(sqlite_run), "-o", str(tmp_path / "c.png"), "--run", "x"])
        == 2
    )

    assert "no run named 'x'" in error_line()


def test_cli_plot_into_an_unwritable_path_is_a_one_line_error(
    sqlite_run: Path, tmp_path: Path, error_line: Callable[[], str]
) -> None:
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")

    assert main(["plot", str(sqlite_run), "-o", str(not_a_directory / "c.png")]) == 2

    assert str(not_a_directory) in error_line()


def test_cli_plot_help_explains_match_and_gives_examples(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["plot", "--help"])

    out = capsys.readouterr().out
    assert "rlpulse plot runs/demo.sqlite -o runs/demo.png" in out
    assert "a glob" in out
    assert "substring" in out
    assert "pip install 'rlpulse[plot]'" in out


@pytest.mark.timeout(90)
def test_plot_as_a_real_command(sqlite_run: Path, tmp_path: Path) -> None:
    output = tmp_path / "chart.png"

    result = subprocess.run(
        [str(RLPULSE_SCRIPT), "plot", str(sqlite_run), "-o", str(output)],
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"wrote {output}\n"
    assert _png_size(output)[0] > 0
