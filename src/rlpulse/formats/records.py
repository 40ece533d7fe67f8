"""What every run file format shares: the records, the errors, the kinds, preparing a file.

A record is one metric value as a file sink stored it, with its kind
(:class:`~rlpulse.naming.Kind`); a format that stores no kind for a metric
(a file of rlpulse 0.1.0) has it guessed from the run's names
(:func:`kinds_completed`). A :class:`DistributionRecord` is one logged
interval's histogram of a distribution; :func:`merge_distributions` adds
intervals up into the histogram of any span of a run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from rlpulse.distributions import Histogram
from rlpulse.naming import Kind, Unit, inferred_kind, split, unit_of
from rlpulse.runtime.events import Event

__all__ = [
    "DistributionRecord",
    "Followed",
    "Record",
    "RunFileError",
    "RunFileWarning",
    "RunInfo",
    "kind_named",
    "kinds_completed",
    "merge_distributions",
    "prepare_record_file",
    "unwritable",
]


class Record(NamedTuple):
    """One metric value as stored by a file sink: when, at which step, what, how much, of what kind.

    ``wall_time`` is seconds since the epoch of the poll that produced it and
    ``step`` is ``None`` when the payload had no step. ``name`` is the
    payload key ``<watch>/<metric>`` (:attr:`watch`, :attr:`metric`).
    ``kind`` is the metric's :class:`~rlpulse.naming.Kind`: :func:`read`
    always gives one (stored, or guessed for files that store none); a
    record built without one has ``None``, and the readers that summarise
    records guess it from the run's names.

    >>> record = Record(wall_time=1700000000.0, step=3, name="collector/worker_0/frames", value=96.0)
    >>> record.watch, record.metric, record.value, record.kind
    ('collector', 'worker_0/frames', 96.0, None)
    >>> str(Record(1.5, None, "learner/update_s_p99", 0.01, Kind.GAUGE).unit)
    'seconds'
    """

    wall_time: float
    step: int | None
    name: str
    value: float
    kind: Kind | None = None

    @property
    def watch(self) -> str:
        """The watch the metric was logged under (``""`` for a name without one)."""
        return split(self.name)[0]

    @property
    def metric(self) -> str:
        """The metric's name within its watch."""
        return split(self.name)[1]

    @property
    def unit(self) -> Unit | None:
        """The unit the metric's name says (:func:`rlpulse.naming.unit_of`); ``None`` when it says none."""
        return unit_of(self.metric)


class DistributionRecord(NamedTuple):
    """One logged interval of a distribution as a file sink stored it: when, at which step, what, and its histogram.

    ``histogram`` (:class:`rlpulse.distributions.Histogram`) holds the
    observations of ``name`` (``<watch>/<key>``, a :class:`~rlpulse.Tally`'s
    observed key) over the interval the payload of ``wall_time`` closed:
    since the watch's previous logged snapshot. Intervals do not overlap,
    so the histogram of any span of a run is its intervals' merged
    (:func:`merge_distributions`).

    >>> histogram = Histogram()
    >>> histogram.add(0.25)
    >>> record = DistributionRecord(1700000000.0, 3, "learner/update_s", histogram)
    >>> record.watch, record.histogram.count
    ('learner', 1)
    """

    wall_time: float
    step: int | None
    name: str
    histogram: Histogram

    @property
    def watch(self) -> str:
        """The watch the distribution was logged under (``""`` for a name without one)."""
        return split(self.name)[0]


def merge_distributions(records: Iterable[DistributionRecord]) -> dict[str, Histogram]:
    """The histogram of each distribution over the intervals of ``records``, by name, sorted by name.

    Merging is exact (the buckets are the same for every interval): a
    quantile of the merged histogram is one of everything observed in
    those intervals, within 0.55 %.

    >>> intervals = []
    >>> for wall_time, values in ((1.0, (1.0, 2.0)), (2.0, (3.0, 4.0))):
    ...     histogram = Histogram()
    ...     for value in values:
    ...         histogram.add(value)
    ...     intervals.append(DistributionRecord(wall_time, None, "w/x", histogram))
    >>> merged = merge_distributions(intervals)["w/x"]
    >>> merged.count, merged.min, merged.max, round(merged.quantile(0.5), 1)
    (4, 1.0, 4.0, 2.0)
    """
    merged: dict[str, Histogram] = {}
    for record in records:
        histogram = merged.get(record.name)
        if histogram is None:
            histogram = merged[record.name] = Histogram()
        histogram.merge(record.histogram)
    return dict(sorted(merged.items()))


