"""SQLiteLogger: the embedded default store, read back raw and through rlpulse.read."""

from __future__ import annotations

import math
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from rlpulse import (
    CSVLogger,
    JSONLLogger,
    LoggerMonitor,
    Record,
    RunExistsError,
    SQLiteLogger,
    TransientSinkError,
    merge_distributions,
    read,
    read_distributions,
)
from rlpulse.distributions import RELATIVE_ERROR, Histogram
from rlpulse.formats.sqlite import SQLITE_FORMAT_VERSION
from rlpulse.naming import Kind, Payload
from rlpulse.read.records import RunFileError, list_runs
from rlpulse.sinks import sqlite as sqlite_sink
from rlpulse.testing import InMemorySink
from tests.fixtures.make_old_sqlite import POLLS, loss_observations
from tests.fixtures.make_old_sqlite import RUNS as OLD_RUNS
from tests.support import FIXTURES, Source, copy_of_fixture, wait_until

RUN_NAME_FORMAT = "%Y-%m-%d_%H-%M-%S"


def rows(path: Path, query: str, *parameters: object) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as connection:
        return list(connection.execute(query, parameters))


def test_payload_is_read_back_with_its_step_and_timestamp(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    with SQLiteLogger(path, run="r") as sink:
        sink.log_metrics(
            {"collector/frames": 96.0, "collector/batches": 3.0}, step=3, timestamp=10.5
        )

    assert list(read(path)) == [
        Record(10.5, 3, "collector/frames", 96.0, Kind.COUNTER),
        Record(10.5, 3, "collector/batches", 3.0, Kind.COUNTER),
    ]


def test_metrics_table_holds_one_row_per_metric_referencing_the_run(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.db"
    with SQLiteLogger(path, run="r") as sink:
        sink.log_metrics({"buffer/size": 5.0}, step=None, timestamp=2.0)

    assert rows(
        path,
        "SELECT r.name, m.wall_time, m.step, m.name, m.value FROM metrics m JOIN runs r ON r.id = m.run",
    ) == [("r", 2.0, None, "buffer/size", 5.0)]


def test_run_records_its_start_wall_time(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    before = time.time()
    SQLiteLogger(path, run="r").close()

    ((start_wall_time,),) = rows(
        path, "SELECT start_wall_time FROM runs WHERE name = 'r'"
    )
    assert isinstance(start_wall_time, float)
    assert start_wall_time >= before - 1.0


def test_file_is_in_wal_journal_mode(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    SQLiteLogger(path).close()

    assert rows(path, "PRAGMA journal_mode") == [("wal",)]


def test_metrics_are_indexed_by_run(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    SQLiteLogger(path).close()

    indexed_columns = rows(path, "SELECT name FROM pragma_index_info('metrics_run')")
    assert indexed_columns == [("run",)]


def test_each_payload_is_readable_by_another_connection_while_the_logger_is_open(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.db"
    with SQLiteLogger(path) as sink, sqlite3.connect(path) as reader:
        for count in range(1, 4):
            sink.log_metrics({"buffer/size": float(count)})
            assert reader.execute("SELECT COUNT(*) FROM metrics").fetchone() == (count,)
        assert [record.value for record in read(path)] == [1.0, 2.0, 3.0]


def test_new_run_is_named_after_the_local_time(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    before = time.strftime(RUN_NAME_FORMAT)
    with SQLiteLogger(path) as sink:
        name = sink.run
    after = time.strftime(RUN_NAME_FORMAT)

    assert before <= name <= after
    assert list_runs(path) == [name]


def test_new_run_name_is_uniquified_when_taken(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    now = time.time()
    taken = [
        time.strftime(RUN_NAME_FORMAT, time.localtime(now + offset))
        for offset in range(60)
    ]
    for name in taken:
        SQLiteLogger(path, run=name).close()

    with SQLiteLogger(path) as sink:
        name = sink.run

    assert name.endswith("_1")
    assert name.removesuffix("_1") in taken


def test_new_runs_in_one_file_get_distinct_names(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    names = []
    for _ in range(3):
        with SQLiteLogger(path) as sink:
            names.append(sink.run)

    assert len(set(names)) == 3
    assert list_runs(path) == names


def test_an_existing_run_name_is_refused_and_the_run_left_as_it_is(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.db"
    with SQLiteLogger(path, run="loop") as sink:
        sink.log_metrics({"learner/loss": 1.0}, step=1)
    SQLiteLogger(path, run="loop-2").close()

    with pytest.raises(RunExistsError) as refused:
        SQLiteLogger(path, run="loop")

    message = str(refused.value)
    assert f"run 'loop' already exists in {path}" in message
    assert "run='loop-3' is free" in message
    assert "resume=True" in message
    assert refused.value.free_run == "loop-3"
    assert list_runs(path) == ["loop", "loop-2"]
    assert [record.value for record in read(path, run="loop")] == [1.0]


def test_resume_appends_to_an_existing_run(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    with SQLiteLogger(path, run="resumed") as sink:
        sink.log_metrics({"learner/loss": 1.0}, step=1)
    with SQLiteLogger(path, run="resumed", resume=True) as sink:
        sink.log_metrics({"learner/loss": 0.5}, step=2)

    assert list_runs(path) == ["resumed"]
    assert [(record.step, record.value) for record in read(path, run="resumed")] == [
        (1, 1.0),
        (2, 0.5),
    ]


def test_resume_starts_a_run_not_yet_stored(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    with SQLiteLogger(path, run="first", resume=True) as sink:
        sink.log_metrics({"learner/loss": 1.0}, step=1)

    assert list_runs(path) == ["first"]


def test_abandoning_takes_back_only_a_run_it_started_that_holds_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.db"
    SQLiteLogger(path, run="fresh").abandon()
    assert not path.exists()  # the file it made for that run, too

    SQLiteLogger(path, run="kept").close()
    SQLiteLogger(path, run="kept", resume=True).abandon()
    with SQLiteLogger(path, run="logged") as sink:
        sink.log_metrics({"learner/loss": 1.0}, step=1)
        sink.abandon()
    SQLiteLogger(path).abandon()

    assert list_runs(path) == ["kept", "logged"]


def test_resume_without_a_run_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="resume=True appends to a run named by run="):
        SQLiteLogger(tmp_path / "metrics.db", resume=True)


def test_runs_in_one_file_are_read_separately(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    with SQLiteLogger(path, run="a") as first, SQLiteLogger(path, run="b") as second:
        first.log_metrics({"x/v": 1.0})
        second.log_metrics({"x/v": 2.0})
        first.log_metrics({"x/v": 3.0})

    assert [record.value for record in read(path, run="a")] == [1.0, 3.0]
    assert [record.value for record in read(path, run="b")] == [2.0]


def test_logger_exposes_its_path_and_run(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    with SQLiteLogger(str(path), run="named") as sink:
        assert (sink.path, sink.run) == (path, "named")
        assert repr(sink) == f"SQLiteLogger({str(path)!r}, run='named')"


def test_timestamp_defaults_to_the_time_of_the_call(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    before = time.time()
    with SQLiteLogger(path) as sink:
        sink.log_metrics({"x/v": 1.0})
    after = time.time()

    (record,) = read(path)
    assert before <= record.wall_time <= after


def test_large_payload_is_stored_whole(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    payload = {f"workers/worker_{index}/frames": float(index) for index in range(1500)}
    with SQLiteLogger(path) as sink:
        sink.log_metrics(payload, step=7)

    assert {record.name: record.value for record in read(path)} == payload


def test_payload_with_a_non_numeric_value_stores_nothing(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    with SQLiteLogger(path) as sink:
        with pytest.raises(ValueError, match="cannot store metric 'x/bad' = 'many'"):
            sink.log_metrics({"x/good": 1.0, "x/bad": "many"})  # type: ignore[dict-item]
        sink.log_metrics({})

    assert list(read(path)) == []


def test_large_payload_failing_part_way_stores_nothing(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    payload: dict[object, float] = {f"x/metric_{index}": 1.0 for index in range(900)}
    payload[("not", "a", "name")] = 1.0
    with SQLiteLogger(path) as sink:
        with pytest.raises(sqlite3.Error):
            sink.log_metrics(payload)  # type: ignore[arg-type]
        sink.log_metrics({"x/after": 2.0})

    assert [record.name for record in read(path)] == ["x/after"]


@pytest.mark.parametrize("path", [":memory:", Path(":memory:")])
def test_an_in_memory_database_is_refused_saying_a_store_is_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str | Path
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"stores runs in a file.*give a file path"):
        SQLiteLogger(path)

    assert list(tmp_path.iterdir()) == []


def test_a_file_named_like_an_in_memory_database_in_a_directory_is_a_file(
    tmp_path: Path,
) -> None:
    with SQLiteLogger(tmp_path / ":memory:") as sink:
        sink.log_metrics({"x/v": 1.0})

    assert [record.value for record in read(tmp_path / ":memory:")] == [1.0]


def test_an_empty_path_is_refused_saying_to_give_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="path of the metrics file is empty"):
        SQLiteLogger("")
    with pytest.raises(ValueError, match="path of the metrics file is empty"):
        CSVLogger("")


@pytest.mark.parametrize("spec", ["sqlite:runs/a.sqlite", "jsonl:a.jsonl"])
def test_a_sink_spec_given_for_a_path_is_refused_naming_the_path_meant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: str
) -> None:
    monkeypatch.chdir(tmp_path)
    meant = spec.partition(":")[2]
    for sink in (SQLiteLogger, CSVLogger, JSONLLogger):
        with pytest.raises(ValueError, match=f"is a sink spec .*itself, '{meant}'"):
            sink(spec)
    assert list(tmp_path.iterdir()) == []  # no folder sqlite:runs


def test_nan_is_read_back_as_nan_and_infinity_as_infinity(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    with SQLiteLogger(path) as sink:
        sink.log_metrics({"x/nan": math.nan, "x/inf": math.inf})

    values = {record.name: record.value for record in read(path)}
    assert math.isnan(values["x/nan"])
    assert values["x/inf"] == math.inf


def test_payloads_logged_from_other_threads_are_all_stored(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    with SQLiteLogger(path) as sink:

        def log_steps(thread_index: int) -> None:
            for step in range(50):
                sink.log_metrics(
                    {f"thread_{thread_index}/step": float(step)}, step=step
                )

        threads = [
            threading.Thread(target=log_steps, args=(index,)) for index in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)

    records = list(read(path))
    assert len(records) == 200
    for index in range(4):
        steps = [
            record.step for record in records if record.name == f"thread_{index}/step"
        ]
        assert steps == list(range(50))


def test_close_twice_is_harmless(tmp_path: Path) -> None:
    sink = SQLiteLogger(tmp_path / "metrics.db")
    sink.close()
    sink.close()


def test_logging_after_close_raises_naming_the_file(tmp_path: Path) -> None:
    sink = SQLiteLogger(tmp_path / "metrics.db", run="r")
    sink.close()

    with pytest.raises(RuntimeError, match="closed") as error:
        sink.log_metrics({"x/v": 1.0})
    assert str(tmp_path) in str(error.value)
    with pytest.raises(RuntimeError, match="closed"):
        sink.flush()


def test_flush_keeps_the_logger_usable(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    with SQLiteLogger(path) as sink:
        sink.log_metrics({"x/v": 1.0})
        sink.flush()
        sink.log_metrics({"x/v": 2.0})

    assert [record.value for record in read(path)] == [1.0, 2.0]


def test_missing_parent_directories_are_created(tmp_path: Path) -> None:
    path = tmp_path / "runs" / "today" / "metrics.db"
    SQLiteLogger(path).close()

    assert path.is_file()


def test_directory_as_path_raises_naming_it(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError, match=str(tmp_path)):
        SQLiteLogger(tmp_path)


def test_path_under_a_file_raises_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "not_a_directory"
    blocker.write_text("")
    path = blocker / "metrics.db"

    with pytest.raises(OSError, match=r"not_a_directory/metrics\.db"):
        SQLiteLogger(path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_path_without_write_permission_raises_naming_it(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)

    with pytest.raises(PermissionError, match="locked"):
        SQLiteLogger(locked / "metrics.db")


def test_file_that_is_not_sqlite_raises_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    path.write_text("wall_time,step,name,value\n" * 100)

    with pytest.raises(RunFileError, match=r"metrics\.db"):
        SQLiteLogger(path)


def test_sqlite_file_with_another_metrics_table_raises(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY)")
        connection.execute("CREATE TABLE metrics (label TEXT)")
    connection.close()

    with pytest.raises(RunFileError, match="columns"):
        SQLiteLogger(path)


def test_another_sqlite_database_is_refused_and_left_as_it_was(
    tmp_path: Path,
) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE t (x INTEGER)")
        connection.execute("INSERT INTO t VALUES (1)")
    connection.close()
    before = path.read_bytes()

    with pytest.raises(RunFileError, match=r"another database \(tables \['t'\]"):
        SQLiteLogger(path)
    assert path.read_bytes() == before
    assert not path.with_name("app.db-wal").exists()


@pytest.mark.parametrize(("run", "error"), [("", ValueError), (7, TypeError)])
def test_run_that_is_not_a_non_empty_string_raises(
    tmp_path: Path, run: object, error: type[Exception]
) -> None:
    with pytest.raises(error, match="non-empty string"):
        SQLiteLogger(tmp_path / "metrics.db", run=run)  # type: ignore[arg-type]
    assert not (tmp_path / "metrics.db").exists()


def test_a_batch_of_payloads_is_read_back_in_order(tmp_path: Path) -> None:
    # 3,001 metrics: more than one INSERT statement holds.
    path = tmp_path / "metrics.db"
    many = {f"collector/metric_{index}": float(index) for index in range(1500)}
    with SQLiteLogger(path, run="r") as sink:
        sink.log_batch(
            [(many, 1, 1.0), ({"buffer/size": 5.0}, None, 2.0), (many, 2, 3.0)]
        )

    records = list(read(path, run="r"))
    assert len(records) == 3001
    assert records[0] == Record(1.0, 1, "collector/metric_0", 0.0, Kind.GAUGE)
    assert records[1500] == Record(2.0, None, "buffer/size", 5.0, Kind.GAUGE)
    assert records[-1] == Record(3.0, 2, "collector/metric_1499", 1499.0, Kind.GAUGE)


def test_a_batch_that_fails_part_way_stores_none_of_its_payloads(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.db"
    with SQLiteLogger(path, run="r") as sink:
        sink.log_metrics({"buffer/size": 1.0}, step=1, timestamp=1.0)
        # SQLite integers are 64-bit: the last payload's step cannot be
        # stored, in a later INSERT statement than the first payload's.
        many = {f"buffer/metric_{index}": 2.0 for index in range(2500)}
        with pytest.raises(OverflowError):
            sink.log_batch([(many, 2, 2.0), ({"buffer/size": 3.0}, 2**63, 3.0)])
        sink.log_metrics({"buffer/size": 4.0}, step=4, timestamp=4.0)

    assert [record.value for record in read(path, run="r")] == [1.0, 4.0]


def test_a_batch_of_a_size_not_stored_before_costs_about_what_a_repeated_one_does(
    tmp_path: Path,
) -> None:
    # A monitor's batches vary in size with what its queue holds: a size the
    # logger has not stored before may not cost tens of times more.
    def batch(payloads: int) -> list[tuple[dict[str, float], int, float]]:
        return [
            ({f"collector_{index % 100}/metric_{key}": 1.0 for key in range(6)}, 1, 1.0)
            for index in range(payloads)
        ]

    sizes = range(300, 330)  # 1,800 to 1,974 rows a batch
    with SQLiteLogger(tmp_path / "metrics.db", run="r") as sink:
        repeated = batch(300)
        sink.log_batch(repeated)
        started = time.thread_time()
        for _ in sizes:
            sink.log_batch(repeated)
        repeated_s = time.thread_time() - started
        fresh = [batch(size) for size in sizes]
        started = time.thread_time()
        for payloads in fresh:
            sink.log_batch(payloads)
        fresh_s = time.thread_time() - started

    assert fresh_s < 5 * repeated_s, (fresh_s, repeated_s)


# Checkpoint threads alive when this module was imported: another module's
# stores may still hold theirs (daemon threads of loggers left open).
_OTHERS: set[threading.Thread] = set()


def _checkpoint_threads() -> list[threading.Thread]:
    """The checkpoint threads alive now that no earlier test left behind."""
    return [
        t
        for t in threading.enumerate()
        if t.name == "rlpulse-sqlite-checkpoint" and t not in _OTHERS
    ]


@pytest.fixture(autouse=True)
def _threads_left_before() -> None:
    # Before each test: what is alive belongs to earlier tests.
    _OTHERS.clear()
    _OTHERS.update(threading.enumerate())


@pytest.mark.timeout(60)
def test_checkpoints_keep_the_log_short_under_continuous_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rlpulse.sinks.sqlite as sqlite_sink

    monkeypatch.setattr(sqlite_sink, "_LOG_BYTES_PER_CHECKPOINT", 400_000)
    path = tmp_path / "metrics.db"
    wal = tmp_path / "metrics.db-wal"
    payload = {f"collector/metric_{index}": float(index) for index in range(100)}
    longest = 0
    with SQLiteLogger(path, run="r") as sink:
        for step in range(2_000):  # 200,000 rows: about 10 MB of log unchecked
            sink.log_batch([(payload, step, float(step))])
            longest = max(longest, wal.stat().st_size)
        assert len(_checkpoint_threads()) == 1
    assert _checkpoint_threads() == []
    # Checkpointed, the log stays at 1-3 MB on a quiet machine, up to about
    # 4 MB when the checkpoint thread waits for a core; unchecked, 10 MB.
    assert longest < 6 * 2**20
    records = list(read(path, run="r"))
    assert len(records) == 200_000
    assert records[-1] == Record(1999.0, 1999, "collector/metric_99", 99.0, Kind.GAUGE)


@pytest.mark.timeout(60)
def test_a_writer_leaving_moments_between_writes_never_checkpoints_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As a monitor's sender writes, a batch each poll: the checkpoint thread
    # copies the whole log between two writes, and the log starts afresh.
    monkeypatch.setattr(sqlite_sink, "_LOG_BYTES_PER_CHECKPOINT", 400_000)
    path = tmp_path / "metrics.db"
    payload = {f"collector/metric_{index}": float(index) for index in range(100)}
    writer_statements: list[str] = []
    with SQLiteLogger(path, run="r") as sink:
        sink._connection.set_trace_callback(writer_statements.append)
        for step in range(400):  # 40,000 rows: 20 checkpoints
            sink.log_batch([(payload, step, float(step))])
            time.sleep(0.005)
        sink._connection.set_trace_callback(None)
        longest_log = (tmp_path / "metrics.db-wal").stat().st_size

    checkpoints = [s for s in writer_statements if "wal_checkpoint" in s]
    assert len(checkpoints) <= 2, checkpoints
    assert longest_log < 2 * 2**20
    assert len(list(read(path, run="r"))) == 40_000


@pytest.mark.timeout(60)
def test_checkpoints_keep_the_log_short_under_many_small_commits(
    tmp_path: Path,
) -> None:
    # A commit adds its pages to the log whatever its rows: counted by rows,
    # a payload of two metrics a call grew the log to 26 MB here. Written
    # without a pause, the log never starts afresh until the writer copies
    # it itself, at three checkpoints' worth: about 6-9 MB.
    path = tmp_path / "metrics.db"
    wal = tmp_path / "metrics.db-wal"
    longest = 0
    with SQLiteLogger(path, run="r") as sink:
        for step in range(3_000):
            sink.log_metrics({"a/frames": float(step), "a/x": 1.0}, step=step)
            longest = max(longest, wal.stat().st_size)
    assert longest < 12 * 2**20
    assert len(list(read(path, run="r"))) == 6_000


def test_a_store_that_writes_little_starts_no_checkpoint_thread(tmp_path: Path) -> None:
    with SQLiteLogger(tmp_path / "metrics.db") as sink:
        sink.log_metrics({"buffer/size": 1.0}, step=1)
        assert _checkpoint_threads() == []


def open_together(path: Path, runs: list[str]) -> list[BaseException]:
    """Open one SQLiteLogger per run on ``path`` from threads started at once; what they raised."""
    start = threading.Barrier(len(runs))
    loggers: list[SQLiteLogger] = []
    failures: list[BaseException] = []

    def open_run(run: str) -> None:
        start.wait()
        try:
            loggers.append(SQLiteLogger(path, run=run))
        except BaseException as error:  # returned to the test
            failures.append(error)

    threads = [threading.Thread(target=open_run, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    for logger in loggers:
        logger.log_metrics({"loss": 1.0}, step=1, timestamp=1.5)
        logger.close()
    return failures


def test_loggers_creating_one_new_store_at_once_all_open_it(tmp_path: Path) -> None:
    # As several seeds started together on one runs file do.
    seeds = ["seed_0", "seed_1", "seed_2"]
    for trial in range(60):
        path = tmp_path / f"trial_{trial}.sqlite"
        assert open_together(path, seeds) == []
        assert sorted(list_runs(path)) == seeds


def test_a_store_another_connection_keeps_locked_is_refused_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_sink, "_BUSY_TIMEOUT_S", 0.2)
    path = tmp_path / "metrics.db"
    with SQLiteLogger(path, run="first") as sink:
        sink.log_metrics({"x/v": 1.0}, timestamp=1.0)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(RunFileError) as refused:
            SQLiteLogger(path, run="second")
    finally:
        holder.execute("ROLLBACK")
        holder.close()

    message = str(refused.value)
    assert "another connection kept the database locked for over 0.2 s" in message
    assert "close that connection, or log to another path" in message
    assert "give the path of an rlpulse SQLite file" not in message
    assert [record.value for record in read(path, run="first")] == [1.0]


def test_a_write_another_connection_keeps_locked_stores_nothing_and_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_sink, "_BUSY_TIMEOUT_S", 0.2)
    path = tmp_path / "metrics.db"
    sink = SQLiteLogger(path, run="loop")
    sink.log_metrics({"x/v": 1.0}, timestamp=1.0)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(TransientSinkError) as refused:
            sink.log_batch([({"x/v": 2.0}, None, 2.0), ({"x/v": 3.0}, None, 3.0)])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    sink.log_batch([({"x/v": 2.0}, None, 2.0), ({"x/v": 3.0}, None, 3.0)])
    sink.close()

    message = str(refused.value)
    assert f"cannot store metrics in {path}" in message
    assert "another connection kept the database locked for over 0.2 s" in message
    assert [record.value for record in read(path, run="loop")] == [1.0, 2.0, 3.0]


def stored_frames(path: Path) -> list[float]:
    return [record.value for record in read(path) if record.name == "collector/frames"]


def test_a_monitor_stores_every_payload_logged_while_another_connection_held_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_sink, "_BUSY_TIMEOUT_S", 0.2)
    path = tmp_path / "metrics.db"
    kept = InMemorySink()
    monitor = LoggerMonitor([SQLiteLogger(path), kept], poll_interval=0.05)
    monitor.watch(Source(), name="collector")
    with monitor:
        assert kept.wait_for(lambda sink: len(sink.payloads) >= 3)
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        time.sleep(1.0)  # several tries, each waiting out the busy timeout
        holder.execute("ROLLBACK")
        holder.close()
        logged = len(kept.payloads)
        # The back-off after a few failed tries is a few seconds.
        assert wait_until(lambda: len(stored_frames(path)) >= logged, timeout=15)
        stats = monitor.stats()

    assert stored_frames(path) == kept.values("collector/frames")
    assert stats["errors"] >= 1
    assert stats["dropped"] == 0


def test_a_new_file_that_cannot_become_a_store_is_removed(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    blocker = tmp_path / "metrics.db-wal"
    blocker.mkdir()  # SQLite cannot open its write-ahead log

    with pytest.raises(RunFileError, match=f"cannot store metrics in {path}"):
        SQLiteLogger(path)

    assert not path.exists()


def test_each_metrics_kind_is_stored_once_per_run(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    for _ in range(2):
        with SQLiteLogger(path, run="r", resume=True) as sink:
            sink.log_metrics({"c/frames": 1.0, "c/size": 2.0})
            sink.log_metrics({"c/frames": 3.0})

    assert rows(path, "SELECT name, kind FROM kinds ORDER BY name") == [
        ("c/frames", "counter"),
        ("c/size", "gauge"),
    ]
    assert rows(path, "PRAGMA user_version") == [(SQLITE_FORMAT_VERSION,)]


def test_a_file_of_rlpulse_0_1_0_gains_kinds_for_its_new_runs(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    path.write_bytes((FIXTURES / "v0.1.0.sqlite").read_bytes())

    with SQLiteLogger(path, run="next") as sink:
        sink.log_metrics({"c/frames": 1.0})

    assert [record.kind for record in read(path, run="next")] == [Kind.COUNTER]
    assert len(list(read(path, run="baseline"))) == 68


# Distributions


def observations(seed: int, count: int) -> list[float]:
    return [float(v) for v in np.random.default_rng(seed).lognormal(0.0, 1.5, count)]


def assert_quantiles_match(histogram: Histogram, values: list[float]) -> None:
    for q in (0.01, 0.5, 0.9, 0.99, 1.0):
        expected = float(np.quantile(values, q, method="inverted_cdf"))
        assert histogram.quantile(q) == pytest.approx(expected, rel=RELATIVE_ERROR)


def test_each_logged_interval_of_a_distribution_is_stored_with_its_payload(
    tmp_path: Path, log_tally_intervals: Callable[..., None]
) -> None:
    path = tmp_path / "metrics.db"
    intervals = [observations(seed, 200) for seed in range(3)]
    log_tally_intervals(path, intervals)

    stored = list(read_distributions(path, name="learner/loss"))

    assert [record.histogram.count for record in stored] == [200, 200, 200]
    payload_times = rows(
        path, "SELECT DISTINCT wall_time FROM metrics WHERE name = 'learner/loss_p50'"
    )
    assert [(record.wall_time,) for record in stored] == payload_times
    for record, values in zip(stored, intervals, strict=True):
        assert record.histogram.min == min(values)
        assert record.histogram.max == max(values)
        assert record.histogram.sum == pytest.approx(sum(values))
    assert rows(path, "PRAGMA user_version") == [(SQLITE_FORMAT_VERSION,)]


def test_quantiles_over_the_whole_run_match_numpys_within_the_buckets_error(
    tmp_path: Path, log_tally_intervals: Callable[..., None]
) -> None:
    path = tmp_path / "metrics.db"
    intervals = [observations(seed, 1000) for seed in range(5)]
    log_tally_intervals(path, intervals)

    merged = merge_distributions(read_distributions(path))

    assert list(merged) == ["learner/loss"]
    assert merged["learner/loss"].count == 5000
    assert_quantiles_match(merged["learner/loss"], [v for i in intervals for v in i])


def test_quantiles_over_a_span_merge_the_intervals_logged_in_it(
    tmp_path: Path, log_tally_intervals: Callable[..., None]
) -> None:
    path = tmp_path / "metrics.db"
    intervals = [observations(seed, 500) for seed in range(4)]
    intervals[1] = [value * 100 for value in intervals[1]]
    log_tally_intervals(path, intervals)
    stored = [record.wall_time for record in read_distributions(path)]

    span = read_distributions(path, since=stored[1], until=stored[2])
    merged = merge_distributions(span)["learner/loss"]

    assert merged.count == 1000
    assert_quantiles_match(merged, intervals[1] + intervals[2])


def test_negative_values_and_zeros_are_stored_and_read_back(
    tmp_path: Path, log_tally_intervals: Callable[..., None]
) -> None:
    path = tmp_path / "metrics.db"
    values = [-3.0, -0.001, 0.0, 0.0, 2.5, 1e6]
    log_tally_intervals(path, [values])

    (record,) = read_distributions(path)

    histogram = record.histogram
    assert histogram.zero_count == 2
    assert histogram.count == 6
    assert (histogram.min, histogram.max) == (-3.0, 1e6)
    assert_quantiles_match(histogram, values)


def test_each_run_reads_back_only_its_own_distributions(
    tmp_path: Path, log_tally_intervals: Callable[..., None]
) -> None:
    path = tmp_path / "metrics.db"
    log_tally_intervals(path, [[1.0, 2.0]], run="first")
    log_tally_intervals(path, [[5.0]], run="second")

    first = merge_distributions(read_distributions(path, run="first"))
    latest = merge_distributions(read_distributions(path))

    assert first["learner/loss"].count == 2
    assert latest["learner/loss"].count == 1


def test_a_payloads_rows_and_distributions_are_stored_together_or_not_at_all(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.db"
    histogram = Histogram()
    histogram.add(1.0)
    # SQLite integers are 64-bit: this histogram's zeros cannot be stored,
    # after its payload's rows were inserted in the same transaction.
    too_many_zeros = Histogram(zero_count=2**63)
    with SQLiteLogger(path, run="r") as sink:
        with pytest.raises(OverflowError):
            sink.log_payloads(
                [
                    Payload(
                        {"learner/loss_p50": 1.0},
                        1,
                        1.0,
                        {},
                        {"learner/loss": histogram},
                    ),
                    Payload(
                        {"learner/loss_p50": 0.0},
                        2,
                        2.0,
                        {},
                        {"learner/loss": too_many_zeros},
                    ),
                ]
            )
        sink.log_payloads(
            [
                Payload(
                    {"learner/loss_p50": 1.0}, 3, 3.0, {}, {"learner/loss": histogram}
                )
            ]
        )

    assert [record.step for record in read(path)] == [3]
    assert [record.step for record in read_distributions(path)] == [3]


@pytest.mark.parametrize("file_name", ["v0.1.0.sqlite", "v1.sqlite"])
def test_a_file_of_a_version_before_distributions_has_none_and_gains_them(
    tmp_path: Path, log_tally_intervals: Callable[..., None], file_name: str
) -> None:
    path = copy_of_fixture(file_name, tmp_path)
    old_runs = list_runs(path)

    assert [list(read_distributions(path, run=run)) for run in old_runs] == [
        [] for _ in old_runs
    ]
    log_tally_intervals(path, [[1.0, 2.0, 3.0]], run="next")

    assert [r.histogram.count for r in read_distributions(path, run="next")] == [3]
    assert [list(read_distributions(path, run=run)) for run in old_runs] == [
        [] for _ in old_runs
    ]
    assert rows(path, "PRAGMA user_version") == [(SQLITE_FORMAT_VERSION,)]


@pytest.mark.parametrize("run", OLD_RUNS)
def test_a_file_of_format_version_2_gives_back_its_histograms_and_quantiles_over_its_run(
    tmp_path: Path, run: str
) -> None:
    path = copy_of_fixture("v2.sqlite", tmp_path)
    polls = range(1, POLLS + 1)
    intervals = [loss_observations(run, poll) for poll in polls]

    stored = list(read_distributions(path, run=run))

    assert [(r.wall_time, r.name) for r in stored] == [
        (OLD_RUNS[run] + 2.0 * poll, "learner/loss") for poll in polls
    ]
    for record, values in zip(stored, intervals, strict=True):
        assert record.histogram.count == len(values)
        assert record.histogram.min == min(values)
        assert record.histogram.max == max(values)
        assert record.histogram.sum == pytest.approx(sum(values))
    merged = merge_distributions(stored)["learner/loss"]
    assert merged.count == 200
    assert_quantiles_match(merged, [value for values in intervals for value in values])


def test_a_file_of_the_version_before_distributions_reads_without_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.db"
    with SQLiteLogger(path, run="r") as sink:
        sink.log_metrics({"learner/loss_p50": 1.0}, timestamp=1.0)
    with sqlite3.connect(path) as connection:  # as rlpulse wrote it before
        connection.execute("DROP TABLE distributions")
        connection.execute("PRAGMA user_version = 1")

    assert list(read_distributions(path)) == []
    assert [record.value for record in read(path)] == [1.0]


@pytest.mark.parametrize("file_name", ["metrics.csv", "metrics.jsonl"])
def test_a_line_file_has_no_histograms_to_read_saying_where_they_are(
    tmp_path: Path, file_name: str
) -> None:
    path = tmp_path / file_name
    sink_type = CSVLogger if file_name.endswith(".csv") else JSONLLogger
    with sink_type(path) as sink:
        sink.log_metrics({"learner/loss_p50": 1.0})

    with pytest.raises(RunFileError, match=r"stores no histograms.*SQLiteLogger"):
        read_distributions(path)


def test_a_closed_store_holds_its_whole_run_in_its_file_while_a_follower_reads_it(
    tmp_path: Path,
) -> None:
    # rlpulse top follows the run read-only: the writer's close, no longer
    # the last connection's, leaves the run in the write-ahead log unless it
    # copies it in itself; a copy of the file alone then had no run.
    from rlpulse.formats import RunFollower

    path = tmp_path / "run.sqlite"
    follower = RunFollower(path)
    with SQLiteLogger(path, run="followed") as sink:
        for step in range(50):
            sink.log_metrics({"c/frames": float(step)}, step=step, timestamp=1.0 + step)
            if step % 10 == 0:
                follower.read_new()
    follower.read_new()
    copy = tmp_path / "copy.sqlite"
    copy.write_bytes(path.read_bytes())
    follower.close()

    assert [record.value for record in read(copy)] == [
        float(step) for step in range(50)
    ]


def test_a_logger_dropped_unused_takes_back_the_run_it_started(tmp_path: Path) -> None:
    # A script that failed before its first payload (a wrong call beside
    # the logger) runs again under the same run name; a run it resumed, or
    # one that holds something, stays.
    import gc

    path = tmp_path / "runs.sqlite"
    with SQLiteLogger(path, run="earlier") as earlier:
        earlier.log_metrics({"c/frames": 1.0}, timestamp=1.0)

    def failing_script() -> None:
        LoggerMonitor(SQLiteLogger(path, run="r1"), SQLiteLogger(path))  # type: ignore[call-arg]

    with pytest.raises(TypeError):
        failing_script()
    gc.collect()
    assert list_runs(path) == ["earlier"]
    with SQLiteLogger(path, run="r1") as again:
        again.log_metrics({"c/frames": 2.0}, timestamp=2.0)
    resumed = SQLiteLogger(path, run="r1", resume=True)
    used = SQLiteLogger(path, run="used")
    used.log_metrics({"c/frames": 3.0}, timestamp=3.0)
    del resumed, used
    gc.collect()

    assert list_runs(path) == ["earlier", "r1", "used"]
    alone = tmp_path / "alone.sqlite"
    SQLiteLogger(alone, run="only")
    gc.collect()
    assert not alone.exists()  # the file it made, holding no run, goes too


@pytest.mark.parametrize(
    "script",
    [
        # The logger held to the end, by a module or by a with block.
        "store = SQLiteLogger(PATH, run='crash')\nraise RuntimeError('boom')\n",
        "with SQLiteLogger(PATH, run='crash') as store:\n"
        "    raise RuntimeError('boom')\n",
        "def main():\n"
        "    store = SQLiteLogger(PATH, run='crash')\n"
        "    monitor = LoggerMonitor(store)\n"
        "    raise RuntimeError('boom')\n"
        "main()\n",
    ],
)
@pytest.mark.timeout(60)
def test_a_script_that_fails_before_its_first_payload_runs_again_under_its_run_name(
    tmp_path: Path, script: str
) -> None:
    path = tmp_path / "runs" / "c.sqlite"
    with SQLiteLogger(path, run="earlier") as earlier:
        earlier.log_metrics({"c/frames": 1.0}, timestamp=1.0)
    source = f"from rlpulse import LoggerMonitor, SQLiteLogger\nPATH = {str(path)!r}\n"

    for _ in range(2):  # the second run refused the name, the run left behind
        failed = subprocess.run(
            [sys.executable, "-c", source + script],
            capture_output=True,
            text=True,
            timeout=50,
            check=False,
        )
        assert failed.returncode == 1
        assert "RuntimeError: boom" in failed.stderr
        assert "RunExistsError" not in failed.stderr

    assert list_runs(path) == ["earlier"]


@pytest.mark.timeout(60)
def test_a_forked_child_that_exits_takes_back_none_of_its_parents_runs(
    tmp_path: Path,
) -> None:
    # The child inherits the unclosed logger, and with it the take-back at
    # exit: it removed the parent's run, and the file the parent made.
    path = tmp_path / "new.sqlite"
    store = SQLiteLogger(path, run="exp")
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        # What its exit would run (weakref's finalizers at exit), then a
        # hard exit, so that nothing else of pytest's runs twice.
        take_back = store._take_back
        assert take_back is not None
        take_back()
        os._exit(0)
    os.waitpid(child, 0)

    assert path.exists()
    store.log_metrics({"c/frames": 1.0}, timestamp=1.0)
    store.close()
    assert list_runs(path) == ["exp"]


def test_a_with_block_that_fails_after_logging_keeps_its_run(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"

    def failing_after_logging() -> None:
        with SQLiteLogger(path, run="r") as store:
            store.log_metrics({"c/frames": 1.0}, timestamp=1.0)
            raise RuntimeError("after the first payload")

    with pytest.raises(RuntimeError):
        failing_after_logging()

    assert [record.value for record in read(path)] == [1.0]


def test_a_store_taken_back_takes_the_folders_made_for_it_that_it_left_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gc

    (tmp_path / "runs").mkdir()
    SQLiteLogger(tmp_path / "runs" / "new" / "deeper" / "a.sqlite", run="r")
    gc.collect()
    assert list(tmp_path.rglob("*")) == [tmp_path / "runs"]  # it was there before

    SQLiteLogger(tmp_path / "made" / "a.sqlite", run="r").abandon()
    assert not (tmp_path / "made").exists()

    # A relative path: removed where it was made, whatever the working
    # directory is by then (another's folders of that name left alone).
    made, elsewhere = tmp_path / "made_here", tmp_path / "elsewhere"
    made.mkdir()
    (elsewhere / "runs" / "new").mkdir(parents=True)
    monkeypatch.chdir(made)
    relative = SQLiteLogger(Path("runs") / "new" / "a.sqlite", run="r")
    monkeypatch.chdir(elsewhere)
    relative.abandon()
    monkeypatch.chdir(tmp_path)
    assert list(made.iterdir()) == []
    assert (elsewhere / "runs" / "new").is_dir()
    made.rmdir()
    (elsewhere / "runs" / "new").rmdir()
    (elsewhere / "runs").rmdir()
    elsewhere.rmdir()

    shared = tmp_path / "shared" / "a.sqlite"
    logger = SQLiteLogger(shared, run="r")
    (shared.parent / "notes.txt").write_text("another's file")
    logger.abandon()
    assert sorted(path.name for path in tmp_path.rglob("*")) == [
        "notes.txt",
        "runs",
        "shared",
    ]
