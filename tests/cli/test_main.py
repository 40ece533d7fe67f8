"""The ``rlpulse`` entry point (``rlpulse.cli.main``): help and arguments, the errors every command shares, Ctrl-C and a closed pipe."""

from __future__ import annotations

import contextlib
import importlib
import os
import runpy
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rlpulse import __version__
from rlpulse.cli import main
from rlpulse.formats import sqlite as sqlite_format
from tests.support import (
    locked_by_another_process,
    restore_default_sigint,
    write_sqlite_run,
)

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
        (["demo", "--updates", "0"], "usage: rlpulse demo "),
        (["demo", "--updates", "2.5"], "usage: rlpulse demo "),
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


# What every command refuses the same way


@pytest.mark.parametrize(
    ("command", "given", "meant"),
    [
        ("show", ["--mach", "collector"], "--match"),
        # Cut short, not taken: it would change meaning once another option
        # starts the same.
        ("top", ["--inter", "1"], "--interval"),
    ],
)
def test_a_misspelled_option_is_refused_with_the_command_s_usage_and_the_option_meant(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    given: list[str],
    meant: str,
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([command, str(tmp_path / "run.sqlite"), *given])

    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: rlpulse {command} ")
    option, value = given
    assert f"unrecognized arguments: {option} (did you mean {meant}?) {value}" in err


def test_the_version_option_cut_short_prints_no_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--vers"])

    assert exited.value.code == 2
    assert "rlpulse " not in capsys.readouterr().out


@pytest.mark.parametrize("command", ["show", "compare two", "plot", "plot two"])
def test_a_pattern_that_matches_nothing_beside_one_that_does_is_a_one_line_error(
    tmp_path: Path, error_line: Callable[[], str], command: str
) -> None:
    path = tmp_path / "metrics.db"
    write_sqlite_run(path, "first", frames=400.0)
    write_sqlite_run(path, "second", frames=800.0)
    verb, _, runs = command.partition(" ")
    arguments = [f"{path}:first"] + ([f"{path}:second"] if runs else [])
    if verb == "plot":
        pytest.importorskip("matplotlib")
        arguments += ["-o", str(tmp_path / "chart.png")]
    match = ["--match", "collector/frames", "--match", "epsiode"]

    assert main([verb, *arguments, *match]) == 2

    line = error_line()
    assert "has a metric matching 'epsiode';" in line or (
        "has no metric matching 'epsiode';" in line
    )
    assert "collector/frames'" not in line
    assert not (tmp_path / "chart.png").exists()


@pytest.mark.parametrize("command", ["show", "compare", "plot"])
def test_a_store_another_process_holds_locked_is_a_one_line_error_saying_so(
    tmp_path: Path,
    error_line: Callable[[], str],
    monkeypatch: pytest.MonkeyPatch,
    command: str,
) -> None:
    path = tmp_path / "metrics.db"
    write_sqlite_run(path, "first", frames=400.0)
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


# Ctrl-C and a closed pipe, in real processes


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_ctrl_c_while_waiting_for_a_locked_store_ends_quietly_with_130(
    tmp_path: Path, wait_until: Callable[..., bool]
) -> None:
    path = tmp_path / "metrics.db"
    write_sqlite_run(path, "first", frames=400.0)
    with locked_by_another_process(path):
        show = subprocess.Popen(
            [sys.executable, "-m", "rlpulse", "show", str(path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=restore_default_sigint,
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
        preexec_fn=restore_default_sigint,
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


@pytest.mark.timeout(60)
@pytest.mark.parametrize("options", [(), ("--runs",)])
def test_show_into_a_closed_pipe_stops_quietly(
    tmp_path: Path, options: tuple[str, ...]
) -> None:
    path = tmp_path / "run.sqlite"
    write_sqlite_run(path, "baseline", 400.0)
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
    write_sqlite_run(path, "baseline", 400.0)
    reader, writer = os.pipe()
    os.close(reader)
    with open(writer, "w") as closed_pipe:
        monkeypatch.setattr(sys, "stdout", closed_pipe)

        assert main(["show", str(path)]) == 141
        # Standard output now goes to the null device: writing works.
        print("after", file=closed_pipe, flush=True)
