"""What several test modules share: the repository's paths, small sources, a deadline-bound wait and small runs for the command line.

Fixtures live in ``conftest.py``; plain classes and functions that tests
import live here (``from tests.support import Blocking, wait_until``).
"""

from __future__ import annotations

import contextlib
import errno
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings

import rlpulse
from rlpulse import Event, Record
from rlpulse.formats import RunFollower
from rlpulse.naming import Kind, Payload
from rlpulse.read.live import LiveRun
from rlpulse.runtime.queues import Item
from rlpulse.sinks import CSVLogger, JSONLLogger, SQLiteLogger
from rlpulse.testing import InMemorySink
from rlpulse.text import plural
from rlpulse.watch import Watch, WatchSpec

if TYPE_CHECKING:
    from rlpulse.read.top import TopView

__all__ = [
    "COUNTER",
    "FILE_SINKS",
    "FIXTURES",
    "OLD_SQLITE_FILES",
    "PLOTTED_START",
    "PNG_SIGNATURE",
    "PROPERTIES",
    "REPO",
    "RLPULSE_SCRIPT",
    "START",
    "TWO_PAYLOADS",
    "BatchRecorder",
    "Blocking",
    "Counter",
    "Counters",
    "Discard",
    "Filler",
    "Outage",
    "Progress",
    "Recorder",
    "Source",
    "StepRecorder",
    "context_switches",
    "copy_of_fixture",
    "followed",
    "frames_at",
    "frames_logged",
    "heading",
    "locked_by_another_process",
    "make_watch",
    "not_delivered",
    "pipeline",
    "png_size",
    "poll",
    "queue_item",
    "restore_default_sigint",
    "rlpulse_warnings",
    "screen",
    "store",
    "table_rows",
    "wait_for",
    "wait_until",
    "write_pipeline_run",
    "write_run",
    "write_sqlite_run",
    "write_three_watches",
    "write_two_payloads",
]

REPO = Path(__file__).resolve().parent.parent
"""The repository's root."""

RLPULSE_SCRIPT = Path(sys.executable).with_name("rlpulse")
"""The ``rlpulse`` command the package installs beside this Python."""

FIXTURES = REPO / "tests" / "fixtures"
"""Files written by earlier releases, read back by the tests of the formats."""

OLD_SQLITE_FILES = ("v1.sqlite", "v2.sqlite")
"""Files of SQLite format versions 1 (kinds) and 2 (distributions) in FIXTURES, each written by the code of its version (``tests/fixtures/make_old_sqlite.py``): runs ``baseline`` and then ``tuned``."""


FILE_SINKS = {
    "metrics.db": SQLiteLogger,
    "metrics.csv": CSVLogger,
    "metrics.jsonl": JSONLLogger,
}
"""The file sinks by a file name each writes: a test parametrized over them runs against every format."""


def write_two_payloads(path: Path, sink_type: type) -> None:
    """Write two payloads at ``path`` with a sink of ``sink_type``: read back, they are TWO_PAYLOADS."""
    with sink_type(path) as sink:
        sink.log_metrics(
            {"collector/frames": 96.0, "collector/batches": 3.0}, step=3, timestamp=1.5
        )
        sink.log_metrics({"buffer/size": 5.0}, timestamp=2.5)


TWO_PAYLOADS = [
    Record(1.5, 3, "collector/frames", 96.0, Kind.COUNTER),
    Record(1.5, 3, "collector/batches", 3.0, Kind.COUNTER),
    Record(2.5, None, "buffer/size", 5.0, Kind.GAUGE),
]
"""The records of the two payloads write_two_payloads writes."""


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


class Counter:
    """A source counting how often it is polled."""

    def __init__(self) -> None:
        self.frames = 0
        self.calls = 0

    def stats(self) -> dict[str, Any]:
        self.calls += 1
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


# Hypothesis settings of the property tests that drive a monitor.
PROPERTIES = settings(max_examples=100, deadline=None)


class Counters:
    """A source whose snapshot holds the counters the test sets."""

    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def stats(self) -> dict[str, int]:
        return dict(self.values)


