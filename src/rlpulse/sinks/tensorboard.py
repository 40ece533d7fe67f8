"""TensorBoard event files: every payload one event of scalars, written through tensorboardX.

Needs the ``tensorboard`` extra (``pip install 'rlpulse[tensorboard]'``);
tensorboardX is imported when a :class:`TensorBoardLogger` is created, never
by ``import rlpulse``. Events are framed by tensorboardX's own
``RecordWriter`` (a length and the data, each with its checksum), into
memory, and each batch is appended in one write of the logger's own
(:class:`~rlpulse.sinks.base.AppendedFile`): written a record at a time into
its file, a write a full disk cut short would leave a torn event, past which
TensorBoard reads nothing.
"""

from __future__ import annotations

import io
import itertools
import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rlpulse.naming import watch_of
from rlpulse.sinks.base import AppendedFile, BaseSink, Payload

__all__ = ["TensorBoardLogger"]

# Event file names carry only the second they were opened and the host name;
# two loggers opening the same directory in the same second would otherwise
# truncate each other's file.
_writer_numbers = itertools.count()


class TensorBoardLogger(BaseSink):
    """A sink that writes every payload as TensorBoard scalars into event files under ``log_dir``.

    Each metric becomes one scalar series named after its key
    (``collector/frames_per_second``), so TensorBoard groups a watch's metrics
    in one section. A payload is one event at the payload's ``step`` with the
    poll's wall-clock time (``timestamp``), in the event file when
    ``log_metrics`` returns: TensorBoard shows it on its next reload, and a
    killed process loses nothing already logged. Payloads without a step are
    numbered ``0, 1, 2, ...`` per watch (the part of the key before the first
    ``/``; keys without one together), so their series still advance along
    TensorBoard's step axis.
    TensorBoard keeps scalars as 32-bit floats: counters beyond 2**24 are
    stored rounded. Each call is one write; one that fails (a full disk)
    leaves the file as it was and raises ``OSError`` naming it (a
    :class:`~rlpulse.TransientSinkError` when the file system is full, so
    that a monitor's queue keeps the payloads until there is room). A
    logger may be used from any thread.

    >>> import os, tempfile
    >>> from rlpulse.sinks.tensorboard import TensorBoardLogger
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     with TensorBoardLogger(tmp) as sink:
    ...         sink.log_metrics({"collector/frames": 96.0}, step=3, timestamp=1.5)
    ...     [name.startswith("events.out.tfevents.") for name in os.listdir(tmp)]
    [True]
    """

    def __init__(self, log_dir: str | os.PathLike[str]) -> None:
        super().__init__()
        self.log_dir = Path(log_dir)
        self._destination = str(self.log_dir)
        if self.log_dir.exists() and not self.log_dir.is_dir():
            raise NotADirectoryError(
                f"TensorBoardLogger writes event files into a directory, but "
                f"{self.log_dir} is a file; give a directory path (it is created "
                "when missing)"
            )
        record_writer_class, self._event_pb2, self._summary_pb2 = _import_backend()
        self._framed = _framer(record_writer_class)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._unstepped_payloads: dict[str, int] = {}
        self.path = self.log_dir / (
            f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}"
            f".{os.getpid()}.{next(_writer_numbers)}"
        )
        """The event file this logger writes."""
        # "x" claims the name: another logger's file is never written over.
        with open(self.path, "xb"):
            pass
        self._file = AppendedFile(io.FileIO(self.path, "a"), self.path)
        try:
            self._file.append(
                self._record(
                    self._event_pb2.Event(
                        wall_time=time.time(), file_version="brain.Event:2"
                    )
                )
            )
        except BaseException:
            self._file.close()
            raise

    def _write_batch(self, payloads: Sequence[Payload]) -> None:
        """Write each payload as one event of scalars, all in one write to the file.

        A payload's ``timestamp`` (the wall-clock time of the poll that
        produced it) is what TensorBoard shows as the points' wall time.

        >>> import tempfile
        >>> from rlpulse.sinks.tensorboard import TensorBoardLogger
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     with TensorBoardLogger(tmp) as sink:
        ...         sink.log_metrics({"buffer/size": 10.0, "buffer/writes": 4.0})
        """
        summary_value = self._summary_pb2.Summary.Value
        # Counted anew when a failed batch is sent again.
        unstepped_payloads = dict(self._unstepped_payloads)
        records = []
        for metrics, step, wall_time, *_ in payloads:
            if step is not None:
                events = [
                    (
                        int(step),
                        [
                            summary_value(tag=name, simple_value=float(value))
                            for name, value in metrics.items()
                        ],
                    )
                ]
            else:
                events = self._number_unstepped(metrics, unstepped_payloads)
            for event_step, values in events:
                if values:
                    event = self._event_pb2.Event(
                        wall_time=wall_time,
                        step=event_step,
                        summary=self._summary_pb2.Summary(value=values),
                    )
                    records.append(self._record(event))
        self._file.append(b"".join(records))
        self._unstepped_payloads = unstepped_payloads

    def _record(self, event: Any) -> bytes:
        return self._framed(event.SerializeToString())

    def _number_unstepped(
        self, metrics: Mapping[str, float], unstepped_payloads: dict[str, int]
    ) -> list[tuple[int, list[Any]]]:
        values_by_watch: dict[str, list[Any]] = {}
        summary_value = self._summary_pb2.Summary.Value
        for name, value in metrics.items():
            values_by_watch.setdefault(watch_of(name), []).append(
                summary_value(tag=name, simple_value=float(value))
            )
        events = []
        for watch, values in values_by_watch.items():
            number = unstepped_payloads.get(watch, 0)
            unstepped_payloads[watch] = number + 1
            events.append((number, values))
        return events

    def _close(self) -> None:
        self._file.close()

    def __repr__(self) -> str:
        return f"TensorBoardLogger({str(self.log_dir)!r})"


def _import_backend() -> tuple[Any, Any, Any]:
    try:
        from tensorboardX.proto import event_pb2, summary_pb2
        from tensorboardX.record_writer import RecordWriter
    except ImportError as error:
        raise ImportError(
            "TensorBoardLogger needs tensorboardX, which is not installed: "
            "pip install 'rlpulse[tensorboard]'"
        ) from error
    return RecordWriter, event_pb2, summary_pb2


def _framer(record_writer_class: Any) -> Callable[[bytes], bytes]:
    """The bytes of one record as tensorboardX's ``RecordWriter`` frames it, written into memory rather than into a file of its own.

    ``RecordWriter.write`` writes the record's parts to its ``_writer``
    one after the other: given a buffer there, made without opening a
    file, it frames each record for the logger to append in one write.
    """
    buffer = io.BytesIO()
    framing = record_writer_class.__new__(record_writer_class)
    framing._writer = buffer

    def framed(data: bytes) -> bytes:
        buffer.seek(0)
        buffer.truncate()
        framing.write(data)
        return buffer.getvalue()

    return framed
