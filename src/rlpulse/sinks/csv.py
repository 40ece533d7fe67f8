"""A long-format CSV file: one ``wall_time,step,name,value`` row per metric."""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO

from rlpulse.read.records import (
    CSV_FIELDS,
    RunFileError,
    open_line_file,
    prepare_record_file,
)

__all__ = ["CSVLogger"]

_HEADER = ",".join(CSV_FIELDS) + "\n"
_CHARACTERS_TO_QUOTE = frozenset(',"\r\n')


@functools.lru_cache(maxsize=4096)
def _csv_field(name: str) -> str:
    # The csv module's minimal quoting, done once per name: a payload is then
    # formatted without a csv.writer round trip.
    if _CHARACTERS_TO_QUOTE.isdisjoint(name):
        return name
    return '"' + name.replace('"', '""') + '"'


class CSVLogger:
    """A sink that appends every metric of every payload as a row of one CSV file.

    The file has the header ``wall_time,step,name,value`` (written once, when
    the file is new), ``step`` is empty for payloads without one, and names are
    quoted by the usual CSV rules, so any name survives. Each payload is one
    write, flushed before ``log_metrics`` returns: a killed process loses
    nothing already logged, and a row torn by a crash mid-write is skipped by
    ``rlpulse.read`` and removed when the file is opened again. Opening an
    existing file appends to it. A logger may be used from any thread.

    >>> import tempfile, pathlib
    >>> from rlpulse import CSVLogger
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "metrics.csv"
    ...     with CSVLogger(path) as sink:
    ...         sink.log_metrics({"collector/frames": 96.0}, step=3, timestamp=1.5)
    ...     print(path.read_text(), end="")
    wall_time,step,name,value
    1.5,3,collector/frames,96.0
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path: Path = prepare_record_file(path)
        self._lock = threading.Lock()
        file = open_line_file(self.path)
        try:
            if os.fstat(file.fileno()).st_size == 0:
                file.write(_HEADER)
                file.flush()
            else:
                _check_header(self.path)
        except BaseException:
            file.close()
            raise
        self._file: IO[str] | None = file

    def log_metrics(
        self,
        metrics: Mapping[str, float],
        step: int | None = None,
        *,
        timestamp: float | None = None,
    ) -> None:
        """Append one row per metric in a single flushed write.

        ``timestamp`` is the wall-clock time of the poll that produced the
        payload (now when ``None``); it is written as ``wall_time``.

        >>> import tempfile, pathlib
        >>> from rlpulse import CSVLogger
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = pathlib.Path(tmp) / "metrics.csv"
        ...     with CSVLogger(path) as sink:
        ...         sink.log_metrics({"odd,name": 1.0}, timestamp=2.0)
        ...     print(path.read_text().splitlines()[1])
        2.0,,"odd,name",1.0
        """
        wall_time = time.time() if timestamp is None else float(timestamp)
        prefix = f"{wall_time!r},{'' if step is None else int(step)},"
        text = "".join(
            [
                f"{prefix}{_csv_field(name)},{float(value)!r}\n"
                for name, value in metrics.items()
            ]
        )
        with self._lock:
            file = self._open_file()
            if text:
                file.write(text)
                file.flush()

    def flush(self) -> None:
        """Flush the file (every payload is already flushed by ``log_metrics``).

        >>> import tempfile, pathlib
        >>> from rlpulse import CSVLogger
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     with CSVLogger(pathlib.Path(tmp) / "metrics.csv") as sink:
        ...         sink.flush()
        """
        with self._lock:
            self._open_file().flush()

    def close(self) -> None:
        """Close the file; closing again does nothing, logging afterwards raises.

        >>> import tempfile, pathlib
        >>> from rlpulse import CSVLogger
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     sink = CSVLogger(pathlib.Path(tmp) / "metrics.csv")
        ...     sink.close()
        ...     sink.close()
        """
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def _open_file(self) -> IO[str]:
        if self._file is None:
            raise RuntimeError(
                f"CSVLogger for {self.path} is closed; "
                "create a new CSVLogger to keep logging"
            )
        return self._file

    def __enter__(self) -> CSVLogger:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"CSVLogger({str(self.path)!r})"


def _check_header(path: Path) -> None:
    with open(path, "rb") as file:
        first_line = file.readline(len(_HEADER) + 1)
    if first_line.replace(b"\r\n", b"\n") != _HEADER.encode():
        raise RunFileError(
            f"{path} is not an rlpulse CSV file (its first line is {first_line!r}, "
            f"not {_HEADER.strip()!r}); give a new path or one written by CSVLogger"
        )
