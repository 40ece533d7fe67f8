"""``rlpulse show``: a run's table of figures, its runs, its events and verdict, and its one-line errors."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rlpulse.cli import main
from rlpulse.sinks import CSVLogger, JSONLLogger, SQLiteLogger
from tests.support import (
    FIXTURES,
    OLD_SQLITE_FILES,
    RLPULSE_SCRIPT,
    copy_of_fixture,
    table_rows,
    write_pipeline_run,
    write_sqlite_run,
)


def test_show_prints_a_table_of_the_latest_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.db"
    write_sqlite_run(path, "first", frames=400.0)
    write_sqlite_run(path, "second", frames=40_000.0)

    assert main(["show", str(path)]) == 0

    out = capsys.readouterr().out
    assert out.startswith(f"run second in {path}: 5 records over 4.0 s, from ")
    assert table_rows(out) == {
        "buffer/utilization": ["0.75", "0.5", "0.75"],
        "collector/frames": ["40,000", "0", "40,000", "10,000"],
        "collector/frames_per_second": ["10,000", "10,000", "10,000"],
    }


def test_show_fits_the_table_to_the_terminals_width_and_writes_names_whole_into_a_pipe(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = tmp_path / "metrics.db"
    long_name = "replay_buffer/samples_returned_per_second"
    with SQLiteLogger(path, run="r") as sink:
        sink.log_metrics({long_name: 9930.0, "collector/frames": 0.0}, timestamp=1.0)
        sink.log_metrics(
            {long_name: 9931.0, "collector/frames": 24950.0}, timestamp=5.0
        )

    monkeypatch.setenv("COLUMNS", "56")
    assert main(["show", str(path)]) == 0
    narrow = capsys.readouterr().out.splitlines()
    monkeypatch.delenv("COLUMNS")
    assert main(["show", str(path)]) == 0
    piped = capsys.readouterr().out

    table = narrow[narrow.index(next(x for x in narrow if x.startswith("metric "))) :]
    assert all(len(line) <= 56 for line in table)
    assert any(line.startswith("replay_buf…per_second  ") for line in table)
    assert f"{long_name}  " in piped
    # The line above the table broken between words, not by the terminal
    # mid-word; whole into a pipe.
    header = narrow[: narrow.index("")]
    assert len(header) > 1
    assert all(len(line) <= 56 or len(line.split()) == 1 for line in header)
    assert [line.startswith("    ") for line in header] == [False] + [True] * (
        len(header) - 1
    )
    assert " ".join(line.strip() for line in header) == piped.splitlines()[0]


@pytest.mark.parametrize("name", ["first", "seed:1"])  # a colon in it too
@pytest.mark.parametrize("naming", ["--run", "FILE:NAME"])
def test_show_run_picks_the_named_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], naming: str, name: str
) -> None:
    path = tmp_path / "metrics.db"
    write_sqlite_run(path, name, frames=400.0)
    write_sqlite_run(path, "second", frames=40_000.0)
    # FILE:NAME as compare, plot and top take it.
    run = [str(path), "--run", name] if naming == "--run" else [f"{path}:{name}"]

    assert main(["show", *run]) == 0

    out = capsys.readouterr().out
    assert out.startswith(f"run {name} in {path}:")
    assert table_rows(out)["collector/frames"] == ["400", "0", "400", "100"]


def test_a_latest_run_without_records_notes_the_runs_that_have_some(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.db"
    write_sqlite_run(path, "first", frames=400.0)
    write_sqlite_run(path, "second", frames=800.0)
    SQLiteLogger(path, run="empty").close()  # closed before its first payload

    assert main(["show", str(path)]) == 0

    out, err = capsys.readouterr()
    assert out.strip() == f"run empty in {path}: no records"
    assert err == (
        f"rlpulse: note: empty, the latest run of {path}, holds no records; runs "
        "that do: first, second (--run NAME shows one, --runs lists them)\n"
    )


def test_show_refuses_a_run_named_twice_or_with_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.db"
    write_sqlite_run(path, "first", frames=400.0)

    assert main(["show", f"{path}:first", "--run", "first"]) == 0
    capsys.readouterr()
    assert main(["show", f"{path}:first", "--run", "second"]) == 2
    assert "names run 'first' and --run names 'second': name the run once" in (
        capsys.readouterr().err
    )
    assert main(["show", f"{path}:first", "--runs"]) == 2
    assert f"give {path} --runs" in capsys.readouterr().err


def test_show_runs_lists_the_runs_oldest_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.db"
    write_sqlite_run(path, "first", frames=400.0)
    write_sqlite_run(path, "second", frames=400.0)

    assert main(["show", str(path), "--runs"]) == 0

    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["run", "start", "length", "records"]
    assert [line.split()[0] for line in lines[1:]] == ["first", "second"]


def test_show_runs_refuses_the_options_that_narrow_one_runs_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.db"
    write_sqlite_run(path, "first", frames=400.0)

    assert main(["show", str(path), "--runs", "--since", "-5m", "--match", "c*"]) == 2

    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith(
        "rlpulse: error: --runs lists the file's runs; --match and --since narrow "
    )
    assert main(["show", str(path), "--runs", "--exact"]) == 2
    assert "; --exact narrows one run's summary" in capsys.readouterr().err


def test_show_runs_gives_each_runs_start_length_and_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.db"
    write_sqlite_run(path, "first", frames=400.0)
    SQLiteLogger(path, run="empty").close()

    assert main(["show", str(path), "--runs"]) == 0

    first, empty = capsys.readouterr().out.splitlines()[1:]
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(100.0))
    assert first.split() == ["first", *started.split(), "4.0", "s", "5"]
    assert empty.split()[0] == "empty"
    assert empty.split()[-3:] == ["0.0", "s", "0"]


def test_show_match_keeps_only_the_matching_metrics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.db"
    write_sqlite_run(path, "first", frames=400.0)

    assert main(["show", str(path), "--match", "collector/*"]) == 0

    assert set(table_rows(capsys.readouterr().out)) == {
        "collector/frames",
        "collector/frames_per_second",
    }


def test_show_of_a_hand_written_csv_reads_its_blank_lines_and_notes_a_short_last_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text(
        "wall_time,step,name,value\n1.0,1,c/frames,19999\n\n2.0,2,c/frames,20000\n"
        "3.0,3,c/frames\n"
    )

    assert main(["show", str(path)]) == 0

    captured = capsys.readouterr()
    assert table_rows(captured.out) == {"c/frames": ["20,000", "19,999", "20,000", "1"]}
    assert "2 records over 1.0 s" in captured.out
    assert captured.err == (
        f"rlpulse: note: {path}: left out line 5, cut short: 3 fields of 4: "
        "'3.0,3,c/frames'\n"
    )


def test_show_keeps_a_metric_named_with_a_newline_on_its_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.csv"
    with CSVLogger(path) as sink:
        sink.log_metrics({"c/two\nlines": 1.0, "c/size": 2.0}, step=0, timestamp=1.0)

    assert main(["show", str(path)]) == 0

    rows = [line.split() for line in capsys.readouterr().out.splitlines()[3:]]
    assert rows == [["c/size", "2", "2", "2"], ["'c/two\\nlines'", "1", "1", "1"]]


def test_show_reads_a_csv_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.csv"
    with CSVLogger(path) as sink:
        sink.log_metrics({"buffer/write_count": 0.0}, step=0, timestamp=10.0)
        sink.log_metrics({"buffer/write_count": 50.0}, step=50, timestamp=20.0)

    assert main(["show", str(path)]) == 0

    out = capsys.readouterr().out
    assert out.startswith(f"run metrics.csv in {path}: 2 records over 10.0 s")
    assert table_rows(out) == {"buffer/write_count": ["50", "0", "50", "5"]}


def test_show_reads_a_json_lines_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.jsonl"
    with JSONLLogger(path) as sink:
        sink.log_metrics({"learner/loss": 0.5}, timestamp=10.0)
        sink.log_metrics({"learner/loss": 0.125}, timestamp=11.0)

    assert main(["show", str(path)]) == 0

    assert table_rows(capsys.readouterr().out) == {
        "learner/loss": ["0.125", "0.125", "0.5"]
    }


def _show_in_utc(
    copy: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *arguments: str,
) -> str:
    """What ``rlpulse show`` prints of ``copy`` run in its directory in UTC, as its ``*.show.txt`` was made."""
    monkeypatch.chdir(copy.parent)
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        assert main(["show", copy.name, *arguments]) == 0
    finally:
        monkeypatch.undo()
        time.tzset()
    return capsys.readouterr().out


@pytest.mark.parametrize("name", ["v0.1.0.sqlite", "v0.1.0.csv", "v0.1.0.jsonl"])
def test_show_prints_for_a_file_of_rlpulse_0_1_0_what_0_1_0_printed(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
) -> None:
    copy = copy_of_fixture(name, tmp_path)

    shown = _show_in_utc(copy, monkeypatch, capsys)

    assert shown == (FIXTURES / f"{name}.show.txt").read_text()


# What show prints of a file of SQLite format version 1 or 2 beyond what
# that version printed, on purpose: since f23031e show takes each metric's
# kind from the file, where version 1's show guessed it from the name, so
# the tally's counters whose names say nothing get their mean rate (as
# version 2's show gave it); since e7a7492 a run's distributions get a
# table of their own after the metrics (version 2 stores them).
RATES_OF_STORED_COUNTERS = {"learner/loss_sum": "8.766", "learner/updates": "5"}


@pytest.mark.parametrize("name", OLD_SQLITE_FILES)
def test_show_prints_for_a_sqlite_file_of_format_version_1_or_2_the_figures_it_printed(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
) -> None:
    printed = (FIXTURES / f"{name}.show.txt").read_text()
    copy = copy_of_fixture(name, tmp_path)

    shown = _show_in_utc(copy, monkeypatch, capsys)

    header, table, *distributions, events = shown.split("\n\n")
    header_then, table_then, events_then = printed.split("\n\n")
    assert header == header_then
    assert events == events_then
    rows_then = table_rows(table_then)
    if name == "v1.sqlite":
        for metric, rate in RATES_OF_STORED_COUNTERS.items():
            rows_then[metric].append(rate)
    assert table_rows(table) == rows_then
    if name == "v1.sqlite":
        assert distributions == []
    else:
        title, _, loss = distributions[0].splitlines()
        assert title == "distributions over the whole run:"
        assert loss.split()[:2] == ["learner/loss", "200"]


@pytest.mark.parametrize("name", OLD_SQLITE_FILES)
def test_show_run_of_a_sqlite_file_of_format_version_1_or_2_shows_that_run(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
) -> None:
    copy = copy_of_fixture(name, tmp_path)

    shown = _show_in_utc(copy, monkeypatch, capsys, "--run", "baseline")

    assert shown.startswith(
        f"run baseline in {name}: 99 records over 11.0 s, from 2023-11-14 22:13:20\n"
    )
    rows = table_rows(shown)
    assert rows["collector/frames"] == ["5000", "0", "5000", "500"]
    assert rows["learner/loss_sum"][-1] == "17.53"


def test_show_of_a_run_without_records_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.db"
    SQLiteLogger(path, run="idle").close()

    assert main(["show", str(path)]) == 0

    assert capsys.readouterr().out == f"run idle in {path}: no records\n"


def test_show_ends_with_the_runs_bottleneck_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.db"
    write_pipeline_run(path, "slow-env", learner_busy=0.37)

    assert main(["show", str(path)]) == 0

    out = capsys.readouterr().out.splitlines()
    assert re.fullmatch(
        r"bottleneck, the last window: collector-bound: the learner waited 63% of "
        r"the last [0-9.]+ s for data; a faster learner gains nothing, a faster "
        r"collector up to 2\.7x before the learner limits",
        out[-2],
    )
    assert out[-1] == "bottleneck over the run: collector-bound 100% of 4 windows"


# show: errors


def test_show_of_a_missing_file_is_a_one_line_error(
    tmp_path: Path, error_line: Callable[[], str]
) -> None:
    path = tmp_path / "missing.db"

    assert main(["show", str(path)]) == 2

    line = error_line()
    assert line.startswith("rlpulse: error: ")
    assert str(path) in line
    assert "no such file" in line


def test_show_of_an_empty_file_is_a_one_line_error(
    tmp_path: Path, error_line: Callable[[], str]
) -> None:
    path = tmp_path / "metrics.db"
    path.write_bytes(b"")

    assert main(["show", str(path)]) == 2

    assert error_line().startswith("rlpulse: error: ")


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("metrics.db", b"SQLite format 3\x00" + b"\xff" * 200),
        ("metrics.csv", b"not,a,metrics,header\n1,2,3,4\n"),
        ("metrics.jsonl", b'{"wall_time": "late"}\n'),
        ("notes.txt", b"just some notes\n"),
    ],
)
def test_show_of_a_corrupt_file_is_a_one_line_error(
    tmp_path: Path, error_line: Callable[[], str], name: str, content: bytes
) -> None:
    path = tmp_path / name
    path.write_bytes(content)

    assert main(["show", str(path)]) == 2

    assert error_line().startswith("rlpulse: error: ")


def test_show_of_an_unknown_run_is_a_one_line_error_naming_the_runs(
    tmp_path: Path, error_line: Callable[[], str]
) -> None:
    path = tmp_path / "metrics.db"
    write_sqlite_run(path, "first", frames=400.0)

    assert main(["show", str(path), "--run", "other"]) == 2

    line = error_line()
    assert "'other'" in line
    assert "first" in line


def test_show_run_of_a_single_run_file_is_a_one_line_error(
    tmp_path: Path, error_line: Callable[[], str]
) -> None:
    path = tmp_path / "metrics.csv"
    with CSVLogger(path) as sink:
        sink.log_metrics({"a/x": 1.0})

    assert main(["show", str(path), "--run", "first"]) == 2

    assert "single run" in error_line()


def test_show_runs_of_a_file_that_is_not_sqlite_is_a_one_line_error(
    tmp_path: Path, error_line: Callable[[], str]
) -> None:
    path = tmp_path / "metrics.csv"
    with CSVLogger(path) as sink:
        sink.log_metrics({"a/x": 1.0})

    assert main(["show", str(path), "--runs"]) == 2

    assert "is a CSV file, which holds one run: rlpulse show" in error_line()


def test_show_of_a_directory_is_a_one_line_error(
    tmp_path: Path, error_line: Callable[[], str]
) -> None:
    assert main(["show", str(tmp_path)]) == 2

    assert "is a directory" in error_line()


def test_show_of_a_path_the_system_refuses_is_a_one_line_error(
    tmp_path: Path, error_line: Callable[[], str]
) -> None:
    too_long = tmp_path / ("x" * 300 + ".sqlite")

    assert main(["show", str(too_long)]) == 2

    line = error_line()
    assert line.startswith("rlpulse: error: ")
    assert str(too_long) in line


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_show_of_an_unreadable_file_is_a_one_line_error(
    tmp_path: Path, error_line: Callable[[], str]
) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("wall_time,step,name,value\n")
    path.chmod(0)

    assert main(["show", str(path)]) == 2

    assert str(path) in error_line()


# As a real command


@pytest.mark.timeout(60)
def test_show_error_as_a_real_command_has_no_traceback(tmp_path: Path) -> None:
    show = subprocess.run(
        [str(RLPULSE_SCRIPT), "show", str(tmp_path / "missing.sqlite")],
        capture_output=True,
        text=True,
        timeout=30,
    )

    assert show.returncode == 2
    assert show.stdout == ""
    assert show.stderr.startswith("rlpulse: error: ")
    assert len(show.stderr.splitlines()) == 1
