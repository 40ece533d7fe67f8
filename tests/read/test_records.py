"""rlpulse.read and list_runs: any file sink's output back as records."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from rlpulse import CSVLogger, JSONLLogger, Record, SQLiteLogger, read
from rlpulse.naming import Kind, Payload
from rlpulse.read.records import RunFileError, list_runs
from tests.support import FILE_SINKS, TWO_PAYLOADS, write_two_payloads


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


def test_list_runs_names_runs_oldest_first(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    for run in ("b", "a", "c"):
        SQLiteLogger(path, run=run).close()

    assert list_runs(path) == ["b", "a", "c"]


@pytest.mark.parametrize(
    ("file_name", "kind"), [("metrics.csv", "CSV"), ("metrics.jsonl", "JSON lines")]
)
def test_list_runs_of_a_line_file_says_it_holds_one_run_and_how_to_read_it(
    tmp_path: Path, file_name: str, kind: str
) -> None:
    path = tmp_path / file_name
    write_two_payloads(path, FILE_SINKS[file_name])

    with pytest.raises(
        RunFileError, match=f"is a {kind} file, which holds one run.*rlpulse.read"
    ):
        list_runs(path)


def test_list_runs_refuses_a_file_of_another_kind(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not metrics\n")

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
def test_a_resumed_run_keeps_its_kinds(tmp_path: Path, file_name: str) -> None:
    path = tmp_path / file_name
    log_known_kinds(path)
    with file_sink(path, resume=True) as sink:
        sink.log_payloads([Payload({"monitor/polls": 9.0}, 3, 3.0, KNOWN_KINDS)])

    polls = [record.kind for record in read(path) if record.name == "monitor/polls"]
    assert polls == [Kind.COUNTER] * 3
