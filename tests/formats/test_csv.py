"""The CSV format (``rlpulse.formats.csv``) read back: its header, its blank lines, a row torn by a crash or cut short, a row that is none.

Writing it, and removing a torn row before appending, are ``tests/sinks/test_csv.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rlpulse import CSVLogger, Record, read
from rlpulse.formats import RunFileError, RunFileWarning
from rlpulse.naming import Kind
from tests.support import TWO_PAYLOADS, write_two_payloads


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
