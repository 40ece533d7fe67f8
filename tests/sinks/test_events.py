"""Events in sinks (SPEC 6.2): stored by SQLite and JSON lines and read back, printed by the console, counted by Prometheus, listed by ``rlpulse show``.

A real background monitor whose watch stalls and moves again logs into real
files, read back with ``rlpulse.read_events``; the Prometheus exporter is
scraped over HTTP and parsed with prometheus_client's own parser; the
console's colour is checked on a real pseudo-terminal.
"""

from __future__ import annotations

import io
import json
import logging
import os
import pty
import sqlite3
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rlpulse import (
    ConsoleLogger,
    CSVLogger,
    Event,
    JSONLLogger,
    LoggerMonitor,
    RunFileError,
    SQLiteLogger,
    read,
    read_events,
)
from rlpulse.cli import main
from rlpulse.runtime.retry import TransientSinkError
from rlpulse.sinks.process import SinkProcess
from rlpulse.sinks.prometheus import PrometheusExporter
from rlpulse.testing import InMemorySink
from tests.support import Progress, rlpulse_warnings, wait_until

pytestmark = pytest.mark.timeout(60)


def scrape_events(exporter: PrometheusExporter) -> dict[tuple[str, str], float]:
    assert exporter.url is not None
    with urllib.request.urlopen(exporter.url, timeout=10) as response:
        page = response.read().decode()
    return {
        (sample.labels["kind"], sample.labels["watch"]): sample.value
        for family in text_string_to_metric_families(page)
        if family.name == "rlpulse_events"
        for sample in family.samples
        if sample.name == "rlpulse_events_total"
    }


def test_a_stall_and_its_end_reach_every_sink_that_stores_events(
    tmp_path: Path,
) -> None:
    console = io.StringIO()
    store, lines = tmp_path / "run.sqlite", tmp_path / "run.jsonl"
    exporter = PrometheusExporter(port=0, addr="127.0.0.1")
    source = Progress()
    seen: list[Event] = []
    sinks = [SQLiteLogger(store), JSONLLogger(lines), ConsoleLogger(console), exporter]
    monitor = LoggerMonitor(sinks, poll_interval=0.02, on_event=seen.append)
    monitor.watch(source, name="collector", stall_after=0.15, progress_key="frames")
    try:
        with monitor:
            assert wait_until(lambda: source.frames > 3)
            source.moving.clear()
            assert wait_until(lambda: [e.kind for e in seen] == ["stalled"])
            source.moving.set()
            assert wait_until(lambda: len(seen) == 2)
        assert scrape_events(exporter) == {
            ("stalled", "collector"): 1.0,
            ("recovered", "collector"): 1.0,
            ("stopped", ""): 1.0,
        }
    finally:
        for sink in sinks:
            sink.close()
    for path in (store, lines):
        stored = list(read_events(path))
        assert [(e.kind, e.watch) for e in stored] == [
            ("stalled", "collector"),
            ("recovered", "collector"),
            ("stopped", ""),
        ]
        assert stored[0].value == pytest.approx(seen[0].value)
        assert stored[0].message == seen[0].message
        assert stored[0].wall_time == seen[0].wall_time
    # The payloads read as before: the event lines are not records.
    assert {r.name for r in read(lines)} >= {"collector/frames", "collector/stalled"}
    printed = [
        line
        for line in console.getvalue().splitlines()
        if " !! " in line or " ok " in line
    ]
    assert [line.split(" ", 1)[1].split(":")[0] for line in printed] == [
        "!! stalled collector",
        "ok recovered collector",
        "ok stopped",
    ]


def test_show_lists_the_runs_events_after_its_metrics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "run.sqlite"
    with SQLiteLogger(store) as sink:
        sink.log_metrics({"collector/frames": 10.0}, step=1, timestamp=100.0)
        sink.log_event(
            Event(101.0, "collector", "hung", "stats() has not returned", 5.0)
        )
        sink.log_event(Event(102.0, "collector", "resumed", "stats() returned", 0.0))
    assert main(["show", str(store)]) == 0
    out = capsys.readouterr().out
    table, events = out.split("\n\n")[1:]
    assert table.startswith("metric")
    assert events.splitlines()[0] == "2 events:"
    assert events.splitlines()[1].endswith(
        "!! hung collector: stats() has not returned"
    )
    assert events.splitlines()[2].endswith("ok resumed collector: stats() returned")


