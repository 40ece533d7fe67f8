"""``rlpulse top`` (SPEC 7): a run followed while another process writes it, in a real terminal (tmux).

A live view runs ``python -m rlpulse top`` inside a tmux session, the test
logging into the store meanwhile and reading the terminal with
``capture-pane``; a pipe or ``--once`` gets one plain frame.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rlpulse import Event, SQLiteLogger
from rlpulse.naming import Kind, Payload

pytestmark = pytest.mark.timeout(60)

KINDS = {"monitor/polls": Kind.COUNTER}


def rlpulse(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlpulse", *arguments],
        capture_output=True,
        text=True,
        timeout=60,
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


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_top_follows_the_store_in_a_terminal_and_quits_on_q(tmp_path: Path) -> None:
    store = tmp_path / "run.sqlite"
    session = f"rlpulse-top-{os.getpid()}"
    sink = SQLiteLogger(store, run="live")
    sink.log_metrics({"collector/frames": 1234.0}, step=1)

    def screen() -> str:
        return subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", session],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout

    def running() -> bool:
        return (
            subprocess.run(
                ["tmux", "has-session", "-t", session], capture_output=True, timeout=10
            ).returncode
            == 0
        )

    command = f"{sys.executable} -m rlpulse top {store} --interval 0.2"
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "120", "-y", "30", command],
        check=True,
        timeout=10,
    )
    try:
        assert wait_for(lambda: "1234" in screen()), screen()
        assert "q quits" in screen()
        sink.log_metrics({"collector/frames": 5678.0}, step=2)
        assert wait_for(lambda: "5678" in screen()), screen()
        subprocess.run(
            ["tmux", "send-keys", "-t", session, "q"], check=True, timeout=10
        )
        assert wait_for(lambda: not running())
    finally:
        sink.close()
        subprocess.run(
            ["tmux", "kill-session", "-t", session], capture_output=True, timeout=10
        )
