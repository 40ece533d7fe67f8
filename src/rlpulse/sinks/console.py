"""A human-readable line per payload on a text stream (standard error by default)."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from typing import TextIO

from rlpulse.sinks.base import BaseSink, Payload

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


class ConsoleLogger(BaseSink):
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
        super().__init__()
        self._stream = stream

    @property
    def stream(self) -> TextIO:
        """The stream lines go to now: the one given, else the current ``sys.stderr``.

        >>> import sys
        >>> ConsoleLogger().stream is sys.stderr
        True
        """
        return sys.stderr if self._stream is None else self._stream

    def _write_batch(self, payloads: Sequence[Payload]) -> None:
        """Print each payload as one line, all in one flushed write.

        A payload's ``timestamp`` (the wall-clock time of the poll that
        produced it) is shown as local time. ``close()`` leaves the stream open.

        >>> import io
        >>> from rlpulse import ConsoleLogger
        >>> stream = io.StringIO()
        >>> ConsoleLogger(stream).log_metrics({"loss": 0.25})
        >>> stream.getvalue().split(" ", 1)[1]
        'loss=0.25\\n'
        >>> ConsoleLogger(stream).close()
        >>> stream.closed
        False
        """
        text = "".join(
            [
                format_payload(metrics, step, wall_time) + "\n"
                for metrics, step, wall_time in payloads
            ]
        )
        stream = self.stream
        stream.write(text)
        stream.flush()

    def _flush(self) -> None:
        self.stream.flush()

    def __repr__(self) -> str:
        return f"ConsoleLogger({self._stream!r})"
