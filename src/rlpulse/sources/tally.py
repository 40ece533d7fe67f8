"""A push-side accumulator for values only the hot path sees.

Pull-based monitoring reads what objects already know about themselves; an
episode's return, a loss or a batch's latency exists only for a moment in
the training loop. :class:`Tally` keeps such values where a monitor can pull
them: the loop writes (``inc``, ``set``, ``observe``), each call O(1); any
number of readers call ``stats()``.
"""

from __future__ import annotations

import functools
import inspect
import operator
import threading
from collections import deque
from collections.abc import (
    AsyncGenerator,
    Awaitable,
    Callable,
    Collection,
    Generator,
    Iterable,
    Iterator,
)
from time import perf_counter
from types import TracebackType
from typing import Any, ParamSpec, SupportsFloat, TypeVar, cast, overload

from rlpulse.distributions import Histogram
from rlpulse.naming import Kind

__all__ = ["Tally"]

_OBSERVED_SUFFIXES = (
    "_count",
    "_sum",
    "_mean",
    "_min",
    "_max",
    "_last",
    "_nonfinite",
)

_NOT_STARTED = float("nan")
# The enclosing starts of a timer never entered twice: always empty.
_NONE_OUTER: list[float] = []

_P = ParamSpec("_P")
_R = TypeVar("_R")
_T = TypeVar("_T")


# How many observations of one key may wait for a reader before the writer
# files them itself: what a tally no monitor reads holds at most.
_FILE_AT = 1024


class _Window:
    """The observations of one key: handed over by the writer, filed by whoever reads.

    ``observe()`` only appends the value to :attr:`pending` (a
    ``collections.deque``, whose ``append`` and ``popleft`` are atomic); a
    reader files what is pending, under :attr:`lock`, into the ring of the
    most recent values, the cumulative histogram (which keeps the sum too)
    and the count of non-finite values. The histogram's bucketing, the
    costliest step, runs on the reader's thread, not the training loop's.
    """

    __slots__ = ("count", "histogram", "lock", "nonfinite", "pending", "values")

    def __init__(self, size: int) -> None:
        self.pending: deque[float] = deque()
        self.lock = threading.Lock()
        # A ring of the most recent ``size`` finite observations: the first
        # ``count`` slots until it is full.
        self.values = [0.0] * size
        self.count = 0
        self.histogram = Histogram()
        # Observations that were NaN or infinite, kept out of the rest.
        self.nonfinite = 0

    def hand_over_done(self) -> None:
        """Called by the writer when :attr:`pending` is long: file it now, unless a reader is filing it."""
        if self.lock.acquire(blocking=False):
            try:
                # Readers wait for the lock, and the writer is here: nobody
                # else touches pending, which can be replaced whole.
                taken, self.pending = self.pending, deque()
                self._file(taken)
            finally:
                self.lock.release()

    def file(self) -> None:
        """Move every pending observation into the ring, the histogram or the non-finite count (a reader, holding :attr:`lock`)."""
        pending = self.pending
        # popleft is atomic against the writer's append: exactly the values
        # counted here are taken, whatever is appended meanwhile.
        self._file([pending.popleft() for _ in range(len(pending))])

    def _file(self, taken: Collection[float]) -> None:
        finite = list(taken)
        total = sum(finite)
        if total - total != 0.0:  # a NaN or an infinity among them, or overflow
            finite = [number for number in finite if number - number == 0.0]
            self.nonfinite += len(taken) - len(finite)
        if not finite:
            return
        self.histogram.add_all(finite)
        # Only the most recent len(values) observations reach the ring.
        values = self.values
        size = len(values)
        slot = self.count + len(finite) - min(len(finite), size)
        for number in finite[-size:]:
            values[slot % size] = number
            slot += 1
        self.count += len(finite)


