"""Events: what changed in a run's health, as it happens, for callbacks and sinks.

The monitor notices streaks start and end — a watch stalls and moves again,
a call hangs and returns, a sink fails and recovers, a queue drops — and
says so once per streak: a warning (see :mod:`~rlpulse.runtime.reporting`)
and an :class:`Event`. An :class:`EventBus` calls the monitor's
``on_event`` callbacks with each event on a thread of its own, started at
the first event, so that a callback that raises or hangs never delays a
poll; and hands each event to the sinks (``log_event``) the way payloads go
(:meth:`rlpulse.runtime.delivery.Delivery.deliver_event`).
"""

from __future__ import annotations

import contextlib
import enum
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

from rlpulse.runtime.threads import MonitorThread

__all__ = [
    "EVENT_KINDS",
    "STREAK_ENDS",
    "Event",
    "EventBus",
    "EventKind",
    "about_sink",
    "as_callbacks",
    "format_event",
    "sink_of",
]

_log = logging.getLogger("rlpulse")


class EventKind(str, enum.Enum):
    """What an :class:`Event` says: each kind, when it comes, what its value is, and whether it is good news.

    The one place an event kind is declared: the monitor emits these, the
    console colours a streak's start red and its end green
    (:attr:`good_news`), and docs/failure-behaviour.md's table lists every
    kind with its :attr:`when` and :attr:`about` (a test checks it does).

    Examples:
        >>> EventKind.STALLED == "stalled", EventKind("recovered").good_news
        (True, True)
        >>> EventKind.HUNG.about
        'the poll_timeout overrun'
    """

    when: str
    about: str
    good_news: bool

    def __new__(cls, value: str, when: str, about: str, good_news: bool) -> EventKind:
        kind = str.__new__(cls, value)
        kind._value_ = value
        kind.when = when
        kind.about = about
        kind.good_news = good_news
        return kind

    def __str__(self) -> str:
        return str(self.value)

    STALLED = (
        "stalled",
        "a watch with stall_after stops making progress",
        "the seconds without progress",
        False,
    )
    RECOVERED = (
        "recovered",
        "a stalled watch moves again",
        "the seconds it was stalled",
        True,
    )
    HUNG = (
        "hung",
        "a stats() call overruns poll_timeout",
        "the poll_timeout overrun",
        False,
    )
    RESUMED = ("resumed", "a hung stats() call returns", "0", True)
    POLL_FAILING = (
        "poll_failing",
        "a watch's stats() raises, or its snapshot is refused (the message says why)",
        "0",
        False,
    )
    POLL_RECOVERED = (
        "poll_recovered",
        "a failing watch is polled without an error again",
        "0",
        True,
    )
    SINK_FAILING = ("sink_failing", "a sink raises (the message names it)", "0", False)
    SINK_RECOVERED = ("sink_recovered", "a failing sink takes a call again", "0", True)
    DROPPING = (
        "dropping",
        "a sink's queue starts dropping payloads",
        "the payloads dropped",
        False,
    )
    WORKER_LOST = (
        "worker_lost",
        "a logged snapshot's workers_alive is lower than the last one's",
        "the workers still alive",
        False,
    )
    BOTTLENECK = (
        "bottleneck",
        "a pipeline's bottleneck verdict changes and holds for two windows",
        "the new verdict: -1 producer-bound, 0 balanced, +1 consumer-bound",
        False,
    )
    # No trouble: a sink that serves each watch's latest values (Prometheus)
    # stops serving that watch's.
    UNWATCHED = (
        "unwatched",
        "unwatch() removes a watch, after the ends of its open streaks",
        "0",
        True,
    )
    # Last of a run (or of each stretch of it, a monitor started again): a
    # reader tells a run that ended from one whose writer was killed.
    STOPPED = (
        "stopped",
        "the monitor stops (stop(), the end of its with block, the process's exit), after its final snapshots",
        "the payloads it logged",
        True,
    )


