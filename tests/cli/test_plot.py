"""``rlpulse plot``: the command drawing recorded runs, in-process through ``main`` and as a subprocess."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from rlpulse import CSVLogger, SQLiteLogger
from rlpulse.cli import main
from tests.support import PLOTTED_START, PNG_SIGNATURE, RLPULSE_SCRIPT, png_size


def test_cli_plot_writes_the_image_and_says_where(
    sqlite_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "chart.png"

    assert main(["plot", str(sqlite_run), "-o", str(output)]) == 0

    assert capsys.readouterr().out == f"wrote {output}\n"
    assert png_size(output)[0] > 0


def test_cli_plot_passes_match_x_and_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.sqlite"
    with SQLiteLogger(path, run="first") as sink:
        sink.log_metrics(
            {"collector/frames_per_second": 5.0}, step=10, timestamp=PLOTTED_START
        )
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


def test_cli_plot_keeps_the_metrics_of_every_repeated_match(
    sqlite_run: Path, tmp_path: Path
) -> None:
    both = tmp_path / "both.png"
    learner = tmp_path / "learner.png"

    arguments = ["plot", str(sqlite_run), "--match", "buffer/*", "--match"]
    assert main([*arguments, "learner/*", "-o", str(both)]) == 0
    assert (
        main(["plot", str(sqlite_run), "--match", "learner/*", "-o", str(learner)]) == 0
    )

    assert png_size(both)[1] > 1.6 * png_size(learner)[1]


def test_cli_plot_cumulative_draws_the_counters_too(
    sqlite_run: Path, tmp_path: Path
) -> None:
    rates = tmp_path / "rates.png"
    counters = tmp_path / "counters.png"

    assert (
        main(["plot", str(sqlite_run), "--match", "collector/", "-o", str(rates)]) == 0
    )
    arguments = ["plot", str(sqlite_run), "--match", "collector/", "--cumulative"]
    assert main([*arguments, "-o", str(counters)]) == 0

    assert png_size(counters)[1] > 1.6 * png_size(rates)[1]  # a second axis


def test_cli_plot_over_steps_says_on_standard_error_which_watches_it_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.sqlite"
    with SQLiteLogger(path, run="mixed") as sink:
        for second in range(3):
            sink.log_metrics(
                {"buffer/size": 5.0 + second}, step=second, timestamp=PLOTTED_START
            )
            sink.log_metrics(
                {"learner/loss": 1.0 / (second + 1)}, timestamp=PLOTTED_START
            )
    output = tmp_path / "steps.png"

    assert main(["plot", str(path), "-o", str(output), "--x", "step"]) == 0

    captured = capsys.readouterr()
    assert captured.out == f"wrote {output}\n"
    assert captured.err == (
        "rlpulse: note: left out 1 watch without a step: learner "
        "(draw it over time: x='time', --x time)\n"
    )


def test_cli_plot_passes_on_matplotlibs_own_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.csv"
    with CSVLogger(path) as sink:
        for second in range(2):
            sink.log_metrics(
                {"学習/loss": 1.0 / (second + 1)}, timestamp=PLOTTED_START + second
            )

    # The default font has no such glyph.
    with pytest.warns(UserWarning, match="missing from font"):
        assert main(["plot", str(path), "-o", str(tmp_path / "chart.png")]) == 0

    assert "rlpulse: note" not in capsys.readouterr().err


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


def test_cli_plot_into_a_folder_is_a_one_line_error_naming_an_image_to_write(
    sqlite_run: Path, tmp_path: Path, error_line: Callable[[], str]
) -> None:
    folder = tmp_path / "charts"
    folder.mkdir()

    assert main(["plot", str(sqlite_run), "-o", str(folder)]) == 2

    assert error_line() == (
        f"rlpulse: error: {folder} is a folder: name the image to write, "
        f"as in {folder / 'chart.png'}"
    )
    assert list(folder.iterdir()) == []


def test_cli_plot_says_which_folder_it_made_for_the_chart(
    sqlite_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "charts" / "today" / "chart.png"

    assert main(["plot", str(sqlite_run), "-o", str(output)]) == 0

    made = tmp_path / "charts"
    assert capsys.readouterr().out == f"wrote {output} (made the folder {made})\n"
    assert png_size(output)[0] > 0


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
    assert png_size(output)[0] > 0
