"""Following a run file while it is written (``rlpulse.formats.RunFollower``): each look reads only what is new.

Real files written by the real sinks, and by another process at the same
time; torn lines written by hand, as a crash or a write under way leaves
them.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rlpulse import CSVLogger, Event, JSONLLogger, SQLiteLogger
from rlpulse.formats import Followed, RunFileError, RunFollower
from rlpulse.formats.csv import HEADER
from rlpulse.formats.sqlite import SQLiteFollower
from rlpulse.naming import Kind, Payload
from tests.support import locked_by_another_process


def values(follower: RunFollower | SQLiteFollower) -> list[float]:
    return [record.value for record in follower.read_new().records]


@pytest.mark.parametrize(
    ("logger", "name"),
    [(SQLiteLogger, "run.sqlite"), (CSVLogger, "run.csv"), (JSONLLogger, "run.jsonl")],
)
def test_each_look_reads_only_what_was_written_since_the_last(
    tmp_path: Path, logger: type, name: str
) -> None:
    follower = RunFollower(tmp_path / name)
    with logger(tmp_path / name) as sink:
        for value in (1.0, 2.0, 3.0):
            sink.log_metrics({"c/frames": value}, step=1, timestamp=100.0 + value)
        first = values(follower)
        assert values(follower) == []
        sink.log_metrics({"c/frames": 4.0, "b/size": 5.0}, step=2, timestamp=105.0)
        second = follower.read_new().records
    follower.close()

    assert first == [1.0, 2.0, 3.0]
    assert [(record.name, record.value) for record in second] == [
        ("c/frames", 4.0),
        ("b/size", 5.0),
    ]


@pytest.mark.parametrize(
    ("logger", "name"),
    [(SQLiteLogger, "run.sqlite"), (CSVLogger, "run.csv"), (JSONLLogger, "run.jsonl")],
)
def test_records_carry_the_kinds_the_file_stores(
    tmp_path: Path, logger: type, name: str
) -> None:
    follower = RunFollower(tmp_path / name)
    with logger(tmp_path / name) as sink:
        sink.log_payloads(
            [
                Payload(
                    {"c/polls": 1.0, "c/size": 2.0}, 1, 100.0, {"c/polls": Kind.COUNTER}
                )
            ]
        )
        records = follower.read_new().records
    follower.close()

    assert {record.name: record.kind for record in records} == {
        "c/polls": Kind.COUNTER,
        "c/size": Kind.GAUGE,
    }


def test_a_store_that_does_not_exist_yet_is_waited_for_with_a_message(
    tmp_path: Path,
) -> None:
    path = tmp_path / "later" / "run.sqlite"
    follower = RunFollower(path)

    assert follower.read_new().records == []
    assert follower.waiting == (
        f"{path} does not exist yet, nor its folder {path.parent}"
    )
    path.parent.mkdir()
    assert follower.read_new().records == []
    assert follower.waiting == f"{path} does not exist yet"
    with SQLiteLogger(path, run="late") as sink:
        assert follower.read_new().records == []  # no records yet
        sink.log_metrics({"c/frames": 7.0}, timestamp=100.0)
        assert values(follower) == [7.0]
    assert follower.waiting is None
    assert follower.run == "late"
    follower.close()


def test_a_store_another_process_holds_locked_is_waited_for_saying_so(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.sqlite"
    with SQLiteLogger(path, run="first") as sink:
        sink.log_metrics({"c/frames": 2.0}, timestamp=100.0)
    follower = RunFollower(path)

    with locked_by_another_process(path):
        assert values(follower) == []
        assert follower.waiting == (
            f"{path} is locked by another process's write; waiting for it to be let go"
        )
    assert values(follower) == [2.0]
    follower.close()


def test_a_named_run_is_waited_for_until_it_is_created(tmp_path: Path) -> None:
    path = tmp_path / "run.sqlite"
    SQLiteLogger(path, run="first").close()
    follower = RunFollower(path, "second")

    assert values(follower) == []
    assert follower.waiting == f"{path} has no run named 'second' yet; its runs: first"
    with SQLiteLogger(path, run="second") as sink:
        sink.log_metrics({"c/frames": 2.0}, timestamp=100.0)
        assert values(follower) == [2.0]
    follower.close()


def test_sqlite_events_are_followed_as_they_come(tmp_path: Path) -> None:
    path = tmp_path / "run.sqlite"
    follower = RunFollower(path)
    with SQLiteLogger(path) as sink:
        sink.log_event(Event(100.0, "c", "stalled", "no progress", 30.0))
        assert [event.kind for event in follower.read_new().events] == ["stalled"]
        sink.log_event(Event(101.0, "c", "recovered", "moving", 31.0))
        assert [event.kind for event in follower.read_new().events] == ["recovered"]
    follower.close()


def test_a_jsonl_line_still_being_written_is_read_at_the_next_look(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text(
        '{"wall_time": 1.0, "step": 1, "metrics": {"c/frames": 1.0}}\n'
        '{"event": "stalled", "wall_time": 1.5, "watch": "c", "message": "m", "value": 3.0}\n'
        '{"wall_time": 2.0, "step": 2, "metr'
    )
    follower = RunFollower(path)
    first = follower.read_new()
    with open(path, "a") as file:
        file.write('ics": {"c/frames": 2.0}}\n')

    assert [record.value for record in first.records] == [1.0]
    assert [event.kind for event in first.events] == ["stalled"]
    assert values(follower) == [2.0]


def test_a_csv_record_torn_inside_a_quoted_name_is_read_once_whole(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.csv"
    path.write_text(HEADER + '1.0,1,c/frames,1.0,counter\n2.0,2,"c/multi\nline')
    follower = RunFollower(path)
    first = values(follower)
    with open(path, "a") as file:
        file.write('",2.0,gauge\n3.0,3,c/frames,3.0,counter\n')

    records = follower.read_new().records

    assert first == [1.0]
    assert [(record.name, record.value) for record in records] == [
        ("c/multi\nline", 2.0),
        ("c/frames", 3.0),
    ]


def test_a_file_still_without_its_first_line_is_waited_for(tmp_path: Path) -> None:
    path = tmp_path / "run.csv"
    path.write_text("wall_time,st")
    follower = RunFollower(path)

    assert values(follower) == []
    assert follower.waiting == f"{path} has no first line yet"
    path.write_text(HEADER + "1.0,1,c/frames,1.0,counter\n")
    assert values(follower) == [1.0]


def test_a_file_that_is_no_metrics_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello\n")

    with pytest.raises(RunFileError, match="not an rlpulse metrics file"):
        RunFollower(path).read_new()


def test_a_long_run_is_read_in_batches(tmp_path: Path) -> None:
    path = tmp_path / "run.sqlite"
    with SQLiteLogger(path) as sink:
        for index in range(25):
            sink.log_metrics({"c/frames": float(index)}, timestamp=100.0 + index)
    follower = SQLiteFollower(path, None, batch_rows=10)

    looks = [follower.read_new() for _ in range(4)]
    follower.close()

    assert [len(look.records) for look in looks] == [10, 10, 5, 0]
    assert [look.more for look in looks] == [True, True, False, False]
    assert [record.value for look in looks for record in look.records] == [
        float(index) for index in range(25)
    ]


WRITER = textwrap.dedent(
    """
    import sys, time
    from rlpulse import SQLiteLogger
    with SQLiteLogger(sys.argv[1], run="live") as sink:
        for index in range(int(sys.argv[2])):
            sink.log_metrics({"c/frames": float(index)}, step=index)
            time.sleep(0.001)
    """
)


@pytest.mark.timeout(60)
def test_a_store_another_process_is_writing_is_read_whole_once_in_order(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.sqlite"
    count = 2000
    follower = RunFollower(path)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(count)])
    seen: list[float] = []
    looks = 0
    try:
        deadline = time.monotonic() + 50
        while len(seen) < count and time.monotonic() < deadline:
            seen += values(follower)
            looks += 1
            time.sleep(0.01)
    finally:
        writer.wait(timeout=30)
        follower.close()

    assert writer.returncode == 0
    assert seen == [float(index) for index in range(count)]
    assert looks > 1  # it was followed while written, not read at the end


def test_a_json_lines_run_whose_first_payload_is_long_is_followed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.jsonl"
    follower = RunFollower(path, None)
    with JSONLLogger(path) as sink:
        sink.log_metrics({f"w/metric_{index}": 1.0 for index in range(30)}, step=1)
        records = follower.read_new().records
    assert len(records) == 30
    assert follower.waiting is None


def test_a_csv_name_holding_a_carriage_return_does_not_stop_the_follower(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.csv"
    follower = RunFollower(path, None)
    with CSVLogger(path) as sink:
        sink.log_metrics({"w/a\rb": 1.0}, step=1)
        sink.log_metrics({"w/after": 2.0}, step=2)
    names = [record.name for record in follower.read_new().records]
    assert names == ["w/a\rb", "w/after"]


def test_following_the_latest_run_moves_on_to_a_run_started_later_in_the_file(
    tmp_path: Path,
) -> None:
    from rlpulse.read.live import LiveRun

    path = tmp_path / "run.sqlite"
    latest, named = RunFollower(path, None), RunFollower(path, "first")
    live = LiveRun("run")
    with SQLiteLogger(path, run="first") as sink:
        sink.log_metrics({"c/frames": 1.0, "c/old_only": 1.0}, timestamp=100.0)
    for follower in (latest, named):
        assert [r.value for r in follower.read_new().records] == [1.0, 1.0]
    live.add(RunFollower(path, None).read_new())
    with SQLiteLogger(path, run="second") as sink:
        sink.log_metrics({"c/frames": 7.0}, timestamp=200.0)
    moved = latest.read_new()
    assert moved.new_run
    assert [(r.name, r.value) for r in moved.records] == [("c/frames", 7.0)]
    assert latest.run == "second"
    assert not latest.read_new().new_run  # once
    stayed = named.read_new()  # a run asked for by name stays followed
    assert (stayed.records, stayed.new_run, named.run) == ([], False, "first")
    live.add(moved)  # what top keeps forgets the run before
    assert live.value("c/old_only") is None
    assert live.value("c/frames") == 7.0


def write_run(logger: type, path: Path, times: list[float], *, stalled: bool) -> None:
    with logger(path) as sink:
        for step, wall_time in enumerate(times):
            sink.log_metrics(
                {"c/frames": 100.0 * step, "c/old_only": 1.0},
                step=step,
                timestamp=wall_time,
            )
        if stalled:
            sink.log_event(Event(times[-1], "c", "stalled", "no progress", 30.0))


@pytest.mark.parametrize(
    ("logger", "name"),
    [(SQLiteLogger, "run.sqlite"), (CSVLogger, "run.csv"), (JSONLLogger, "run.jsonl")],
)
def test_a_file_deleted_and_written_anew_is_a_new_run_whose_records_alone_are_kept(
    tmp_path: Path, logger: type, name: str
) -> None:
    from rlpulse.read.live import LiveRun

    path = tmp_path / name
    events = logger is not CSVLogger
    write_run(logger, path, [1000.0 + i for i in range(10)], stalled=events)
    follower, live = RunFollower(path), LiveRun("run")
    live.add(follower.read_new())
    for file in tmp_path.iterdir():  # SQLite's -wal and -shm too
        file.unlink()
    assert follower.read_new() == Followed([], [])  # gone: waited for
    with logger(path) as sink:
        sink.log_metrics({"c/frames": 0.0}, step=0, timestamp=5.0)
        sink.log_metrics({"c/frames": 7.0}, step=1, timestamp=6.0)
        replaced = follower.read_new()
    follower.close()

    assert replaced.new_run
    assert [(r.name, r.value) for r in replaced.records] == [
        ("c/frames", 0.0),
        ("c/frames", 7.0),
    ]
    assert not follower.read_new().new_run  # once
    live.add(replaced)
    assert (live.first_time, live.last_time) == (5.0, 6.0)
    assert live.value("c/old_only") is None
    assert list(live.events) == []
    assert live.state("c", now=7.0).streaks == ()


@pytest.mark.parametrize(
    ("logger", "name"), [(CSVLogger, "run.csv"), (JSONLLogger, "run.jsonl")]
)
def test_a_line_file_rewritten_shorter_in_place_is_a_new_run(
    tmp_path: Path, logger: type, name: str
) -> None:
    path = tmp_path / name
    write_run(logger, path, [1000.0, 1001.0, 1002.0], stalled=False)
    follower = RunFollower(path)
    assert not follower.read_new().new_run
    rewritten = tmp_path / f"new-{name}"
    with logger(rewritten) as sink:
        sink.log_metrics({"c/frames": 3.0}, step=0, timestamp=5.0)
    path.write_bytes(rewritten.read_bytes())  # the same file, shorter

    again = follower.read_new()
    assert again.new_run
    assert [record.value for record in again.records] == [3.0]


def test_a_sqlite_file_replaced_while_not_connected_is_read_from_its_start(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.sqlite"
    with SQLiteLogger(path, run="first") as sink:
        for step in range(5):
            sink.log_metrics({"c/frames": float(step)}, timestamp=1000.0 + step)
    latest, named = RunFollower(path), RunFollower(path, "first")
    for follower in (latest, named):
        assert len(follower.read_new().records) == 5
        follower.close()
    for file in tmp_path.iterdir():
        file.unlink()
    with SQLiteLogger(path, run="first") as sink:  # as the run followed by name
        sink.log_metrics({"c/frames": 9.0}, timestamp=2000.0)

    for follower in (latest, named):
        after = follower.read_new()
        follower.close()
        assert after.new_run
        assert [record.value for record in after.records] == [9.0]
    assert (latest.run, named.run) == ("first", "first")


def test_a_sqlite_follower_closed_and_looking_again_reads_on_where_it_stopped(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.sqlite"
    follower = RunFollower(path)
    with SQLiteLogger(path) as sink:
        sink.log_metrics({"c/frames": 1.0}, timestamp=100.0)
        assert values(follower) == [1.0]
        follower.close()
        sink.log_metrics({"c/frames": 2.0}, timestamp=101.0)
        after = follower.read_new()
    follower.close()

    assert [record.value for record in after.records] == [2.0]
    assert not after.new_run