def test_with_on_error_ignore_a_failing_sink_logs_nothing_and_show_names_it(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # What the alert on a failing sink sends the reader to in every mode.
    class Unplugged:
        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            raise OSError("disk unplugged")

    store = tmp_path / "run.sqlite"
    with SQLiteLogger(store) as sqlite:
        monitor = LoggerMonitor(
            [sqlite, Unplugged()], background=False, on_error="ignore"
        )
        monitor.watch(Progress(), name="collector")
        with caplog.at_level(logging.DEBUG, logger="rlpulse"):
            monitor.step()
            monitor.stop()
    assert caplog.records == []
    assert main(["show", str(store)]) == 0
    events = capsys.readouterr().out.split("\n\n")[-1].splitlines()
    assert events[0] == "2 events:"
    assert (
        "!! sink_failing: sink Unplugged failed: OSError('disk unplugged')" in events[1]
    )
    # The step's payload and the final snapshot.
    assert "ok stopped: LoggerMonitor stopped, having logged 2 payloads" in events[2]


def test_events_are_kept_per_run_and_a_store_from_before_events_has_none(
    tmp_path: Path,
) -> None:
    store = tmp_path / "run.sqlite"
    with SQLiteLogger(store, run="first") as sink:
        sink.log_event(Event(1.0, "a", "stalled", "no progress", 3.0))
    with SQLiteLogger(store, run="second") as sink:
        sink.log_event(Event(2.0, "b", "hung", "no return", 5.0))
    assert [e.watch for e in read_events(store, run="first")] == ["a"]
    assert [e.watch for e in read_events(store)] == ["b"]
    # A store written before the events table existed: its runs and metrics only.
    old = tmp_path / "old.sqlite"
    with sqlite3.connect(old) as connection:
        connection.executescript(
            "CREATE TABLE runs (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,"
            " start_wall_time REAL NOT NULL);"
            "CREATE TABLE metrics (run INTEGER NOT NULL, wall_time REAL NOT NULL,"
            " step INTEGER, name TEXT NOT NULL, value REAL);"
            "INSERT INTO runs VALUES (1, 'old', 0.0);"
            "INSERT INTO metrics VALUES (1, 0.0, NULL, 'c/frames', 1.0);"
        )
    connection.close()
    assert list(read_events(old)) == []
    # Opened by a logger again, it gains the table.
    with SQLiteLogger(old, run="new") as sink:
        sink.log_event(Event(3.0, "c", "dropping", "full", 2.0))
    assert [e.kind for e in read_events(old)] == ["dropping"]


def test_read_events_says_what_it_cannot_read(tmp_path: Path) -> None:
    table = tmp_path / "run.csv"
    with CSVLogger(table) as sink:
        sink.log_metrics({"c/frames": 1.0})
    with pytest.raises(RunFileError, match="stores no events"):
        read_events(table)
    lines = tmp_path / "run.jsonl"
    with JSONLLogger(lines) as sink:
        sink.log_event(Event(1.0, "c", "stalled", "no progress", 3.0))
    with pytest.raises(RunFileError, match="single run"):
        read_events(lines, run="first")
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps({"event": "stalled", "wall_time": 1.0}) + "\n")
    with pytest.raises(RunFileError, match="line 1"):
        read_events(broken)


def test_a_json_lines_file_that_starts_with_an_event_is_appended_to(
    tmp_path: Path,
) -> None:
    lines = tmp_path / "run.jsonl"
    with JSONLLogger(lines) as sink:
        sink.log_event(Event(1.0, "c", "stalled", "no progress", 3.0))
    with JSONLLogger(lines, resume=True) as sink:
        sink.log_metrics({"c/frames": 5.0}, step=2, timestamp=2.0)
    assert [r.value for r in read(lines)] == [5.0]
    assert [e.kind for e in read_events(lines)] == ["stalled"]


