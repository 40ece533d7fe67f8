"""Fixtures shared across the test suite."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rlpulse import Every, LoggerMonitor, SQLiteLogger, Tally
from tests.support import write_three_watches


@pytest.fixture
def wait_until() -> Callable[..., bool]:
    """Return ``wait(condition, timeout=10.0)``: poll until true or the deadline.

    Background threads on a loaded machine can be slow to get scheduled, so
    tests wait for what they expect under a generous deadline instead of
    sleeping a fixed time.
    """

    def wait(
        condition: Callable[[], bool], timeout: float = 10.0, interval: float = 0.01
    ) -> bool:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() >= deadline:
                return False
            time.sleep(interval)
        return True

    return wait


@pytest.fixture
def warning_messages(caplog: pytest.LogCaptureFixture) -> Callable[..., list[str]]:
    """Return ``messages(containing="")``: the warnings logged so far, at root level.

    Records reach the root logger from every thread, so this sees warnings
    emitted by background threads too (a logger that does not propagate has
    to be made to for the duration of the test).
    """
    caplog.set_level(logging.WARNING)

    def messages(containing: str = "") -> list[str]:
        return [
            record.getMessage()
            for record in caplog.records
            if record.levelno >= logging.WARNING and containing in record.getMessage()
        ]

    return messages


@pytest.fixture
def error_line(capsys: pytest.CaptureFixture[str]) -> Callable[[], str]:
    """Return ``line()``: the one line a failed command wrote, checked to be just that.

    Nothing on standard output, no traceback, exactly one line on standard
    error: what the command line promises for every error a user can cause.
    """

    def line() -> str:
        captured = capsys.readouterr()
        assert captured.out == ""
        assert "Traceback" not in captured.err
        (only,) = captured.err.splitlines()
        return only

    return line


@pytest.fixture
def log_tally_into() -> Callable[[Any, list[list[float]]], None]:
    """Return ``log(sink, intervals)``: a real monitor watching a real Tally (watch ``learner``) logs each interval into ``sink``.

    Each interval is a list of values observed as ``loss``; the monitor
    logs one payload after each (steps 1, 2, ...), so each interval is one
    histogram. The sink is left open.
    """

    def log(sink: Any, intervals: list[list[float]]) -> None:
        tally = Tally()
        monitor = LoggerMonitor(sink, background=False)
        monitor.watch(
            tally,
            name="learner",
            schedule=Every.counter("updates", 1),
            log_on_close=False,
        )
        for values in intervals:
            for value in values:
                tally.observe("loss", value)
            tally.inc("updates")
            assert "learner" in monitor.step()
        monitor.stop()

    return log


@pytest.fixture
def log_tally_intervals(
    log_tally_into: Callable[[Any, list[list[float]]], None],
) -> Callable[..., None]:
    """Return ``log(path, intervals, run="r")``: ``log_tally_into`` a SQLite file at ``path``."""

    def log(path: Path, intervals: list[list[float]], *, run: str = "r") -> None:
        with SQLiteLogger(path, run=run) as sink:
            log_tally_into(sink, intervals)

    return log


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs mounted for the test, always unmounted after it; fill it with ``tests.support.Filler``.

    Mounting needs root: the test is skipped where that is refused.
    """
    if os.geteuid() != 0:
        pytest.skip("filling a file system for real needs root, to mount a tmpfs")
    if shutil.which("mount") is None or shutil.which("umount") is None:
        pytest.skip("filling a file system for real needs mount and umount")
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        unmounted = subprocess.run(["umount", str(mount_point)], capture_output=True)
        if unmounted.returncode != 0:
            # Something (a thread left behind by a failed test) holds a file.
            subprocess.run(["umount", "--lazy", str(mount_point)], check=True)


@pytest.fixture
def sqlite_run(tmp_path: Path) -> Path:
    """A SQLite run (``baseline``) of a collector, a buffer and a learner: :func:`tests.support.write_three_watches`."""
    path = tmp_path / "metrics.sqlite"
    return write_three_watches(path, SQLiteLogger(path, run="baseline"))


@pytest.fixture
def without_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every matplotlib import fail, as in an installation without it."""
    for name in [
        name for name in sys.modules if name.partition(".")[0] == "matplotlib"
    ]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
