"""The embedded default store: every call (one payload or a batch) one committed SQLite transaction."""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import shutil
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from rlpulse.formats import sqlite as sqlite_format
from rlpulse.formats.lines import another_sinks_file
from rlpulse.formats.records import RunFileError, prepare_record_file
from rlpulse.runtime.events import Event
from rlpulse.runtime.retry import TransientSinkError
from rlpulse.runtime.threads import MonitorThread
from rlpulse.sinks.base import BaseSink, Payload, RunExistsError

__all__ = ["SQLiteLogger"]

# A checkpoint once the write-ahead log holds about this much. The writer
# runs one only where its thread could not copy the whole log (see
# _Checkpointer), and its call then lasts as long as the copy: at 100,000
# rows (20 MB) it held the queue up for 150 ms and more, enough to drop
# payloads at 10,000 a second; at 2 MB it takes about 10 ms.
_LOG_BYTES_PER_CHECKPOINT = 2_000_000
# What a commit adds to the log, about: the pages it changed (the metrics
# table's last leaf and its index's, 4 kB each), and a row's share of
# them. Measured: 8.8 kB a commit of two rows, 35 kB one of 200. Counting
# rows alone, a sink logging a payload of a few metrics a call grew its
# log to 50 MB between checkpoints.
_COMMIT_BYTES = 8_192
_ROW_BYTES = 160
# Passive checkpoints in a row, each copying what the writer added during
# the one before, before the writer is left to copy the rest itself.
_CHECKPOINT_TRIES = 3
# A log that has not started afresh while the writer committed this many
# checkpoints' rows (the thread's copies outlasting the pauses between
# writes, a reader holding on to it) is checkpointed by the writer itself.
_CHECKPOINTS_IN_LOG = 3
# How long closing waits for a reader in the middle of a read before it
# copies the log into the database file, in milliseconds.
_FINAL_COPY_WAIT_MS = 1000
# The write-ahead log's header, and where in it the salts are
# (https://www.sqlite.org/fileformat.html#the_write_ahead_log).
_WAL_HEADER_BYTES = 32
_WAL_SALTS = slice(16, 24)
# How long a statement waits for another connection's lock to go (SQLite's
# busy timeout), and opening a store tries to switch it to WAL mode while
# other connections write to it.
_BUSY_TIMEOUT_S = 5.0
_WAL_SWITCH_TIMEOUT_S = _BUSY_TIMEOUT_S
# Below this much free space, an I/O error while creating a store is taken
# for a full file system: SQLite says "disk I/O error" when it cannot grow
# the shared-memory file beside the store.
_NEARLY_FULL_BYTES = 1 << 20


