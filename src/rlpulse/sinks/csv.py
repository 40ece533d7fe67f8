"""A long-format CSV file: one ``wall_time,step,name,value,kind`` row per metric."""

from __future__ import annotations

from collections.abc import Sequence

from rlpulse.formats import csv as csv_format
from rlpulse.sinks.base import LineFileSink, Payload

__all__ = ["CSVLogger"]


class CSVLogger(LineFileSink):
    """A sink that appends every metric of every payload as a row of one CSV file.

    The file has the header ``wall_time,step,name,value,kind`` (written once,
    when the file is new), ``step`` is empty for payloads without one, names
    are quoted by the usual CSV rules, so any name survives, and ``kind`` is
    the metric's kind (``counter``, ``gauge``, ``rate``, ``distribution``).
    A file rlpulse 0.1.0 wrote (header ``wall_time,step,name,value``) is
    appended to in its own columns, without kinds. Each call
    (``log_metrics``, or ``log_batch`` with the monitor's batch) is one write
    straight to the file, done before it returns: a killed process (even
    ``kill -9``) loses nothing already logged, and a row torn by a crash
    mid-write is skipped by ``rlpulse.read`` and removed when the file is
    opened again. A write that fails (a full disk) raises ``OSError`` naming
    the file and leaves the file as it was. Writes are not synced to disk, so
    an operating system crash may lose the last ones. A file holds one run:
    a file that already holds rows is refused (:class:`~rlpulse.sinks.base.RunExistsError`,
    the file left as it is) unless ``resume=True`` appends to it on purpose,
    and a file another logger is writing is refused (``RunFileError``);
    missing parent directories are created, as TensorBoard's and TorchRL's
    loggers create their log directories. A logger may be used from any
    thread.

    >>> import tempfile, pathlib
    >>> from rlpulse import CSVLogger
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "metrics.csv"
    ...     with CSVLogger(path) as sink:
    ...         sink.log_metrics({"collector/frames": 96.0}, step=3, timestamp=1.5)
    ...     print(path.read_text(), end="")
    wall_time,step,name,value,kind
    1.5,3,collector/frames,96.0,counter
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "metrics.csv"
    ...     with CSVLogger(path) as sink:
    ...         sink.log_metrics({"collector/frames": 96.0}, timestamp=1.5)
    ...     with CSVLogger(path, resume=True) as sink:
    ...         sink.log_metrics({"collector/frames": 192.0}, timestamp=2.5)
    ...     print(path.read_text(), end="")
    wall_time,step,name,value,kind
    1.5,,collector/frames,96.0,counter
    2.5,,collector/frames,192.0,counter
    """

    _header = csv_format.HEADER
    _record_end = staticmethod(csv_format.record_end)
    _with_kinds = True

    def _check_existing(self, first_line: bytes) -> None:
        self._with_kinds = csv_format.has_kinds(self.path, first_line)

    def _format(self, payloads: Sequence[Payload]) -> str:
        """Return one row per metric; ``wall_time`` is the payload's ``timestamp``.

        >>> import tempfile, pathlib
        >>> from rlpulse import CSVLogger
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = pathlib.Path(tmp) / "metrics.csv"
        ...     with CSVLogger(path) as sink:
        ...         sink.log_metrics({"odd,name": 1.0}, timestamp=2.0)
        ...     print(path.read_text().splitlines()[1])
        2.0,,"odd,name",1.0,gauge
        """
        return csv_format.format_rows(payloads, kinds=self._with_kinds)