class Tally:
    """A cheap accumulator of counters, gauges and windowed observations, pulled by ``stats()``.

    Use it for values a monitor cannot pull from an object because only the
    training loop sees them: episode returns, losses, latencies. The loop
    writes; a :class:`~rlpulse.LoggerMonitor` watching the tally reads.

    - ``inc(key, n=1)`` adds ``n`` to the cumulative counter ``key``;
    - ``set(key, value)`` sets the gauge ``key`` to its latest value;
    - ``observe(key, value)`` records one observation of ``key``.

    ``stats()`` returns every counter and gauge under its own name and, for
    each observed key, ``<key>_count`` (observations ever recorded),
    ``<key>_sum`` (their sum) and ``<key>_mean``, ``<key>_min``,
    ``<key>_max`` and ``<key>_last`` over the most recent ``window``
    observations. An observation that is NaN or infinite (a diverged loss)
    stays out of them: it is counted in ``<key>_nonfinite``, present once
    there is one, which a monitor logs (it drops non-finite values
    themselves).

    Every observation also goes into a cumulative histogram of its key
    (:meth:`histograms`, within 0.55 %): a :class:`~rlpulse.LoggerMonitor`
    watching the tally logs ``<key>_p50``, ``<key>_p90`` and ``<key>_p99``
    over the observations since its previous logged snapshot (others with
    ``watch(..., quantiles=...)``); each watch of the tally, in one monitor
    or several, has intervals of its own. :meth:`time` observes how long a
    block or a function takes.

    One thread may write while any number of threads read: every writer call
    is O(1) and touches only memory the readers copy atomically. ``observe``
    only hands the value over; a reader files it into the window and the
    histogram, so the bucketing and the window's mean, minimum and maximum
    cost the monitor's thread, not the loop's (a tally nobody reads files
    its own values every 1,024 observations of a key). Values are
    converted with ``float()`` when written, so a tensor is read (a CUDA
    tensor synchronises its device) and never kept alive by the tally.

    A name belongs to one kind: using a counter's name as a gauge, or a name
    an observed key produces (``loss_mean`` once ``loss`` is observed), raises
    ``ValueError``.

    Args:
        window: how many of the most recent observations of each key the
            ``_mean``, ``_min``, ``_max`` and ``_last`` entries cover
            (default ``100``).

    Examples:
        >>> tally = Tally(window=3)
        >>> tally.inc("updates")
        >>> tally.set("learning_rate", 0.001)
        >>> for episode_return in (10.0, 20.0, 30.0, 40.0):
        ...     tally.observe("episode_return", episode_return)
        >>> stats = tally.stats()
        >>> stats["updates"], stats["learning_rate"]
        (1, 0.001)
        >>> stats["episode_return_count"], stats["episode_return_mean"]
        (4, 30.0)
        >>> stats["episode_return_min"], stats["episode_return_max"], stats["episode_return_last"]
        (20.0, 40.0, 40.0)
    """

    def __init__(self, window: int = 100) -> None:
        if isinstance(window, bool) or not isinstance(window, int):
            raise TypeError(
                f"Tally(window=...) must be an int, got {type(window).__name__}; "
                "pass how many recent observations each key keeps, e.g. window=100."
            )
        if window < 1:
            raise ValueError(
                f"Tally(window={window}) must be at least 1: it is how many "
                "recent observations each key keeps."
            )
        self._window = window
        self._counters: dict[str, float] = {}
        # Per counter, the increments left out as NaN or infinite.
        self._nonfinite: dict[str, int] = {}
        self._gauges: dict[str, float] = {}
        self._windows: dict[str, _Window] = {}
        # Which kind owns every name that stats() can return, so that two
        # kinds never silently write the same entry.
        self._owners: dict[str, str] = {}
        # Per counter of busy() and waiting(), what adds its blocks' seconds,
        # with when each block or wait under way began: stats() counts them
        # before they end, so that one longer than a reader's interval shows
        # in every interval it spans.
        self._under_way: dict[str, _Seconds] = {}
        self._under_way_lock = threading.Lock()

    @property
    def window(self) -> int:
        """How many recent observations of each key the windowed entries cover.

        Examples:
            >>> Tally(window=10).window
            10
        """
        return self._window

    def inc(self, key: str, n: float = 1) -> None:
        """Add ``n`` (default 1) to the cumulative counter ``key``, created at 0 on first use.

        ``n`` is an ``int`` or a ``float``, or a number of another type
        taken as one: a NumPy scalar, a tensor of one element
        (``done.sum()``), read once here, so that the counter holds no
        tensor (nor the graph behind it). An increment that would make the counter NaN or infinite is left
        out, as ``observe()`` leaves such values out, and counted in
        ``<key>_nonfinite``: the counter keeps its count. A negative ``n``
        (``-inf`` too) raises ``ValueError``: a counter only goes up (its rates and a
        Prometheus counter read a fall as a restart); a value that goes
        down is a gauge, kept with :meth:`set`.

        Examples:
            >>> tally = Tally()
            >>> tally.inc("frames")
            >>> tally.inc("frames", 200)
            >>> tally.inc("frames", float("nan"))
            >>> tally.stats()
            {'frames': 201, 'frames_nonfinite': 1}
        """
        if type(n) is not int and type(n) is not float:
            n = _increment_of(key, n)
        counters = self._counters
        try:
            if n < 0:
                raise _negative_increment(key, n)
            total = counters[key] + n
        except KeyError:
            try:
                total = 0 + n
            except TypeError:
                raise _bad_increment(key, n) from None
            self._claim(key, "counter", ("", "_nonfinite"))
            counters[key] = 0
        except TypeError:
            raise _bad_increment(key, n) from None
        if total - total == 0.0:  # neither NaN nor ±inf
            counters[key] = total
        else:
            self._nonfinite[key] = self._nonfinite.get(key, 0) + 1

    def set(self, key: str, value: SupportsFloat) -> None:
        """Set the gauge ``key`` to ``value``, a number (converted with ``float()``; a tensor or a NumPy scalar read with ``item()``; text is refused).

        Examples:
            >>> tally = Tally()
            >>> tally.set("queue_depth", 3)
            >>> tally.set("queue_depth", 5)
            >>> tally.stats()
            {'queue_depth': 5.0}
        """
        number = _as_float(value, "set", key)
        gauges = self._gauges
        if key not in gauges:
            self._claim(key, "gauge", ("",))
        gauges[key] = number

    def observe(self, key: str, value: SupportsFloat) -> None:
        """Record one observation ``value`` of ``key``, a number (converted with ``float()``; a tensor or a NumPy scalar read with ``item()``, so that a loss that requires grad is read without a warning; text is refused).

        Examples:
            >>> tally = Tally()
            >>> tally.observe("loss", 0.5)
            >>> tally.observe("loss", 0.25)
            >>> tally.stats()["loss_mean"], tally.stats()["loss_last"]
            (0.375, 0.25)
        """
        # The hot path of the training loop: the value is handed over, and
        # filed by the reader (_Window).
        number = value if type(value) is float else _as_float(value, "observe", key)
        try:
            window = self._windows[key]
        except KeyError:
            self._claim(key, "observed key", _OBSERVED_SUFFIXES)
            window = self._windows.setdefault(key, _Window(self._window))
        pending = window.pending
        pending.append(number)
        if len(pending) >= _FILE_AT:  # no reader lately
            window.hand_over_done()

    def stats(self) -> dict[str, float]:
        """Return the counters, the gauges and each observed key's count and window summary.

        Safe to call from any thread while one thread writes; what it
        returns does not depend on when it was last called. Costs O(window)
        per observed key, plus filing the observations made since the last
        read.

        Examples:
            >>> tally = Tally()
            >>> tally.stats()
            {}
            >>> tally.observe("latency_s", 0.02)
            >>> tally.stats()
            {'latency_s_count': 1, 'latency_s_sum': 0.02, 'latency_s_mean': 0.02, 'latency_s_min': 0.02, 'latency_s_max': 0.02, 'latency_s_last': 0.02}
        """
        # dict.copy() and list slicing copy in one step that a writer
        # thread cannot interleave with; iterating the live containers
        # could see them change size.
        snapshot: dict[str, float] = self._counters.copy()
        if self._under_way:
            self._add_seconds_under_way(snapshot)
        for key, count in self._nonfinite.copy().items():
            snapshot[key + "_nonfinite"] = count
        snapshot.update(self._gauges.copy())
        for key, window in self._windows.copy().items():
            with window.lock:
                window.file()
                count, nonfinite = window.count, window.nonfinite
                total = window.histogram.sum
                values = window.values[:count]
            snapshot[key + "_count"] = count
            snapshot[key + "_sum"] = total
            if nonfinite:
                snapshot[key + "_nonfinite"] = nonfinite
            if not values:
                continue  # only non-finite observations so far
            snapshot[key + "_mean"] = sum(values) / len(values)
            snapshot[key + "_min"] = min(values)
            snapshot[key + "_max"] = max(values)
            snapshot[key + "_last"] = values[(count - 1) % self._window]
        return snapshot

    def _add_seconds_under_way(self, snapshot: dict[str, float]) -> None:
        """Count in ``snapshot`` the seconds so far of each block of :meth:`busy` and wait of :meth:`waiting` under way."""
        # Under the lock a block is either under way or recorded, never both
        # nor neither: each counter only grows from one read to the next.
        with self._under_way_lock:
            now = perf_counter()
            for key, seconds in self._under_way.copy().items():
                # A start after ``now`` (the writer ran between the two
                # reads) has nothing to add yet.
                snapshot[key] = self._counters[key] + sum(
                    now - start
                    for start in seconds.starts.copy().values()
                    if start < now
                )

    def metric_kinds(self) -> dict[str, Kind]:
        """The counters among the entries of :meth:`stats`: what ``inc()`` counts, and each observed key's count and sum.

        A monitor watching the tally stores and exports these as counters;
        every other entry is a gauge.

        Examples:
            >>> tally = Tally()
            >>> tally.inc("episodes")
            >>> tally.set("epsilon", 0.1)
            >>> tally.observe("loss", 0.5)
            >>> sorted(tally.metric_kinds())
            ['episodes', 'loss_count', 'loss_sum']
        """
        kinds = dict.fromkeys(self._counters.copy(), Kind.COUNTER)
        for key in self._nonfinite.copy():
            kinds[key + "_nonfinite"] = Kind.COUNTER
        for key, window in self._windows.copy().items():
            kinds[key + "_count"] = kinds[key + "_sum"] = Kind.COUNTER
            with window.lock:
                window.file()
            if window.nonfinite:
                kinds[key + "_nonfinite"] = Kind.COUNTER
        return kinds

    def histograms(self) -> dict[str, Histogram]:
        """Return a copy of each observed key's cumulative histogram (:class:`rlpulse.distributions.Histogram`).

        What a monitor reads to log quantiles; copies, so that a reader can
        keep one and later take the difference. Keys with only non-finite
        observations have an empty histogram.

        Examples:
            >>> tally = Tally()
            >>> for latency_s in (0.010, 0.012, 0.011, 0.250):
            ...     tally.observe("latency_s", latency_s)
            >>> histogram = tally.histograms()["latency_s"]
            >>> histogram.count, round(histogram.quantile(0.5), 3), round(histogram.quantile(1), 2)
            (4, 0.011, 0.25)
        """
        copies = {}
        for key, window in self._windows.copy().items():
            with window.lock:
                window.file()
                copies[key] = window.histogram.copy()
        return copies

    def time(self, key: str) -> _Timer:
        """Observe under ``key`` the seconds a block or a function takes (``time.perf_counter``).

        A context manager and a decorator; the time is observed also when
        the block or the call raises. A decorated ``async def`` is timed to
        the end of its await, a generator function (``def`` with ``yield``,
        or ``async def``) from its first item to its last, or to its
        ``close()``. The key is the tally's from this call on
        (``<key>_count`` is 0 until the first block ends); ``TypeError`` or
        ``ValueError`` at once for a key :meth:`observe` would refuse.

        Examples:
            >>> tally = Tally()
            >>> with tally.time("update_s"):
            ...     pass
            >>> @tally.time("sample_s")
            ... def sample():
            ...     return 7
            >>> sample(), sample()
            (7, 7)
            >>> tally.stats()["update_s_count"], tally.stats()["sample_s_count"]
            (1, 2)
        """
        try:
            return _Timer(self._windows[key])
        except KeyError:
            self._claim(key, "observed key", _OBSERVED_SUFFIXES)
            return _Timer(self._windows.setdefault(key, _Window(self._window)))

    def busy(self, key: str = "busy_s") -> _Busy:
        """Add to the counter ``key`` (default ``busy_s``) the seconds a block or a function takes: the time this side works.

        A context manager and a decorator, as :meth:`time` is; the counter
        exists, at 0, from this call. A block under way counts in
        :meth:`stats` before it ends, so that one longer than a monitor's
        window (a collector inside a slow batch) shows in every window it
        spans; blocks on several threads add up, and a block within another
        on the same thread (a decorated update called inside ``with
        busy():``) counts its seconds once, and so does one that ends on
        another thread than it began on (a decorated generator iterated by
        two threads, a handle a worker exits). With :meth:`waiting`, the stage
        timing a bottleneck verdict reads
        (:meth:`rlpulse.LoggerMonitor.bottleneck`).

        Examples:
            >>> tally = Tally()
            >>> with tally.busy():
            ...     pass
            >>> tally.stats()["busy_s"] >= 0, tally.metric_kinds()["busy_s"]
            (True, <Kind.COUNTER: 'counter'>)
        """
        return _Busy(self._seconds(key))

    @overload
    def waiting(self, iterable: None = None, key: str = "wait_s") -> _Busy: ...

    @overload
    def waiting(self, iterable: Iterable[_T], key: str = "wait_s") -> Iterator[_T]: ...

    def waiting(
        self, iterable: Iterable[_T] | None = None, key: str = "wait_s"
    ) -> Iterator[_T] | _Busy:
        """Iterate ``iterable``, adding to the counter ``key`` (default ``wait_s``) the seconds each next item takes to come: the time this side waits; without one, a block's seconds.

        Wraps any iterable or iterator (a collector, a data loader, a
        queue's iterator) without changing what it yields; without an
        iterable, a context manager and a decorator, as :meth:`busy` is, for
        a wait that is no iteration (``queue.get()``, a loop until a buffer
        holds a batch). The counter exists, at 0, from this call. A wait
        under way counts in :meth:`stats` before it ends, so that a wait
        longer than a monitor's window (a learner waiting for its first
        batches) shows in every window it spans.

        Examples:
            >>> tally = Tally()
            >>> for batch in tally.waiting(range(3)):
            ...     with tally.busy():
            ...         pass
            >>> sorted(tally.stats())
            ['busy_s', 'wait_s']
            >>> import queue
            >>> batches = queue.Queue()
            >>> batches.put("batch")
            >>> with tally.waiting():  # until the next batch comes
            ...     batch = batches.get()
            >>> tally.stats()["wait_s"] >= 0
            True
        """
        if iterable is None:
            return _Busy(self._seconds(key))
        if isinstance(iterable, str):
            raise TypeError(
                f"waiting({iterable!r}) would wait for each character of a "
                f"string; name the counter as key= (waiting(key={iterable!r}) "
                "times a block), and give an iterable to wait for its items"
            )
        return _waited(iter(iterable), self._seconds(key))

    def _seconds(self, key: str) -> _Seconds:
        """What adds the seconds of blocks to the counter ``key`` (from 0 at its first call), counting those under way."""
        try:
            return self._under_way[key]
        except KeyError:
            # Under the lock a block ending on another thread cannot add its
            # seconds between the counter's creation at 0 and its use.
            with self._under_way_lock:
                if key not in self._counters:
                    self.inc(key, 0)
                return self._under_way.setdefault(
                    key, _Seconds(key, self.inc, self._under_way_lock)
                )

    def __repr__(self) -> str:
        return (
            f"Tally(window={self._window}, counters={len(self._counters)}, "
            f"gauges={len(self._gauges)}, observed={len(self._windows)})"
        )

    def _claim(self, key: str, kind: str, suffixes: tuple[str, ...]) -> None:
        claimant = f"the {kind} {key!r}"
        self._check_claim(key, kind, suffixes, claimant)
        for suffix in suffixes:
            self._owners[key + suffix] = claimant

    def _check_claim(
        self, key: str, kind: str, suffixes: tuple[str, ...], claimant: str
    ) -> None:
        if not isinstance(key, str) or not key:
            raise TypeError(
                f"Tally keys must be non-empty strings, got {key!r}; name the "
                "value, e.g. tally.observe('episode_return', ...)."
            )
        names = [key + suffix for suffix in suffixes]
        for name in names:
            owner = self._owners.get(name)
            # The same claim again: threads first using one key at once.
            if owner is not None and owner != claimant:
                raise ValueError(
                    f"Tally key {key!r} cannot be used as a {kind}: the entry "
                    f"{name!r} already belongs to {owner}; give the {kind} "
                    "another name."
                )


