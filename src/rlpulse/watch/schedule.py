"""Where a watch's schedule stands: its counter parts' thresholds, and when its seconds are next due."""

from __future__ import annotations

import math
from typing import Any

from rlpulse.metrics import counter_value
from rlpulse.schedules import Schedule

__all__ = ["CounterPart", "ScheduleState"]


class CounterPart:
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


class ScheduleState:
    """Where a schedule stands: its counter parts' thresholds, and when its seconds are next due."""

    def __init__(self, schedule: Schedule | None) -> None:
        parts = () if schedule is None else schedule.parts
        self.counters = tuple(
            CounterPart(part.key, part.interval)
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
        moved: list[tuple[CounterPart, float, float]] = []
        for part in self.counters:
            value = counter_value(raw, part.key)
            if value is None:
                continue
            threshold = part.next_threshold
            if threshold is None:
                part.prime(value)
                continue
            last_value = part.last_value
            if last_value is not None and value < last_value:
                # A reset (empty(), a state restore): rates and clock restart
                # from this snapshot.
                part.prime(value)
                reset = True
                continue
            moved.append((part, value, threshold))
        for part, value, threshold in moved:
            part.last_value = value
            # Beside a reset, which logs nothing, a threshold crossed stays
            # ahead: the next poll logs it.
            if not reset and value >= threshold:
                part.next_threshold = (value // part.interval + 1) * part.interval
                due = True
        return due, reset
