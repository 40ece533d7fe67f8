"""The run files rlpulse writes: each format's schema, writer, reader and repair, in a module of its own.

- :mod:`~rlpulse.formats.sqlite` (``SQLiteLogger``): several runs per file.
- :mod:`~rlpulse.formats.csv` (``CSVLogger``): one row per metric.
- :mod:`~rlpulse.formats.jsonl` (``JSONLLogger``): one JSON object per payload.

They share :mod:`~rlpulse.formats.records` (the :class:`Record` every
reader yields, the errors, the kinds) and, the two line formats,
:mod:`~rlpulse.formats.lines` (reading lines, removing a line torn by a
crash). The sinks in :mod:`rlpulse.sinks` write through these modules;
:mod:`rlpulse.read` summarises, compares and draws what :func:`read`
yields, and follows what a :class:`RunFollower` reads as it is written.

Each record carries its metric's kind (:class:`rlpulse.naming.Kind`): the
one stored, or, for a file written before kinds were stored (rlpulse
0.1.0) and any metric a file does not declare, the one guessed from the
run's names (:func:`rlpulse.naming.inferred_kind`), as ``rlpulse show``
always guessed it. Units are not stored: a metric's unit is what its name
says (:func:`rlpulse.naming.unit_of`, :attr:`Record.unit`).

Line files are complete up to their last newline: whatever follows was cut
short by a crash, or is still being written, so :func:`read` leaves it out
(saying so with a :class:`RunFileWarning`) and the sinks remove it before
appending. Files written by hand are read as their meaning is clear; what
a reader cannot make sense of is a :class:`RunFileError` naming the file,
the line and what is wrong.
"""

from __future__ import annotations

import errno
import math
import numbers
import os
from collections.abc import Collection, Iterator
from pathlib import Path

from rlpulse.formats.csv import CSV_FIELDS, CSV_FIELDS_0_1, CSVFollower, read_csv
from rlpulse.formats.jsonl import JSONLFollower, read_jsonl, read_jsonl_events
from rlpulse.formats.records import (
    DistributionRecord,
    Downsampled,
    Followed,
    Keep,
    MetricAggregate,
    Points,
    Record,
    RunAggregate,
    RunFileError,
    RunFileWarning,
    RunInfo,
    aggregate,
    downsample,
    merge_distributions,
    not_there_yet,
    prepare_record_file,
)
from rlpulse.formats.sqlite import (
    SQLITE_FORMAT_VERSION,
    SQLITE_MAGIC,
    SQLITE_SCHEMA,
    RunFileLockedError,
    RunFileLockedWarning,
    SQLiteFollower,
    is_sqlite,
    list_runs,
    read_sqlite,
    read_sqlite_aggregate,
    read_sqlite_distributions,
    read_sqlite_downsampled,
    read_sqlite_events,
    run_infos,
)
from rlpulse.runtime.events import Event

__all__ = [
    "CSV_FIELDS",
    "CSV_FIELDS_0_1",
    "SQLITE_FORMAT_VERSION",
    "SQLITE_MAGIC",
    "SQLITE_SCHEMA",
    "DistributionRecord",
    "Downsampled",
    "Followed",
    "MetricAggregate",
    "Points",
    "Record",
    "RunAggregate",
    "RunFileError",
    "RunFileLockedError",
    "RunFileLockedWarning",
    "RunFileWarning",
    "RunFollower",
    "RunInfo",
    "aggregate",
    "downsample",
    "list_runs",
    "merge_distributions",
    "prepare_record_file",
    "read",
    "read_aggregate",
    "read_distributions",
    "read_downsampled",
    "read_events",
    "run_infos",
]


def read(
    path: str | os.PathLike[str],
    run: str | None = None,
    *,
    names: Collection[str] | None = None,
    since: float | None = None,
    until: float | None = None,
) -> Iterator[Record]:
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
    lines payload without ``"step"`` has step ``None``. ``names``, where
    given, keeps only the records of those metrics, and ``since`` and
    ``until`` (seconds since the epoch, each inclusive, either or both)
    only those logged in that span: for SQLite in the query, for a line
    file as it is read. A last line cut short
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
    _check_names(names)
    _check_span(since, until)
    path = Path(path)
    file_format = _format_for(path, run)
    if file_format == "sqlite":
        return read_sqlite(path, run, names, since, until)
    records = read_csv(path) if file_format == "csv" else read_jsonl(path)
    if names is None and since is None and until is None:
        return records
    return _kept(records, names, since, until)


