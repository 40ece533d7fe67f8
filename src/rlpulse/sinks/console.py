"""Human-readable lines per payload (and a bottleneck verdict's sentence), and a highlighted line per event, on a text stream (standard error by default).

A bottleneck watch's sentence follows each of its windows' payloads; its
``bottleneck`` event, whose message is that same sentence, is said as the
change alone (``=> bottleneck: now learner-bound (was collector-bound)``),
so that a console scrolling by shows the sentence once.
"""

from __future__ import annotations

import functools
import itertools
import operator
import os
import sys
import time
from collections.abc import Mapping, Sequence
from typing import NamedTuple, TextIO

from rlpulse.naming import Kind, inferred_kinds, split
from rlpulse.runtime.events import Event, EventKind, format_event, mark_of
from rlpulse.sinks.base import BaseSink, Payload
from rlpulse.text import format_number, terminal_width, wrapped
from rlpulse.verdict import describe_metrics, holds_verdict, label_of_sentence

__all__ = ["ConsoleLogger", "format_payload", "format_verdicts", "line_width"]

_RED, _GREEN, _RESET = "\x1b[1;31m", "\x1b[1;32m", "\x1b[0m"
# Bold, red for bad news (a streak's start), green for good (its end); a
# verdict as it is.
_COLOURS = {"!!": _RED, "ok": _GREEN}

DEFAULT_WIDTH = 100
"""The width of the lines written to a stream that is not a terminal, without ``COLUMNS``."""

# Continuation lines start under the first character after "HH:MM:SS ".
_INDENT = " " * 9
_BREAK = "\n" + _INDENT
# A watch's metrics in this order: rates, gauges (and the rest), counters.
_RANKS = {Kind.RATE: 0, Kind.COUNTER: 2}
_GAUGES = itertools.repeat(Kind.GAUGE)
_GAUGE_RANKS = itertools.repeat(1)


def format_payload(
    metrics: Mapping[str, float],
    step: int | None,
    wall_time: float,
    width: int | None = None,
    kinds: Mapping[str, Kind] | None = None,
    watch: str = "",
) -> str:
    """Return the at-a-glance rendering of a payload that ConsoleLogger prints.

    The text starts with the local time and the step, then each watch (the
    part of a name before the first ``/``) followed by its metrics, watches
    separated by ``|``. A watch's rates come first, then its gauges, then
    its cumulative counters, by their ``kinds`` (a metric they lack is a
    gauge); ``None`` guesses them from the names
    (:func:`rlpulse.naming.inferred_kinds`).
    Numbers are written as ``rlpulse show`` writes them
    (:func:`rlpulse.text.format_number`): four significant digits below a
    thousand, whole numbers below a million, then M/G/T suffixes.

    ``width=None`` gives one line; with a ``width`` the text breaks between
    metrics into lines of at most ``width`` characters (a single metric
    longer than that stays whole), each continuation line indented. A
    payload without metrics says so, naming the watch that logged it where
    known (``watch``).

    >>> noon = time.mktime((2024, 5, 1, 12, 3, 4, 0, 0, -1))
    >>> format_payload(
    ...     {"collector/frames": 12000.0, "collector/frames_per_second": 3417.0,
    ...      "buffer/size": 5.0},
    ...     step=1200,
    ...     wall_time=noon,
    ... )
    '12:03:04 step=1200 collector  frames_per_second=3417 frames=12,000 | buffer  size=5'
    >>> print(format_payload({"buffer/size": 5.0, "buffer/utilization": 0.25,
    ...                       "buffer/write_count": 84000.0}, None, noon, width=40))
    12:03:04 buffer  size=5 utilization=0.25
             write_count=84,000
    >>> format_payload({}, 7, noon), format_payload({}, None, noon, watch="learner")
    ('12:03:04 step=7 (no metrics)', '12:03:04 learner  (no metrics)')
    >>> from rlpulse.naming import Kind
    >>> format_payload({"monitor/polls": 40.0, "monitor/queued": 2.0}, None, noon,
    ...                kinds={"monitor/polls": Kind.COUNTER})
    '12:03:04 monitor  queued=2 polls=40'
    """
    head = _clock(int(wall_time))
    if step is not None:
        head += f" step={int(step)}"
    if kinds is None:
        kinds = inferred_kinds(metrics)
    names = tuple(metrics)
    ranks = map(_RANKS.get, map(kinds.get, names, _GAUGES), _GAUGE_RANKS)
    layout = _layout(names, tuple(ranks))
    if not layout.order:
        # The watch that logged it, where known: its snapshot was empty.
        return f"{head} {watch}  (no metrics)" if watch else f"{head} (no metrics)"
    values = list(metrics.values())
    numbers = [format_number(values[index]) for index in layout.order]
    lengths = tuple(map(len, numbers))
    if width is None or len(head) + layout.length + sum(lengths) <= width:
        return head + "".join(map(operator.add, layout.pieces, numbers))
    prefixes = _wrapped(layout, len(head), lengths, width)
    return head + "".join(map(operator.add, prefixes, numbers))