def test_the_console_colours_an_event_on_a_terminal_unless_no_color(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    leader, follower = pty.openpty()
    terminal = os.fdopen(follower, "w")
    try:
        monkeypatch.delenv("NO_COLOR", raising=False)
        ConsoleLogger(terminal).log_event(
            Event(0.0, "c", "stalled", "no progress", 3.0)
        )
        ConsoleLogger(terminal).log_event(Event(0.0, "c", "recovered", "moving", 3.0))
        monkeypatch.setenv("NO_COLOR", "1")
        ConsoleLogger(terminal).log_event(Event(0.0, "c", "hung", "no return", 5.0))
        written = ""
        while written.count("\n") < 3:
            written += os.read(leader, 4096).decode()
    finally:
        terminal.close()
        os.close(leader)
    stalled, recovered, hung = written.splitlines()
    assert stalled.startswith("\x1b[1;31m")
    assert stalled.endswith("\x1b[0m")
    assert recovered.startswith("\x1b[1;32m")
    assert "\x1b[" not in hung
    assert hung.endswith("!! hung c: no return")


def test_a_sink_process_hands_events_to_its_sinks_that_store_them(
    tmp_path: Path,
) -> None:
    store, lines, table = (
        tmp_path / "run.sqlite",
        tmp_path / "run.jsonl",
        tmp_path / "run.csv",
    )
    seen: list[Event] = []
    source = Progress()
    with SinkProcess(f"sqlite:{store}", f"jsonl:{lines}", f"csv:{table}") as hosted:
        monitor = LoggerMonitor(hosted, poll_interval=0.02, on_event=seen.append)
        monitor.watch(source, name="collector", stall_after=0.15, progress_key="frames")
        with monitor:
            assert wait_until(lambda: source.frames > 3)
            source.moving.clear()
            assert wait_until(lambda: [e.kind for e in seen] == ["stalled"])
    # The CSV sink, which stores no events, was not failing for it.
    assert [e.kind for e in seen] == ["stalled", "stopped"]
    for path in (store, lines):
        assert [(e.kind, e.watch) for e in read_events(path)] == [
            ("stalled", "collector"),
            ("stopped", ""),
        ]
    assert {r.name for r in read(table)} >= {"collector/frames"}


class RefusingEvents:
    """A sink that writes payloads and refuses every event (transiently with ``transient``)."""

    def __init__(self, *, transient: bool = False) -> None:
        self.payloads = 0
        self.event_calls = 0
        self.transient = transient

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        self.payloads += 1

    def log_event(self, event: Event) -> None:
        self.event_calls += 1
        if self.transient:
            raise TransientSinkError(f"cannot store event {event.kind} now")
        raise ValueError(f"cannot store event {event.kind}")


class Still:
    """A collector that never moves: its watch stalls."""

    def stats(self) -> dict[str, float]:
        return {"frames": 5.0}


@pytest.mark.parametrize("transient", [False, True])
def test_a_sink_refusing_events_warns_once_and_starts_no_failure_streak_of_its_payloads(
    caplog: pytest.LogCaptureFixture, transient: bool
) -> None:
    # Its events failing started a failure streak that the next payload
    # written ended: a sink_recovered event, which it refused in turn, at
    # every round, each with a warning.
    refusing, healthy = RefusingEvents(transient=transient), InMemorySink()
    monitor = LoggerMonitor([refusing, healthy], poll_interval=0.02, stop_timeout=1.0)
    monitor.watch(Still(), name="w", stall_after=0.2, progress_key="frames")
    with caplog.at_level(logging.WARNING, logger="rlpulse"):
        monitor.start()
        assert wait_until(lambda: refusing.event_calls >= 1)
        time.sleep(1.0)
        monitor.stop()

    kinds = [event.kind for event in healthy.events]
    assert kinds.count("stalled") == 1
    assert "sink_failing" not in kinds
    assert "sink_recovered" not in kinds
    said = [
        m
        for m in rlpulse_warnings(caplog)
        if "failed to log" in m and "RefusingEvents" in m
    ]
    assert len(said) == 1
    assert "failed to log a stalled event to sink RefusingEvents" in said[0]
    assert ("tried again" in said[0]) is transient
    assert refusing.payloads == len(healthy.payloads) > 10
    assert monitor.stats()["errors"] >= refusing.event_calls


def test_a_sink_refusing_events_in_manual_mode_warns_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    refusing = RefusingEvents()
    monitor = LoggerMonitor(refusing, background=False)
    monitor.watch(Still(), name="w", stall_after=0.05, progress_key="frames")
    with caplog.at_level(logging.WARNING, logger="rlpulse"):
        for _ in range(5):
            monitor.step()
            time.sleep(0.03)
    said = [m for m in rlpulse_warnings(caplog) if "RefusingEvents" in m]
    assert len(said) == 1, said
    assert "That event is not sent again" in said[0]
    assert refusing.event_calls >= 1
    assert refusing.payloads == 5


class SlowPlainSink:
    """A sink of ``log_metrics`` alone (as TorchRL's loggers), slower than the polls, that keeps events."""

    def __init__(self) -> None:
        self.events: list[tuple[float, str]] = []

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        time.sleep(0.02)

    def log_event(self, event: Event) -> None:
        self.events.append((time.monotonic(), event.kind))


def test_a_sink_slower_than_the_polls_gets_its_events_with_the_payloads_handed_over_with_them() -> (
    None
):
    # One payload a call, the sink always behind: its events waited until
    # it had caught up, which it never did, and were lost at stop().
    sink = SlowPlainSink()
    noticed: list[float] = []
    monitor = LoggerMonitor(
        sink,
        poll_interval=0.01,
        stop_timeout=1.0,
        on_event=lambda event: noticed.append(time.monotonic()),
    )
    for index in range(3):
        monitor.watch(Still(), name=f"w{index}", stall_after=0.3, progress_key="frames")
    monitor.start()
    try:
        assert wait_until(lambda: len(sink.events) == 3, timeout=10)
    finally:
        monitor.stop(log_final=False)

    assert [kind for _, kind in sink.events] == ["stalled"] * 3
    # Within a few of the sink's calls of being noticed, not once it caught up.
    assert sink.events[-1][0] - noticed[0] < 3.0