def _kept(
    records: Iterator[Record],
    names: Collection[str] | None,
    since: float | None,
    until: float | None,
) -> Iterator[Record]:
    # The records of `names` (None: all) logged from `since` to `until`.
    wanted = None if names is None else frozenset(names)
    earliest = -math.inf if since is None else since
    latest = math.inf if until is None else until
    for record in records:
        if (wanted is None or record.name in wanted) and (
            earliest <= record.wall_time <= latest
        ):
            yield record


def read_aggregate(
    path: str | os.PathLike[str],
    run: str | None = None,
    *,
    since: float | None = None,
    until: float | None = None,
) -> RunAggregate:
    """The records of a run (as :func:`read` reads them) in aggregate: each metric's first, last, extremes, growth and mean.

    Computed where the data is: SQLite aggregates a run itself; a CSV or
    JSON lines file is read once, keeping a few figures per metric
    (:func:`aggregate`). ``since`` and ``until`` (seconds since the epoch,
    each inclusive, either or both) aggregate only the records logged in
    that span, as :func:`read` selects them: a counter's growth is then
    its growth within the span. ``run`` and the errors as for :func:`read`.

    >>> import tempfile, pathlib
    >>> from rlpulse import SQLiteLogger
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     with SQLiteLogger(pathlib.Path(tmp) / "run.db") as sink:
    ...         for second in range(3):
    ...             sink.log_metrics({"c/frames": 100.0 * second}, step=second, timestamp=10.0 + second)
    ...     (frames,) = read_aggregate(sink.path).metrics
    >>> frames.kind, frames.last, frames.growth / frames.growth_s
    (<Kind.COUNTER: 'counter'>, 200.0, 100.0)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     with SQLiteLogger(pathlib.Path(tmp) / "run.db") as sink:
    ...         for second in range(4):
    ...             sink.log_metrics({"c/frames": 100.0 * second**2}, step=second, timestamp=10.0 + second)
    ...     (frames,) = read_aggregate(sink.path, since=12.0).metrics
    >>> frames.first, frames.last, frames.growth / frames.growth_s
    (400.0, 900.0, 500.0)
    """
    _check_span(since, until)
    path = Path(path)
    if _format_for(path, run) == "sqlite":
        return read_sqlite_aggregate(path, run, since, until)
    return aggregate(read(path, run, since=since, until=until))


def read_downsampled(
    path: str | os.PathLike[str],
    run: str | None = None,
    *,
    buckets: int,
    keep: Keep | None = None,
) -> Downsampled:
    """The records of a run (as :func:`read` reads them) downsampled to about ``buckets`` buckets of time per metric, as :func:`downsample` does it.

    ``keep``, given the kind of each metric of the run, returns the names
    of those whose points to keep (``None``: all); SQLite asks it of the
    metrics whose kind it stores, and keeps the points of the others too.
    SQLite downsamples a long run itself; a CSV or JSON lines file is read
    once, keeping a few points per bucket. ``run`` and the errors as for
    :func:`read`.

    >>> import tempfile, pathlib
    >>> from rlpulse import JSONLLogger
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     with JSONLLogger(pathlib.Path(tmp) / "run.jsonl") as sink:
    ...         for second in range(1000):
    ...             sink.log_metrics({"b/size": float(second % 10)}, timestamp=float(second))
    ...     run = read_downsampled(sink.path, buckets=50)
    >>> run.records, len(run.points["b/size"].values) <= 100, max(run.points["b/size"].values)
    (1000, True, 9.0)
    """
    path = Path(path)
    if _format_for(path, run) == "sqlite":
        return read_sqlite_downsampled(path, run, keep, buckets)
    return downsample(read(path, run), buckets, keep)


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
    file_format = _format_for(path, run)
    if file_format == "sqlite":
        return read_sqlite_events(path, run)
    if file_format == "csv":
        raise RunFileError(
            f"{path} is a CSV file, which stores no events: SQLiteLogger and "
            "JSONLLogger store them"
        )
    # Checked now, as read() checks a first payload: the first line parses.
    return read_jsonl_events(path)