def _waited(iterator: Iterator[_T], seconds: _Seconds) -> Iterator[_T]:
    """``iterator``'s items, adding to ``seconds`` the time each one takes to come (and the end)."""
    while True:
        thread = seconds.begin()
        try:
            item = next(iterator)
        except StopIteration:
            return
        finally:
            seconds.end(thread)
        yield item


class _Seconds:
    """Adds to a tally's counter the seconds each thread spends in blocks of one key, keeping when each thread's block under way began.

    A thread is busy (or waits) once at a time: a block it enters inside
    another of the same key (a decorated function called within ``with
    busy():``, or tasks of one event loop) adds nothing of its own, the
    thread's seconds running from its outermost block's start to the end of
    its last. A block is its starting thread's, wherever it ends: one
    handed to another thread (a generator iterated there, a handle a
    worker exits) ends on that thread as the last of its starting
    thread's. ``starts`` holds, by thread, when its block under way began
    (several threads may be inside blocks of one key); ``lock`` makes
    beginning and ending blocks, and adding their seconds, one step for
    :meth:`Tally.stats` and for a thread ending another's block.
    """

    __slots__ = ("_depths", "_inc", "_key", "_lock", "starts")

    def __init__(
        self, key: str, inc: Callable[[str, float], None], lock: threading.Lock
    ) -> None:
        self._key = key
        self._inc = inc
        self._lock = lock
        self.starts: dict[int, float] = {}
        # How many blocks each thread is inside.
        self._depths: dict[int, int] = {}

    def begin(self) -> int:
        """Start a block on this thread now (within one under way: nothing); return the thread, which :meth:`end` takes."""
        thread = threading.get_ident()
        with self._lock:
            depth = self._depths.get(thread, 0)
            self._depths[thread] = depth + 1
            if not depth:
                self.starts[thread] = perf_counter()
        return thread

    def end(self, thread: int) -> None:
        """End the innermost block ``thread`` began, on whichever thread: the last adds that thread's seconds to the counter."""
        with self._lock:
            depth = self._depths.get(thread, 0) - 1
            if depth > 0:
                self._depths[thread] = depth
                return
            if depth < 0:
                return  # none begun on that thread
            del self._depths[thread]
            self._inc(self._key, perf_counter() - self.starts.pop(thread))


