"""Logging schedules: when a watched target's snapshot is due.

:class:`Every` is the TorchRL-compatible schedule value; :class:`AnyOf`
combines several of them (``Every.counter("frames", 10_000) |
Every.seconds(60)``) and is due when any part is due.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Literal

__all__ = ["AnyOf", "Every", "Schedule"]


@dataclass(frozen=True)
class Every:
    """A logging schedule for :class:`~rlpulse.LoggerMonitor`: seconds or counter.

    Build schedules with the two factories rather than the constructor:

    - :meth:`Every.seconds` triggers on (monotonic) time since the last log;
    - :meth:`Every.counter` triggers whenever a cumulative counter of the
      target's ``stats()`` snapshot crosses a multiple of ``interval``.

    Counter schedules are observed, not executed at the exact operation: a
    counter that jumps across several thresholds between two polls is logged
    once. A counter that decreases (a reset, a state restore) re-baselines
    the schedule instead of logging. Schedules combine with ``|`` (see
    :class:`AnyOf`).

    Examples:
        >>> Every.seconds(5)
        Every(kind='seconds', interval=5.0, key=None)
        >>> Every.counter("frames", 1000)
        Every(kind='counter', interval=1000, key='frames')
        >>> Every("hours", 1)
        Traceback (most recent call last):
        ...
        ValueError: kind must be 'seconds' or 'counter', got 'hours'.
    """

    kind: Literal["seconds", "counter"]
    interval: float
    key: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("seconds", "counter"):
            raise ValueError(f"kind must be 'seconds' or 'counter', got {self.kind!r}.")
        _check_interval(self.kind, self.interval)
        if self.kind == "counter" and not self.key:
            raise ValueError("counter schedules require a non-empty counter key.")
        if self.key is not None and not isinstance(self.key, str):
            raise TypeError(
                "the counter key must be the name of a snapshot entry (a str, "
                f"like 'frames'), got {type(self.key).__name__} {self.key!r}."
            )

    @classmethod
    def seconds(cls, interval: float) -> Every:
        """Return a schedule due every ``interval`` seconds (a finite number above zero).

        Examples:
            >>> Every.seconds(2).interval
            2.0
            >>> Every.seconds(float("nan"))
            Traceback (most recent call last):
            ...
            ValueError: interval must be strictly positive: a finite number of seconds above zero, got nan.
            >>> Every.seconds(None)
            Traceback (most recent call last):
            ...
            TypeError: Every.seconds() takes a number of seconds, got NoneType None.
        """
        # float() as TorchRL's Every.seconds does: "5" is 5.0; what it
        # refuses is refused with the same exception, saying what to give.
        # A bool is refused as every other interval refuses it: True would
        # be a second.
        try:
            if isinstance(interval, bool):
                raise TypeError
            seconds = float(interval)
        except (TypeError, ValueError) as error:
            raise type(error)(
                "Every.seconds() takes a number of seconds, got "
                f"{type(interval).__name__} {interval!r}."
            ) from None
        return cls(kind="seconds", interval=seconds)

    @classmethod
    def counter(cls, key: str, interval: int) -> Every:
        """Return a schedule due when snapshot entry ``key`` crosses a multiple of ``interval``.

        ``key`` names the entry (a non-empty str); ``interval`` is a finite
        number above zero (``10_000``, ``1e4``, or ``2.5`` for a counter of
        seconds, as TorchRL's ``Every.counter`` takes).

        Examples:
            >>> Every.counter("write_count", 50).key
            'write_count'
            >>> Every.counter("frames", 0)
            Traceback (most recent call last):
            ...
            ValueError: interval must be strictly positive: a finite number of counts above zero, got 0.
        """
        return cls(kind="counter", interval=interval, key=key)

    @staticmethod
    def any(*schedules: Schedule) -> AnyOf:
        """Return a schedule due whenever any of ``schedules`` is due.

        Examples:
            >>> every_10k_or_minute = Every.any(
            ...     Every.counter("frames", 10_000), Every.seconds(60)
            ... )
            >>> len(every_10k_or_minute.parts)
            2
        """
        return AnyOf(_flatten(schedules))

    def __or__(self, other: Schedule) -> AnyOf:
        return Every.any(self, other)

    @property
    def parts(self) -> tuple[Every, ...]:
        """The plain schedules this one is made of: itself.

        Examples:
            >>> Every.seconds(1).parts
            (Every(kind='seconds', interval=1.0, key=None),)
        """
        return (self,)


@dataclass(frozen=True)
class AnyOf:
    """A composite schedule, due when any of its parts is due.

    Made with :meth:`Every.any` or ``|``. Counter parts keep their own
    multiples-of-interval thresholds; seconds parts count from the watch's
    last logged snapshot, whatever caused it. With exactly one counter part,
    that counter is the watch's default logging step.

    Examples:
        >>> schedule = Every.counter("frames", 10_000) | Every.seconds(60)
        >>> [part.kind for part in schedule.parts]
        ['counter', 'seconds']
        >>> schedule.counter_keys
        ('frames',)
    """

    parts: tuple[Every, ...]

    def __post_init__(self) -> None:
        if not self.parts:
            raise ValueError("Every.any() needs at least one schedule.")
        for part in self.parts:
            if not isinstance(part, Every):
                raise TypeError(
                    f"Every.any() combines Every schedules, got {type(part).__name__}."
                )

    def __or__(self, other: Schedule) -> AnyOf:
        return Every.any(self, other)

    @property
    def counter_keys(self) -> tuple[str, ...]:
        """The snapshot keys of the counter parts, in order.

        Examples:
            >>> (Every.seconds(1) | Every.seconds(5)).counter_keys
            ()
        """
        return tuple(
            part.key for part in self.parts if part.kind == "counter" and part.key
        )


Schedule = Every | AnyOf


def _check_interval(kind: str, interval: object) -> None:
    """Refuse an interval that is not a finite number above zero.

    TorchRL's ``ValueError`` (``strictly positive``) for a missing or
    non-positive interval, and its ``TypeError`` for one that is no number.
    """
    unit = "seconds" if kind == "seconds" else "counts"
    allowed = f"a finite number of {unit} above zero"
    if isinstance(interval, bool) or not isinstance(interval, numbers.Real):
        if interval is None:
            raise ValueError(f"interval must be strictly positive: {allowed}.")
        raise TypeError(
            f"interval must be {allowed}, got {type(interval).__name__} {interval!r}."
        )
    if not 0 < float(interval) < math.inf:
        raise ValueError(
            f"interval must be strictly positive: {allowed}, got {interval!r}."
        )


def _flatten(schedules: tuple[Schedule, ...]) -> tuple[Every, ...]:
    parts: list[Every] = []
    for schedule in schedules:
        if isinstance(schedule, (Every, AnyOf)):
            parts.extend(schedule.parts)
        else:
            raise TypeError(
                f"Every.any() combines Every schedules, got {type(schedule).__name__}."
            )
    return tuple(parts)
