"""The CSV format: a long-format file, one ``wall_time,step,name,value,kind`` row per metric.

The header comes once, first. ``step`` is empty for a payload without one;
names are quoted by the usual CSV rules, so any name survives (a newline
in a quoted name too); ``kind`` is the metric's
:class:`~rlpulse.naming.Kind`. A file of rlpulse 0.1.0 has no ``kind``
column (header ``wall_time,step,name,value``): it reads with its kinds
guessed from the names, and is appended to in its own columns.

This module writes rows (:func:`format_rows`), checks an existing file's
header (:func:`has_kinds`), reads files (:func:`read_csv`), follows one
while it is written (:class:`CSVFollower`) and finds where a record torn
by a crash starts (:func:`record_end`).
"""

from __future__ import annotations

import csv
import functools
import io
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

from rlpulse.formats import lines
from rlpulse.formats.lines import LineReader, last_line_end, left_out, with_kinds
from rlpulse.formats.records import Followed, Record, RunFileError, kind_named
from rlpulse.naming import Payload

__all__ = [
    "CSV_FIELDS",
    "CSV_FIELDS_0_1",
    "HEADER",
    "CSVFollower",
    "format_rows",
    "has_kinds",
    "read_csv",
    "record_end",
]

CSV_FIELDS = ("wall_time", "step", "name", "value", "kind")
"""The CSV header, in column order."""

CSV_FIELDS_0_1 = CSV_FIELDS[:4]
"""The CSV header of the files rlpulse 0.1.0 wrote, without kinds."""

HEADER = ",".join(CSV_FIELDS) + "\n"
"""The first line of a file."""

_HEADER_0_1 = ",".join(CSV_FIELDS_0_1) + "\n"
_CHARACTERS_TO_QUOTE = frozenset(',"\r\n')
_SCAN_CHUNK_BYTES = 1 << 20


# Writing


def has_kinds(path: Path, first_line: bytes) -> bool:
    """Whether an existing file whose first line is ``first_line`` has the ``kind`` column; ``RunFileError`` when it is no rlpulse CSV file.

    ``first_line`` ends with its newline, unless it is the whole file: then
    it may be a header torn by a crash.

    >>> has_kinds(Path("m.csv"), b"wall_time,step,name,value,kind\\n"), has_kinds(Path("m.csv"), b"wall_time,step,name,value\\n")
    (True, False)
    """
    header = HEADER.encode()
    line = first_line.replace(b"\r\n", b"\n")
    if line == _HEADER_0_1.encode():
        return False
    if line == header or (
        not line.endswith(b"\n") and header.startswith(line)  # a torn header
    ):
        return True
    what = lines.another_sinks_file(first_line, "csv") or (
        f"its first line is {first_line[: len(header) + 1]!r}, not {HEADER.strip()!r}"
    )
    raise RunFileError(
        f"{path} is not an rlpulse CSV file ({what}); it was left as it is: "
        "give a new path or one written by CSVLogger"
    )


def format_rows(payloads: Sequence[Payload], *, kinds: bool = True) -> str:
    """The rows of ``payloads``, one per metric; ``kinds=False`` leaves out the ``kind`` column (a file of rlpulse 0.1.0).

    >>> from rlpulse.naming import Kind
    >>> print(format_rows([Payload({"c/frames": 96.0, "odd,name": 1.0}, 3, 1.5, {"c/frames": Kind.COUNTER})]), end="")
    1.5,3,c/frames,96.0,counter
    1.5,3,"odd,name",1.0,gauge
    """
    rows = []
    for payload in payloads:
        metrics, step, wall_time, *_ = payload
        prefix = f"{wall_time!r},{'' if step is None else int(step)},"
        if not kinds:
            rows += [
                f"{prefix}{_csv_field(name)},{float(value)!r}\n"
                for name, value in metrics.items()
            ]
            continue
        kind = payload.kind
        rows += [
            f"{prefix}{_csv_field(name)},{float(value)!r},{kind(name).value}\n"
            for name, value in metrics.items()
        ]
    return "".join(rows)


@functools.lru_cache(maxsize=4096)
def _csv_field(name: str) -> str:
    # The csv module's minimal quoting, done once per name: a payload is then
    # formatted without a csv.writer round trip.
    limit = csv.field_size_limit()
    if len(name) > limit:
        raise ValueError(
            f"metric name {name[:40]!r}... is {len(name):,} characters long, over "
            f"the {limit:,} a CSV reader takes in one field; nothing of this call "
            "was written: shorten the name, or log to a SQLite or JSON lines file"
        )
    if _CHARACTERS_TO_QUOTE.isdisjoint(name):
        return name
    return '"' + name.replace('"', '""') + '"'


