"""A human-readable line per payload on a text stream (standard error by default)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Mapping
from types import TracebackType
from typing import TextIO

__all__ = ["ConsoleLogger", "format_payload"]


def format_payload(
    metrics: Mapping[str, float], step: int | None, wall_time: float
) -> str:
    """Return the one-line, at-a-glance rendering of a payload that ConsoleLogger prints.

    The line starts with the local time and the step, then each watch (the part
    of a name before the first ``/``) followed by its metrics, watches separated
    by ``|``. Numbers keep three significant digits.

    >>> format_payload(
    ...     {"collector/frames": 12000.0, "collector/frames_per_second": 3417.0,
    ...      "buffer/size": 5.0},
    ...     step=1200,
    ...     wall_time=time.mktime((2024, 5, 1, 12, 3, 4, 0, 0, -1)),
    ... )
    '12:03:04 step=1200 collector  frames=1.2e+04 frames_per_second=3.42e+03 | buffer  size=5'
    """
    groups: dict[str, list[str]] = {}
    for name, value in metrics.items():
        watch, separator, metric = name.partition("/")
        if not separator:
            watch, metric = "", name
        groups.setdefault(watch, []).append(f"{metric}={float(value):.3g}")
    head = time.strftime("%H:%M:%S", time.localtime(wall_time))
    if step is not None:
        head += f" step={int(step)}"
    body = " | ".join(
        f"{watch}  {' '.join(items)}" if watch else " ".join(items)
        for watch, items in groups.items()
    )
    return f"{head} {body}" if body else head


class ConsoleLogger:
    """A sink that prints one compact line per payload, for watching a run live.

    ``stream`` defaults to ``sys.stderr`` as it is when each line is written,
    so redirecting ``sys.stderr`` later still works. Each line is flushed.
    ``close()`` never closes the stream. See ``format_payload`` for the line.

    >>> import io
    >>> from rlpulse import ConsoleLogger
    >>> stream = io.StringIO()
    >>> with ConsoleLogger(stream) as sink:
    ...     sink.log_metrics({"buffer/size": 5.0}, step=7)
    >>> stream.getvalue().split(" ", 1)[1]
    'step=7 buffer  size=5\\n'
    """

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self._closed = False

    @property
    def stream(self) -> TextIO:
        """The stream lines go to now: the one given, else the current ``sys.stderr``.

        >>> import sys
        >>> ConsoleLogger().stream is sys.stderr
        True
        """
        return sys.stderr if self._stream is None else self._stream

    def log_metrics(
        self,
        metrics: Mapping[str, float],
        step: int | None = None,
        *,
        timestamp: float | None = None,
    ) -> None:
        """Print the payload as one flushed line.

        ``timestamp`` is the wall-clock time of the poll that produced the
        payload (now when ``None``); the line shows it as local time.

        >>> import io
        >>> from rlpulse import ConsoleLogger
        >>> stream = io.StringIO()
        >>> ConsoleLogger(stream).log_metrics({"loss": 0.25})
        >>> stream.getvalue().split(" ", 1)[1]
        'loss=0.25\\n'
        """
        wall_time = time.time() if timestamp is None else float(timestamp)
        line = format_payload(metrics, step, wall_time) + "\n"
        with self._lock:
            self._check_open()
            stream = self.stream
            stream.write(line)
            stream.flush()

    def flush(self) -> None:
        """Flush the stream.

        >>> import io
        >>> from rlpulse import ConsoleLogger
        >>> ConsoleLogger(io.StringIO()).flush()
        """
        with self._lock:
            self._check_open()
            self.stream.flush()

    def close(self) -> None:
        """Stop accepting payloads, leaving the stream open; closing again does nothing.

        >>> import io
        >>> from rlpulse import ConsoleLogger
        >>> stream = io.StringIO()
        >>> ConsoleLogger(stream).close()
        >>> stream.closed
        False
        """
        with self._lock:
            self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(
                "ConsoleLogger is closed; create a new ConsoleLogger to keep logging"
            )

    def __enter__(self) -> ConsoleLogger:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ConsoleLogger({self._stream!r})"
