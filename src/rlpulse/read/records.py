"""The metrics files rlpulse writes, and reading them back.

Three formats share one record shape, ``Record(wall_time, step, name, value, kind)``:

- SQLite (``SQLiteLogger``): tables ``runs(id, name, start_wall_time)``,
  ``metrics(run, wall_time, step, name, value)`` and ``kinds(run, name,
  kind)`` (each metric's kind, once per run), several runs per file.
- CSV (``CSVLogger``): a long-format file with the header
  ``wall_time,step,name,value,kind``, one row per metric.
- JSON lines (``JSONLLogger``): one ``{"wall_time", "step", "metrics"}`` object
  per payload and line, with ``"kinds"`` (``{name: kind}``) for the metrics
  the file names for the first time.

A metric's kind is ``counter``, ``gauge``, ``rate`` or ``distribution``
(:class:`rlpulse.naming.Kind`). Units are not stored: a metric's unit is
what its name says (:func:`rlpulse.naming.unit_of`), and :attr:`Record.unit`
reads it from there. Files written by rlpulse 0.1.0, before kinds were
stored (SQLite without ``kinds``, CSV with the header
``wall_time,step,name,value``, JSON lines without ``"kinds"``), still read:
their records' kinds are guessed from the run's names
(:func:`rlpulse.naming.inferred_kind`), as ``rlpulse show`` always guessed
them, and so is the kind of any name a file does not declare.

CSV and JSON lines files are complete up to their last newline: whatever follows
it was cut short by a crash, or is still being written, so ``read`` leaves it
out (saying so with a :class:`RunFileWarning`) and the sinks remove it before
appending. Files written by hand are read as their meaning is clear: blank
lines are skipped and a JSON lines payload without ``"step"`` has no step;
anything else a reader cannot make sense of is a :class:`RunFileError` naming
the file, the line and what is wrong. This module is the one place that knows the formats; the sinks write
them through the constants and helpers defined here.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import sqlite3
import warnings
from collections.abc import Callable, Generator, Iterable, Iterator
from pathlib import Path
from typing import IO, NamedTuple

from rlpulse.naming import Kind, Unit, inferred_kind, split, unit_of
from rlpulse.runtime.events import Event

__all__ = [
    "CSV_FIELDS",
    "CSV_FIELDS_0_1",
    "SQLITE_FORMAT_VERSION",
    "SQLITE_MAGIC",
    "SQLITE_SCHEMA",
    "Record",
    "RunFileError",
    "RunFileWarning",
    "RunInfo",
    "list_runs",
    "open_line_file",
    "prepare_record_file",
    "read",
    "read_events",
    "run_infos",
]

CSV_FIELDS = ("wall_time", "step", "name", "value", "kind")
"""The CSV header, in column order."""

CSV_FIELDS_0_1 = CSV_FIELDS[:4]
"""The CSV header of the files rlpulse 0.1.0 wrote, without kinds."""

SQLITE_FORMAT_VERSION = 1
"""The SQLite file's ``user_version``: 1 since kinds are stored, 0 before (rlpulse 0.1.0)."""

SQLITE_MAGIC = b"SQLite format 3\x00"
"""The first bytes of every SQLite database file."""

SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    start_wall_time REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS metrics (
    run INTEGER NOT NULL REFERENCES runs(id),
    wall_time REAL NOT NULL,
    step INTEGER,
    name TEXT NOT NULL,
    value REAL
);
CREATE INDEX IF NOT EXISTS metrics_run ON metrics(run);
CREATE TABLE IF NOT EXISTS kinds (
    run INTEGER NOT NULL REFERENCES runs(id),
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    PRIMARY KEY (run, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
    run INTEGER NOT NULL REFERENCES runs(id),
    wall_time REAL NOT NULL,
    watch TEXT NOT NULL,
    kind TEXT NOT NULL,
    message TEXT NOT NULL,
    value REAL
);
"""
"""The SQLite tables; ``value`` is NULL only for NaN, which SQLite cannot store.

``kinds`` holds the kind of each metric of a run, written with the
metric's first row. ``events`` holds the run's :class:`~rlpulse.Event`
records (see :func:`read_events`). A file written before they existed
gains them when a logger opens it again.

The index is on ``run`` alone: a logger's rows all land at the end of its run's
range, one index page per commit. An index on ``(run, name)`` would dirty one
page per metric name on every commit and make each payload several times
more expensive to store.
"""

_TAIL_CHUNK_BYTES = 4096
_SCAN_CHUNK_BYTES = 1 << 20


class Record(NamedTuple):
    """One metric value as stored by a file sink: when, at which step, what, how much, of what kind.

    ``wall_time`` is seconds since the epoch of the poll that produced it and
    ``step`` is ``None`` when the payload had no step. ``name`` is the
    payload key ``<watch>/<metric>`` (:attr:`watch`, :attr:`metric`).
    ``kind`` is the metric's :class:`~rlpulse.naming.Kind`: :func:`read`
    always gives one (stored, or guessed for files that store none); a
    record built without one has ``None``, and the readers that summarise
    records guess it from the run's names.

    >>> record = Record(wall_time=1700000000.0, step=3, name="collector/worker_0/frames", value=96.0)
    >>> record.watch, record.metric, record.value, record.kind
    ('collector', 'worker_0/frames', 96.0, None)
    >>> str(Record(1.5, None, "learner/update_s_p99", 0.01, Kind.GAUGE).unit)
    'seconds'
    """

    wall_time: float
    step: int | None
    name: str
    value: float
    kind: Kind | None = None

    @property
    def watch(self) -> str:
        """The watch the metric was logged under (``""`` for a name without one)."""
        return split(self.name)[0]

    @property
    def metric(self) -> str:
        """The metric's name within its watch."""
        return split(self.name)[1]

    @property
    def unit(self) -> Unit | None:
        """The unit the metric's name says (:func:`rlpulse.naming.unit_of`); ``None`` when it says none."""
        return unit_of(self.metric)


class RunFileError(ValueError):
    """A metrics file that cannot be used as asked: empty, corrupt, foreign, or without that run.

    Raised by ``read`` and ``list_runs``, and by a sink given an existing file
    of another format. Its message is one line naming the file and what is
    wrong with it.

    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     empty = pathlib.Path(tmp) / "metrics.csv"
    ...     _ = empty.write_text("")
    ...     try:
    ...         read(empty)
    ...     except RunFileError as error:
    ...         print("is empty" in str(error))
    True
    """


class RunFileWarning(UserWarning):
    """What reading a CSV or JSON lines file left out: a last line cut short.

    A writer still appending completes it (``rlpulse top`` reads it at its
    next frame); in a finished file it was cut short by a crash, or written
    by hand without its end. Its message is one line naming the file, the
    line and what it lacks; ``rlpulse show`` prints it as a note.

    >>> import tempfile, pathlib, warnings
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "metrics.csv"
    ...     _ = path.write_text("wall_time,step,name,value\\n1.5,3,c/frames,96\\n2.5,4,c/fr")
    ...     with warnings.catch_warnings(record=True) as caught:
    ...         warnings.simplefilter("always")
    ...         records = list(read(path))
    >>> len(records), str(caught[0].message).split(": ", 1)[1]
    (1, "left out line 3, cut short: no newline at its end: '2.5,4,c/fr'")
    """


def read(path: str | os.PathLike[str], run: str | None = None) -> Iterator[Record]:
    """Iterate over the records of a metrics file written by any rlpulse file sink.

    The format comes from the file's content (the SQLite header, the CSV
    header, a JSON object), else from its extension (``.csv``, ``.jsonl``). For SQLite,
    ``run`` names the run to read and ``None`` means the most recently created
    one; CSV and JSON lines files hold a single run, so ``run`` must be ``None``.
    Records come in the order they were written, each with its metric's
    kind: the one stored, or for a file that stores none (written by rlpulse
    0.1.0) the one :func:`rlpulse.naming.inferred_kind` guesses from the
    run's names. CSV and JSON lines files
    are read as people write them too: blank lines are skipped, and a JSON
    lines payload without ``"step"`` has step ``None``. A last line cut short
    (a write a crash interrupted, or one still under way: no newline at its
    end, or a row without all its fields) is left out with a
    :class:`RunFileWarning`.

    The file is checked before this returns: a missing file raises
    ``FileNotFoundError``; an empty or corrupt file, or an unknown run, raises
    ``RunFileError``. A line before the last that cannot be read raises
    ``RunFileError`` naming it, when the iteration reaches it.

    >>> import tempfile, pathlib
    >>> from rlpulse import CSVLogger
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     sink = CSVLogger(pathlib.Path(tmp) / "metrics.csv")
    ...     sink.log_metrics({"collector/frames": 96.0}, step=3, timestamp=1.5)
    ...     sink.close()
    ...     list(read(sink.path))
    [Record(wall_time=1.5, step=3, name='collector/frames', value=96.0, kind=<Kind.COUNTER: 'counter'>)]
    """
    path = Path(path)
    file_format = _detect_format(path)
    if file_format == "sqlite":
        return _read_sqlite(path, run)
    if run is not None:
        raise RunFileError(
            f"{path} is a {file_format.upper()} file, which holds a single run: "
            f"read it without a run (run=None; on the command line, without "
            f"--run) instead of run={run!r}"
        )
    if file_format == "csv":
        return _read_csv(path)
    return _read_jsonl(path)


def read_events(
    path: str | os.PathLike[str], run: str | None = None
) -> Iterator[Event]:
    """Iterate over the :class:`~rlpulse.Event` records of a file written by ``SQLiteLogger`` or ``JSONLLogger``, in order.

    ``run`` as for :func:`read`. A SQLite file written before events were
    stored has none. CSV files store no events: reading one raises
    ``RunFileError``, as a missing file raises ``FileNotFoundError`` and an
    empty or corrupt one ``RunFileError``, before this returns.

    >>> import tempfile, pathlib
    >>> from rlpulse import Event, JSONLLogger
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     with JSONLLogger(pathlib.Path(tmp) / "run.jsonl") as sink:
    ...         sink.log_metrics({"collector/frames": 96.0}, step=3, timestamp=1.0)
    ...         sink.log_event(Event(1.5, "collector", "stalled", "no progress", 30.0))
    ...     list(read_events(sink.path))
    [Event(wall_time=1.5, watch='collector', kind='stalled', message='no progress', value=30.0)]
    """
    path = Path(path)
    file_format = _detect_format(path)
    if file_format == "sqlite":
        return _sqlite_events(path, _run_id(path, run))
    if run is not None:
        raise RunFileError(
            f"{path} is a {file_format.upper()} file, which holds a single run: "
            f"read it without a run instead of run={run!r}"
        )
    if file_format == "csv":
        raise RunFileError(
            f"{path} is a CSV file, which stores no events: SQLiteLogger and "
            "JSONLLogger store them"
        )
    events = _jsonl_events(path)
    # Checked now, as read() checks a first payload: the first line parses.
    with contextlib.closing(_jsonl_events(path)) as first:
        next(first, None)
    return events


def list_runs(path: str | os.PathLike[str]) -> list[str]:
    """Return the names of the runs in an rlpulse SQLite file, oldest first.

    Raises ``FileNotFoundError`` for a missing file and ``RunFileError`` for a
    file that is not an rlpulse SQLite file.

    >>> import tempfile, pathlib
    >>> from rlpulse import SQLiteLogger
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "metrics.db"
    ...     SQLiteLogger(path, run="first").close()
    ...     SQLiteLogger(path, run="second").close()
    ...     list_runs(path)
    ['first', 'second']
    """
    path = Path(path)
    if _detect_format(path) != "sqlite":
        raise RunFileError(f"{path} is not an rlpulse SQLite file, so it has no runs")
    with contextlib.closing(_connect_for_reading(path)) as connection:
        return [name for name, _ in _runs(path, connection)]


class RunInfo(NamedTuple):
    """One run of a SQLite file at a glance: its name, when its records start and end, how many there are.

    ``start_wall_time`` is its first record's time (when it was opened, for
    a run without records) and ``end_wall_time`` its last one's.

    >>> RunInfo("baseline", 100.0, 130.5, 42).seconds
    30.5
    """

    name: str
    start_wall_time: float
    end_wall_time: float
    records: int

    @property
    def seconds(self) -> float:
        """Seconds from the first record to the last."""
        return self.end_wall_time - self.start_wall_time


def run_infos(path: str | os.PathLike[str]) -> list[RunInfo]:
    """Return a :class:`RunInfo` for each run of an rlpulse SQLite file, oldest first.

    Errors as :func:`list_runs`'s.

    >>> import tempfile, pathlib
    >>> from rlpulse import SQLiteLogger
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "metrics.db"
    ...     with SQLiteLogger(path, run="first") as sink:
    ...         sink.log_metrics({"c/frames": 1.0, "c/batches": 1.0}, timestamp=100.0)
    ...         sink.log_metrics({"c/frames": 2.0}, timestamp=104.0)
    ...     run_infos(path)
    [RunInfo(name='first', start_wall_time=100.0, end_wall_time=104.0, records=3)]
    """
    path = Path(path)
    list_runs(path)  # the file's checks
    with contextlib.closing(_connect_for_reading(path)) as connection:
        try:
            rows = list(
                connection.execute(
                    "SELECT runs.name, runs.start_wall_time, MIN(metrics.wall_time),"
                    " MAX(metrics.wall_time), COUNT(metrics.run) FROM runs"
                    " LEFT JOIN metrics ON metrics.run = runs.id"
                    " GROUP BY runs.id ORDER BY runs.id"
                )
            )
        except sqlite3.Error as error:
            raise RunFileError(f"{path} has unreadable runs: {error}") from error
    return [
        RunInfo(
            name,
            opened if first is None else first,
            opened if last is None else last,
            count,
        )
        for name, opened, first, last, count in rows
    ]


def prepare_record_file(path: str | os.PathLike[str]) -> Path:
    """Return ``path`` as a ``Path`` to a file that exists and can be appended to.

    Missing parent directories are created (the convention of TensorBoard's
    and TorchRL's loggers for their log directories). An empty path raises
    ``ValueError``; one that cannot be written (a directory, a parent that is
    a file, no permission) raises the matching ``OSError`` with a message
    naming the path.

    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = prepare_record_file(pathlib.Path(tmp) / "new" / "metrics.csv")
    ...     path.exists(), path.stat().st_size
    (True, 0)
    """
    if not os.fspath(path):
        raise ValueError(
            "the path of the metrics file is empty; give a file path such as "
            "'runs/metrics.sqlite'"
        )
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab"):
            pass
    except OSError as error:
        raise _unwritable(path, error) from error
    return path


def open_line_file(path: Path, *, quoted_newlines: bool = False) -> io.FileIO:
    """Open a CSV or JSON lines file for appending, first removing a torn last line.

    A last line without its newline was cut short by a crash; appending after
    it would glue the next line onto it, so it is truncated away.
    ``quoted_newlines`` (CSV): a newline between double quotes is part of a
    name, not the end of a record, so a record torn just after one is
    truncated away too (appended after it, every later row would read as
    part of that name). The returned
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
        _truncate_torn_last_line(path, quoted_newlines)
        return open(path, "ab", buffering=0)
    except OSError as error:
        raise _unwritable(path, error) from error


def _unwritable(path: Path, error: OSError) -> OSError:
    reason = error.strerror or str(error)
    message = (
        f"cannot write metrics to {path}: {reason}; "
        "give the path of a file in a directory you can write to"
    )
    return type(error)(error.errno, message)


def _truncate_torn_last_line(path: Path, quoted_newlines: bool) -> None:
    with open(path, "r+b") as file:
        end = file.seek(0, os.SEEK_END)
        complete_end = _last_line_end(file, end)
        if quoted_newlines and complete_end:
            line_start = _last_line_end(file, complete_end - 1)
            file.seek(line_start)
            if not _is_plain_csv_record(file.read(complete_end - line_start)):
                complete_end = _last_csv_record_end(file, complete_end)
        if complete_end != end:
            file.truncate(complete_end)


def _last_line_end(file: IO[bytes], end: int) -> int:
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
    if kind and kind[0] and _kind(kind[0].decode("ascii", "replace")) is None:
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


def _detect_format(path: Path) -> str:
    with open(path, "rb") as file:
        head = file.readline(256)
    if not head:
        raise RunFileError(f"{path} is empty: no metrics were written to it")
    if head.startswith(SQLITE_MAGIC):
        return "sqlite"
    # What the first line says, before the extension: a file sink writes
    # its format whatever the file is named.
    if head.startswith(",".join(CSV_FIELDS_0_1).encode()):
        return "csv"
    if head.lstrip().startswith(b"{"):
        return "jsonl"
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix == ".jsonl":
        return "jsonl"
    raise RunFileError(
        f"{path} is not an rlpulse metrics file: expected SQLite, "
        "CSV (.csv) or JSON lines (.jsonl)"
    )


# SQLite


def _connect_for_reading(path: Path) -> sqlite3.Connection:
    # mode=rw never creates a missing file, and SQLite itself falls back to
    # read-only for a write-protected one; a read/write connection also cleans
    # up the WAL files when it is the last one to close.
    uri = path.resolve().as_uri() + "?mode=rw"
    try:
        connection = sqlite3.connect(uri, uri=True)
        tables = {
            name
            for (name,) in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
            )
        }
    except sqlite3.Error as error:
        raise RunFileError(f"{path} is not a readable SQLite file: {error}") from error
    if not {"runs", "metrics"} <= tables:
        connection.close()
        raise RunFileError(
            f"{path} is a SQLite file without rlpulse's 'runs' and 'metrics' tables"
        )
    return connection


def _runs(path: Path, connection: sqlite3.Connection) -> list[tuple[str, int]]:
    try:
        return list(connection.execute("SELECT name, id FROM runs ORDER BY id"))
    except sqlite3.Error as error:
        raise RunFileError(f"{path} has an unreadable 'runs' table: {error}") from error


def _read_sqlite(path: Path, run: str | None) -> Iterator[Record]:
    run_id = _run_id(path, run)
    return _kinds_completed(
        _sqlite_records(path, run_id), lambda: _sqlite_names(path, run_id)
    )


def _run_id(path: Path, run: str | None) -> int:
    # The id of run ``run`` of the file, the latest for None.
    with contextlib.closing(_connect_for_reading(path)) as connection:
        runs = _runs(path, connection)
    if not runs:
        raise RunFileError(f"{path} contains no runs")
    run_ids = dict(runs)
    if run is None:
        return runs[-1][1]
    if run in run_ids:
        return run_ids[run]
    available = ", ".join(name for name, _ in runs)
    raise RunFileError(f"{path} has no run named {run!r}; available runs: {available}")


def _sqlite_events(path: Path, run_id: int) -> Iterator[Event]:
    with contextlib.closing(_connect_for_reading(path)) as connection:
        try:
            rows = connection.execute(
                "SELECT wall_time, watch, kind, message, value FROM events"
                " WHERE run = ? ORDER BY rowid",
                (run_id,),
            )
        except sqlite3.OperationalError:
            return  # written before events were stored
        for wall_time, watch, kind, message, value in rows:
            yield Event(
                wall_time, watch, kind, message, math.nan if value is None else value
            )


def _sqlite_records(path: Path, run_id: int) -> Iterator[Record]:
    with contextlib.closing(_connect_for_reading(path)) as connection:
        kinds = _sqlite_kinds(connection, run_id)
        rows = connection.execute(
            "SELECT wall_time, step, name, value FROM metrics"
            " WHERE run = ? ORDER BY rowid",
            (run_id,),
        )
        for wall_time, step, name, value in rows:
            yield Record(
                wall_time,
                step,
                name,
                math.nan if value is None else value,
                kinds.get(name),
            )


def _sqlite_kinds(connection: sqlite3.Connection, run_id: int) -> dict[str, Kind]:
    # The kinds stored for the run; none in a file of rlpulse 0.1.0.
    try:
        rows = connection.execute(
            "SELECT name, kind FROM kinds WHERE run = ?", (run_id,)
        ).fetchall()
    except sqlite3.OperationalError:
        return {}
    return {name: kind for name, text in rows if (kind := _kind(text)) is not None}


def _sqlite_names(path: Path, run_id: int) -> set[str]:
    with contextlib.closing(_connect_for_reading(path)) as connection:
        rows = connection.execute(
            "SELECT DISTINCT name FROM metrics WHERE run = ?", (run_id,)
        )
        return {name for (name,) in rows}


# Kinds


def _kind(text: object) -> Kind | None:
    """The kind ``text`` names; ``None`` for a kind this version does not know (guessed from the name instead).

    >>> _kind("counter"), _kind("histogram")
    (<Kind.COUNTER: 'counter'>, None)
    """
    try:
        return Kind(text)
    except ValueError:
        return None


def _kinds_completed(
    records: Iterator[Record], names: Callable[[], Iterable[str]]
) -> Iterator[Record]:
    """``records``, each whose kind the file does not store given the kind guessed from the run's names.

    ``names()`` reads every name of the run, once, when a record first
    needs it: a file that stores every kind is read once.
    """
    guessed: dict[str, Kind] = {}
    run_names: set[str] | None = None
    for record in records:
        if record.kind is not None:
            yield record
            continue
        kind = guessed.get(record.name)
        if kind is None:
            if run_names is None:
                run_names = set(names())
            kind = guessed[record.name] = inferred_kind(record.name, run_names)
        yield Record(record.wall_time, record.step, record.name, record.value, kind)


def _names_of(records: Iterator[Record]) -> set[str]:
    # A second pass over a line file: what it leaves out was said in the first.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RunFileWarning)
        return {record.name for record in records}


# CSV and JSON lines


class _LineReader:
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


def _read_csv(path: Path) -> Iterator[Record]:
    with open(path, encoding="utf-8", errors="replace", newline="") as file:
        header = next(csv.reader(file), [])
    if tuple(header) not in (CSV_FIELDS, CSV_FIELDS_0_1):
        raise RunFileError(
            f"{path} is not an rlpulse CSV file: its header is "
            f"{','.join(header)!r}, expected {','.join(CSV_FIELDS)!r} (or, "
            f"without kinds, {','.join(CSV_FIELDS_0_1)!r})"
        )
    width = len(header)
    return _kinds_completed(
        _csv_records(path, width), lambda: _names_of(_csv_records(path, width))
    )


def _csv_records(path: Path, width: int) -> Iterator[Record]:
    """The records of a CSV file whose rows have ``width`` fields (5 with kinds, 4 without)."""
    with open(path, "rb") as file:
        lines = _LineReader(path, file)
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
            _left_out(path, line_number, "no newline at its end", ",".join(row))
            return
        try:
            yield _csv_record(path, row, line_number, width)
        except RunFileError:
            # A crash right after a newline inside a quoted name leaves a row
            # that ends with a newline but lacks its closing fields.
            _left_out(path, line_number, _csv_problem(row, width), ",".join(row))


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
            _kind(kind[0]) if kind else None,
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


def _left_out(path: Path, line_number: int, problem: str, text: str) -> None:
    warnings.warn(
        f"{path}: left out line {line_number}, cut short: {problem}: {text!r}",
        RunFileWarning,
        stacklevel=3,
    )


def _read_jsonl(path: Path) -> Iterator[Record]:
    # The first payload is checked now, as a CSV file's header is.
    with contextlib.closing(_jsonl_records(path)) as records:
        next(records, None)
    return _kinds_completed(
        _jsonl_records(path), lambda: _names_of(_jsonl_records(path))
    )


def _jsonl_records(path: Path) -> Generator[Record, None, None]:
    kinds: dict[str, Kind] = {}  # as the lines so far declared them
    with open(path, "rb") as file:
        lines = _LineReader(path, file)
        for line in lines:
            if not line.strip():
                continue
            if lines.last_complete:
                yield from _jsonl_payload(path, line, lines.number, kinds)
            else:
                _left_out(path, lines.number, "no newline at its end", line)


def _jsonl_events(path: Path) -> Generator[Event, None, None]:
    with open(path, "rb") as file:
        lines = _LineReader(path, file)
        for line in lines:
            if not (lines.last_complete and line.strip()):
                continue
            try:
                entry = json.loads(line)
                if not isinstance(entry, dict) or "event" not in entry:
                    continue
                yield Event(
                    float(entry["wall_time"]),
                    str(entry["watch"]),
                    str(entry["event"]),
                    str(entry["message"]),
                    float(entry["value"]),
                )
            except (ValueError, TypeError, KeyError) as error:
                raise RunFileError(
                    f"{path} line {lines.number} is not an rlpulse payload or "
                    f"event: {error!r}"
                ) from error


def _jsonl_payload(
    path: Path, line: str, line_number: int, kinds: dict[str, Kind]
) -> list[Record]:
    """The records of one payload line; the kinds it declares are added to ``kinds``."""
    try:
        payload = json.loads(line)
    except ValueError as error:
        raise _not_a_payload(path, line_number, f"not JSON ({error})") from None
    if not isinstance(payload, dict):
        raise _not_a_payload(path, line_number, f"not a JSON object: {line.strip()!r}")
    if "event" in payload:
        return []  # read_events() reads those
    for key in ("wall_time", "metrics"):
        if key not in payload:
            raise _not_a_payload(path, line_number, f'it has no "{key}"')
    wall_time, step, metrics = (
        payload["wall_time"],
        payload.get("step"),
        payload["metrics"],
    )
    if isinstance(step, float) and step.is_integer():
        step = int(step)
    if not _is_number(wall_time):
        raise _not_a_payload(
            path, line_number, f"wall_time {wall_time!r} is not a number"
        )
    if step is not None and (isinstance(step, bool) or not isinstance(step, int)):
        raise _not_a_payload(path, line_number, f"step {step!r} is not an integer")
    if not isinstance(metrics, dict):
        raise _not_a_payload(
            path, line_number, f"metrics {metrics!r} is not an object of name: value"
        )
    declared = payload.get("kinds", {})
    if not isinstance(declared, dict):
        raise _not_a_payload(
            path, line_number, f"kinds {declared!r} is not an object of name: kind"
        )
    for name, text in declared.items():
        kind = _kind(text)
        if kind is not None:
            kinds[name] = kind
    records = []
    for name, value in metrics.items():
        if not (_is_number(value) or value is None):
            raise _not_a_payload(
                path, line_number, f"metric {name!r}: {value!r} is not a number"
            )
        number = math.nan if value is None else float(value)
        records.append(
            Record(float(wall_time), step, str(name), number, kinds.get(name))
        )
    return records


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _not_a_payload(path: Path, line_number: int, problem: str) -> RunFileError:
    return RunFileError(
        f"{path} line {line_number} is not an rlpulse payload "
        f'{{"wall_time", "step", "metrics"}}: {problem}'
    )
