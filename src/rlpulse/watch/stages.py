"""The stages of a watch's poll, each owning its state: aggregates, stalls, the rates' baseline, worker loss, named entries, payload names, kinds."""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from rlpulse.metrics import RATE_NAMES, rate_name, snapshot_of, too_soon_to_rate
from rlpulse.naming import Kind
from rlpulse.watch.spec import WatchSpec

if TYPE_CHECKING:
    from rlpulse.watch.core import Watch

__all__ = [
    "SNAPSHOTS_TO_APPEAR",
    "Aggregates",
    "Baseline",
    "Kinds",
    "NamedEntries",
    "Naming",
    "Stall",
    "WatchEvents",
    "WorkerLoss",
]


class _GaugePolls:
    """One gauge's polls since the last log: how many, their sum, minimum and maximum."""

    __slots__ = ("count", "high", "low", "total")

    def __init__(self, value: float) -> None:
        self.count = 1
        self.total = self.low = self.high = value

    def add(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.low = min(self.low, value)
        self.high = max(self.high, value)


class Aggregates:
    """The ``aggregate=`` stage: each gauge's mean, minimum and maximum over the polls since the last log.

    Examples:
        >>> aggregates = Aggregates(("mean", "max"), counters=("frames",))
        >>> aggregates.observe({"frames": 10.0, "size": 2.0})
        >>> aggregates.observe({"frames": 20.0, "size": 4.0})
        >>> payload = {}
        >>> aggregates.add_to(payload, "b/")
        >>> payload
        {'b/size_mean': 3.0, 'b/size_max': 4.0}
    """

    def __init__(self, aggregate: Sequence[str], counters: Container[str]) -> None:
        self.aggregate = tuple(aggregate)
        # Counters are not aggregated: their rates say how they move.
        self.counters = counters
        self.accumulated: dict[str, _GaugePolls] = {}

    def observe(self, snapshot: Mapping[str, float]) -> None:
        """Take one poll's ``snapshot`` in."""
        accumulated = self.accumulated
        for key, value in snapshot.items():
            if key in self.counters:
                continue
            seen = accumulated.get(key)
            if seen is None:
                accumulated[key] = _GaugePolls(value)
            else:
                seen.add(value)

    def add_to(self, payload: dict[str, float], prefix: str) -> None:
        """Add ``<prefix><key>_<aggregate>`` of every gauge observed since the last :meth:`reset`."""
        for key, seen in self.accumulated.items():
            for aggregate in self.aggregate:
                if aggregate == "mean":
                    value = seen.total / seen.count
                elif aggregate == "min":
                    value = seen.low
                else:
                    value = seen.high
                payload[f"{prefix}{key}_{aggregate}"] = value

    def reset(self) -> None:
        """Start afresh: a payload was delivered."""
        if self.accumulated:
            self.accumulated = {}


class Stall:
    """The ``stall_after=`` stage: how long ``progress_key`` has not moved, and whether that is a stall.

    ``tell(stalled, seconds)`` hears each stall's start and end.

    Examples:
        >>> told = []
        >>> stall = Stall(("frames",), 5.0, lambda stalled, seconds: told.append((stalled, seconds)))
        >>> for now, frames in ((0.0, 1.0), (3.0, 1.0), (6.0, 1.0), (7.0, 2.0)):
        ...     stall.observe({"frames": frames}, now)
        >>> told
        [(True, 6.0), (False, 7.0)]
    """

    def __init__(
        self,
        progress_keys: Sequence[str],
        stall_after: float,
        tell: Callable[[bool, float], None],
    ) -> None:
        self.progress_keys = tuple(progress_keys)
        self.stall_after = stall_after
        self._tell = tell
        self.stalled = False
        self._progress: Any = None
        self._progress_time: float | None = None
        # The last value of each of several progress entries.
        self._known: dict[str, float] = {}
        # When the last poll was; and, after a restart while stalled, the
        # seconds the stall had lasted by then, for the next poll to go on
        # from (the time stopped counts for nothing).
        self._last_poll: float | None = None
        self._stalled_for: float | None = None

    def observe(self, snapshot: Mapping[str, float], now: float) -> None:
        """Take one poll's ``snapshot`` at ``now`` into the stall clock."""
        if self._stalled_for is not None:
            self._progress_time = now - self._stalled_for
            self._stalled_for = None
        self._last_poll = now
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
        previous = self._progress
        if progress is not None:
            self._progress = progress
        if self._progress_time is None or (
            progress is not None and (previous is None or progress != previous)
        ):
            # The first poll, progress, or a reset (a decrease): the clock
            # restarts.
            since = self._progress_time
            if self.stalled and since is not None:
                self._tell(False, now - since)
            self._progress_time = now
            self.stalled = False
            return
        stuck_for = now - self._progress_time
        if not self.stalled and stuck_for >= self.stall_after:
            self.stalled = True
            self._tell(True, stuck_for)

    def seconds_without_progress(self) -> float | None:
        """The seconds polled without progress so far (a stop and start in between counting for nothing); ``None`` before a poll."""
        if self._stalled_for is not None:
            return self._stalled_for
        if self._progress_time is None or self._last_poll is None:
            return None
        return self._last_poll - self._progress_time

    def add_to(self, payload: dict[str, float], prefix: str) -> None:
        """Add ``<prefix>stalled``: 1.0 while stalled, else 0.0."""
        payload[f"{prefix}stalled"] = 1.0 if self.stalled else 0.0

    def restart(self) -> None:
        """The monitor was stopped and is started again: the next poll starts the clock again, unless stalled.

        The time stopped is no time without progress. A stall goes on: the
        target did not move because the monitor restarted, and only its
        progress ends the stall, told as its end, its seconds those it was
        polled without progress.

        Examples:
            >>> told = []
            >>> stall = Stall(("frames",), 1.0, lambda stalled, seconds: told.append((stalled, seconds)))
            >>> for now in (0.0, 0.5, 1.0, 1.5):
            ...     stall.observe({"frames": 5.0}, now)
            >>> stall.restart()  # stopped, then started 100 s later
            >>> stall.observe({"frames": 5.0}, 101.5)
            >>> stall.observe({"frames": 6.0}, 102.0)
            >>> told
            [(True, 1.0), (False, 2.0)]
        """
        if not self.stalled:
            self._progress_time = None
        elif self._progress_time is not None and self._last_poll is not None:
            self._stalled_for = self._last_poll - self._progress_time

    def forget(self) -> None:
        """Start afresh, not stalled, the next poll starting the clock: in a forked child, whose stalls are its own."""
        self.stalled = False
        self._progress = None
        self._progress_time = None
        self._known = {}
        self._last_poll = None
        self._stalled_for = None


class Baseline:
    """The rates stage's state: the logged snapshot rates count from, its time, and the one before.

    Examples:
        >>> baseline = Baseline()
        >>> baseline.logged({"frames": 0.0}, 0.0)
        >>> baseline.logged({"frames": 100.0}, 1.0)
        >>> baseline.rates_from(now=1.003, force=True)  # a final snapshot soon after
        ({'frames': 0.0}, 0.0)
        >>> baseline.rates_from(now=1.003, force=False)
        ({'frames': 100.0}, 1.0)
    """

    def __init__(self) -> None:
        self.snapshot: dict[str, float] = {}
        self.time: float | None = None
        self._earlier: tuple[dict[str, float], float] | None = None

    def rates_from(
        self, now: float, force: bool
    ) -> tuple[dict[str, float], float | None]:
        """The snapshot rates count from, and its time: the baseline, unless ``force`` comes too soon after it.

        A final snapshot taken too soon after the last log
        (:func:`~rlpulse.metrics.too_soon_to_rate`) rates the interval
        before too.
        """
        since, earlier = self.time, self._earlier
        if (
            force
            and earlier is not None
            and since is not None
            and too_soon_to_rate(now - since, since - earlier[1])
        ):
            return earlier
        return self.snapshot, since

    def logged(self, snapshot: dict[str, float], now: float) -> None:
        """``snapshot`` was logged at ``now``: the next rates count from it."""
        if self.time is not None:
            self._earlier = (self.snapshot, self.time)
        self.snapshot, self.time = snapshot, now

    def start(self, snapshot: dict[str, float], now: float) -> None:
        """Count rates from ``snapshot`` at ``now``, afresh: a first poll, or a counter reset."""
        self.snapshot, self.time, self._earlier = snapshot, now, None

    def forget(self) -> None:
        """No baseline: the next poll is a first poll again."""
        self.snapshot, self.time, self._earlier = {}, None, None


class WorkerLoss:
    """The worker-loss stage: a logged ``workers_alive`` lower than the one before is told, less the workers that finished meanwhile.

    A worker that says it finished (``workers_finished``, as
    :meth:`~rlpulse.sources.shared.WorkerCounters.finish` counts it) leaves
    ``workers_alive`` without being lost.

    Examples:
        >>> told = []
        >>> loss = WorkerLoss(lambda alive, before, lost: told.append((alive, before, lost)))
        >>> for alive, finished in ((4.0, 0.0), (4.0, 0.0), (3.0, 0.0), (None, 0.0), (2.0, 1.0)):
        ...     loss.logged(alive, finished)
        >>> told
        [(3.0, 4.0, 1.0)]
    """

    def __init__(self, tell: Callable[[float, float, float], None]) -> None:
        self._tell = tell
        self._alive: float | None = None
        self._accounted = 0.0

    def logged(self, alive: float | None, finished: float | None = None) -> None:
        """A payload with ``workers_alive`` = ``alive`` (``None``: none) and ``workers_finished`` = ``finished`` was logged."""
        if alive is None:
            return
        accounted = alive + (finished or 0.0)
        before, self._alive = self._alive, alive
        before_accounted, self._accounted = self._accounted, accounted
        if before is not None and accounted < before_accounted:
            self._tell(alive, before, before_accounted - accounted)


class WatchEvents(Protocol):
    """What a watch tells of its own health as it notices it (the monitor's reporter)."""

    def stalled(self, watch: Watch, stalled: bool, seconds: float) -> None:
        """No progress for ``seconds`` (``stalled``), or progress again after ``seconds`` without."""

    def workers_lost(
        self, watch: Watch, alive: float, before: float, lost: float
    ) -> None:
        """The snapshot's ``workers_alive`` fell from ``before`` to ``alive``, ``lost`` of them without finishing."""

    def entry_missing(
        self, watch: Watch, option: str, key: str, entries: Sequence[str]
    ) -> None:
        """The snapshots with entries have had none named ``key`` so far (see :class:`NamedEntries`), though ``option`` names it."""


class NamedEntries:
    """The entries a watch's options name, until each is seen in a snapshot or told missing.

    A typo (``Every.counter("frame", 10)`` for ``frames``) would otherwise
    never log, rate or step, silently: a named entry still missing from the
    :data:`SNAPSHOTS_TO_APPEAR`-th snapshot with entries is told to the
    watch's events, once per entry. An entry that appears by then (a
    learner's ``updates`` once its warm-up is over) is no typo; an empty
    snapshot (a tally nothing was written to yet) does not count.
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
        self._snapshots = 0

    def check(self, raw: Any, watch: Watch) -> bool:
        """Take the entries ``raw`` has (when it has any), telling those still missing at the last snapshot checked; whether some are still to be checked."""
        snapshot = snapshot_of(raw)
        if not snapshot:
            return True
        self.unseen = {
            key: option for key, option in self.unseen.items() if key not in snapshot
        }
        self._snapshots += 1
        if self._snapshots < SNAPSHOTS_TO_APPEAR and self.unseen:
            return True
        for key, option in self.unseen.items():
            if watch.events is not None:
                watch.events.entry_missing(watch, option, key, sorted(snapshot))
        self.unseen = {}
        return False


SNAPSHOTS_TO_APPEAR = 10
"""How many snapshots with entries an entry a watch's options name has to appear in before it is told missing."""


class Naming:
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


class Kinds:
    """The kind of each payload key of one watch, decided once, where the watch names it.

    A rate the watch derives is a rate; an entry it rates (``rate_keys``),
    one of the known counters (rated or not: ``rate_keys`` chooses what is
    rated, not what counts) or one it schedules on (a counter schedule) is
    a counter, and so is one the target declares a counter through its
    optional ``metric_kinds()`` (``{entry: "counter" | "gauge"}``: a
    :class:`~rlpulse.Tally`'s ``inc()`` keys and observation counts);
    everything else (gauges, aggregates, quantiles, ``stalled``) is a gauge.
    """

    __slots__ = ("_counters", "_declared", "_naming", "_prefix", "by_key")

    def __init__(self, spec: WatchSpec, naming: Naming, prefix: str) -> None:
        self.by_key: dict[str, Kind] = {}
        self._naming = naming
        self._prefix = prefix
        self._counters = {*RATE_NAMES, *(spec.rate_keys or ()), *spec.counter_keys}
        declared = getattr(spec.target, "metric_kinds", None)
        self._declared: Callable[[], Mapping[str, Any]] | None = (
            declared if callable(declared) else None
        )

    def note(self, payload: Mapping[str, float]) -> Mapping[str, Kind]:
        """Decide the kind of each key of ``payload`` not seen before; return the kinds of every key seen."""
        if payload.keys() <= self.by_key.keys():  # nearly every poll, in C
            return self.by_key
        new = [key for key in payload if key not in self.by_key]
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
