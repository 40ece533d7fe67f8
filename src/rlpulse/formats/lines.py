"""What the line formats (CSV, JSON lines) share: reading lines, removing a line torn by a crash, following a file.

A line file is complete up to its last newline: whatever follows it was
cut short by a crash, or is still being written, so readers leave it out
(saying so with a :class:`~rlpulse.formats.records.RunFileWarning`) and
writers remove it before appending (:func:`open_line_file`).
"""

from __future__ import annotations

import io
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, NamedTuple

from rlpulse.formats.records import (
    Record,
    RunFileError,
    RunFileWarning,
    kinds_completed,
    not_there_yet,
    unwritable,
)
from rlpulse.formats.sqlite import SQLITE_MAGIC

__all__ = [
    "LineFollower",
    "LineReader",
    "Look",
    "another_sinks_file",
    "last_line_end",
    "left_out",
    "open_line_file",
    "with_kinds",
]

_TAIL_CHUNK_BYTES = 4096

RecordEnd = Callable[[IO[bytes], int], int]
"""Where the last record of a file ends, given the end of its last complete line (CSV: not inside quotes)."""


_WRITTEN_BY = (
    (SQLITE_MAGIC, "sqlite", "a SQLite database, as SQLiteLogger writes"),
    (b"wall_time,step,name,value", "csv", "a CSV file, as CSVLogger writes"),
    (b'{"wall_time": ', "jsonl", "JSON lines, as JSONLLogger writes"),
    (b'{"event": ', "jsonl", "JSON lines, as JSONLLogger writes"),
)
"""How each of rlpulse's file sinks begins a file: its first bytes, its format, what it is."""


def another_sinks_file(first_line: bytes, own: str) -> str | None:
    """What a file starting with ``first_line`` is, where another of rlpulse's file sinks than the one of format ``own`` wrote it: for an error that names the sink to use.

    >>> another_sinks_file(b"SQLite format 3\\x00\\x10\\x00", "csv")
    'a SQLite database, as SQLiteLogger writes'
    >>> another_sinks_file(b'{"wall_time": 1.0, "step": null, "metrics": {}}\\n', "csv")
    'JSON lines, as JSONLLogger writes'
    >>> another_sinks_file(b"wall_time,step,name,value,extra\\n", "csv") is None
    True
    """
    for start, written_as, what in _WRITTEN_BY:
        if first_line.startswith(start):
            return None if written_as == own else what
    return None


def open_line_file(path: Path, *, record_end: RecordEnd | None = None) -> io.FileIO:
    """Open a CSV or JSON lines file for appending, first removing a torn last line.

    A last line without its newline was cut short by a crash; appending after
    it would glue the next line onto it, so it is truncated away.
    ``record_end`` (CSV: :func:`rlpulse.formats.csv.record_end`) moves the
    end back further where the last line is part of a record torn before
    its end (a newline between double quotes is part of a name, not the end
    of a record: appended after it, every later row would read as part of
    that name). The returned
    file is binary and unbuffered: each write goes straight to the file
    system, so nothing waits in a buffer to be written later.

    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "metrics.jsonl"
    ...     _ = path.write_text('{"complete": 1}\\n{"cut sho')
    ...     with open_line_file(path) as file:
    ...         _ = file.write(b'{"next": 2}\\n')
    ...     path.read_text().splitlines()
    ['{"complete": 1}', '{"next": 2}']
    """
    try:
        _truncate_torn_last_line(path, record_end)
        return open(path, "ab", buffering=0)
    except OSError as error:
        raise unwritable(path, error) from error


def _truncate_torn_last_line(path: Path, record_end: RecordEnd | None) -> None:
    with open(path, "r+b") as file:
        end = file.seek(0, os.SEEK_END)
        complete_end = last_line_end(file, end)
        if record_end is not None and complete_end:
            complete_end = record_end(file, complete_end)
        if complete_end != end:
            file.truncate(complete_end)


def last_line_end(file: IO[bytes], end: int) -> int:
    # Just past the last newline before ``end``; 0 when there is none.
    position = end
    while position > 0:
        start = max(0, position - _TAIL_CHUNK_BYTES)
        file.seek(start)
        newline = file.read(position - start).rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        position = start
    return 0


