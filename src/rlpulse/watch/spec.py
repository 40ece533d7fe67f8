"""A watch's options: the frozen :class:`WatchSpec` ``LoggerMonitor.watch()`` builds, and their checks."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlpulse.distributions import DEFAULT_QUANTILES, check_quantiles
from rlpulse.schedules import AnyOf, Every, Schedule
from rlpulse.targets import adapt

__all__ = ["AGGREGATES", "WatchSpec", "provider_of"]

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
        >>> from rlpulse import Tally
        >>> provider_of(Tally, None, 5.0)
        Traceback (most recent call last):
        ...
        TypeError: Cannot watch the class Tally: watch an instance of it, as in watch(Tally(), ...).
    """
    if stats_fn is not None:
        return target, stats_fn, type(target).__name__.lower()
    if isinstance(target, type):
        # Its stats is a function of an instance: it fails at every poll.
        raise TypeError(
            f"Cannot watch the class {target.__name__}: watch an instance of "
            f"it, as in watch({target.__name__}(), ...)."
        )
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
        wrong_type = stall_after is not None and (
            not isinstance(stall_after, (int, float)) or isinstance(stall_after, bool)
        )
        if stall_after is not None and (wrong_type or not stall_after > 0):
            raise (TypeError if wrong_type else ValueError)(
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
