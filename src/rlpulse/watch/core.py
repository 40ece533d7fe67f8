"""The :class:`Watch`: one poll's decision, in stages, and the :class:`Logged` value it returns.

Given one raw ``stats()`` result at monotonic time ``now``, :meth:`Watch.evaluate`
says whether a payload is due and returns what to log; :meth:`Watch.commit`
makes a delivered one the watch's last log. Plain, deterministic code: the
clock is an argument, so it is tested without sleeping.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from rlpulse.distributions import IntervalQuantiles, Intervals
from rlpulse.metrics import RATE_NAMES, add_rates, collect, finite_counter, snapshot_of
from rlpulse.naming import Kind
from rlpulse.schedules import Every  # noqa: F401  (the doctests)
from rlpulse.watch.schedule import ScheduleState
from rlpulse.watch.spec import WatchSpec
from rlpulse.watch.stages import (
    Aggregates,
    Baseline,
    Kinds,
    NamedEntries,
    Naming,
    Stall,
    WatchEvents,
    WorkerLoss,
)

__all__ = ["Logged", "Watch"]

# A target without histograms() has no distributions.
_NO_INTERVALS = Intervals({}, {})


class Logged(NamedTuple):
    """What a watch logs at one poll (:meth:`Watch.evaluate`), and what it becomes once delivered (:meth:`Watch.commit`).

    Examples:
        >>> watch = Watch(WatchSpec("buffer", provider=dict))
        >>> logged = watch.evaluate({"write_count": 3, "size": 3}, now=0.0, force=False)
        >>> logged.payload, logged.step, logged.snapshot
        ({'buffer/write_count': 3.0, 'buffer/size': 3.0}, None, {'write_count': 3.0})
    """

    payload: dict[str, float]
    """Every snapshot entry and every rate, keyed ``"<watch>/<metric>"``."""
    step: int | None
    """The step key's value, when the watch has one and the snapshot holds it."""
    kinds: Mapping[str, Kind]
    """The kind of each payload key (and of every key the watch logged before)."""
    snapshot: dict[str, float]
    """The rated and step entries: what the next rates count from."""
    alive: float | None
    """The payload's ``workers_alive``, to notice a worker lost."""
    finished: float | None
    """The payload's ``workers_finished``: workers gone from ``alive`` that were not lost."""
    intervals: Intervals
    """The target's distributions over the interval this payload closes: each key's histogram, by payload key."""


