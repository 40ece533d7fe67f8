"""The poll logic of one watch: due-ness, baselines and rates.

Plain, deterministic code: every decision takes the monotonic time ``now``
as an argument, so it is tested without sleeping. The monitor
(:mod:`rlpulse.monitor`) owns the threads, the clock and delivery.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

from rlpulse.schedules import Every, Schedule  # noqa: F401  (Every: doctests)
from rlpulse.snapshot import as_metric, counter_value, snapshot_of

__all__ = ["AGGREGATES", "RATE_NAMES", "Watch", "rate_name"]

AGGREGATES = ("mean", "min", "max")
"""What ``watch(..., aggregate=...)`` can compute over the polls between logs."""

RATE_NAMES: Mapping[str, str] = {
    "frames": "frames_per_second",
    "batches": "batches_per_second",
    "write_count": "writes_per_second",
    "worker_frames": "worker_frames_per_second",
    "sample_calls": "samples_per_second",
    "samples_returned": "samples_returned_per_second",
}
"""Known cumulative counters and the names of their per-second rates."""


def rate_name(key: str) -> str:
    """Return the name of the per-second rate of counter ``key``.

    Examples:
        >>> rate_name("write_count"), rate_name("episodes")
        ('writes_per_second', 'episodes_per_second')
    """
    return RATE_NAMES.get(key) or f"{key}_per_second"


class _CounterPart:
    """Threshold state of one counter part of a schedule."""

    __slots__ = ("interval", "key", "last_value", "next_threshold")

    def __init__(self, key: str, interval: float) -> None:
        self.key = key
        self.interval = interval
        self.next_threshold: float | None = None
        self.last_value: float | None = None

    def prime(self, value: float) -> None:
        self.next_threshold = (value // self.interval + 1) * self.interval
        self.last_value = value


class Watch:
    """One monitored target: its provider, its schedule and its poll state.

    :meth:`evaluate` turns one raw ``stats()`` result into the payload to
    log (or ``None`` when not due); :meth:`commit` records a delivered
    payload as the new baseline. Between the two the monitor delivers.

    Examples:
        >>> schedule = Every.counter("write_count", 10)
        >>> watch = Watch("buffer", provider=dict, schedule=schedule)
        >>> watch.evaluate({"write_count": 3}, now=0.0, force=False)
        {'buffer/write_count': 3.0}
        >>> watch.commit(now=0.0)
        >>> watch.evaluate({"write_count": 7}, now=1.0, force=False) is None
        True
        >>> watch.evaluate({"write_count": 12}, now=2.0, force=False)
        {'buffer/write_count': 12.0, 'buffer/writes_per_second': 4.5}
        >>> watch.step
        12
    """

    def __init__(
        self,
        name: str,
        *,
        provider: Callable[..., Any],
        target: Any = None,
        schedule: Schedule | None = None,
        step_key: str | None = None,
        stats_kwargs: Mapping[str, Any] | None = None,
        rate_keys: tuple[str, ...] | None = None,
        log_on_start: bool = True,
        log_on_close: bool = True,
        poll_timeout: float | None = None,
        aggregate: tuple[str, ...] = (),
        stall_after: float | None = None,
        progress_key: str | None = None,
        on_stall: Callable[[Watch, float], None] | None = None,
    ) -> None:
        unknown = [name for name in aggregate if name not in AGGREGATES]
        if unknown:
            raise ValueError(
                f"Unknown aggregate {unknown[0]!r}: choose from {', '.join(AGGREGATES)}."
            )
        if stall_after is not None and not stall_after > 0:
            raise ValueError(
                f"stall_after must be a positive number of seconds, got {stall_after!r}."
            )
        self.name = name
        self.poll_timeout = poll_timeout
        # Cleared by unwatch(): a poll in flight then delivers nothing.
        self.active = True
        # Set while a provider call was left behind by the polling thread
        # (background mode) and is still outstanding; hung once it has also
        # overrun poll_timeout.
        self.detached = False
        self.detached_at = 0.0
        self.hung = False
        # Provider calls in a row that overran poll_timeout: one warning a streak.
        self.overruns = 0
        self.target = target
        self.provider = provider
        self.stats_kwargs = dict(stats_kwargs or {})
        # What a poll calls: the provider, with its keyword arguments bound.
        self.call: Callable[[], Any] = (
            functools.partial(provider, **self.stats_kwargs)
            if self.stats_kwargs
            else provider
        )
        self.schedule = schedule
        parts = () if schedule is None else schedule.parts
        self.counter_parts = tuple(
            _CounterPart(part.key, part.interval)
            for part in parts
            if part.key is not None
        )
        self.seconds_intervals = tuple(
            part.interval for part in parts if part.kind == "seconds"
        )
        self._only_counter = (
            self.counter_parts[0]
            if len(self.counter_parts) == 1 and not self.seconds_intervals
            else None
        )
        if step_key is None and len(self.counter_parts) == 1:
            step_key = self.counter_parts[0].key
        self.step_key = step_key
        self.aggregate = tuple(aggregate)
        self.stall_after = stall_after
        if stall_after is not None:
            progress_key = progress_key or (
                self.counter_parts[0].key if len(self.counter_parts) == 1 else step_key
            )
            if progress_key is None:
                raise ValueError(
                    f"Watch {name!r}: stall detection needs a progress counter; pass "
                    "progress_key=, a counter schedule or step=."
                )
        self.progress_key = progress_key
        self.on_stall = on_stall
        self.stalled = False
        self._progress: float | None = None
        self._progress_time: float | None = None
        self._accumulated: dict[str, list[float]] = {}
        # Aggregation and stall detection need every poll: no shortcut.
        self.every_poll = bool(self.aggregate) or stall_after is not None
        if self.every_poll:
            self._only_counter = None
        # A watch on one counter schedule decides most polls from that
        # counter alone (below_threshold), before reading the clock.
        self.counter_gated = self._only_counter is not None
        self.rate_keys = rate_keys
        self.log_on_start = log_on_start
        self.log_on_close = log_on_close
        # A watch whose schedule is time only decides before calling its
        # provider: it is skipped until the monotonic time next_due.
        self.clock_gated = (
            bool(self.seconds_intervals)
            and not self.counter_parts
            and not self.every_poll
        )
        self.min_seconds = min(self.seconds_intervals, default=0.0)
        self.next_due = -math.inf
        self.baseline: dict[str, float] = {}
        self.baseline_time: float | None = None
        self.last_log_time: float | None = None
        self.has_logged = False
        self.error_warned = False
        self.step: int | None = None
        self._prefix = prefix = f"{name}/"
        self._pending: dict[str, float] = {}
        # Per raw key seen, its payload key.
        self._names: dict[Any, str] = {}
        # (snapshot key, payload key of its rate) of the rated counters:
        # those given, else the known counters as they are seen.
        self._rates: tuple[tuple[str, str], ...] = ()
        # (snapshot key, payload key, payload key of its rate or None) of
        # the entries the next poll needs: the rated ones and the step.
        self._kept: tuple[tuple[str, str, str | None], ...] = ()
        if rate_keys is not None:
            self._rates = tuple((key, prefix + rate_name(key)) for key in rate_keys)
            rated = dict(self._rates)
            self._kept = tuple(
                (key, prefix + key, rated.get(key))
                for key in dict.fromkeys((*rate_keys, step_key))
                if key is not None
            )

    def due_by_clock(self, now: float) -> bool:
        """Whether the provider needs calling at ``now``; false only for a time-only schedule not yet due.

        Examples:
            >>> watch = Watch("w", provider=dict, schedule=Every.seconds(5))
            >>> watch.due_by_clock(0.0)  # never polled: the first poll is needed
            True
            >>> watch.evaluate({}, now=0.0, force=False)
            {}
            >>> watch.commit(now=0.0)
            >>> watch.due_by_clock(4.0), watch.due_by_clock(5.0)
            (False, True)
        """
        return now >= self.next_due

    def below_threshold(self, raw: Any) -> bool:
        """Whether ``raw`` is, cheaply and surely, not due: its counter schedule is below threshold.

        The common case of a watch with one counter schedule and nothing
        else, decided from that counter alone, without the clock or the
        rest of the snapshot: the counter is below its next threshold and
        has not decreased. It records the counter as seen. ``False`` means
        "ask :meth:`evaluate`", which decides every other case.

        Examples:
            >>> watch = Watch("buffer", provider=dict, schedule=Every.counter("write_count", 10))
            >>> watch.below_threshold({"write_count": 3})  # never polled: no threshold yet
            False
            >>> watch.evaluate({"write_count": 3}, now=0.0, force=False)
            {'buffer/write_count': 3.0}
            >>> watch.commit(now=0.0)
            >>> watch.below_threshold({"write_count": 7}), watch.below_threshold({"write_count": 10})
            (True, False)
        """
        part = self._only_counter
        if part is None or type(raw) is not dict or self.baseline_time is None:
            return False
        value: Any = raw.get(part.key)
        kind = type(value)
        threshold = part.next_threshold
        last_value = part.last_value
        if (
            (kind is int or (kind is float and value - value == 0.0))
            and threshold is not None
            and value < threshold
            and (last_value is None or value >= last_value)
        ):
            part.last_value = value
            return True
        return False

    def evaluate(self, raw: Any, now: float, force: bool) -> dict[str, float] | None:
        """Return the payload due for ``raw`` at ``now``, or ``None``.

        A payload is every snapshot entry and every rate, keyed
        ``"<name>/<metric>"``; :attr:`step` is set alongside. ``force``
        makes it due whatever the schedule says. Whether a snapshot is due
        depends only on its counters: the whole snapshot is built when due
        (or when it becomes the first baseline).
        """
        observed = self._observe(snapshot_of(raw), now) if self.every_poll else None
        first_poll = self.baseline_time is None
        if (
            not force
            and (first_poll or self.schedule is not None)
            and not self._is_due(raw, now, first_poll)
        ):
            if first_poll:
                self.baseline = snapshot_of(raw) if observed is None else observed
                self._set_baseline_time(now)
            return None
        baseline_time = self.baseline_time
        if baseline_time is None or now <= baseline_time:
            elapsed = 0.0  # no rates yet
        else:
            elapsed = now - baseline_time
        if observed is None:
            payload = self._payload_of(raw, elapsed)
        else:
            payload = self._payload_of_snapshot(observed, 0.0)
            self._add_observations(payload)
            if elapsed:
                self._add_rates(payload, observed, elapsed)
        step_key = self.step_key
        if step_key is not None and step_key in self._pending:
            self.step = int(self._pending[step_key])
        else:
            self.step = None
        return payload

    def _payload_of(self, raw: Any, elapsed: float) -> dict[str, float]:
        # The payload with its rates (over ``elapsed`` seconds, when not 0),
        # and the part of the snapshot the next poll needs (kept as the
        # pending baseline: rated and step keys). This runs for every logged
        # poll: the common value types are tested by exact type first, a key
        # is named through one dict lookup, and the rates are computed while
        # the kept entries are collected.
        if type(raw) is not dict:
            return self._payload_of_snapshot(snapshot_of(raw), elapsed)
        names = self._names
        payload: dict[str, float] = {}
        for key, value in raw.items():
            kind = type(value)
            if kind is int:
                try:
                    # Exactly float(value), without the call.
                    value = value + 0.0
                except OverflowError:
                    continue
            elif kind is float:
                if value - value != 0.0:
                    continue
            elif kind is bool:
                value = 1.0 if value else 0.0
            elif kind is dict or isinstance(value, Mapping):
                return self._payload_of_snapshot(snapshot_of(raw), elapsed)
            else:
                value = as_metric(value)
                if value is None:
                    continue
            try:
                payload[names[key]] = value
            except KeyError:
                payload[self._name_key(key)] = value
        snapshot: dict[str, float] = {}
        baseline = self.baseline
        for name, payload_key, rate in self._kept:
            if payload_key in payload:
                snapshot[name] = current = payload[payload_key]
                if rate is not None and elapsed:
                    previous = baseline.get(name)
                    if previous is not None and current >= previous:
                        payload[rate] = (current - previous) / elapsed
        self._pending = snapshot
        return payload

    def _payload_of_snapshot(
        self, snapshot: dict[str, float], elapsed: float
    ) -> dict[str, float]:
        names = self._names
        payload: dict[str, float] = {}
        for key, value in snapshot.items():
            try:
                payload[names[key]] = value
            except KeyError:
                payload[self._name_key(key)] = value
        self._pending = snapshot
        if elapsed:
            self._add_rates(payload, snapshot, elapsed)
        return payload

    def _add_rates(
        self, payload: dict[str, float], snapshot: dict[str, float], elapsed: float
    ) -> None:
        baseline = self.baseline
        for name, rate in self._rates:
            current = snapshot.get(name)
            if current is None:
                continue
            previous = baseline.get(name)
            if previous is not None and current >= previous:
                payload[rate] = (current - previous) / elapsed

    def _observe(self, snapshot: dict[str, float], now: float) -> dict[str, float]:
        if self.aggregate:
            counters = RATE_NAMES if self.rate_keys is None else self.rate_keys
            accumulated = self._accumulated
            for key, value in snapshot.items():
                if key in counters:
                    continue
                seen = accumulated.get(key)
                if seen is None:
                    accumulated[key] = [1.0, value, value, value]
                else:
                    seen[0] += 1.0
                    seen[1] += value
                    if value < seen[2]:
                        seen[2] = value
                    if value > seen[3]:
                        seen[3] = value
        if self.stall_after is not None:
            self._observe_progress(snapshot.get(self.progress_key or ""), now)
        return snapshot

    def _observe_progress(self, progress: float | None, now: float) -> None:
        previous = self._progress
        if progress is not None:
            self._progress = progress
        if self._progress_time is None or (
            progress is not None and (previous is None or progress != previous)
        ):
            # The first poll, progress, or a reset (a decrease): the clock
            # restarts.
            self._progress_time = now
            self.stalled = False
            return
        stuck_for = now - self._progress_time
        if not self.stalled and stuck_for >= (self.stall_after or math.inf):
            self.stalled = True
            if self.on_stall is not None:
                self.on_stall(self, stuck_for)

    def _add_observations(self, payload: dict[str, float]) -> None:
        prefix = self._prefix
        for key, (count, total, low, high) in self._accumulated.items():
            for aggregate in self.aggregate:
                if aggregate == "mean":
                    value = total / count
                elif aggregate == "min":
                    value = low
                else:
                    value = high
                payload[f"{prefix}{key}_{aggregate}"] = value
        if self.stall_after is not None:
            payload[f"{prefix}stalled"] = 1.0 if self.stalled else 0.0

    def commit(self, now: float) -> None:
        """Record the payload last returned by :meth:`evaluate` as delivered at ``now``."""
        if self._accumulated:
            self._accumulated = {}
        self.baseline = self._pending
        self.last_log_time = now
        self.has_logged = True
        self.baseline_time = now
        if self.clock_gated:
            self._set_next_due()

    def mark_detached(self, since: float) -> None:
        """Skip this watch while its slow provider call, running since ``since``, is outstanding."""
        self.detached = True
        self.detached_at = since
        self.next_due = math.inf

    def mark_hung(self) -> None:
        """Skip this watch while its overrunning provider call is outstanding.

        Counts the overrun in :attr:`overruns`, the current streak of calls
        that overran, which a call returning in time ends.
        """
        self.detached = True
        self.hung = True
        self.next_due = math.inf
        self.overruns += 1

    def resume(self) -> None:
        """Poll this watch again: its provider call returned."""
        if not self.hung:
            # It returned within poll_timeout: any overrun streak ends.
            self.overruns = 0
        self.detached = False
        self.hung = False
        self._set_next_due()

    def _set_baseline_time(self, now: float) -> None:
        self.baseline_time = now
        if self.clock_gated:
            self._set_next_due()

    def _set_next_due(self) -> None:
        if not self.clock_gated:
            self.next_due = -math.inf
            return
        reference = self.last_log_time
        if reference is None:
            reference = self.baseline_time
        self.next_due = -math.inf if reference is None else reference + self.min_seconds

    def _name_key(self, key: Any) -> str:
        # Name a snapshot key seen for the first time: its payload key, and
        # whether the next poll needs it (its default rate, or the step).
        name = key if type(key) is str else str(key)
        payload_key = self._prefix + name
        self._names[key] = payload_key
        if self.rate_keys is None:
            # The rated and kept entries of given rate_keys are set up front.
            rate = RATE_NAMES.get(name)
            rate_key = None if rate is None else self._prefix + rate
            if rate_key is not None:
                self._rates += ((name, rate_key),)
            if rate_key is not None or name == self.step_key:
                self._kept += ((name, payload_key, rate_key),)
        return payload_key

    def _is_due(self, raw: Any, now: float, first_poll: bool) -> bool:
        if first_poll and not self.has_logged:
            if self.log_on_start:
                for part in self.counter_parts:
                    value = counter_value(raw, part.key)
                    if value is not None:
                        part.prime(value)
                return True
            if self.schedule is None:
                # log_on_start=False: the first poll only records the baseline.
                return False
        if self.schedule is None:
            return True
        due = False
        if self.seconds_intervals:
            reference = self.last_log_time
            if reference is None:
                reference = self.baseline_time
            if reference is not None:
                elapsed = now - reference
                for interval in self.seconds_intervals:
                    if elapsed >= interval:
                        due = True
        reset = False
        for part in self.counter_parts:
            value = counter_value(raw, part.key)
            if value is None:
                continue
            if part.next_threshold is None:
                part.prime(value)
                continue
            last_value = part.last_value
            if last_value is not None and value < last_value:
                # A reset (empty(), a state restore): rates and clock restart
                # from this snapshot.
                part.prime(value)
                reset = True
                continue
            part.last_value = value
            if value >= part.next_threshold:
                part.next_threshold = (value // part.interval + 1) * part.interval
                due = True
        if reset:
            self.baseline = snapshot_of(raw)
            self._set_baseline_time(now)
            return False
        return due
