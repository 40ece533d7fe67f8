"""TensorBoard event files: every payload one event of scalars, written through tensorboardX.

Needs the ``tensorboard`` extra (``pip install 'rlpulse[tensorboard]'``);
tensorboardX is imported when a :class:`TensorBoardLogger` is created, never
by ``import rlpulse``.
"""

from __future__ import annotations

import itertools
import os
import socket
import struct
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any

__all__ = ["TensorBoardLogger"]

# Event file names carry only the second they were opened and the host name;
# two loggers opening the same directory in the same second would otherwise
# truncate each other's file.
_writer_numbers = itertools.count()


class TensorBoardLogger:
    """A sink that writes every payload as TensorBoard scalars into event files under ``log_dir``.

    Each metric becomes one scalar series named after its key
    (``collector/frames_per_second``), so TensorBoard groups a watch's metrics
    in one section. A payload is one event at the payload's ``step`` with the
    poll's wall-clock time (``timestamp``), in the event file when
    ``log_metrics`` returns: TensorBoard shows it on its next reload, and a
    killed process loses nothing already logged. Payloads without a step are
    numbered ``0, 1, 2, ...`` per watch (the part of the key before the first
    ``/``), so their series still advance along TensorBoard's step axis.
    TensorBoard keeps scalars as 32-bit floats: counters beyond 2**24 are
    stored rounded. A logger may be used from any thread.

    >>> import os, tempfile
    >>> from rlpulse.sinks.tensorboard import TensorBoardLogger
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     with TensorBoardLogger(tmp) as sink:
    ...         sink.log_metrics({"collector/frames": 96.0}, step=3, timestamp=1.5)
    ...     [name.startswith("events.out.tfevents.") for name in os.listdir(tmp)]
    [True]
    """

    def __init__(self, log_dir: str | os.PathLike[str]) -> None:
        self.log_dir = Path(log_dir)
        if self.log_dir.exists() and not self.log_dir.is_dir():
            raise NotADirectoryError(
                f"TensorBoardLogger writes event files into a directory, but "
                f"{self.log_dir} is a file; give a directory path (it is created "
                "when missing)"
            )
        self._masked_crc32c, self._event_pb2, self._summary_pb2 = _import_backend()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._unstepped_payloads: dict[str, int] = {}
        self.path = self.log_dir / (
            f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}"
            f".{os.getpid()}.{next(_writer_numbers)}"
        )
        """The event file this logger writes."""
        # Unbuffered: each payload reaches the file in one write, readable at
        # once, without paying for an fsync per payload.
        self._file: IO[bytes] | None = open(self.path, "xb", buffering=0)  # noqa: SIM115
        self._write_event(
            self._event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2")
        )

    def log_metrics(
        self,
        metrics: Mapping[str, float],
        step: int | None = None,
        *,
        timestamp: float | None = None,
    ) -> None:
        """Write one payload as one event of scalars, then flush the file.

        ``timestamp`` is the wall-clock time of the poll that produced the
        payload (now when ``None``); TensorBoard shows it as the points' wall
        time.

        >>> import tempfile
        >>> from rlpulse.sinks.tensorboard import TensorBoardLogger
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     with TensorBoardLogger(tmp) as sink:
        ...         sink.log_metrics({"buffer/size": 10.0, "buffer/writes": 4.0})
        """
        wall_time = time.time() if timestamp is None else float(timestamp)
        summary_value = self._summary_pb2.Summary.Value
        with self._lock:
            self._open_file()
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
                events = self._number_unstepped(metrics)
            for event_step, values in events:
                if values:
                    self._write_event(
                        self._event_pb2.Event(
                            wall_time=wall_time,
                            step=event_step,
                            summary=self._summary_pb2.Summary(value=values),
                        )
                    )

    def _write_event(self, event: Any) -> None:
        # The TFRecord framing TensorBoard reads: length, its checksum, the
        # serialized event, its checksum.
        data = event.SerializeToString()
        header = struct.pack("<Q", len(data))
        crc = self._masked_crc32c
        record = b"".join(
            (header, struct.pack("<I", crc(header)), data, struct.pack("<I", crc(data)))
        )
        file = self._open_file()
        # An unbuffered write may write less than asked; write the rest.
        remaining = memoryview(record)
        while remaining:
            remaining = remaining[file.write(remaining) :]

    def _number_unstepped(
        self, metrics: Mapping[str, float]
    ) -> list[tuple[int, list[Any]]]:
        values_by_watch: dict[str, list[Any]] = {}
        summary_value = self._summary_pb2.Summary.Value
        for name, value in metrics.items():
            values_by_watch.setdefault(name.partition("/")[0], []).append(
                summary_value(tag=name, simple_value=float(value))
            )
        events = []
        for watch, values in values_by_watch.items():
            number = self._unstepped_payloads.get(watch, 0)
            self._unstepped_payloads[watch] = number + 1
            events.append((number, values))
        return events

    def flush(self) -> None:
        """Do nothing more: every payload is in the event file when ``log_metrics`` returns.

        >>> import tempfile
        >>> from rlpulse.sinks.tensorboard import TensorBoardLogger
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     with TensorBoardLogger(tmp) as sink:
        ...         sink.flush()
        """
        with self._lock:
            self._open_file()

    def close(self) -> None:
        """Close the event file; closing again does nothing, logging afterwards raises.

        >>> import tempfile
        >>> from rlpulse.sinks.tensorboard import TensorBoardLogger
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     sink = TensorBoardLogger(tmp)
        ...     sink.close()
        ...     sink.close()
        """
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def _open_file(self) -> IO[bytes]:
        if self._file is None:
            raise RuntimeError(
                f"TensorBoardLogger for {self.log_dir} is closed; "
                "create a new TensorBoardLogger to keep logging"
            )
        return self._file

    def __enter__(self) -> TensorBoardLogger:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"TensorBoardLogger({str(self.log_dir)!r})"


def _import_backend() -> tuple[Any, Any, Any]:
    try:
        from tensorboardX.proto import event_pb2, summary_pb2
        from tensorboardX.record_writer import masked_crc32c
    except ImportError as error:
        raise ImportError(
            "TensorBoardLogger needs tensorboardX, which is not installed: "
            "pip install 'rlpulse[tensorboard]'"
        ) from error
    return masked_crc32c, event_pb2, summary_pb2
