"""A JSON lines file: one ``{"wall_time", "step", "metrics"}`` object per payload."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO

from rlpulse.read.records import RunFileError, open_line_file, prepare_record_file

__all__ = ["JSONLLogger"]


class JSONLLogger:
    """A sink that appends every payload as one JSON object on its own line.

    A line looks like ``{"wall_time": 1.5, "step": 3, "metrics": {"a/b": 1.0}}``;
    ``step`` is ``null`` for payloads without one. NaN and infinities are
    written as ``NaN`` / ``Infinity``, as Python's ``json`` module reads them.
    Each payload is one write, flushed before ``log_metrics`` returns: a killed
    process loses nothing already logged, and a line torn by a crash mid-write
    is skipped by ``rlpulse.read`` and removed when the file is opened again.
    Opening an existing file appends to it. A logger may be used from any
    thread.

    >>> import tempfile, pathlib
    >>> from rlpulse import JSONLLogger
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "metrics.jsonl"
    ...     with JSONLLogger(path) as sink:
    ...         sink.log_metrics({"collector/frames": 96.0}, step=3, timestamp=1.5)
    ...     print(path.read_text(), end="")
    {"wall_time": 1.5, "step": 3, "metrics": {"collector/frames": 96.0}}
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path: Path = prepare_record_file(path)
        self._lock = threading.Lock()
        file = open_line_file(self.path)
        try:
            if os.fstat(file.fileno()).st_size > 0:
                _check_first_line(self.path)
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
        """Append the payload as one JSON line in a single flushed write.

        ``timestamp`` is the wall-clock time of the poll that produced the
        payload (now when ``None``); it is written as ``wall_time``.

        >>> import tempfile, pathlib
        >>> from rlpulse import JSONLLogger
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = pathlib.Path(tmp) / "metrics.jsonl"
        ...     with JSONLLogger(path) as sink:
        ...         sink.log_metrics({"buffer/size": 10.0}, timestamp=2.0)
        ...     print(path.read_text(), end="")
        {"wall_time": 2.0, "step": null, "metrics": {"buffer/size": 10.0}}
        """
        payload = {
            "wall_time": time.time() if timestamp is None else float(timestamp),
            "step": None if step is None else int(step),
            "metrics": {name: float(value) for name, value in metrics.items()},
        }
        line = json.dumps(payload) + "\n"
        with self._lock:
            file = self._open_file()
            file.write(line)
            file.flush()

    def flush(self) -> None:
        """Flush the file (every payload is already flushed by ``log_metrics``).

        >>> import tempfile, pathlib
        >>> from rlpulse import JSONLLogger
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     with JSONLLogger(pathlib.Path(tmp) / "metrics.jsonl") as sink:
        ...         sink.flush()
        """
        with self._lock:
            self._open_file().flush()

    def close(self) -> None:
        """Close the file; closing again does nothing, logging afterwards raises.

        >>> import tempfile, pathlib
        >>> from rlpulse import JSONLLogger
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     sink = JSONLLogger(pathlib.Path(tmp) / "metrics.jsonl")
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
                f"JSONLLogger for {self.path} is closed; "
                "create a new JSONLLogger to keep logging"
            )
        return self._file

    def __enter__(self) -> JSONLLogger:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"JSONLLogger({str(self.path)!r})"


def _check_first_line(path: Path) -> None:
    with open(path, "rb") as file:
        first_line = file.readline()
    try:
        payload = json.loads(first_line)
        is_payload = isinstance(payload, dict) and "metrics" in payload
    except ValueError:
        is_payload = False
    if not is_payload:
        raise RunFileError(
            f"{path} is not an rlpulse JSON lines file (its first line is not a "
            '{"wall_time", "step", "metrics"} object); give a new path or one '
            "written by JSONLLogger"
        )
