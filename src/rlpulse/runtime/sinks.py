"""Sinks as the monitor sees them: one uniform way to hand over a payload.

Any object with ``log_metrics(metrics, step=None)`` is a sink (every TorchRL
logger is); one with only ``log_scalar(name, value, step=None)`` gets one
call per metric. A sink whose ``log_metrics`` takes a ``timestamp`` keyword
receives the wall-clock time of the poll that produced the payload. A sink
with ``log_batch(payloads)`` gets everything pending in its queue in one
call, each payload a ``(metrics, step, timestamp)`` triple (background mode;
manual mode calls ``log_metrics``). A sink with ``log_event(event)`` gets
every :class:`~rlpulse.Event`. A sink with ``log_payloads`` and
``try_log_payloads(payloads) -> bool`` (:class:`~rlpulse.SinkProcess`) is
handed a round's payloads on the polling thread when it can take them
without waiting, sparing its sender thread a wake. A sink with
``losses() -> Losses`` (:class:`~rlpulse.SinkProcess`) says how many of the
payloads it took were lost behind it; its queue counts them as the
monitor's own ``dropped`` and ``rejected`` (a ``losses()`` that returns
anything else is the sink's own business: :class:`LossReader`).
"""

from __future__ import annotations

import functools
import inspect
import threading
import types
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

__all__ = ["NOTHING_LOST", "LossReader", "Losses", "Sink", "as_sinks"]


class Losses(NamedTuple):
    """How many payloads a sink took and then lost, since it was made: what its ``losses()`` returns.

    A sink that hands payloads on (:class:`~rlpulse.SinkProcess`, to sinks
    in a child process) returns from a call before they are delivered;
    its monitor's queue reads this after each call and at ``stop()``, and
    counts what grew in ``dropped`` and ``rejected``.

    >>> Losses(dropped=2, rejected=1)
    Losses(dropped=2, rejected=1)
    """

    dropped: int
    """Taken and never delivered: dropped from a full queue behind the sink, or lost with a process that held them."""
    rejected: int
    """Taken and refused for good by a call behind the sink (an error not worth trying again)."""


NOTHING_LOST = Losses(0, 0)


def _nothing_lost() -> Losses:
    return NOTHING_LOST


class LossReader:
    """What a sink with ``losses()`` lost after taking payloads, read as it grows: each loss told once, whichever thread reads.

    A ``losses()`` that does not return :class:`Losses` when the reader is
    made (or raises) is a method of the sink's own (a logger keeping the
    training losses it was given, say), not what it lost: the reader then
    reads nothing, and never calls it again.

    Examples:
        >>> lost = [Losses(1, 0)]
        >>> reader = LossReader(lambda: lost[0])  # counts from what it says now
        >>> reader.more()
        Losses(dropped=0, rejected=0)
        >>> lost[0] = Losses(4, 2)
        >>> reader.more(), reader.more()
        (Losses(dropped=3, rejected=2), Losses(dropped=0, rejected=0))
        >>> LossReader(lambda: [0.5, 0.25]).more(), LossReader(lambda step: 0.5).more()
        (Losses(dropped=0, rejected=0), Losses(dropped=0, rejected=0))
    """

    def __init__(self, losses: Callable[[], Losses]) -> None:
        try:
            seen = losses()
        except Exception:  # one that takes arguments, say
            seen = None
        if not isinstance(seen, Losses):
            seen, losses = NOTHING_LOST, _nothing_lost
        self._losses = losses
        self._seen = seen
        self._lock = threading.Lock()

    @classmethod
    def of(cls, target: object, losses: Callable[[], Losses]) -> LossReader:
        """The one reader of sink ``target``'s ``losses``, whichever monitors it is a sink of.

        A :class:`~rlpulse.SinkProcess` two monitors log to says what it
        lost of both; read by one reader, each loss is counted once, by the
        monitor that reads it first, rather than once by each. A target
        that cannot be weakly referred to gets a reader of its own.

        Examples:
            >>> class Behind:
            ...     lost = Losses(0, 0)
            ...     def losses(self):
            ...         return self.lost
            >>> sink = Behind()
            >>> LossReader.of(sink, sink.losses) is LossReader.of(sink, sink.losses)
            True
        """
        # By identity: two sinks equal by value are two sinks all the same.
        key = id(target)
        with _SHARED_LOCK:
            shared = _SHARED_READERS.get(key)
            if shared is not None and shared.sink() is target:
                return shared.reader
            try:
                sink = weakref.ref(target, functools.partial(_forget_reader, key))
            except TypeError:  # not weakly referable
                return cls(losses)
            reader = cls(_weakly(losses))
            _SHARED_READERS[key] = _SharedReader(sink, reader)
            return reader

    def more(self) -> Losses:
        """What was lost since the last read (:data:`NOTHING_LOST` as a rule, cheaply)."""
        if self._losses() == self._seen:
            return NOTHING_LOST
        with self._lock:
            seen, now = self._seen, self._losses()
            if not isinstance(now, Losses):
                return NOTHING_LOST
            self._seen = now
        return Losses(
            max(0, now.dropped - seen.dropped), max(0, now.rejected - seen.rejected)
        )