def make_watch(schedule: Any = None, **kwargs: Any) -> Watch:
    """A watch named ``w`` of a provider that is never called: the test hands it each snapshot."""
    return Watch(WatchSpec("w", provider=dict, schedule=schedule, **kwargs))


def poll(watch: Watch, raw: dict[str, Any], now: float) -> dict[str, float] | None:
    """One poll whose payload, if any, is delivered."""
    return watch.poll(raw, now)


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


def write_sqlite_run(path: Path, run: str, frames: float) -> None:
    """Append run ``run`` to the SQLite file at ``path``: two records of a collector reaching ``frames`` frames in 4 s, and a buffer's utilization."""
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


def table_rows(output: str) -> dict[str, list[str]]:
    """The rows of the first table ``rlpulse show`` (or top, demo) printed: each metric's figures as printed, by its name."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("metric ")) + 1
    end = next((i for i in range(start, len(lines)) if not lines[i]), len(lines))
    return {line.split()[0]: line.split()[1:] for line in lines[start:end]}


def restore_default_sigint() -> None:
    """Give a child process (``preexec_fn``) Ctrl-C's default handling, so ``SIGINT`` raises KeyboardInterrupt in it."""
    # A shell that ran the tests in the background may have left SIGINT
    # ignored; Python then installs no KeyboardInterrupt handler in the child.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def write_pipeline_run(path: Path, run: str, learner_busy: float) -> None:
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


PLOTTED_START = 1_700_000_000.0
"""When the run :func:`write_three_watches` writes begins."""


def write_three_watches(path: Path, sink: Any) -> Path:
    """Ten payloads of a collector, a buffer and a learner into ``sink`` (writing ``path``), one a second from ``PLOTTED_START``; return ``path``."""
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
                timestamp=PLOTTED_START + second,
            )
    return path


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
"""The first bytes of every PNG file."""


def png_size(path: Path) -> tuple[int, int]:
    """The width and height of the PNG image at ``path``, which must be one."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def not_delivered(count: int) -> str:
    """How a monitor's warning at ``stop()`` says that ``count`` payloads were not delivered."""
    return f"{plural(count, 'payload')} {'was' if count == 1 else 'were'} not delivered"


class Recorder:
    """A plain, thread-safe sink keeping every call: the base of the sinks here that fail, stall or time their calls."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[dict[str, float], int | None]] = []

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        with self.lock:
            self.calls.append((dict(metrics), step))


def frames_logged(sink: Recorder | InMemorySink, watch: str) -> int:
    """How many payloads of watch ``watch`` (each with its ``frames``) ``sink`` was given."""
    return sum(1 for metrics, _ in sink.calls if f"{watch}/frames" in metrics)


def rlpulse_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The messages ``caplog`` caught from the ``rlpulse`` logger."""
    return [r.getMessage() for r in caplog.records if r.name == "rlpulse"]


class Outage(Recorder):
    """A sink of one's own whose far end goes away: while ``away`` is set its calls raise TransientSinkError and store nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.away = threading.Event()
        self.failed_calls = 0

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        if self.away.is_set():
            self.failed_calls += 1
            raise rlpulse.TransientSinkError("far end away", retry_after=0.05)
        super().log_metrics(metrics, step)


class StepRecorder:
    """A sink that keeps the step of every payload it is given."""

    def __init__(self) -> None:
        self.steps: list[int | None] = []

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        self.steps.append(step)


def wait_for(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    """Fail unless ``condition`` holds within ``seconds`` (:func:`wait_until` returns whether it did instead)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


class BatchRecorder:
    """A sink with log_batch: it records each call's payloads."""

    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds = seconds
        self.batches: list[
            list[tuple[Mapping[str, float], int | None, float | None]]
        ] = []

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        raise AssertionError("a sink with log_batch gets batches")

    def log_batch(
        self, payloads: list[tuple[Mapping[str, float], int | None, float | None]]
    ) -> None:
        self.batches.append(list(payloads))
        time.sleep(self.seconds)


def queue_item(step: int) -> Item:
    """A payload of watch ``w`` at ``step``, as a monitor puts it in a sink's queue."""
    return Item({"w/x": float(step)}, step, 0.0, "w", {}, {})