EVENT_KINDS = tuple(kind.value for kind in EventKind)
"""Every kind of event, each streak's start followed by its end where it has one."""

_GOOD_NEWS = frozenset(kind.value for kind in EventKind if kind.good_news)

STREAK_ENDS = {
    EventKind.STALLED: EventKind.RECOVERED,
    EventKind.HUNG: EventKind.RESUMED,
    EventKind.POLL_FAILING: EventKind.POLL_RECOVERED,
    EventKind.SINK_FAILING: EventKind.SINK_RECOVERED,
}
"""The kinds that start a streak, each with the kind that ends it; the other kinds are one-off."""

_STREAK_OF = {
    **{start: start for start in STREAK_ENDS},
    **{end: start for start, end in STREAK_ENDS.items()},
}

PENDING_EVENTS = 10_000
"""How many events wait for the callbacks before the oldest is dropped."""


class Event(NamedTuple):
    """A change in a run's health: when, which watch, what kind, in words, and a number.

    ``watch`` is the watch's name, or ``""`` for the monitor as a whole;
    ``kind`` one of :data:`EVENT_KINDS`; ``value`` the number the kind is
    about: the seconds without progress (``stalled``), the ``poll_timeout``
    overrun (``hung``), the payloads dropped (``dropping``), the workers
    still alive (``worker_lost``), the new verdict (``bottleneck``: -1
    producer-bound, 0 balanced, +1 consumer-bound), or ``0.0``.

    Examples:
        >>> event = Event(1700000000.0, "collector", "stalled", "no progress (frames) for 30.0s", 30.0)
        >>> event.kind, event.value
        ('stalled', 30.0)
    """

    wall_time: float
    watch: str
    kind: str
    message: str
    value: float


def about_sink(sink: str, what: str) -> str:
    """The message of an event about the sink named ``sink`` (of no watch): ``sink <sink> <what>``, which :func:`sink_of` reads back.

    Examples:
        >>> about_sink("SQLiteLogger", "writes again")
        'sink SQLiteLogger writes again'
    """
    return f"sink {sink} {what}"


def sink_of(event: Event) -> str | None:
    """The name of the sink ``event`` is about (its message from :func:`about_sink`); ``None`` for an event of a watch, or of no sink.

    Stored events keep no field for it: a reader tells one sink's streak
    from another's by this name.

    Examples:
        >>> sink_of(Event(1.0, "", "sink_recovered", "sink SQLiteLogger writes again", 0.0))
        'SQLiteLogger'
        >>> sink_of(Event(1.0, "collector", "stalled", "no progress (frames) for 30.0s", 30.0)) is None
        True
    """
    if event.watch:
        return None
    prefix, _, rest = event.message.partition(" ")
    name = rest.partition(" ")[0]
    return name if prefix == "sink" and name else None


def as_callbacks(on_event: Any) -> tuple[Callable[[Event], object], ...]:
    """The callbacks of ``LoggerMonitor(on_event=...)``: ``None``, a callable or a sequence of them.

    Examples:
        >>> as_callbacks(None), len(as_callbacks([print, print]))
        ((), 2)
        >>> as_callbacks("print")
        Traceback (most recent call last):
        ...
        TypeError: on_event takes a callable (called with each Event) or a list of them, got str 'print'.
    """
    if on_event is None:
        return ()
    callbacks = (
        tuple(on_event)
        if isinstance(on_event, Sequence) and not isinstance(on_event, str)
        else (on_event,)
    )
    for callback in callbacks:
        if not callable(callback):
            raise TypeError(
                "on_event takes a callable (called with each Event) or a list of "
                f"them, got {type(callback).__name__} {callback!r}."
            )
    return callbacks