class _SharedReader(NamedTuple):
    """A sink, held weakly, and the one reader of its losses."""

    sink: weakref.ref[Any]
    reader: LossReader


# The reader of each sink's losses (LossReader.of) by the sink's id, kept
# while the sink is.
_SHARED_READERS: dict[int, _SharedReader] = {}
_SHARED_LOCK = threading.Lock()


def _forget_reader(key: int, sink: weakref.ref[Any]) -> None:
    # When the sink goes (no lock: the collector may run under it).
    _SHARED_READERS.pop(key, None)


def _weakly(losses: Callable[[], Losses]) -> Callable[[], Losses]:
    """``losses``, holding its sink weakly where it is a method: a reader kept for the sink must not keep the sink."""
    if not isinstance(losses, types.MethodType):
        return losses
    method = weakref.WeakMethod(losses)

    def read() -> Losses:
        bound = method()
        return NOTHING_LOST if bound is None else bound()

    return read


class Sink:
    """One sink wrapped for delivery, with its failure streaks' state: its payloads' (``failing``) and its events' (``events_failing``).

    Examples:
        >>> class Recorder:
        ...     def __init__(self):
        ...         self.calls = []
        ...     def log_scalar(self, name, value, step=None):
        ...         self.calls.append((name, value, step))
        >>> recorder = Recorder()
        >>> Sink(recorder).log_metrics({"rb/size": 3.0}, step=7)
        >>> recorder.calls
        [('rb/size', 3.0, 7)]
    """

    __slots__ = (
        "calls",
        "events_failing",
        "failing",
        "finish_sending",
        "log_batch",
        "log_event",
        "log_metrics",
        "log_payloads",
        "losses",
        "name",
        "target",
        "timestamp_keyword",
        "try_log_payloads",
    )

    def __init__(self, target: Any) -> None:
        if isinstance(target, type):
            raise TypeError(
                f"Cannot log to the class {target.__name__}: give a sink, an "
                f"instance of it (as in {target.__name__}(...)), not the class."
            )
        self.target = target
        self.name = type(target).__name__
        self.failing = False
        # Held by whichever sender calls the sink: a sink is never called by
        # two at once, not even by a restarted monitor's new sender while
        # the one stop() left behind is still in a call.
        self.calls = threading.Lock()
        # Its log_event() failing, a streak of its own: its payloads may
        # go on being written meanwhile.
        self.events_failing = False
        # A sink's optional log_batch(payloads): the sender hands it all
        # that is pending at once, each payload (metrics, step, timestamp).
        log_batch = getattr(target, "log_batch", None)
        self.log_batch: Callable[..., Any] | None = (
            log_batch if callable(log_batch) else None
        )
        # rlpulse's own sinks take payloads with their metrics' kinds.
        log_payloads = getattr(target, "log_payloads", None)
        self.log_payloads: Callable[..., Any] | None = (
            log_payloads if callable(log_payloads) else None
        )
        # A sink's optional try_log_payloads(payloads) -> bool: payloads
        # taken without waiting, or none; a queue hands a round so, on the
        # polling thread, while it has nothing pending.
        try_log_payloads = getattr(target, "try_log_payloads", None)
        self.try_log_payloads: Callable[..., bool] | None = (
            try_log_payloads
            if callable(try_log_payloads) and self.log_payloads is not None
            else None
        )
        # With it, an optional finish_sending(): what writes the rest of a
        # round the sink took only part of (its ``unfinished`` says so).
        finish_sending = getattr(target, "finish_sending", None)
        self.finish_sending: Callable[[], None] | None = (
            finish_sending
            if callable(finish_sending) and self.try_log_payloads is not None
            else None
        )
        # A sink's optional losses() -> Losses: what it lost after taking it.
        losses = getattr(target, "losses", None)
        self.losses: Callable[[], Losses] | None = losses if callable(losses) else None
        # A sink's optional log_event(event): every Event reaches it.
        log_event = getattr(target, "log_event", None)
        self.log_event: Callable[[Any], Any] | None = (
            log_event if callable(log_event) else None
        )
        log_metrics = getattr(target, "log_metrics", None)
        if callable(log_metrics):
            self.log_metrics: Callable[..., Any] = log_metrics
            # Whether log_metrics takes timestamp= (rlpulse's own sinks do).
            self.timestamp_keyword = self.log_payloads is not None or (
                _accepts_timestamp(log_metrics)
            )
            return
        log_scalar = getattr(target, "log_scalar", None)
        if callable(log_scalar):
            self.log_metrics = _scalar_logger(log_scalar)
            self.timestamp_keyword = False
            return
        hint = (
            f" The string {target!r} is no sink: a spec such as "
            "'sqlite:runs/train.sqlite' is opened by rlpulse.open_sink(spec) "
            "(LoggerMonitor(open_sink(spec))), or run in a process of its own by "
            "SinkProcess(spec, ...)."
            if isinstance(target, str)
            else ""
        )
        raise TypeError(
            f"Cannot log to an object of type {type(target).__name__}: a sink needs "
            "log_metrics(metrics, step=None) or log_scalar(name, value, step=None)."
            + hint
        )

    @property
    def wants_timestamp(self) -> bool:
        """Whether the sink is given each payload's wall-clock time, one way or another (a ``log_batch`` sink's triples hold it)."""
        return self.timestamp_keyword or self.log_batch is not None

    @property
    def can_flush(self) -> bool:
        """Whether the sink has ``flush()``."""
        return callable(getattr(self.target, "flush", None))

    def flush(self) -> None:
        """Flush the sink when it has ``flush()``; never close it."""
        flush = getattr(self.target, "flush", None)
        if callable(flush):
            flush()