def read_distributions(
    path: str | os.PathLike[str],
    run: str | None = None,
    *,
    name: str | None = None,
    since: float | None = None,
    until: float | None = None,
) -> Iterator[DistributionRecord]:
    """Iterate over the logged intervals of the distributions of a run stored by ``SQLiteLogger``, in order.

    Each :class:`DistributionRecord` holds the histogram of one
    distribution's observations (a watched :class:`~rlpulse.Tally`'s
    observed key) over the interval one payload closed, since its watch's
    previous logged snapshot. ``run`` as for :func:`read`; ``name``
    (``<watch>/<key>``) keeps one distribution; ``since`` and ``until``
    (seconds since the epoch) keep the intervals logged from one to the
    other. :func:`merge_distributions` adds them up: the quantiles of any
    span of a run. A SQLite file written before distributions were stored
    (rlpulse 0.1.0 and a version after it) has none. CSV and JSON lines
    files store no histograms: reading one raises ``RunFileError``, as a
    missing file raises ``FileNotFoundError`` and an empty or corrupt one
    ``RunFileError``, before this returns.

    >>> import tempfile, pathlib
    >>> from rlpulse import Every, LoggerMonitor, SQLiteLogger, Tally
    >>> tally = Tally()
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     with SQLiteLogger(pathlib.Path(tmp) / "run.db") as sink:
    ...         monitor = LoggerMonitor(sink, background=False)
    ...         _ = monitor.watch(tally, name="learner", schedule=Every.counter("update_s_count", 100))
    ...         for interval in range(3):
    ...             for milliseconds in range(1, 101):
    ...                 tally.observe("update_s", milliseconds / 1000)
    ...             _ = monitor.step()
    ...         monitor.stop()
    ...     intervals = list(read_distributions(sink.path, name="learner/update_s"))
    ...     merged = merge_distributions(intervals)["learner/update_s"]
    >>> len(intervals), merged.count, round(merged.quantile(0.99), 3)
    (3, 300, 0.099)
    """
    _check_span(since, until)
    path = Path(path)
    file_format = _format_for(path, run)
    if file_format == "sqlite":
        return read_sqlite_distributions(path, run, name, since, until)
    raise RunFileError(
        f"{path} is a {file_format.upper()} file, which stores no histograms, "
        "only their quantiles: SQLiteLogger stores them"
    )


