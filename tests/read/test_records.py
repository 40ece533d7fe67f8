"""rlpulse.read and list_runs: any file sink's output back as records."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest

from rlpulse import CSVLogger, JSONLLogger, Record, SQLiteLogger, read
from rlpulse.formats import sqlite as sqlite_format
from rlpulse.naming import Kind, Payload, Unit
from rlpulse.read.records import (
    RunFileError,
    RunFileLockedError,
    RunFileLockedWarning,
    RunFileWarning,
    list_runs,
)
from tests.support import (
    FIXTURES,
    OLD_SQLITE_FILES,
    copy_of_fixture,
    locked_by_another_process,
)

FILE_SINKS = {
    "metrics.db": SQLiteLogger,
    "metrics.csv": CSVLogger,
    "metrics.jsonl": JSONLLogger,
}


def write_two_payloads(path: Path, sink_type: type) -> None:
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


@pytest.mark.parametrize("file_name", FILE_SINKS)
def test_every_file_sink_reads_back_the_same_records(
    tmp_path: Path, file_name: str
) -> None:
    path = tmp_path / file_name
    write_two_payloads(path, FILE_SINKS[file_name])

    records = list(read(path))

    assert records == TWO_PAYLOADS
    assert all(isinstance(record, Record) for record in records)


@pytest.mark.parametrize("file_name", FILE_SINKS)
def test_format_is_recognised_whatever_the_extension(
    tmp_path: Path, file_name: str
) -> None:
    path = tmp_path / file_name
    write_two_payloads(path, FILE_SINKS[file_name])
    renamed = path.rename(tmp_path / "metrics.log")

    assert list(read(str(renamed))) == TWO_PAYLOADS


def test_sqlite_content_wins_over_a_csv_extension(tmp_path: Path) -> None:
    path = tmp_path / "actually_sqlite.csv"
    write_two_payloads(path, SQLiteLogger)

    assert list(read(path)) == TWO_PAYLOADS


@pytest.mark.parametrize(
    ("logger", "file_name"),
    [(JSONLLogger, "metrics.csv"), (CSVLogger, "metrics.jsonl")],
)
def test_the_content_wins_over_the_other_line_formats_extension(
    tmp_path: Path, logger: type[CSVLogger | JSONLLogger], file_name: str
) -> None:
    path = tmp_path / file_name
    write_two_payloads(path, logger)

    assert list(read(path)) == TWO_PAYLOADS


def test_a_jsonl_file_whose_first_line_is_no_payload_raises_at_the_call(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text("this is not json\n")

    with pytest.raises(RunFileError, match="line 1 is not an rlpulse payload"):
        read(path)


def test_sqlite_without_run_reads_the_latest_run(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    for run in ("first", "second"):
        with SQLiteLogger(path, run=run) as sink:
            sink.log_metrics({"x/run": 1.0 if run == "first" else 2.0})
    with SQLiteLogger(path, run="first", resume=True) as sink:
        sink.log_metrics({"x/run": 1.0})

    assert [record.value for record in read(path)] == [2.0]
    assert [record.value for record in read(path, run="first")] == [1.0, 1.0]


def test_unknown_run_raises_listing_the_available_runs(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    SQLiteLogger(path, run="alpha").close()
    SQLiteLogger(path, run="beta").close()

    with pytest.raises(
        RunFileError, match="no run named 'gamma'; available runs: alpha, beta"
    ):
        read(path, run="gamma")


def test_list_runs_names_runs_oldest_first(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    for run in ("b", "a", "c"):
        SQLiteLogger(path, run=run).close()

    assert list_runs(path) == ["b", "a", "c"]


@pytest.mark.parametrize("file_name", ["metrics.csv", "metrics.jsonl"])
def test_list_runs_refuses_files_that_hold_no_runs(
    tmp_path: Path, file_name: str
) -> None:
    path = tmp_path / file_name
    write_two_payloads(path, FILE_SINKS[file_name])

    with pytest.raises(RunFileError, match="not an rlpulse SQLite file"):
        list_runs(path)


@pytest.mark.parametrize("file_name", ["metrics.csv", "metrics.jsonl"])
def test_single_run_files_accept_only_run_none(tmp_path: Path, file_name: str) -> None:
    path = tmp_path / file_name
    write_two_payloads(path, FILE_SINKS[file_name])

    with pytest.raises(
        RunFileError, match="single run: read it without a run \\(run=None"
    ):
        read(path, run="anything")


def test_missing_file_raises_file_not_found_at_the_call(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read(tmp_path / "missing.db")
    with pytest.raises(FileNotFoundError):
        list_runs(tmp_path / "missing.db")


@pytest.mark.parametrize("file_name", ["metrics.db", "metrics.csv", "metrics.jsonl"])
def test_empty_file_raises_one_line_error_at_the_call(
    tmp_path: Path, file_name: str
) -> None:
    path = tmp_path / file_name
    path.write_bytes(b"")

    with pytest.raises(RunFileError, match="is empty") as error:
        read(path)
    assert "\n" not in str(error.value)
    assert str(path) in str(error.value)


def test_file_of_unknown_format_raises(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("shopping list\n")

    with pytest.raises(RunFileError, match="not an rlpulse metrics file"):
        read(path)


def test_corrupt_sqlite_file_raises(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)

    with pytest.raises(RunFileError, match="not a readable SQLite file"):
        read(path)


def test_a_sqlite_file_another_process_holds_locked_is_waited_for_then_refused_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "metrics.db"
    with SQLiteLogger(path, run="r") as sink:
        sink.log_metrics({"c/frames": 1.0})
    monkeypatch.setattr(sqlite_format, "LOCK_NOTICE_S", 0.2)
    monkeypatch.setattr(sqlite_format, "LOCK_WAIT_S", 1.0)

    with (
        locked_by_another_process(path),
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always")
        with pytest.raises(RunFileLockedError) as raised:
            read(path)

    message = str(raised.value)
    assert message.startswith(
        f"{path} is locked by another process's write; rlpulse waited 1 s for it"
    )
    assert f"fuser -v {path}" in message
    notes = [str(warning.message) for warning in caught]
    assert notes == [
        f"{path} is locked by another process's write; waiting up to 1 s for it"
        " to be let go (Ctrl-C stops)"
    ]
    assert [warning.category for warning in caught] == [RunFileLockedWarning]


def test_a_sqlite_file_is_read_once_another_process_lets_its_lock_go(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.db"
    with SQLiteLogger(path, run="r") as sink:
        sink.log_metrics({"c/frames": 1.0})
    holding = locked_by_another_process(path)
    holding.__enter__()
    letting_go = threading.Timer(0.5, holding.__exit__, (None, None, None))
    letting_go.start()
    try:
        records = list(read(path))
    finally:
        letting_go.join()

    assert [record.value for record in records] == [1.0]


def test_sqlite_file_without_rlpulse_tables_raises(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE things (x)")
    connection.commit()
    connection.close()

    with pytest.raises(
        RunFileError, match="without rlpulse's 'runs' and 'metrics' tables"
    ):
        read(path)
    with pytest.raises(RunFileError, match="without rlpulse's"):
        list_runs(path)


def test_sqlite_file_with_a_broken_runs_table_raises(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE runs (label TEXT)")
    connection.execute("CREATE TABLE metrics (x)")
    connection.commit()
    connection.close()

    with pytest.raises(RunFileError, match="unreadable 'runs' table"):
        read(path)


def test_sqlite_file_with_no_runs_raises(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    SQLiteLogger(path, run="gone").close()
    connection = sqlite3.connect(path)
    connection.execute("DELETE FROM runs")
    connection.commit()
    connection.close()

    with pytest.raises(RunFileError, match="contains no runs"):
        read(path)


def test_reading_leaves_no_wal_files_behind(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    write_two_payloads(path, SQLiteLogger)

    list(read(path))

    assert sorted(item.name for item in tmp_path.iterdir()) == ["metrics.db"]


def test_csv_with_a_foreign_header_raises(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("step,value\n1,2.0\n")

    with pytest.raises(RunFileError, match="its header is 'step,value'"):
        read(path)


def test_csv_torn_last_row_is_left_out_saying_so(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    write_two_payloads(path, CSVLogger)
    with open(path, "a", encoding="utf-8") as file:
        file.write("3.5,,buffer/size,6.2")

    with pytest.warns(RunFileWarning, match="left out line 5, cut short"):
        assert list(read(path)) == TWO_PAYLOADS


def test_csv_row_torn_inside_a_quoted_name_is_left_out_saying_so(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.csv"
    write_two_payloads(path, CSVLogger)
    with open(path, "a", encoding="utf-8") as file:
        file.write('3.5,,"two\n')

    with pytest.warns(RunFileWarning, match="left out line 5, cut short"):
        assert list(read(path)) == TWO_PAYLOADS


def test_csv_torn_in_the_middle_of_a_character_is_left_out_saying_so(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.csv"
    write_two_payloads(path, CSVLogger)
    with open(path, "ab") as file:
        file.write("3.5,,x/é".encode()[:-1])

    with pytest.warns(RunFileWarning, match="left out line 5, cut short"):
        assert list(read(path)) == TWO_PAYLOADS


def test_csv_blank_lines_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("wall_time,step,name,value\n1.0,2,x/v,3.0\n\n  \n2.0,3,x/v,4.0\n\n")

    assert list(read(path)) == [
        Record(1.0, 2, "x/v", 3.0, Kind.GAUGE),
        Record(2.0, 3, "x/v", 4.0, Kind.GAUGE),
    ]


def test_csv_short_last_row_is_left_out_naming_its_line_and_what_it_lacks(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("wall_time,step,name,value\n1.0,2,x/v,3.0\n2.0,3,x/v\n")

    with pytest.warns(
        RunFileWarning, match="left out line 3, cut short: 3 fields of 4"
    ):
        assert list(read(path)) == [Record(1.0, 2, "x/v", 3.0, Kind.GAUGE)]


def test_csv_short_row_before_the_end_raises_naming_its_line_and_what_it_lacks(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("wall_time,step,name,value\n1.0,2,x/v\n2.0,3,x/v,4.0\n")

    with pytest.raises(RunFileError, match=r"line 2 .*: 3 fields of 4: '1.0,2,x/v'"):
        list(read(path))


def test_csv_malformed_row_before_the_end_raises_naming_its_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("wall_time,step,name,value\n1.0,,x/v,1.0\n1.0,,x/v\n2.0,,x/v,2.0\n")

    records = read(path)
    with pytest.raises(
        RunFileError, match="line 3 is not a wall_time,step,name,value row"
    ):
        list(records)


def test_csv_non_utf8_row_before_the_end_raises(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    path.write_bytes(b"wall_time,step,name,value\n1.0,,\xff\xfe,1.0\n2.0,,x/v,2.0\n")

    with pytest.raises(RunFileError, match="line 2 is not UTF-8 text"):
        list(read(path))


def test_jsonl_torn_last_line_is_left_out_saying_so(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    write_two_payloads(path, JSONLLogger)
    with open(path, "a", encoding="utf-8") as file:
        file.write('{"wall_time": 3.5, "step": null, "metrics": {"buffer/si')

    with pytest.warns(RunFileWarning, match="left out line 3, cut short"):
        assert list(read(path)) == TWO_PAYLOADS


def test_jsonl_payload_without_a_step_has_no_step(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"wall_time": 1.0, "metrics": {"x/v": 3.0}}\n')

    assert list(read(path)) == [Record(1.0, None, "x/v", 3.0, Kind.GAUGE)]


def test_jsonl_whole_step_written_as_a_float_is_that_step(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"wall_time": 1.0, "step": 4.0, "metrics": {"x/v": 3.0}}\n')

    assert list(read(path)) == [Record(1.0, 4, "x/v", 3.0, Kind.GAUGE)]


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"step": 1, "metrics": {}}', 'it has no "wall_time"'),
        ('{"wall_time": 1.0}', 'it has no "metrics"'),
        (
            '{"wall_time": 1.0, "metrics": {"x/v": "high"}}',
            "metric 'x/v': 'high' is not",
        ),
        (
            '{"wall_time": 1.0, "step": "3", "metrics": {}}',
            "step '3' is not an integer",
        ),
    ],
)
def test_jsonl_line_that_is_no_payload_says_what_it_lacks(
    tmp_path: Path, line: str, problem: str
) -> None:
    path = tmp_path / "metrics.jsonl"
    good = '{"wall_time": 1.0, "metrics": {"x/v": 1.0}}'
    path.write_text(f"{good}\n{line}\n")

    with pytest.raises(RunFileError, match="line 2 ") as raised:
        list(read(path))
    assert problem in str(raised.value)
    assert "KeyError" not in str(raised.value)


def test_jsonl_blank_lines_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('\n{"wall_time": 1.0, "step": 2, "metrics": {"x/v": 3.0}}\n\n')

    assert list(read(path)) == [Record(1.0, 2, "x/v", 3.0, Kind.GAUGE)]


@pytest.mark.parametrize(
    "line",
    [
        "not json",
        "[1, 2]",
        '{"wall_time": 1.0, "step": null}',
        '{"wall_time": "soon", "step": null, "metrics": {}}',
        '{"wall_time": 1.0, "step": 1.5, "metrics": {}}',
        '{"wall_time": 1.0, "step": null, "metrics": {"x/v": "high"}}',
        '{"wall_time": 1.0, "step": null, "metrics": [1.0]}',
    ],
)
def test_jsonl_malformed_line_before_the_end_raises_naming_its_line(
    tmp_path: Path, line: str
) -> None:
    path = tmp_path / "metrics.jsonl"
    good = '{"wall_time": 1.0, "step": null, "metrics": {"x/v": 1.0}}'
    path.write_text(f"{good}\n{line}\n{good}\n")

    with pytest.raises(RunFileError, match="line 2 is not an rlpulse payload"):
        list(read(path))


WRITER = textwrap.dedent(
    """
    import sys
    import rlpulse

    sink = getattr(rlpulse, sys.argv[1])(sys.argv[2])
    step = 0
    while True:
        sink.log_metrics(
            {f"writer/metric_{index}": float(step) for index in range(20)}, step=step
        )
        print(step, flush=True)
        step += 1
    """
)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("file_name", FILE_SINKS)
def test_every_payload_a_killed_writer_reported_is_read_back(
    tmp_path: Path, file_name: str
) -> None:
    path = tmp_path / file_name
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, FILE_SINKS[file_name].__name__, str(path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None
    reported = []
    try:
        while len(reported) < 200:
            line = writer.stdout.readline()
            assert line, "the writer exited before reporting 200 payloads"
            reported.append(int(line))
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        # Read through the text wrapper: it may already hold lines read ahead.
        remaining = writer.stdout.read()
        writer.wait(timeout=30)
    reported += [int(line) for line in remaining.split()]
    assert writer.returncode == -signal.SIGKILL

    steps = [record.step for record in read(path) if record.name == "writer/metric_0"]
    assert steps[: len(reported)] == reported
    assert steps == list(range(len(steps)))


def test_list_runs_and_the_errors_users_meet_are_importable_from_rlpulse(
    tmp_path: Path,
) -> None:
    import rlpulse

    path = tmp_path / "metrics.sqlite"
    SQLiteLogger(path, run="seed_1").close()
    assert rlpulse.list_runs(path) == ["seed_1"]
    with pytest.raises(rlpulse.RunFileError):
        rlpulse.read(path, run="seed_2")
    with pytest.raises(rlpulse.SinkSpecError):
        rlpulse.open_sink("nope:x")


@pytest.mark.parametrize("file_name", FILE_SINKS)
@pytest.mark.parametrize(
    ("metrics", "step", "named"),
    [
        ({"loss": 0.5, "phase": "eval"}, 1, "metric 'phase' = 'eval'"),
        ({"loss": None}, 1, "metric 'loss' = None"),
        ({"loss": 0.5}, "three", "step 'three'"),
    ],
)
def test_a_payload_a_file_sink_cannot_store_is_refused_naming_the_entry(
    tmp_path: Path,
    file_name: str,
    metrics: dict[str, object],
    step: object,
    named: str,
) -> None:
    path = tmp_path / file_name
    with FILE_SINKS[file_name](path) as sink:
        sink.log_metrics({"loss": 0.25}, step=0, timestamp=1.0)
        with pytest.raises((TypeError, ValueError), match=f"cannot store {named}"):
            sink.log_metrics(metrics, step=step, timestamp=2.0)

    assert list(read(path)) == [Record(1.0, 0, "loss", 0.25, Kind.GAUGE)]


# Kinds


OLD_FILES = ("v0.1.0.sqlite", "v0.1.0.csv", "v0.1.0.jsonl")


def file_sink(path: Path, *, resume: bool = False) -> Any:
    if path.suffix == ".db":
        return SQLiteLogger(path, run="run", resume=resume)
    return FILE_SINKS[path.name](path, resume=resume)


KNOWN_KINDS = {
    # Kinds no name says: a monitor's polls, a counter logged without its rate.
    "monitor/polls": Kind.COUNTER,
    "tally/episodes": Kind.COUNTER,
    "collector/worker_0/frames": Kind.COUNTER,
    "collector/worker_0/frames_per_second": Kind.RATE,
    "tally/return_p50": Kind.GAUGE,
}


def log_known_kinds(path: Path) -> None:
    with file_sink(path) as sink:
        sink.log_payloads(
            [
                Payload({name: 1.0 for name in KNOWN_KINDS}, 1, 1.0, KNOWN_KINDS),
                Payload({"monitor/polls": 2.0}, 2, 2.0, KNOWN_KINDS),
            ]
        )


@pytest.mark.parametrize("file_name", FILE_SINKS)
def test_every_file_sink_stores_each_metrics_kind_and_reads_it_back(
    tmp_path: Path, file_name: str
) -> None:
    path = tmp_path / file_name
    log_known_kinds(path)

    kinds = {record.name: record.kind for record in read(path)}

    assert kinds == KNOWN_KINDS


@pytest.mark.parametrize("file_name", FILE_SINKS)
def test_a_record_says_its_watch_metric_and_unit(
    tmp_path: Path, file_name: str
) -> None:
    path = tmp_path / file_name
    with FILE_SINKS[file_name](path) as sink:
        sink.log_metrics({"collector/worker_0/rss_bytes": 5.0, "loss": 0.5})

    described = [(r.watch, r.metric, r.unit) for r in read(path)]

    assert described == [
        ("collector", "worker_0/rss_bytes", Unit.BYTES),
        ("", "loss", None),
    ]


@pytest.mark.parametrize("file_name", FILE_SINKS)
def test_a_resumed_run_keeps_its_kinds(tmp_path: Path, file_name: str) -> None:
    path = tmp_path / file_name
    log_known_kinds(path)
    with file_sink(path, resume=True) as sink:
        sink.log_payloads([Payload({"monitor/polls": 9.0}, 3, 3.0, KNOWN_KINDS)])

    polls = [record.kind for record in read(path) if record.name == "monitor/polls"]
    assert polls == [Kind.COUNTER] * 3


@pytest.mark.parametrize("file_name", OLD_FILES)
def test_a_file_of_rlpulse_0_1_0_reads_with_the_kinds_its_names_say(
    file_name: str,
) -> None:
    kinds = {record.name: record.kind for record in read(FIXTURES / file_name)}

    assert kinds["collector/frames"] is Kind.COUNTER
    assert kinds["collector/episodes"] is Kind.COUNTER  # its rate is logged
    assert kinds["collector/episodes_per_second"] is Kind.RATE
    assert kinds["episodes/episode_return_count"] is Kind.COUNTER
    assert kinds["monitor/polls"] is Kind.GAUGE  # no name says otherwise
    assert kinds["replay_buffer/size"] is Kind.GAUGE


@pytest.mark.parametrize("file_name", OLD_SQLITE_FILES)
@pytest.mark.parametrize("run", ["baseline", "tuned"])
def test_a_sqlite_file_of_format_version_1_or_2_reads_every_row_with_the_kind_it_stored(
    tmp_path: Path, file_name: str, run: str
) -> None:
    path = copy_of_fixture(file_name, tmp_path)
    with contextlib.closing(sqlite3.connect(path)) as connection:
        (run_id,) = connection.execute(
            "SELECT id FROM runs WHERE name = ?", (run,)
        ).fetchone()
        rows = connection.execute(
            "SELECT wall_time, step, name, value FROM metrics WHERE run = ?"
            " ORDER BY rowid",
            (run_id,),
        ).fetchall()
        stored_kinds = dict(
            connection.execute("SELECT name, kind FROM kinds WHERE run = ?", (run_id,))
        )

    records = list(read(path, run=run))

    assert [tuple(record[:4]) for record in records] == rows
    kinds = {record.name: record.kind for record in records}
    assert {name: kind.value for name, kind in kinds.items()} == stored_kinds
    # Kinds no name says: guessed, these would be gauges.
    assert kinds["learner/updates"] is Kind.COUNTER
    assert kinds["learner/loss_sum"] is Kind.COUNTER
    assert kinds["buffer/size"] is Kind.GAUGE


@pytest.mark.parametrize("file_name", OLD_SQLITE_FILES)
def test_a_sqlite_file_of_format_version_1_or_2_lists_its_runs_and_reads_the_latest(
    tmp_path: Path, file_name: str
) -> None:
    path = copy_of_fixture(file_name, tmp_path)

    assert list_runs(path) == ["baseline", "tuned"]
    assert list(read(path)) == list(read(path, run="tuned"))


def test_the_files_of_rlpulse_0_1_0_hold_the_same_records() -> None:
    sqlite, csv, jsonl = (list(read(FIXTURES / name)) for name in OLD_FILES)

    assert len(sqlite) == 68
    assert sqlite == csv == jsonl
