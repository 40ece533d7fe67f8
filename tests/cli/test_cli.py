"""The ``rlpulse`` command line, run for real: in-process through ``main`` and as a subprocess."""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import runpy
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rlpulse import Record, __version__, read
from rlpulse.cli import main
from rlpulse.formats import sqlite as sqlite_format
from rlpulse.sinks import CSVLogger, JSONLLogger, SQLiteLogger
from rlpulse.sinks.registry import SCHEMES
from tests.support import (
    FIXTURES,
    OLD_SQLITE_FILES,
    copy_of_fixture,
    locked_by_another_process,
)

RLPULSE_SCRIPT = Path(sys.executable).with_name("rlpulse")


def _write_sqlite_run(path: Path, run: str, frames: float) -> None:
    with SQLiteLogger(path, run=run) as sink:
        sink.log_metrics(
            {"collector/frames": 0.0, "buffer/utilization": 0.5},
            step=0,
            timestamp=100.0,
        )
        sink.log_metrics(
            {
                "collector/frames": frames,
                "collector/frames_per_second": frames / 4,
                "buffer/utilization": 0.75,
            },
            step=int(frames),
            timestamp=104.0,
        )


def _table_rows(output: str) -> dict[str, list[str]]:
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("metric ")) + 1
    end = next((i for i in range(start, len(lines)) if not lines[i]), len(lines))
    return {line.split()[0]: line.split()[1:] for line in lines[start:end]}


# Help and arguments


def test_help_explains_the_commands_with_an_example(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])

    out = capsys.readouterr().out
    assert exit_info.value.code == 0
    assert "demo" in out
    assert "show" in out
    assert "rlpulse show runs/demo.sqlite" in out


@pytest.mark.parametrize(
    ("command", "example"),
    [
        ("demo", "rlpulse demo --seconds 5 --out runs/demo.sqlite"),
        ("show", "rlpulse show runs/demo.sqlite --run "),
    ],
)
def test_each_command_help_explains_it_with_an_example(
    capsys: pytest.CaptureFixture[str], command: str, example: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])

    assert exit_info.value.code == 0
    assert example in capsys.readouterr().out


def test_version_prints_the_package_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])

    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"rlpulse {__version__}"


@pytest.mark.parametrize(
    ("argv", "usage"),
    [
        ([], "usage: rlpulse [-h]"),
        (["explode"], "usage: rlpulse [-h]"),
        (["demo", "--seconds", "0"], "usage: rlpulse demo "),
        (["demo", "--seconds", "-2"], "usage: rlpulse demo "),
        (["demo", "--seconds", "soon"], "usage: rlpulse demo "),
        (["demo", "--seconds", "inf"], "usage: rlpulse demo "),
        (["demo", "--sink"], "usage: rlpulse demo "),
        (["demo", "--env-cost", "-0.001"], "usage: rlpulse demo "),
        (["demo", "--learner-cost", "nan"], "usage: rlpulse demo "),
        (["demo", "--learner-cost", "slow"], "usage: rlpulse demo "),
        (["show"], "usage: rlpulse show "),
        (["show", "metrics.db", "--run", "a", "--runs"], "usage: rlpulse show "),
        (["plot"], "usage: rlpulse plot "),
        (["plot", "metrics.sqlite"], "usage: rlpulse plot "),
        (
            ["plot", "metrics.sqlite", "-o", "c.png", "--smooth", "1"],
            "usage: rlpulse plot ",
        ),
    ],
)
def test_bad_arguments_exit_with_usage_error_2_showing_the_commands_usage(
    capsys: pytest.CaptureFixture[str], argv: list[str], usage: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)

    assert exit_info.value.code == 2
    assert usage in capsys.readouterr().err


def test_python_dash_m_rlpulse_runs_the_command_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["rlpulse", "--version"])

    with pytest.raises(SystemExit) as exit_info:
        runpy.run_module("rlpulse", run_name="__main__")

    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"rlpulse {__version__}"


def test_importing_rlpulse_main_module_does_not_run_the_command_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    sys.modules.pop("rlpulse.__main__", None)

    module = importlib.import_module("rlpulse.__main__")

    assert module.main is main
    assert capsys.readouterr() == ("", "")


# show


