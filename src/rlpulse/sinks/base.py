"""What every sink shares: the lock, the closed state, the payload entry points, ``with``.

A sink subclasses :class:`BaseSink` and writes only what differs: how a batch
of payloads is written (``_write_batch``), and, when it has them, what
flushing and closing do (``_flush``, ``_close``). :class:`LineFileSink` adds
what the sinks appending lines to one text file (CSV, JSON lines) share;
:class:`AppendedFile` is how a sink appends to a file of its own (those, and
TensorBoard's event files), each write whole or not at all.
"""

from __future__ import annotations

import abc
import contextlib
import errno
import io
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from rlpulse.formats.lines import RecordEnd, open_line_file
from rlpulse.formats.records import RunFileError, prepare_record_file
from rlpulse.naming import Payload, inferred_kinds
from rlpulse.runtime.events import Event
from rlpulse.runtime.retry import TransientSinkError

__all__ = [
    "AppendedFile",
    "BaseSink",
    "BatchSink",
    "LineFileSink",
    "Payload",
    "RunExistsError",
    "TransientSinkError",
]

_FIRST_LINE_LIMIT = 1 << 20
"""How much of an existing line file's first line is read to check its format."""


_SinkT = TypeVar("_SinkT", bound="BaseSink")

_NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT})
"""The errors of a write its file system has no room for: they pass once room is made."""


