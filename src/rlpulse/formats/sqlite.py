"""The SQLite format: several runs per file, their metrics, each metric's kind, their distributions, their events.

Tables ``runs(id, name, start_wall_time)``, ``metrics(run, wall_time,
step, name, value)``, ``kinds(run, name, kind)`` (each metric's
:class:`~rlpulse.naming.Kind`, once per run), ``distributions`` (each
logged interval's histogram of each distribution, see
:data:`SQLITE_SCHEMA`) and ``events(run, wall_time, watch, kind, message,
value)``; the file's ``user_version`` is :data:`SQLITE_FORMAT_VERSION`. A
file of rlpulse 0.1.0 (no ``kinds``, version 0) reads with its kinds
guessed from the names, one of version 1 (no ``distributions``) with no
distributions, and both gain the newer tables when a logger opens them
again.

This module creates and checks the tables (:func:`check_tables`,
:func:`create_tables`), writes a batch as one transaction
(:func:`insert_batch`) and an event (:func:`insert_event`), keeps a run's
summaries as its writer writes (:class:`RunSummaries`) or brings them up to
date from its rows (:func:`summarize_run`), and reads runs
back (:func:`read_sqlite`, :func:`read_sqlite_distributions`,
:func:`read_sqlite_events`, :func:`list_runs`, :func:`run_infos`), each
reader waiting up to :data:`LOCK_WAIT_S` for a file another process holds
locked, in short tries that Ctrl-C can end. Opening a store (WAL mode, checkpoints, what a failure
to open means) is :class:`~rlpulse.sinks.sqlite.SQLiteLogger`'s.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import math
import operator
import os
import shlex
import sqlite3
import time
import warnings
from collections.abc import Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple, cast

from rlpulse.distributions import SCALE, Histogram
from rlpulse.formats.records import (
    DistributionRecord,
    Downsampled,
    Followed,
    Keep,
    MetricAccumulator,
    MetricAggregate,
    Points,
    Record,
    RunAggregate,
    RunFileError,
    RunFileWarning,
    RunInfo,
    downsample,
    kind_named,
    kinds_completed,
    not_there_yet,
)
from rlpulse.naming import Kind, Payload, inferred_kind
from rlpulse.runtime.events import Event

__all__ = [
    "LOCK_NOTICE_S",
    "LOCK_WAIT_S",
    "ROWS_PER_SUMMARY",
    "SQLITE_FORMAT_VERSION",
    "SQLITE_MAGIC",
    "SQLITE_SCHEMA",
    "RunSummaries",
    "SQLiteFollower",
    "check_tables",
    "create_tables",
    "insert_batch",
    "insert_event",
    "list_runs",
    "read_sqlite",
    "read_sqlite_aggregate",
    "read_sqlite_distributions",
    "read_sqlite_downsampled",
    "read_sqlite_events",
    "run_infos",
    "stored_kind_names",
    "summarize_run",
]

SQLITE_FORMAT_VERSION = 3
"""The SQLite file's ``user_version``: 3 since runs' summaries are stored, 2 since distributions are, 1 since kinds are, 0 before (rlpulse 0.1.0)."""

ROWS_PER_SUMMARY = 50_000
"""A writer brings its run's summaries up to date in the transaction of its first batch after writing this many rows the summaries do not include: what a reader aggregates itself beyond them stays short, and each update costs a small share of what storing those rows did."""

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
CREATE TABLE IF NOT EXISTS distributions (
    run INTEGER NOT NULL REFERENCES runs(id),
    wall_time REAL NOT NULL,
    step INTEGER,
    name TEXT NOT NULL,
    scale INTEGER NOT NULL,
    zero_count INTEGER NOT NULL,
    positive_offset INTEGER NOT NULL,
    positive_counts TEXT NOT NULL,
    negative_offset INTEGER NOT NULL,
    negative_counts TEXT NOT NULL,
    sum REAL NOT NULL,
    min REAL,
    max REAL
);
CREATE INDEX IF NOT EXISTS distributions_run ON distributions(run);
CREATE TABLE IF NOT EXISTS summaries (
    run INTEGER NOT NULL REFERENCES runs(id),
    name TEXT NOT NULL,
    records INTEGER NOT NULL,
    minimum REAL,
    maximum REAL,
    start_wall_time REAL NOT NULL,
    end_wall_time REAL NOT NULL,
    first REAL,
    first_wall_time REAL NOT NULL,
    last REAL,
    last_wall_time REAL NOT NULL,
    previous REAL,
    previous_wall_time REAL,
    growth REAL,
    growth_s REAL,
    finite_sum REAL,
    finite_count INTEGER NOT NULL,
    PRIMARY KEY (run, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS summarized (
    run INTEGER PRIMARY KEY REFERENCES runs(id),
    through INTEGER NOT NULL
);
"""
"""The SQLite tables; ``value`` is NULL only for NaN, which SQLite cannot store.

``kinds`` holds the kind of each metric of a run, written with the
metric's first row. ``distributions`` holds, for each payload that closed
an interval of a watched distribution (a :class:`~rlpulse.Tally`'s
observed key, ``name`` ``<watch>/<key>``), the histogram of that
interval's observations, written in the payload's transaction: buckets
as OpenTelemetry's exponential histogram defines them at ``scale`` 6
(:mod:`rlpulse.distributions`), each sign's counts a JSON array from the
bucket ``*_offset`` on (the negative ones by the bucket of their
negation), the zeros, the sum and the extremes (NULL where unknown).
Intervals do not overlap: the histogram of any span of a run is its
intervals' merged. ``events`` holds the run's :class:`~rlpulse.Event`
records (see :func:`read_events`).

``summaries`` holds, for each metric of a run, its figures over the run's
rows up to the rowid ``summarized.through`` of the run: how many rows,
the extremes (NULL while every value is NaN), the earliest and latest
time, the first and last value and their times, the last value that is
not NaN and its time (``previous``), the growth from each value to the
next where it did not go down and its seconds (NaN rows left out, as
:func:`~rlpulse.formats.records.aggregate` counts them), and the sum and
number of the finite values. The writer brings them up to date in the
transaction of a batch once it has written enough rows after ``through``,
and when it closes; a reader aggregates the rows after ``through`` itself and
merges the two. A run without a ``summarized`` row is aggregated from its
rows alone.

A file written before these tables existed gains them when a logger opens
it again.

The indexes are on ``run`` alone: a logger's rows all land at the end of its run's
range, one index page per commit. An index on ``(run, name)`` would dirty one
page per metric name on every commit and make each payload several times
more expensive to store.
"""

# The most parameters a statement may take: the smallest limit of SQLite
# builds since 3.32 (999 before).
_MOST_PARAMETERS = 32_766 if sqlite3.sqlite_version_info >= (3, 32) else 999
# A batch is stored with one multi-row INSERT per this many metrics (of any
# payloads): 5 parameters a row.
_ROWS_PER_STATEMENT = 2000 if sqlite3.sqlite_version_info >= (3, 32) else 199
_PARAMETERS_PER_ROW = 5
_PARAMETERS_PER_STATEMENT = _ROWS_PER_STATEMENT * _PARAMETERS_PER_ROW
_METRICS_COLUMNS = {"run", "wall_time", "step", "name", "value"}


# Writing


def check_tables(connection: sqlite3.Connection) -> None:
    """Raise ``sqlite3.OperationalError`` when the file is another database: tables, none of them rlpulse's.

    Checked before anything in the file changes: another database is
    refused as it is.
    """
    tables = {
        row[0]
        for row in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'"
        )
    }
    if tables and not tables >= {"runs", "metrics"}:
        raise sqlite3.OperationalError(
            f"it is another database (tables {sorted(tables)}, not rlpulse's "
            "'runs' and 'metrics'), left as it is"
        )


def create_tables(connection: sqlite3.Connection) -> None:
    """Create the tables a file lacks (all of them in a new file), in one transaction, and mark its format version.

    A logger opening the file meanwhile sees every table or none, never a
    half-made store it would refuse. Raises ``sqlite3.OperationalError``
    when the ``metrics`` table lacks a column.
    """
    columns = {row[1] for row in connection.execute("PRAGMA table_info(metrics)")}
    if columns and not columns >= _METRICS_COLUMNS:
        raise sqlite3.OperationalError(
            f"its 'metrics' table has columns {sorted(columns)}, "
            f"not {sorted(_METRICS_COLUMNS)}"
        )
    (version,) = connection.execute("PRAGMA user_version").fetchone()
    upgrade = (
        f"PRAGMA user_version = {SQLITE_FORMAT_VERSION};"
        if version < SQLITE_FORMAT_VERSION
        else ""
    )
    try:
        connection.executescript(f"BEGIN IMMEDIATE; {SQLITE_SCHEMA} {upgrade} COMMIT;")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise


def stored_kind_names(connection: sqlite3.Connection, run_id: int) -> set[str]:
    """The metrics of run ``run_id`` whose kind the file stores."""
    rows = connection.execute("SELECT name FROM kinds WHERE run = ?", (run_id,))
    return {name for (name,) in rows}


def insert_batch(
    connection: sqlite3.Connection,
    run_id: int,
    payloads: Sequence[Payload],
    kinded: set[str],
    summaries: RunSummaries | None = None,
) -> int:
    """Store ``payloads`` in run ``run_id`` as one committed transaction; return how many rows it holds.

    A payload's ``wall_time`` is stored as the time of its rows. The kind of
    each metric not in ``kinded`` (those the run stores) is stored too, and
    added to ``kinded`` once committed; so is each payload's distributions'
    histograms, a row each. ``summaries``, the run's as its writer keeps
    them, takes the rows in; when they are due, they are brought up to
    date (:meth:`RunSummaries.update`), these rows included, in the same
    transaction.
    """
    parameters = _metric_parameters(run_id, payloads)
    histogram_rows = [
        _histogram_row(run_id, payload, name, histogram)
        for payload in payloads
        for name, histogram in payload.distributions.items()
    ]
    new_kinds = {
        name: payload.kind(name)
        for payload in payloads
        if not payload.metrics.keys() <= kinded
        for name in payload.metrics.keys() - kinded
    }
    # Few statements per batch, not one per payload: each statement
    # releases the GIL while SQLite runs it, and beside a CPU-bound
    # thread every release costs a wait of up to the interpreter's
    # switch interval to get it back.
    chunks = [
        parameters[start : start + _PARAMETERS_PER_STATEMENT]
        for start in range(0, len(parameters), _PARAMETERS_PER_STATEMENT)
    ]
    due = summaries is not None and summaries.due
    try:
        if len(chunks) == 1 and not new_kinds and not histogram_rows and not due:
            # One statement outside a transaction is a transaction of its own.
            _insert(connection, chunks[0])
        elif chunks or histogram_rows or due:
            connection.execute("BEGIN IMMEDIATE")
            try:
                for chunk in chunks:
                    _insert(connection, chunk)
                if new_kinds:
                    _insert_kinds(connection, run_id, new_kinds)
                if histogram_rows:
                    _insert_rows(connection, _INSERT_HISTOGRAM, histogram_rows)
                if summaries is not None and due:
                    summaries.add(parameters)
                    summaries.update(connection)
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise
            kinded.update(new_kinds)
    except BaseException:
        if summaries is not None:
            summaries.lose_track()
        raise
    if summaries is not None and not due:
        summaries.add(parameters)
    return len(parameters) // _PARAMETERS_PER_ROW + len(histogram_rows)


def summarize_run(connection: sqlite3.Connection, run_id: int) -> None:
    """Bring the summaries of run ``run_id`` up to date with its rows, as one committed transaction.

    The run's rows after those the summaries include are read in the
    order they were written and taken in as the writer takes in its own,
    going on from the stored summaries: whoever wrote those rows (a
    logger that was killed before it summarised them, another process
    resuming the run), the summaries then include every row of the run.
    A reader gives the same figures with or without them.

    >>> import tempfile, pathlib
    >>> from rlpulse import SQLiteLogger
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "metrics.db"
    ...     with SQLiteLogger(path, run="r") as sink:
    ...         sink.log_metrics({"c/frames": 1.0}, timestamp=1.0)
    ...     with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
    ...         _ = connection.execute("INSERT INTO metrics VALUES (1, 2.0, NULL, 'c/frames', 5.0)")
    ...         before = RunSummaries(connection, 1).unsummarized
    ...         summarize_run(connection, 1)
    ...         print(before, RunSummaries(connection, 1).unsummarized)
    1 0
    """
    connection.execute("BEGIN IMMEDIATE")
    try:
        _summarize(connection, run_id)
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise


def insert_event(connection: sqlite3.Connection, run_id: int, event: Event) -> None:
    """Store ``event`` in run ``run_id``'s events (a transaction of its own)."""
    value = float(event.value)
    connection.execute(
        "INSERT INTO events (run, wall_time, watch, kind, message, value)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (
            run_id,
            float(event.wall_time),
            str(event.watch),
            str(event.kind),
            str(event.message),
            None if value != value else value,
        ),
    )


def remove_empty_run(connection: sqlite3.Connection, run_id: int) -> bool:
    """Remove run ``run_id`` if it holds no metrics and no events; return whether the file then holds no run at all."""
    connection.execute(
        "DELETE FROM runs WHERE id = ?"
        " AND NOT EXISTS (SELECT 1 FROM metrics WHERE run = ?)"
        " AND NOT EXISTS (SELECT 1 FROM events WHERE run = ?)",
        (run_id, run_id, run_id),
    )
    return connection.execute("SELECT 1 FROM runs LIMIT 1").fetchone() is None


def _metric_parameters(run_id: int, payloads: Sequence[Payload]) -> list[object]:
    # The metrics rows' parameters, one flat list: (run, wall_time, step,
    # name, value) for each metric of each payload in turn.
    parameters: list[object] = []
    extend = parameters.extend
    for metrics, step, wall_time, *_ in payloads:
        row_step = None if step is None else int(step)
        for name, value in metrics.items():
            extend((run_id, wall_time, row_step, name, float(value)))
    return parameters


@functools.lru_cache(maxsize=16)
def _insert_statement(row_count: int) -> str:
    # Anonymous parameters, the run bound in every row: SQLite prepares a
    # statement of numbered ones (?1 reused by each row) in time growing
    # with the square of its rows, and a monitor's batches come in sizes
    # the statement cache has not seen.
    rows = ", ".join(["(?, ?, ?, ?, ?)"] * row_count)
    return f"INSERT INTO metrics (run, wall_time, step, name, value) VALUES {rows}"


def _insert(connection: sqlite3.Connection, parameters: list[object]) -> None:
    row_count = len(parameters) // _PARAMETERS_PER_ROW
    connection.execute(_insert_statement(row_count), parameters)


def _insert_rows(
    connection: sqlite3.Connection, head: str, rows: Sequence[Sequence[object]]
) -> None:
    """Run ``head`` (``INSERT ... INTO table (columns)``) over ``rows``, in as few multi-row statements as SQLite takes.

    Not ``executemany``: it steps once a row, and each step lets go of the
    interpreter's lock, which a writer's thread beside a CPU-bound loop then
    waits for (up to the switch interval, 5 ms): the 800 summaries of 100
    watches took about a second that way, and the payloads queued meanwhile
    overflowed. A statement steps once.
    """
    if not rows:
        return
    width = len(rows[0])
    per_statement = _MOST_PARAMETERS // width
    row = f"({', '.join(['?'] * width)})"
    for start in range(0, len(rows), per_statement):
        chunk = rows[start : start + per_statement]
        connection.execute(
            f"{head} VALUES {', '.join([row] * len(chunk))}",
            [value for values in chunk for value in values],
        )


_HISTOGRAM_COLUMNS = (
    "run, wall_time, step, name, scale, zero_count, positive_offset,"
    " positive_counts, negative_offset, negative_counts, sum, min, max"
)
_INSERT_HISTOGRAM = f"INSERT INTO distributions ({_HISTOGRAM_COLUMNS})"
_HistogramRow = tuple[
    int,
    float,
    int | None,
    str,
    int,
    int,
    int,
    str,
    int,
    str,
    float,
    float | None,
    float | None,
]


def _histogram_row(
    run_id: int, payload: Payload, name: str, histogram: Histogram
) -> _HistogramRow:
    # The row of distributions holding `histogram`, distribution `name` of `payload`.
    positive = histogram.buckets()
    negative = histogram.buckets(negative=True)
    step = payload.step
    return (
        run_id,
        payload.wall_time,
        None if step is None else int(step),
        str(name),
        SCALE,
        histogram.zero_count,
        positive.offset,
        json.dumps(positive.counts, separators=(",", ":")),
        negative.offset,
        json.dumps(negative.counts, separators=(",", ":")),
        float(histogram.sum),
        None if (low := histogram.min) is None else float(low),
        None if (high := histogram.max) is None else float(high),
    )


def _insert_kinds(
    connection: sqlite3.Connection, run_id: int, kinds: dict[str, Kind]
) -> None:
    _insert_rows(
        connection,
        "INSERT OR IGNORE INTO kinds (run, name, kind)",
        [(run_id, name, kind.value) for name, kind in kinds.items()],
    )


# Reading


def is_sqlite(head: bytes) -> bool:
    """Whether a file starting with ``head`` is a SQLite file."""
    return head.startswith(SQLITE_MAGIC)


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
    _check_sqlite(path)
    with contextlib.closing(_connect_for_reading(path)) as connection:
        return [name for name, _ in _runs(path, connection)]


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
    infos = []
    with contextlib.closing(_connect_for_reading(path)) as connection:
        try:
            connection.execute("BEGIN")  # summaries and rows as of one commit
            runs = connection.execute(
                "SELECT name, id, start_wall_time FROM runs ORDER BY id"
            ).fetchall()
            for name, run_id, opened in runs:
                first, last, count = _run_span(connection, run_id)
                infos.append(
                    RunInfo(
                        name,
                        opened if first is None else first,
                        opened if last is None else last,
                        count,
                    )
                )
        except sqlite3.Error as error:
            raise RunFileError(f"{path} has unreadable runs: {error}") from error
    return infos


def _run_span(
    connection: sqlite3.Connection, run_id: int
) -> tuple[float | None, float | None, int]:
    # The first and last time of run `run_id`'s rows (None without rows) and
    # their number: its summaries' and its rows' after them.
    through, summaries = _stored_summaries(connection, run_id)
    first, last, count = connection.execute(
        "SELECT MIN(wall_time), MAX(wall_time), COUNT(*) FROM metrics"
        " WHERE run = ? AND rowid > ?",
        (run_id, through),
    ).fetchone()
    starts = [summary.start_wall_time for summary in summaries.values()]
    ends = [summary.end_wall_time for summary in summaries.values()]
    if count:
        starts.append(first)
        ends.append(last)
    return (
        min(starts, default=None),
        max(ends, default=None),
        count + sum(summary.records for summary in summaries.values()),
    )


LOCK_WAIT_S = 10.0
"""How long a reader waits for a SQLite file another process holds locked before giving up."""

LOCK_NOTICE_S = 1.0
"""How long a reader waits for a locked SQLite file before saying that it waits."""

_LOCK_TRY_S = 0.1
# SQLite's own wait for a lock, which Ctrl-C cannot end: each try is this
# short, and the wait goes on in Python between tries.


class RunFileLockedError(RunFileError):
    """A SQLite file that another process's write held locked for longer than a reader waits (:data:`LOCK_WAIT_S`).

    Nothing is wrong with the file: reading it again once the write ends
    works. The message names the file and how to find what holds it.
    """


class RunFileLockedWarning(RunFileWarning):
    """A SQLite file that another process's write holds locked, waited for: reading goes on once it is let go.

    Warned once a reader has waited :data:`LOCK_NOTICE_S` seconds; after
    :data:`LOCK_WAIT_S` seconds it gives up with a :class:`RunFileLockedError`
    saying so. ``rlpulse show``, ``compare`` and ``plot`` print it as a note
    when standard error is a terminal.
    """


class _ReadingConnection(sqlite3.Connection):
    # A connection whose statements wait up to LOCK_WAIT_S for a lock another
    # process holds, warning once after LOCK_NOTICE_S, then raise a
    # RunFileError saying what holds them up.
    path: Path

    def execute(  # type: ignore[override]
        self, sql: str, parameters: Sequence[object] = (), /
    ) -> sqlite3.Cursor:
        started = time.monotonic()
        warned = False
        while True:
            try:
                return super().execute(sql, parameters)
            except sqlite3.OperationalError as error:
                if not _busy(error):
                    raise
            waited = time.monotonic() - started
            if waited >= LOCK_WAIT_S:
                where = shlex.quote(str(self.path))
                raise RunFileLockedError(
                    f"{_locked(self.path)}; rlpulse waited {LOCK_WAIT_S:g} s for it"
                    " to be let go. Try again once that write ends, or close the"
                    f" program holding the file (fuser -v {where} or lsof {where}"
                    " names it)"
                )
            if waited >= LOCK_NOTICE_S and not warned:
                warned = True
                warnings.warn(
                    f"{_locked(self.path)}; waiting up to {LOCK_WAIT_S:g} s for it"
                    " to be let go (Ctrl-C stops)",
                    RunFileLockedWarning,
                    stacklevel=2,
                )


def _locked(path: Path) -> str:
    return f"{path} is locked by another process's write"


def _connect_for_reading(path: Path) -> sqlite3.Connection:
    # mode=rw never creates a missing file, and SQLite itself falls back to
    # read-only for a write-protected one; a read/write connection also cleans
    # up the WAL files when it is the last one to close.
    uri = path.resolve().as_uri() + "?mode=rw"
    try:
        connection = sqlite3.connect(
            uri, uri=True, timeout=_LOCK_TRY_S, factory=_ReadingConnection
        )
        connection.path = path
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


def read_sqlite(
    path: Path,
    run: str | None,
    names: Collection[str] | None = None,
    since: float | None = None,
    until: float | None = None,
) -> Iterator[Record]:
    """The records of run ``run`` (``None``: the latest) of a SQLite file, in order; the run is checked before this returns.

    Only those of ``names`` where given, and those logged at or after
    ``since`` and at or before ``until`` (seconds since the epoch) where
    given: selected by the query.
    """
    run_id = _run_id(path, run)
    return kinds_completed(
        _sqlite_records(path, run_id, names, since, until),
        lambda: _sqlite_names(path, run_id),
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


def _sqlite_records(
    path: Path,
    run_id: int,
    names: Collection[str] | None = None,
    since: float | None = None,
    until: float | None = None,
) -> Iterator[Record]:
    conditions, parameters = _run_rows(run_id, since, until)
    if names is not None:
        wanted = sorted(names)
        conditions.append(f"name IN ({', '.join('?' * len(wanted))})")
        parameters += wanted
    with contextlib.closing(_connect_for_reading(path)) as connection:
        kinds = _sqlite_kinds(connection, run_id)
        rows = connection.execute(
            "SELECT wall_time, step, name, value FROM metrics"
            f" WHERE {' AND '.join(conditions)} ORDER BY rowid",
            parameters,
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
    return {name: kind for name, text in rows if (kind := kind_named(text)) is not None}


def _sqlite_names(path: Path, run_id: int) -> set[str]:
    with contextlib.closing(_connect_for_reading(path)) as connection:
        rows = connection.execute(
            "SELECT DISTINCT name FROM metrics WHERE run = ?", (run_id,)
        )
        return {name for (name,) in rows}


def _run_rows(
    run_id: int, since: float | None, until: float | None
) -> tuple[list[str], list[object]]:
    # The conditions (and their parameters) of a query for the rows of run
    # `run_id` logged from `since` to `until` (seconds since the epoch),
    # each bound inclusive and optional.
    conditions = ["run = ?"]
    parameters: list[object] = [run_id]
    for condition, bound in (("wall_time >= ?", since), ("wall_time <= ?", until)):
        if bound is not None:
            conditions.append(condition)
            parameters.append(bound)
    return conditions, parameters


def read_sqlite_distributions(
    path: Path,
    run: str | None,
    name: str | None = None,
    since: float | None = None,
    until: float | None = None,
) -> Iterator[DistributionRecord]:
    """The stored intervals of run ``run`` (``None``: the latest) of a SQLite file, in order; the run is checked before this returns.

    Only those of distribution ``name`` when given, and those logged at or
    after ``since`` and at or before ``until`` (seconds since the epoch)
    when given. A file written before distributions were stored has none.
    """
    return _sqlite_distributions(path, _run_id(path, run), name, since, until)


def _sqlite_distributions(
    path: Path,
    run_id: int,
    name: str | None,
    since: float | None,
    until: float | None,
) -> Iterator[DistributionRecord]:
    conditions, parameters = _run_rows(run_id, since, until)
    if name is not None:
        conditions.append("name = ?")
        parameters.append(name)
    with contextlib.closing(_connect_for_reading(path)) as connection:
        try:
            rows = connection.execute(
                f"SELECT {_HISTOGRAM_COLUMNS} FROM distributions"
                f" WHERE {' AND '.join(conditions)} ORDER BY rowid",
                parameters,
            )
        except sqlite3.OperationalError:
            return  # written before distributions were stored
        for row in rows:
            yield _distribution_record(path, row)


def _distribution_record(path: Path, row: _HistogramRow) -> DistributionRecord:
    (
        _,
        wall_time,
        step,
        name,
        scale,
        zero_count,
        positive_offset,
        positive_counts,
        negative_offset,
        negative_counts,
        total,
        low,
        high,
    ) = row
    if scale != SCALE:
        raise RunFileError(
            f"{path} stores distribution {name!r} at scale {scale}; this version "
            f"of rlpulse reads scale {SCALE} only: read it with the rlpulse "
            "that wrote it"
        )
    try:
        histogram = Histogram(
            positive=_bucket_counts(positive_offset, positive_counts),
            negative=_bucket_counts(negative_offset, negative_counts),
            zero_count=zero_count,
            sum=total,
            min=low,
            max=high,
        )
    except (ValueError, TypeError) as error:
        raise RunFileError(
            f"{path} has an unreadable histogram of {name!r} at {wall_time}: {error}"
        ) from error
    return DistributionRecord(wall_time, step, name, histogram)


def _bucket_counts(offset: int, counts: str) -> dict[int, int]:
    # The counts by bucket index of a JSON array of counts from bucket `offset` on.
    return {
        offset + position: int(count)
        for position, count in enumerate(json.loads(counts))
        if count
    }


def read_sqlite_events(path: Path, run: str | None) -> Iterator[Event]:
    """The events of run ``run`` (``None``: the latest) of a SQLite file, in order; the run is checked before this returns."""
    return _sqlite_events(path, _run_id(path, run))


def _check_sqlite(path: Path) -> None:
    with open(path, "rb") as file:
        head = file.read(len(SQLITE_MAGIC))
    if not head:
        raise RunFileError(f"{path} is empty: no metrics were written to it")
    if not is_sqlite(head):
        suffix = path.suffix.lower()
        lines = "JSON lines" if head.startswith(b"{") or suffix == ".jsonl" else None
        kind = "CSV" if suffix == ".csv" else lines
        if kind is not None:
            raise RunFileError(
                f"{path} is a {kind} file, which holds one run, named after the "
                "file: rlpulse.read(path) reads it"
            )
        raise RunFileError(f"{path} is not an rlpulse SQLite file, so it has no runs")


# Following


class SQLiteFollower:
    """A run of a SQLite file followed while another process writes it: each look reads only the rows added since the last.

    Metrics and events are read by ``rowid``, after the last one read, on a
    read-only connection: in WAL mode (as ``SQLiteLogger`` writes) a reader
    never blocks the writer, and each look is one short read transaction,
    so checkpoints are not held back between looks. ``run`` names the run
    (``None``: the latest, and a run started later in the file once it
    is: :attr:`Followed.new_run` says so). A file not yet
    there, or without tables or that run yet, is waited for:
    :meth:`read_new` returns nothing and :attr:`waiting` says why. Another
    file at the path (deleted and written anew) is followed from its start,
    the look that first reads its run saying it is a new one; while the
    path is gone the file is waited for. A file
    that is no rlpulse SQLite file raises ``RunFileError``. At most
    ``batch_rows`` metrics and as many events are read per look
    (:attr:`Followed.more` says when more are waiting).

    >>> import tempfile, pathlib
    >>> from rlpulse import SQLiteLogger
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "run.sqlite"
    ...     follower = SQLiteFollower(path, None)
    ...     print(len(follower.read_new().records), follower.waiting)
    ...     with SQLiteLogger(path, run="live") as sink:
    ...         sink.log_metrics({"c/frames": 1.0}, timestamp=100.0)
    ...         first = follower.read_new().records
    ...         sink.log_metrics({"c/frames": 2.0}, timestamp=101.0)
    ...         second = follower.read_new().records
    ...     follower.close()
    0 ... does not exist yet
    >>> [record.value for record in first], [record.value for record in second], follower.run
    ([1.0], [2.0], 'live')
    """

    def __init__(
        self, path: Path, run: str | None, *, batch_rows: int = 100_000
    ) -> None:
        self.path = path
        self.run = run
        self.waiting: str | None = not_there_yet(path)
        self._batch_rows = batch_rows
        self._connection: sqlite3.Connection | None = None
        # Which file is followed: another at the same path is a new run.
        # Its run is checked again on each new connection: a file written
        # anew after close() may be given the same inode.
        self._identity: tuple[int, int] | None = None
        self._run_id: int | None = None
        self._run_start = math.nan
        self._run_checked = True
        self._last_metric = 0
        self._last_event = 0
        self._kinds: dict[str, Kind] = {}
        self._latest = run is None
        self._new_run = False

    def read_new(self) -> Followed:
        """The records and events written since the last look (all of them at the first)."""
        connection = self._connected()
        if connection is None or (run_id := self._found_run(connection)) is None:
            return Followed([], [])
        new_run, self._new_run = self._new_run, False
        try:
            rows = connection.execute(
                "SELECT rowid, wall_time, step, name, value FROM metrics"
                " WHERE rowid > ? AND run = ? ORDER BY rowid LIMIT ?",
                (self._last_metric, run_id, self._batch_rows),
            ).fetchall()
            events = self._new_events(connection, run_id)
        except sqlite3.OperationalError as error:
            if _busy(error):
                return Followed([], [], True, new_run)  # the next look reads them
            raise RunFileError(f"{self.path} cannot be read: {error}") from error
        if rows:
            self._last_metric = rows[-1][0]
            if any(name not in self._kinds for _, _, _, name, _ in rows):
                self._kinds.update(_sqlite_kinds(connection, run_id))
        kinds = self._kinds
        records = [
            Record(
                wall_time,
                step,
                name,
                math.nan if value is None else value,
                kinds.get(name),
            )
            for _, wall_time, step, name, value in rows
        ]
        more = len(rows) == self._batch_rows or len(events) == self._batch_rows
        return Followed(records, events, more, new_run)

    def close(self) -> None:
        """Close the connection; a later look opens another and reads on from the rows this one reached (from the start of another file at the path)."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _connected(self) -> sqlite3.Connection | None:
        # Before connecting: a file replaced meanwhile is seen at the next look.
        identity = _file_identity(self.path)
        if self._identity is not None and identity != self._identity:
            self._start_again()
        if self._connection is not None:
            return self._connection
        if identity is None:
            self.waiting = not_there_yet(self.path)
            return None
        try:
            with open(self.path, "rb") as file:
                head = file.read(len(SQLITE_MAGIC))
        except FileNotFoundError:
            self.waiting = not_there_yet(self.path)
            return None
        if len(head) < len(SQLITE_MAGIC) and SQLITE_MAGIC.startswith(head):
            self.waiting = f"{self.path} is being created"
            return None
        if not is_sqlite(head):
            raise RunFileError(f"{self.path} is not an rlpulse SQLite file")
        uri = self.path.resolve().as_uri() + "?mode=ro"
        try:
            self._connection = sqlite3.connect(uri, uri=True, timeout=0.05)
        except sqlite3.Error as error:
            raise RunFileError(
                f"{self.path} is not a readable SQLite file: {error}"
            ) from error
        self._identity = identity
        self._run_checked = False
        return self._connection

    def _start_again(self) -> None:
        # The file followed was deleted or replaced: it is let go of.
        self.close()
        self._identity = None
        self._forget_run()

    def _forget_run(self) -> None:
        # What was read of the run followed; the next one found is a new run.
        if self._latest:
            self.run = None
        self._run_id = None
        self._run_start = math.nan
        self._last_metric = self._last_event = 0
        self._kinds = {}
        self._new_run = True

    def _found_run(self, connection: sqlite3.Connection) -> int | None:
        if self._run_id is not None and not self._same_run(connection):
            self._forget_run()
        if self._run_id is not None:
            if self._latest:
                self._move_to_a_later_run(connection)
            return self._run_id
        try:
            runs = connection.execute(
                "SELECT name, id, start_wall_time FROM runs ORDER BY id"
            ).fetchall()
        except sqlite3.OperationalError as error:
            if _busy(error):
                self.waiting = f"{_locked(self.path)}; waiting for it to be let go"
                return None
            if "no such table" in str(error):
                self.waiting = f"{self.path} has no runs yet"
                return None
            raise RunFileError(f"{self.path} cannot be read: {error}") from error
        named = [run for run in runs if self.run in (None, run[0])]
        if not named:
            self.waiting = (
                f"{self.path} has no runs yet"
                if not runs
                else f"{self.path} has no run named {self.run!r} yet; its runs: "
                + ", ".join(str(run[0]) for run in runs)
            )
            return None
        self.run, self._run_id, self._run_start = named[-1]
        self._run_checked = True
        self.waiting = None
        return self._run_id

    def _same_run(self, connection: sqlite3.Connection) -> bool:
        # Whether the run followed is in the file just connected to (the
        # same name and start), not in another written anew at the path.
        if self._run_checked:
            return True
        try:
            row = connection.execute(
                "SELECT name, start_wall_time FROM runs WHERE id = ?",
                (self._run_id,),
            ).fetchone()
        except sqlite3.OperationalError as error:
            if _busy(error):
                return True  # checked at the next look
            if "no such table" in str(error):
                return False
            raise RunFileError(f"{self.path} cannot be read: {error}") from error
        self._run_checked = True
        return tuple(row or ()) == (self.run, self._run_start)

    def _move_to_a_later_run(self, connection: sqlite3.Connection) -> None:
        # Following the latest run: a run started since is followed instead,
        # from its start.
        try:
            later = connection.execute(
                "SELECT name, id, start_wall_time FROM runs"
                " WHERE id > ? ORDER BY id DESC LIMIT 1",
                (self._run_id,),
            ).fetchone()
        except sqlite3.OperationalError as error:
            if _busy(error):
                return  # the next look
            raise RunFileError(f"{self.path} cannot be read: {error}") from error
        if later is not None:
            self._forget_run()
            self.run, self._run_id, self._run_start = later

    def _new_events(self, connection: sqlite3.Connection, run_id: int) -> list[Event]:
        try:
            rows = connection.execute(
                "SELECT rowid, wall_time, watch, kind, message, value FROM events"
                " WHERE rowid > ? AND run = ? ORDER BY rowid LIMIT ?",
                (self._last_event, run_id, self._batch_rows),
            ).fetchall()
        except sqlite3.OperationalError as error:
            if "no such table" in str(error):
                return []  # written before events were stored
            raise
        if rows:
            self._last_event = rows[-1][0]
        return [
            Event(wall_time, watch, kind, message, math.nan if value is None else value)
            for _, wall_time, watch, kind, message, value in rows
        ]


def _file_identity(path: Path) -> tuple[int, int] | None:
    # Which file is at ``path`` (None: none): one written anew differs.
    try:
        status = os.stat(path)
    except FileNotFoundError:
        return None
    return status.st_dev, status.st_ino


def _busy(error: sqlite3.OperationalError) -> bool:
    # The writer holds a lock a reader must wait for (WAL recovery, a file
    # not in WAL mode): nothing is lost by looking again later.
    return "locked" in str(error) or "busy" in str(error)


# Summarising and downsampling where the data is

# A run with at most this many records is downsampled from its rows, as a
# line file is: the same points, whichever format stored them.
_DOWNSAMPLED_IN_PYTHON_UP_TO = 50_000
# Names bound as parameters of one statement: below SQLite's smallest limit.
_NAMES_PER_STATEMENT = 500


def read_sqlite_aggregate(
    path: Path,
    run: str | None,
    since: float | None = None,
    until: float | None = None,
) -> RunAggregate:
    """Run ``run`` (``None``: the latest) of a SQLite file in aggregate, from its stored summaries; the run is checked first.

    The same figures :func:`~rlpulse.formats.records.aggregate` computes
    from the run's records, each metric's kind as :func:`read_sqlite` gives
    it, reading only the rows the summaries do not include: the run's
    stored summaries (see :data:`SQLITE_SCHEMA`), going on with its rows
    after them as the writer takes its rows in; a run without summaries
    is all rows after them. Only counters have a growth (0 for the
    rest). With ``since`` or ``until`` (seconds since the epoch, each
    inclusive), the figures are those of the rows logged in that span,
    which the query selects: the stored summaries, of the whole run, do not
    apply to a part of it.
    """
    run_id = _run_id(path, run)
    with contextlib.closing(_connect_for_reading(path)) as connection:
        # One read transaction: summaries and rows as of one commit, however
        # the writer moves the summaries on meanwhile.
        connection.execute("BEGIN")
        stored = _sqlite_kinds(connection, run_id)
        if since is None and until is None:
            through, summaries = _stored_summaries(connection, run_id)
            _, newer = _summaries_after(connection, run_id, through, summaries)
            summaries.update(newer)
        else:
            summaries = _span_summaries(connection, run_id, since, until)
        connection.execute("COMMIT")
    if not summaries:
        return RunAggregate(0, None, None, ())
    names = sorted(summaries)
    metrics = []
    for name in names:
        summary = summaries[name]
        kind = stored[name] if name in stored else inferred_kind(name, names)
        is_counter = kind is Kind.COUNTER
        metrics.append(
            MetricAggregate(
                name,
                kind,
                summary.records,
                summary.first,
                summary.last,
                summary.minimum,
                summary.maximum,
                summary.first_wall_time,
                summary.last_wall_time,
                summary.growth if is_counter else 0.0,
                summary.growth_s if is_counter else 0.0,
                summary.finite_sum,
                summary.finite_count,
            )
        )
    return RunAggregate(
        sum(summary.records for summary in summaries.values()),
        min(summary.start_wall_time for summary in summaries.values()),
        max(summary.end_wall_time for summary in summaries.values()),
        tuple(metrics),
    )


def _span_summaries(
    connection: sqlite3.Connection,
    run_id: int,
    since: float | None,
    until: float | None,
) -> dict[str, _Summary]:
    # The summaries of the rows of run `run_id` logged from `since` to
    # `until`, taken in as the writer takes its rows in.
    conditions, parameters = _run_rows(run_id, since, until)
    rows = connection.execute(
        "SELECT name, wall_time, value FROM metrics"
        f" WHERE {' AND '.join(conditions)} ORDER BY rowid",
        parameters,
    )
    running: dict[str, MetricAccumulator] = {}
    _take_rows(running, {}, rows)
    return {name: _summary_of(name, metric) for name, metric in running.items()}


class _Summary(NamedTuple):
    """One metric of a run over its rows up to a rowid, as a row of ``summaries`` holds it (less its run); NaN for NULL."""

    name: str
    records: int
    minimum: float
    maximum: float
    start_wall_time: float
    end_wall_time: float
    first: float
    first_wall_time: float
    last: float
    last_wall_time: float
    previous: float
    previous_wall_time: float
    growth: float
    growth_s: float
    finite_sum: float
    finite_count: int


_SUMMARY_COLUMNS = ", ".join(_Summary._fields)
_STORE_SUMMARY = f"INSERT OR REPLACE INTO summaries (run, {_SUMMARY_COLUMNS})"


def _stored_summaries(
    connection: sqlite3.Connection, run_id: int
) -> tuple[int, dict[str, _Summary]]:
    # The last rowid the run's stored summaries include (0: none), and them.
    try:
        found = connection.execute(
            "SELECT through FROM summarized WHERE run = ?", (run_id,)
        ).fetchone()
    except sqlite3.OperationalError as error:
        if "no such table" in str(error):
            return 0, {}  # written before summaries were stored
        raise
    if found is None:
        return 0, {}
    rows = connection.execute(
        f"SELECT {_SUMMARY_COLUMNS} FROM summaries WHERE run = ?", (run_id,)
    )
    return found[0], {
        row[0]: _Summary._make(math.nan if value is None else value for value in row)
        for row in rows
    }


def _summaries_after(
    connection: sqlite3.Connection,
    run_id: int,
    through: int,
    stored: dict[str, _Summary],
    rows_at_most: int | None = None,
) -> tuple[int, dict[str, _Summary]]:
    """The summaries of the metrics with rows after rowid ``through`` (the first ``rows_at_most`` of them; ``None``: all), ``stored`` merged with those rows, and the last rowid they include.

    The rows go, in the order they were written, into the running
    aggregates the writer keeps (:func:`_take_rows`): the same figures
    :func:`~rlpulse.formats.records.aggregate` gives, sums added up in
    the same order.
    """
    (last_rowid,) = connection.execute(
        "SELECT MAX(rowid) FROM (SELECT rowid FROM metrics"
        " WHERE run = ? AND rowid > ? ORDER BY rowid LIMIT ?)",
        (run_id, through, -1 if rows_at_most is None else rows_at_most),
    ).fetchone()
    if last_rowid is None:
        return through, {}
    running: dict[str, MetricAccumulator] = {}
    rows = connection.execute(
        "SELECT name, wall_time, value FROM metrics"
        " WHERE run = ? AND rowid > ? AND rowid <= ? ORDER BY rowid",
        (run_id, through, last_rowid),
    )
    _take_rows(running, stored, rows)
    return last_rowid, {
        name: _summary_of(name, metric) for name, metric in running.items()
    }


def _take_rows(
    running: dict[str, MetricAccumulator],
    stored: dict[str, _Summary],
    rows: Iterable[tuple[str, float, float | None]],
) -> None:
    # Rows (name, wall time, value: None for NaN, as SQLite stores it) in
    # the order written, into each metric's running aggregate, begun from
    # its stored summary where it has one.
    for name, wall_time, stored_value in rows:
        value = math.nan if stored_value is None else stored_value
        metric = running.get(name)
        if metric is None:
            summary = stored.get(name)
            metric = running[name] = (
                MetricAccumulator(value, wall_time)
                if summary is None
                else _running(summary)
            )
        metric.take(value, wall_time)


class RunSummaries:
    """A run's summaries as its writer keeps them: the rows it writes taken in as they go, stored every :data:`ROWS_PER_SUMMARY` rows.

    The writer's rows are aggregated as it writes them, each metric's
    figures going on from its stored summary in the order
    :func:`~rlpulse.formats.records.aggregate` takes them. When due, in
    the transaction of a batch (:func:`insert_batch`), they are stored if
    the rows after the stored summaries are all the writer's own; else
    (rows it did not write: a run resumed after a writer was killed, or
    written by another at the same time; a batch that failed) they are
    computed again from those rows (:func:`summarize_run`). Either way the
    same figures.

    >>> import tempfile, pathlib
    >>> from rlpulse import SQLiteLogger
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "metrics.db"
    ...     with SQLiteLogger(path, run="r") as sink:
    ...         sink.log_metrics({"c/frames": 1.0}, timestamp=1.0)
    ...     with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
    ...         summaries = RunSummaries(connection, 1)
    ...         print(summaries.unsummarized, summaries.due)
    0 False
    """

    def __init__(self, connection: sqlite3.Connection, run_id: int) -> None:
        self._run_id = run_id
        self._through = 0
        self._stored: dict[str, _Summary] = {}
        self._unsummarized = 0
        self._running: dict[str, MetricAccumulator] = {}
        # The writer's rows since the stored summaries, and whether they
        # are all the rows after them, taken in.
        self._own = 0
        self._in_step = True
        self._load(connection)

    @property
    def unsummarized(self) -> int:
        """How many rows of the run the stored summaries do not include."""
        return self._unsummarized

    @property
    def due(self) -> bool:
        """Whether the next batch brings the summaries up to date: once the writer has written :data:`ROWS_PER_SUMMARY` rows they do not include.

        Rows it found there (a resumed run) do not count: a reader
        aggregates them itself, and summarising a long run's worth of them
        in the writer's next batch would hold up the writer, and every
        other writer of the file, for as long.
        """
        return self._own >= ROWS_PER_SUMMARY

    def add(self, parameters: list[object]) -> None:
        """Take in the rows of a batch, as :func:`insert_batch` binds them."""
        rows = len(parameters) // _PARAMETERS_PER_ROW
        self._unsummarized += rows
        self._own += rows
        if not self._in_step:
            return
        # The columns name, wall_time and value of the rows as bound.
        columns = zip(parameters[3::5], parameters[1::5], parameters[4::5], strict=True)
        _take_rows(
            self._running,
            self._stored,
            cast("Iterator[tuple[str, float, float]]", columns),
        )

    def update(self, connection: sqlite3.Connection) -> None:
        """Store the summaries brought up to date, in the transaction under way of a batch.

        With every row of the run when the writer has taken them all in;
        else with at most a few times :data:`ROWS_PER_SUMMARY` rows after
        them (read back from the file): a batch costs at most that much
        more, and the summaries catch up with a long run they did not
        include over the writer's next updates.
        """
        self._update(connection, 4 * ROWS_PER_SUMMARY)

    def store(self, connection: sqlite3.Connection) -> None:
        """Store the summaries brought up to date with every row of the run, as one committed transaction (as a writer closes)."""
        connection.execute("BEGIN IMMEDIATE")
        try:
            self._update(connection, None)
            connection.execute("COMMIT")
        except BaseException:
            self.lose_track()
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise

    def lose_track(self) -> None:
        """Forget the rows taken in (a batch failed): the next update reads the run's rows."""
        self._in_step = False

    def _update(self, connection: sqlite3.Connection, rows_at_most: int | None) -> None:
        if self._in_step:
            count, last_rowid = _rows_after(connection, self._run_id, self._through)
            if count == self._own:
                if last_rowid is not None:
                    newer = {
                        name: _summary_of(name, metric)
                        for name, metric in self._running.items()
                    }
                    _store_summaries(connection, self._run_id, newer, last_rowid)
                    self._stored.update(newer)
                    self._through = last_rowid
                self._running = {}
                self._own = self._unsummarized = 0
                return
        _summarize(connection, self._run_id, rows_at_most)
        self._load(connection)

    def _load(self, connection: sqlite3.Connection) -> None:
        self._through, self._stored = _stored_summaries(connection, self._run_id)
        self._unsummarized, _ = _rows_after(connection, self._run_id, self._through)
        self._running = {}
        self._own = 0
        self._in_step = self._unsummarized == 0


def _rows_after(
    connection: sqlite3.Connection, run_id: int, through: int
) -> tuple[int, int | None]:
    # How many rows run `run_id` has after rowid `through`, and the last one's
    # id (None without).
    count, last_rowid = connection.execute(
        "SELECT COUNT(*), MAX(rowid) FROM metrics WHERE run = ? AND rowid > ?",
        (run_id, through),
    ).fetchone()
    return count, last_rowid


# The fields of a summary its running aggregate holds: all but the name.
_RUNNING_FIELDS = _Summary._fields[1:]


def _running(summary: _Summary) -> MetricAccumulator:
    # A metric's running aggregate, going on from its summary.
    metric = MetricAccumulator(summary.first, summary.first_wall_time)
    for field, value in zip(_RUNNING_FIELDS, summary[1:], strict=True):
        setattr(metric, field, value)
    return metric


def _summary_of(name: str, metric: MetricAccumulator) -> _Summary:
    return _Summary(name, *(getattr(metric, field) for field in _RUNNING_FIELDS))


def _summarize(
    connection: sqlite3.Connection, run_id: int, rows_at_most: int | None = None
) -> None:
    # Bring run `run_id`'s summaries up to date, in the transaction under
    # way, with its rows after them (`rows_at_most` of them; None: all).
    through, stored = _stored_summaries(connection, run_id)
    last_rowid, newer = _summaries_after(
        connection, run_id, through, stored, rows_at_most
    )
    if newer:
        _store_summaries(connection, run_id, newer, last_rowid)


def _store_summaries(
    connection: sqlite3.Connection,
    run_id: int,
    summaries: dict[str, _Summary],
    through: int,
) -> None:
    _insert_rows(
        connection,
        _STORE_SUMMARY,
        [(run_id, *summary) for summary in summaries.values()],
    )
    connection.execute(
        "INSERT OR REPLACE INTO summarized (run, through) VALUES (?, ?)",
        (run_id, through),
    )


def read_sqlite_downsampled(
    path: Path,
    run: str | None,
    keep: Keep | None,
    buckets: int,
) -> Downsampled:
    """Run ``run`` (``None``: the latest) of a SQLite file downsampled as :func:`~rlpulse.formats.records.downsample` does it; the run is checked first.

    A long run is downsampled by SQLite in one scan of its rows: those of
    the metrics ``keep`` returns of those whose kind the file stores (all
    for ``None``) and of every other metric, grouped by metric and bucket
    of time: each bucket's smallest and largest value at their times, a NaN
    where it holds one.
    """
    run_id = _run_id(path, run)
    with contextlib.closing(_connect_for_reading(path)) as connection:
        # The run's span from its summaries, not a scan of its rows; in one
        # read transaction, summaries and rows as of one commit.
        connection.execute("BEGIN")
        start, end, count = _run_span(connection, run_id)
        connection.execute("COMMIT")
        if start is None or end is None or count <= _DOWNSAMPLED_IN_PYTHON_UP_TO:
            return downsample(read_sqlite(path, run), buckets, keep)
        stored = _sqlite_kinds(connection, run_id)
        width = (end - start) / buckets or 1.0
        wanted = (
            list(stored) if keep is None else sorted(set(keep(stored)) & stored.keys())
        )
        points = _buckets(connection, run_id, start, width, wanted, stored)
    kinds: dict[str, Kind | None] = dict(stored)
    for name in points:
        if name not in stored:
            kinds[name] = inferred_kind(name, kinds.keys())
    return Downsampled(count, start, end, kinds, points)


# Each bucket's extremes at their times, in time order by metric, from one
# scan of the run's rows: grouped twice, once for the smallest values and
# once for the largest (a bare column comes from the row of the one MIN or
# MAX of its query), and a NaN at the middle of each bucket that holds one.
# A row that is both comes twice, one after the other: left to the reader,
# as sorting them out here costs SQLite a second sort of every row.
# ?1 the run, ?2 the start, ?3 the buckets' width.
_BUCKETS = """
WITH rows AS MATERIALIZED (
    SELECT rowid AS id, name, CAST((wall_time - ?2) / ?3 AS INTEGER) AS bucket,
        wall_time, step, value
    FROM metrics WHERE run = ?1 AND {chosen}
), lowest AS MATERIALIZED (
    SELECT id, name, bucket, wall_time, step, MIN(value) AS value,
        COUNT(value) < COUNT(*) AS gap
    FROM rows GROUP BY name, bucket
)
SELECT name, wall_time, step, value, id FROM lowest
UNION ALL
SELECT name, ?2 + (bucket + 0.5) * ?3, NULL, NULL, NULL FROM lowest WHERE gap
UNION ALL
SELECT name, wall_time, step, MAX(value), id FROM rows GROUP BY name, bucket
ORDER BY name, wall_time, id
"""


def _buckets(
    connection: sqlite3.Connection,
    run_id: int,
    start: float,
    width: float,
    names: list[str],
    stored: dict[str, Kind],
) -> dict[str, Points]:
    # Each metric's points: its rows of _BUCKETS, as columns.
    chosen = "1"
    parameters: list[object] = [run_id, start, width]
    if stored.keys() - set(names) and len(names) < _NAMES_PER_STATEMENT:
        marks = ", ".join(f"?{4 + index}" for index in range(len(names)))
        chosen = f"name IN ({marks})"
        if not _every_kind_stored(connection, run_id):
            # And the names whose kind is not stored: guessed from every name.
            chosen = (
                f"({chosen} OR name NOT IN (SELECT name FROM kinds WHERE run = ?1))"
            )
        parameters += names
    rows = connection.execute(_BUCKETS.format(chosen=chosen), parameters).fetchall()
    points: dict[str, Points] = {}
    for name, group in itertools.groupby(rows, operator.itemgetter(0)):
        # A bucket's smallest value that is also its largest: once.
        unique = (row for row, _ in itertools.groupby(group))
        _, wall_times, steps, values, _ = zip(*unique, strict=True)
        points[name] = Points(
            list(wall_times),
            list(steps),
            [math.nan if value is None else value for value in values]
            if None in values
            else list(values),
        )
    return points


def _every_kind_stored(connection: sqlite3.Connection, run_id: int) -> bool:
    # A logger that stores kinds stores each metric's with the metric's first
    # row: a run it began (its first row's kind is stored) has every kind
    # stored; one begun by rlpulse 0.1.0, resumed since, only some.
    (stored,) = connection.execute(
        "SELECT EXISTS (SELECT 1 FROM kinds WHERE run = ?1 AND name = ("
        " SELECT name FROM metrics WHERE rowid = ("
        "  SELECT MIN(rowid) FROM metrics WHERE run = ?1)))",
        (run_id,),
    ).fetchone()
    return bool(stored)
