"""CSVLogger: one long-format file, read back raw and through rlpulse.read."""

from __future__ import annotations

import csv
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import rlpulse
from rlpulse import CSVLogger, JSONLLogger, Record, RunExistsError, SQLiteLogger, read
from rlpulse.naming import Kind
from rlpulse.read.records import RunFileError


def csv_rows(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as file:
        return list(csv.reader(file))


def test_each_metric_is_one_row_under_the_header(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    with CSVLogger(path) as sink:
        sink.log_metrics(
            {"collector/frames": 96.0, "collector/batches": 3.0}, step=3, timestamp=10.5
        )
        sink.log_metrics({"buffer/size": 5.0}, timestamp=11.0)

    assert csv_rows(path) == [
        ["wall_time", "step", "name", "value", "kind"],
        ["10.5", "3", "collector/frames", "96.0", "counter"],
        ["10.5", "3", "collector/batches", "3.0", "counter"],
        ["11.0", "", "buffer/size", "5.0", "gauge"],
    ]


def test_payloads_are_read_back_with_step_and_timestamp(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    with CSVLogger(path) as sink:
        sink.log_metrics({"collector/frames": 96.0}, step=3, timestamp=10.5)
        sink.log_metrics({"buffer/size": 5.0}, timestamp=11.0)

    assert list(read(path)) == [
        Record(10.5, 3, "collector/frames", 96.0, Kind.COUNTER),
        Record(11.0, None, "buffer/size", 5.0, Kind.GAUGE),
    ]


def test_values_and_timestamps_round_trip_exactly(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    wall_time = 1_700_000_000.123456
    values = {"x/third": 1 / 3, "x/tiny": 1e-300, "x/inf": -math.inf}
    with CSVLogger(path) as sink:
        sink.log_metrics(values, timestamp=wall_time)

    records = list(read(path))
    assert {record.name: record.value for record in records} == values
    assert {record.wall_time for record in records} == {wall_time}


def test_nan_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    with CSVLogger(path) as sink:
        sink.log_metrics({"x/nan": math.nan})

    (record,) = read(path)
    assert math.isnan(record.value)


@pytest.mark.parametrize(
    "name",
    [
        "comma,name",
        'quote"name',
        '"quoted"',
        "new\nline",
        "carriage\rreturn",
        " padded ",
        "",
    ],
)
def test_any_metric_name_round_trips(tmp_path: Path, name: str) -> None:
    path = tmp_path / "metrics.csv"
    with CSVLogger(path) as sink:
        sink.log_metrics({name: 1.0, "after": 2.0}, step=1)

    assert [record.name for record in read(path)] == [name, "after"]
    assert [row[2] for row in csv_rows(path)[1:]] == [name, "after"]


def test_resuming_appends_without_a_second_header(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    with CSVLogger(path) as sink:
        sink.log_metrics({"x/v": 1.0}, timestamp=1.0)
    with CSVLogger(path, resume=True) as sink:
        sink.log_metrics({"x/v": 2.0}, timestamp=2.0)

    rows = csv_rows(path)
    assert rows.count(["wall_time", "step", "name", "value", "kind"]) == 1
    assert [record.value for record in read(path)] == [1.0, 2.0]


def test_each_payload_is_in_the_file_before_log_metrics_returns(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    with CSVLogger(path) as sink:
        for count in range(1, 4):
            sink.log_metrics({"x/v": float(count)})
            assert [record.value for record in read(path)] == [
                float(v) for v in range(1, count + 1)
            ]


def test_empty_payload_writes_no_row(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    with CSVLogger(path) as sink:
        sink.log_metrics({})

    assert csv_rows(path) == [["wall_time", "step", "name", "value", "kind"]]
    assert list(read(path)) == []


def test_timestamp_defaults_to_the_time_of_the_call(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    before = time.time()
    with CSVLogger(path) as sink:
        sink.log_metrics({"x/v": 1.0})
    after = time.time()

    (record,) = read(path)
    assert before <= record.wall_time <= after


def test_reopening_after_a_torn_write_removes_the_torn_row(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    with CSVLogger(path) as sink:
        sink.log_metrics({"x/v": 1.0}, timestamp=1.0)
    with open(path, "a", encoding="utf-8") as file:
        file.write("2.0,,x/v,3.14")

    with CSVLogger(path, resume=True) as sink:
        sink.log_metrics({"x/v": 4.0}, timestamp=4.0)

    assert [(record.wall_time, record.value) for record in read(path)] == [
        (1.0, 1.0),
        (4.0, 4.0),
    ]


@pytest.mark.parametrize(
    "torn_after",
    [
        b'2.0,2,"multi\n',  # a crash just after the newline inside a name
        b'2.0,2,"multi\nline\n',  # ... or after its second one
        b'2.0,2,"multi\nline",',  # ... or after the name's closing quote
    ],
)
def test_reopening_after_a_row_torn_inside_a_quoted_name_removes_the_whole_row(
    tmp_path: Path, torn_after: bytes
) -> None:
    path = tmp_path / "metrics.csv"
    before = {"ok": 1.0, 'a "quoted", odd\nname': 1.5, "x,y": 1.75}
    with CSVLogger(path) as sink:
        sink.log_metrics(before, step=1, timestamp=1.0)
        sink.log_metrics({"multi\nline\nname": 2.0}, step=2, timestamp=2.0)
    data = path.read_bytes()
    path.write_bytes(data[: data.index(b"2.0,2,")] + torn_after)

    with CSVLogger(path, resume=True) as sink:
        sink.log_metrics({"after": 3.0}, step=3, timestamp=3.0)
        sink.log_metrics({"after,2": 4.0}, step=4, timestamp=4.0)

    assert [(r.name, r.value) for r in read(path)] == [
        *before.items(),
        ("after", 3.0),
        ("after,2", 4.0),
    ]


def test_reopening_a_header_and_a_row_torn_inside_its_name_keeps_the_header(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.csv"
    path.write_bytes(b'wall_time,step,name,value\n2.0,2,"multi\n')

    with CSVLogger(path, resume=True) as sink:
        sink.log_metrics({"x/v": 1.0}, timestamp=1.0)

    assert path.read_bytes() == b"wall_time,step,name,value\n1.0,,x/v,1.0\n"


def test_reopening_a_file_torn_inside_its_header_starts_it_afresh(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("wall_time,st")

    with CSVLogger(path) as sink:
        sink.log_metrics({"x/v": 1.0}, timestamp=1.0)

    assert list(read(path)) == [Record(1.0, None, "x/v", 1.0, Kind.GAUGE)]


def test_existing_file_with_another_header_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("step,value\n1,2.0\n")

    with pytest.raises(RunFileError, match="not an rlpulse CSV file"):
        CSVLogger(path)
    assert path.read_text() == "step,value\n1,2.0\n"


@pytest.mark.parametrize(
    "content",
    [b"x", b"line 1\nline 2", b"SQLite format 3\x00" + bytes(range(256)) * 40],
    ids=["one line without a newline", "a last line without one", "a SQLite file"],
)
def test_a_file_of_another_kind_is_refused_and_left_byte_for_byte(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(content)

    with pytest.raises(RunFileError, match="left as it is"):
        CSVLogger(path)
    assert path.read_bytes() == content


def test_payloads_logged_from_other_threads_are_all_written_whole(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.csv"
    payload = {f"x/metric_{index}": float(index) for index in range(20)}
    with CSVLogger(path) as sink:

        def log_payloads() -> None:
            for step in range(50):
                sink.log_metrics(payload, step=step)

        threads = [threading.Thread(target=log_payloads) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)

    records = list(read(path))
    assert len(records) == 4 * 50 * 20
    for start in range(0, len(records), 20):
        assert [record.name for record in records[start : start + 20]] == list(payload)


def test_close_twice_is_harmless(tmp_path: Path) -> None:
    sink = CSVLogger(tmp_path / "metrics.csv")
    sink.close()
    sink.close()


def test_logging_after_close_raises_naming_the_file(tmp_path: Path) -> None:
    sink = CSVLogger(tmp_path / "metrics.csv")
    sink.close()

    with pytest.raises(RuntimeError, match="closed") as error:
        sink.log_metrics({"x/v": 1.0})
    assert str(tmp_path) in str(error.value)
    with pytest.raises(RuntimeError, match="closed"):
        sink.flush()


def test_flush_keeps_the_logger_usable(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    with CSVLogger(path) as sink:
        sink.log_metrics({"x/v": 1.0})
        sink.flush()
        sink.log_metrics({"x/v": 2.0})

    assert [record.value for record in read(path)] == [1.0, 2.0]


def test_logger_exposes_its_path(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    with CSVLogger(str(path)) as sink:
        assert sink.path == path
        assert repr(sink) == f"CSVLogger({str(path)!r})"


def test_missing_parent_directories_are_created(tmp_path: Path) -> None:
    path = tmp_path / "runs" / "today" / "metrics.csv"
    CSVLogger(path).close()

    assert csv_rows(path) == [["wall_time", "step", "name", "value", "kind"]]


def test_directory_as_path_raises_naming_it(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError, match=str(tmp_path)):
        CSVLogger(tmp_path)


def test_path_under_a_file_raises_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "not_a_directory"
    blocker.write_text("")

    with pytest.raises(OSError, match=r"not_a_directory/metrics\.csv"):
        CSVLogger(blocker / "metrics.csv")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_file_without_write_permission_raises_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("wall_time,step,name,value\n")
    path.chmod(0o400)

    with pytest.raises(PermissionError, match=r"metrics\.csv"):
        CSVLogger(path)


def test_a_batch_of_payloads_is_appended_in_order_and_read_back(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.csv"
    with CSVLogger(path) as sink:
        sink.log_metrics({"buffer/size": 1.0}, step=1, timestamp=1.0)
        sink.log_batch(
            [
                ({"buffer/size": 2.0, "buffer/writes": 4.0}, 2, 2.0),
                ({}, 3, 3.0),
                ({"buffer/size": 5.0}, None, 4.0),
            ]
        )
        sink.log_batch([])

    assert list(read(path)) == [
        Record(1.0, 1, "buffer/size", 1.0, Kind.GAUGE),
        Record(2.0, 2, "buffer/size", 2.0, Kind.GAUGE),
        Record(2.0, 2, "buffer/writes", 4.0, Kind.GAUGE),
        Record(4.0, None, "buffer/size", 5.0, Kind.GAUGE),
    ]


def test_a_batch_after_close_raises(tmp_path: Path) -> None:
    sink = CSVLogger(tmp_path / "metrics.csv")
    sink.close()
    with pytest.raises(RuntimeError, match="is closed"):
        sink.log_batch([({"buffer/size": 1.0}, 1, 1.0)])


def test_a_name_longer_than_a_csv_reader_takes_is_refused_and_nothing_written(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.csv"
    long_name = "w/" + "x" * csv.field_size_limit()
    with CSVLogger(path) as sink:
        sink.log_metrics({"w/ok": 1.0}, step=1, timestamp=1.0)
        with pytest.raises(ValueError, match="over the 131,072 a CSV reader takes"):
            sink.log_metrics({"w/fine": 2.0, long_name: 2.0}, step=2, timestamp=2.0)
        sink.log_metrics({"w/ok": 3.0}, step=3, timestamp=3.0)

    assert [(r.step, r.name) for r in read(path)] == [(1, "w/ok"), (3, "w/ok")]


def test_a_row_a_csv_reader_cannot_take_is_a_run_file_error_naming_its_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text(
        "wall_time,step,name,value\n1.0,1,w/ok,1.0\n"
        f"2.0,2,w/{'x' * csv.field_size_limit()},2.0\n"
    )

    with pytest.raises(RunFileError, match="line 3 is not a CSV row rlpulse can read"):
        list(read(path))


def test_a_file_holding_a_run_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    with CSVLogger(path) as sink:
        sink.log_metrics({"x/v": 1.0}, timestamp=1.0)
    before = path.read_bytes()

    with pytest.raises(RunExistsError) as refused:
        CSVLogger(path)

    assert f"{path} already holds a run" in str(refused.value)
    assert "log to a new path" in str(refused.value)
    assert "resume=True" in str(refused.value)
    assert path.read_bytes() == before


def test_a_file_holding_only_the_header_is_no_run_and_is_written(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.csv"
    CSVLogger(path).close()

    with CSVLogger(path) as sink:
        sink.log_metrics({"x/v": 1.0}, timestamp=1.0)

    assert list(read(path)) == [Record(1.0, None, "x/v", 1.0, Kind.GAUGE)]


def test_a_file_of_rlpulse_0_1_0_is_resumed_in_its_own_columns(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("wall_time,step,name,value\n1.0,1,c/frames,10.0\n")

    with CSVLogger(path, resume=True) as sink:
        sink.log_metrics({"c/frames": 20.0}, step=2, timestamp=2.0)

    assert csv_rows(path)[2] == ["2.0", "2", "c/frames", "20.0"]
    assert [(r.value, r.kind) for r in read(path)] == [
        (10.0, Kind.COUNTER),
        (20.0, Kind.COUNTER),
    ]


def test_a_kind_this_version_does_not_know_is_guessed_from_the_name(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.csv"
    path.write_text("wall_time,step,name,value,kind\n1.0,1,c/frames,10.0,histogram\n")

    assert [record.kind for record in read(path)] == [Kind.COUNTER]


def test_a_file_another_logger_writes_is_refused_and_left_as_it_is(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.csv"
    with CSVLogger(path) as first:
        before = path.read_bytes()
        # Not even with resume=True: the two would cut each other's rows.
        for resume in (False, True):
            with pytest.raises(RunFileError, match="another logger is writing it"):
                CSVLogger(path, resume=resume)
        first.log_metrics({"x/v": 1.0}, timestamp=1.0)
    assert path.read_bytes() == before + b"1.0,,x/v,1.0,gauge\n"
    with CSVLogger(path, resume=True) as again:
        again.log_metrics({"x/v": 2.0}, timestamp=2.0)
    assert [record.value for record in read(path)] == [1.0, 2.0]


def test_a_file_a_logger_of_another_process_writes_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from rlpulse import CSVLogger\n"
            f"sink = CSVLogger({str(path)!r}); print('open', flush=True)\n"
            "sys.stdin.read(); sink.log_metrics({'x/v': 1.0}, timestamp=1.0)",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline() == "open\n"
        with pytest.raises(RunFileError, match="another logger is writing it"):
            CSVLogger(path, resume=True)
    finally:
        writer.communicate("", timeout=30)
    assert writer.returncode == 0
    assert [record.value for record in read(path)] == [1.0]


@pytest.mark.parametrize(
    ("writer", "sink", "said"),
    [
        ("sqlite", CSVLogger, "(a SQLite database, as SQLiteLogger writes)"),
        ("jsonl", CSVLogger, "(JSON lines, as JSONLLogger writes)"),
        ("sqlite", JSONLLogger, "(a SQLite database, as SQLiteLogger writes)"),
        ("csv", JSONLLogger, "(a CSV file, as CSVLogger writes)"),
        ("csv", SQLiteLogger, "not a database but a CSV file, as CSVLogger writes"),
        ("jsonl", SQLiteLogger, "not a database but JSON lines, as JSONLLogger writes"),
    ],
)
def test_a_file_another_sink_wrote_is_refused_naming_that_sink(
    tmp_path: Path, writer: str, sink: type[Any], said: str
) -> None:
    path = tmp_path / "metrics"
    with rlpulse.open_sink(f"{writer}:{path}") as first:
        first.log_metrics({"x/v": 1.0}, timestamp=1.0)
    before = path.read_bytes()

    with pytest.raises(RunFileError) as refused:
        sink(path, resume=True) if sink is not SQLiteLogger else sink(path)

    assert said in str(refused.value)
    assert "\\x00" not in str(refused.value)  # no raw header bytes
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("sink", "first_line", "said"),
    [
        (CSVLogger, "wall_time,step,name,value,extra", "its first line is b'wall_time"),
        (JSONLLogger, '{"wall_time": 1, "x": 2}', "its first line is not a"),
    ],
)
def test_a_file_like_the_sinks_own_but_not_one_is_refused_saying_what_it_holds(
    tmp_path: Path, sink: type[Any], first_line: str, said: str
) -> None:
    path = tmp_path / "metrics"
    path.write_text(first_line + "\n1,2,3\n")

    with pytest.raises(RunFileError) as refused:
        sink(path, resume=True)

    assert said in str(refused.value)
    assert "as CSVLogger writes" not in str(refused.value)
    assert "as JSONLLogger writes" not in str(refused.value)