class SQLiteLogger(BaseSink):
    """A sink that stores payloads in a SQLite file, one run per logger.

    A store is a file, created with its missing parent directories (as
    TensorBoard's and TorchRL's loggers create their log directories) and
    read back after the process ended; ``":memory:"`` is refused rather than
    taken for a file of that name. The file holds any number of runs:
    ``run=None`` starts a new one named after the local time
    (``2024-05-01_12-03-04``, with ``_1``, ``_2``, ... appended when that
    name is taken); ``run=NAME`` starts one of that name. A run of that name
    already in the file is refused (:class:`~rlpulse.sinks.base.RunExistsError`,
    naming a free name such as ``NAME-2``), so a script run twice never merges
    its runs; ``resume=True`` appends to it on purpose (and starts it when it
    is not there yet). Read it back with ``rlpulse.read(path, run=...)``;
    ``rlpulse.list_runs(path)`` lists the runs.

    A file that cannot be opened is refused with a message saying why: a
    file of another kind, a database another connection keeps locked for
    more than 5 s (``RunFileError``), a full file system (``OSError``). A file
    this call created is then removed, not left behind half made.

    Each ``log_metrics`` call, and each ``log_batch`` call of the monitor's
    sender, is one transaction, committed before it returns (with the kind
    of each metric the run had not logged before, in the ``kinds`` table,
    and the run's summaries once it has written
    :data:`~rlpulse.formats.sqlite.ROWS_PER_SUMMARY` rows they do not
    include; closing the logger stores them too), in WAL mode: other
    connections and processes can read the file while it is
    written, and a killed process (even ``kill -9``) loses nothing it committed.
    A call that stores nothing because its file system is full, or because
    another connection keeps the database locked for more than 5 s, raises
    :class:`~rlpulse.TransientSinkError`: a monitor's queue keeps its
    payloads and stores them once there is room, or once that connection
    lets go.
    Commits are not synced to disk (``synchronous=NORMAL``), so a power loss or
    an operating system crash may lose the last transactions. A logger may be
    used from any thread.

    >>> import tempfile, pathlib
    >>> from rlpulse import SQLiteLogger, read
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "metrics.db"
    ...     with SQLiteLogger(path, run="baseline") as sink:
    ...         sink.log_metrics({"collector/frames": 96.0}, step=3, timestamp=1.5)
    ...     print(sink.run, list(read(path, run="baseline")))
    baseline [Record(wall_time=1.5, step=3, name='collector/frames', value=96.0, kind=<Kind.COUNTER: 'counter'>)]
    >>> from rlpulse import RunExistsError
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "metrics.db"
    ...     SQLiteLogger(path, run="baseline").close()
    ...     try:
    ...         SQLiteLogger(path, run="baseline")
    ...     except RunExistsError as error:
    ...         print("free:", error.free_run)
    ...     with SQLiteLogger(path, run="baseline", resume=True) as sink:
    ...         sink.log_metrics({"collector/frames": 192.0}, step=6)
    free: baseline-2
    >>> SQLiteLogger(":memory:")
    Traceback (most recent call last):
    ...
    ValueError: SQLiteLogger stores runs in a file, to be read back after the process ends: ':memory:' would be a file of that name in the working directory, not an in-memory database; give a file path such as 'runs/metrics.sqlite'
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        run: str | None = None,
        *,
        resume: bool = False,
    ) -> None:
        if run is not None and (not isinstance(run, str) or not run):
            raise (ValueError if isinstance(run, str) else TypeError)(
                f"run must be a non-empty string naming the run, or None for a "
                f"new run named after the time; got {run!r}"
            )
        if resume and run is None:
            raise ValueError(
                "resume=True appends to a run named by run=, as in "
                "SQLiteLogger(path, run='baseline', resume=True); with run=None "
                "every logger starts a new run"
            )
        if os.fspath(path) == ":memory:":
            raise ValueError(
                "SQLiteLogger stores runs in a file, to be read back after the "
                "process ends: ':memory:' would be a file of that name in the "
                "working directory, not an in-memory database; give a file path "
                "such as 'runs/metrics.sqlite'"
            )
        super().__init__()
        created = not os.path.lexists(path)
        # Absolute: what it made is removed where it made it, whatever the
        # working directory is by then.
        made_folder = _first_missing_folder(Path(path).absolute()) if created else None
        self.path = prepare_record_file(path)
        connection = None
        try:
            # The monitor delivers from its own thread; the sink's lock
            # serialises every use of the connection. An absolute path:
            # SQLite gives no file name a special meaning then.
            connection = sqlite3.connect(
                self.path.absolute(),
                timeout=_BUSY_TIMEOUT_S,
                isolation_level=None,
                check_same_thread=False,
                # Prepared INSERTs of large batches are big: keep a few.
                cached_statements=16,
            )
            self._run_id, self.run, self._started_run = self._open_run(
                connection, run, resume
            )
            # The metrics whose kind the run stores (a resumed run's too).
            self._kinded = sqlite_format.stored_kind_names(connection, self._run_id)
            self._summaries = sqlite_format.RunSummaries(connection, self._run_id)
        except BaseException as error:
            if connection is not None:
                connection.close()
            failure = _open_failure(self.path, error)
            if created:
                _remove_unmade_store(self.path.absolute(), made_folder)
            if failure is None:
                raise
            raise failure from error
        self._connection = connection
        self._created = created
        # The outermost folder this logger made for its file (None: none),
        # and the file where it made it, for a take-back to remove.
        self._made_folder = made_folder
        self._absolute_path = self.path.absolute()
        # A logger dropped unclosed with nothing in the run it started (a
        # script that failed before its first payload) takes the run back,
        # as abandon() does, so that the script runs again under the same
        # name; one still held at exit too, after the monitors' exit hook
        # has logged their final snapshots (the finalizers' hook runs after
        # it: rlpulse.runtime.lifecycle), so only a run that stayed empty.
        self._take_back: weakref.finalize[..., SQLiteLogger] | None = None
        if self._started_run:
            self._take_back = weakref.finalize(
                self,
                _take_back_unused_run,
                _Unused(
                    connection,
                    self._lock,
                    os.getpid(),
                    self._run_id,
                    created,
                    self.path.absolute(),
                    made_folder,
                ),
            )
        self._destination = f"{self.path} (run {self.run!r})"
        self._checkpointer = _Checkpointer(self.path.absolute())

    def _open_run(
        self, connection: sqlite3.Connection, run: str | None, resume: bool
    ) -> tuple[int, str, bool]:
        """The run's id and name, and whether this call started it (it was not stored yet)."""
        sqlite_format.check_tables(connection)
        mode = _switch_to_wal(connection)
        if mode != "wal":
            raise sqlite3.OperationalError(
                f"the file cannot use WAL journal mode (it is in {mode!r} mode)"
            )
        connection.execute("PRAGMA synchronous = NORMAL")
        # Checkpoints, where WAL mode syncs to disk, run beside the writes
        # (see _Checkpointer), never inside a commit.
        connection.execute("PRAGMA wal_autocheckpoint = 0")
        sqlite_format.create_tables(connection)
        start_wall_time = time.time()
        if run is not None:
            cursor = connection.execute(
                "INSERT OR IGNORE INTO runs (name, start_wall_time) VALUES (?, ?)",
                (run, start_wall_time),
            )
            if cursor.rowcount == 0 and not resume:
                raise self._run_exists(connection, run)
            (run_id,) = connection.execute(
                "SELECT id FROM runs WHERE name = ?", (run,)
            ).fetchone()
            return run_id, run, cursor.rowcount == 1
        base_name = time.strftime("%Y-%m-%d_%H-%M-%S", time.localtime(start_wall_time))
        for suffix in itertools.count():
            name = f"{base_name}_{suffix}" if suffix else base_name
            try:
                cursor = connection.execute(
                    "INSERT INTO runs (name, start_wall_time) VALUES (?, ?)",
                    (name, start_wall_time),
                )
            except sqlite3.IntegrityError:
                continue
            assert cursor.lastrowid is not None
            return cursor.lastrowid, name, True
        raise AssertionError("unreachable")  # pragma: no cover

    def _run_exists(self, connection: sqlite3.Connection, run: str) -> RunExistsError:
        (started,) = connection.execute(
            "SELECT start_wall_time FROM runs WHERE name = ?", (run,)
        ).fetchone()
        for number in itertools.count(2):
            free_run = f"{run}-{number}"
            taken = connection.execute(
                "SELECT 1 FROM runs WHERE name = ?", (free_run,)
            ).fetchone()
            if taken is None:
                break
        start = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started))
        return RunExistsError(
            self.path,
            f"run {run!r} already exists in {self.path} (started {start})",
            run=run,
            free_run=free_run,
        )

    def _write_batch(self, payloads: Sequence[Payload]) -> None:
        """Store the payloads as one committed transaction.

        A payload's ``timestamp`` (the wall-clock time of the poll that
        produced it) is stored as ``wall_time``; the kind of a metric the
        run had not logged before, in ``kinds``.

        >>> import tempfile, pathlib
        >>> from rlpulse import SQLiteLogger
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     with SQLiteLogger(pathlib.Path(tmp) / "metrics.db") as sink:
        ...         sink.log_metrics({"buffer/size": 10.0, "buffer/writes": 4.0})
        """
        connection = self._connection
        with self._failures_that_pass():
            rows = sqlite_format.insert_batch(
                connection, self._run_id, payloads, self._kinded, self._summaries
            )
        if self._checkpointer.wrote(rows):
            with contextlib.suppress(sqlite3.Error):  # the next one, or close()
                connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def log_event(self, event: Event) -> None:
        """Store ``event`` in the run's ``events`` table, committed before this returns.

        >>> import tempfile, pathlib
        >>> from rlpulse import Event, SQLiteLogger, read_events
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     with SQLiteLogger(pathlib.Path(tmp) / "run.db") as sink:
        ...         sink.log_event(Event(1.5, "collector", "stalled", "no progress", 30.0))
        ...     [event.kind for event in read_events(sink.path)]
        ['stalled']
        """
        self._log_event(self._write_event, event)

    def _write_event(self, event: Event) -> None:
        with self._failures_that_pass():
            sqlite_format.insert_event(self._connection, self._run_id, event)

    @contextlib.contextmanager
    def _failures_that_pass(self) -> Iterator[None]:
        # A write rolled back whole because its file system has no room, or
        # because another connection kept the database locked past the busy
        # timeout, may succeed later: a monitor's queue keeps it and tries
        # again.
        try:
            yield
        except sqlite3.OperationalError as error:
            reason = str(error)
            if _locked(reason):
                raise TransientSinkError(
                    errno.EBUSY,
                    f"cannot store metrics in {self.path}: another connection "
                    f"kept the database locked for over {_BUSY_TIMEOUT_S:g} s (a "
                    "long write, or a transaction left open, as a database "
                    "browser may hold one); nothing of this call was stored, and "
                    "it can be stored once that connection lets go (close it)",
                    str(self.path),
                ) from error
            if not _no_room(self.path, reason):
                raise
            raise TransientSinkError(
                errno.ENOSPC,
                f"cannot store metrics in {self.path}: its file system is full "
                f"(SQLite: {error}); nothing of this call was stored, and it can "
                "be stored once there is room (free space there)",
                str(self.path),
            ) from error

    def _close(self) -> None:
        if self._take_back is not None:
            self._take_back.detach()
        try:
            if self._summaries.unsummarized:
                # Locked for too long, a full disk: a reader aggregates the
                # rows after the summaries itself, so nothing is lost but time.
                with contextlib.suppress(sqlite3.OperationalError):
                    self._summaries.store(self._connection)
        finally:
            self._checkpointer.close()
            self._copy_log_in()
            self._connection.close()

    def _copy_log_in(self) -> None:
        """Copy the write-ahead log into the database file, so that the file holds the whole run.

        Closing the last connection would do it, but a reader still open
        (``rlpulse top`` following the run, read-only) would leave the run
        in the log, where a copy of the file alone does not have it. A
        reader in the middle of a read is waited for a moment; what it still
        reads stays in the log until the last connection closes.
        """
        connection = self._connection
        with contextlib.suppress(sqlite3.Error):
            connection.execute(f"PRAGMA busy_timeout = {_FINAL_COPY_WAIT_MS}")
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def abandon(self) -> None:
        """Close the logger, taking back the run it started if nothing was logged to it, and the file if it made it.

        For a logger opened beside other sinks that could not all be opened
        (:func:`rlpulse.sinks.registry.open_sinks`, a
        :class:`~rlpulse.SinkProcess` with a spec it refuses): the same
        ``run=`` can then be given again. A run it resumed, or one that
        holds anything, stays, as :meth:`close` leaves it.

        >>> import tempfile, pathlib
        >>> from rlpulse import SQLiteLogger, list_runs
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = pathlib.Path(tmp) / "metrics.db"
        ...     SQLiteLogger(path, run="kept").close()
        ...     SQLiteLogger(path, run="baseline").abandon()
        ...     list_runs(path)
        ['kept']
        """
        with self._lock:
            if self._closed:
                return
            emptied = False
            if self._started_run:
                with contextlib.suppress(sqlite3.Error):
                    emptied = sqlite_format.remove_empty_run(
                        self._connection, self._run_id
                    )
        self.close()
        if emptied and self._created:
            _remove_store_files(self._absolute_path, self._made_folder)

    def __exit__(self, *exc_info: object) -> None:
        """Close the logger; a block that raised takes back the run the logger started if nothing was logged to it (:meth:`abandon`).

        A script that failed before its first payload runs again under the
        same ``run=``.
        """
        if exc_info[0] is None:
            self.close()
        else:
            self.abandon()

    def __repr__(self) -> str:
        return f"SQLiteLogger({str(self.path)!r}, run={self.run!r})"


