"""The monitor: what a user calls — registration, validation, and the wiring of the runtime.

:class:`LoggerMonitor` is a drop-in replacement for TorchRL's
``torchrl.record.loggers.monitoring.LoggerMonitor``. What a watch is and
when it is due lives in :mod:`rlpulse.watch`, the snapshot rules in
:mod:`rlpulse.metrics`, the threads, queues and deadlines in
:mod:`rlpulse.runtime`; what a kind of target needs (a remote call, a
refusal) is asked of :mod:`rlpulse.targets`.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

from rlpulse import targets
from rlpulse.runtime import lifecycle
from rlpulse.runtime.deadline import Deadline
from rlpulse.runtime.delivery import Delivery
from rlpulse.runtime.engine import Engine
from rlpulse.runtime.reporting import OnError, Reporter
from rlpulse.runtime.sinks import as_sinks
from rlpulse.schedules import AnyOf, Every, Schedule
from rlpulse.watch import Watch

__all__ = ["LoggerMonitor"]

_ON_ERROR = ("warn", "raise", "ignore")


class LoggerMonitor:
    """A pull-based monitor logging the ``stats()`` snapshots of watched targets.

    The monitor asks each watched object for a cheap ``stats()`` snapshot —
    from its own daemon thread every ``poll_interval`` seconds, or on
    explicit :meth:`step` calls — decides from the watch's schedule whether
    the snapshot is due, derives per-second rates from cumulative counters,
    namespaces metrics as ``"<watch name>/<metric>"`` and hands them to every
    sink. Nothing runs on the watched objects' hot paths. The monitor never
    owns its sinks or its targets: stopping it leaves both running.

    In background mode a hung ``stats()`` call or a hung sink stalls nobody
    else: a provider call that holds the round up for about a
    ``poll_interval`` (at least 50 ms) is left behind and the round goes on
    without it (its watch skipped until the call returns; warned about and
    counted as hung once it overruns ``poll_timeout``), each sink is fed
    from its own bounded queue, and :meth:`stop` returns within
    ``stop_timeout``.

    Args:
        logger: a sink — any object with ``log_metrics(metrics, step=None)``
            (every TorchRL logger) or ``log_scalar(name, value, step=None)``
            — or a sequence of sinks; every payload reaches every sink.

    Keyword Args:
        poll_interval: seconds between background polls (default ``1.0``).
        background: ``True`` (default) polls from a daemon thread between
            :meth:`start` and :meth:`stop`; ``False`` leaves polling to
            explicit :meth:`step` calls, synchronous and deterministic.
        on_error: a failing poll or sink ``"warn"`` (default: one warning
            through the ``rlpulse`` logger per failure streak), ``"raise"``
            (propagates; in background mode that ends the polling thread) or
            ``"ignore"``.
        poll_timeout: seconds one provider call may take in background mode
            before its watch is counted and warned about as hung (default
            ``5.0``). The round moves on without a slow call after about a
            ``poll_interval`` (at least 50 ms, at most ``poll_timeout``).
            ``None`` waits forever, holding every watch up, like TorchRL's
            monitor. ``watch(..., poll_timeout=...)`` overrides it.
        stop_timeout: seconds :meth:`stop` may take, final snapshots and
            draining included; ``None`` means ``max(5, 2 * poll_interval)``.
        queue_size: payloads each sink's queue holds in background mode
            before the oldest is dropped (default ``1000``).

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
    ) -> None:
        if on_error not in _ON_ERROR:
            raise ValueError(
                "on_error must be one of 'warn', 'raise' or 'ignore', "
                f"got {on_error!r}."
            )
        if poll_interval <= 0:
            raise ValueError(f"poll_interval must be positive, got {poll_interval}.")
        _check_timeout("poll_timeout", poll_timeout)
        _check_timeout("stop_timeout", stop_timeout)
        if queue_size < 1:
            raise ValueError(f"queue_size must be at least 1, got {queue_size}.")
        self._sinks = as_sinks(logger)
        self._background = background
        self._poll_timeout = poll_timeout
        self._stop_timeout = (
            max(5.0, 2 * poll_interval) if stop_timeout is None else stop_timeout
        )
        self._reporter = Reporter(on_error)
        self._watches: dict[str, Watch] = {}
        self._watch_list: tuple[Watch, ...] = ()
        self._engine = Engine(
            lambda: self._watch_list,
            Delivery(self._sinks, self._reporter),
            self._reporter,
            poll_interval=float(poll_interval),
            queue_size=queue_size,
            stop_timeout=self._stop_timeout,
        )
        self._after_fork_in_child()
        self._stopped = False
        lifecycle.track(self)

    # -- registration -----------------------------------------------------

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
        progress_key: str | None = None,
    ) -> str:
        """Register ``target`` for monitoring and return its watch name.

        Args:
            target: any object with a ``stats()`` method returning a mapping
                of scalars (TorchRL collectors and replay buffers have one),
                or a Ray actor handle whose actor has one: it is polled
                with one remote call per poll, given up before the watch's
                ``poll_timeout`` and never issued twice while outstanding
                (see :class:`rlpulse.sources.ray.RayTarget`; needs
                ``rlpulse[ray]``).

        Keyword Args:
            name: prefix of this watch's metrics, unique in the monitor.
                Defaults to the target's class name in lower case, with
                ``_1``, ``_2``, … appended when taken.
            schedule: when to log (:class:`~rlpulse.Every`, or a composite
                such as ``Every.counter("frames", 10_000) | Every.seconds(60)``).
                ``None`` logs at every poll.
            step: snapshot entry used as the logging step. Defaults to the
                counter of a counter schedule (with exactly one counter part).
            stats_fn: replaces ``target.stats`` as the snapshot provider.
            stats_kwargs: keyword arguments passed to the provider each poll.
            rate_keys: snapshot entries to derive per-second rates from.
                Defaults to the known cumulative counters (``frames``,
                ``batches``, ``write_count``, …).
            log_on_start: log the first poll whatever the schedule says.
                When ``False``, the first poll records the baseline only, so
                the first logged snapshot carries rates.
            log_on_close: log a final snapshot on :meth:`stop`.
            poll_timeout: this watch's bound on one provider call in
                background mode, overriding the monitor's.
            aggregate: any of ``"mean"``, ``"min"``, ``"max"``: for every
                snapshot entry that is not a rate key, also log
                ``<key>_mean`` (…) over all polls since the previous logged
                snapshot, this one included — a gauge polled at 1 Hz but
                logged every 30 s keeps its shape.
            stall_after: seconds without progress after which payloads carry
                ``<name>/stalled = 1.0`` (else ``0.0``) and one warning per
                stall episode names the watch and how long it is stuck.
            progress_key: the counter that shows progress for
                ``stall_after``; defaults to the schedule's counter, else
                the step key.

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
            >>> monitor.watch(object())
            Traceback (most recent call last):
            ...
            TypeError: Cannot watch object of type object: it does not expose a callable stats() method and no stats_fn was provided.
        """
        _check_timeout("poll_timeout", poll_timeout)
        timeout = self._poll_timeout if poll_timeout is None else poll_timeout
        default_name = type(target).__name__.lower()
        if stats_fn is None:
            target, default_name = targets.adapt(target, timeout)
            stats_fn = getattr(target, "stats", None)
            if not callable(stats_fn):
                raise TypeError(
                    f"Cannot watch object of type {type(target).__name__}: it does "
                    "not expose a callable stats() method and no stats_fn was "
                    "provided."
                )
        if schedule is not None and not isinstance(schedule, (Every, AnyOf)):
            raise TypeError(
                "schedule must be an Every schedule (or a composite of them), "
                f"got {type(schedule).__name__}."
            )
        with self._lock:
            name = self._unique_name(name, default_name)
            if self._engine.poller is not None:
                _refuse_hazard(target, stats_fn, stats_kwargs or {})
            self._watches[name] = Watch(
                name,
                provider=stats_fn,
                target=target,
                schedule=schedule,
                step_key=step,
                stats_kwargs=stats_kwargs or {},
                rate_keys=None if rate_keys is None else tuple(rate_keys),
                log_on_start=log_on_start,
                log_on_close=log_on_close,
                poll_timeout=timeout,
                aggregate=tuple(aggregate),
                stall_after=stall_after,
                progress_key=progress_key,
                on_stall=self._reporter.stalled,
            )
            self._watch_list = tuple(self._watches.values())
        return name

    def _unique_name(self, name: str | None, default: str) -> str:
        if name is not None:
            if name in self._watches:
                raise ValueError(f"A watch named {name!r} is already registered.")
            return name
        name, suffix = default, 0
        while name in self._watches:
            suffix += 1
            name = f"{default}_{suffix}"
        return name

    def unwatch(self, name: str) -> None:
        """Stop monitoring watch ``name``; the target itself is not touched.

        Once this returns, nothing more is logged for that watch: a poll of
        it still in flight on another thread delivers nothing.

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
            watch = self._watches.pop(name, None)
            if watch is None:
                raise KeyError(f"No watch named {name!r}.")
            self._watch_list = tuple(self._watches.values())
            watch.active = False
        # A poll that read `active` before it was cleared may still be
        # delivering: wait for it (a call left behind re-checks `active`).
        self._engine.wait_done_with(
            watch, watch.spec.poll_timeout or self._stop_timeout
        )

    # -- polling ----------------------------------------------------------

    def step(self) -> dict[str, dict[str, float]]:
        """Poll every watch once, in registration order, and log those that are due.

        Returns ``{watch name: logged payload}`` for the watches logged
        during this call (``{}`` when none were). In manual mode every sink
        has been called before this returns. On a started background
        monitor the poll runs on the monitor's thread (so it never races
        it) and payloads go through the sinks' queues.
        """
        return self._engine.step()

    # -- lifecycle --------------------------------------------------------

    def start(self) -> LoggerMonitor:
        """Start the background polling thread (nothing to start when ``background=False``).

        The first background poll happens one ``poll_interval`` after start.
        A stopped monitor can be started again. Returns the monitor.
        """
        with self._lock:
            engine = self._engine
            if self._background and engine.poller is None:
                for watch in self._watch_list:
                    spec = watch.spec
                    _refuse_hazard(spec.target, spec.provider, spec.stats_kwargs)
            self._stopped = False
            if self._background and engine.poller is None:
                engine.start()
                lifecycle.running(self)
        return self

    def stop(self, *, log_final: bool | None = None) -> None:
        """Stop polling, then log one final snapshot of each watch.

        A final snapshot is forced — logged whatever the schedule says, with
        rates — for every watch whose ``log_on_close`` is true; ``log_final``
        overrides that setting when not ``None``. A watch whose provider is
        hung gets none, and is named in a warning. Calling :meth:`stop` again
        without an intervening :meth:`start` does nothing. Returns within
        ``stop_timeout`` seconds, final snapshots and pending payloads
        included; sinks are flushed where they can be, never closed.
        """
        deadline = Deadline(self._stop_timeout)
        with self._lock:
            lifecycle.stopped(self)
        self._engine.stop_polling(deadline)
        if self._stopped:
            return
        self._stopped = True
        finals = [
            watch
            for watch in self._watch_list
            if (watch.spec.log_on_close if log_final is None else log_final)
        ]
        self._engine.finish(finals, deadline)

    def _after_fork_in_child(self) -> None:
        # Everything a forked child must not inherit from its parent's threads.
        self._lock = threading.RLock()
        self._engine.after_fork()
        self._stopped = True

    def __enter__(self) -> LoggerMonitor:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # -- introspection ----------------------------------------------------

    def stats(self) -> dict[str, float]:
        """Return the monitor's own counters and gauges, so it can watch itself.

        ``watches`` (gauge), ``rounds`` (polls of every watch: :meth:`step`
        calls and background polls), ``polls`` (provider calls), ``logged``
        (payloads produced), ``errors`` (failed polls and sink calls),
        ``timeouts`` (provider calls that overran ``poll_timeout``),
        ``dropped`` (payloads dropped from full sink queues),
        ``hung`` (watches whose call is outstanding), ``queued`` (payloads
        waiting in sink queues) and ``last_poll_duration_s``.

        Examples:
            >>> class Null:
            ...     def log_metrics(self, metrics, step=None):
            ...         pass
            >>> monitor = LoggerMonitor(Null(), background=False)
            >>> monitor.watch(monitor, name="monitor")
            'monitor'
            >>> monitor.step()["monitor"]["monitor/watches"]
            1.0
            >>> monitor.stats()["logged"]
            1
        """
        engine = self._engine
        counts = self._reporter.counts()
        table = engine.supervision
        return {
            "watches": len(self._watch_list),
            **counts,
            "hung": sum(1 for watch in self._watch_list if table.is_hung(watch)),
            "queued": engine.delivery.queued,
            "last_poll_duration_s": self._reporter.last_round_s,
        }

    def __repr__(self) -> str:
        return (
            f"LoggerMonitor({len(self._watch_list)} watches, "
            f"{len(self._sinks)} sinks, {self._engine.running})"
        )


def _refuse_hazard(target: Any, provider: Any, stats_kwargs: Mapping[str, Any]) -> None:
    reason = targets.background_hazard(target, provider, stats_kwargs)
    if reason is not None:
        raise ValueError(f"A background LoggerMonitor refuses this watch: {reason}")


def _check_timeout(name: str, value: float | None) -> None:
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise ValueError(
            f"{name} must be a positive number of seconds or None, got {value!r}."
        )
