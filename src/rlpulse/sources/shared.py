"""Per-worker counters in one shared-memory segment: free to write, instant to read.

Asking each worker process for its numbers over a pipe costs a round trip
per worker per poll and waits behind the worker's current batch. Here the
parent creates one ``multiprocessing.shared_memory`` segment; each worker
writes its own float64 slots in place (no lock, no message), and the parent
reads every worker's slots in one copy, whatever the workers are doing.
"""

from __future__ import annotations

import math
import os
import secrets
import struct
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence, Sized
from multiprocessing import resource_tracker, shared_memory
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, NamedTuple, cast

from rlpulse.distributions import (
    HIGHEST_BUCKET,
    LOWEST_BUCKET,
    Histogram,
    bucket_index,
)
from rlpulse.naming import Kind

__all__ = ["SharedCounters", "WorkerCounters", "remove_leaked_segments"]

_NEVER = float("nan")  # the heartbeat slot of a worker that has not beaten yet
_FINISHED = -math.inf  # the heartbeat slot of a worker that said it finished
# The entries of stats() beside the per-worker ones (worker_<i>/...).
_RESERVED = ("workers", "workers_alive", "workers_finished")

# A histogram's block of slots: its zero count, its smallest and largest
# observation, then one slot per bucket from a nanosecond to a billion
# (values beyond are counted in the end buckets).
_ZEROS, _MIN, _MAX, _FIRST_BUCKET = range(4)
_BLOCK = _FIRST_BUCKET + HIGHEST_BUCKET - LOWEST_BUCKET + 1


def _clock() -> float:
    # Heartbeats are stamped in the workers and aged in the reader, so the
    # clock must be one clock for every process of the machine.
    # time.monotonic() is CLOCK_MONOTONIC on Linux (system-wide, since boot;
    # mach_absolute_time and QueryPerformanceCounter elsewhere, system-wide
    # too), and unlike time.time() it never jumps when the wall clock is
    # set or slewed, which would fake a dead worker or revive one.
    return time.monotonic()


class _WorkerSlots(NamedTuple):
    # One worker's slot indices, from _Layout.worker: what a writer binds to.
    counters: dict[str, int]
    gauges: dict[str, int]
    heartbeat: int
    # Per histogram: its _count slot, its _sum slot, its block's first slot.
    histograms: dict[str, tuple[int, int, int]]


class _Layout:
    # Where every value lives in the segment: the one definition the reader
    # and both writers use (the compiled one is given a _WorkerSlots and
    # checks only that the view holds the C doubles it stores). Every slot
    # is a float64. Worker i's keys fill row i, its counters, its gauges,
    # then each histogram's <key>_count and <key>_sum; the heartbeats, one
    # per worker, follow all rows, so that the keys' slots map one to one
    # onto their names and each key's sum over workers is one strided slice.
    # The histograms' buckets come last, a _BLOCK per worker and histogram,
    # worker by worker, so that stats() copies none of them.
    __slots__ = (
        "buckets",
        "counters",
        "gauges",
        "heartbeats",
        "histograms",
        "keys",
        "row",
        "workers",
    )

    SLOT_FORMAT: ClassVar[Literal["d"]] = "d"
    SLOT_BYTES: ClassVar[int] = struct.calcsize(SLOT_FORMAT)

    def __init__(
        self,
        workers: int,
        counters: tuple[str, ...],
        gauges: tuple[str, ...],
        histograms: tuple[str, ...] = (),
    ) -> None:
        self.workers = workers
        self.counters = counters
        self.gauges = gauges
        self.histograms = histograms
        summaries = tuple(
            f"{key}{suffix}" for key in histograms for suffix in ("_count", "_sum")
        )
        self.keys = counters + gauges + summaries
        self.row = len(self.keys)
        start = workers * self.row
        self.heartbeats = range(start, start + workers)
        self.buckets = self.heartbeats.stop

    @property
    def size(self) -> int:
        # The segment's bytes.
        blocks = self.workers * len(self.histograms) * _BLOCK
        return (self.buckets + blocks) * self.SLOT_BYTES

    def view(self, memory: shared_memory.SharedMemory) -> memoryview[float]:
        return cast(memoryview, memory.buf).cast(self.SLOT_FORMAT)

    def worker(self, index: int) -> _WorkerSlots:
        first = index * self.row
        slots = {key: first + column for column, key in enumerate(self.keys)}
        blocks = self.buckets + index * len(self.histograms) * _BLOCK
        return _WorkerSlots(
            {key: slots[key] for key in self.counters},
            {key: slots[key] for key in self.gauges},
            self.heartbeats[index],
            {
                key: (slots[f"{key}_count"], slots[f"{key}_sum"], blocks + k * _BLOCK)
                for k, key in enumerate(self.histograms)
            },
        )

    def blocks(self) -> range:
        # The slots of the histograms' blocks.
        return range(
            self.buckets, self.buckets + self.workers * len(self.histograms) * _BLOCK
        )

    def merged(self, values: Sequence[float]) -> dict[str, Histogram]:
        # Each histogram, the workers' blocks merged; values: every slot.
        blocks = values[self.buckets :]
        stride = len(self.histograms) * _BLOCK
        row, keys_end = self.row, self.heartbeats.start
        merged: dict[str, Histogram] = {}
        for k, key in enumerate(self.histograms):
            first = k * _BLOCK
            positive = {}
            for slot in range(_FIRST_BUCKET, _BLOCK):
                count = sum(blocks[first + slot :: stride])
                if count:
                    positive[LOWEST_BUCKET + slot - _FIRST_BUCKET] = int(count)
            sum_column = self.keys.index(f"{key}_sum")
            lowest = min(blocks[first + _MIN :: stride])
            highest = max(blocks[first + _MAX :: stride])
            merged[key] = Histogram(
                positive=positive,
                zero_count=int(sum(blocks[first + _ZEROS :: stride])),
                sum=sum(values[sum_column:keys_end:row]),
                min=lowest if lowest < math.inf else None,
                max=highest if highest > -math.inf else None,
            )
        return merged

    def key_names(self) -> list[str]:
        # "worker_<i>/<key>" of every key slot, in slot order.
        return [
            f"worker_{index}/{key}"
            for index in range(self.workers)
            for key in self.keys
        ]


