"""Which metrics ``--match`` keeps (rlpulse.read.match): globs and substrings, several patterns, and the one error of a pattern that keeps none, the same in every command."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlpulse.cli import main
from rlpulse.read.match import select_metrics
from tests.support import write_sqlite_run


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


def test_select_metrics_keeps_the_names_matching_any_of_several_patterns() -> None:
    names = ["collector/frames", "buffer/size", "learner/loss", "learner/lr"]

    assert select_metrics(names, ["buffer", "learner/l?"]) == [
        "buffer/size",
        "learner/lr",
    ]
    assert select_metrics(names, []) == []


@pytest.mark.parametrize("command", ["show", "top", "compare", "plot"])
def test_match_of_nothing_is_the_same_one_line_error_in_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    path = tmp_path / "metrics.db"
    write_sqlite_run(path, "first", frames=400.0)
    arguments = {
        "show": [str(path)],
        "top": [str(path), "--once"],
        "compare": [str(path), str(path)],
        "plot": [str(path), "-o", str(tmp_path / "chart.png")],
    }[command]
    if command == "plot":
        pytest.importorskip("matplotlib")

    assert main([command, *arguments, "--match", "zz"]) == 2

    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("rlpulse: error: ")
    assert "metric matching 'zz'" in line
    assert "buffer/utilization, collector/frames, collector/frames_per_second" in line


@pytest.mark.parametrize(
    ("pattern", "meant"),
    [
        ("colector/frames", "'collector/frames'"),
        ("colector/*", "'collector/*'"),
        ("frames*", "'*frames*' (a pattern with *, ? or [ matches whole names)"),
    ],
)
def test_a_pattern_close_to_what_the_run_has_is_answered_with_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pattern: str, meant: str
) -> None:
    path = tmp_path / "metrics.db"
    write_sqlite_run(path, "first", frames=400.0)

    assert main(["show", str(path), "--match", pattern]) == 2

    (line,) = capsys.readouterr().err.splitlines()
    assert f"no metric matching '{pattern}'; did you mean {meant}? Its metrics" in line
