"""JSONLLogger: one JSON object per payload, read back raw and through rlpulse.read."""

from __future__ import annotations

import json
import math
import os
import threading
import time
from pathlib import Path

import pytest

from rlpulse import JSONLLogger, Record, RunExistsError, read
from rlpulse.naming import Kind, Payload
from rlpulse.read.records import RunFileError


def json_lines(path: Path) -> list[object]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_each_payload_is_one_json_object_on_its_own_line(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    with JSONLLogger(path) as sink:
        sink.log_metrics(
            {"collector/frames": 96.0, "collector/batches": 3.0}, step=3, timestamp=10.5
        )
        sink.log_metrics({"buffer/size": 5.0}, timestamp=11.0)

    assert json_lines(path) == [
        {
            "wall_time": 10.5,
            "step": 3,
            "metrics": {"collector/frames": 96.0, "collector/batches": 3.0},
            "kinds": {"collector/frames": "counter", "collector/batches": "counter"},
        },
        {
            "wall_time": 11.0,
            "step": None,
            "metrics": {"buffer/size": 5.0},
            "kinds": {"buffer/size": "gauge"},
        },
    ]


def test_payloads_are_read_back_with_step_and_timestamp(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    with JSONLLogger(path) as sink:
        sink.log_metrics({"collector/frames": 96.0}, step=3, timestamp=10.5)
        sink.log_metrics({"buffer/size": 5.0}, timestamp=11.0)

    assert list(read(path)) == [
        Record(10.5, 3, "collector/frames", 96.0, Kind.COUNTER),
        Record(11.0, None, "buffer/size", 5.0, Kind.GAUGE),
    ]


def test_values_of_any_python_number_type_are_written_as_floats(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    with JSONLLogger(path) as sink:
        sink.log_metrics({"x/int": 3, "x/bool": True, "x/nan": math.nan}, step=2)  # type: ignore[dict-item]

    values = {record.name: record.value for record in read(path)}
    assert (values["x/int"], values["x/bool"]) == (3.0, 1.0)
    assert math.isnan(values["x/nan"])


def test_empty_payload_is_still_one_line(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    with JSONLLogger(path) as sink:
        sink.log_metrics({}, step=1, timestamp=1.0)

    assert json_lines(path) == [{"wall_time": 1.0, "step": 1, "metrics": {}}]
    assert list(read(path)) == []


def test_resuming_appends(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    with JSONLLogger(path) as sink:
        sink.log_metrics({"x/v": 1.0})
    with JSONLLogger(path, resume=True) as sink:
        sink.log_metrics({"x/v": 2.0})

    assert [record.value for record in read(path)] == [1.0, 2.0]


def test_each_payload_is_in_the_file_before_log_metrics_returns(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    with JSONLLogger(path) as sink:
        for count in range(1, 4):
            sink.log_metrics({"x/v": float(count)})
            assert len(json_lines(path)) == count


def test_timestamp_defaults_to_the_time_of_the_call(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    before = time.time()
    with JSONLLogger(path) as sink:
        sink.log_metrics({"x/v": 1.0})
    after = time.time()

    (record,) = read(path)
    assert before <= record.wall_time <= after


def test_reopening_after_a_torn_write_removes_the_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    with JSONLLogger(path) as sink:
        sink.log_metrics({"x/v": 1.0}, timestamp=1.0)
    with open(path, "a", encoding="utf-8") as file:
        file.write('{"wall_time": 2.0, "step": null, "metrics": {"x/v"')

    with JSONLLogger(path, resume=True) as sink:
        sink.log_metrics({"x/v": 3.0}, timestamp=3.0)

    assert [record.wall_time for record in read(path)] == [1.0, 3.0]


def test_existing_file_that_is_not_json_lines_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text("wall_time,step,name,value\n")

    with pytest.raises(RunFileError, match="not an rlpulse JSON lines file"):
        JSONLLogger(path)
    assert path.read_text() == "wall_time,step,name,value\n"


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
        JSONLLogger(path)
    assert path.read_bytes() == content


def test_a_first_payload_torn_by_a_crash_is_removed_on_reopening(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"wall_time": 2.0, "step": null, "metr')

    with JSONLLogger(path) as sink:
        sink.log_metrics({"x/v": 3.0}, timestamp=3.0)

    assert [record.wall_time for record in read(path)] == [3.0]


def test_payloads_logged_from_other_threads_are_all_written_whole(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.jsonl"
    payload = {f"x/metric_{index}": float(index) for index in range(20)}
    with JSONLLogger(path) as sink:

        def log_payloads() -> None:
            for step in range(50):
                sink.log_metrics(payload, step=step)

        threads = [threading.Thread(target=log_payloads) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)

    lines = json_lines(path)
    assert len(lines) == 200
    assert all(line["metrics"] == payload for line in lines)  # type: ignore[index]


def test_close_twice_is_harmless(tmp_path: Path) -> None:
    sink = JSONLLogger(tmp_path / "metrics.jsonl")
    sink.close()
    sink.close()


def test_logging_after_close_raises_naming_the_file(tmp_path: Path) -> None:
    sink = JSONLLogger(tmp_path / "metrics.jsonl")
    sink.close()

    with pytest.raises(RuntimeError, match="closed") as error:
        sink.log_metrics({"x/v": 1.0})
    assert str(tmp_path) in str(error.value)
    with pytest.raises(RuntimeError, match="closed"):
        sink.flush()


def test_flush_keeps_the_logger_usable(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    with JSONLLogger(path) as sink:
        sink.log_metrics({"x/v": 1.0})
        sink.flush()
        sink.log_metrics({"x/v": 2.0})

    assert [record.value for record in read(path)] == [1.0, 2.0]


def test_logger_exposes_its_path(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    with JSONLLogger(str(path)) as sink:
        assert sink.path == path
        assert repr(sink) == f"JSONLLogger({str(path)!r})"


def test_missing_parent_directories_are_created(tmp_path: Path) -> None:
    path = tmp_path / "runs" / "today" / "metrics.jsonl"
    JSONLLogger(path).close()

    assert path.is_file()


def test_directory_as_path_raises_naming_it(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError, match=str(tmp_path)):
        JSONLLogger(tmp_path)


def test_path_under_a_file_raises_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "not_a_directory"
    blocker.write_text("")

    with pytest.raises(OSError, match=r"not_a_directory/metrics\.jsonl"):
        JSONLLogger(blocker / "metrics.jsonl")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_file_without_write_permission_raises_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text("")
    path.chmod(0o400)

    with pytest.raises(PermissionError, match=r"metrics\.jsonl"):
        JSONLLogger(path)


def test_a_batch_of_payloads_is_one_line_each_in_order(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    before = time.time()
    with JSONLLogger(path) as sink:
        sink.log_batch(
            [
                ({"buffer/size": 2.0}, 2, 2.0),
                ({"buffer/size": 3.0, "buffer/writes": 1.0}, None, None),
            ]
        )

    first, second = json_lines(path)
    assert first == {
        "wall_time": 2.0,
        "step": 2,
        "metrics": {"buffer/size": 2.0},
        "kinds": {"buffer/size": "gauge"},
    }
    assert isinstance(second, dict)
    assert second["step"] is None
    assert second["metrics"] == {"buffer/size": 3.0, "buffer/writes": 1.0}
    assert second["kinds"] == {"buffer/writes": "gauge"}
    assert before <= second["wall_time"] <= time.time()
    assert [record.value for record in read(path)] == [2.0, 3.0, 1.0]


def test_a_file_holding_a_run_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    with JSONLLogger(path) as sink:
        sink.log_metrics({"x/v": 1.0}, timestamp=1.0)
    before = path.read_bytes()

    with pytest.raises(RunExistsError, match=r"already holds a run.*resume=True"):
        JSONLLogger(path)

    assert path.read_bytes() == before


def test_an_empty_file_is_no_run_and_is_written(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.touch()

    with JSONLLogger(path) as sink:
        sink.log_metrics({"x/v": 1.0}, timestamp=1.0)

    assert [record.value for record in read(path)] == [1.0]


def test_a_metrics_kind_is_written_on_the_first_line_that_holds_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.jsonl"
    kinds = {"m/polls": Kind.COUNTER, "m/size": Kind.GAUGE}
    with JSONLLogger(path) as sink:
        sink.log_payloads([Payload({"m/polls": 1.0}, 1, 1.0, kinds)])
        sink.log_payloads(
            [
                Payload({"m/polls": 2.0, "m/size": 3.0}, 2, 2.0, kinds),
                Payload({"m/polls": 3.0, "m/size": 4.0}, 3, 3.0, kinds),
            ]
        )

    declared = [line.get("kinds") for line in json_lines(path)]  # type: ignore[attr-defined]
    assert declared == [{"m/polls": "counter"}, {"m/size": "gauge"}, None]
    assert {record.kind for record in read(path)} == {Kind.COUNTER, Kind.GAUGE}


def test_a_file_of_rlpulse_0_1_0_resumed_reads_with_its_old_kinds_guessed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"wall_time": 1.0, "step": 1, "metrics": {"m/polls": 1.0}}\n')

    with JSONLLogger(path, resume=True) as sink:
        sink.log_payloads(
            [Payload({"m/polls": 2.0}, 2, 2.0, {"m/polls": Kind.COUNTER})]
        )

    # The line written before kinds were stored: its kind guessed from the name.
    assert [record.kind for record in read(path)] == [Kind.GAUGE, Kind.COUNTER]


def test_a_file_another_logger_writes_is_refused_and_left_as_it_is(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.jsonl"
    with JSONLLogger(path) as first:
        first.log_metrics({"x/v": 1.0}, timestamp=1.0)
        before = path.read_bytes()
        with pytest.raises(RunFileError, match="another logger is writing it"):
            JSONLLogger(path, resume=True)
        assert path.read_bytes() == before