class LineReader:
    """The lines of a UTF-8 file, remembering whether the last one was complete.

    Lines are decoded one by one so that a torn last line, which may end in the
    middle of a character, is still handed on (to be dropped) instead of failing.
    """

    def __init__(self, path: Path, file: IO[bytes]) -> None:
        self._path = path
        self._file = file
        self.number = 0
        self.last_complete = True

    def __iter__(self) -> Iterator[str]:
        for raw_line in self._file:
            self.number += 1
            self.last_complete = raw_line.endswith(b"\n")
            try:
                yield raw_line.decode("utf-8")
            except UnicodeDecodeError as error:
                if self.last_complete:
                    raise RunFileError(
                        f"{self._path} line {self.number} is not UTF-8 text: {error}"
                    ) from error
                yield raw_line.decode("utf-8", errors="replace")


def left_out(path: Path, line_number: int, problem: str, text: str) -> None:
    warnings.warn(
        f"{path}: left out line {line_number}, cut short: {problem}: {text!r}",
        RunFileWarning,
        stacklevel=3,
    )


def with_kinds(read_records: Callable[[], Iterator[Record]]) -> Iterator[Record]:
    """The records ``read_records()`` reads of a line file, each whose kind the file does not store given the one guessed from the run's names.

    The names are read in a second pass of ``read_records()``, only when a
    record first needs them (:func:`~rlpulse.formats.records.kinds_completed`).
    """
    return kinds_completed(read_records(), lambda: _names_of(read_records()))


def _names_of(records: Iterator[Record]) -> set[str]:
    # A second pass over a line file: what it leaves out was said in the first.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RunFileWarning)
        return {record.name for record in records}


class Look(NamedTuple):
    """What one look at a followed line file read: its bytes from the offset reached, and whether they are another file's (the one read before was replaced), read from its start."""

    chunk: bytes
    new_run: bool


class LineFollower:
    """What the line formats' followers share: the file, the byte offset and line number reached, and reading on from them.

    A subclass's ``read_new`` takes :meth:`_next_bytes`, parses the whole
    lines among them, moves :attr:`_offset` past what it parsed and passes
    on :attr:`Look.new_run` (a replaced file: the run before is forgotten).
    """

    def __init__(self, path: Path, *, batch_bytes: int = 8 << 20) -> None:
        self.path = path
        self._batch_bytes = batch_bytes
        # How much a look reads: twice as much again after a look that held
        # no whole line (one longer than that), back once it is read.
        self._look_bytes = batch_bytes
        self.waiting: str | None = None
        """Why nothing can be read now (the file is gone); ``None`` while it is there."""
        self._offset = 0
        self._line_number = 0
        # Which file was read: another at the same path is read from its start.
        self._identity: tuple[int, int] | None = None
        # The file read was replaced: the first look at the next is a new run.
        self._replaced = False

    def _next_bytes(self) -> Look:
        """At most ``batch_bytes`` bytes from the offset reached; nothing while the file is gone.

        Another file at the path (deleted and written again, or shorter
        than the offset reached: replaced) is read from its start
        (:meth:`_restart`), the first look at it saying it holds a new run.
        """
        try:
            with open(self.path, "rb") as file:
                look = self._read_on(file)
        except FileNotFoundError:
            # Deleted: waited for, and read from its start once written anew.
            if self._offset:
                self._start_again()
            self._identity = None
            self.waiting = not_there_yet(self.path)
            return Look(b"", new_run=False)
        self.waiting = None
        return look

    def _read_on(self, file: IO[bytes]) -> Look:
        status = os.fstat(file.fileno())
        identity = (status.st_dev, status.st_ino)
        replaced = self._identity is not None and identity != self._identity
        if replaced or status.st_size < self._offset:
            self._start_again()
        self._identity = identity
        file.seek(self._offset)
        new_run, self._replaced = self._replaced, False
        return Look(file.read(self._look_bytes), new_run)

    def _start_again(self) -> None:
        self._offset = self._line_number = 0
        self._replaced = True
        self._restart()

    def _restart(self) -> None:
        """Forget what was learnt of the file before it was replaced (its header, its kinds)."""

    def _full(self, chunk: bytes) -> bool:
        """Whether ``chunk`` is as long as a look reads: more may be waiting."""
        return len(chunk) == self._look_bytes

    def _moved_on(self, consumed: int, chunk: bytes) -> bool:
        """Move the offset past the ``consumed`` bytes of ``chunk``; whether more may be waiting.

        A look that holds no whole line (a line longer than a look) makes
        the next one read twice as much, as often as it takes to read the
        line, as :func:`rlpulse.read` reads it whole; the look comes back
        to ``batch_bytes`` once a line is read.
        """
        full = self._full(chunk)
        self._offset += consumed
        if consumed:
            self._look_bytes = self._batch_bytes
        elif full:
            self._look_bytes *= 2
        return full