def as_sinks(logger: Any) -> tuple[Sink, ...]:
    """Return the sinks of a monitor's ``logger`` argument: one sink or a sequence.

    Examples:
        >>> class Null:
        ...     def log_metrics(self, metrics, step=None):
        ...         pass
        >>> [sink.name for sink in as_sinks([Null(), Null()])]
        ['Null', 'Null']
        >>> as_sinks(42)
        Traceback (most recent call last):
        ...
        TypeError: Cannot log to an object of type int: a sink needs log_metrics(metrics, step=None) or log_scalar(name, value, step=None).
    """
    if _is_sink(logger) or not isinstance(logger, Sequence) or isinstance(logger, str):
        return (Sink(logger),)
    if not logger:
        raise ValueError(
            "LoggerMonitor needs at least one sink, got an empty sequence."
        )
    return tuple(Sink(target) for target in logger)


def _is_sink(candidate: Any) -> bool:
    return callable(getattr(candidate, "log_metrics", None)) or callable(
        getattr(candidate, "log_scalar", None)
    )


def _accepts_timestamp(log_metrics: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(log_metrics).parameters
    except (TypeError, ValueError):
        return False
    parameter = parameters.get("timestamp")
    return parameter is not None and parameter.kind in (
        inspect.Parameter.KEYWORD_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    )


def _scalar_logger(log_scalar: Callable[..., Any]) -> Callable[..., None]:
    def log_metrics(metrics: Mapping[str, float], step: int | None = None) -> None:
        for name, value in metrics.items():
            log_scalar(name, value, step=step)

    return log_metrics
