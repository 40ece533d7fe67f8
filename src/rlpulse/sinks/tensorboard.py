"""TensorBoard event files: every payload one event of scalars and histograms, written through tensorboardX.

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
import struct
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from rlpulse.distributions import Histogram, bins
from rlpulse.naming import watch_of
from rlpulse.sinks.base import AppendedFile, BaseSink, Payload

__all__ = ["TensorBoardLogger"]

# Event file names carry only the second they were opened and the host name;
# two loggers opening the same directory in the same second would otherwise
# truncate each other's file.
_writer_numbers = itertools.count()


class TensorBoardLogger(BaseSink):
    """A sink that writes every payload as TensorBoard scalars and histograms into event files under ``log_dir``.

    Each metric becomes one scalar series named after its key
    (``collector/frames_per_second``), so TensorBoard groups a watch's metrics
    in one section. Each distribution a watch observed (a
    :class:`~rlpulse.Tally`'s ``observe``, whose quantiles are the scalars
    ``<key>_p50``, ...) is also a histogram named after its key
    (``learner/loss``), for TensorBoard's HISTOGRAMS and DISTRIBUTIONS
    tabs: the observations since the previous payload, its buckets merged
    into at most 64 (:func:`rlpulse.distributions.bins`), with their
    count, sum, smallest and largest. A payload is one event at the payload's ``step`` with the
    poll's wall-clock time (``timestamp``), in the event file when
    ``log_metrics`` returns: TensorBoard shows it on its next reload, and a
    killed process loses nothing already logged. Payloads without a step are
    numbered ``0, 1, 2, ...`` per watch (the part of the key before the first
    ``/``; keys without one together), so their series still advance along
    TensorBoard's step axis; in a directory that already holds event files
    (a restarted process), from one past the largest step each watch has
    in them, which the new logger reads when the first payload without a
    step comes (never, for a logger given steps).
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
        record_writer_class, self._event_pb2, self._summary_pb2, self._histogram_raw = (
            _import_backend()
        )
        self._framed = _framer(record_writer_class)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # Numbered from where the files already there end (a restarted
        # process), read when the first payload without a step comes: a
        # logger given steps never reads them.
        self._unstepped_payloads: dict[str, int] | None = None
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
        unstepped_payloads = dict(self._numbered_so_far(payloads))
        records = []
        for payload in payloads:
            values = [
                (name, summary_value(tag=name, simple_value=float(value)))
                for name, value in payload.metrics.items()
            ]
            values += [
                (name, self._histogram_value(name, histogram))
                for name, histogram in payload.distributions.items()
                if histogram.count
            ]
            if payload.step is not None:
                events = [(int(payload.step), [value for _, value in values])]
            else:
                events = _number_unstepped(values, unstepped_payloads)
            for event_step, event_values in events:
                if event_values:
                    event = self._event_pb2.Event(
                        wall_time=payload.wall_time,
                        step=event_step,
                        summary=self._summary_pb2.Summary(value=event_values),
                    )
                    records.append(self._record(event))
        self._file.append(b"".join(records))
        if self._unstepped_payloads is not None:
            self._unstepped_payloads = unstepped_payloads

    def _numbered_so_far(self, payloads: Sequence[Payload]) -> dict[str, int]:
        """The next number of each watch's payloads without a step; the directory's files are read for them at the first such payload."""
        if self._unstepped_payloads is None:
            if all(payload.step is not None for payload in payloads):
                return {}
            self._unstepped_payloads = {
                watch: step + 1
                for watch, step in _last_steps(
                    self.log_dir, self._event_pb2.Event
                ).items()
            }
        return self._unstepped_payloads

    def _record(self, event: Any) -> bytes:
        return self._framed(event.SerializeToString())

    def _histogram_value(self, name: str, histogram: Histogram) -> Any:
        """``histogram`` as TensorBoard's histogram of tag ``name``: its :func:`~rlpulse.distributions.bins`, each bin's upper edge its bucket limit."""
        edges, counts, sum_of_squares = bins(histogram)
        low, high = histogram.min, histogram.max
        summary = self._histogram_raw(
            name,
            min=edges[0] if low is None else low,
            max=edges[-1] if high is None else high,
            num=histogram.count,
            sum=histogram.sum,
            sum_squares=sum_of_squares,
            bucket_limits=edges[1:],
            bucket_counts=counts,
        )
        return summary.value[0]

    def _close(self) -> None:
        self._file.close()

    def __repr__(self) -> str:
        return f"TensorBoardLogger({str(self.log_dir)!r})"


def _number_unstepped(
    values: list[tuple[str, Any]], unstepped_payloads: dict[str, int]
) -> list[tuple[int, list[Any]]]:
    """The events of a payload without a step: one per watch, at the watch's next number (``unstepped_payloads``, which counts it)."""
    values_by_watch: dict[str, list[Any]] = {}
    for name, value in values:
        values_by_watch.setdefault(watch_of(name), []).append(value)
    events = []
    for watch, watch_values in values_by_watch.items():
        number = unstepped_payloads.get(watch, 0)
        unstepped_payloads[watch] = number + 1
        events.append((number, watch_values))
    return events


def _last_steps(log_dir: Path, event_class: Any) -> dict[str, int]:
    """The largest step of each watch in the event files in ``log_dir``, as TensorBoard reads them as one run."""
    last: dict[str, int] = {}
    # A watch's events repeat the same tags: their watches are found once.
    watches_of_tags: dict[tuple[str, ...], set[str]] = {}
    for path in sorted(log_dir.glob("events.out.tfevents.*")):
        for event in _events_in(path, event_class):
            tags = tuple([value.tag for value in event.summary.value])
            watches = watches_of_tags.get(tags)
            if watches is None:
                watches = watches_of_tags[tags] = {watch_of(tag) for tag in tags}
            step = event.step
            for watch in watches:
                if step > last.get(watch, -1):
                    last[watch] = step
    return last


def _events_in(path: Path, event_class: Any) -> Iterator[Any]:
    """The events of the event file at ``path``, up to where it ends or is torn.

    Each record is framed as :func:`_framer` writes it: its length (8
    bytes, little-endian) and the length's checksum (4), the data, and the
    data's checksum (4). The checksums are not checked: a record torn
    (a process killed mid-write by another writer) ends the reading there,
    as it does TensorBoard's.
    """
    from google.protobuf.message import DecodeError  # tensorboardX's dependency

    with open(path, "rb") as file:
        while len(header := file.read(12)) == 12:
            (length,) = struct.unpack("<Q", header[:8])
            data = file.read(length + 4)
            if len(data) < length + 4:
                return
            try:
                yield event_class.FromString(data[:length])
            except DecodeError:
                return


def _import_backend() -> tuple[Any, Any, Any, Any]:
    try:
        from tensorboardX.proto import event_pb2, summary_pb2
        from tensorboardX.record_writer import RecordWriter
        from tensorboardX.summary import histogram_raw
    except ImportError as error:
        raise ImportError(
            "TensorBoardLogger needs tensorboardX, which is not installed: "
            "pip install 'rlpulse[tensorboard]'"
        ) from error
    return RecordWriter, event_pb2, summary_pb2, histogram_raw


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