class Discard:
    """A sink that drops every payload at once."""

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        pass


def context_switches(thread: threading.Thread) -> int:
    """How many times ``thread`` has been switched out so far, as Linux counts it."""
    status = Path(f"/proc/self/task/{thread.native_id}/status").read_text()
    return sum(
        int(line.split()[1]) for line in status.splitlines() if "ctxt_switches" in line
    )


START = 1_700_000_000.0
"""When the runs :func:`store` writes begin."""


COUNTER = Kind.COUNTER
"""The kind of a counter, as :func:`pipeline` gives it."""


def store(
    path: Path,
    payloads: list[tuple[float, dict[str, float], dict[str, Kind]]],
    events: tuple[Event, ...] = (),
    run: str = "live",
) -> Path:
    """Write ``payloads`` (seconds after :data:`START`, metrics, kinds) and ``events`` as run ``run`` of a SQLite file."""
    with SQLiteLogger(path, run=run) as sink:
        sink.log_payloads(
            Payload(metrics, None, START + offset, kinds)
            for offset, metrics, kinds in payloads
        )
        for event in events:
            sink.log_event(event)
    return path


def pipeline(
    seconds: int = 10,
) -> list[tuple[float, dict[str, float], dict[str, Kind]]]:
    """A pipeline's payloads, one a second, for :func:`store`."""
    # A collector at 100 frames/s into a buffer of 20,000, a learner's
    # update times, the monitor's own cost.
    return [
        (
            float(second),
            {
                "collector/frames": 100.0 * second,
                "buffer/size": 1000.0 * second,
                "buffer/capacity": 20_000.0,
                "learner/update_s_p50": 0.002,
                "learner/update_s_p99": 0.009,
                "learner/loss_mean": 1.0 / (1 + second),
                "monitor/cpu_s": 0.004 * second,
            },
            {"collector/frames": COUNTER, "monitor/cpu_s": COUNTER},
        )
        for second in range(seconds + 1)
    ]


def followed(
    *paths: Path, match: str | None = None
) -> list[tuple[RunFollower, LiveRun]]:
    """Each run file read to its end, as ``rlpulse top`` follows it (``match``: with ``--match``)."""
    runs = []
    for path in paths:
        follower = RunFollower(path)
        live = LiveRun(str(path), match=match)
        live.add(follower.read_new())
        follower.close()
        runs.append((follower, live))
    return runs


def screen(
    runs: list[tuple[RunFollower, LiveRun]],
    view: TopView | None = None,
    now: float = START + 11.0,
    width: int = 80,
    *,
    exact: bool = False,
) -> str:
    """The text of the frame ``rlpulse top`` draws of ``runs`` at ``now`` (needs rich); ``exact`` as ``--exact``."""
    from rich.console import Console

    from rlpulse.read.top import TopView, frame_lines, render

    console = Console(record=True, width=width, height=24, color_system=None)
    lines = frame_lines(runs, view or TopView(), width, 24, now, exact=exact)
    console.print(render(lines))
    return console.export_text()


def heading(text: str, watch: str) -> list[str]:
    """The words of ``watch``'s heading: its name and its state in each run."""
    [line] = [line for line in text.splitlines() if line.split()[:1] == [watch]]
    return line.split()


def frames_at(minute: int, late_rate: float = 300.0) -> float:
    """100 frames/s for the first 20 minutes, ``late_rate`` after."""
    if minute <= 20:
        return 100.0 * 60 * minute
    return 100.0 * 60 * 20 + late_rate * 60 * (minute - 20)


def write_run(
    sink: SQLiteLogger | CSVLogger | JSONLLogger, late_rate: float = 300.0
) -> None:
    """40 minutes of a collector and a buffer, a payload a minute: frames as :func:`frames_at`, size the minute modulo 7."""
    with sink:
        for minute in range(41):
            sink.log_metrics(
                {
                    "collector/frames": frames_at(minute, late_rate),
                    "buffer/size": float(minute % 7),
                },
                step=minute,
                timestamp=START + 60 * minute,
            )