def format_verdicts(
    metrics: Mapping[str, float], wall_time: float, width: int | None = None
) -> str:
    """The sentence of each bottleneck verdict among ``metrics`` (:func:`rlpulse.verdict.describe_metrics`), a line each after ``=>``; ``""`` for none.

    With a ``width``, a sentence longer than that breaks between words,
    its further lines indented as a payload's are.

    >>> noon = time.mktime((2024, 5, 1, 12, 3, 4, 0, 0, -1))
    >>> print(format_verdicts({"bottleneck/window_s": 30.0, "bottleneck/consumer_wait_share": 0.63,
    ...     "bottleneck/consumer_busy_share": 0.37, "bottleneck/bound_known": 1.0,
    ...     "bottleneck/side/collector": -1.0, "bottleneck/side/learner": 1.0}, noon), end="")
    12:03:04 => bottleneck: collector-bound: the learner waited 63% of the last 30 s for data; a faster learner gains nothing, a faster collector up to 2.7x before the learner limits
    >>> print(format_verdicts({"bottleneck/window_s": 30.0, "bottleneck/consumer_wait_share": 0.63,
    ...     "bottleneck/consumer_busy_share": 0.37, "bottleneck/bound_known": 1.0,
    ...     "bottleneck/side/collector": -1.0, "bottleneck/side/learner": 1.0}, noon, 60), end="")
    12:03:04 => bottleneck: collector-bound: the learner waited
             63% of the last 30 s for data; a faster learner
             gains nothing, a faster collector up to 2.7x before
             the learner limits
    """
    if not _may_hold_verdicts(tuple(metrics)):
        return ""
    watches: dict[str, dict[str, float]] = {}
    for name, value in metrics.items():
        watch, metric = split(name)
        watches.setdefault(watch, {})[metric] = value
    lines = []
    for watch, own in watches.items():
        sentence = describe_metrics(own)
        if sentence is not None:
            line = f"{_clock(int(wall_time))} => {watch}: {sentence}"
            lines.append(wrapped(line, width, _INDENT) + "\n")
    return "".join(lines)


def line_width(stream: TextIO) -> int:
    """Return the width lines written to ``stream`` are fitted to: :func:`rlpulse.text.terminal_width`, else :data:`DEFAULT_WIDTH`.

    >>> import io
    >>> width = line_width(io.StringIO())  # not a terminal
    >>> width == int(os.environ.get("COLUMNS") or DEFAULT_WIDTH)
    True
    """
    return terminal_width(stream) or DEFAULT_WIDTH


@functools.lru_cache(maxsize=4096)
def _may_hold_verdicts(names: tuple[str, ...]) -> bool:
    # Whether a watch among ``names`` logs a verdict, worked out once per
    # payload shape: most payloads hold none.
    return holds_verdict(split(name)[1] for name in names)


@functools.lru_cache(maxsize=16)
def _clock(second: int) -> str:
    # Every payload of a round shows the same second: formatted once.
    return time.strftime("%H:%M:%S", time.localtime(second))


class _Layout(NamedTuple):
    """How the metrics of one payload shape are written, worked out once per shape."""

    order: tuple[int, ...]
    """The index of each metric's value, in the order written: a watch's rates, gauges, counters."""
    pieces: tuple[str, ...]
    """What precedes each number on the same line: separator, watch, ``key=``."""
    breaks: tuple[str, ...]
    """What precedes each number that starts a continuation line: newline, indent, watch, ``key=``."""
    length: int
    """The length of all ``pieces``: a line's length is that, the head's and the numbers'."""


@functools.lru_cache(maxsize=4096)
def _layout(names: tuple[str, ...], ranks: tuple[int, ...]) -> _Layout:
    """The layout of payloads with metrics ``names`` of ``ranks``: each watch in order of first appearance, by rank.

    A watch's payloads keep their names from poll to poll: the layout of
    each shape is worked out once.
    """
    keys: dict[str, list[tuple[int, str, int]]] = {}
    for index, (name, rank) in enumerate(zip(names, ranks, strict=True)):
        watch, key = split(name)
        keys.setdefault(watch, []).append((rank, key, index))
    order: list[int] = []
    pieces: list[str] = []
    breaks: list[str] = []
    for position, (watch, entries) in enumerate(keys.items()):
        separator = " | " if position else " "
        prefix = f"{watch}  " if watch else ""
        for _, key, index in sorted(entries, key=lambda entry: entry[0]):
            order.append(index)
            pieces.append(f"{separator}{prefix}{key}=")
            breaks.append(f"{_BREAK}{prefix}{key}=")
            separator, prefix = " ", ""
    return _Layout(tuple(order), tuple(pieces), tuple(breaks), sum(map(len, pieces)))