class RunExistsError(RunFileError):
    """A sink asked to start a run where one is stored already; what is stored is left as it is.

    Raised by ``SQLiteLogger(path, run=NAME)`` when the file holds a run of
    that name, and by ``CSVLogger(path)`` and ``JSONLLogger(path)`` when the
    file holds a run (one file, one run). ``resume=True`` appends to the run
    on purpose. ``path`` is the file, ``run`` the run's name (``None`` for a
    line file), ``existing`` what is stored, ``free_run`` a run name not yet
    taken in that file (``None`` for a line file); ``advice`` replaces what
    the message says to do (the constructor's arguments, unless given).

    >>> error = RunExistsError("runs/m.csv", "runs/m.csv already holds a run")
    >>> print(error)
    runs/m.csv already holds a run, left as it is: log to a new path, or append to this run on purpose with resume=True
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        existing: str,
        *,
        run: str | None = None,
        free_run: str | None = None,
        advice: str | None = None,
    ) -> None:
        self.path = Path(path)
        self.existing = existing
        self.run = run
        self.free_run = free_run
        if advice is None:
            fresh = (
                "log to a new path"
                if run is None
                else f"name a new run (run={free_run!r} is free; run=None names "
                "one after the time)"
            )
            advice = f"{fresh}, or append to this run on purpose with resume=True"
        super().__init__(f"{existing}, left as it is: {advice}")


class BatchSink(abc.ABC):
    """A sink that takes its payloads through ``log_batch``: ``log_metrics`` logs a batch of one.

    What :class:`BaseSink` and :class:`~rlpulse.sinks.process.SinkProcess`
    share: each writes a batch in one go (one transaction, one pipe write),
    one payload included.

    >>> class Printed(BatchSink):
    ...     def log_batch(self, payloads):
    ...         print(list(payloads))
    >>> Printed().log_metrics({"buffer/size": 5.0}, step=7, timestamp=1.5)
    [({'buffer/size': 5.0}, 7, 1.5)]
    """

    def log_metrics(
        self,
        metrics: Mapping[str, float],
        step: int | None = None,
        *,
        timestamp: float | None = None,
    ) -> None:
        """Consume one payload, produced by a poll at wall-clock time ``timestamp`` (now when ``None``).

        >>> import io
        >>> from rlpulse import ConsoleLogger
        >>> with ConsoleLogger(io.StringIO()) as sink:
        ...     sink.log_metrics({"collector/frames": 96.0}, step=3, timestamp=1.5)
        """
        self.log_batch(((metrics, step, timestamp),))

    @abc.abstractmethod
    def log_batch(
        self,
        payloads: Iterable[tuple[Mapping[str, float], int | None, float | None]],
    ) -> None:
        """Consume several ``(metrics, step, timestamp)`` payloads at once, in order; a ``timestamp`` of ``None`` means now."""


class BaseSink(BatchSink):
    """The shared machinery of every rlpulse sink; a backend adds ``_write_batch``.

    ``log_metrics`` and ``log_batch`` resolve each payload's wall-clock time
    and hand the payloads, under the sink's lock, to ``_write_batch``: one
    payload from ``log_metrics``, all of them from ``log_batch``, so a backend
    writes a batch in one go (one transaction, one write) with one method.
    ``flush`` and ``close`` take the same lock and call ``_flush`` and
    ``_close``; ``close`` runs ``_close`` once, however often it is called.
    After ``close``, logging and flushing raise ``RuntimeError``.

    >>> class ListSink(BaseSink):
    ...     def __init__(self) -> None:
    ...         super().__init__()
    ...         self.rows = []
    ...     def _write_batch(self, payloads):
    ...         self.rows.extend(payloads)
    >>> with ListSink() as sink:
    ...     sink.log_metrics({"buffer/size": 5.0}, step=7, timestamp=1.5)
    >>> [(payload.metrics, payload.step, payload.wall_time) for payload in sink.rows]
    [({'buffer/size': 5.0}, 7, 1.5)]
    >>> str(sink.rows[0].kind("buffer/size"))
    'gauge'
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closed = False
        # What the sink writes to, as the closed-sink error names it.
        self._destination = ""

    def log_batch(
        self,
        payloads: Iterable[tuple[Mapping[str, float], int | None, float | None]],
    ) -> None:
        """Consume several payloads at once, in order, each a ``(metrics, step, timestamp)`` triple.

        The sink writes them as one batch (the file sinks in one write or one
        transaction); a ``timestamp`` of ``None`` means now.

        >>> import io
        >>> from rlpulse import ConsoleLogger
        >>> stream = io.StringIO()
        >>> ConsoleLogger(stream).log_batch([({"loss": 0.5}, 1, None), ({"loss": 0.25}, 2, None)])
        >>> [line.split(" ", 1)[1] for line in stream.getvalue().splitlines()]
        ['step=1 loss=0.5', 'step=2 loss=0.25']
        """
        now = time.time()
        batch = [
            Payload(
                metrics,
                step,
                now if timestamp is None else float(timestamp),
                inferred_kinds(metrics),
            )
            for metrics, step, timestamp in payloads
        ]
        with self._lock:
            self._check_open()
            if batch:
                self._write(batch)

    def log_payloads(self, payloads: Iterable[Payload]) -> None:
        """Consume several payloads whose metrics' kinds are known (a monitor's), at once, in order.

        What a :class:`~rlpulse.LoggerMonitor` hands rlpulse's sinks:
        each :class:`~rlpulse.naming.Payload` carries the kind of its
        metrics, decided by the watch that logged them, where
        :meth:`log_metrics` and :meth:`log_batch` guess it from the names.

        >>> import io
        >>> from rlpulse import ConsoleLogger
        >>> from rlpulse.naming import Kind, Payload
        >>> stream = io.StringIO()
        >>> sink = ConsoleLogger(stream)
        >>> sink.log_payloads([Payload({"t/episodes": 4.0}, 4, 1.5, {"t/episodes": Kind.COUNTER})])
        >>> stream.getvalue().split(" ", 1)[1]
        'step=4 t  episodes=4\\n'
        """
        batch = list(payloads)
        with self._lock:
            self._check_open()
            if batch:
                self._write(batch)

    def _log_event(self, write: Callable[[Event], None], event: Event) -> None:
        # What log_event() does in the sinks that store events: ``write``
        # the event under the lock, while open.
        with self._lock:
            self._check_open()
            write(event)

    def flush(self) -> None:
        """Make what was logged visible to the sink's readers.

        >>> import io
        >>> from rlpulse import ConsoleLogger
        >>> ConsoleLogger(io.StringIO()).flush()
        """
        with self._lock:
            self._check_open()
            self._flush()

    def close(self) -> None:
        """Release the sink's resources; closing again does nothing, logging afterwards raises.

        >>> import io
        >>> from rlpulse import ConsoleLogger
        >>> sink = ConsoleLogger(io.StringIO())
        >>> sink.close()
        >>> sink.close()
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._close()

    def abandon(self) -> None:
        """Close a sink opened beside others that could not all be opened, taking back what opening it left behind where it can.

        Most sinks leave nothing behind: this is :meth:`close`. A
        :class:`~rlpulse.SQLiteLogger` takes back the run it started, if
        nothing was logged to it.

        >>> import io
        >>> from rlpulse import ConsoleLogger
        >>> sink = ConsoleLogger(io.StringIO())
        >>> sink.abandon()
        >>> sink.abandon()
        """
        self.close()

    def _write(self, payloads: Sequence[Payload]) -> None:
        try:
            self._write_batch(payloads)
        except (TypeError, ValueError) as error:
            # Only on failure: say which entry is no number.
            culprit = _not_a_number(payloads)
            if culprit is None:
                raise
            raise type(error)(
                f"{type(self).__name__} cannot store {culprit}: a metric is a "
                "number, a step a whole number (a monitor drops what is not)"
            ) from error

    @abc.abstractmethod
    def _write_batch(self, payloads: Sequence[Payload]) -> None:
        """Write ``payloads``, in order; called under the lock, only while open."""

    def _flush(self) -> None:  # most sinks have nothing to flush
        """Flush what the sink buffers; called under the lock, only while open."""

    def _close(self) -> None:  # some sinks hold nothing to release
        """Release the sink's resources; called under the lock, once."""

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(self._closed_message())

    def _closed_message(self) -> str:
        name = type(self).__name__
        subject = f"{name} for {self._destination}" if self._destination else name
        return f"{subject} is closed; create a new {name} to keep logging"

    def __enter__(self: _SinkT) -> _SinkT:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class LineFileSink(BaseSink):
    """A sink appending lines to one text file; a format adds ``_format`` and its file checks.

    The file is created when missing (with its parents). An existing file must
    first pass ``_check_existing``, given its first line, before anything in
    it changes: a file of another format is refused as it is. Then a torn
    last line left by a crash is removed before appending
    (``open_line_file``), and a new, empty file starts with ``_header``.
    A file already holding a run (anything past the header) is refused with
    :class:`RunExistsError`, unless ``resume=True`` appends to it on purpose.
    A file another logger is writing (of this process or another) is
    refused with ``RunFileError``, with ``resume=True`` too: the logger
    holds an exclusive lock on its file (``flock``) until it is closed,
    where the operating system has one (not on Windows).
    Each batch is one write of ``_format(payloads)``, straight to the file
    (no buffer in between), before the call returns, whole or not at all
    (:class:`AppendedFile`): a write that fails (a full disk) leaves the
    file as it was, and raises ``OSError`` naming the file, a
    :class:`~rlpulse.TransientSinkError` when its file system is full.

    >>> import tempfile, pathlib
    >>> class NameLines(LineFileSink):
    ...     def _format(self, payloads):
    ...         return "".join(f"{name}\\n" for payload in payloads for name in payload.metrics)
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     with NameLines(pathlib.Path(tmp) / "names.txt") as sink:
    ...         sink.log_metrics({"buffer/size": 5.0, "buffer/writes": 2.0})
    ...     print(sink.path.read_text(), end="")
    buffer/size
    buffer/writes
    """

    _header = ""
    """What a new file starts with (nothing unless the format has a header)."""
    _record_end: RecordEnd | None = None
    """Where the format's last record ends, when not at its last newline (CSV: a newline in a quoted name)."""

    def __init__(self, path: str | os.PathLike[str], *, resume: bool = False) -> None:
        super().__init__()
        self.path: Path = prepare_record_file(path)
        self._destination = str(self.path)
        # Taken before the file is read or changed: another logger's line
        # being written is no torn line to remove.
        self._hold = _held(self.path)
        try:
            first_line = _first_line(self.path)
            if first_line:
                self._check_existing(first_line)
                if not resume:
                    self._check_no_run(first_line)
            self._file = AppendedFile(
                open_line_file(self.path, record_end=type(self)._record_end), self.path
            )
            if self._file.size == 0:
                try:
                    self._append(self._header)
                except BaseException:
                    self._file.close()
                    raise
        except BaseException:
            if self._hold is not None:
                self._hold.close()
            raise

    @abc.abstractmethod
    def _format(self, payloads: Sequence[Payload]) -> str:
        """Return the lines that store ``payloads``, each ending in a newline."""

    def _check_existing(self, first_line: bytes) -> None:
        """Raise ``RunFileError`` unless an existing file whose first line is ``first_line`` has this format.

        ``first_line`` ends with its newline, unless it is the whole file:
        then it may be this format's first line, torn by a crash.
        """

    def _check_no_run(self, first_line: bytes) -> None:
        # A complete line past the header holds a run; a line torn by a
        # crash before any other holds nothing, and is removed on opening.
        size = self.path.stat().st_size
        header_only = bool(self._header) and size <= len(first_line)
        if header_only or not first_line.endswith(b"\n"):
            return
        written = time.strftime(
            "%Y-%m-%d %H:%M:%S", time.localtime(self.path.stat().st_mtime)
        )
        raise RunExistsError(
            self.path,
            f"{self.path} already holds a run ({size:,} bytes, last written {written})",
        )

    def _write_batch(self, payloads: Sequence[Payload]) -> None:
        self._append(self._format(payloads))

    def _append(self, text: str) -> None:
        self._file.append(text.encode())

    def _close(self) -> None:
        self._file.close()
        if self._hold is not None:
            self._hold.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"