class RunFollower:
    """A run file followed while another process writes it, whatever its format: each look reads only what was written since the last.

    A file not there yet (or still empty) is waited for: :meth:`read_new`
    returns nothing and :attr:`waiting` says why; its format is decided when
    it has a first line. Then each format's follower reads on from where it
    stopped (:class:`~rlpulse.formats.sqlite.SQLiteFollower`: the rows after
    the last one read; :class:`~rlpulse.formats.jsonl.JSONLFollower`,
    :class:`~rlpulse.formats.csv.CSVFollower`: from the last byte offset,
    a torn last line left for the next look). A file deleted and written
    anew is read from its start, the first look at it saying that it holds a
    new run (:attr:`Followed.new_run`). ``run`` as for :func:`read`.
    Raises ``RunFileError`` as :func:`read` does for a file that is no
    rlpulse metrics file, or a run named in a line file.

    >>> import tempfile, pathlib
    >>> from rlpulse import JSONLLogger
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     follower = RunFollower(pathlib.Path(tmp) / "run.jsonl")
    ...     print(len(follower.read_new().records), follower.waiting)
    ...     with JSONLLogger(follower.path) as sink:
    ...         sink.log_metrics({"c/frames": 1.0}, timestamp=100.0)
    ...         print(follower.read_new().records[0].value, follower.waiting)
    0 ... does not exist yet
    1.0 None
    """

    def __init__(self, path: str | os.PathLike[str], run: str | None = None) -> None:
        self.path = Path(path)
        self.run = run
        self._follower: SQLiteFollower | JSONLFollower | CSVFollower | None = None
        self._waiting: str | None = not_there_yet(self.path)

    @property
    def waiting(self) -> str | None:
        """Why nothing can be read yet (the file or the run is not there yet); ``None`` once it is read."""
        if self._follower is not None:
            return self._follower.waiting
        return self._waiting

    def read_new(self) -> Followed:
        """The records and events written since the last look (all of them at the first)."""
        if self._follower is None:
            self._follower = self._opened()
            if self._follower is None:
                return Followed([], [])
        followed = self._follower.read_new()
        if isinstance(self._follower, SQLiteFollower):
            self.run = self._follower.run
        return followed

    def close(self) -> None:
        """Let go of the file (a SQLite connection); a later look opens it again."""
        if isinstance(self._follower, SQLiteFollower):
            self._follower.close()

    def _opened(self) -> SQLiteFollower | JSONLFollower | CSVFollower | None:
        _refuse_pipe(self.path)
        try:
            with open(self.path, "rb") as file:
                first_line = file.readline(_FIRST_LINE_LOOK)
        except FileNotFoundError:
            self._waiting = not_there_yet(self.path)
            return None
        # A first line longer than a look (a JSON lines payload) is one too.
        if (
            not first_line.endswith(b"\n")
            and len(first_line) < _FIRST_LINE_LOOK
            and not is_sqlite(first_line)
        ):
            self._waiting = f"{self.path} has no first line yet"
            return None
        self._waiting = None
        file_format = _format_for(self.path, self.run)
        if file_format == "sqlite":
            return SQLiteFollower(self.path, self.run)
        if file_format == "csv":
            return CSVFollower(self.path)
        return JSONLFollower(self.path)


# How much of a followed file's first line is read to know it has one.
_FIRST_LINE_LOOK = 256


def detect_format(path: Path) -> str:
    """The format of the file at ``path``: ``"sqlite"``, ``"csv"`` or ``"jsonl"``; ``RunFileError`` for none.

    What its first line says, before its extension: a file sink writes its
    format whatever the file is named.
    """
    _refuse_pipe(path)
    with open(path, "rb") as file:
        head = file.readline(256)
    if not head:
        raise RunFileError(f"{path} is empty: no metrics were written to it")
    if is_sqlite(head):
        return "sqlite"
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


def _refuse_pipe(path: Path) -> None:
    # A file is opened once for its format, then again for its records: a
    # pipe would give its data to the first look and read empty after.
    if path.is_fifo():
        raise RunFileError(
            f"{path} is a pipe, not a file, and rlpulse reads a metrics file "
            "more than once; save what the pipe carries to a file first "
            "(as in '... > run.csv') and give that file's path"
        )


def _check_names(names: Collection[str] | None) -> None:
    # A string is a collection of its letters: it would keep nothing.
    if isinstance(names, str | bytes):
        raise TypeError(
            f"names must be a collection of metric names, as [{names!r}]; "
            f"got the string {names!r}"
        )


def _check_span(since: float | None, until: float | None) -> None:
    # Seconds since the epoch: a string ('5s') would compare with none.
    for option, value in (("since", since), ("until", until)):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, numbers.Real)
        ):
            raise TypeError(
                f"{option} must be seconds since the epoch, a number (as "
                f"time.time() gives), or None; got {value!r}"
            )


def _format_for(path: Path, run: str | None) -> str:
    # The file's format; a line file holds one run: naming one is a mistake.
    try:
        file_format = detect_format(path)
    except FileNotFoundError:
        # FILE:NAME, as the command line takes a run: run= names it here.
        file, colon, name = str(path).rpartition(":")
        if colon and name and Path(file).is_file():
            raise FileNotFoundError(
                errno.ENOENT,
                f"No such file; for run {name!r} of {file}, read that file "
                f"with run={name!r}",
                str(path),
            ) from None
        raise
    if file_format != "sqlite" and run is not None:
        raise RunFileError(
            f"{path} is a {file_format.upper()} file, which holds a single run: "
            f"read it without a run (run=None; on the command line, without "
            f"--run) instead of run={run!r}"
        )
    return file_format
