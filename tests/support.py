"""What several test modules share: the repository's paths, small sources and a deadline-bound wait.

Fixtures live in ``conftest.py``; plain classes and functions that tests
import live here (``from tests.support import Blocking, wait_until``).
"""

from __future__ import annotations

import contextlib
import errno
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = [
    "FIXTURES",
    "OLD_SQLITE_FILES",
    "REPO",
    "Blocking",
    "Filler",
    "Progress",
    "Source",
    "copy_of_fixture",
    "locked_by_another_process",
    "wait_until",
]

REPO = Path(__file__).resolve().parent.parent
"""The repository's root."""

FIXTURES = REPO / "tests" / "fixtures"
"""Files written by earlier releases, read back by the tests of the formats."""

OLD_SQLITE_FILES = ("v1.sqlite", "v2.sqlite")
"""Files of SQLite format versions 1 (kinds) and 2 (distributions) in FIXTURES, each written by the code of its version (``tests/fixtures/make_old_sqlite.py``): runs ``baseline`` and then ``tuned``."""


def copy_of_fixture(name: str, directory: Path) -> Path:
    """A copy of fixture ``name`` in ``directory``, for a test that may write to it (a logger resuming it, a reader of a file in WAL mode)."""
    copy = directory / name
    copy.write_bytes((FIXTURES / name).read_bytes())
    return copy


class Source:
    """A collector whose frames move on by one at every ``stats()`` call."""

    def __init__(self) -> None:
        self.frames = 0

    def stats(self) -> dict[str, float]:
        self.frames += 1
        return {"frames": self.frames}


class Blocking:
    """A source whose stats() blocks until released (or for ``seconds``)."""

    def __init__(self, seconds: float | None = None, block_after: int = 0) -> None:
        self.release = threading.Event()
        self.seconds = seconds
        self.block_after = block_after
        self.calls = 0
        self.returned = 0

    def stats(self) -> dict[str, float]:
        self.calls += 1
        if self.calls > self.block_after:
            self.release.wait(self.seconds)
        self.returned += 1
        return {"frames": self.calls}


class Progress:
    """A collector whose frames move only while ``moving`` is set."""

    def __init__(self) -> None:
        self.frames = 0
        self.moving = threading.Event()
        self.moving.set()

    def stats(self) -> dict[str, float]:
        if self.moving.is_set():
            self.frames += 1
        return {"frames": self.frames}


def wait_until(condition: Callable[[], bool], timeout: float = 20.0) -> bool:
    """Poll ``condition`` until it holds or ``timeout`` seconds pass; return whether it held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


class Filler:
    """Takes every free block of a file system (a ``small_disk``), and gives them back."""

    def __init__(self, disk: Path) -> None:
        self.path = disk / "filler"

    def fill(self) -> None:
        block = b"\0" * 4096
        with open(self.path, "ab", buffering=0) as file:
            while True:
                try:
                    file.write(block)
                except OSError as error:
                    if error.errno != errno.ENOSPC:
                        raise
                    return

    def free(self) -> None:
        self.path.unlink()


_HOLD_LOCKED = """
import sqlite3, sys
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("PRAGMA locking_mode=EXCLUSIVE")
connection.execute("BEGIN EXCLUSIVE")
print("held", flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def locked_by_another_process(path: Path) -> Iterator[None]:
    """While in the block, another process holds the SQLite file at ``path`` locked, as a ``sqlite3`` shell's ``BEGIN EXCLUSIVE`` does."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCKED, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        yield
    finally:
        holder.kill()
        holder.communicate()