class AppendedFile:
    """A file a sink only appends to, each write whole or not at all: what a failed write left is cut away.

    ``file`` is open for appending, unbuffered (``open(path, "ab",
    buffering=0)``), and written by this sink alone. :meth:`append` writes
    straight to the file, before it returns. A write that fails (a full
    disk) leaves the file as it was: what part of it got written is
    truncated away, now for the readers and again before the next write,
    and the call raises ``OSError`` naming the file: a
    :class:`~rlpulse.TransientSinkError` when its file system is full
    (``ENOSPC``, or a quota: ``EDQUOT``), so that a monitor's queue keeps
    the payloads and writes them once there is room.

    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "records.bin"
    ...     appended = AppendedFile(open(path, "ab", buffering=0), path)
    ...     appended.append(b"one record")
    ...     appended.close()
    ...     path.read_bytes(), appended.size
    (b'one record', 10)
    """

    def __init__(self, file: io.FileIO, path: Path) -> None:
        self.path = path
        self._file = file
        self.size = os.fstat(file.fileno()).st_size
        """The end of the last complete write, where a failed one is cut back to."""
        self._torn = False

    def append(self, data: bytes) -> None:
        """Write ``data`` at the end of the file, whole, or raise ``OSError`` leaving the file as it was."""
        file = self._file
        try:
            if self._torn:
                file.truncate(self.size)
                self._torn = False
            written = 0
            while written < len(data):
                written += file.write(data[written:])
        except OSError as error:
            # Part of the data may be in the file: cut it off now, for the
            # readers, and again before the next write, in case that
            # failed too.
            self._torn = True
            with contextlib.suppress(OSError):
                file.truncate(self.size)
            no_room = error.errno in _NO_ROOM
            raise (TransientSinkError if no_room else type(error))(
                error.errno,
                f"cannot write metrics to {self.path}: {error.strerror or error}; "
                "nothing of this call was written (the file is left as it was), "
                "and later calls write again once the file can be written to "
                "(free space, if its file system is full)",
            ) from error
        self.size += len(data)

    def close(self) -> None:
        """Close the file; closing again does nothing."""
        self._file.close()