class Followed(NamedTuple):
    """What a run file gained since a follower last looked: its new records and events, in order.

    ``more`` says that the follower stopped at its limit with more already
    written: the next look goes on from there.

    >>> Followed([], [], more=False).records
    []
    """

    records: list[Record]
    events: list[Event]
    more: bool = False


class RunFileError(ValueError):
    """A metrics file that cannot be used as asked: empty, corrupt, foreign, or without that run.

    Raised by ``read`` and ``list_runs``, and by a sink given an existing file
    of another format. Its message is one line naming the file and what is
    wrong with it.

    >>> import tempfile, pathlib
    >>> from rlpulse import read
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     empty = pathlib.Path(tmp) / "metrics.csv"
    ...     _ = empty.write_text("")
    ...     try:
    ...         read(empty)
    ...     except RunFileError as error:
    ...         print("is empty" in str(error))
    True
    """


class RunFileWarning(UserWarning):
    """What reading a CSV or JSON lines file left out: a last line cut short.

    A writer still appending completes it (``rlpulse top`` reads it at its
    next frame); in a finished file it was cut short by a crash, or written
    by hand without its end. Its message is one line naming the file, the
    line and what it lacks; ``rlpulse show`` prints it as a note.

    >>> import tempfile, pathlib, warnings
    >>> from rlpulse import read
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "metrics.csv"
    ...     _ = path.write_text("wall_time,step,name,value\\n1.5,3,c/frames,96\\n2.5,4,c/fr")
    ...     with warnings.catch_warnings(record=True) as caught:
    ...         warnings.simplefilter("always")
    ...         records = list(read(path))
    >>> len(records), str(caught[0].message).split(": ", 1)[1]
    (1, "left out line 3, cut short: no newline at its end: '2.5,4,c/fr'")
    """


class RunInfo(NamedTuple):
    """One run of a SQLite file at a glance: its name, when its records start and end, how many there are.

    ``start_wall_time`` is its first record's time (when it was opened, for
    a run without records) and ``end_wall_time`` its last one's.

    >>> RunInfo("baseline", 100.0, 130.5, 42).seconds
    30.5
    """

    name: str
    start_wall_time: float
    end_wall_time: float
    records: int

    @property
    def seconds(self) -> float:
        """Seconds from the first record to the last."""
        return self.end_wall_time - self.start_wall_time


def prepare_record_file(path: str | os.PathLike[str]) -> Path:
    """Return ``path`` as a ``Path`` to a file that exists and can be appended to.

    Missing parent directories are created (the convention of TensorBoard's
    and TorchRL's loggers for their log directories). An empty path raises
    ``ValueError``; one that cannot be written (a directory, a parent that is
    a file, no permission) raises the matching ``OSError`` with a message
    naming the path.

    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = prepare_record_file(pathlib.Path(tmp) / "new" / "metrics.csv")
    ...     path.exists(), path.stat().st_size
    (True, 0)
    """
    if not os.fspath(path):
        raise ValueError(
            "the path of the metrics file is empty; give a file path such as "
            "'runs/metrics.sqlite'"
        )
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab"):
            pass
    except OSError as error:
        raise unwritable(path, error) from error
    return path


def unwritable(path: Path, error: OSError) -> OSError:
    reason = error.strerror or str(error)
    message = (
        f"cannot write metrics to {path}: {reason}; "
        "give the path of a file in a directory you can write to"
    )
    return type(error)(error.errno, message)


def kind_named(text: object) -> Kind | None:
    """The kind ``text`` names; ``None`` for a kind this version does not know (guessed from the name instead).

    >>> kind_named("counter"), kind_named("histogram")
    (<Kind.COUNTER: 'counter'>, None)
    """
    try:
        return Kind(text)
    except ValueError:
        return None


def kinds_completed(
    records: Iterator[Record], names: Callable[[], Iterable[str]]
) -> Iterator[Record]:
    """``records``, each whose kind the file does not store given the kind guessed from the run's names.

    ``names()`` reads every name of the run, once, when a record first
    needs it: a file that stores every kind is read once.
    """
    guessed: dict[str, Kind] = {}
    run_names: set[str] | None = None
    for record in records:
        if record.kind is not None:
            yield record
            continue
        kind = guessed.get(record.name)
        if kind is None:
            if run_names is None:
                run_names = set(names())
            kind = guessed[record.name] = inferred_kind(record.name, run_names)
        yield Record(record.wall_time, record.step, record.name, record.value, kind)