class _Timer:
    """Records the seconds a ``with`` block or each call of a decorated function takes."""

    __slots__ = ("_outer", "_start", "_window")

    def __init__(self, window: _Window) -> None:
        self._window = window
        # NaN while not entered; the starts of enclosing entries of this
        # same timer wait in _outer, made when first needed.
        self._start = _NOT_STARTED
        self._outer = _NONE_OUTER

    def __enter__(self) -> _Timer:
        start = self._start
        if start == start:  # entered again before it exits
            if self._outer is _NONE_OUTER:
                self._outer = []
            self._outer.append(start)
        self._start = perf_counter()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        elapsed = perf_counter() - self._start
        self._start = self._outer.pop() if self._outer else _NOT_STARTED
        window = self._window
        # Window.hand_over, inline: this is the training loop's hot path.
        pending = window.pending
        pending.append(elapsed)
        if len(pending) >= _FILE_AT:
            window.hand_over_done()

    def _fresh(self) -> _Timer:
        """A timer like this one, not entered."""
        return _Timer(self._window)

    def __call__(self, function: Callable[_P, _R]) -> Callable[_P, _R]:
        return _timed(function, self._fresh)


class _Busy:
    """Adds to a counter the seconds a ``with`` block or each call of a decorated function takes, counting those under way."""

    __slots__ = ("_seconds", "_threads")

    def __init__(self, seconds: _Seconds) -> None:
        self._seconds = seconds
        # The thread each block under way of this handle began on: exited
        # on a thread that began none of them, the latest is ended there.
        self._threads: list[int] = []

    def __enter__(self) -> _Busy:
        self._threads.append(self._seconds.begin())
        return self

    def __exit__(self, *exc_info: object) -> None:
        threads = self._threads
        thread = threading.get_ident()
        if thread in threads:
            threads.remove(thread)
        elif threads:
            thread = threads.pop()
        else:
            return  # exited more often than entered
        self._seconds.end(thread)

    def _fresh(self) -> _Busy:
        return _Busy(self._seconds)

    def __call__(self, function: Callable[_P, _R]) -> Callable[_P, _R]:
        return _timed(function, self._fresh)


