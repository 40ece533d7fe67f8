"""The monitor: pulls snapshots on schedule and hands them to the sinks.

:class:`LoggerMonitor` is a drop-in replacement for TorchRL's
``torchrl.record.loggers.monitoring.LoggerMonitor``. The per-watch poll
logic lives in :mod:`rlpulse.poll`, the background threads in
:mod:`rlpulse.background`, the per-sink queues in :mod:`rlpulse.queues`;
this module ties them together: registration, one poll of one watch,
error handling, delivery and the lifecycle.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Literal

from rlpulse import lifecycle
from rlpulse.background import Poller, Run
from rlpulse.delivery import Sink, as_sinks
from rlpulse.hazards import background_hazard
from rlpulse.poll import Watch
from rlpulse.queues import SinkQueue
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
        on_error: Literal["warn", "raise", "ignore"] = "warn",
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
        self._wants_timestamp = any(sink.wants_timestamp for sink in self._sinks)
        self._poll_interval = float(poll_interval)
        self._background = background
        self._on_error = on_error
        self._poll_timeout = poll_timeout
        self._stop_timeout = (
            max(5.0, 2 * self._poll_interval) if stop_timeout is None else stop_timeout
        )
        self._queue_size = queue_size
        self._watches: dict[str, Watch] = {}
        self._watch_list: tuple[Watch, ...] = ()
        self._rounds = 0
        self._polls = 0
        self._logged = 0
        self._errors = 0
        self._timeouts = 0
        self._dropped = 0
        self._last_poll_duration = 0.0
        # Moves on at every start() and stop(): see _poll.
        self._epoch = 0
        self._setup_state()
        lifecycle.track(self)

    def _setup_state(self) -> None:
        # Everything a forked child must not inherit from its parent's threads.
        self._lock = threading.RLock()
        self._poll_lock = threading.Lock()
        self._poller: Poller | None = None
        self._queues: tuple[SinkQueue, ...] = ()
        self._started = False
        self._stopped = False
        self._sink_error: BaseException | None = None

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
        default_name = type(target).__name__.lower()
        if stats_fn is None:
            if type(target).__module__ in ("ray.actor", "rlpulse.sources.ray"):
                # A Ray actor handle or RayTarget: one remote call per poll,
                # giving up before this watch's watchdog would fire.
                from rlpulse.sources.ray import RayTarget

                target = RayTarget.for_watch(
                    target, self._poll_timeout if poll_timeout is None else poll_timeout
                )
                default_name = target.actor_class.lower()
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
        _check_timeout("poll_timeout", poll_timeout)
        with self._lock:
            if name is None:
                base = default_name
                name = base
                suffix = 0
                while name in self._watches:
                    suffix += 1
                    name = f"{base}_{suffix}"
            elif name in self._watches:
                raise ValueError(f"A watch named {name!r} is already registered.")
            if self._poller is not None:
                _refuse_hazard(target, stats_fn, stats_kwargs or {})
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
                poll_timeout=self._poll_timeout
                if poll_timeout is None
                else poll_timeout,
                aggregate=tuple(aggregate),
                stall_after=stall_after,
                progress_key=progress_key,
                on_stall=self._stalled,
            )
            self._watch_list = tuple(self._watches.values())
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
        self._wait_while_polling(watch)

    def _wait_while_polling(self, watch: Watch) -> None:
        # A poll that read `active` before unwatch() cleared it may still be
        # delivering; wait for it, unless it is the caller's own poll or a
        # provider call left behind as hung (which re-checks `active`).
        if threading.current_thread() is self._polling_thread:
            return
        poller = self._poller
        wait = watch.poll_timeout or self._stop_timeout
        if poller is None:
            # An inline step() on another thread holds the poll lock.
            if self._poll_lock.acquire(timeout=wait):
                self._poll_lock.release()
            return
        deadline = time.monotonic() + wait
        while poller.polling(watch) and not watch.detached:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.0005)

    # -- polling ----------------------------------------------------------

    def step(self) -> dict[str, dict[str, float]]:
        """Poll every watch once, in registration order, and log those that are due.

        Returns ``{watch name: logged payload}`` for the watches logged
        during this call (``{}`` when none were). In manual mode every sink
        has been called before this returns. On a started background
        monitor the poll runs on the monitor's thread (so it never races
        it) and payloads go through the sinks' queues.
        """
        poller = self._poller
        if poller is not None and not poller.is_worker() and poller.alive:
            run = Run(self._watch_list, force=False)
            poller.request(run)
            while not run.done.wait(0.05):
                if not poller.alive:
                    break
            if run.error is not None:
                raise run.error
            if run.done.is_set() or run.index > 0:
                return run.logged
        # Manual mode, or the polling thread has ended (on_error="raise"
        # ended it): poll on this thread.
        return self._step_inline()

    def _step_inline(self) -> dict[str, dict[str, float]]:
        logged: dict[str, dict[str, float]] = {}
        with self._poll_lock:
            self._polling_thread = threading.current_thread()
            try:
                started = now = time.monotonic()
                for watch in self._watch_list:
                    # A time-only schedule that is not due costs no provider call.
                    if now < watch.next_due:
                        continue
                    payload = self._poll(watch, False)
                    if payload is not None:
                        logged[watch.name] = payload
                self._last_poll_duration = time.monotonic() - started
                self._rounds += 1
                for queue in self._queues:
                    # The polling thread has ended: nobody else wakes them.
                    queue.wake()
            finally:
                self._polling_thread = None
        return logged

    _polling_thread: threading.Thread | None = None

    def _poll(self, watch: Watch, force: bool) -> dict[str, float] | None:
        """Poll one watch; return its payload when logged."""
        # A call that returns after the monitor started or stopped since
        # (one left behind as slow or hung) delivers nothing.
        epoch = self._epoch
        try:
            self._polls += 1
            raw = watch.call()
            if watch.counter_gated and not force and watch.below_threshold(raw):
                if watch.error_warned:
                    watch.error_warned = False
                return None
            now = time.monotonic()
            if not watch.active or epoch != self._epoch:
                return None
            payload = watch.evaluate(raw, now, force)
        except Exception as err:
            self._failed(watch, err)
            return None
        if watch.error_warned:
            watch.error_warned = False
        if payload is None:
            return None
        wall_time = time.time() if self._wants_timestamp else 0.0
        queues = self._queues
        if queues:
            # Background mode: every sink's sender thread delivers it.
            item = (payload, watch.step, wall_time, watch.name)
            for queue in queues:
                # SinkQueue.put's common case, inline: this runs per payload.
                pending = queue.pending
                if len(pending) < queue.size and not queue.dropping:
                    pending.append(item)
                else:
                    queue.put(item)
        elif not self._deliver_now(watch, payload, wall_time):
            return None
        watch.commit(now)
        self._logged += 1
        return payload

    def _deliver_now(
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
                if first_error is None:
                    first_error = err
                self._sink_failed(sink, watch.name, err)
                continue
            if sink.failing:
                sink.failing = False
            delivered = True
        if first_error is not None and self._on_error == "raise":
            raise first_error
        return delivered

    def _finished_run(self) -> None:
        self._rounds += 1
        for queue in self._queues:
            queue.wake()

    # -- failures ---------------------------------------------------------

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

    def _sink_failed(self, sink: Sink, watch_name: str, err: Exception) -> None:
        self._errors += 1
        if self._on_error == "raise" and self._queues:
            # Raised on the polling thread at its next poll, ending it.
            self._sink_error = err
        if self._on_error == "warn" and not sink.failing:
            if watch_name:
                logger.warning(
                    "LoggerMonitor failed to log watch %r to sink %s: %r. Further "
                    "errors of this sink will be silent until it recovers.",
                    watch_name,
                    sink.name,
                    err,
                )
            else:
                logger.warning(
                    "LoggerMonitor failed to flush sink %s: %r.", sink.name, err
                )
        sink.failing = True

    def _sink_recovered(self, sink: Sink) -> None:
        if sink.failing:
            sink.failing = False

    def _queue_dropped(self, queue: SinkQueue) -> None:
        self._dropped += 1
        if not queue.dropping and self._on_error == "warn":
            logger.warning(
                "LoggerMonitor dropped the oldest pending payload of sink %s: its "
                "queue of %d is full (the sink is slower than the polls). Further "
                "drops are counted silently until the queue has room again.",
                queue.sink.name,
                queue.size,
            )

    def _hung(self, watch: Watch) -> None:
        self._timeouts += 1
        # One warning per streak of overrunning calls, like errors.
        if self._on_error != "ignore" and watch.overruns <= 1:
            logger.warning(
                "LoggerMonitor skipped watch %r: its stats() call has not returned "
                "within poll_timeout=%ss. The other watches go on; this one is "
                "polled again once the call returns. Further overruns are counted "
                "silently until a call returns in time.",
                watch.name,
                watch.poll_timeout,
            )

    def _stalled(self, watch: Watch, stuck_for: float) -> None:
        logger.warning(
            "LoggerMonitor: watch %r has made no progress (%s) for %.1fs "
            "(stall_after=%ss); its payloads carry %s/stalled = 1.0 until it "
            "moves again.",
            watch.name,
            watch.progress_key,
            stuck_for,
            watch.stall_after,
            watch.name,
        )

    def _pending_sink_error(self) -> BaseException | None:
        error, self._sink_error = self._sink_error, None
        return error

    # -- lifecycle --------------------------------------------------------

    def start(self) -> LoggerMonitor:
        """Start the background polling thread (nothing to start when ``background=False``).

        The first background poll happens one ``poll_interval`` after start.
        A stopped monitor can be started again. Returns the monitor.
        """
        with self._lock:
            if self._background and self._poller is None:
                for watch in self._watch_list:
                    _refuse_hazard(watch.target, watch.provider, watch.stats_kwargs)
            self._stopped = False
            self._started = True
            if not self._background or self._poller is not None:
                return self
            self._queues = tuple(
                SinkQueue(
                    sink,
                    size=self._queue_size,
                    on_failure=self._sink_failed,
                    on_success=self._sink_recovered,
                    on_drop=self._queue_dropped,
                )
                for sink in self._sinks
            )
            for queue in self._queues:
                queue.start()
            self._epoch += 1
            self._poller = Poller(
                poll=self._poll,
                watches=lambda: self._watch_list,
                interval=self._poll_interval,
                after_run=self._finished_run,
                on_hung=self._hung,
                pending_error=self._pending_sink_error,
            )
            self._poller.start()
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
        deadline = time.monotonic() + self._stop_timeout
        with self._lock:
            poller, self._poller = self._poller, None
            lifecycle.stopped(self)
        if poller is not None:
            poller.stop(deadline=deadline - 0.4 * self._stop_timeout)
        self._epoch += 1
        if self._stopped:
            return
        self._stopped = True
        watches = [
            watch
            for watch in self._watch_list
            if (watch.log_on_close if log_final is None else log_final)
        ]
        final_deadline = deadline - 0.2 * self._stop_timeout
        for watch in watches:
            # A slow call left behind within its poll_timeout may come back
            # in time for the final snapshot.
            timeout = watch.poll_timeout or math.inf
            limit = min(final_deadline, watch.detached_at + timeout)
            while watch.detached and not watch.hung and time.monotonic() < limit:
                time.sleep(0.005)
        for watch in watches:
            if watch.detached:
                logger.warning(
                    "LoggerMonitor logged no final snapshot of watch %r: its "
                    "stats() call is still %s.",
                    watch.name,
                    "hung" if watch.hung else "outstanding",
                )
        # With on_error="raise" a failed final snapshot is raised, but only
        # once the sinks have been drained and flushed.
        error: BaseException | None = None
        try:
            self._final_snapshots(watches, final_deadline)
        except Exception as err:
            error = err
        # A final snapshot's call that is still out delivers nothing later.
        self._epoch += 1
        queues, self._queues = self._queues, ()
        if queues:
            for queue in queues:
                queue.wake()
            for queue in queues:
                discarded = queue.close(deadline)
                if discarded is not None:
                    self._dropped += discarded
                    logger.warning(
                        "LoggerMonitor stopped without draining sink %s: it did "
                        "not return within stop_timeout=%ss; %d pending payloads "
                        "were dropped, and it gets no more calls from this run.",
                        queue.sink.name,
                        self._stop_timeout,
                        discarded,
                    )
            sink_error = self._pending_sink_error()
            if error is None and self._on_error == "raise":
                error = sink_error
        else:
            for sink in self._sinks:
                try:
                    sink.flush()
                except Exception as err:
                    self._sink_failed(sink, "", err)
                    if error is None and self._on_error == "raise":
                        error = err
        if error is not None:
            raise error

    def _final_snapshots(self, watches: list[Watch], deadline: float) -> None:
        pending = [watch for watch in watches if not watch.detached]
        if not pending:
            return
        run = Run(pending, force=True, deadline=deadline)
        finisher = Poller(
            poll=self._poll,
            watches=lambda: pending,
            interval=self._poll_interval,
            after_run=self._finished_run,
            on_hung=self._hung_at_stop,
            pending_error=self._pending_sink_error,
        )
        finisher.run_final(run)
        if run.error is not None:
            # on_error="raise": the first failure ends the final snapshots.
            raise run.error
        for watch in run.unfinished:
            if not watch.detached:
                logger.warning(
                    "LoggerMonitor logged no final snapshot of watch %r: "
                    "stop_timeout=%ss ran out first.",
                    watch.name,
                    self._stop_timeout,
                )

    def _hung_at_stop(self, watch: Watch) -> None:
        self._timeouts += 1
        logger.warning(
            "LoggerMonitor logged no final snapshot of watch %r: its stats() call "
            "did not return within poll_timeout=%ss.",
            watch.name,
            watch.poll_timeout,
        )

    def _after_fork_in_child(self) -> None:
        for watch in self._watch_list:
            if watch.detached:
                watch.resume()
        self._setup_state()
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
        return {
            "watches": len(self._watch_list),
            "rounds": self._rounds,
            "polls": self._polls,
            "logged": self._logged,
            "errors": self._errors,
            "timeouts": self._timeouts,
            "dropped": self._dropped,
            "hung": sum(1 for watch in self._watch_list if watch.hung),
            "queued": sum(len(queue.pending) for queue in self._queues),
            "last_poll_duration_s": self._last_poll_duration,
        }

    def __repr__(self) -> str:
        poller = self._poller
        if poller is None:
            state = "idle"
        elif poller.alive:
            state = "running"
        else:
            state = "polling thread ended"
        return (
            f"LoggerMonitor({len(self._watch_list)} watches, "
            f"{len(self._sinks)} sinks, {state})"
        )


def _refuse_hazard(target: Any, provider: Any, stats_kwargs: Mapping[str, Any]) -> None:
    reason = background_hazard(target, provider, stats_kwargs)
    if reason is not None:
        raise ValueError(f"A background LoggerMonitor refuses this watch: {reason}")


def _check_timeout(name: str, value: float | None) -> None:
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise ValueError(
            f"{name} must be a positive number of seconds or None, got {value!r}."
        )