class EventBus:
    """One monitor's events: to its sinks at once, to its callbacks on a thread of their own.

    ``to_sinks(event)`` hands an event to the sinks (on the thread that
    noticed it); the callbacks are called in order, one event at a time,
    on the ``rlpulse-events`` thread. A callback that raises is warned
    about once and keeps being called; one that hangs holds up only the
    callbacks, while up to :data:`PENDING_EVENTS` events wait.

    Each streak (:data:`STREAK_ENDS`) of a watch, or of another
    ``subject`` (a sink), is handed on as its start and then its end,
    never a start twice nor an end alone. From :meth:`close` (the
    monitor's ``stop()``) to :meth:`reopen` (its ``start()``) events go to
    neither the sinks nor the callbacks, and no thread starts; a streak
    that started or ended meanwhile is handed on at :meth:`reopen` (the
    last change noticed: a call left behind that returned while stopped),
    so that consumers that pair them (an alert on a stall) hear every
    streak end. But for those a ``step()`` after ``stop()`` notices on its
    own thread, and an ``unwatch()`` then (:meth:`inline`): they go with
    that step's payloads, the callbacks called on a thread that ends once
    it has called them.

    Examples:
        >>> seen = []
        >>> bus = EventBus((seen.append,), to_sinks=lambda event: None)
        >>> bus.emit("collector", EventKind.STALLED, "no progress", 30.0)
        >>> bus.close(time.monotonic() + 5)
        >>> [event.kind for event in seen]
        ['stalled']
    """

    def __init__(
        self,
        callbacks: tuple[Callable[[Event], object], ...],
        to_sinks: Callable[[Event], None],
    ) -> None:
        self._callbacks = callbacks
        self.to_sinks = to_sinks
        self.after_fork()

    def after_fork(self) -> None:
        """Forget the parent's thread and what it had yet to call back: a forked child starts afresh."""
        self._pending: deque[Event] = deque(maxlen=PENDING_EVENTS)
        self._wakeup = threading.Event()
        self._lock = threading.Lock()
        self._thread: MonitorThread | None = None
        self._closing = False
        self._closed = False
        self._warned: set[int] = set()
        # The start of each streak handed on and not yet ended, by (its
        # watch or subject, its starting kind).
        self._open: dict[tuple[object, EventKind], Event] = {}
        # Each streak's latest start or end noticed while closed.
        self._owed: dict[tuple[object, EventKind], Event] = {}
        # The threads in a step() or an unwatch() (inline), whose events
        # are handed on even while closed.
        self._inline: set[int] = set()

    @contextlib.contextmanager
    def inline(self) -> Iterator[None]:
        """While this thread is in a ``step()`` polling inline, or an ``unwatch()``: the events it notices are handed on at once, with the step's payloads, also after ``stop()``."""
        thread = threading.get_ident()
        entered = thread not in self._inline
        self._inline.add(thread)
        try:
            yield
        finally:
            if entered:
                self._inline.discard(thread)

    def reopen(self) -> None:
        """Hand on the events noticed from now on (the monitor starts again), and each streak that started or ended while closed."""
        with self._lock:
            self._closed = False
            owed, self._owed = self._owed, {}
            changed = [
                event for key, event in owed.items() if self._changes(key, event)
            ]
        for event in changed:
            self._hand_on(event)

    def open_streaks(self, watch: str) -> list[Event]:
        """The start of each streak of ``watch`` handed on and not ended; forget the changes noticed while closed (``unwatch()``)."""
        with self._lock:
            for key in [key for key in self._owed if key[0] == watch]:
                del self._owed[key]
            return [event for (of, _), event in self._open.items() if of == watch]

    def emit(
        self,
        watch: str,
        kind: EventKind,
        message: str,
        value: float = 0.0,
        *,
        subject: object = None,
    ) -> None:
        """Say that ``kind`` happened to ``watch`` (its streaks are ``subject``'s, if given): to the sinks now, to the callbacks soon."""
        event = Event(time.time(), watch, kind.value, message, float(value))
        start = _STREAK_OF.get(kind)
        handed = [event]
        with self._lock:
            held = self._closed and threading.get_ident() not in self._inline
            if start is not None:
                key = (watch if subject is None else subject, start)
                if held:
                    self._owed[key] = event
                    return
                # A change of that streak owed since stop() comes first.
                owed = self._owed.pop(key, None)
                handed = [
                    change
                    for change in (owed, event)
                    if change is not None and self._changes(key, change)
                ]
            elif held:
                return  # after stop(): neither the sinks nor the callbacks
        for change in handed:  # none: a streak's start twice, or an end alone
            self._hand_on(change)

    def _changes(self, key: tuple[object, EventKind], event: Event) -> bool:
        # Under the lock: whether ``event`` starts or ends streak ``key``,
        # which it then is (started or ended).
        starts = event.kind == key[1]
        if (key in self._open) == starts:
            return False
        if starts:
            self._open[key] = event
        else:
            del self._open[key]
        return True

    def _hand_on(self, event: Event) -> None:
        self.to_sinks(event)
        if not self._callbacks:
            return
        self._pending.append(event)
        with self._lock:
            if self._closed and threading.get_ident() not in self._inline:
                return
            if self._thread is None or not self._thread.is_alive():
                # Closed (a step() after stop()): it ends once it has
                # called back what is pending.
                self._closing = self._closed
                self._thread = MonitorThread("rlpulse-events", self._call_back)
                self._thread.start()
        self._wakeup.set()

    def close(self, deadline: float) -> None:
        """Call back the events pending by ``deadline``, then let the thread end (it is left to a hung callback); call back no later event."""
        with self._lock:
            thread = self._thread
            self._closing = True
            self._closed = True
        self._wakeup.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))

    def _call_back(self) -> None:
        pending = self._pending
        while True:
            self._wakeup.wait()
            self._wakeup.clear()
            while pending:
                event = pending.popleft()
                for callback in self._callbacks:
                    self._call(callback, event)
            with self._lock:
                if self._closing and not pending:
                    self._thread = None
                    return

    def _call(self, callback: Callable[[Event], object], event: Event) -> None:
        try:
            callback(event)
        except Exception as err:
            if id(callback) in self._warned:
                return
            self._warned.add(id(callback))
            _log.warning(
                "LoggerMonitor's on_event callback %r raised %r on a %s event; it "
                "is still called with the next events, and further errors are "
                "silent.",
                callback,
                err,
                event.kind,
            )


