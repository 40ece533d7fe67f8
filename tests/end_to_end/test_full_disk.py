"""A full file system: the file sink on it fails alone, and writes again once space returns.

Every test mounts a tmpfs of 1 MiB of its own and fills it for real, with a
file written until the kernel answers ``ENOSPC``; so it needs the right to
mount (root), and is skipped where that is refused.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from rlpulse import CSVLogger, JSONLLogger, LoggerMonitor, SQLiteLogger, read
from rlpulse.naming import Kind, Payload, inferred_kinds
from rlpulse.read.records import Record
from rlpulse.sinks.base import BaseSink
from tests.support import Filler

pytestmark = pytest.mark.timeout(120)

QUEUE_SIZE = 1000


def records_of(payloads: Iterable[Payload]) -> list[Record]:
    records = []
    for metrics, step, timestamp, *_ in payloads:
        assert timestamp is not None
        kinds = inferred_kinds(metrics)  # as a sink's log_metrics infers them
        records += [
            Record(timestamp, step, n, float(v), kinds[n]) for n, v in metrics.items()
        ]
    return records


def recording(sink_class: type[BaseSink]) -> type[Any]:
    """``sink_class`` keeping, from its side, what each call reported written."""

    class Recording(sink_class):  # type: ignore[valid-type,misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.lock = threading.Lock()
            self.written: list[Record] = []
            self.failed_calls = 0
            self.failed_payloads = 0

        def log_batch(
            self,
            payloads: Iterable[tuple[Mapping[str, float], int | None, float | None]],
        ) -> None:
            payloads = list(payloads)
            self._count(super().log_batch, payloads, records_of(payloads))

        def log_payloads(self, payloads: Iterable[Payload]) -> None:
            # What a monitor calls: the payloads with their kinds.
            payloads = list(payloads)
            records = [
                Record(p.wall_time, p.step, n, float(v), p.kind(n))
                for p in payloads
                for n, v in p.metrics.items()
            ]
            self._count(super().log_payloads, payloads, records)

        def _count(
            self, log: Callable[[Any], None], payloads: list[Any], records: list[Record]
        ) -> None:
            try:
                log(payloads)
            except Exception:
                with self.lock:
                    self.failed_calls += 1
                    self.failed_payloads += len(payloads)
                raise
            with self.lock:
                self.written += records

        def written_count(self) -> int:
            with self.lock:
                return len(self.written)

    if hasattr(sink_class, "log_event"):
        # An event (a sink failing, say) written to the full disk fails too:
        # one more failed call of the sink.
        def log_event(self: Any, event: Any) -> None:
            try:
                sink_class.log_event(self, event)
            except Exception:
                with self.lock:
                    self.failed_calls += 1
                raise

        Recording.log_event = log_event

    # Warnings name a sink by its class.
    Recording.__name__ = Recording.__qualname__ = sink_class.__name__
    return Recording


SINKS: dict[str, tuple[type[BaseSink], str]] = {
    "SQLiteLogger": (SQLiteLogger, "metrics.db"),
    "CSVLogger": (CSVLogger, "metrics.csv"),
    "JSONLLogger": (JSONLLogger, "metrics.jsonl"),
}


def open_sink(name: str, disk: Path, *, resume: bool = False) -> Any:
    sink_class, file_name = SINKS[name]
    options: dict[str, Any] = {"resume": resume}
    if sink_class is SQLiteLogger:
        options["run"] = "full"
    return recording(sink_class)(disk / file_name, **options)


def read_back(sink: Any) -> list[Record]:
    """What the sink's file holds, read as a user would; the file is checked too."""
    if isinstance(sink, SQLiteLogger):
        with sqlite3.connect(sink.path) as connection:
            assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        connection.close()
        return list(read(sink.path, run=sink.run))
    return list(read(sink.path))


def payloads(
    count: int, first_step: int = 0
) -> list[tuple[dict[str, float], int, float]]:
    return [
        (
            {
                f"source/metric_{index:02d}_of_a_long_name": float(step + index)
                for index in range(20)
            },
            step,
            1.5 + step,
        )
        for step in range(first_step, first_step + count)
    ]