# Repairing


def record_end(file: IO[bytes], complete_end: int) -> int:
    """Where the last whole record of a CSV file ends, given where its last whole line ends.

    A line inside a quoted name is no record's end: a record torn just
    after a newline in its name is cut back to the record before it.
    """
    line_start = last_line_end(file, complete_end - 1)
    file.seek(line_start)
    if _is_plain_csv_record(file.read(complete_end - line_start)):
        return complete_end
    return _last_csv_record_end(file, complete_end)


def _is_plain_csv_record(line: bytes) -> bool:
    """Whether ``line`` is a whole ``wall_time,step,name,value[,kind]`` row of a name without quotes.

    Then it ends a record: a line inside a quoted name that reads as a whole
    row would take a name written to look like one.

    >>> _is_plain_csv_record(b"1.5,3,collector/frames,96.0,counter\\n")
    True
    >>> _is_plain_csv_record(b"1.5,3,collector/frames,96.0\\n")  # rlpulse 0.1.0
    True
    >>> _is_plain_csv_record(b'2.0,2,"multi\\n'), _is_plain_csv_record(b"wall_time,step,name,value,kind\\n")
    (False, False)
    """
    fields = line.rstrip(b"\r\n").split(b",")
    if len(fields) not in (4, 5) or b'"' in line:
        return False
    wall_time, step, _, value, *kind = fields
    if kind and kind[0] and kind_named(kind[0].decode("ascii", "replace")) is None:
        return False
    try:
        float(wall_time), float(value)
        if step:
            int(step)
    except ValueError:
        return False
    return True


def _last_csv_record_end(file: IO[bytes], end: int) -> int:
    """Just past the last newline before ``end`` that is outside double quotes; 0 for none.

    Counted from the start of the file, a quote at a time: a newline ends a
    record where the quotes before it are even (an escaped ``""`` counts
    twice).
    """
    file.seek(0)
    last = offset = 0
    inside = False
    while offset < end:
        chunk = file.read(min(_SCAN_CHUNK_BYTES, end - offset))
        if not chunk:
            break
        segment_start = 0
        while True:
            quote = chunk.find(b'"', segment_start)
            segment_end = len(chunk) if quote < 0 else quote
            if not inside:
                newline = chunk.rfind(b"\n", segment_start, segment_end)
                if newline >= 0:
                    last = offset + newline + 1
            if quote < 0:
                break
            inside = not inside
            segment_start = quote + 1
        offset += len(chunk)
    return last


# Reading


def read_csv(path: Path) -> Iterator[Record]:
    with open(path, encoding="utf-8", errors="replace", newline="") as file:
        header = next(csv.reader(file), [])
    if tuple(header) not in (CSV_FIELDS, CSV_FIELDS_0_1):
        raise RunFileError(
            f"{path} is not an rlpulse CSV file: its header is "
            f"{','.join(header)!r}, expected {','.join(CSV_FIELDS)!r} (or, "
            f"without kinds, {','.join(CSV_FIELDS_0_1)!r})"
        )
    width = len(header)
    return with_kinds(functools.partial(_csv_records, path, width))


def _csv_records(path: Path, width: int) -> Iterator[Record]:
    """The records of a CSV file whose rows have ``width`` fields (5 with kinds, 4 without)."""
    with open(path, "rb") as file:
        lines = LineReader(path, file)
        rows = csv.reader(lines)
        next(rows, None)
        pending: tuple[list[str], int] | None = None
        while True:
            try:
                row = next(rows)
            except StopIteration:
                break
            except csv.Error as error:
                raise RunFileError(
                    f"{path} line {lines.number} is not a CSV row rlpulse can "
                    f"read: {error}"
                ) from error
            if not any(field.strip() for field in row):
                continue  # a blank line
            if pending is not None:
                yield _csv_record(path, *pending, width)
            pending = (row, lines.number)
        if pending is None:
            return
        row, line_number = pending
        if not lines.last_complete:
            left_out(path, line_number, "no newline at its end", ",".join(row))
            return
        try:
            yield _csv_record(path, row, line_number, width)
        except RunFileError:
            # A crash right after a newline inside a quoted name leaves a row
            # that ends with a newline but lacks its closing fields.
            left_out(path, line_number, _csv_problem(row, width), ",".join(row))


