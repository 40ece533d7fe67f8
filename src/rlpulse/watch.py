"""A watch: its frozen configuration, its schedule state and the pure decision.

Given one raw ``stats()`` result at monotonic time ``now``, :meth:`Watch.evaluate`
says whether a payload is due and builds it; :meth:`Watch.commit` records a
delivered payload as the new baseline. Plain, deterministic code: the clock
is an argument, so it is tested without sleeping. Who calls providers, on
which thread, and what happens to a call that does not return is the
runtime's business (:mod:`rlpulse.runtime`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from rlpulse.distributions import (
    DEFAULT_QUANTILES,
    IntervalQuantiles,
    Intervals,
    check_quantiles,
)
from rlpulse.metrics import (
    RATE_NAMES,
    add_rates,
    collect,
    counter_value,
    finite_counter,
    rate_name,
    snapshot_of,
)
from rlpulse.naming import Kind
from rlpulse.schedules import AnyOf, Every, Schedule
from rlpulse.targets import adapt

__all__ = ["AGGREGATES", "Logged", "Watch", "WatchSpec", "Watches", "provider_of"]

# A target without histograms() has no distributions.
_NO_INTERVALS = Intervals({}, {})

AGGREGATES = ("mean", "min", "max")
"""What ``watch(..., aggregate=...)`` can compute over the polls between logs."""


def provider_of(
    target: Any, stats_fn: Callable[..., Any] | None, poll_timeout: float | None
) -> tuple[Any, Callable[..., Any], str]:
    """Return what a watch polls for ``target``, its provider, and the watch's default name.

    Without ``stats_fn`` the provider is the ``stats`` method of the target,
    as its kind wants it polled (:func:`rlpulse.targets.adapt`).

    Examples:
        >>> provider_of(object(), None, 5.0)
        Traceback (most recent call last):
        ...
        TypeError: Cannot watch object of type object: it does not expose a callable stats() method and no stats_fn was provided.
    """
    if stats_fn is not None:
        return target, stats_fn, type(target).__name__.lower()
    target, default_name = adapt(target, poll_timeout)
    provider = getattr(target, "stats", None)
    if not callable(provider):
        raise TypeError(
            f"Cannot watch object of type {type(target).__name__}: it does "
            "not expose a callable stats() method and no stats_fn was "
            "provided."
        )
    return target, provider, default_name


@dataclass(frozen=True)
class WatchSpec:
    """What a watch is, fixed at :meth:`rlpulse.LoggerMonitor.watch`: the options it was given.

    Attributes:
        name: prefix of the watch's metrics, unique in the monitor: a
            non-empty str without ``/`` (which separates the watch from its
            metrics); ``watch()`` defaults it to the target's class name in
            lower case (``_1``, ``_2``, … appended when taken).
        provider, stats_kwargs: what a poll calls (``stats_fn``, a callable,
            else ``target.stats``) and the keyword arguments it gets.
        target: the watched object.
        schedule: when to log: :class:`~rlpulse.Every` or a composite
            (``Every.counter("frames", 10_000) | Every.seconds(60)``);
            ``None`` logs at every poll.
        step_key: the snapshot entry used as the logging step (``step=``);
            defaults to the counter of a schedule with one counter part.
        rate_keys: the entries to derive per-second rates from, a tuple or
            list of names (a single str is refused, not split into
            characters); ``None``: the known counters (``frames``,
            ``write_count``, …).
        log_on_start: log the first poll whatever the schedule says; else
            it is the baseline only, and the first payload carries rates.
        log_on_close: log a final snapshot at ``stop()``.
        poll_timeout: the bound on one provider call in background mode.
        aggregate: any of ``"mean"``, ``"min"``, ``"max"``: also log
            ``<key>_mean`` (…) of every gauge over the polls since the
            previous logged snapshot, this one included.
        stall_after: seconds without progress of ``progress_key`` after
            which payloads carry ``<name>/stalled = 1.0`` (else ``0.0``),
            with one warning per stall.
        progress_key: defaults to the schedule's counter, else the step key;
            a tuple of entries is progress when any of them moves (a stall
            needs none of them to).
        quantiles: of each distribution the target's ``histograms()``
            returns (a :class:`~rlpulse.Tally`'s observed keys), log these
            quantiles of the observations since the previous logged snapshot,
            as ``<key>_p50`` (…); each from 0 to 1, default ``(0.5, 0.9,
            0.99)``; ``()`` logs none (:mod:`rlpulse.distributions`).

    Examples:
        >>> spec = WatchSpec("buffer", provider=dict, schedule=Every.counter("write_count", 10))
        >>> spec.step_key, spec.progress_key
        ('write_count', None)
        >>> WatchSpec("w", provider=dict, aggregate=("median",))
        Traceback (most recent call last):
        ...
        ValueError: Unknown aggregate 'median': choose from mean, min, max.
        >>> WatchSpec("w", provider=dict, rate_keys="frames")
        Traceback (most recent call last):
        ...
        TypeError: rate_keys takes a tuple or list of names, got the str 'frames': write rate_keys=('frames',).
    """

    name: str
    provider: Callable[..., Any]
    target: Any = None
    schedule: Schedule | None = None
    step_key: str | None = None
    stats_kwargs: Mapping[str, Any] = field(default_factory=dict)
    rate_keys: Sequence[str] | None = None
    log_on_start: bool = True
    log_on_close: bool = True
    poll_timeout: float | None = None
    aggregate: Sequence[str] = ()
    stall_after: float | None = None
    progress_key: str | Sequence[str] | None = None
    quantiles: Sequence[float] = DEFAULT_QUANTILES

    def __post_init__(self) -> None:
        _check_name(self.name)
        object.__setattr__(self, "quantiles", check_quantiles(self.quantiles))
        if not callable(self.provider):
            raise TypeError(
                f"Watch {self.name!r}: stats_fn must be a callable returning the "
                f"snapshot mapping, got {type(self.provider).__name__} "
                f"{self.provider!r}."
            )
        schedule = self.schedule
        if schedule is not None and not isinstance(schedule, (Every, AnyOf)):
            raise TypeError(
                "schedule must be an Every schedule (or a composite of them), "
                f"got {type(schedule).__name__}."
            )
        if self.rate_keys is not None:
            rate_keys = _entry_names("rate_keys", self.rate_keys)
            object.__setattr__(self, "rate_keys", rate_keys)
        object.__setattr__(self, "aggregate", _entry_names("aggregate", self.aggregate))
        unknown = [name for name in self.aggregate if name not in AGGREGATES]
        if unknown:
            raise ValueError(
                f"Unknown aggregate {unknown[0]!r}: choose from {', '.join(AGGREGATES)}."
            )
        _check_option_types(self)
        stall_after = self.stall_after
        if stall_after is not None and (
            not isinstance(stall_after, (int, float))
            or isinstance(stall_after, bool)
            or not stall_after > 0
        ):
            raise ValueError(
                f"stall_after must be a positive number of seconds, got {stall_after!r}."
            )
        counters = self.counter_keys
        step_key = self.step_key
        if step_key is None and len(counters) == 1:
            step_key = counters[0]
        object.__setattr__(self, "step_key", step_key)
        object.__setattr__(self, "stats_kwargs", dict(self.stats_kwargs))
        if stall_after is None:
            return
        progress_key = self.progress_key or (
            counters[0] if len(counters) == 1 else step_key
        )
        if progress_key is None:
            raise ValueError(
                f"Watch {self.name!r}: stall detection needs a progress counter; pass "
                "progress_key=, a counter schedule or step=."
            )
        object.__setattr__(self, "progress_key", progress_key)

    @property
    def counter_keys(self) -> tuple[str, ...]:
        """The keys of the schedule's counter parts, in order."""
        parts = () if self.schedule is None else self.schedule.parts
        return tuple(
            part.key
            for part in parts
            if part.kind == "counter" and part.key is not None
        )


def _check_option_types(spec: WatchSpec) -> None:
    """Refuse entry names that are not str, and ``stats_kwargs`` that is no mapping."""
    progress_key = spec.progress_key
    if isinstance(progress_key, (tuple, list)):
        progress_key = _entry_names("progress_key", progress_key)
        if not progress_key:
            raise ValueError("progress_key takes at least one entry name, got none.")
        object.__setattr__(spec, "progress_key", progress_key)
    for option, key in (("step", spec.step_key), ("progress_key", progress_key)):
        if key is not None and not isinstance(key, (str, tuple)):
            several = ", a tuple of them" if option == "progress_key" else ""
            raise TypeError(
                f"{option} takes the name (str) of a snapshot entry{several}, or "
                f"None; got {type(key).__name__} {key!r}."
            )
    if isinstance(spec.step_key, tuple):
        raise TypeError(f"step takes one entry name (str), got {spec.step_key!r}.")
    if not isinstance(spec.stats_kwargs, Mapping):
        raise TypeError(
            "stats_kwargs takes a mapping of keyword arguments for each "
            f"stats() call, got {type(spec.stats_kwargs).__name__} "
            f"{spec.stats_kwargs!r}."
        )


def _check_name(name: object) -> None:
    """Refuse a watch name that is not a non-empty str without ``/``.

    ``/`` separates the watch from its metric in every metric name
    (``collector/frames``), and readers split there.
    """
    if not isinstance(name, str):
        raise TypeError(
            f"A watch name must be a str, got {type(name).__name__} {name!r}."
        )
    if not name:
        raise ValueError(
            "A watch name must not be empty: pass a name such as 'collector', "
            "or None for the target's class name."
        )
    if "/" in name:
        raise ValueError(
            f"A watch name must not contain '/', got {name!r}: '/' separates "
            "the watch from its metrics (collector/frames); use '_' or '.'."
        )


def _entry_names(option: str, names: Any) -> tuple[str, ...]:
    """``names`` as a tuple of snapshot entry names; a single str is refused, not split."""
    if isinstance(names, str):
        raise TypeError(
            f"{option} takes a tuple or list of names, got the str {names!r}: "
            f"write {option}=({names!r},)."
        )
    try:
        entries = iter(names)
    except TypeError:
        raise TypeError(
            f"{option} takes a tuple or list of names, got {type(names).__name__} "
            f"{names!r}."
        ) from None
    checked: list[str] = []
    for name in entries:
        if not isinstance(name, str):
            raise TypeError(
                f"{option} takes names (str), got {type(name).__name__} {name!r}."
            )
        checked.append(name)
    return tuple(checked)


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


class _ScheduleState:
    """Where a schedule stands: its counter parts' thresholds, and when its seconds are next due."""

    def __init__(self, schedule: Schedule | None) -> None:
        parts = () if schedule is None else schedule.parts
        self.counters = tuple(
            _CounterPart(part.key, part.interval)
            for part in parts
            if part.kind == "counter" and part.key is not None
        )
        # Every seconds part counts from the same last log: the shortest decides.
        self.seconds = min(
            (part.interval for part in parts if part.kind == "seconds"), default=None
        )
        # The monotonic time the seconds are next due; never, until there is
        # a log or a baseline to count from.
        self.seconds_due_at = math.inf

    def seconds_due(self, now: float) -> bool:
        """Whether a seconds part is due at ``now``."""
        return now >= self.seconds_due_at

    def count_from(self, start: float) -> None:
        """The seconds are next due their interval after ``start``."""
        if self.seconds is not None:
            self.seconds_due_at = start + self.seconds

    def logged(self, now: float, scheduled: float | None, poll_interval: float) -> None:
        """A snapshot was logged at ``now``, by the polling thread's round due at ``scheduled`` (``None``: a ``step()``).

        By ``step()`` the seconds count from this log, as TorchRL's do. On
        the polling thread they keep their cadence: a log the seconds made
        due moves the due time on by whole intervals, to the first one
        after ``now``, so a round that ran late never pushes the next log
        later; any other log (the first, a counter's, a final one) counts
        them from when its round was due, unless it ran a whole poll
        interval late.
        """
        seconds = self.seconds
        if seconds is None:
            return
        if scheduled is None:
            self.count_from(now)
        elif now >= self.seconds_due_at:
            missed = math.floor((now - self.seconds_due_at) / seconds)
            self.seconds_due_at += (max(missed, 0) + 1) * seconds
        else:
            self.count_from(scheduled if now - scheduled < poll_interval else now)

    def prime(self, raw: Any) -> None:
        """Set every counter part's first threshold from ``raw``."""
        for part in self.counters:
            value = counter_value(raw, part.key)
            if value is not None:
                part.prime(value)

    def counters_due(self, raw: Any) -> tuple[bool, bool]:
        """Whether a counter part of ``raw`` crossed its threshold, and whether a counter was reset."""
        due = reset = False
        for part in self.counters:
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
        return due, reset


class _Observations:
    """What a watch that needs every poll sees between two logs: its gauges' aggregates, and its progress."""

    def __init__(self, watch: Watch) -> None:
        self.watch = watch
        spec = watch.spec
        self.aggregate = spec.aggregate
        self.counters = RATE_NAMES if spec.rate_keys is None else spec.rate_keys
        self.stall_after = spec.stall_after
        keys = spec.progress_key or ""
        self.progress_keys = (keys,) if isinstance(keys, str) else keys
        self.accumulated: dict[str, list[float]] = {}
        self.stalled = False
        self._progress: float | None = None
        self._progress_time: float | None = None
        # The last value of each of several progress entries.
        self._known: dict[str, float] = {}

    def observe(self, snapshot: dict[str, float], now: float) -> None:
        """Take one poll's ``snapshot`` at ``now`` into the aggregates and the stall clock."""
        if self.aggregate:
            accumulated = self.accumulated
            for key, value in snapshot.items():
                if key in self.counters:
                    continue
                seen = accumulated.get(key)
                if seen is None:
                    accumulated[key] = [1.0, value, value, value]
                else:
                    seen[0] += 1.0
                    seen[1] += value
                    seen[2] = min(seen[2], value)
                    seen[3] = max(seen[3], value)
        if self.stall_after is not None:
            keys = self.progress_keys
            if len(keys) == 1:
                progress: Any = snapshot.get(keys[0])
            else:
                # An entry missing from this snapshot keeps its last value:
                # one that comes and goes is no progress.
                known = self._known
                for key in keys:
                    latest = snapshot.get(key)
                    if latest is not None:
                        known[key] = latest
                progress = tuple(map(known.get, keys)) if known else None
            self._observe_progress(progress, now)

    def _observe_progress(self, progress: Any, now: float) -> None:
        previous = self._progress
        if progress is not None:
            self._progress = progress
        if self._progress_time is None or (
            progress is not None and (previous is None or progress != previous)
        ):
            # The first poll, progress, or a reset (a decrease): the clock
            # restarts.
            if self.stalled:
                self._tell(False, now - (self._progress_time or now))
            self._progress_time = now
            self.stalled = False
            return
        stuck_for = now - self._progress_time
        if not self.stalled and stuck_for >= (self.stall_after or math.inf):
            self.stalled = True
            self._tell(True, stuck_for)

    def _tell(self, stalled: bool, seconds: float) -> None:
        events = self.watch.events
        if events is not None:
            events.stalled(self.watch, stalled, seconds)

    def add_to(self, payload: dict[str, float], prefix: str) -> None:
        """Add ``<key>_<aggregate>`` of every gauge, and ``stalled``, to ``payload``."""
        for key, (count, total, low, high) in self.accumulated.items():
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

    def reset(self) -> None:
        """Start the aggregates afresh: a payload was delivered."""
        if self.accumulated:
            self.accumulated = {}


class WatchEvents(Protocol):
    """What a watch tells of its own health as it notices it (the monitor's reporter)."""

    def stalled(self, watch: Watch, stalled: bool, seconds: float) -> None:
        """No progress for ``seconds`` (``stalled``), or progress again after ``seconds`` without."""

    def workers_lost(self, watch: Watch, alive: float, before: float) -> None:
        """The snapshot's ``workers_alive`` fell from ``before`` to ``alive``."""

    def entry_missing(
        self, watch: Watch, option: str, key: str, entries: Sequence[str]
    ) -> None:
        """The first snapshot with entries has none named ``key``, though ``option`` names it."""


class _NamedEntries:
    """The entries a watch's options name, until each is seen in a snapshot or told missing.

    A typo (``Every.counter("frame", 10)`` for ``frames``) would otherwise
    never log, rate or step, silently: the first snapshot with entries that
    lacks a named one is told to the watch's events, once per entry. An
    empty snapshot (a tally nothing was written to yet) tells nothing.
    """

    def __init__(self, spec: WatchSpec) -> None:
        progress = spec.progress_key
        named = [
            *(("Every.counter", key) for key in spec.counter_keys),
            ("step", spec.step_key),
            *(("rate_keys", key) for key in spec.rate_keys or ()),
            *(
                ("progress_key", key)
                for key in (
                    (progress,) if isinstance(progress, str) else progress or ()
                )
            ),
        ]
        # Each entry once, under the first option that names it.
        self.unseen: dict[str, str] = {}
        for option, key in named:
            if key is not None:
                self.unseen.setdefault(key, option)

    def check(self, raw: Any, watch: Watch) -> bool:
        """Tell the entries ``raw`` lacks (when it has any); whether some are still to be checked."""
        snapshot = snapshot_of(raw)
        if not snapshot:
            return True
        for key, option in self.unseen.items():
            if key not in snapshot and watch.events is not None:
                watch.events.entry_missing(watch, option, key, sorted(snapshot))
        self.unseen = {}
        return False


class _Naming:
    """A watch's payload keys, named once per snapshot key, and which entries it rates and keeps."""

    __slots__ = (
        "kept",
        "name_new",
        "names",
        "prefix",
        "rate_keys",
        "rates",
        "step_key",
    )

    def __init__(self, spec: WatchSpec, prefix: str) -> None:
        self.prefix = prefix
        self.rate_keys = spec.rate_keys
        self.step_key = spec.step_key
        # Per raw snapshot key seen, its payload key; a new one is named once.
        self.names: dict[Any, str] = {}
        self.name_new = self.name_key
        # (snapshot key, payload key of its rate) of the rated counters:
        # those given, else the known counters as they are seen.
        self.rates: tuple[tuple[str, str], ...] = ()
        # (snapshot key, payload key) of the entries the next poll needs:
        # the rated ones and the step.
        self.kept: tuple[tuple[str, str], ...] = ()
        if spec.rate_keys is not None:
            # The rated and kept entries of given rate_keys are known up front.
            self.rates = tuple((key, prefix + rate_name(key)) for key in spec.rate_keys)
            self.kept = tuple(
                (key, prefix + key)
                for key in dict.fromkeys((*spec.rate_keys, spec.step_key))
                if key is not None
            )
        elif spec.step_key is not None:
            # Kept up front: a nested step key is never named on its own.
            self.kept = ((spec.step_key, prefix + spec.step_key),)

    def name_key(self, key: Any) -> str:
        """Name a new snapshot key: its payload key; the next poll needs its rate?"""
        name = key if type(key) is str else str(key)
        payload_key = self.prefix + name
        self.names[key] = payload_key
        if self.rate_keys is None:
            known = RATE_NAMES.get(name)
            if known is not None:
                self.rates += ((name, self.prefix + known),)
                if name != self.step_key:
                    self.kept += ((name, payload_key),)
        return payload_key


class _Kinds:
    """The kind of each payload key of one watch, decided once, where the watch names it.

    A rate the watch derives is a rate; an entry it rates (``rate_keys``,
    else the known counters) or schedules on (a counter schedule) is a
    counter, and so is one the target declares a counter through its
    optional ``metric_kinds()`` (``{entry: "counter" | "gauge"}``: a
    :class:`~rlpulse.Tally`'s ``inc()`` keys and observation counts);
    everything else (gauges, aggregates, quantiles, ``stalled``) is a gauge.
    """

    __slots__ = ("_counters", "_declared", "_naming", "_prefix", "by_key")

    def __init__(self, spec: WatchSpec, naming: _Naming, prefix: str) -> None:
        self.by_key: dict[str, Kind] = {}
        self._naming = naming
        self._prefix = prefix
        rated = RATE_NAMES if spec.rate_keys is None else spec.rate_keys
        self._counters = {*rated, *spec.counter_keys}
        declared = getattr(spec.target, "metric_kinds", None)
        self._declared: Callable[[], Mapping[str, Any]] | None = (
            declared if callable(declared) else None
        )

    def note(self, payload: Mapping[str, float]) -> Mapping[str, Kind]:
        """Decide the kind of each key of ``payload`` not seen before; return the kinds of every key seen."""
        new = [key for key in payload if key not in self.by_key]
        if not new:
            return self.by_key
        # A new mapping, never a changed one: payloads queued for the sinks
        # keep the one they were logged with, which no thread changes.
        by_key = self.by_key = dict(self.by_key)
        rates = {payload_key for _, payload_key in self._naming.rates}
        declared = self._declared() if self._declared is not None else {}
        start = len(self._prefix)
        for key in new:
            metric = key[start:]
            if key in rates:
                by_key[key] = Kind.RATE
            elif metric in self._counters or declared.get(metric) == Kind.COUNTER:
                by_key[key] = Kind.COUNTER
            else:
                by_key[key] = Kind.GAUGE
        return by_key


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
        # The workers_alive of the last logged snapshot, to notice a worker lost.
        self._alive: float | None = None
        self._alive_key = f"{name}/workers_alive"
        # Registered: unwatch() clears it; a poll in flight delivers nothing.
        self.active = True
        # What a poll calls: the provider, with its keyword arguments bound.
        self.call: Callable[[], Any] = (
            functools.partial(spec.provider, **spec.stats_kwargs)
            if spec.stats_kwargs
            else spec.provider
        )
        self.schedule_state = state = _ScheduleState(spec.schedule)
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
        self.observations = _Observations(self) if self.every_poll else None
        histograms = getattr(spec.target, "histograms", None)
        # The target's distributions, logged as quantiles and handed to the
        # sinks as histograms of each interval.
        self.quantiles = (
            IntervalQuantiles(histograms, tuple(spec.quantiles))
            if callable(histograms)
            else None
        )
        self.baseline: dict[str, float] = {}
        self.baseline_time: float | None = None
        # The baseline before this one, and its time (see _rates_from).
        self._earlier: tuple[dict[str, float], float] | None = None
        self.has_logged = False
        self._prefix = f"{name}/"
        self._naming = _Naming(spec, self._prefix)
        self._kinds = _Kinds(spec, self._naming, self._prefix)
        named = _NamedEntries(spec)
        self._unchecked: _NamedEntries | None = named if named.unseen else None

    @property
    def stalled(self) -> bool:
        """Whether stall detection finds this watch without progress for ``stall_after`` seconds."""
        return self.observations is not None and self.observations.stalled

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

    def due_by_clock(self, now: float) -> bool:
        """Whether the provider needs calling at ``now``; false only for a time-only schedule not yet due.

        Examples:
            >>> watch = Watch(WatchSpec("w", provider=dict, schedule=Every.seconds(5)))
            >>> watch.due_by_clock(0.0)  # never polled: the first poll is needed
            True
            >>> watch.poll({}, now=0.0)
            {}
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
        observations = self.observations
        observed = None
        if observations is not None:
            observed = snapshot_of(raw)
            observations.observe(observed, now)
        first_poll = self.baseline_time is None
        if (
            not force
            and (first_poll or self._scheduled)
            and not self._is_due(raw, now, first_poll)
        ):
            if first_poll:
                self.baseline = snapshot_of(raw) if observed is None else observed
                self._set_baseline_time(now)
            return None
        baseline, baseline_time = self._rates_from(now, force)
        if baseline_time is None or now <= baseline_time:
            elapsed = 0.0  # no rates yet
        else:
            elapsed = now - baseline_time
        if observed is None:
            payload, kept = self._payload_of(raw, baseline, elapsed)
        else:
            payload, kept = self._payload_of_snapshot(observed), observed
            if observations is not None:
                observations.add_to(payload, self._prefix)
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
            intervals,
        )

    def _rates_from(
        self, now: float, force: bool
    ) -> tuple[dict[str, float], float | None]:
        """The snapshot rates count from, and its time: the baseline, unless ``force`` comes too soon after it.

        A final snapshot taken less than half a logged interval after the
        last log would rate a few milliseconds (0 for a counter that moves
        in batches): its rates span the interval before too.
        """
        since = self.baseline_time
        earlier = self._earlier
        if (
            force
            and earlier is not None
            and since is not None
            and now - since < (since - earlier[1]) / 2
        ):
            return earlier
        return self.baseline, since

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
        :meth:`_ScheduleState.logged`).
        """
        if self.observations is not None:
            self.observations.reset()
        if self.quantiles is not None:
            self.quantiles.commit(logged.intervals.marks)
        alive = logged.alive
        if alive is not None:
            before, self._alive = self._alive, alive
            if before is not None and alive < before and self.events is not None:
                self.events.workers_lost(self, alive, before)
        if self.baseline_time is not None:
            self._earlier = (self.baseline, self.baseline_time)
        self.baseline = logged.snapshot
        self.baseline_time = now
        self.has_logged = True
        self.schedule_state.logged(now, scheduled, poll_interval)
        self.schedule_next()

    def restart(self) -> None:
        """Forget the baseline and the seconds: the monitor was stopped, and is started again.

        No rate spans the time it was stopped: the next poll is the new
        baseline (logged if its schedule says so, without rates), and the
        seconds count from it. ``log_on_start`` does not log it again, as in
        TorchRL.
        """
        self.baseline = {}
        self.baseline_time = None
        self._earlier = None
        self.schedule_state.seconds_due_at = math.inf
        if self.observations is not None:
            self.observations = _Observations(self)
        self.schedule_next()

    def schedule_next(self) -> None:
        """Set :attr:`next_due`: for a time-only schedule, when its seconds are next due (``-inf``: call it)."""
        if self.clock_gated and self.baseline_time is not None:
            self.next_due = self.schedule_state.seconds_due_at
        else:
            self.next_due = -math.inf

    def _set_baseline_time(self, now: float) -> None:
        self.baseline_time = now
        self._earlier = None
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
            self.baseline = snapshot_of(raw)
            self._set_baseline_time(now)
            return False
        return due or counted_due


class Watches:
    """A monitor's watches by name, in registration order.

    :attr:`all` is a tuple, replaced (never changed) at each registration,
    so a polling thread iterating it needs no lock.

    Examples:
        >>> watches = Watches()
        >>> [watches.add(lambda name: Watch(WatchSpec(name, provider=dict)), None, "buffer").name
        ...  for _ in range(2)]
        ['buffer', 'buffer_1']
        >>> watches.remove("missing")
        Traceback (most recent call last):
        ...
        KeyError: "No watch named 'missing'."
    """

    def __init__(self) -> None:
        self._by_name: dict[str, Watch] = {}
        self.all: tuple[Watch, ...] = ()

    def add(
        self,
        new: Callable[[str], Watch],
        name: str | None,
        default: str,
        *,
        check: Callable[[WatchSpec], None] | None = None,
    ) -> Watch:
        """Register ``new(unique name)`` under ``name``, else ``default`` with ``_1``, ``_2``, … appended when taken.

        ``check(spec)`` may refuse the new watch by raising.
        """
        if name is None:
            name, suffix = default, 0
            while name in self._by_name:
                suffix += 1
                name = f"{default}_{suffix}"
        elif name in self._by_name:
            raise ValueError(f"A watch named {name!r} is already registered.")
        watch = new(name)
        if check is not None:
            check(watch.spec)
        self._by_name[name] = watch
        self.all = tuple(self._by_name.values())
        return watch

    def remove(self, name: str) -> Watch:
        """Unregister watch ``name`` and return it; it delivers nothing from now on."""
        watch = self._by_name.pop(name, None)
        if watch is None:
            raise KeyError(f"No watch named {name!r}.")
        self.all = tuple(self._by_name.values())
        watch.active = False
        return watch