@pytest.mark.parametrize("sink_name", list(SINKS))
def test_a_write_that_finds_no_space_leaves_the_file_as_it_was(
    small_disk: Path, sink_name: str
) -> None:
    sink = open_sink(sink_name, small_disk)
    filler = Filler(small_disk)
    sink.log_batch(payloads(3))
    filler.fill()
    before = sink.path.read_bytes()
    # Larger than any buffer in the way, and than one SQLite statement.
    for attempt in range(3):
        with pytest.raises((OSError, sqlite3.Error)) as failure:
            sink.log_batch(payloads(300, first_step=3))
        assert sink.failed_calls == attempt + 1
        assert read_back(sink) == sink.written
        if not isinstance(sink, SQLiteLogger):
            assert failure.value.errno == errno.ENOSPC
            assert str(sink.path) in str(failure.value)
            assert sink.path.read_bytes() == before
    filler.free()
    sink.log_batch(payloads(300, first_step=3))
    assert read_back(sink) == sink.written == records_of(payloads(303))
    sink.close()
    # The file opens again, to be appended to.
    reopened = open_sink(sink_name, small_disk, resume=True)
    reopened.log_batch(payloads(1, first_step=303))
    reopened.close()
    assert read_back(reopened) == records_of(payloads(304))


def test_a_new_csv_file_whose_header_finds_no_space_is_left_empty(
    small_disk: Path,
) -> None:
    filler = Filler(small_disk)
    filler.fill()
    path = small_disk / "metrics.csv"
    with pytest.raises(OSError, match=re.escape(f"cannot write metrics to {path}")):
        CSVLogger(path)
    assert path.read_bytes() == b""
    filler.free()
    with CSVLogger(path) as sink:
        sink.log_metrics({"frames": 1.0}, step=1, timestamp=2.5)
    assert list(read(path)) == [Record(2.5, 1, "frames", 1.0, Kind.COUNTER)]


@pytest.mark.parametrize("free_blocks", [0, 3])
def test_a_new_sqlite_store_that_finds_no_space_says_so_and_leaves_no_file(
    small_disk: Path, free_blocks: int
) -> None:
    filler = Filler(small_disk)
    filler.fill()
    # With a few blocks free SQLite gets further, and says "disk I/O error".
    os.truncate(filler.path, filler.path.stat().st_size - free_blocks * 4096)
    path = small_disk / "metrics.db"

    with pytest.raises(
        OSError,
        match=f"cannot store metrics in {re.escape(str(path))}: its file system is full.*free space",
    ) as failure:
        SQLiteLogger(path, run="full")

    assert failure.value.errno == errno.ENOSPC
    assert sorted(child.name for child in small_disk.iterdir()) == ["filler"]
    filler.free()
    with SQLiteLogger(path, run="full") as sink:
        sink.log_metrics({"frames": 1.0}, step=1, timestamp=2.5)
    assert list(read(path, run="full")) == [Record(2.5, 1, "frames", 1.0, Kind.COUNTER)]


def test_an_existing_store_that_finds_no_space_for_a_new_run_is_kept(
    small_disk: Path,
) -> None:
    path = small_disk / "metrics.db"
    with SQLiteLogger(path, run="first") as sink:
        sink.log_metrics({"frames": 1.0}, step=1, timestamp=2.5)
    filler = Filler(small_disk)
    filler.fill()

    with pytest.raises(OSError, match="its file system is full"):
        SQLiteLogger(path, run="second")

    filler.free()
    assert list(read(path, run="first")) == [
        Record(2.5, 1, "frames", 1.0, Kind.COUNTER)
    ]


class Source:
    """A watched object with a counter (the step) and a few metrics."""

    def __init__(self) -> None:
        self.frames = 0

    def stats(self) -> dict[str, float]:
        self.frames += 1
        metrics = {f"metric_{index}": 0.5 * index for index in range(4)}
        return {"frames": self.frames, **metrics}


def wait_until_above(
    count: Callable[[], int], floor: int, what: str, watch: Callable[[], None]
) -> None:
    deadline = time.monotonic() + 60
    while count() <= floor:
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        watch()
        time.sleep(0.005)


def stored(records: Iterable[Record]) -> list[tuple[float, int | None, str, float]]:
    return [(r.wall_time, r.step, r.name, r.value) for r in records]