class SharedCounters:
    """Counters, gauges and heartbeats of worker processes, in one shared-memory segment.

    Create it in the parent, pass it to the worker processes (it pickles
    under the ``spawn``, ``fork`` and ``forkserver`` start methods alike),
    and in worker ``i`` write through ``counters.worker(i)``: ``inc(key,
    n=1)`` for a counter, ``set(key, value)`` for a gauge, ``heartbeat()``
    to say the worker is making progress. Each worker is the only writer of
    its own slots, so writes take no lock and send no message. The parent
    (or any process holding the object) reads with :meth:`stats`, without
    waiting for any worker — a :class:`~rlpulse.LoggerMonitor` watches it
    directly.

    ``stats()`` returns each counter and gauge summed over the workers, then
    ``workers`` (the slots), ``workers_alive`` (workers whose last heartbeat
    is younger than ``liveness`` seconds) and ``workers_finished`` (workers
    that said they finished: :meth:`WorkerCounters.finish`), then per
    worker ``worker_<i>/<key>`` and ``worker_<i>/heartbeat_age_s`` (absent
    until the worker's first heartbeat, and once it finished). A worker
    that dies, even by ``SIGKILL``, leaves its last values readable and
    drops out of ``workers_alive`` once its heartbeat is older than
    ``liveness``: a monitor tells it lost (a ``worker_lost`` event), which
    it does not of a worker that finished.

    A key declared in ``histograms`` is a distribution: a writer's
    ``observe(key, value)`` counts a value of at least zero in the worker's
    own buckets (30.6 kB of the segment per worker; from a nanosecond to a
    billion, beyond counted as those) and keeps its smallest and largest
    value; ``stats()`` gives ``<key>_count`` and ``<key>_sum``,
    :meth:`histograms` the workers' buckets merged, of which a monitor logs
    ``<key>_p50`` (…) within 0.55 % (:mod:`rlpulse.distributions`). The
    workers keep no extremes per interval: a quantile of an interval is
    clamped to the observation where the interval holds one, to the value
    where every observation so far was one value, and otherwise is its
    bucket's middle.

    :meth:`close` in the creating process unlinks the segment; if it is
    never called, the segment is unlinked when the object is collected or
    the process exits. In any other process ``close()`` only detaches. On
    Linux a new one first removes segments that killed creators left
    behind (see :func:`remove_leaked_segments`).

    Args:
        workers: how many workers write (indices ``0`` to ``workers - 1``).
        counters: names of the cumulative counters each worker increments.
        gauges: names of the gauges each worker sets.
        liveness: seconds after its last heartbeat that a worker still
            counts as alive (default ``5.0``).
        histograms: names of the distributions each worker observes.

    Examples:
        >>> counters = SharedCounters(2, counters=("frames",), gauges=("queue",))
        >>> writer = counters.worker(1)
        >>> writer.inc("frames", 200)
        >>> writer.set("queue", 3)
        >>> writer.heartbeat()
        >>> stats = counters.stats()
        >>> stats["frames"], stats["worker_1/frames"], stats["workers_alive"]
        (200.0, 200.0, 1)
        >>> counters.close()
    """

    def __init__(
        self,
        workers: int,
        counters: Iterable[str] = (),
        gauges: Iterable[str] = (),
        liveness: float = 5.0,
        *,
        histograms: Iterable[str] = (),
    ) -> None:
        layout = _layout_of(workers, counters, gauges, histograms, liveness)
        memory = _create_segment(layout.size)
        self._setup(memory, layout, float(liveness), os.getpid())
        view = self._live_view()
        for heartbeat_slot in layout.heartbeats:
            view[heartbeat_slot] = _NEVER
        for block in range(layout.buckets, layout.blocks().stop, _BLOCK):
            view[block + _MIN] = math.inf
            view[block + _MAX] = -math.inf

    def _setup(
        self,
        memory: shared_memory.SharedMemory,
        layout: _Layout,
        liveness: float,
        unlink_in: int | None,
    ) -> None:
        self._memory = memory
        self._layout = layout
        self._liveness = liveness
        self._view: memoryview[float] | None = layout.view(memory)
        self._slot_names = layout.key_names()
        self._age_names = [
            f"worker_{index}/heartbeat_age_s" for index in range(layout.workers)
        ]
        self._finalizer = weakref.finalize(
            self, _release, memory, self._view, unlink_in
        )

    @property
    def workers(self) -> int:
        """How many workers write (indices ``0`` to ``workers - 1``).

        Examples:
            >>> with SharedCounters(4) as counters:
            ...     counters.workers
            4
        """
        return self._layout.workers

    @property
    def counters(self) -> tuple[str, ...]:
        """The counter names, in order.

        Examples:
            >>> with SharedCounters(1, counters=("frames", "episodes")) as counters:
            ...     counters.counters
            ('frames', 'episodes')
        """
        return self._layout.counters

    @property
    def gauges(self) -> tuple[str, ...]:
        """The gauge names, in order.

        Examples:
            >>> with SharedCounters(1, gauges=("queue",)) as counters:
            ...     counters.gauges
            ('queue',)
        """
        return self._layout.gauges

    @property
    def histogram_names(self) -> tuple[str, ...]:
        """The histogram names, in order (see :meth:`histograms` for their contents)."""
        return self._layout.histograms

    @property
    def liveness(self) -> float:
        """Seconds after its last heartbeat that a worker still counts as alive.

        Examples:
            >>> with SharedCounters(1, liveness=2) as counters:
            ...     counters.liveness
            2.0
        """
        return self._liveness

    @property
    def name(self) -> str:
        """The shared-memory segment's name (under ``/dev/shm`` on Linux).

        Examples:
            >>> with SharedCounters(1) as counters:
            ...     isinstance(counters.name, str)
            True
        """
        return self._memory.name

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called in this process.

        Examples:
            >>> counters = SharedCounters(1)
            >>> counters.close()
            >>> counters.closed
            True
        """
        return self._view is None

    def worker(self, index: int) -> WorkerCounters:
        """Return the writer of worker ``index``'s slots.

        Call it in the worker process that owns ``index``; one process (one
        thread) should write each index.

        Examples:
            >>> with SharedCounters(2, counters=("frames",)) as counters:
            ...     counters.worker(0).inc("frames", 5)
            ...     counters.stats()["worker_0/frames"]
            5.0
        """
        workers = self._layout.workers
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(
                f"SharedCounters.worker({index!r}): the worker index must be an int "
                f"in 0..{workers - 1}."
            )
        if not 0 <= index < workers:
            raise IndexError(
                f"SharedCounters.worker({index}): no such worker; valid indices are "
                f"0..{workers - 1} (created with workers={workers})."
            )
        return _WRITER(self, index)

    def metric_kinds(self) -> dict[str, Kind]:
        """The counters among the entries of :meth:`stats`: each counter and histogram count and sum, summed and per worker.

        Examples:
            >>> with SharedCounters(2, counters=("frames",), gauges=("queue",)) as counters:
            ...     sorted(counters.metric_kinds())
            ['frames', 'worker_0/frames', 'worker_1/frames']
        """
        layout = self._layout
        names = [
            *layout.counters,
            *(
                f"{key}_{part}"
                for key in layout.histograms
                for part in ("count", "sum")
            ),
        ]
        kinds = dict.fromkeys(names, Kind.COUNTER)
        for index in range(layout.workers):
            for name in names:
                kinds[f"worker_{index}/{name}"] = Kind.COUNTER
        return kinds

    def stats(self) -> dict[str, float]:
        """Return sums over workers, ``workers`` (the slots), ``workers_alive`` and ``workers_finished``, and every worker's slots and heartbeat age.

        Reads all slots in one copy; never waits for a worker.

        Examples:
            >>> with SharedCounters(2, counters=("frames",)) as counters:
            ...     counters.worker(0).inc("frames", 3)
            ...     counters.worker(1).inc("frames", 4)
            ...     counters.stats()
            {'frames': 7.0, 'workers': 2, 'workers_alive': 0, 'workers_finished': 0, 'worker_0/frames': 3.0, 'worker_1/frames': 4.0}
        """
        layout = self._layout
        values = self._live_view()[: layout.buckets].tolist()
        # Read after the copy, so that no heartbeat in it is newer than now.
        now = _clock()
        row = layout.row
        keys_end = layout.heartbeats.start
        snapshot: dict[str, float] = {
            key: _sum_of_known(values[column:keys_end:row])
            for column, key in enumerate(layout.keys)
        }
        alive = finished = 0
        ages: dict[str, float] = {}
        for age_name, beat in zip(self._age_names, values[keys_end:], strict=True):
            if beat == _FINISHED:
                finished += 1
            # NaN (never beaten) compares false with everything.
            elif beat == beat:
                age = now - beat
                ages[age_name] = age
                alive += age < self._liveness
        # Out of how many: what a live view fills workers_alive's bar to.
        snapshot["workers"] = layout.workers
        snapshot["workers_alive"] = alive
        snapshot["workers_finished"] = finished
        snapshot.update(zip(self._slot_names, values[:keys_end], strict=True))
        snapshot.update(ages)
        return snapshot

    def histograms(self) -> dict[str, Histogram]:
        """Return each declared histogram, the workers' buckets merged: what a monitor logs quantiles of.

        Reads every worker's buckets in one copy; never waits for a worker.

        Examples:
            >>> with SharedCounters(2, histograms=("step_s",)) as counters:
            ...     counters.worker(0).observe("step_s", 0.010)
            ...     counters.worker(1).observe("step_s", 0.030)
            ...     merged = counters.histograms()["step_s"]
            ...     merged.count, round(merged.quantile(1.0), 3)
            (2, 0.03)
        """
        return self._layout.merged(self._live_view().tolist())

    def close(self) -> None:
        """Detach from the segment, and unlink it if this process created it; idempotent.

        Writers of this object in the same process stop working; workers in
        other processes keep their own attachment until they exit.

        Examples:
            >>> import os, sys
            >>> counters = SharedCounters(1)
            >>> path = f"/dev/shm/{counters.name}"
            >>> os.path.exists(path) or not sys.platform.startswith("linux")
            True
            >>> counters.close()
            >>> counters.close()
            >>> os.path.exists(path)
            False
        """
        self._view = None
        self._finalizer()

    def __enter__(self) -> SharedCounters:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"name={self.name!r}"
        layout = self._layout
        histograms = f"histograms={layout.histograms}, " if layout.histograms else ""
        return (
            f"SharedCounters(workers={layout.workers}, counters={layout.counters}, "
            f"gauges={layout.gauges}, liveness={self._liveness}, {histograms}{state})"
        )

    def __getstate__(self) -> dict[str, Any]:
        self._live_view()
        return {
            "name": self._memory.name,
            "workers": self._layout.workers,
            "counters": self._layout.counters,
            "gauges": self._layout.gauges,
            "histograms": self._layout.histograms,
            "liveness": self._liveness,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        layout = _Layout(
            state["workers"], state["counters"], state["gauges"], state["histograms"]
        )
        # A copy only attaches: the segment is the original's to unlink.
        self._setup(_attach(state["name"]), layout, state["liveness"], None)

    def _live_view(self) -> memoryview[float]:
        view = self._view
        if view is None:
            raise ValueError(
                "SharedCounters is closed in this process; create a new one, or "
                "stop using it (unwatch it) before closing it."
            )
        return view


class WorkerCounters:
    """The writer of one worker's slots in a :class:`SharedCounters` segment.

    Returned by :meth:`SharedCounters.worker`. ``inc`` and ``set`` write one
    float64 slot in place; ``heartbeat`` stamps the worker's clock slot.
    Nothing is locked or sent. Pickles as a reference to the same slots.

    Where rlpulse was built with its compiled writer (from source, when a C
    compiler is present), ``inc``, ``set`` and ``heartbeat`` run as one C
    call each, with the behaviour of the Python methods documented here;
    :attr:`compiled` says which a writer uses. Setting the environment
    variable ``RLPULSE_PURE_PYTHON=1`` before importing rlpulse selects the
    Python methods.

    Examples:
        >>> with SharedCounters(1, counters=("episodes",)) as counters:
        ...     writer = counters.worker(0)
        ...     writer.inc("episodes")
        ...     writer.heartbeat()
        ...     stats = counters.stats()
        ...     stats["episodes"], stats["workers_alive"]
        (1.0, 1)
    """

    if not TYPE_CHECKING:
        # The concrete writers below declare the slots this class's methods
        # use: the compiled one keeps its view in C, so this class must add
        # nothing to the instance layout. (Hidden from the type checker, which
        # would otherwise refuse the assignments to undeclared slots here.)
        __slots__ = ()

    compiled: ClassVar[bool] = False
    """Whether ``inc``, ``set`` and ``heartbeat`` run compiled (see above)."""

    _shared: SharedCounters
    _index: int
    _view: memoryview[float]
    _counter_slots: dict[str, int]
    _gauge_slots: dict[str, int]
    _heartbeat_slot: int
    _histogram_view: memoryview[float]
    _histogram_slots: dict[str, tuple[int, int, int]]

    def __init__(self, shared: SharedCounters, index: int) -> None:
        self._shared = shared
        self._index = index
        # The segment's own view: closing the segment releases it, and a
        # write through a released view raises instead of touching memory.
        view = shared._live_view()
        slots = shared._layout.worker(index)
        self._bind(view, slots, _clock)
        # observe() is Python in both writers: it reaches the slots itself.
        self._histogram_view = view
        self._histogram_slots = slots.histograms

    @property
    def index(self) -> int:
        """The worker index whose slots this writer writes.

        Examples:
            >>> with SharedCounters(3) as counters:
            ...     counters.worker(2).index
            2
        """
        return self._index

    def inc(self, key: str, n: float = 1.0) -> None:
        """Add ``n`` (default 1) to this worker's counter ``key``.

        Raises ``ValueError`` for a negative ``n`` (a counter only goes up:
        a value that goes down is a gauge, kept with :meth:`set`) and for an
        increment that would make the counter NaN or infinite (it would stay
        so for good); the counter keeps its count.

        Examples:
            >>> with SharedCounters(1, counters=("frames",)) as counters:
            ...     writer = counters.worker(0)
            ...     writer.inc("frames", 32)
            ...     writer.inc("frames")
            ...     counters.stats()["frames"]
            33.0
        """
        # A float default keeps the common inc(key) on the interpreter's
        # float + float fast path: the slot holds a float64.
        try:
            slot = self._counter_slots[key]
            view = self._view
            total = view[slot] + n
            if total - total == 0.0 and n >= 0:  # neither NaN nor ±inf
                view[slot] = total
                return
            negative = n < 0
        except KeyError:
            raise self._unknown(key, "counter") from None
        except (TypeError, ValueError):
            raise self._failure("inc", key, n) from None
        if negative:
            raise self._negative(key, n)
        raise self._nonfinite(key, n)

    def set(self, key: str, value: float) -> None:
        """Set this worker's gauge ``key`` to ``value``.

        Examples:
            >>> with SharedCounters(1, gauges=("queue",)) as counters:
            ...     counters.worker(0).set("queue", 7)
            ...     counters.stats()["queue"]
            7.0
        """
        try:
            self._view[self._gauge_slots[key]] = value
        except KeyError:
            raise self._unknown(key, "gauge") from None
        except (TypeError, ValueError):
            raise self._failure("set", key, value) from None

    def observe(self, key: str, value: float) -> None:
        """Count ``value`` (at least zero, finite) in this worker's histogram ``key``.

        Adds to the value's bucket, to ``<key>_count`` and to ``<key>_sum``.
        Raises ``ValueError`` for a negative, infinite or NaN value.

        Examples:
            >>> with SharedCounters(1, histograms=("batch_s",)) as counters:
            ...     counters.worker(0).observe("batch_s", 0.25)
            ...     stats = counters.stats()
            ...     stats["batch_s_count"], stats["batch_s_sum"]
            (1.0, 0.25)
        """
        try:
            count_slot, sum_slot, block = self._histogram_slots[key]
        except KeyError:
            raise self._unknown(key, "histogram") from None
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise self._failure("observe", key, value) from None
        if number > 0.0 and number != math.inf:
            index = min(max(bucket_index(number), LOWEST_BUCKET), HIGHEST_BUCKET)
            slot = block + _FIRST_BUCKET + index - LOWEST_BUCKET
        elif number == 0.0:
            slot = block + _ZEROS
        else:
            raise ValueError(
                f"WorkerCounters.observe({key!r}, {value!r}): a histogram of "
                "SharedCounters counts finite values of at least zero (durations, "
                "sizes)."
            )
        view = self._histogram_view
        try:
            view[slot] += 1.0
            if number < view[block + _MIN]:
                view[block + _MIN] = number
            if number > view[block + _MAX]:
                view[block + _MAX] = number
            view[sum_slot] += number
            view[count_slot] += 1.0
        except ValueError:
            raise self._failure("observe", key, value) from None

    def heartbeat(self) -> None:
        """Stamp this worker's heartbeat with the current time: it is making progress.

        Examples:
            >>> with SharedCounters(1) as counters:
            ...     counters.worker(0).heartbeat()
            ...     counters.stats()["worker_0/heartbeat_age_s"] < 60
            True
        """
        try:
            self._view[self._heartbeat_slot] = _clock()
        except ValueError:
            raise self._failure("heartbeat", None, None) from None

    def finish(self) -> None:
        """Say this worker finished its work: it leaves ``workers_alive`` now, counted in ``workers_finished``, and is not lost.

        Call it where the worker ends normally (after its loop, before its
        process exits): a monitor tells a worker that leaves
        ``workers_alive`` without finishing as lost (a ``worker_lost``
        event). Its counters and gauges keep their values; a ``heartbeat()``
        afterwards makes it alive again.

        Examples:
            >>> with SharedCounters(2) as counters:
            ...     counters.worker(0).heartbeat()
            ...     counters.worker(1).heartbeat()
            ...     counters.worker(1).finish()
            ...     stats = counters.stats()
            ...     stats["workers_alive"], stats["workers_finished"], "worker_1/heartbeat_age_s" in stats
            (1, 1, False)
        """
        slot = self._shared._layout.worker(self._index).heartbeat
        try:
            self._histogram_view[slot] = _FINISHED
        except ValueError:
            raise self._failure("finish", None, None) from None

    def __repr__(self) -> str:
        return f"WorkerCounters(index={self._index}, shared={self._shared!r})"

    def __reduce__(self) -> tuple[Any, tuple[SharedCounters, int]]:
        return (SharedCounters.worker, (self._shared, self._index))

    def _bind(
        self, view: memoryview[float], slots: _WorkerSlots, clock: Callable[[], float]
    ) -> None:
        # ``clock`` is for the compiled writer: the Python methods call
        # _clock themselves.
        self._view = view
        self._counter_slots = slots.counters
        self._gauge_slots = slots.gauges
        self._heartbeat_slot = slots.heartbeat

    def _unknown(self, key: str, kind: str) -> KeyError:
        shared = self._shared
        if kind == "histogram":
            return KeyError(
                f"unknown histogram {key!r} for SharedCounters; declared "
                f"histograms: {list(shared.histogram_names)}."
            )
        valid = shared.counters if kind == "counter" else shared.gauges
        other = shared.gauges if kind == "counter" else shared.counters
        hint = ""
        if key in other:
            method = "set()" if kind == "counter" else "inc()"
            hint = f" {key!r} is a {'gauge' if kind == 'counter' else 'counter'}: use {method}."
        return KeyError(
            f"unknown {kind} {key!r} for SharedCounters; valid {kind}s: "
            f"{list(valid)}.{hint}"
        )

    def _negative(self, key: str, value: object) -> ValueError:
        return ValueError(
            f"WorkerCounters.inc({key!r}, {value!r}): a counter only goes up; for "
            "a value that goes down, declare a gauge and set() it."
        )

    def _nonfinite(self, key: str, value: object) -> ValueError:
        return ValueError(
            f"WorkerCounters.inc({key!r}, {value!r}): the counter would be NaN or "
            "infinite for good; it keeps its count. Increment by finite numbers."
        )

    def _failure(self, method: str, key: str | None, value: object) -> Exception:
        if self._shared.closed:
            return ValueError(
                f"WorkerCounters.{method}(): the SharedCounters was closed in this "
                "process; keep it open while workers write."
            )
        return TypeError(
            f"WorkerCounters.{method}({key!r}, {value!r}): the value must be a real number."
        )


class _PythonWorkerCounters(WorkerCounters):
    # The writer in pure Python: WorkerCounters' own methods.
    __slots__ = (
        "_counter_slots",
        "_gauge_slots",
        "_heartbeat_slot",
        "_histogram_slots",
        "_histogram_view",
        "_index",
        "_shared",
        "_view",
    )


def _writer_class() -> type[WorkerCounters]:
    # The compiled writer unless it was not built or RLPULSE_PURE_PYTHON is set.
    if os.environ.get("RLPULSE_PURE_PYTHON", "") not in ("", "0"):
        return _PythonWorkerCounters
    try:
        from rlpulse._counters import Writer
    except ImportError:  # built without a C compiler
        return _PythonWorkerCounters

    class _CompiledWorkerCounters(Writer, WorkerCounters):
        # Writer's inc, set, heartbeat and _bind come first in the method
        # order; everything else is WorkerCounters'.
        __slots__ = ("_histogram_slots", "_histogram_view", "_index", "_shared")
        compiled = True

    _CompiledWorkerCounters.__qualname__ = "_CompiledWorkerCounters"
    return _CompiledWorkerCounters


_WRITER = _writer_class()


def _names(keys: Iterable[str], argument: str) -> tuple[str, ...]:
    if isinstance(keys, str):
        raise TypeError(
            f"SharedCounters({argument}={keys!r}): pass a sequence of names, "
            f"e.g. {argument}=({keys!r},)."
        )
    names = tuple(keys)
    for name in names:
        if not isinstance(name, str) or not name:
            raise TypeError(
                f"SharedCounters({argument}=...): every name must be a non-empty "
                f"string, got {name!r}."
            )
        if name in _RESERVED or name.startswith("worker_"):
            raise ValueError(
                f"SharedCounters({argument}=...): {name!r} is reserved for the "
                "per-worker, worker count and liveness entries of stats(); "
                "choose another name."
            )
    if len(set(names)) != len(names):
        raise ValueError(f"SharedCounters({argument}={names!r}): names must be unique.")
    return names


def _layout_of(
    workers: int,
    counters: Iterable[str],
    gauges: Iterable[str],
    histograms: Iterable[str],
    liveness: float,
) -> _Layout:
    # SharedCounters' arguments checked, as the layout of its segment.
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(
            f"SharedCounters(workers={workers!r}): workers must be an int >= 1, "
            "the number of worker processes that will write."
        )
    counter_names = _names(counters, "counters")
    gauge_names = _names(gauges, "gauges")
    histogram_names = _names(histograms, "histograms")
    duplicated = sorted(set(counter_names) & set(gauge_names))
    if duplicated:
        raise ValueError(
            f"SharedCounters: {duplicated} listed as both counters and gauges; "
            "give each key one kind."
        )
    _check_histogram_names(histogram_names, counter_names + gauge_names)
    if isinstance(liveness, bool) or not isinstance(liveness, (int, float)):
        raise TypeError(
            f"SharedCounters(liveness={liveness!r}) must be a number of seconds."
        )
    if not liveness > 0:
        raise ValueError(
            f"SharedCounters(liveness={liveness!r}) must be strictly positive: "
            "it is how many seconds a worker stays alive after its last heartbeat."
        )
    return _Layout(workers, counter_names, gauge_names, histogram_names)


def _check_histogram_names(
    histograms: tuple[str, ...], others: tuple[str, ...]
) -> None:
    # A histogram's entries are its name with _count and _sum: none may be
    # another key's.
    taken = set(others)
    for key in histograms:
        clash = sorted(taken & {key, f"{key}_count", f"{key}_sum"})
        if clash:
            raise ValueError(
                f"SharedCounters(histograms=...): {key!r} would write the entries "
                f"{clash}, already counters or gauges; give the histogram another name."
            )


_SEGMENT_PREFIX = "rlpulse_"
_SEGMENT_DIRECTORY = Path("/dev/shm")


def remove_leaked_segments() -> list[str]:
    """Remove the segments of ``SharedCounters`` whose creating process is gone; return their names.

    A creator unlinks its segment when it closes or exits, and Python's
    resource tracker when the creator is killed; a creator killed with its
    tracker (``kill -9`` of the whole process group, an out-of-memory
    kill) leaves the segment in ``/dev/shm``. Creating a ``SharedCounters``
    removes such segments already; call this to remove them without
    creating one. Only segments of this pid namespace are considered, and a
    process that cannot be signalled counts as alive. On systems without
    ``/dev/shm`` (macOS, Windows) it does nothing and returns ``[]``.

    Examples:
        >>> counters = SharedCounters(1)
        >>> counters.name in remove_leaked_segments()  # its creator is alive
        False
        >>> counters.close()
    """
    namespace = _pid_namespace()
    if namespace is None:
        return []
    removed = []
    try:
        names = os.listdir(_SEGMENT_DIRECTORY)
    except OSError:
        return []
    for name in names:
        creator = _creator_of(name, namespace)
        if creator is None or _is_running(creator):
            continue
        try:
            os.unlink(_SEGMENT_DIRECTORY / name)
        except OSError:  # removed meanwhile, or another user's
            continue
        removed.append(name)
    return removed


def _create_segment(size: int) -> shared_memory.SharedMemory:
    namespace = _pid_namespace()
    if namespace is None:
        # No way to list segments here: the standard library's names.
        return shared_memory.SharedMemory(create=True, size=size)
    remove_leaked_segments()
    while True:
        name = f"{_SEGMENT_PREFIX}{namespace}_{os.getpid()}_{secrets.token_hex(4)}"
        try:
            return shared_memory.SharedMemory(name=name, create=True, size=size)
        except FileExistsError:  # pragma: no cover - 32 random bits taken
            continue


def _pid_namespace() -> int | None:
    # Several containers may share /dev/shm, each with its own pids: a
    # segment is judged only by processes of its own pid namespace.
    if not _SEGMENT_DIRECTORY.is_dir():
        return None
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


def _creator_of(name: str, namespace: int) -> int | None:
    """The pid that created segment ``name``, if rlpulse named it in ``namespace``.

    >>> _creator_of("rlpulse_4026531836_1234_0badcafe", 4026531836)
    1234
    >>> _creator_of("rlpulse_99_1234_0badcafe", 4026531836) is None
    True
    >>> _creator_of("psm_0badcafe", 4026531836) is None
    True
    """
    parts = name.removeprefix(_SEGMENT_PREFIX).split("_")
    if not name.startswith(_SEGMENT_PREFIX) or len(parts) != 3:
        return None
    if parts[0] != str(namespace) or not parts[1].isdigit():
        return None
    return int(parts[1])


def _sum_of_known(values: Sequence[float]) -> float:
    """The sum of the workers' ``values`` that are known: a gauge one worker set to NaN leaves it out, not the sum; NaN where none is.

    >>> _sum_of_known([1.0, math.nan, 2.0]), _sum_of_known([math.nan])
    (3.0, nan)
    """
    known = [value for value in values if value == value]
    return sum(known) if known else math.nan


def _is_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's, say: not ours to judge
        return True
    return True


def _attach(name: str) -> shared_memory.SharedMemory:
    if sys.version_info >= (3, 13):
        return shared_memory.SharedMemory(name=name, track=False)
    # Before 3.13 attaching registers the segment with this process's
    # resource tracker, which unlinks what it holds when the process dies
    # without closing it (killed, crashed): a process with a tracker of its
    # own (a Ray actor, one started by subprocess, one that made a segment
    # or a lock of its own first) would take the segment from every other
    # process. As 3.13's track=False: the registration of this segment alone
    # is left out, the creator's own staying the only clean-up (a process
    # multiprocessing started shares its parent's tracker, where it was a
    # no-op anyway).
    register = resource_tracker.register
    segment = name.lstrip("/")

    def register_others(name: Sized, rtype: str) -> None:
        if rtype != "shared_memory" or str(name).lstrip("/") != segment:
            register(name, rtype)

    with _ATTACHING:
        resource_tracker.register = register_others
        try:
            return shared_memory.SharedMemory(name=name)
        finally:
            resource_tracker.register = register


# One attach at a time swaps resource_tracker.register (before Python 3.13).
_ATTACHING = threading.Lock()


def _release(
    memory: shared_memory.SharedMemory, view: memoryview[float], unlink_in: int | None
) -> None:
    # The cast view must be released before the mapping can close. A child
    # made by fork inherits the creator's object, and with it this
    # finalizer, but must not unlink the segment its parent still uses.
    view.release()
    memory.close()
    if unlink_in == os.getpid():
        # Gone already where something else removed it (a worker's
        # resource tracker of an earlier version, by hand): nothing to
        # unlink, and nothing for this process's tracker to clean up.
        try:
            memory.unlink()
        except FileNotFoundError:
            if sys.version_info < (3, 13):
                resource_tracker.unregister(memory._name, "shared_memory")  # type: ignore[attr-defined]
