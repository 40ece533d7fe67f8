"""The embedded default store: every payload one committed SQLite transaction."""

from __future__ import annotations

import functools
import itertools
import os
import sqlite3
import time
from collections.abc import Sequence

from rlpulse.read.records import SQLITE_SCHEMA, RunFileError, prepare_record_file
from rlpulse.sinks.base import BaseSink, Payload

__all__ = ["SQLiteLogger"]

# Payloads are stored with one multi-row INSERT per this many metrics; the
# parameter count stays below 999, the smallest limit SQLite builds allow.
_METRICS_PER_STATEMENT = 400
_METRICS_COLUMNS = {"run", "wall_time", "step", "name", "value"}


class SQLiteLogger(BaseSink):
    """A sink that stores payloads in a SQLite file, one run per logger.

    The file holds any number of runs: ``run=None`` starts a new one named after
    the local time (``2024-05-01_12-03-04``, with ``_1``, ``_2``, ... appended
    when that name is taken); the name of an existing run appends to it. Read it
    back with ``rlpulse.read(path, run=...)``; ``rlpulse.read.records.list_runs``
    lists the runs.

    Each ``log_metrics`` call is one transaction, committed before it returns,
    in WAL mode: other connections and processes can read the file while it is
    written, and a killed process (even ``kill -9``) loses nothing it committed.
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
    baseline [Record(wall_time=1.5, step=3, name='collector/frames', value=96.0)]
    """

    def __init__(self, path: str | os.PathLike[str], run: str | None = None) -> None:
        if run is not None and (not isinstance(run, str) or not run):
            raise ValueError(
                f"run must be a non-empty string naming the run, or None for a "
                f"new run named after the time; got {run!r}"
            )
        super().__init__()
        self.path = prepare_record_file(path)
        # The monitor delivers from its own thread; the sink's lock serialises
        # every use of the connection.
        # An absolute path, so that a file named like ":memory:" stays a file.
        self._connection = sqlite3.connect(
            self.path.absolute(), isolation_level=None, check_same_thread=False
        )
        try:
            self._run_id, self.run = self._open_run(self._connection, run)
            self._destination = f"{self.path} (run {self.run!r})"
        except sqlite3.Error as error:
            self._connection.close()
            raise RunFileError(
                f"cannot store metrics in {self.path}: {error}; "
                "give the path of an rlpulse SQLite file or of a new file"
            ) from error

    def _open_run(
        self, connection: sqlite3.Connection, run: str | None
    ) -> tuple[int, str]:
        mode = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if mode != "wal":
            raise sqlite3.OperationalError(
                f"the file cannot use WAL journal mode (it is in {mode!r} mode)"
            )
        connection.execute("PRAGMA synchronous = NORMAL")
        # Checkpoints are where WAL mode syncs to disk; every 4000 pages (a WAL
        # of up to 16 MB at the default page size) instead of SQLite's 1000
        # keeps that cost a small share of each payload.
        connection.execute("PRAGMA wal_autocheckpoint = 4000")
        columns = {row[1] for row in connection.execute("PRAGMA table_info(metrics)")}
        if columns and not columns >= _METRICS_COLUMNS:
            raise sqlite3.OperationalError(
                f"its 'metrics' table has columns {sorted(columns)}, "
                f"not {sorted(_METRICS_COLUMNS)}"
            )
        connection.executescript(SQLITE_SCHEMA)
        start_wall_time = time.time()
        if run is not None:
            connection.execute(
                "INSERT OR IGNORE INTO runs (name, start_wall_time) VALUES (?, ?)",
                (run, start_wall_time),
            )
            (run_id,) = connection.execute(
                "SELECT id FROM runs WHERE name = ?", (run,)
            ).fetchone()
            return run_id, run
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
            return cursor.lastrowid, name
        raise AssertionError("unreachable")  # pragma: no cover

    def _write_batch(self, payloads: Sequence[Payload]) -> None:
        """Store the payloads as one committed transaction.

        A payload's ``timestamp`` (the wall-clock time of the poll that
        produced it) is stored as ``wall_time``.

        >>> import tempfile, pathlib
        >>> from rlpulse import SQLiteLogger
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     with SQLiteLogger(pathlib.Path(tmp) / "metrics.db") as sink:
        ...         sink.log_metrics({"buffer/size": 10.0, "buffer/writes": 4.0})
        """
        statements = []
        for metrics, step, wall_time in payloads:
            payload_columns = (
                self._run_id,
                wall_time,
                None if step is None else int(step),
            )
            values = [(name, float(value)) for name, value in metrics.items()]
            statements += [
                (payload_columns, values[start : start + _METRICS_PER_STATEMENT])
                for start in range(0, len(values), _METRICS_PER_STATEMENT)
            ]
        connection = self._connection
        if len(statements) == 1:
            # One statement outside a transaction is a transaction of its own.
            _insert(connection, *statements[0])
        elif statements:
            connection.execute("BEGIN IMMEDIATE")
            try:
                for payload_columns, values in statements:
                    _insert(connection, payload_columns, values)
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise

    def _close(self) -> None:
        self._connection.close()

    def __repr__(self) -> str:
        return f"SQLiteLogger({str(self.path)!r}, run={self.run!r})"


@functools.lru_cache(maxsize=64)
def _insert_statement(metric_count: int) -> str:
    # ?1..?3 are the payload's run, wall_time and step, bound once; then one
    # (name, value) pair per metric.
    rows = ", ".join(
        f"(?1, ?2, ?3, ?{4 + 2 * index}, ?{5 + 2 * index})"
        for index in range(metric_count)
    )
    return f"INSERT INTO metrics (run, wall_time, step, name, value) VALUES {rows}"


def _insert(
    connection: sqlite3.Connection,
    payload_columns: tuple[int, float, int | None],
    values: list[tuple[str, float]],
) -> None:
    connection.execute(
        _insert_statement(len(values)),
        (*payload_columns, *itertools.chain.from_iterable(values)),
    )