@functools.lru_cache(maxsize=4096)
def _wrapped(
    layout: _Layout, head: int, lengths: tuple[int, ...], width: int
) -> tuple[str, ...]:
    """What precedes each number of a payload broken into lines of at most ``width`` characters.

    ``head`` and ``lengths``: the lengths of the line's head and of each
    number as written. A watch's numbers keep their lengths from poll to
    poll (a counter gains a digit now and then): where the lines break is
    worked out once per layout and lengths, not for every payload.
    """
    prefixes: list[str] = []
    length = head
    for piece, broken, number in zip(
        layout.pieces, layout.breaks, lengths, strict=True
    ):
        if length + len(piece) + number > width:
            prefixes.append(broken)
            length = len(broken) - 1 + number  # the line starts after "\n"
        else:
            prefixes.append(piece)
            length += len(piece) + number
    return tuple(prefixes)


class ConsoleLogger(BaseSink):
    """A sink that prints each payload compactly, for watching a run live.

    ``stream`` defaults to ``sys.stderr`` as it is when each payload is
    written, so redirecting ``sys.stderr`` later still works. Each payload
    fits lines of ``width`` characters, by default the terminal's (see
    :func:`line_width`), continuing on indented lines; each write is
    flushed. ``close()`` never closes the stream. See :func:`format_payload`
    for the text.

    Raises ``ValueError`` when ``width`` is not a positive integer, and
    ``TypeError`` when ``stream`` has no ``write()``.

    >>> import io
    >>> from rlpulse import ConsoleLogger
    >>> stream = io.StringIO()
    >>> with ConsoleLogger(stream) as sink:
    ...     sink.log_metrics({"buffer/size": 5.0}, step=7)
    >>> stream.getvalue().split(" ", 1)[1]
    'step=7 buffer  size=5\\n'
    """

    def __init__(
        self, stream: TextIO | None = None, *, width: int | None = None
    ) -> None:
        if width is not None and (
            type(width) is not int or width < 1  # bool is no width
        ):
            raise ValueError(
                f"ConsoleLogger(width=...) must be a positive number of "
                f"characters, or None for the terminal's width; got {width!r}"
            )
        if stream is not None and not callable(getattr(stream, "write", None)):
            raise TypeError(
                "ConsoleLogger(stream=...) takes a text stream (an object with "
                f"write(), such as sys.stdout or an open file), got "
                f"{type(stream).__name__} {stream!r}; None writes to sys.stderr"
            )
        super().__init__()
        self._stream = stream
        self._width = width
        # By bottleneck watch, the verdict its last event announced.
        self._announced: dict[str, str] = {}

    @property
    def stream(self) -> TextIO:
        """The stream lines go to now: the one given, else the current ``sys.stderr``.

        >>> import sys
        >>> ConsoleLogger().stream is sys.stderr
        True
        """
        return sys.stderr if self._stream is None else self._stream

    def _write_batch(self, payloads: Sequence[Payload]) -> None:
        """Print each payload, all in one flushed write.

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
        stream = self.stream
        width = line_width(stream) if self._width is None else self._width
        text = "".join(
            [
                format_payload(
                    payload.metrics,
                    payload.step,
                    payload.wall_time,
                    width,
                    payload.kinds,
                    payload.watch,
                )
                + "\n"
                + format_verdicts(payload.metrics, payload.wall_time, width)
                for payload in payloads
            ]
        )
        stream.write(text)
        stream.flush()

    def log_event(self, event: Event) -> None:
        """Print ``event`` on one line that stands out (:func:`rlpulse.runtime.events.format_event`), coloured on a terminal.

        Colour is left out when the stream is not a terminal or the
        ``NO_COLOR`` environment variable is set. A ``bottleneck`` event
        says the change only (``now learner-bound (was collector-bound)``):
        its sentence is the window's, printed after the window's payload.

        >>> import io
        >>> from rlpulse import ConsoleLogger, Event
        >>> stream = io.StringIO()
        >>> ConsoleLogger(stream).log_event(Event(0.0, "c", "hung", "stats() has not returned", 5.0))
        >>> stream.getvalue().split(" ", 1)[1]
        '!! hung c: stats() has not returned\\n'
        """
        self._log_event(self._write_event, event)

    def _write_event(self, event: Event) -> None:
        stream = self.stream
        if event.kind == EventKind.BOTTLENECK:
            event = event._replace(message=self._change(event))
        line = format_event(event)
        colour = _COLOURS.get(mark_of(event.kind))
        if colour and not os.environ.get("NO_COLOR") and _is_terminal(stream):
            line = f"{colour}{line}{_RESET}"
        stream.write(line + "\n")
        stream.flush()

    def _change(self, event: Event) -> str:
        # The verdict a bottleneck event announces, and the one before it.
        label = label_of_sentence(event.message)
        before = self._announced.get(event.watch)
        self._announced[event.watch] = label
        return f"now {label}" + ("" if before is None else f" (was {before})")

    def _flush(self) -> None:
        self.stream.flush()

    def __repr__(self) -> str:
        if self._width is None:
            return f"ConsoleLogger({self._stream!r})"
        return f"ConsoleLogger({self._stream!r}, width={self._width})"


def _is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