def _csv_record(path: Path, row: list[str], line_number: int, width: int) -> Record:
    try:
        if len(row) != width:
            raise ValueError
        wall_time, step, name, value, *kind = row
        return Record(
            float(wall_time),
            int(step) if step else None,
            name,
            float(value),
            kind_named(kind[0]) if kind else None,
        )
    except ValueError:
        fields = ",".join(CSV_FIELDS[:width])
        raise RunFileError(
            f"{path} line {line_number} is not a {fields} row: "
            f"{_csv_problem(row, width)}: {','.join(row)!r}"
        ) from None


def _csv_problem(row: list[str], width: int = len(CSV_FIELDS)) -> str:
    """What keeps ``row`` from being a record of ``width`` fields (``wall_time,step,name,value[,kind]``), in words.

    >>> _csv_problem(["1.5", "3", "x"]), _csv_problem(["soon", "", "x", "1", "gauge"])
    ('3 fields of 5', "wall_time 'soon' is not a number")
    """
    if len(row) != width:
        return f"{len(row)} fields of {width}"
    wall_time, step, _, value, *_ = row
    for field, text, parse in (
        ("wall_time", wall_time, float),
        ("step", step, int),
        ("value", value, float),
    ):
        try:
            if text or field != "step":
                parse(text)
        except ValueError:
            kind = "an integer" if parse is int else "a number"
            return f"{field} {text!r} is not {kind}"
    return "unreadable"


# Following


class CSVFollower(lines.LineFollower):
    """A CSV file followed while another process writes it: each look reads on from the byte offset the last one stopped at.

    Only whole records are read: a last line without its newline, or a
    record whose quoted name is still open, is left for a later look. At
    most ``batch_bytes`` are read per look (:attr:`Followed.more` says when
    more is waiting), but a longer record is read whole, over as many looks
    as it takes. A file deleted and written anew, or that shrank, was
    replaced: it is read again from its start, the first look at it saying
    it holds a new run (:attr:`Followed.new_run`). CSV files store no
    events.

    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "run.csv"
    ...     _ = path.write_text(HEADER + '1.0,1,c/frames,1.0,counter\\n2.0,2,"c/fr')
    ...     follower = CSVFollower(path)
    ...     first = follower.read_new().records
    ...     with open(path, "a") as file:
    ...         _ = file.write('ames",2.0,counter\\n')
    ...     second = follower.read_new().records
    >>> [record.value for record in first], [record.value for record in second]
    ([1.0], [2.0])
    """

    def __init__(self, path: Path, *, batch_bytes: int = 8 << 20) -> None:
        super().__init__(path, batch_bytes=batch_bytes)
        self._width: int | None = None

    def _restart(self) -> None:
        self._width = None  # its header comes again

    def read_new(self) -> Followed:
        """The records completed since the last look (all of them at the first)."""
        chunk, new_run = self._next_bytes()
        records: list[Record] = []
        record_lines: list[bytes] = []
        quotes = 0
        consumed = 0
        # Lines end at \n only: a quoted name may hold a \r.
        for raw_line in io.BytesIO(chunk):
            if not raw_line.endswith(b"\n"):
                break  # still being written
            record_lines.append(raw_line)
            quotes += raw_line.count(b'"')
            if quotes % 2:
                continue  # a newline inside a quoted name
            text = b"".join(record_lines).decode("utf-8", errors="replace")
            first_line = self._line_number + 1
            self._line_number += len(record_lines)
            consumed += sum(len(line) for line in record_lines)
            record_lines, quotes = [], 0
            row = next(csv.reader([text]), [])
            if self._width is None:
                self._width = self._header_width(row)
            elif any(field.strip() for field in row):
                records.append(_csv_record(self.path, row, first_line, self._width))
        more = self._moved_on(consumed, chunk)
        return Followed(records, [], more, new_run)

    def _header_width(self, header: list[str]) -> int:
        if tuple(header) not in (CSV_FIELDS, CSV_FIELDS_0_1):
            raise RunFileError(
                f"{self.path} is not an rlpulse CSV file: its header is "
                f"{','.join(header)!r}, expected {','.join(CSV_FIELDS)!r}"
            )
        return len(header)
