"""What the line formats share (``rlpulse.formats.lines``): following a line file, a line longer than a look, a file deleted and written anew."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlpulse import CSVLogger, JSONLLogger
from rlpulse.formats import RunFollower
from rlpulse.formats.csv import CSVFollower
from rlpulse.formats.jsonl import JSONLFollower


@pytest.mark.parametrize(
    ("follower_type", "logger", "name"),
    [(JSONLFollower, JSONLLogger, "run.jsonl"), (CSVFollower, CSVLogger, "run.csv")],
)
def test_a_line_longer_than_a_look_is_read_whole_over_several_looks(
    tmp_path: Path, follower_type: type, logger: type, name: str
) -> None:
    path = tmp_path / name
    with logger(path) as sink:
        sink.log_metrics({"w/short": 1.0}, step=1)
        long_payload = {f"w/{'long' * 40}_{index}": 2.0 for index in range(20)}
        sink.log_metrics(long_payload, step=2)
        sink.log_metrics({"w/short": 3.0}, step=3)
    follower = follower_type(path, batch_bytes=64)  # each look shorter than a line

    looks = []
    while not looks or looks[-1].more:
        looks.append(follower.read_new())
        assert len(looks) < 100

    records = [record for look in looks for record in look.records]
    assert [record.value for record in records] == [1.0] + [2.0] * 20 + [3.0]
    assert len(looks) > 2  # the long line took several looks, growing
    assert follower.read_new().records == []
    assert follower._look_bytes == 64  # back to a look's size once read


def test_a_line_file_deleted_is_waited_for_and_one_written_anew_read_from_its_start(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.jsonl"
    follower = RunFollower(path, None)
    with JSONLLogger(path) as sink:
        sink.log_metrics({"w/x": 1.0}, step=1)
    assert [record.value for record in follower.read_new().records] == [1.0]
    path.unlink()
    assert follower.read_new().records == []  # gone: waited for
    assert follower.waiting == f"{path} does not exist yet"
    with JSONLLogger(path) as sink:  # longer than the first: not "shorter"
        for step in range(5):
            sink.log_metrics({"w/x": 10.0 + step, "w/y": 0.0}, step=step)
    assert [r.value for r in follower.read_new().records if r.name == "w/x"] == [
        10.0,
        11.0,
        12.0,
        13.0,
        14.0,
    ]
    assert follower.waiting is None