def _not_a_number(payloads: Sequence[Payload]) -> str | None:
    """Describe the first step or metric value of ``payloads`` that is no number, if any.

    >>> _not_a_number([({"loss": 0.5, "phase": "eval"}, 3, 1.5)])
    "metric 'phase' = 'eval'"
    >>> _not_a_number([({"loss": 0.5}, "three", 1.5)])
    "step 'three'"
    """
    for metrics, step, *_ in payloads:
        if step is not None:
            try:
                int(step)
            except (TypeError, ValueError):
                return f"step {step!r}"
        for name, value in metrics.items():
            try:
                float(value)
            except (TypeError, ValueError):
                return f"metric {name!r} = {value!r}"
    return None


def _held(path: Path) -> io.FileIO | None:
    # The file opened and locked for one logger alone, until closed; None
    # where files cannot be locked (no fcntl: Windows; a file system
    # without locks).
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return None
    hold = io.FileIO(path, "a")
    try:
        fcntl.flock(hold.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        hold.close()
        raise RunFileError(
            f"{path} is refused, left as it is: another logger is writing it (of "
            "this process or another), and two would mix their runs and cut "
            "each other's lines; log to a new path, or close that logger first "
            "(resume=True then appends to its run)"
        ) from None
    except OSError:
        hold.close()
        return None
    return hold


def _first_line(path: Path) -> bytes:
    # The first line of an existing file (b"" for none); a file that cannot
    # be read is left to open_line_file, whose error says why.
    try:
        with open(path, "rb") as file:
            return file.readline(_FIRST_LINE_LIMIT)
    except OSError:
        return b""
