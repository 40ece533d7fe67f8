"""Beside a CPU-bound training loop: every watch served alike, nothing lost, one warning a drop streak.

The main thread runs a pure-Python loop, as a training loop does, while a
background monitor polls many watches at 10 Hz into a real SQLite store,
read back afterwards. Figures (the share delivered, the loop's slowdown)
are the benchmarks' business (``benchmarks/loop_slowdown.py``); these tests
pin what must hold on any machine: fairness, and the warning count.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from benchmarks.loop_slowdown import cpu_loop

from rlpulse import LoggerMonitor, SQLiteLogger, read
from tests.support import Source

pytestmark = pytest.mark.timeout(90)

_DROP_WARNING = "dropped the oldest pending payload"


def busy_loop(seconds: float) -> int:
    """Run pure-Python arithmetic on this thread for ``seconds``; return the iterations."""
    return cpu_loop()(seconds)


def rows_per_watch(path: Path) -> Counter[str]:
    return Counter(
        record.name.partition("/")[0]
        for record in read(path)
        if record.name.endswith("/frames")
    )


def run_beside_busy_loop(
    monitor: LoggerMonitor,
    watches: int,
    seconds: float,
    caplog: pytest.LogCaptureFixture,
) -> tuple[dict[str, Any], list[logging.LogRecord]]:
    """Watch ``watches`` sources, run the monitor beside a busy loop for ``seconds``; its stats and drop warnings."""
    for index in range(watches):
        monitor.watch(Source(), name=f"worker_{index}")
    with caplog.at_level(logging.WARNING, logger="rlpulse"):
        monitor.start()
        busy_loop(seconds)
        monitor.stop(log_final=False)
    drops = [r for r in caplog.records if _DROP_WARNING in r.getMessage()]
    return monitor.stats(), drops


@pytest.mark.parametrize("watches", [100, 500])
def test_every_watch_is_served_alike_beside_a_busy_loop(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, watches: int
) -> None:
    path = tmp_path / "run.sqlite"
    monitor = LoggerMonitor(SQLiteLogger(path), poll_interval=0.1)
    stats, drop_warnings = run_beside_busy_loop(monitor, watches, 4.0, caplog)

    rows = rows_per_watch(path)
    assert len(rows) == watches
    assert min(rows.values()) >= 0.8 * max(rows.values())
    # What was logged reached the store, less what the queue dropped.
    assert sum(rows.values()) == stats["logged"] - stats["dropped"]
    # Liveness, generously: the rounds kept coming beside the loop.
    assert stats["rounds"] >= 10
    assert len(drop_warnings) <= 1  # a queue that drops warns once a streak


class SlowStore:
    """A sink that needs a second per batch: it stays behind the whole run."""

    def __init__(self) -> None:
        self.payloads = 0

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        raise AssertionError("the sender hands this sink batches")

    def log_batch(
        self, payloads: Sequence[tuple[Mapping[str, float], int | None, float | None]]
    ) -> None:
        time.sleep(1.0)
        self.payloads += len(payloads)


def test_a_sink_that_stays_behind_warns_once_beside_a_busy_loop(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    slow = SlowStore()
    path = tmp_path / "run.sqlite"
    # Room for four rounds: the store's sender may be kept from the GIL by
    # the loop for a few rounds (its first batch also creates the store),
    # while the slow sink gets ten rounds a batch and drops from the first.
    store = SQLiteLogger(path)
    monitor = LoggerMonitor([store, slow], poll_interval=0.1, queue_size=400)
    stats, drop_warnings = run_beside_busy_loop(monitor, 100, 3.0, caplog)
    store.close()

    assert stats["dropped"] > 0
    assert len(drop_warnings) == 1
    assert "SlowStore" in drop_warnings[0].getMessage()
    # The other sink kept up: it has every payload the monitor logged.
    assert sum(rows_per_watch(path).values()) == stats["logged"]