def test_show_prints_a_table_of_the_latest_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.db"
    _write_sqlite_run(path, "first", frames=400.0)
    _write_sqlite_run(path, "second", frames=40_000.0)

    assert main(["show", str(path)]) == 0

    out = capsys.readouterr().out
    assert out.startswith(f"run second in {path}: 5 records over 4.0 s, from ")
    assert _table_rows(out) == {
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


def test_show_run_picks_the_named_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.db"
    _write_sqlite_run(path, "first", frames=400.0)
    _write_sqlite_run(path, "second", frames=40_000.0)

    assert main(["show", str(path), "--run", "first"]) == 0

    out = capsys.readouterr().out
    assert out.startswith(f"run first in {path}:")
    assert _table_rows(out)["collector/frames"] == ["400", "0", "400", "100"]


def test_show_runs_lists_the_runs_oldest_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.db"
    _write_sqlite_run(path, "first", frames=400.0)
    _write_sqlite_run(path, "second", frames=400.0)

    assert main(["show", str(path), "--runs"]) == 0

    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["run", "start", "length", "records"]
    assert [line.split()[0] for line in lines[1:]] == ["first", "second"]


def test_show_runs_gives_each_runs_start_length_and_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.db"
    _write_sqlite_run(path, "first", frames=400.0)
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
    _write_sqlite_run(path, "first", frames=400.0)

    assert main(["show", str(path), "--match", "collector/*"]) == 0

    assert set(_table_rows(capsys.readouterr().out)) == {
        "collector/frames",
        "collector/frames_per_second",
    }


@pytest.mark.parametrize("command", ["show", "top", "compare", "plot"])
def test_match_of_nothing_is_the_same_one_line_error_in_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    path = tmp_path / "metrics.db"
    _write_sqlite_run(path, "first", frames=400.0)
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


def test_a_misspelled_option_is_refused_with_the_command_s_usage_and_the_option_meant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["show", str(tmp_path / "run.sqlite"), "--mach", "collector"])

    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: rlpulse show ")
    assert "unrecognized arguments: --mach (did you mean --match?) collector" in err


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
    _write_sqlite_run(path, "first", frames=400.0)

    assert main(["show", str(path), "--match", pattern]) == 2

    (line,) = capsys.readouterr().err.splitlines()
    assert f"no metric matching '{pattern}'; did you mean {meant}? Its metrics" in line


