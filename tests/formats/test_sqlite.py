"""The SQLite format (``rlpulse.formats.sqlite``) read back: its runs, the files it refuses, a file another process holds locked, the files of format versions 1 and 2.

Its summaries are ``tests/formats/test_sqlite_summaries.py``; writing it, ``tests/sinks/test_sqlite.py``.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import warnings
from pathlib import Path

import pytest

from rlpulse import SQLiteLogger, read
from rlpulse.formats import (
    RunFileError,
    RunFileLockedError,
    RunFileLockedWarning,
    list_runs,
)
from rlpulse.formats import sqlite as sqlite_format
from rlpulse.naming import Kind
from tests.support import (
    OLD_SQLITE_FILES,
    copy_of_fixture,
    locked_by_another_process,
    write_two_payloads,
)


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