@pytest.mark.parametrize("sink_name", list(SINKS))
def test_a_sink_on_a_full_disk_fails_alone_and_writes_the_payloads_of_the_full_time_once_space_returns(
    small_disk: Path,
    tmp_path: Path,
    sink_name: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    full = open_sink(sink_name, small_disk)
    other = SQLiteLogger(tmp_path / "other.db", run="other")
    filler = Filler(small_disk)
    monitor = LoggerMonitor([full, other], poll_interval=0.01, queue_size=QUEUE_SIZE)
    for index in range(2):
        monitor.watch(Source(), name=f"source_{index}", step="frames")
    most_queued = 0

    def watch() -> None:
        nonlocal most_queued
        most_queued = max(most_queued, monitor.stats()["queued"])

    def failed_calls() -> int:
        return int(full.failed_calls)

    def sink_warnings() -> list[str]:
        return [
            record.getMessage()
            for record in caplog.records
            if record.name == "rlpulse"
            and f"to sink {sink_name}" in record.getMessage()
        ]

    with caplog.at_level(logging.WARNING, logger="rlpulse"):
        monitor.start()
        try:
            for streak in (1, 2):
                # Writing: then the disk fills, and every write fails.
                written = full.written_count()
                wait_until_above(full.written_count, written + 100, "writes", watch)
                filler.fill()
                failed, polls = failed_calls(), monitor.stats()["polls"]
                # The first try, then the next one a back-off (1 s) later.
                wait_until_above(failed_calls, failed + 1, "failures", watch)
                assert monitor.stats()["polls"] > polls + 50  # the polls go on
                assert monitor.stats()["queued"] > 50  # their payloads kept
                assert len(sink_warnings()) == streak
                # Space returns: the sink writes what the full time kept.
                filler.free()
                logged = monitor.stats()["logged"]
                wait_until_above(
                    lambda: len(
                        {r.step for r in full.written if r.name.endswith("frames")}
                    ),
                    logged // 2,
                    "the payloads of the full time",
                    watch,
                )
        finally:
            monitor.stop()

    stats = monitor.stats()
    # Warned once per streak, every failed call counted, nothing dropped.
    warnings = [r.getMessage() for r in caplog.records if r.name == "rlpulse"]
    assert warnings == sink_warnings()
    assert len(warnings) == 2
    assert "its file system is full" in warnings[0] or (
        "No space left on device" in warnings[0] and str(full.path) in warnings[0]
    )
    assert "tried again" in warnings[0]
    assert stats["errors"] == full.failed_calls > 0
    assert stats["dropped"] == 0
    assert most_queued <= QUEUE_SIZE
    # The full sink's file holds every payload the other sink got, in order,
    # each once, and what the sink reported written; it is intact.
    other_records = list(read(other.path, run="other"))
    assert (
        len([r for r in other_records if r.name.endswith("/frames")])
        == (stats["logged"])
    )
    assert read_back(full) == full.written
    assert stored(read_back(full)) == stored(other_records)
    full.close()
    other.close()


def test_a_sink_in_a_sink_process_on_a_full_disk_fails_alone_and_writes_the_full_times_payloads_once_space_returns(
    small_disk: Path, tmp_path: Path
) -> None:
    from rlpulse import SinkProcess, SinkProcessError

    full, other = small_disk / "metrics.jsonl", tmp_path / "other.sqlite"
    filler = Filler(small_disk)
    with SinkProcess(f"jsonl:{full}", f"sqlite:{other}") as sinks:
        sinks.log_batch(payloads(3))
        sinks.flush()
        filler.fill()
        # A child quicker than this process may have reported the failure
        # already; the flush after it does at the latest.
        with contextlib.suppress(SinkProcessError):
            sinks.log_batch(payloads(300, first_step=3))
        with pytest.raises(
            SinkProcessError, match=r"JSONLLogger.*No space left.*tried again"
        ):
            sinks.flush()
        # Failing until it writes again; the other sink is fed all along.
        with pytest.raises(SinkProcessError, match="in the sink process"):
            sinks.log_batch(payloads(300, first_step=303))
        with pytest.raises(SinkProcessError, match="No space left"):
            sinks.flush()
        assert list(read(full)) == records_of(payloads(3))
        assert list(read(other)) == records_of(payloads(603))
        filler.free()
        # The child's queue kept what the full disk refused: the next try,
        # a back-off later, writes it.
        with contextlib.suppress(SinkProcessError):
            sinks.log_batch(payloads(1, first_step=603))
        deadline = time.monotonic() + 30
        while True:
            try:
                sinks.flush()
                break
            except SinkProcessError:
                assert time.monotonic() < deadline, "the sink never wrote again"
                time.sleep(0.1)
    assert sinks.dropped == 0
    assert list(read(full)) == records_of(payloads(604))
    assert list(read(other)) == records_of(payloads(604))
