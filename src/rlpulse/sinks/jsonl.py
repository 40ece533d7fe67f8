"""A JSON lines file: one ``{"wall_time", "step", "metrics"}`` object per payload, one ``{"event", ...}`` per event."""

from __future__ import annotations

import os
from collections.abc import Sequence

from rlpulse.formats import jsonl as jsonl_format
from rlpulse.formats.lines import another_sinks_file
from rlpulse.formats.records import RunFileError
from rlpulse.runtime.events import Event
from rlpulse.sinks.base import LineFileSink, Payload

__all__ = ["JSONLLogger"]


class JSONLLogger(LineFileSink):
    """A sink that appends every payload as one JSON object on its own line.

    A line looks like ``{"wall_time": 1.5, "step": 3, "metrics": {"a/b": 1.0}}``;
    ``step`` is ``null`` for payloads without one. The first line that
    holds a metric (first for this logger: a resumed file may name it
    again) adds its kind (``counter``, ``gauge``, ``rate``,
    ``distribution``) under ``"kinds"``; later lines leave it out. NaN and infinities are
    written as ``NaN`` / ``Infinity``, as Python's ``json`` module reads them.
    Each call (``log_metrics``, or ``log_batch`` with the monitor's batch) is
    one write straight to the file, done before it returns: a killed process
    (even ``kill -9``) loses nothing already logged, and a line torn by a
    crash mid-write is skipped by ``rlpulse.read`` and removed when the file
    is opened again. A write that fails (a full disk) raises ``OSError``
    naming the file and leaves the file as it was. Writes are not synced to
    disk, so an operating system crash may lose the last ones. A file holds
    one run: a file that already holds lines is refused
    (:class:`~rlpulse.sinks.base.RunExistsError`, the file left as it is)
    unless ``resume=True`` appends to it on purpose, and a file another
    logger is writing is refused (``RunFileError``); missing parent
    directories are created. A logger may be used from any thread.

    >>> import tempfile, pathlib
    >>> from rlpulse import JSONLLogger
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "metrics.jsonl"
    ...     with JSONLLogger(path) as sink:
    ...         sink.log_metrics({"collector/frames": 96.0}, step=3, timestamp=1.5)
    ...         sink.log_metrics({"collector/frames": 192.0}, step=6, timestamp=2.5)
    ...     print(path.read_text(), end="")
    {"wall_time": 1.5, "step": 3, "metrics": {"collector/frames": 96.0}, "kinds": {"collector/frames": "counter"}}
    {"wall_time": 2.5, "step": 6, "metrics": {"collector/frames": 192.0}}
    """

    def __init__(self, path: str | os.PathLike[str], *, resume: bool = False) -> None:
        super().__init__(path, resume=resume)
        # The metrics whose kind this logger wrote, and those the batch
        # being written declares.
        self._kinded: set[str] = set()
        self._declared: set[str] = set()

    def _check_existing(self, first_line: bytes) -> None:
        if not jsonl_format.is_first_line(first_line):
            what = another_sinks_file(first_line, "jsonl") or (
                'its first line is not a {"wall_time", "step", "metrics"} object'
            )
            raise RunFileError(
                f"{self.path} is not an rlpulse JSON lines file ({what}); it was "
                "left as it is: give a new path or one written by JSONLLogger"
            )

    def log_event(self, event: Event) -> None:
        """Append ``event`` as one ``{"event": kind, "wall_time", "watch", "message", "value"}`` line.

        ``rlpulse.read`` skips these lines; :func:`rlpulse.read_events` reads them.

        >>> import tempfile, pathlib
        >>> from rlpulse import Event, JSONLLogger
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = pathlib.Path(tmp) / "metrics.jsonl"
        ...     with JSONLLogger(path) as sink:
        ...         sink.log_event(Event(1.5, "collector", "stalled", "no progress", 30.0))
        ...     print(path.read_text(), end="")
        {"event": "stalled", "wall_time": 1.5, "watch": "collector", "message": "no progress", "value": 30.0}
        """
        self._log_event(self._write_event, event)

    def _write_event(self, event: Event) -> None:
        self._append(jsonl_format.format_event(event))

    def _format(self, payloads: Sequence[Payload]) -> str:
        """Return one JSON line per payload; ``wall_time`` is the payload's ``timestamp``.

        >>> import tempfile, pathlib
        >>> from rlpulse import JSONLLogger
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = pathlib.Path(tmp) / "metrics.jsonl"
        ...     with JSONLLogger(path) as sink:
        ...         sink.log_metrics({"buffer/size": 10.0}, timestamp=2.0)
        ...     print(path.read_text(), end="")
        {"wall_time": 2.0, "step": null, "metrics": {"buffer/size": 10.0}, "kinds": {"buffer/size": "gauge"}}
        """
        text, self._declared = jsonl_format.format_payloads(payloads, self._kinded)
        return text

    def _write_batch(self, payloads: Sequence[Payload]) -> None:
        super()._write_batch(payloads)
        # Only once written: a batch a full disk refused declares them again.
        self._kinded |= self._declared
