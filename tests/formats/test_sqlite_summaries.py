"""A SQLite run's summaries, kept by the writer: a run in aggregate is the same with them as from its records, whoever wrote its rows and however it ended.

Real files written by ``SQLiteLogger``, by a second logger resuming the
run, by a process killed with ``SIGKILL`` between two updates of the
summaries, and a file of the format before summaries were stored. Each
run is compared, figure for figure, with
:func:`rlpulse.formats.records.aggregate` of its records.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from rlpulse import SQLiteLogger, read_distributions
from rlpulse.distributions import Histogram
from rlpulse.formats import sqlite as sqlite_format
from rlpulse.formats.records import Record, RunAggregate, aggregate
from rlpulse.formats.sqlite import (
    SQLITE_FORMAT_VERSION,
    RunSummaries,
    read_sqlite,
    read_sqlite_aggregate,
    run_infos,
    summarize_run,
)
from rlpulse.naming import Kind, Payload
from rlpulse.read.summary import format_summary, summarize, summarize_file
from tests.fixtures.make_old_sqlite import RUNS as OLD_RUNS
from tests.support import OLD_SQLITE_FILES, copy_of_fixture

ROWS_PER_SUMMARY = 500
"""Summaries brought up to date every this many rows: several times in a short run."""


@pytest.fixture(autouse=True)
def _summaries_every_few_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_format, "ROWS_PER_SUMMARY", ROWS_PER_SUMMARY)


def payload(index: int) -> Payload:
    """Payload ``index`` of a run: a counter reset halfway and NaN now and then, a gauge with NaN and infinities, a metric NaN throughout, one that starts late."""
    frames = 10.0 * (index if index < 600 else index - 600)
    if index % 37 == 0:
        frames = math.nan
    loss = math.sin(index) * 3.5
    if index % 11 == 0:
        loss = math.nan
    elif index % 97 == 0:
        loss = math.inf
    metrics = {
        "collector/frames": frames,
        "collector/frames_per_second": 1000.0 + math.cos(index),
        "learner/loss": loss,
        "learner/grad_norm": math.nan,
    }
    if index >= 700:
        metrics["buffer/writes"] = 0.1 * index
    return Payload(
        metrics,
        index,
        1_700_000_000.0 + index * 0.731,
        {"collector/frames": Kind.COUNTER, "buffer/writes": Kind.COUNTER},
    )


def write(path: Path, indexes: range, *, run: str = "r", resume: bool = False) -> None:
    with SQLiteLogger(path, run=run, resume=resume) as sink:
        for index in indexes:
            sink.log_payloads([payload(index)])


def comparable(run: RunAggregate) -> str:
    """The run's figures as text (NaN equal to NaN), a growth only for counters, as SQLite gives it."""
    metrics = [
        metric
        if metric.kind is Kind.COUNTER
        else metric._replace(growth=0.0, growth_s=0.0)
        for metric in run.metrics
    ]
    return repr(run._replace(metrics=tuple(metrics)))


def from_records(path: Path, run: str | None = None) -> str:
    return comparable(aggregate(read_sqlite(path, run)))


def from_sqlite(path: Path, run: str | None = None) -> str:
    return comparable(read_sqlite_aggregate(path, run))


def summarized_through(path: Path) -> list[tuple[int, int]]:
    with sqlite3.connect(path) as connection:
        return list(connection.execute("SELECT run, through FROM summarized"))


def unsummarized(path: Path, run_id: int = 1) -> int:
    with sqlite3.connect(path) as connection:
        return RunSummaries(connection, run_id).unsummarized


