"""The monitor: pulls snapshots on schedule and hands them to the sinks.

:class:`LoggerMonitor` is a drop-in replacement for TorchRL's
``torchrl.record.loggers.monitoring.LoggerMonitor``. The per-watch poll
logic lives in :mod:`rlpulse.poll`; this module owns the thread, the clock,
error handling and delivery.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Literal

from rlpulse.delivery import Sink, as_sinks
from rlpulse.poll import Watch
from rlpulse.schedules import AnyOf, Every, Schedule

__all__ = ["LoggerMonitor"]

logger = logging.getLogger("rlpulse")

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
        on_error: Literal["warn", "raise", "ignore"] = "warn",
    ) -> None:
        if on_error not in _ON_ERROR:
            raise ValueError(
                "on_error must be one of 'warn', 'raise' or 'ignore', "
                f"got {on_error!r}."
            )
        if poll_interval <= 0:
            raise ValueError(f"poll_interval must be positive, got {poll_interval}.")
        self._sinks = as_sinks(logger)
        self._wants_timestamp = any(sink.wants_timestamp for sink in self._sinks)
        self._poll_interval = float(poll_interval)
        self._background = background
        self._on_error = on_error
        self._watches: dict[str, Watch] = {}
        self._watch_list: tuple[Watch, ...] = ()
        # One lock serialises registration and polling, so that once
        # unwatch() returns no poll of that watch is still in flight.
        self._lock = threading.RLock()
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._polls = 0
        self._logged = 0
        self._errors = 0
        self._last_poll_duration = 0.0

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
    ) -> str:
        """Register ``target`` for monitoring and return its watch name.

        Args:
            target: any object with a ``stats()`` method returning a mapping
                of scalars (TorchRL collectors and replay buffers have one).

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
        if stats_fn is None:
            stats_attr = getattr(target, "stats", None)
            if not callable(stats_attr):
                raise TypeError(
                    f"Cannot watch object of type {type(target).__name__}: it does "
                    "not expose a callable stats() method and no stats_fn was "
                    "provided."
                )
            stats_fn = stats_attr
        if schedule is not None and not isinstance(schedule, (Every, AnyOf)):
            raise TypeError(
                "schedule must be an Every schedule (or a composite of them), "
                f"got {type(schedule).__name__}."
            )
        with self._lock:
            if name is None:
                base = type(target).__name__.lower()
                name = base
                suffix = 0
                while name in self._watches:
                    suffix += 1
                    name = f"{base}_{suffix}"
            elif name in self._watches:
                raise ValueError(f"A watch named {name!r} is already registered.")
            self._watches[name] = Watch(
                name,
                provider=stats_fn,
                target=target,
                schedule=schedule,
                step_key=step,
                stats_kwargs=stats_kwargs,
                rate_keys=tuple(rate_keys) if rate_keys is not None else None,
                log_on_start=log_on_start,
                log_on_close=log_on_close,
            )
            self._watch_list = tuple(self._watches.values())
        return name

    def unwatch(self, name: str) -> None:
        """Stop monitoring watch ``name``; the target itself is not touched.

        Once this returns, nothing more is logged for that watch.

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
            if name not in self._watches:
                raise KeyError(f"No watch named {name!r}.")
            del self._watches[name]
            self._watch_list = tuple(self._watches.values())

    # -- polling ----------------------------------------------------------

    def step(self) -> dict[str, dict[str, float]]:
        """Poll every watch once, in registration order, and log those that are due.

        Returns ``{watch name: logged payload}`` for the watches logged
        during this call (``{}`` when none were). In manual mode this is the
        only way the monitor polls; the background thread calls it too.
        """
        logged: dict[str, dict[str, float]] = {}
        with self._lock:
            started = now = time.monotonic()
            for watch in self._watch_list:
                # A time-only schedule that is not due costs no provider call.
                if now < watch.next_due:
                    continue
                payload = self._poll(watch, False)
                if payload is not None:
                    logged[watch.name] = payload
            self._last_poll_duration = time.monotonic() - started
        return logged

    def _poll(self, watch: Watch, force: bool) -> dict[str, float] | None:
        try:
            self._polls += 1
            kwargs = watch.stats_kwargs
            raw = watch.provider(**kwargs) if kwargs else watch.provider()
            now = time.monotonic()
            payload = watch.evaluate(raw, now, force)
        except Exception as err:
            self._failed(watch, err)
            return None
        watch.error_warned = False
        if payload is None:
            return None
        wall_time = time.time() if self._wants_timestamp else 0.0
        if not self._deliver(watch, payload, wall_time):
            return None
        watch.commit(now)
        self._logged += 1
        return payload

    def _deliver(
        self, watch: Watch, payload: dict[str, float], wall_time: float
    ) -> bool:
        delivered = False
        first_error: Exception | None = None
        step = watch.step
        for sink in self._sinks:
            try:
                if sink.wants_timestamp:
                    sink.log_metrics(payload, step=step, timestamp=wall_time)
                else:
                    sink.log_metrics(payload, step=step)
            except Exception as err:
                self._errors += 1
                if first_error is None:
                    first_error = err
                if self._on_error == "warn" and not sink.failing:
                    logger.warning(
                        "LoggerMonitor failed to log watch %r to sink %s: %r. "
                        "Further errors of this sink will be silent until it "
                        "recovers.",
                        watch.name,
                        sink.name,
                        err,
                    )
                sink.failing = True
                continue
            if sink.failing:
                sink.failing = False
            delivered = True
        if first_error is not None and self._on_error == "raise":
            raise first_error
        return delivered

    def _failed(self, watch: Watch, err: Exception) -> None:
        self._errors += 1
        if self._on_error == "raise":
            raise err
        if self._on_error == "warn" and not watch.error_warned:
            logger.warning(
                "LoggerMonitor failed to poll or log watch %r: %r. Further errors "
                "for this watch will be silent until it recovers.",
                watch.name,
                err,
            )
        watch.error_warned = True

    # -- lifecycle --------------------------------------------------------

    def start(self) -> LoggerMonitor:
        """Start the background polling thread (nothing to start when ``background=False``).

        The first background poll happens one ``poll_interval`` after start.
        A stopped monitor can be started again. Returns the monitor.
        """
        self._stopped = False
        if self._background and self._thread is None:
            self._stop_event.clear()
            self._thread = threading.Thread(
                target=self._run, name="rlpulse-LoggerMonitor", daemon=True
            )
            self._thread.start()
        return self

    def stop(self, *, log_final: bool | None = None) -> None:
        """Stop polling, then log one final snapshot of each watch.

        A final snapshot is forced — logged whatever the schedule says, with
        rates — for every watch whose ``log_on_close`` is true; ``log_final``
        overrides that setting when not ``None``. Calling :meth:`stop` again
        without an intervening :meth:`start` does nothing. Sinks are flushed
        where they can be, never closed.
        """
        self._stop_event.set()
        thread = self._thread
        stuck = False
        if thread is not None:
            thread.join(timeout=max(5.0, 2 * self._poll_interval))
            stuck = thread.is_alive()
            self._thread = None
        if self._stopped:
            return
        self._stopped = True
        if stuck:
            logger.warning(
                "LoggerMonitor could not join its polling thread within the stop "
                "timeout (a stats() call is probably hanging); skipping the final "
                "snapshots to avoid polling concurrently with the stuck thread."
            )
            return
        with self._lock:
            for watch in self._watch_list:
                should_log = watch.log_on_close if log_final is None else log_final
                if should_log:
                    self._poll(watch, True)
            for sink in self._sinks:
                try:
                    sink.flush()
                except Exception as err:
                    self._failed_flush(sink, err)

    def _failed_flush(self, sink: Sink, err: Exception) -> None:
        self._errors += 1
        if self._on_error == "raise":
            raise err
        if self._on_error == "warn":
            logger.warning("LoggerMonitor failed to flush sink %s: %r.", sink.name, err)

    def __enter__(self) -> LoggerMonitor:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop_event.wait(self._poll_interval):
            self.step()

    # -- introspection ----------------------------------------------------

    def stats(self) -> dict[str, float]:
        """Return the monitor's own counters and gauges, so it can watch itself.

        ``watches`` (gauge), ``polls`` (provider calls), ``logged``
        (payloads delivered), ``errors`` (failed polls and sink calls) and
        ``last_poll_duration_s`` (the last :meth:`step`).

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
        return {
            "watches": len(self._watch_list),
            "polls": self._polls,
            "logged": self._logged,
            "errors": self._errors,
            "last_poll_duration_s": self._last_poll_duration,
        }

    def __repr__(self) -> str:
        state = "running" if self._thread is not None else "idle"
        return (
            f"LoggerMonitor({len(self._watch_list)} watches, "
            f"{len(self._sinks)} sinks, {state})"
        )