class Watch:
    """One monitored target: its :class:`WatchSpec` and its schedule state.

    :meth:`evaluate` turns one raw ``stats()`` result into the payload to
    log (or ``None`` when not due); :meth:`commit` records a delivered
    payload as the new baseline. Between the two the runtime delivers.

    Examples:
        >>> schedule = Every.counter("write_count", 10)
        >>> watch = Watch(WatchSpec("buffer", provider=dict, schedule=schedule))
        >>> logged = watch.evaluate({"write_count": 3}, now=0.0, force=False)
        >>> logged.payload, logged.step
        ({'buffer/write_count': 3.0}, 3)
        >>> watch.commit(logged, now=0.0)
        >>> watch.evaluate({"write_count": 7}, now=1.0, force=False) is None
        True
        >>> logged = watch.evaluate({"write_count": 12}, now=2.0, force=False)
        >>> logged.payload, logged.step
        ({'buffer/write_count': 12.0, 'buffer/writes_per_second': 4.5}, 12)
    """

    def __init__(self, spec: WatchSpec, events: WatchEvents | None = None) -> None:
        self.spec = spec
        self.name = name = spec.name
        self.events = events
        self._alive_key = f"{name}/workers_alive"
        self._finished_key = f"{name}/workers_finished"
        self._worker_loss = WorkerLoss(self._workers_lost)
        # Registered: unwatch() clears it; a poll in flight delivers nothing.
        self.active = True
        # What a poll calls: the provider, with its keyword arguments bound.
        self.call: Callable[[], Any] = (
            functools.partial(spec.provider, **spec.stats_kwargs)
            if spec.stats_kwargs
            else spec.provider
        )
        self.schedule_state = state = ScheduleState(spec.schedule)
        # Read at every poll: the spec's answers, kept at hand.
        self._scheduled = spec.schedule is not None
        self._step_key = spec.step_key
        # Aggregation and stall detection need every poll: no shortcut.
        self.every_poll = bool(spec.aggregate) or spec.stall_after is not None
        # One counter schedule alone: most polls decided by it (below_threshold).
        self._only_counter = (
            state.counters[0]
            if len(state.counters) == 1 and not state.seconds and not self.every_poll
            else None
        )
        self.counter_gated = self._only_counter is not None
        # A watch whose schedule is time only decides before calling its
        # provider: it is skipped until the monotonic time next_due.
        self.clock_gated = (
            bool(state.seconds) and not state.counters and not self.every_poll
        )
        self.next_due = -math.inf
        # When a polling thread last called it (time.monotonic()).
        self.polled_at = -math.inf
        counters = RATE_NAMES if spec.rate_keys is None else spec.rate_keys
        self._aggregates = (
            Aggregates(spec.aggregate, counters) if spec.aggregate else None
        )
        progress = spec.progress_key or ()
        self._stall = (
            None
            if spec.stall_after is None
            else Stall(
                (progress,) if isinstance(progress, str) else progress,
                spec.stall_after,
                self._stalled,
            )
        )
        histograms = getattr(spec.target, "histograms", None)
        # The target's distributions, logged as quantiles and handed to the
        # sinks as histograms of each interval.
        self.quantiles = (
            IntervalQuantiles(histograms, tuple(spec.quantiles))
            if callable(histograms)
            else None
        )
        self._baseline = Baseline()
        self.has_logged = False
        self._prefix = f"{name}/"
        self._naming = Naming(spec, self._prefix)
        self._kinds = Kinds(spec, self._naming, self._prefix)
        named = NamedEntries(spec)
        self._unchecked: NamedEntries | None = named if named.unseen else None

    @property
    def stalled(self) -> bool:
        """Whether stall detection finds this watch without progress for ``stall_after`` seconds."""
        return self._stall is not None and self._stall.stalled

    def seconds_without_progress(self) -> float | None:
        """The seconds its stall clock has been polled without progress (``None`` without ``stall_after`` or a poll)."""
        return None if self._stall is None else self._stall.seconds_without_progress()

    @property
    def baseline_time(self) -> float | None:
        """When the snapshot the next rates count from was taken (``None``: never polled)."""
        return self._baseline.time

    def _stalled(self, stalled: bool, seconds: float) -> None:
        if self.events is not None:
            self.events.stalled(self, stalled, seconds)

    def _workers_lost(self, alive: float, before: float, lost: float) -> None:
        if self.events is not None:
            self.events.workers_lost(self, alive, before, lost)

    @property
    def kinds(self) -> Mapping[str, Kind]:
        """The :class:`~rlpulse.naming.Kind` of each payload key this watch has logged.

        Examples:
            >>> watch = Watch(WatchSpec("buffer", provider=dict))
            >>> watch.poll({"write_count": 3, "size": 3}, now=0.0)
            {'buffer/write_count': 3.0, 'buffer/size': 3.0}
            >>> _ = watch.poll({"write_count": 5, "size": 5}, now=1.0)
            >>> {key: str(kind) for key, kind in watch.kinds.items()}
            {'buffer/write_count': 'counter', 'buffer/size': 'gauge', 'buffer/writes_per_second': 'rate'}
        """
        return self._kinds.by_key

    @property
    def step_key(self) -> str | None:
        """The snapshot entry used as the logging step (see :class:`WatchSpec`)."""
        return self.spec.step_key

    def below_threshold(self, raw: Any) -> bool:
        """Whether ``raw`` is, cheaply and surely, not due: its counter schedule is below threshold.

        The common case of a watch with one counter schedule and nothing
        else, decided from that counter alone, without the clock or the
        rest of the snapshot: the counter is below its next threshold and
        has not decreased. It records the counter as seen. ``False`` means
        "ask :meth:`evaluate`", which decides every other case.

        Examples:
            >>> watch = Watch(WatchSpec("buffer", provider=dict, schedule=Every.counter("write_count", 10)))
            >>> watch.below_threshold({"write_count": 3})  # never polled: no threshold yet
            False
            >>> watch.poll({"write_count": 3}, now=0.0)
            {'buffer/write_count': 3.0}
            >>> watch.below_threshold({"write_count": 7}), watch.below_threshold({"write_count": 10})
            (True, False)
        """
        part = self._only_counter
        if part is None or type(raw) is not dict or self.baseline_time is None:
            return False
        value = finite_counter(raw.get(part.key))
        threshold = part.next_threshold
        last_value = part.last_value
        if (
            value is not None
            and threshold is not None
            and value < threshold
            and (last_value is None or value >= last_value)
        ):
            part.last_value = value
            return True
        return False

    def evaluate(self, raw: Any, now: float, force: bool) -> Logged | None:
        """Return what to log of ``raw`` at ``now``, or ``None`` when nothing is due.

        ``force`` makes it due whatever the schedule says. Whether a
        snapshot is due depends only on its counters: the whole snapshot is
        built when due (or when it becomes the first baseline). The watch
        changes only by what every poll observes (its schedule's counters,
        aggregates, stall clock); what a log changes waits for
        :meth:`commit` of the value returned.
        """
        if self._unchecked is not None and not self._unchecked.check(raw, self):
            self._unchecked = None
        observed = None
        if self.every_poll:
            observed = snapshot_of(raw)
            if self._aggregates is not None:
                self._aggregates.observe(observed)
            if self._stall is not None:
                self._stall.observe(observed, now)
        first_poll = self._baseline.time is None
        if (
            not force
            and (first_poll or self._scheduled)
            and not self._is_due(raw, now, first_poll)
        ):
            if first_poll:
                self._start(snapshot_of(raw) if observed is None else observed, now)
            return None
        baseline, baseline_time = self._baseline.rates_from(now, force)
        if baseline_time is None or now <= baseline_time:
            elapsed = 0.0  # no rates yet
        else:
            elapsed = now - baseline_time
        if observed is None:
            payload, kept = self._payload_of(raw, baseline, elapsed)
        else:
            payload, kept = self._payload_of_snapshot(observed), observed
            if self._aggregates is not None:
                self._aggregates.add_to(payload, self._prefix)
            if self._stall is not None:
                self._stall.add_to(payload, self._prefix)
            if elapsed:
                rates = self._naming.rates
                add_rates(payload, observed, baseline, rates, elapsed)
        intervals = (
            _NO_INTERVALS
            if self.quantiles is None
            else self.quantiles.add_to(payload, self._prefix)
        )
        step_key = self._step_key
        step = None
        if step_key is not None and step_key in kept:
            step = int(kept[step_key])
        return Logged(
            payload,
            step,
            self._kinds.note(payload),
            kept,
            payload.get(self._alive_key),
            payload.get(self._finished_key),
            intervals,
        )

    def _payload_of(
        self, raw: Any, baseline: dict[str, float], elapsed: float
    ) -> tuple[dict[str, float], dict[str, float]]:
        """The payload, rates from ``baseline`` over ``elapsed`` s (if not 0), and its rated and step entries, kept for the next poll."""
        if type(raw) is not dict and not isinstance(raw, Mapping):
            snapshot_of(raw)  # raises the error that says what is wrong
        payload: dict[str, float] = {}
        naming = self._naming
        collect(raw, payload, self._prefix, naming.names, naming.name_new)
        snapshot: dict[str, float] = {}
        for name, payload_key in naming.kept:
            if payload_key in payload:
                snapshot[name] = payload[payload_key]
        if elapsed:
            add_rates(payload, snapshot, baseline, naming.rates, elapsed)
        return payload, snapshot

    def _payload_of_snapshot(self, snapshot: dict[str, float]) -> dict[str, float]:
        names = self._naming.names
        name_new = self._naming.name_new
        return {
            names.get(key) or name_new(key): value for key, value in snapshot.items()
        }

    def poll(
        self,
        raw: Any,
        now: float,
        *,
        force: bool = False,
        scheduled: float | None = None,
        poll_interval: float = 0.0,
    ) -> dict[str, float] | None:
        """Evaluate ``raw`` at ``now`` and commit what is logged, as a poll whose payload was delivered: the payload, or ``None``.

        Examples:
            >>> watch = Watch(WatchSpec("buffer", provider=dict, schedule=Every.counter("write_count", 10)))
            >>> watch.poll({"write_count": 3}, now=0.0)
            {'buffer/write_count': 3.0}
            >>> watch.poll({"write_count": 7}, now=1.0) is None
            True
            >>> watch.poll({"write_count": 12}, now=2.0)
            {'buffer/write_count': 12.0, 'buffer/writes_per_second': 4.5}
        """
        logged = self.evaluate(raw, now, force)
        if logged is None:
            return None
        self.commit(logged, now, scheduled, poll_interval)
        return logged.payload

    def commit(
        self,
        logged: Logged,
        now: float,
        scheduled: float | None = None,
        poll_interval: float = 0.0,
    ) -> None:
        """Make ``logged``, returned by :meth:`evaluate` and delivered at ``now``, the watch's last log.

        ``scheduled``: when the polling thread's round was due, ``None``
        for a ``step()`` or a final snapshot (see
        :meth:`ScheduleState.logged`).
        """
        if self._aggregates is not None:
            self._aggregates.reset()
        if self.quantiles is not None:
            self.quantiles.commit(logged.intervals.marks)
        self._worker_loss.logged(logged.alive, logged.finished)
        self._baseline.logged(logged.snapshot, now)
        self.has_logged = True
        self.schedule_state.logged(now, scheduled, poll_interval)
        self.schedule_next()

    def restart(self) -> None:
        """Forget the baseline and the seconds: the monitor was stopped, and is started again.

        No rate spans the time it was stopped: the next poll is the new
        baseline (logged if its schedule says so, without rates), and the
        seconds count from it. ``log_on_start`` does not log it again, as in
        TorchRL. A stall goes on until the watch makes progress.
        """
        self._baseline.forget()
        self.schedule_state.seconds_due_at = math.inf
        if self._stall is not None:
            self._stall.restart()
        self.schedule_next()

    def after_fork(self) -> None:
        """Start afresh in a forked child, as after :meth:`restart`, and not stalled.

        The parent's stall is the parent's to end; the child's monitor, a
        copy not yet polling, notices a stall of its own after
        ``stall_after`` seconds of its own polls without progress.
        """
        if self._stall is not None:
            self._stall.forget()
        self.restart()

    def schedule_next(self) -> None:
        """Set :attr:`next_due`: for a time-only schedule, when its seconds are next due (``-inf``: call it).

        The one rule of which watches a round calls: those whose
        ``next_due`` is not after the round's time (see
        :class:`~rlpulse.runtime.agenda.Agenda`).

        Examples:
            >>> watch = Watch(WatchSpec("w", provider=dict, schedule=Every.seconds(5)))
            >>> watch.next_due  # never polled: the first poll is needed
            -inf
            >>> watch.poll({}, now=0.0)
            {}
            >>> watch.next_due
            5.0
        """
        if self.clock_gated and self._baseline.time is not None:
            self.next_due = self.schedule_state.seconds_due_at
        else:
            self.next_due = -math.inf

    def _start(self, snapshot: dict[str, float], now: float) -> None:
        # Rates and the seconds count from snapshot, afresh.
        self._baseline.start(snapshot, now)
        self.schedule_state.count_from(now)
        self.schedule_next()

    def _is_due(self, raw: Any, now: float, first_poll: bool) -> bool:
        schedule = self.spec.schedule
        if first_poll and not self.has_logged:
            if self.spec.log_on_start:
                self.schedule_state.prime(raw)
                return True
            if schedule is None:
                # log_on_start=False: the first poll only records the baseline.
                return False
        if schedule is None:
            return True
        due = self.schedule_state.seconds_due(now)
        counted_due, reset = self.schedule_state.counters_due(raw)
        if reset:
            self._start(snapshot_of(raw), now)
            return False
        return due or counted_due
