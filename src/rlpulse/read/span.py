"""A span of a run: the part of it that ``rlpulse show`` and ``rlpulse compare`` read with ``--since`` and ``--until``.

A bound is seconds from the run's first record; a negative one counts
back from its last record (``-300``: five minutes before the end). Where
a span lies is decided by each run's own first and last record
(:meth:`Span.within`), so one span of several runs is the same part of
each: ``Span(since=-300)`` is the last five minutes of every run.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import NamedTuple

from rlpulse import formats
from rlpulse.read.records import RunFileError, list_runs, run_infos
from rlpulse.text import format_duration, format_name

__all__ = ["WHOLE_RUN", "Span", "SpanError", "Within", "run_extent"]


class SpanError(ValueError):
    """A span with no records of a run: it begins after it ends, lies outside the run, or falls in a gap.

    Its message is one line naming the run, the span and how long the run is.

    >>> try:
    ...     Span(since=600.0, until=300.0).within(100.0, 2500.0, run="baseline")
    ... except SpanError as error:
    ...     print(error)
    the span of run baseline from 10 min 00 s to 5 min 00 s is empty: it ends before it begins; give --since a time before --until's
    """


class Within(NamedTuple):
    """Where a span lies in a run: its bounds and the run's first and last record's times, in seconds since the epoch.

    The bounds are clamped to the run: an open span's bound is the run's
    first or last record.

    >>> Within(700.0, 1000.0, 100.0, 2500.0).describe()
    'from 10 min 00 s to 15 min 00 s of 40 min 00 s'
    """

    since: float
    until: float
    run_start: float
    run_end: float

    def describe(self) -> str:
        """The span as a header says it: from when to when of how long a run, each from the run's first record."""
        return (
            f"from {format_duration(self.since - self.run_start)} "
            f"to {format_duration(self.until - self.run_start)} "
            f"of {format_duration(self.run_end - self.run_start)}"
        )


class Span(NamedTuple):
    """A span of a run: from ``since`` to ``until`` seconds of it, each bound inclusive and optional.

    A bound is seconds from the run's first record, or, negative, back from
    its last record; ``None`` leaves that end open. ``Span()`` is the whole
    run.

    >>> last_five_minutes = Span(since=-300.0)
    >>> last_five_minutes.within(100.0, 2500.0, run="r")
    Within(since=2200.0, until=2500.0, run_start=100.0, run_end=2500.0)
    >>> Span(since=600.0, until=900.0).within(100.0, 2500.0, run="r").describe()
    'from 10 min 00 s to 15 min 00 s of 40 min 00 s'
    """

    since: float | None = None
    until: float | None = None

    @property
    def is_whole_run(self) -> bool:
        """Whether the span is open at both ends: the whole run.

        >>> Span().is_whole_run, Span(until=60.0).is_whole_run
        (True, False)
        """
        return self.since is None and self.until is None

    def within(self, run_start: float, run_end: float, *, run: str) -> Within:
        """Where the span lies in run ``run``, whose records go from ``run_start`` to ``run_end`` (seconds since the epoch).

        Raises :class:`SpanError` when it ends before it begins, or lies
        wholly before or after the run.
        """
        since = run_start if self.since is None else _at(self.since, run_start, run_end)
        until = run_end if self.until is None else _at(self.until, run_start, run_end)
        length = format_duration(run_end - run_start)
        if self.since is not None and self.until is not None and since > until:
            raise SpanError(
                f"the span of run {format_name(run)} {self._describe()} is empty: "
                "it ends before it begins; give --since a time before --until's"
            )
        if since > run_end or until < run_start:
            raise SpanError(
                f"run {format_name(run)} has no records {self._describe()}: it is "
                f"{length} long; give a span within it (a negative time counts "
                "back from its end: --since -5m)"
            )
        return Within(max(since, run_start), min(until, run_end), run_start, run_end)

    def no_records(self, within: Within, *, run: str) -> SpanError:
        """The error of a span that lies in run ``run`` (at ``within``) but holds none of its records: a gap in the run."""
        return SpanError(
            f"run {format_name(run)} has no records {within.describe()}; give "
            "a wider span"
        )

    def _describe(self) -> str:
        # The span as asked, for an error: its bounds as the user gave them.
        parts = []
        if self.since is not None:
            parts.append(f"from {_bound_text(self.since)}")
        if self.until is not None:
            parts.append(f"to {_bound_text(self.until)}")
        return " ".join(parts)


WHOLE_RUN = Span()
"""The span open at both ends: a whole run."""


def _at(bound: float, run_start: float, run_end: float) -> float:
    # A bound in seconds since the epoch; -0 counts back from the end too.
    if math.copysign(1.0, bound) < 0:
        return run_end + bound
    return run_start + bound


def _bound_text(bound: float) -> str:
    if math.copysign(1.0, bound) < 0:
        return f"{format_duration(-bound)} before the end"
    return format_duration(bound)


def run_extent(
    path: str | os.PathLike[str], run: str | None = None
) -> tuple[float, float] | None:
    """The times of the first and last record of run ``run`` of the file at ``path`` (``None``: its latest run); ``None`` for a run without records.

    A SQLite file says it from its stored summaries; a CSV or JSON lines
    file is read for it. Errors are those of :func:`rlpulse.read`.

    >>> import tempfile, pathlib
    >>> from rlpulse.sinks import JSONLLogger
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     with JSONLLogger(pathlib.Path(tmp) / "run.jsonl") as sink:
    ...         sink.log_metrics({"b/size": 1.0}, timestamp=100.0)
    ...         sink.log_metrics({"b/size": 2.0}, timestamp=160.0)
    ...     run_extent(sink.path)
    (100.0, 160.0)
    """
    path = Path(path)
    if formats.detect_format(path) == "sqlite":
        names = list_runs(path)
        if not names:
            raise RunFileError(f"{path} contains no runs")
        if run is not None and run not in names:
            formats.read(path, run)  # raises, naming the runs there are
        wanted = names[-1] if run is None else run
        (info,) = [info for info in run_infos(path) if info.name == wanted]
        if not info.records:
            return None
        return info.start_wall_time, info.end_wall_time
    times = [math.inf, -math.inf]
    for record in formats.read(path, run):
        wall_time = record.wall_time
        if wall_time < times[0]:
            times[0] = wall_time
        if wall_time > times[1]:
            times[1] = wall_time
    if times[0] > times[1]:
        return None
    return times[0], times[1]