_Fresh = Callable[[], "_Timer | _Busy"]


def _timed(function: Callable[_P, _R], fresh: _Fresh) -> Callable[_P, _R]:
    """``function``, each call timed by a timer of its own from ``fresh``."""
    # Called, a coroutine or generator function returns at once: what
    # takes the time is awaiting or iterating what it returned.
    if inspect.iscoroutinefunction(function):
        return cast("Callable[_P, _R]", _timed_coroutine(function, fresh))
    if inspect.isasyncgenfunction(function):
        return cast("Callable[_P, _R]", _timed_async_generator(function, fresh))
    if inspect.isgeneratorfunction(function):
        return cast("Callable[_P, _R]", _timed_generator(function, fresh))

    @functools.wraps(function)
    def timed(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        # A timer per call: calls on several threads, or recursive ones,
        # each time themselves.
        with fresh():
            return function(*args, **kwargs)

    return timed


def _timed_coroutine(
    function: Callable[..., Awaitable[Any]], fresh: _Fresh
) -> Callable[..., Awaitable[Any]]:
    """``function``, each call timed from its start to the end of its await."""

    @functools.wraps(function)
    async def timed(*args: Any, **kwargs: Any) -> Any:
        with fresh():
            return await function(*args, **kwargs)

    return timed


def _timed_generator(
    function: Callable[..., Generator[Any, Any, Any]], fresh: _Fresh
) -> Callable[..., Generator[Any, Any, Any]]:
    """``function``, each generator it returns timed from its first item to its end (or close)."""

    @functools.wraps(function)
    def timed(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        with fresh():
            return (yield from function(*args, **kwargs))

    return timed


def _timed_async_generator(
    function: Callable[..., AsyncGenerator[Any, Any]], fresh: _Fresh
) -> Callable[..., AsyncGenerator[Any, Any]]:
    """``function``, each asynchronous generator it returns timed from its first item to its end (or close)."""

    @functools.wraps(function)
    async def timed(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        with fresh():
            generator = function(*args, **kwargs)
            try:
                sent = None
                while True:
                    sent = yield await generator.asend(sent)
            except StopAsyncIteration:
                return
            finally:
                await generator.aclose()

    return timed


def _as_float(value: SupportsFloat, method: str, key: str) -> float:
    if isinstance(value, (str, bytes)):  # float() would read '1' as a number
        raise _not_a_number(method, key, value)
    item = getattr(value, "item", None)
    if callable(item):
        # A NumPy scalar, a tensor: item() reads no graph, where float() of a
        # loss that requires grad warns.
        try:
            value = item()
        except (TypeError, ValueError, RuntimeError):  # several elements
            raise _not_a_number(method, key, value) from None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise _not_a_number(method, key, value) from None


def _not_a_number(method: str, key: str, value: object) -> TypeError:
    return TypeError(
        f"Tally.{method}({key!r}, {value!r}): the value must be a real "
        "number (an int, a float, a NumPy number or a one-element tensor)."
    )


def _negative_increment(key: str, n: object) -> ValueError:
    return ValueError(
        f"Tally.inc({key!r}, n={n!r}): a counter only goes up; for a value "
        f"that goes down, use Tally.set({key!r}, value), a gauge."
    )


def _increment_of(key: str, n: object) -> float:
    # An increment of another type than int or float, as a Python number:
    # whole where it is (a NumPy integer, an integer tensor), else a float.
    if isinstance(n, int):  # a bool, an int subclass
        return int(n)
    if isinstance(n, (str, bytes)):  # float() would read '1' as a number
        raise _bad_increment(key, n)
    item = getattr(n, "item", None)
    if callable(item):  # a NumPy scalar, a tensor (item() reads no graph)
        try:
            n = item()
        except (TypeError, ValueError, RuntimeError):  # several elements
            raise _bad_increment(key, n) from None
        if type(n) is int or type(n) is float:
            return n
    try:
        return operator.index(n)  # type: ignore[arg-type]
    except TypeError:
        pass
    try:
        return float(n)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise _bad_increment(key, n) from None


def _bad_increment(key: str, n: object) -> TypeError:
    return TypeError(
        f"Tally.inc({key!r}, n={n!r}): n must be a number to add to the counter."
    )