@pytest.mark.parametrize("command", ["show", "top", "compare"])
def test_exact_writes_every_value_in_full(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    path = tmp_path / "metrics.csv"
    with CSVLogger(path) as sink:
        sink.log_metrics({"c/size": 2.0**62, "c/share": 0.1}, step=0, timestamp=1.0)
    arguments = {"show": [], "top": ["--once"], "compare": [str(path)]}[command]

    assert main([command, str(path), *arguments]) == 0
    short = capsys.readouterr().out
    assert main([command, str(path), *arguments, "--exact"]) == 0
    exact = capsys.readouterr().out

    assert "4.611e+18" in short
    assert "4611686018427387904" in exact
    assert "4.611e+18" not in exact


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
    assert _table_rows(captured.out) == {
        "c/frames": ["20,000", "19,999", "20,000", "1"]
    }
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
    assert _table_rows(out) == {"buffer/write_count": ["50", "0", "50", "5"]}


def test_show_reads_a_json_lines_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.jsonl"
    with JSONLLogger(path) as sink:
        sink.log_metrics({"learner/loss": 0.5}, timestamp=10.0)
        sink.log_metrics({"learner/loss": 0.125}, timestamp=11.0)

    assert main(["show", str(path)]) == 0

    assert _table_rows(capsys.readouterr().out) == {
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
    rows_then = _table_rows(table_then)
    if name == "v1.sqlite":
        for metric, rate in RATES_OF_STORED_COUNTERS.items():
            rows_then[metric].append(rate)
    assert _table_rows(table) == rows_then
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
    rows = _table_rows(shown)
    assert rows["collector/frames"] == ["5000", "0", "5000", "500"]
    assert rows["learner/loss_sum"][-1] == "17.53"


@pytest.mark.parametrize("name", OLD_SQLITE_FILES)
def test_top_once_of_a_sqlite_file_of_format_version_1_or_2_names_its_watches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    copy = copy_of_fixture(name, tmp_path)

    assert main(["top", str(copy), "--once"]) == 0

    out = capsys.readouterr().out
    assert out.startswith(f"run tuned in {copy}: 99 records over 11.0 s")
    watches = {metric.split("/")[0] for metric in _table_rows(out)}
    assert watches == {"buffer", "collector", "learner"}
    assert "stalled collector: no progress (frames) for 30.0s" in out


def test_show_of_a_run_without_records_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.db"
    SQLiteLogger(path, run="idle").close()

    assert main(["show", str(path)]) == 0

    assert capsys.readouterr().out == f"run idle in {path}: no records\n"


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


@pytest.mark.parametrize("command", ["show", "compare", "plot"])
def test_a_store_another_process_holds_locked_is_a_one_line_error_saying_so(
    tmp_path: Path,
    error_line: Callable[[], str],
    monkeypatch: pytest.MonkeyPatch,
    command: str,
) -> None:
    path = tmp_path / "metrics.db"
    _write_sqlite_run(path, "first", frames=400.0)
    arguments = {
        "show": [str(path)],
        "compare": [str(path), str(path)],
        "plot": [str(path), "-o", str(tmp_path / "chart.png")],
    }[command]
    if command == "plot":
        pytest.importorskip("matplotlib")
    monkeypatch.setattr(sqlite_format, "LOCK_NOTICE_S", 0.1)
    monkeypatch.setattr(sqlite_format, "LOCK_WAIT_S", 0.5)

    with locked_by_another_process(path):
        assert main([command, *arguments]) == 2

    # Standard error is no terminal here: no note while waiting.
    assert error_line() == (
        f"rlpulse: error: {path} is locked by another process's write; rlpulse"
        " waited 0.5 s for it to be let go. Try again once that write ends, or"
        f" close the program holding the file (fuser -v {path} or lsof {path}"
        " names it)"
    )


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_ctrl_c_while_waiting_for_a_locked_store_ends_quietly_with_130(
    tmp_path: Path, wait_until: Callable[..., bool]
) -> None:
    path = tmp_path / "metrics.db"
    _write_sqlite_run(path, "first", frames=400.0)
    with locked_by_another_process(path):
        show = subprocess.Popen(
            [sys.executable, "-m", "rlpulse", "show", str(path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_restore_default_sigint,
        )
        try:
            assert wait_until(lambda: _holds_open(show.pid, path), 30)
            time.sleep(0.5)  # waiting for the lock
            interrupted = time.monotonic()
            show.send_signal(signal.SIGINT)
            _, errors = show.communicate(timeout=30)
            ended = time.monotonic()
        finally:
            show.kill()
            show.wait()

    assert errors == ""
    assert show.returncode == 130
    assert ended - interrupted < 2  # not the 10 s it would wait


def test_show_of_an_unknown_run_is_a_one_line_error_naming_the_runs(
    tmp_path: Path, error_line: Callable[[], str]
) -> None:
    path = tmp_path / "metrics.db"
    _write_sqlite_run(path, "first", frames=400.0)

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

    assert "no runs" in error_line()


def test_show_of_a_directory_is_a_one_line_error(
    tmp_path: Path, error_line: Callable[[], str]
) -> None:
    assert main(["show", str(tmp_path)]) == 2

    assert "is a directory" in error_line()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
@pytest.mark.parametrize(
    ("command", "runs"), [(["show"], 1), (["top", "--once"], 1), (["compare"], 2)]
)
def test_a_pipe_given_as_the_run_is_a_one_line_error_saying_to_save_it_first(
    tmp_path: Path, command: list[str], runs: int
) -> None:
    # As `rlpulse show <(ssh host cat run.csv)` gives it: a pipe with its
    # writer still there, whose data the first look at it takes.
    pipe = tmp_path / "run.csv"
    os.mkfifo(pipe)
    writer = os.open(pipe, os.O_RDWR)
    try:
        os.write(writer, b"wall_time,step,name,value\n1.5,3,collector/frames,96\n")
        given = subprocess.run(
            [sys.executable, "-m", "rlpulse", *command, *[str(pipe)] * runs],
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        os.close(writer)

    assert given.returncode == 2
    assert given.stderr.startswith(f"rlpulse: error: {pipe} is a pipe, not a file")
    assert "save what the pipe carries to a file first" in given.stderr
    assert len(given.stderr.splitlines()) == 1


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


# demo


@pytest.mark.timeout(60)
def test_demo_records_a_run_and_prints_its_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "demo.sqlite"

    assert main(["demo", "--synthetic", "--seconds", "1", "--out", str(path)]) == 0

    captured = capsys.readouterr()
    rows = _table_rows(captured.out)
    assert {"collector/frames", "buffer/size", "learner/updates"} <= rows.keys()
    assert captured.out.splitlines()[-1] == f"See it again with: rlpulse show {path}"
    assert " collector  frames=" in captured.err
    assert any(record.name == "collector/frames" for record in read(path))


@pytest.mark.timeout(60)
def test_demo_writes_to_runs_demo_sqlite_by_default(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)

    assert main(["demo", "--synthetic", "--seconds", "0.2"]) == 0

    assert (tmp_path / "runs" / "demo.sqlite").is_file()
    assert (tmp_path / "runs" / "demo.png").is_file()
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "See it again with: rlpulse show runs/demo.sqlite"


def test_demo_into_an_unwritable_path_is_a_one_line_error(
    tmp_path: Path, error_line: Callable[[], str]
) -> None:
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")

    assert main(["demo", "--out", str(not_a_directory / "demo.sqlite")]) == 2

    line = error_line()
    assert line.startswith("rlpulse: error: ")
    assert str(not_a_directory) in line


@pytest.mark.parametrize("name", ["demo.csv", "demo.JSONL"])
def test_demo_out_with_a_line_files_extension_is_refused_naming_the_sink_to_use(
    tmp_path: Path, error_line: Callable[[], str], name: str
) -> None:
    out = tmp_path / name

    assert main(["demo", "--synthetic", "--out", str(out)]) == 2

    line = error_line()
    scheme = name.rpartition(".")[2].lower()
    assert "records its run in a SQLite file" in line
    assert f"--sink {scheme}:{out}" in line
    assert list(tmp_path.iterdir()) == []


def test_demo_into_a_file_that_is_not_sqlite_is_a_one_line_error(
    tmp_path: Path, error_line: Callable[[], str]
) -> None:
    path = tmp_path / "notes.sqlite"
    path.write_text("these are my notes, not a database\n" * 10)

    assert main(["demo", "--synthetic", "--out", str(path)]) == 2

    assert error_line().startswith("rlpulse: error: ")
    assert path.read_text().startswith("these are my notes")


def test_demo_into_a_directory_is_a_one_line_error(
    tmp_path: Path, error_line: Callable[[], str]
) -> None:
    assert main(["demo", "--synthetic", "--out", str(tmp_path)]) == 2

    line = error_line()
    assert line.startswith("rlpulse: error: ")
    assert str(tmp_path) in line


def test_demo_into_a_dangling_symlink_is_a_one_line_error(
    tmp_path: Path, error_line: Callable[[], str]
) -> None:
    link = tmp_path / "demo.sqlite"
    link.symlink_to(tmp_path / "gone" / "demo.sqlite")

    assert main(["demo", "--synthetic", "--out", str(link)]) == 2

    line = error_line()
    assert line.startswith("rlpulse: error: ")
    assert str(link) in line


def test_demo_runs_the_torchrl_pipeline_when_torchrl_is_installed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torchrl")
    path = tmp_path / "demo.sqlite"

    assert main(["demo", "--seconds", "2", "--out", str(path)]) == 0

    out = capsys.readouterr().out
    assert out.startswith("rlpulse demo: TorchRL Collector on CartPole-v1")
    rows = _table_rows(out)
    assert {"collector/frames", "replay_buffer/write_count", "episodes/episodes"} <= (
        rows.keys()
    )
    assert (tmp_path / "demo.png").is_file()
    assert out.splitlines()[-1] == f"See it again with: rlpulse show {path}"


def test_demo_without_torchrl_says_so_in_one_line_and_runs_the_synthetic_pipeline(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delitem(sys.modules, "rlpulse._demo.torchrl_pipeline", raising=False)
    for name in [name for name in sys.modules if name.partition(".")[0] == "torchrl"]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "torchrl", None)
    path = tmp_path / "demo.sqlite"

    assert main(["demo", "--seconds", "0.3", "--out", str(path)]) == 0

    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        "rlpulse demo: TorchRL is not installed (torchrl is missing; pip install "
        "'rlpulse[torchrl]'), so this is the synthetic pipeline"
    )
    assert lines[1].startswith("rlpulse demo: collector -> ring buffer -> learner")
    assert any(record.name == "learner/updates" for record in read(path))


def test_demo_does_not_hide_a_missing_module_other_than_torchrls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(sys.modules, "rlpulse._demo.torchrl_pipeline", raising=False)
    monkeypatch.setitem(sys.modules, "rlpulse.sources.torchrl", None)

    with pytest.raises(ModuleNotFoundError, match=r"rlpulse\.sources\.torchrl"):
        main(["demo", "--seconds", "0.3", "--out", str(tmp_path / "demo.sqlite")])


@pytest.mark.parametrize("pipeline", [[], ["--synthetic"]])
def test_demo_with_an_unknown_sink_scheme_is_a_one_line_error_listing_the_known_ones(
    tmp_path: Path, error_line: Callable[[], str], pipeline: list[str]
) -> None:
    path = tmp_path / "demo.sqlite"

    assert main(["demo", *pipeline, "--out", str(path), "--sink", "kafka:topic"]) == 2

    line = error_line()
    assert line.startswith("rlpulse: error: unknown sink scheme 'kafka'")
    assert ", ".join(sorted(SCHEMES)) in line
    assert list(tmp_path.iterdir()) == []


def test_demo_with_a_sink_spec_without_a_scheme_is_a_one_line_error(
    tmp_path: Path, error_line: Callable[[], str]
) -> None:
    argv = ["demo", "--synthetic", "--out", str(tmp_path / "d.sqlite")]

    assert main([*argv, "--sink", "runs/metrics.csv"]) == 2

    assert "has no scheme" in error_line()


def test_demo_with_a_sink_whose_backend_is_missing_is_a_one_line_error(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    error_line: Callable[[], str],
) -> None:
    monkeypatch.delitem(sys.modules, "rlpulse.sinks.tensorboard", raising=False)
    # Submodules an earlier test imported would still be found without
    # their package.
    for module in ("tensorboardX", "tensorboardX.proto", "tensorboardX.record_writer"):
        monkeypatch.setitem(sys.modules, module, None)
    argv = ["demo", "--synthetic", "--out", str(tmp_path / "d.sqlite")]

    assert main([*argv, "--sink", f"tensorboard:{tmp_path / 'tb'}"]) == 2

    assert "pip install 'rlpulse[tensorboard]'" in error_line()
    assert not (tmp_path / "d.sqlite").exists()


@pytest.mark.timeout(60)
def test_demo_sink_repeats_for_several_extra_sinks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv_path = tmp_path / "demo.csv"
    jsonl_path = tmp_path / "demo.jsonl"
    argv = ["demo", "--synthetic", "--seconds", "0.5", "--out", str(tmp_path / "d.db")]

    assert (
        main([*argv, "--sink", f"csv:{csv_path}", "--sink", f"jsonl:{jsonl_path}"]) == 0
    )

    stored = sorted(read(tmp_path / "d.db"))
    assert sorted(read(csv_path)) == stored
    assert sorted(read(jsonl_path)) == stored
    assert f"csv:{csv_path}, jsonl:{jsonl_path}" in capsys.readouterr().out


def test_demo_help_explains_both_pipelines_and_the_sink_specs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["demo", "--help"])

    out = capsys.readouterr().out
    assert "CartPole-v1" in out
    assert "--synthetic" in out
    assert "--sink SPEC" in out
    assert ", ".join(sorted(SCHEMES)) in out
    assert "rlpulse demo --sink csv:runs/demo.csv" in out


# Real subprocesses


def _names(records: list[Record], name: str) -> list[float]:
    return [record.value for record in records if record.name == name]


def _demo_command(path: Path, *options: str) -> list[str]:
    return [sys.executable, "-m", "rlpulse", "demo", *options, "--out", str(path)]


@pytest.mark.timeout(90)
def test_demo_and_show_as_real_commands(tmp_path: Path) -> None:
    path = tmp_path / "runs" / "demo.sqlite"

    demo = subprocess.run(
        _demo_command(path, "--synthetic", "--seconds", "2"),
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert demo.returncode == 0, demo.stderr
    records = list(read(path))
    frames = _names(records, "collector/frames")
    assert len(frames) >= 2
    assert frames == sorted(frames)
    assert frames[-1] > frames[0]
    assert _names(records, "collector/frames_per_second")
    assert all(rate > 0 for rate in _names(records, "collector/frames_per_second"))
    (capacity,) = set(_names(records, "buffer/capacity"))
    assert all(size <= capacity for size in _names(records, "buffer/size"))
    # Final snapshots: taken after the pipeline stopped, so both watches agree.
    assert _names(records, "buffer/write_count")[-1] == frames[-1]
    assert f"See it again with: rlpulse show {path}" in demo.stdout

    show = subprocess.run(
        [str(RLPULSE_SCRIPT), "show", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert show.returncode == 0, show.stderr
    assert show.stdout.startswith("run ")
    assert f"{len(records)} records over " in show.stdout.splitlines()[0]
    rows = _table_rows(show.stdout)
    assert (
        rows["collector/frames"][0] == _table_rows(demo.stdout)["collector/frames"][0]
    )
    assert len(rows["collector/frames"]) == 4  # last, min, max and the mean rate


@pytest.mark.timeout(120)
def test_the_demos_chart_notes_read_as_rlpulse_plots_do(tmp_path: Path) -> None:
    pytest.importorskip("torchrl")
    pytest.importorskip("matplotlib")
    path = tmp_path / "demo.sqlite"

    demo = subprocess.run(
        _demo_command(path, "--seconds", "4"),
        capture_output=True,
        text=True,
        timeout=110,
    )

    assert demo.returncode == 0, demo.stderr
    notes = [line for line in demo.stderr.splitlines() if "left out" in line]
    # What the chart leaves out (the lines of a Tally's many statistics past
    # a panel's bounds), if anything, is said as rlpulse plot says it.
    assert all(note.startswith("rlpulse: note: left out ") for note in notes)
    assert "PlotWarning" not in demo.stderr


@pytest.mark.timeout(60)
def test_demo_says_where_a_prometheus_sink_on_a_free_port_serves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("prometheus_client")
    argv = ["demo", "--synthetic", "--seconds", "0.3", "--out", str(tmp_path / "d.db")]

    assert main([*argv, "--sink", "prometheus:"]) == 0

    opening = capsys.readouterr().out.splitlines()[0]
    assert re.search(
        r"prometheus: \(serving http://127\.0\.0\.1:\d+/metrics\)", opening
    )


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


def _restore_default_sigint() -> None:
    # A shell that ran the tests in the background may have left SIGINT
    # ignored; Python then installs no KeyboardInterrupt handler in the child.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt_demo(
    command: list[str],
    path: Path,
    first_line: str,
    wait_until: Callable[..., bool],
    timeout: float,
) -> tuple[int, str]:
    """Run the demo ``command``, Ctrl-C it once ``path`` holds a collector record; return its exit code and output."""
    demo = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        preexec_fn=_restore_default_sigint,
    )
    try:
        assert demo.stdout is not None
        assert demo.stdout.readline().startswith(first_line)
        assert wait_until(
            lambda: any(r.name == "collector/frames" for r in read(path)), timeout
        )
        demo.send_signal(signal.SIGINT)
        out, _ = demo.communicate(timeout=timeout)
    finally:
        demo.kill()
        demo.wait()
    return demo.returncode, out


@pytest.mark.timeout(90)
def test_ctrl_c_ends_the_demo_early_with_final_snapshots_and_summary(
    tmp_path: Path, wait_until: Callable[..., bool]
) -> None:
    path = tmp_path / "demo.sqlite"
    command = _demo_command(path, "--synthetic", "--seconds", "60")

    returncode, out = _interrupt_demo(
        command, path, "rlpulse demo: ", wait_until, timeout=30
    )

    assert returncode == 0
    assert "Stopped early after " in out
    assert "collector/frames " in out
    assert out.splitlines()[-1] == f"See it again with: rlpulse show {path}"
    records = list(read(path))
    # Neither 10,000 frames nor 5 s passed: only the forced final snapshot,
    # logged with rates, carries the collector's frame rate.
    assert _names(records, "collector/frames_per_second")
    assert (
        _names(records, "buffer/write_count")[-1]
        == _names(records, "collector/frames")[-1]
    )


@pytest.mark.timeout(180)
def test_ctrl_c_ends_the_torchrl_demo_early_with_final_snapshots_and_summary(
    tmp_path: Path, wait_until: Callable[..., bool]
) -> None:
    pytest.importorskip("torchrl")
    path = tmp_path / "demo.sqlite"
    command = _demo_command(path, "--seconds", "120")

    returncode, out = _interrupt_demo(
        command, path, "rlpulse demo: TorchRL ", wait_until, timeout=60
    )

    assert returncode == 0
    assert "Stopped early after " in out
    assert "replay_buffer/write_count " in out
    assert out.splitlines()[-1] == f"See it again with: rlpulse show {path}"
    records = list(read(path))
    assert (
        _names(records, "replay_buffer/write_count")[-1]
        == _names(records, "collector/frames")[-1]
    )


def _without_credentials(home: Path) -> dict[str, str]:
    """The environment of a new user: no W&B key or mode, no MLflow settings, an empty home."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("WANDB_", "MLFLOW_"))
    }
    home.mkdir()
    env["HOME"] = str(home)
    return env


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("spec", "advice"),
    [
        ("wandb:myproj", "wandb login"),
        ("mlflow:runs/mlruns", "mlflow:sqlite:///runs/mlflow.db"),
    ],
)
def test_demo_with_a_sink_its_backend_refuses_is_a_one_line_error(
    tmp_path: Path, spec: str, advice: str
) -> None:
    pytest.importorskip(spec.partition(":")[0])
    demo = subprocess.run(
        _demo_command(tmp_path / "d.sqlite", "--synthetic", "--sink", spec),
        capture_output=True,
        text=True,
        timeout=150,
        cwd=tmp_path,
        env=_without_credentials(tmp_path / "home"),
    )

    assert demo.returncode == 2, demo.stderr
    assert demo.stderr.startswith(f"rlpulse: error: cannot open sink {spec!r}: ")
    assert len(demo.stderr.splitlines()) == 1
    assert advice in demo.stderr
    assert not (tmp_path / "d.sqlite").exists()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("options", [(), ("--runs",)])
def test_show_into_a_closed_pipe_stops_quietly(
    tmp_path: Path, options: tuple[str, ...]
) -> None:
    path = tmp_path / "run.sqlite"
    _write_sqlite_run(path, "baseline", 400.0)
    reader, writer = os.pipe()
    os.close(reader)  # like `| head` once it has read what it wanted
    try:
        show = subprocess.run(
            [sys.executable, "-m", "rlpulse", "show", str(path), *options],
            stdout=writer,
            stderr=subprocess.PIPE,
            text=True,
            timeout=30,
        )
    finally:
        os.close(writer)

    assert show.stderr == ""
    assert show.returncode == 141


def test_show_into_a_closed_pipe_in_process_returns_141_and_silences_stdout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.sqlite"
    _write_sqlite_run(path, "baseline", 400.0)
    reader, writer = os.pipe()
    os.close(reader)
    with open(writer, "w") as closed_pipe:
        monkeypatch.setattr(sys, "stdout", closed_pipe)

        assert main(["show", str(path)]) == 141
        # Standard output now goes to the null device: writing works.
        print("after", file=closed_pipe, flush=True)


def _write_long_csv_run(path: Path, records: int) -> None:
    with path.open("w") as file:
        file.write("wall_time,step,name,value,kind\n")
        file.writelines(
            f"{100 + index / 100},{index},learner/loss,{index},gauge\n"
            for index in range(records)
        )


def _holds_open(pid: int, path: Path) -> bool:
    with contextlib.suppress(OSError):
        for descriptor in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                if Path(os.readlink(descriptor)) == path:
                    return True
    return False


@pytest.mark.timeout(60)
@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
@pytest.mark.parametrize("command", ["show", "plot"])
def test_ctrl_c_while_reading_a_long_run_ends_quietly_with_130(
    tmp_path: Path, wait_until: Callable[..., bool], command: str
) -> None:
    path = tmp_path / "long.csv"
    _write_long_csv_run(path, 1_000_000)
    options = ["-o", str(tmp_path / "long.png")] if command == "plot" else []
    reading = subprocess.Popen(
        [sys.executable, "-m", "rlpulse", command, str(path), *options],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_restore_default_sigint,
    )
    try:
        assert wait_until(lambda: _holds_open(reading.pid, path), 30)
        reading.send_signal(signal.SIGINT)
        _, errors = reading.communicate(timeout=30)
    finally:
        reading.kill()
        reading.wait()

    assert errors == ""
    assert reading.returncode == 130


@pytest.mark.timeout(90)
def test_sigterm_ends_the_demo_by_the_signal_with_its_final_snapshots(
    tmp_path: Path, wait_until: Callable[..., bool]
) -> None:
    path = tmp_path / "demo.sqlite"
    demo = subprocess.Popen(
        _demo_command(path, "--synthetic", "--seconds", "60"),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert demo.stdout is not None
        assert demo.stdout.readline().startswith("rlpulse demo: ")
        assert wait_until(
            lambda: any(r.name == "collector/frames" for r in read(path)), 30
        )
        demo.send_signal(signal.SIGTERM)
        demo.communicate(timeout=30)
    finally:
        demo.kill()
        demo.wait()

    assert demo.returncode == -signal.SIGTERM
    # Neither 10,000 frames nor 5 s passed: only the forced final snapshot,
    # logged with rates, carries the collector's frame rate.
    assert _names(list(read(path)), "collector/frames_per_second")


def test_the_demo_in_process_puts_back_the_sigterm_handler_it_found(
    tmp_path: Path,
) -> None:
    before = signal.getsignal(signal.SIGTERM)
    argv = ["demo", "--synthetic", "--seconds", "0.2", "--out", str(tmp_path / "d.db")]

    assert main(argv) == 0

    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.timeout(60)
def test_the_demo_runs_from_a_thread_that_cannot_handle_signals(tmp_path: Path) -> None:
    codes: list[int] = []
    argv = ["demo", "--synthetic", "--seconds", "0.2", "--out", str(tmp_path / "d.db")]
    thread = threading.Thread(target=lambda: codes.append(main(argv)))
    thread.start()
    thread.join(timeout=50)

    assert codes == [0]
    assert any(r.name == "collector/frames" for r in read(tmp_path / "d.db"))


def _write_pipeline_run(path: Path, run: str, learner_busy: float) -> None:
    """A run of a monitor with a bottleneck watch: four windows of a learner busy ``learner_busy`` of the time."""
    from rlpulse import LoggerMonitor, Tally

    learner = Tally()
    sink = SQLiteLogger(path, run=run)
    monitor = LoggerMonitor(sink, background=False)
    monitor.watch(Tally(), name="collector")
    monitor.watch(learner, name="learner")
    monitor.bottleneck(window=0.01)
    monitor.step()
    for _ in range(4):
        learner.inc("busy_s", learner_busy)
        learner.inc("wait_s", 1.0 - learner_busy)
        time.sleep(0.02)
        monitor.step()
    sink.close()


def test_show_ends_with_the_runs_bottleneck_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.db"
    _write_pipeline_run(path, "slow-env", learner_busy=0.37)

    assert main(["show", str(path)]) == 0

    out = capsys.readouterr().out.splitlines()
    assert re.fullmatch(
        r"bottleneck, the last window: collector-bound: the learner waited 63% of "
        r"the last [0-9.]+ s for data; a faster learner gains nothing, a faster "
        r"collector up to 2\.7x before the learner limits",
        out[-2],
    )
    assert out[-1] == "bottleneck over the run: collector-bound 100% of 4 windows"


def test_compare_has_a_verdict_row_per_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.db"
    _write_pipeline_run(path, "slow-env", learner_busy=0.37)
    _write_pipeline_run(path, "slow-learner", learner_busy=0.9)

    assert main(["compare", f"{path}:slow-env", f"{path}:slow-learner"]) == 0

    out = capsys.readouterr().out.splitlines()
    assert out[-3:] == [
        "run  bottleneck over the run",
        "A    collector-bound 100% of 4 windows",
        "B    learner-bound 100% of 4 windows",
    ]