def mark_of(kind: str) -> str:
    """The mark an event of ``kind`` is shown with: ``ok`` for good news (:attr:`EventKind.good_news`), ``=>`` for a bottleneck verdict (news neither good nor bad), ``!!`` for the rest, a kind this version does not know included.

    >>> mark_of("recovered"), mark_of("bottleneck"), mark_of("stalled"), mark_of("melted")
    ('ok', '=>', '!!', '!!')
    """
    if kind in _GOOD_NEWS:
        return "ok"
    return "=>" if kind == EventKind.BOTTLENECK else "!!"


def format_event(event: Event) -> str:
    """Return one event as a line: its local time, its mark (:func:`mark_of`), its kind, its watch (unless named as the kind) and its message.

    >>> noon = time.mktime((2024, 5, 1, 12, 3, 4, 0, 0, -1))
    >>> format_event(Event(noon, "collector", "stalled", "no progress (frames) for 30.0s", 30.0))
    '12:03:04 !! stalled collector: no progress (frames) for 30.0s'
    >>> format_event(Event(noon, "collector", "recovered", "progress again after 34.0s", 34.0))
    '12:03:04 ok recovered collector: progress again after 34.0s'
    >>> format_event(Event(noon, "", "dropping", "sink SQLiteLogger dropped 3 payloads", 3.0))
    '12:03:04 !! dropping: sink SQLiteLogger dropped 3 payloads'
    >>> format_event(Event(noon, "bottleneck", "bottleneck", "collector-bound: ...", 1.0))
    '12:03:04 => bottleneck: collector-bound: ...'
    """
    clock = time.strftime("%H:%M:%S", time.localtime(event.wall_time))
    mark = mark_of(event.kind)
    watch = f" {event.watch}" if event.watch and event.watch != event.kind else ""
    return f"{clock} {mark} {event.kind}{watch}: {event.message}"
