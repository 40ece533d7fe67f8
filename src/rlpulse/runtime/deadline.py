"""One deadline, spent across the phases of an operation.

``stop()`` has one budget, ``stop_timeout``: stopping the polling thread,
waiting for calls left behind, final snapshots and draining the sink queues
all take what they need from the same :class:`Deadline` and leave the rest
to the next phase, instead of each getting a fixed fraction.
"""

from __future__ import annotations

import math
import time

__all__ = ["Deadline", "check_timeout"]


class Deadline:
    """A point in monotonic time: ``seconds`` from now (``None``: never).

    Examples:
        >>> deadline = Deadline(5.0)
        >>> 4.9 < deadline.remaining() <= 5.0, deadline.expired
        (True, False)
        >>> Deadline(None).remaining()
        inf
        >>> Deadline(0.0).expired
        True
    """

    __slots__ = ("at",)

    def __init__(self, seconds: float | None) -> None:
        self.at = math.inf if seconds is None else time.monotonic() + seconds

    def remaining(self) -> float:
        """Seconds left, never negative."""
        return max(0.0, self.at - time.monotonic())

    @property
    def expired(self) -> bool:
        """Whether the deadline has passed."""
        return time.monotonic() >= self.at


def check_timeout(name: str, value: float | None) -> None:
    """Refuse a timeout that is not a positive, finite number of seconds (``None`` is allowed).

    Examples:
        >>> check_timeout("stop_timeout", 2.5)
        >>> check_timeout("stop_timeout", float("inf"))
        Traceback (most recent call last):
        ...
        ValueError: stop_timeout must be a positive number of seconds or None, got inf.
    """
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise ValueError(
            f"{name} must be a positive number of seconds or None, got {value!r}."
        )