class _Unused(NamedTuple):
    """What an unclosed logger's take-back needs, without the logger."""

    connection: sqlite3.Connection
    lock: threading.Lock
    pid: int
    """The process that opened the logger: a forked child's copy takes nothing back."""
    run_id: int
    made_file: bool
    path: Path
    made_folder: Path | None


_TAKE_BACK_WAIT_S = 1.0
"""How long a take-back waits for a call under way (one stop() left behind, at exit): past it, the run stays."""


def _take_back_unused_run(unused: _Unused) -> None:
    """Remove the run an unclosed logger started, if it holds nothing; the file too, where that logger made it and it holds no run then, and the folders it made for it.

    In the process that opened the logger alone (a forked child exiting
    must not take its parent's run), and between two of its calls: a
    write under way keeps it (and the run) past :data:`_TAKE_BACK_WAIT_S`.
    """
    if os.getpid() != unused.pid or not unused.lock.acquire(timeout=_TAKE_BACK_WAIT_S):
        return
    emptied = False
    try:
        with contextlib.suppress(sqlite3.Error):
            emptied = sqlite_format.remove_empty_run(unused.connection, unused.run_id)
            unused.connection.close()
    finally:
        unused.lock.release()
    if emptied and unused.made_file:
        _remove_store_files(unused.path, unused.made_folder)