def test_a_run_over_several_summaries_aggregates_as_its_records(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.sqlite"
    write(path, range(1500))

    assert unsummarized(path) == 0
    assert from_sqlite(path) == from_records(path)


def test_the_writer_brings_the_summaries_up_to_date_with_the_batch_after_enough_rows(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.sqlite"
    seen = []
    with SQLiteLogger(path, run="r") as sink:
        for index in range(400):
            sink.log_payloads([payload(index)])
            seen.append(unsummarized(path))
            if index % 50 == 7:
                # Read while written: summaries and the rows after them.
                assert from_sqlite(path) == from_records(path)

    assert max(seen) == ROWS_PER_SUMMARY
    assert seen.count(0) >= 2
    assert 0 < seen[-1] < ROWS_PER_SUMMARY


def test_a_resumed_run_aggregates_its_rows_of_both_writers(tmp_path: Path) -> None:
    path = tmp_path / "run.sqlite"
    write(path, range(0, 650))
    write(path, range(650, 1300), resume=True)

    assert unsummarized(path) == 0
    assert from_sqlite(path) == from_records(path)


def test_runs_of_one_file_keep_their_summaries_apart(tmp_path: Path) -> None:
    path = tmp_path / "run.sqlite"
    write(path, range(0, 900), run="first")
    write(path, range(300, 800), run="second")

    assert from_sqlite(path, "first") == from_records(path, "first")
    assert from_sqlite(path, "second") == from_records(path, "second")
    assert [info.records for info in run_infos(path)] == [3800, 2100]


WRITER = """
import sys
from rlpulse import SQLiteLogger, read_distributions
from rlpulse.distributions import Histogram
from rlpulse.formats import sqlite as sqlite_format
from tests.formats.test_sqlite_summaries import ROWS_PER_SUMMARY, payload

sqlite_format.ROWS_PER_SUMMARY = ROWS_PER_SUMMARY
sink = SQLiteLogger(sys.argv[1], run="r", resume=True)
for index in range(int(sys.argv[2])):
    sink.log_payloads([payload(index)])
print("written", flush=True)
sys.stdin.read()  # killed meanwhile
"""


def test_a_writer_killed_between_summaries_leaves_a_run_read_whole(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.sqlite"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), "777"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline() == "written\n"
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait(timeout=30)
    assert writer.returncode == -signal.SIGKILL

    assert summarized_through(path)
    assert unsummarized(path) > 0
    assert from_sqlite(path) == from_records(path)
    with SQLiteLogger(path, run="r", resume=True) as sink:
        sink.log_payloads([payload(index) for index in range(777, 900)])
    assert unsummarized(path) == 0
    assert from_sqlite(path) == from_records(path)


def test_a_file_of_the_version_before_summaries_reads_the_same_and_gains_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.sqlite"
    write(path, range(1000))
    expected = from_sqlite(path)
    infos = run_infos(path)
    with sqlite3.connect(path) as connection:  # as rlpulse wrote it before
        connection.execute("DROP TABLE summaries")
        connection.execute("DROP TABLE summarized")
        connection.execute("PRAGMA user_version = 2")

    assert from_sqlite(path) == expected == from_records(path)
    assert run_infos(path) == infos
    write(path, range(1000, 1100), resume=True)
    assert from_sqlite(path) == from_records(path)
    assert unsummarized(path) == 0
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA user_version").fetchone() == (
            SQLITE_FORMAT_VERSION,
        )


def more_of_the_tuned_run() -> list[Payload]:
    """Three more polls of run ``tuned`` of an old file, as today's monitor logs them: its counters on from where they stopped, each interval's histogram of losses."""
    start = OLD_RUNS["tuned"] + 12.0
    payloads = []
    for poll in range(1, 4):
        losses = Histogram()
        for index in range(10):
            losses.add(0.2 + 0.01 * index * poll)
        metrics = {
            "collector/frames": 8000.0 + 1600.0 * poll,
            "collector/frames_per_second": 800.0,
            "buffer/size": 2400.0,
            "learner/updates": 50.0 + 10.0 * poll,
            "learner/loss_count": 200.0 + 10.0 * poll,
            "learner/loss_sum": 87.85 + 3.0 * poll,
            "learner/loss_p50": losses.quantile(0.5),
        }
        kinds = {
            "collector/frames": Kind.COUNTER,
            "collector/frames_per_second": Kind.RATE,
            "learner/updates": Kind.COUNTER,
            "learner/loss_count": Kind.COUNTER,
            "learner/loss_sum": Kind.COUNTER,
        }
        payloads.append(
            Payload(
                metrics,
                int(metrics["collector/frames"]),
                start + 2.0 * poll,
                kinds,
                {"learner/loss": losses},
            )
        )
    return payloads


@pytest.mark.parametrize("file_name", OLD_SQLITE_FILES)
def test_a_run_of_format_version_1_or_2_resumed_shows_its_old_and_new_rows_as_its_records(
    tmp_path: Path, file_name: str
) -> None:
    path = copy_of_fixture(file_name, tmp_path)
    baseline = from_sqlite(path, "baseline")

    with SQLiteLogger(path, run="tuned", resume=True) as sink:
        sink.log_payloads(more_of_the_tuned_run())

    with contextlib.closing(sqlite3.connect(path)) as connection:
        assert connection.execute("PRAGMA user_version").fetchone() == (
            SQLITE_FORMAT_VERSION,
        )
    assert from_sqlite(path, "tuned") == from_records(path, "tuned")
    assert from_sqlite(path, "baseline") == baseline == from_records(path, "baseline")
    shown = summarize_file(path, "tuned")
    from_its_records = summarize(
        read_sqlite(path, "tuned"),
        run="tuned",
        source=str(path),
        distributions=read_distributions(path, "tuned"),
    )
    assert format_summary(shown, exact=True) == format_summary(
        from_its_records, exact=True
    )
    assert shown.records == 99 + 3 * 7
    frames = next(m for m in shown.metrics if m.name == "collector/frames")
    assert (frames.minimum, frames.last) == (0.0, 12800.0)
    (losses,) = shown.distributions
    assert losses.count == (200 if file_name == "v2.sqlite" else 0) + 30


def show(path: Path) -> str:
    """What ``rlpulse show --exact`` prints of run ``r``, its file's path left out."""
    text = format_summary(summarize_file(path, "r"), exact=True)
    return text.replace(str(path), "RUN")


def test_resuming_a_long_run_without_summaries_leaves_its_rows_out_of_the_first_batch(
    tmp_path: Path,
) -> None:
    # As a writer killed before storing any summaries leaves a run, or as a
    # file of the version before them reads: 24 times ROWS_PER_SUMMARY rows.
    path = tmp_path / "resumed" / "run.sqlite"
    write(path, range(3000))
    with sqlite3.connect(path) as connection:
        connection.execute("DELETE FROM summaries")
        connection.execute("DELETE FROM summarized")
    whole = tmp_path / "whole" / "run.sqlite"
    write(whole, range(3200))

    with SQLiteLogger(path, run="r", resume=True) as sink:
        sink.log_payloads([payload(3000)])
        # That batch summarised none of the 12,000 rows it found.
        assert summarized_through(path) == []
        assert from_sqlite(path) == from_records(path)
        for index in range(3001, 3200):
            sink.log_payloads([payload(index)])
        # Once the writer's own rows are due, the summaries catch up with
        # a few times ROWS_PER_SUMMARY of the rows after them, not all.
        [(_, through)] = summarized_through(path)
        assert through == 4 * ROWS_PER_SUMMARY
        assert from_sqlite(path) == from_records(path)

    assert unsummarized(path) == 0
    assert from_sqlite(path) == from_records(path)
    assert show(path) == show(whole)


def test_run_infos_count_the_summaries_and_the_rows_after_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.sqlite"
    write(path, range(0, 600), run="first")
    with SQLiteLogger(path, run="empty"):
        pass
    with SQLiteLogger(path, run="second") as sink:
        for index in range(200):
            sink.log_payloads([payload(index)])
        infos = run_infos(path)

    by_name = {info.name: info for info in infos}
    assert [info.name for info in infos] == ["first", "empty", "second"]
    assert by_name["first"].records == 2400
    assert by_name["first"].start_wall_time == 1_700_000_000.0
    assert by_name["first"].end_wall_time == 1_700_000_000.0 + 599 * 0.731
    assert by_name["empty"].records == 0
    assert by_name["second"].records == 800
    assert by_name["second"].end_wall_time == 1_700_000_000.0 + 199 * 0.731


def test_two_writers_appending_to_one_run_at_once_leave_it_read_whole(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.sqlite"
    with (
        SQLiteLogger(path, run="r", resume=True) as first,
        SQLiteLogger(path, run="r", resume=True) as second,
    ):
        for index in range(1000):
            (first if index % 3 else second).log_payloads([payload(index)])
            if index % 250 == 0:
                assert from_sqlite(path) == from_records(path)

    assert unsummarized(path) == 0
    assert from_sqlite(path) == from_records(path)


def test_a_writers_summaries_equal_those_sqlite_computes_from_its_rows(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.sqlite"
    write(path, range(1300))
    with sqlite3.connect(path) as connection:
        kept = list(connection.execute("SELECT * FROM summaries ORDER BY name"))
        connection.execute("DELETE FROM summaries")
        connection.execute("DELETE FROM summarized")
    with sqlite3.connect(path, isolation_level=None) as connection:
        summarize_run(connection, 1)
        computed = list(connection.execute("SELECT * FROM summaries ORDER BY name"))

    assert computed == kept


def counter_at_infinity(index: int) -> Payload:
    """A counter that reaches infinity and stays there (a growth of NaN, as ``inf - inf``), then restarts, NaN now and then."""
    frames = 10.0 * index if index < 200 else math.inf
    if index >= 300:
        frames = -math.inf if index < 320 else 10.0 * (index - 320)
    if index % 41 == 0:
        frames = math.nan
    return Payload(
        {"collector/frames": frames},
        index,
        1_700_000_000.0 + index * 0.5,
        {"collector/frames": Kind.COUNTER},
    )


@pytest.mark.parametrize("writers", [1, 2])
def test_a_counter_that_stays_infinite_grows_as_in_its_records(
    tmp_path: Path, writers: int
) -> None:
    # One writer keeps the summaries itself; two at once have them computed
    # again from the rows, and a reader computes the rows after them either way.
    path = tmp_path / "run.sqlite"
    with (
        SQLiteLogger(path, run="r", resume=True) as first,
        SQLiteLogger(path, run="r", resume=True) as second,
    ):
        sinks = [first, second][:writers]
        for index in range(1200):
            sinks[index % writers].log_payloads([counter_at_infinity(index)])
            if index % 150 == 149:
                assert from_sqlite(path) == from_records(path)

    assert unsummarized(path) == 0
    assert from_sqlite(path) == from_records(path)


def cancelling(index: int) -> Payload:
    """Values whose sum depends on how it is added up: one at a time, in order, as :func:`aggregate` adds them, they cancel to 0 where a compensated sum (SQLite's since 3.43) keeps what each large value swallowed."""
    value = (0.1, 1e16, 1.0, -1e16)[index % 4]
    return Payload(
        {"collector/frames": 10.0 * index + value, "learner/loss": value},
        index,
        1_700_000_000.0 + index * 0.5,
        {"collector/frames": Kind.COUNTER},
    )


@pytest.mark.parametrize("writers", [1, 2])
def test_sums_are_added_up_in_the_order_of_the_records(
    tmp_path: Path, writers: int
) -> None:
    path = tmp_path / "run.sqlite"
    with (
        SQLiteLogger(path, run="r", resume=True) as first,
        SQLiteLogger(path, run="r", resume=True) as second,
    ):
        sinks = [first, second][:writers]
        for index in range(700):
            sinks[index % writers].log_payloads([cancelling(index)])
            if index % 150 == 149:
                assert from_sqlite(path) == from_records(path)

    assert from_sqlite(path) == from_records(path)


def test_a_record_whose_time_is_nan_leaves_the_runs_span_to_the_others() -> None:
    run = aggregate(
        [
            Record(math.nan, None, "a/x", 1.0),
            Record(2.0, None, "a/x", 5.0),
            Record(4.0, None, "b/y", 3.0),
        ]
    )

    assert (run.records, run.start_wall_time, run.end_wall_time) == (3, 2.0, 4.0)


def test_a_batch_stores_its_metrics_kinds_histograms_and_summaries_in_a_few_statements(
    tmp_path: Path,
) -> None:
    # Each statement SQLite runs lets go of the interpreter's lock, which the
    # writer's thread beside a CPU-bound loop then waits for: a statement a
    # row (800 summaries of 100 watches) held a monitor's writer up for a
    # second, and its queue overflowed. A batch of 100 watches' payloads,
    # with a histogram each, whose summaries come due, runs a few.
    from rlpulse.formats.sqlite import create_tables, insert_batch

    observed = Histogram()
    observed.add(0.25)
    batch = [
        Payload(
            {f"w{watch}/{metric}": 1.0 for metric in ("a", "b", "c", "d", "e")},
            1,
            1_700_000_000.0,
            {f"w{watch}/a": Kind.COUNTER},
            {f"w{watch}/latency_s": observed},
        )
        for watch in range(100)
    ]
    with contextlib.closing(
        sqlite3.connect(tmp_path / "run.sqlite", isolation_level=None)
    ) as connection:
        create_tables(connection)
        connection.execute(
            "INSERT INTO runs (id, name, start_wall_time) VALUES (1, 'r', 1.7e9)"
        )
        summaries, kinded = RunSummaries(connection, 1), set[str]()
        per_batch = []
        for _ in range(
            2
        ):  # the kinds stored with the first, summaries due at the second
            statements: list[str] = []
            connection.set_trace_callback(statements.append)
            insert_batch(connection, 1, batch, kinded, summaries)
            connection.set_trace_callback(None)
            per_batch.append(len(statements))
        stored = connection.execute("SELECT COUNT(*) FROM summaries").fetchone()[0]
        kinds = connection.execute("SELECT COUNT(*) FROM kinds").fetchone()[0]
        histograms = connection.execute("SELECT COUNT(*) FROM distributions")

        assert (stored, kinds, histograms.fetchone()[0]) == (500, 500, 200)
    assert max(per_batch) <= 10, per_batch
