"""The JSON lines format (``rlpulse.formats.jsonl``) read back: a payload's step, its blank lines, a line torn by a crash, a line that is no payload.

Writing it, and removing a torn line before appending, are ``tests/sinks/test_jsonl.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rlpulse import JSONLLogger, Record, read
from rlpulse.formats import RunFileError, RunFileWarning
from rlpulse.naming import Kind
from tests.support import TWO_PAYLOADS, write_two_payloads


def test_a_jsonl_file_whose_first_line_is_no_payload_raises_at_the_call(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text("this is not json\n")

    with pytest.raises(RunFileError, match="line 1 is not an rlpulse payload"):
        read(path)


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