class _Checkpointer:
    """Copies a store's write-ahead log into its database on a thread of its own, off the writer's path.

    A checkpoint syncs the database file to disk: done inside a commit, as
    SQLite does by default, it held the writer (and the sink's queue) up
    for 100 ms and more. Here the writer counts what its commits add to the
    log (:data:`_COMMIT_BYTES` a commit, :data:`_ROW_BYTES` a row); every
    :data:`_LOG_BYTES_PER_CHECKPOINT` it wakes this thread, whose passive
    checkpoints copy the log without blocking the writer, again while the
    writer added to it meanwhile; a log copied to its end starts afresh at
    the next write. A log that has not started afresh while the writer
    committed :data:`_CHECKPOINTS_IN_LOG` checkpoints' worth (it kept
    writing throughout, a reader held on to the log) would grow without
    end: the writer checkpoints it itself then, mostly copied already. The
    thread starts with the first checkpoint and sleeps between them.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._bytes = 0
        self._wake = threading.Event()
        self._busy = False
        self._log = Path(f"{path}-wal")
        self._last_salt: bytes | None = None
        # The log's restarts the thread saw (its salts changing), and what
        # was committed since the last one the writer counted.
        self._restarts_seen = 0
        self._restarts_counted = 0
        self._bytes_in_log = 0
        self._closing = False
        self._thread: threading.Thread | None = None

    def wrote(self, rows: int) -> bool:
        """Count a commit of ``rows``; whether the writer is to checkpoint now."""
        logged = _COMMIT_BYTES + rows * _ROW_BYTES
        self._bytes += logged
        self._bytes_in_log += logged
        if self._restarts_counted != self._restarts_seen:
            self._restarts_counted = self._restarts_seen
            self._bytes_in_log = logged
        most_in_log = _CHECKPOINTS_IN_LOG * _LOG_BYTES_PER_CHECKPOINT
        if self._bytes < _LOG_BYTES_PER_CHECKPOINT and self._bytes_in_log < most_in_log:
            return False
        thread = self._thread
        alive = thread is not None and thread.is_alive()  # not in a forked child
        if self._busy and alive:
            return False
        if self._bytes_in_log >= most_in_log and alive:
            # The thread idle, the writer copies the log to its end: the
            # next write starts it afresh.
            self._bytes = self._bytes_in_log = 0
            return True
        if self._bytes < _LOG_BYTES_PER_CHECKPOINT:
            return False
        self._bytes = 0
        if thread is None or not alive:
            thread = self._thread = MonitorThread(
                "rlpulse-sqlite-checkpoint", self._run
            )
            thread.start()
        self._busy = True
        self._wake.set()
        return False

    def _run(self) -> None:
        connection = sqlite3.connect(self._path, check_same_thread=False)
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._closing:
                    return
                salt = _log_salt(self._log)
                if salt != self._last_salt:
                    self._restarts_seen += 1
                    self._last_salt = salt
                _copy_log(connection)
                self._busy = False
        finally:
            connection.close()

    def close(self) -> None:
        """Stop the thread, after the checkpoint under way if any."""
        self._closing = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join()


def _copy_log(connection: sqlite3.Connection) -> None:
    """Checkpoint passively, again while the log grew during the checkpoint before."""
    frames_before = -1
    for _ in range(_CHECKPOINT_TRIES):
        try:
            # Read to its end: a statement left running holds a read
            # transaction, and the log cannot start afresh under it.
            [(_, log_frames, _)] = connection.execute(
                "PRAGMA wal_checkpoint(PASSIVE)"
            ).fetchall()
        except sqlite3.Error:
            # Another connection busy, a full disk: the next one, or
            # closing the store, checkpoints again.
            return
        if log_frames == frames_before:
            return
        frames_before = log_frames


def _log_salt(log: Path) -> bytes | None:
    """The salts in the header of the write-ahead log ``log``, which SQLite changes each time the log starts afresh; ``None`` if unreadable."""
    try:
        with open(log, "rb") as file:
            header = file.read(_WAL_HEADER_BYTES)
    except OSError:
        return None
    return header[_WAL_SALTS] if len(header) == _WAL_HEADER_BYTES else None


def _switch_to_wal(connection: sqlite3.Connection) -> str:
    """Put the file in WAL mode; return the journal mode it is in then.

    Several loggers creating one store at once: SQLite refuses the switch
    at once ("database is locked"), without waiting, while another
    connection writes to a file not yet in WAL mode; it is tried again.
    """
    give_up_at = time.monotonic() + _WAL_SWITCH_TIMEOUT_S
    while True:
        try:
            mode: str = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() >= give_up_at:
                raise
            time.sleep(0.01)
            continue
        return mode


def _open_failure(path: Path, error: BaseException) -> BaseException | None:
    """The error saying why opening the store at ``path`` failed with ``error``, and what to do; ``None`` to raise it as it is."""
    if not isinstance(error, sqlite3.Error):
        return None
    reason = str(error)
    if _locked(reason):
        return RunFileError(
            f"cannot store metrics in {path}: another connection kept the "
            f"database locked for over {_BUSY_TIMEOUT_S:g} s (a long write, or a "
            "transaction left open, as a database browser may hold one); close "
            "that connection, or log to another path"
        )
    if _no_room(path, reason):
        return OSError(
            errno.ENOSPC,
            f"cannot store metrics in {path}: its file system is full "
            f"(SQLite: {reason}); free space there, or log to another path",
            str(path),
        )
    try:
        with open(path, "rb") as file:
            other = another_sinks_file(file.readline(64), "sqlite")
    except OSError:
        other = None
    if other is not None:
        reason = f"{reason} but {other}"
    return RunFileError(
        f"cannot store metrics in {path}: {reason}; "
        "give the path of an rlpulse SQLite file or of a new file"
    )


def _locked(reason: str) -> bool:
    """Whether SQLite's error ``reason`` means another connection holds the lock it waited for ("database is locked", "database table is locked", busy).

    >>> _locked("database is locked"), _locked("database or disk is full")
    (True, False)
    """
    return "locked" in reason or "busy" in reason


def _no_room(path: Path, reason: str) -> bool:
    """Whether SQLite's error ``reason`` for the store at ``path`` means its file system is full.

    SQLite says "database or disk is full", or, when it cannot grow the
    shared-memory file beside the store, "disk I/O error".
    """
    return "full" in reason or (
        "disk I/O error" in reason and _free_bytes(path) < _NEARLY_FULL_BYTES
    )


def _free_bytes(path: Path) -> int:
    try:
        return shutil.disk_usage(path.absolute().parent).free
    except OSError:
        return _NEARLY_FULL_BYTES


def _remove_unmade_store(path: Path, made_folder: Path | None) -> None:
    """Remove the file at ``path``, which this process created, and its journals (and the folders made for it, up to ``made_folder``, left empty), unless another logger made a store of it meanwhile."""
    try:
        with contextlib.closing(
            sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
        ) as connection:
            made = connection.execute(
                "SELECT 1 FROM sqlite_master WHERE name = 'runs'"
            ).fetchone()
    except sqlite3.Error as error:
        # Locked: another connection is writing it, so it is not ours to
        # remove. Unreadable otherwise: nothing worth keeping.
        made = _locked(str(error))
    if not made:
        _remove_store_files(path, made_folder)


def _first_missing_folder(path: Path) -> Path | None:
    """The outermost folder of ``path`` that does not exist: the first that making its file makes (``None``: its folder exists).

    >>> _first_missing_folder(Path("/no/such/folder/run.sqlite"))
    PosixPath('/no')
    >>> _first_missing_folder(Path("run.sqlite")) is None
    True
    """
    missing = None
    for folder in path.parents:
        if os.path.lexists(folder):
            break
        missing = folder
    return missing


def _remove_store_files(path: Path, made_folder: Path | None = None) -> None:
    """Remove the store at ``path`` and its journals, those that exist, then the folders made for it up to ``made_folder``, those left empty."""
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(OSError):
            os.unlink(f"{path}{suffix}")
    if made_folder is None:
        return
    folder = path.parent
    while True:
        try:
            folder.rmdir()  # only an empty one
        except OSError:
            return
        if folder == made_folder or folder == folder.parent:
            return
        folder = folder.parent
