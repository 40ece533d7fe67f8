"""``rlpulse top`` (SPEC 7): a run followed while another process writes it, in a real terminal (tmux).

A live view runs ``python -m rlpulse top`` inside a tmux session, the test
logging into the store meanwhile and reading the terminal with
``capture-pane``; a pipe or ``--once`` gets one plain frame.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rlpulse import Event, SQLiteLogger
from rlpulse.naming import Kind, Payload

pytestmark = pytest.mark.timeout(60)

KINDS = {"monitor/polls": Kind.COUNTER}


def rlpulse(*arguments: str) -> subprocess.CompletedProcess[str]:
    # Into a pipe, as a script reads it: no terminal width (pytest may have
    # set COLUMNS in its own environment).
    piped = {name: value for name, value in os.environ.items() if name != "COLUMNS"}
    return subprocess.run(
        [sys.executable, "-m", "rlpulse", *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        env=piped,
    )


def wait_for(condition: Callable[[], bool], timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def test_top_into_a_pipe_prints_one_frame_of_metrics_and_latest_events(
    tmp_path: Path,
) -> None:
    store = tmp_path / "run.sqlite"
    with SQLiteLogger(store, run="live") as sink:
        sink.log_metrics({"c/frames": 10.0, "b/size": 3.0}, step=1, timestamp=100.0)
        sink.log_metrics({"c/frames": 30.0, "b/size": 4.0}, step=2, timestamp=102.0)
        sink.log_event(
            Event(101.0, "c", "stalled", "no progress (frames) for 30.0s", 30.0)
        )
    for arguments in ([str(store)], [str(store), "--once", "--match", "c/*"]):
        result = rlpulse("top", *arguments)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"run live in {store}: ")
        assert "c/frames" in result.stdout
        assert "!! stalled c: no progress (frames) for 30.0s" in result.stdout
        assert "\x1b[" not in result.stdout  # plain: no terminal codes
    assert "b/size" not in rlpulse("top", str(store), "--once", "--match", "c/*").stdout


def test_top_gives_the_mean_rate_of_a_counter_its_kind_says(tmp_path: Path) -> None:
    store = tmp_path / "run.sqlite"
    with SQLiteLogger(store, run="live") as sink:
        sink.log_payloads(
            Payload({"monitor/polls": 5.0 * second}, None, 100.0 + second, KINDS)
            for second in range(3)
        )

    result = rlpulse("top", str(store), "--once")

    assert result.stdout.splitlines()[-1].split() == [
        "monitor/polls",
        "10",
        "0",
        "10",
        "5",
    ]


def test_top_of_several_runs_into_a_pipe_prints_a_frame_of_each(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite"
    for name, frames in (("first", 10.0), ("second", 20.0)):
        with SQLiteLogger(store, run=name) as sink:
            sink.log_metrics({"c/frames": frames}, step=1, timestamp=100.0)

    result = rlpulse("top", f"{store}:first", f"{store}:second")

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"run first in {store}: ")
    assert f"\n\nrun second in {store}: " in result.stdout


def test_top_help_says_what_the_live_view_needs_and_when_one_frame_is_printed() -> None:
    result = rlpulse("top", "--help")

    text = " ".join(result.stdout.split())
    assert "pip install 'rlpulse[top]'" in text
    assert "with --once, or without rich: one plain frame" in text
    assert "/ filters watches or metrics" in text


@pytest.mark.parametrize("content", [None, b""])
def test_top_of_a_missing_or_empty_store_is_a_one_line_error(
    tmp_path: Path, content: bytes | None
) -> None:
    path = tmp_path / "run.sqlite"
    if content is not None:
        path.write_bytes(content)
    result = rlpulse("top", str(path), "--once")
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1


WRITER = textwrap.dedent(
    """
    import sys, time
    from rlpulse import Event, SQLiteLogger
    from rlpulse.naming import Kind, Payload

    kinds = {"collector/frames": Kind.COUNTER}
    with SQLiteLogger(sys.argv[1], run="live") as sink:
        for index in range(100_000):
            metrics = {
                "collector/frames": 100.0 * index,
                "buffer/size": min(20_000.0, 50.0 * index),
                "buffer/capacity": 20_000.0,
                "learner/updates": float(index),
            }
            sink.log_payloads([Payload(metrics, index, time.time(), kinds)])
            if index == 20:
                sink.log_event(
                    Event(time.time(), "learner", "stalled", "no progress for 30.0s", 30.0)
                )
            time.sleep(0.1)
    """
)


class Terminal:
    """A real 80x24 terminal (a tmux session) running one command; the test reads its screen and types into it."""

    def __init__(self, command: str) -> None:
        self.session = f"rlpulse-top-{os.getpid()}"
        subprocess.run(
            [
                "tmux",
                "new-session",
                "-d",
                "-s",
                self.session,
                "-x",
                "80",
                "-y",
                "24",
                command,
            ],
            check=True,
            timeout=10,
        )

    def screen(self) -> str:
        return subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", self.session],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout

    def line(self, starting: str) -> str:
        return next(
            (line for line in self.screen().splitlines() if line.startswith(starting)),
            "",
        )

    def type(self, *keys: str) -> None:
        subprocess.run(
            ["tmux", "send-keys", "-t", self.session, *keys], check=True, timeout=10
        )

    def running(self) -> bool:
        return (
            subprocess.run(
                ["tmux", "has-session", "-t", self.session],
                capture_output=True,
                timeout=10,
            ).returncode
            == 0
        )

    def close(self) -> None:
        subprocess.run(
            ["tmux", "kill-session", "-t", self.session],
            capture_output=True,
            timeout=10,
        )


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
@pytest.mark.timeout(90)
def test_top_follows_a_store_another_process_writes_in_an_80x24_terminal(
    tmp_path: Path,
) -> None:
    store = tmp_path / "run.sqlite"
    settings = tmp_path / "stty.txt"
    # The terminal's settings once top has quit, to see them restored.
    command = (
        f"{sys.executable} -m rlpulse top {store} --interval 0.2; "
        f"stty -a > {settings}; sleep 30"
    )
    terminal = Terminal(command)
    writer: subprocess.Popen[bytes] | None = None
    try:
        assert wait_for(lambda: "does not exist yet" in terminal.screen()), (
            terminal.screen()
        )
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(store)])
        assert wait_for(lambda: terminal.line("  frames").endswith("00")), (
            terminal.screen()
        )
        screen = terminal.screen()
        assert len(screen.splitlines()) == 24
        assert screen.splitlines()[0].startswith("run live in ")
        assert "size" in screen  # the buffer's bar
        assert "q quit" in screen.splitlines()[-1]

        frames = terminal.line("  frames")
        assert wait_for(lambda: terminal.line("  frames") not in ("", frames))
        assert wait_for(
            lambda: terminal.line("learner").split() == ["learner", "stalled"]
        ), terminal.screen()

        terminal.type("/", "buffer", "Enter")
        assert wait_for(lambda: "collector" not in terminal.screen()), terminal.screen()
        assert "size" in terminal.screen()
        assert "filter: buffer" in terminal.screen()
        terminal.type("Escape")
        assert wait_for(lambda: "collector" in terminal.screen()), terminal.screen()

        writer.kill()
        writer.wait(timeout=10)
        assert wait_for(lambda: "no new data for" in terminal.screen(), timeout=30), (
            terminal.screen()
        )

        terminal.type("q")
        assert wait_for(settings.exists)
        assert wait_for(lambda: " icanon" in settings.read_text())
        assert " echo" in settings.read_text()  # the terminal as it was
    finally:
        if writer is not None and writer.poll() is None:
            writer.kill()
            writer.wait(timeout=10)
        terminal.close()


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
@pytest.mark.timeout(60)
def test_top_ended_by_sigterm_gives_the_terminal_back_as_it_was(
    tmp_path: Path,
) -> None:
    store = tmp_path / "run.sqlite"
    settings = tmp_path / "stty.txt"
    command = (
        f"{sys.executable} -m rlpulse top {store} --interval 0.2; "
        f"stty -a > {settings}; sleep 30"
    )
    terminal = Terminal(command)
    try:
        assert wait_for(lambda: "does not exist yet" in terminal.screen()), (
            terminal.screen()
        )
        os.kill(_pid_of("-m", "rlpulse", "top", str(store)), signal.SIGTERM)
        assert wait_for(settings.exists)
        assert wait_for(lambda: " icanon" in settings.read_text())
        assert " echo" in settings.read_text()
    finally:
        terminal.close()


def _pid_of(*arguments: str) -> int:
    """The process whose command line is a Python with ``arguments``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode().split("\0")
        except OSError:
            continue
        if argv[1 : 1 + len(arguments)] == list(arguments):
            return int(entry.name)
    raise AssertionError(f"no process runs {' '.join(arguments)}")
