"""The monitor: a drop-in for TorchRL's ``LoggerMonitor`` — public API, validation, wiring.

Watches live in :mod:`rlpulse.watch`, snapshot rules in :mod:`rlpulse.metrics`,
threads, queues and deadlines in :mod:`rlpulse.runtime`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rlpulse.distributions import DEFAULT_QUANTILES
from rlpulse.naming import Kind
from rlpulse.runtime import lifecycle, threads
from rlpulse.runtime.deadline import Deadline, check_timeout
from rlpulse.runtime.engine import Engine
from rlpulse.runtime.events import Event, as_callbacks
from rlpulse.runtime.reporting import OnError, Reporter
from rlpulse.runtime.sinks import as_sinks
from rlpulse.schedules import Every, Schedule
from rlpulse.targets import refuse_in_background
from rlpulse.text import plural
from rlpulse.watch import Watch, Watches, WatchSpec, provider_of
from rlpulse.watch.bottleneck import Bottleneck

__all__ = ["LoggerMonitor"]

# The cumulative entries of LoggerMonitor.stats().
_COUNTERS = (
    "rounds",
    "polls",
    "logged",
    "errors",
    "timeouts",
    "dropped",
    "rejected",
    "cpu_s",
)


class LoggerMonitor:
    """A pull-based monitor logging the ``stats()`` snapshots of watched targets.

    It asks each watched object for a cheap ``stats()`` snapshot — from its
    own thread every ``poll_interval`` seconds, or at :meth:`step` — logs it
    when its schedule says so, with per-second rates of its counters, as
    ``"<watch name>/<metric>"`` to every sink. Nothing runs on the targets'
    hot paths; the monitor owns neither its sinks nor its targets.

    A hung ``stats()`` call or sink stalls nobody else, and :meth:`stop`
    returns within ``stop_timeout`` (docs/failure-behaviour.md).

    Args:
        logger: a sink — any object with ``log_metrics(metrics, step=None)``
            (every TorchRL logger) or ``log_scalar(name, value, step=None)``
            — or a sequence of sinks; every payload reaches every sink.

    Keyword Args:
        poll_interval: seconds between background polls, a finite number above
            zero (default ``1.0``); while every watch is on a time schedule
            that is not due, the thread sleeps until one is.
        background: poll from a daemon thread between :meth:`start` and
            :meth:`stop` (default), or (``False``) only at :meth:`step`.
        on_error: a failing poll or sink ``"warn"`` (default: one warning a
            failure streak), ``"raise"`` (ends a polling thread) or ``"ignore"``.
        poll_timeout: seconds one provider call may take in background mode
            before its watch is counted and warned about as hung (default
            ``5.0``; ``None`` waits forever, like TorchRL's monitor); the
            round moves on without a slow call after about a ``poll_interval``.
        stop_timeout: seconds :meth:`stop` may take, final snapshots and
            draining included; ``None`` means ``max(5, 2 * poll_interval)``.
        queue_size: payloads each sink's queue holds in background mode
            (default ``1000``, at least a round's) before dropping the oldest.
        on_event: a callable, or a list of them, called with each
            :class:`~rlpulse.Event` (a stall, a hung call, a failing sink,
            drops: each streak's start and end) off the polling thread.

    Examples:
        >>> class Buffer:
        ...     def __init__(self):
        ...         self.write_count = 0
        ...     def stats(self):
        ...         return {"write_count": self.write_count, "capacity": 100}
        >>> class Printer:
        ...     def log_metrics(self, metrics, step=None):
        ...         print(step, metrics)
        >>> buffer = Buffer()
        >>> monitor = LoggerMonitor(Printer(), background=False)
        >>> monitor.watch(buffer, schedule=Every.counter("write_count", 10))
        'buffer'
        >>> _ = monitor.step()
        0 {'buffer/write_count': 0.0, 'buffer/capacity': 100.0}
        >>> buffer.write_count = 4
        >>> monitor.step()
        {}
        >>> buffer.write_count = 12
        >>> logged = monitor.step()  # doctest: +ELLIPSIS
        12 {'buffer/write_count': 12.0, 'buffer/capacity': 100.0, 'buffer/writes_per_second': ...}
    """

    def __init__(
        self,
        logger: Any,
        *,
        poll_interval: float = 1.0,
        background: bool = True,
        on_error: OnError = "warn",
        poll_timeout: float | None = 5.0,
        stop_timeout: float | None = None,
        queue_size: int = 1000,
        on_event: Callable[[Event], object] | Sequence[Any] | None = None,
    ) -> None:
        check_timeout("poll_timeout", poll_timeout)
        Reporter.check_on_error(on_error)
        callbacks = as_callbacks(on_event)
        self._sinks = as_sinks(logger)
        self._background = background
        self._poll_timeout = poll_timeout
        self._watches = Watches()
        self._engine = Engine(
            lambda: self._watches.all,
            self._sinks,
            on_error=on_error,
            on_event=callbacks,
            poll_interval=poll_interval,
            queue_size=queue_size,
            stop_timeout=stop_timeout,
        )
        self._reporter = self._engine.reporter
        self._stop_timeout = self._engine.stop_timeout
        self._lock = threading.RLock()
        # Whether stop() has run since the last start(): a second one does nothing.
        self._stopped = False
        lifecycle.track(self)

    def watch(
        self,
        target: Any,
        *,
        name: str | None = None,
        schedule: Schedule | None = None,
        step: str | None = None,
        stats_fn: Callable[..., Mapping[str, Any]] | None = None,
        stats_kwargs: dict[str, Any] | None = None,
        rate_keys: tuple[str, ...] | None = None,
        log_on_start: bool = True,
        log_on_close: bool = True,
        poll_timeout: float | None = None,
        aggregate: tuple[str, ...] | list[str] = (),
        stall_after: float | None = None,
        progress_key: str | tuple[str, ...] | None = None,
        quantiles: tuple[float, ...] | list[float] = DEFAULT_QUANTILES,
    ) -> str:
        """Register ``target`` for monitoring and return its watch name.

        Args:
            target: any object with a ``stats()`` method returning a mapping
                of scalars (TorchRL collectors and replay buffers have one),
                or a Ray actor handle whose actor has one (one remote call
                per poll: :class:`rlpulse.sources.ray.RayTarget`).

        Keyword Args:
            name, schedule, step, stats_fn, stats_kwargs, rate_keys,
            log_on_start, log_on_close, poll_timeout, aggregate, stall_after,
            progress_key, quantiles: the watch's options, each documented by
            :class:`rlpulse.watch.WatchSpec` (``step`` is its ``step_key``,
            ``stats_fn`` its ``provider``); ``poll_timeout`` defaults to the
            monitor's.

        Examples:
            >>> class Collector:
            ...     def stats(self):
            ...         return {"frames": 0}
            >>> class Null:
            ...     def log_metrics(self, metrics, step=None):
            ...         pass
            >>> monitor = LoggerMonitor(Null(), background=False)
            >>> monitor.watch(Collector()), monitor.watch(Collector())
            ('collector', 'collector_1')
        """
        check_timeout("poll_timeout", poll_timeout)
        timeout = self._poll_timeout if poll_timeout is None else poll_timeout
        target, stats_fn, default_name = provider_of(target, stats_fn, timeout)

        def spec(unique: str) -> WatchSpec:
            return WatchSpec(
                unique,
                provider=stats_fn,
                target=target,
                schedule=schedule,
                step_key=step,
                stats_kwargs=stats_kwargs or {},
                rate_keys=rate_keys,
                log_on_start=log_on_start,
                log_on_close=log_on_close,
                poll_timeout=timeout,
                aggregate=aggregate,
                stall_after=stall_after,
                progress_key=progress_key,
                quantiles=quantiles,
            )

        with self._lock:
            watch = self._watches.add(
                lambda unique: Watch(spec(unique), self._reporter),
                name,
                default_name,
                check=None if self._engine.poller is None else refuse_in_background,
            )
        self._engine.nudge()  # the new watch is polled within an interval
        return watch.name

    def bottleneck(
        self,
        producer: str = "collector",
        consumer: str = "learner",
        *,
        buffer: str | None = None,
        target_ratio: float | None = None,
        window: float = 30.0,
        name: str = "bottleneck",
    ) -> str:
        """Judge, every ``window`` seconds, which side of a pipeline holds it back; return the watch's name.

        ``producer`` and ``consumer`` name watches already registered (a
        collector's, a learner's ``Tally``), ``buffer`` the watch of the
        replay buffer or queue between them, if any. Each window a derived
        watch reads them and logs, as ``<name>/<metric>``, each side's
        ``<side>_busy_share`` and ``<side>_wait_share`` (from their
        ``busy_s`` and ``wait_s`` counters: :meth:`rlpulse.Tally.busy`,
        :meth:`rlpulse.Tally.waiting`), the ``replay_ratio`` (samples per
        frame; left out of a window no frame arrived in) of the window's
        ``samples_drawn`` and ``frames_produced``, and
        ``replay_ratio_target`` (``target_ratio``), the buffer's
        ``fill``, ``fill_trend`` and ``dropped``, ``policy_lag``, each where
        the pipeline reports it; ``bound`` (-1 producer-bound, 0
        balanced, +1 consumer-bound; left out when unknown, with
        ``bound_known`` 0), ``speedup`` (what fixing the bottleneck gains
        at most) and ``side/<watch>`` (-1 the producer, +1 the consumer).
        Only whole windows are logged (none at :meth:`stop`). A verdict that
        changes and holds for two windows is a ``bottleneck`` event, its sentence the message (:func:`rlpulse.verdict.describe`).
        The rules: docs/finding-the-bottleneck.md.

        Examples:
            >>> from rlpulse import Tally
            >>> class Null:
            ...     def log_metrics(self, metrics, step=None):
            ...         pass
            >>> monitor = LoggerMonitor(Null(), background=False)
            >>> learner = Tally()
            >>> monitor.watch(learner, name="learner")
            'learner'
            >>> monitor.bottleneck("learner", "learner", window=5.0)
            Traceback (most recent call last):
            ...
            ValueError: bottleneck() needs two different watches, the producer and the consumer; got 'learner' for both.
            >>> monitor.watch(Tally(), name="collector")
            'collector'
            >>> monitor.bottleneck("collector", "learner", window=5.0)
            'bottleneck'
        """
        named = {
            "producer": (producer, "collector"),
            "consumer": (consumer, "learner"),
            "buffer": (buffer, "buffer"),
        }
        for role, (given, example) in named.items():
            if not isinstance(given, str) and (role != "buffer" or given is not None):
                raise TypeError(
                    f"bottleneck({role}=...) takes the name of a watch, as watch() "
                    f"returned it (as in {role}={example!r}), not the object "
                    f"watched; got {type(given).__name__} {given!r}."
                )
        if producer == consumer:
            raise ValueError(
                "bottleneck() needs two different watches, the producer and the "
                f"consumer; got {producer!r} for both."
            )
        if not (isinstance(window, (int, float)) and 0 < window < float("inf")):
            raise ValueError(
                f"bottleneck(window=...) must be a positive, finite number of "
                f"seconds, got {window!r}."
            )
        if target_ratio is not None and not (
            isinstance(target_ratio, (int, float)) and 0 < target_ratio < float("inf")
        ):
            raise ValueError(
                "bottleneck(target_ratio=...) is the samples drawn per frame "
                f"collected that the pipeline aims at, a positive number; got {target_ratio!r}."
            )
        with self._lock:
            watches = {watch.name: watch for watch in self._watches.all}
        sides = {"producer": producer, "consumer": consumer}
        if buffer is not None:
            sides["buffer"] = buffer
        for role, watch_name in sides.items():
            if watch_name not in watches:
                raise KeyError(
                    f"bottleneck({role}={watch_name!r}): no watch of that name; "
                    f"watch() it first (watches: {sorted(watches)})."
                )
        if name in watches:
            raise ValueError(
                f"bottleneck(name={name!r}): a watch of that name is already "
                f"registered; judge another pair under another name (as in "
                f"name='{name}_2'), or unwatch({name!r}) first."
            )
        judged = Bottleneck(
            watches[producer].call,
            watches[consumer].call,
            None if buffer is None else watches[buffer].call,
            names=(producer, consumer),
            window=float(window),
            target_ratio=target_ratio,
            on_change=lambda verdict: self._reporter.bottleneck(name, verdict),
        )
        return self.watch(
            judged,
            name=name,
            schedule=Every.seconds(window),
            rate_keys=(),
            log_on_start=False,
            log_on_close=False,  # a window cut short by stop() judges nothing
        )

    def unwatch(self, name: str) -> None:
        """Stop monitoring watch ``name``: once this returns, nothing more is logged for it.

        A poll of it still in flight delivers nothing; the target is not touched.

        Examples:
            >>> class Null:
            ...     def log_metrics(self, metrics, step=None):
            ...         pass
            >>> monitor = LoggerMonitor(Null(), background=False)
            >>> monitor.unwatch("missing")
            Traceback (most recent call last):
            ...
            KeyError: "No watch named 'missing'."
        """
        with self._lock:
            watch = self._watches.remove(name)
        timeout = watch.spec.poll_timeout or self._stop_timeout
        self._engine.wait_done_with(watch, timeout)
        self._reporter.unwatched(watch)

    def step(self) -> dict[str, dict[str, float]]:
        """Poll every watch once, in registration order, and log those that are due.

        Returns ``{watch name: logged payload}`` (``{}`` when none was). In
        manual mode every sink has been called before this returns; on a
        started background monitor the poll runs on its thread, and payloads
        go through the sinks' queues.
        """
        return self._engine.step()

    def start(self) -> LoggerMonitor:
        """Start the background polling thread (nothing to start when ``background=False``).

        The first poll is one ``poll_interval`` after start; a stopped
        monitor can be started again. Returns the monitor.
        """
        with self._lock:
            starting = self._background and self._engine.poller is None
            for watch in self._watches.all if starting else ():
                refuse_in_background(watch.spec)
            self._stopped = False
            if starting:
                self._engine.start()
                lifecycle.running(self, self._stop_timeout)
            # Once the sinks' queues are open: what changed while stopped
            # (a stall's end, a hung call that returned) reaches them.
            self._reporter.events.reopen()
        return self

    def stop(self, *, log_final: bool | None = None) -> None:
        """Stop polling, then log one final snapshot of each watch.

        A final snapshot (whatever the schedule says, with rates) is logged
        for every watch whose ``log_on_close`` is true, or all/none as
        ``log_final`` says; a hung watch gets none and is named in a warning.
        A second :meth:`stop` without :meth:`start` does nothing. Returns
        within ``stop_timeout``, the sinks drained and flushed, never closed.
        """
        self._engine.delivery.refuse_on_sender_thread("stop()")
        deadline = Deadline(self._stop_timeout)
        with self._lock:
            lifecycle.stopped(self)
        self._engine.stop_polling(deadline)
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._engine.finish(deadline, log_final)

    def _after_fork_in_child(self) -> None:  # nothing of the parent's threads
        self._lock = threading.RLock()
        self._engine.after_fork()
        self._stopped = True

    def __enter__(self) -> LoggerMonitor:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stats(self) -> dict[str, float]:
        """Return the monitor's own counters and gauges, so it can watch itself.

        ``watches``, ``rounds``, ``polls``, ``logged``, ``errors``, ``timeouts``,
        ``dropped``, ``rejected``, ``hung``, ``queued``, ``last_poll_duration_s`` and, on Linux,
        ``cpu_s``: each explained in docs/failure-behaviour.md ("How to see it").

        Examples:
            >>> class Null:
            ...     def log_metrics(self, metrics, step=None):
            ...         pass
            >>> monitor = LoggerMonitor(Null(), background=False)
            >>> _ = monitor.watch(monitor, name="monitor")
            >>> monitor.step()["monitor"]["monitor/watches"]
            1.0
            >>> monitor.stats()["logged"]
            1
        """
        return {
            "watches": len(self._watches.all),
            **self._reporter.counts(),
            "hung": sum(map(self._engine.supervision.is_hung, self._watches.all)),
            "queued": self._engine.delivery.queued,
            "last_poll_duration_s": self._reporter.last_round_s,
            **threads.cpu_entry(),
        }

    def metric_kinds(self) -> dict[str, Kind]:
        """The counters among the entries of :meth:`stats` (the rest are gauges).

        Examples:
            >>> class Null:
            ...     def log_metrics(self, metrics, step=None):
            ...         pass
            >>> sorted(LoggerMonitor(Null(), background=False).metric_kinds())
            ['cpu_s', 'dropped', 'errors', 'logged', 'polls', 'rejected', 'rounds', 'timeouts']
        """
        return dict.fromkeys(_COUNTERS, Kind.COUNTER)

    def __repr__(self) -> str:
        held = plural(len(self._watches.all), "watch"), plural(len(self._sinks), "sink")
        return f"LoggerMonitor({', '.join(held)}, {self._engine.running})"
