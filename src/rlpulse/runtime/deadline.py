"""One deadline, spent across the phases of an operation.

``stop()`` has one budget, ``stop_timeout``: stopping the polling thread,
waiting for calls left behind, final snapshots and draining the sink queues
all take what they need from the same :class:`Deadline` and leave the rest
to the next phase, instead of each getting a fixed fraction.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

from rlpulse.runtime.threads import MonitorThread

__all__ = ["Deadline", "check_timeout", "side_by_side"]


class Deadline:
    """A point in monotonic time, :attr:`at`: ``seconds`` from now (``None``: never).

    Examples:
        >>> import time
        >>> 4.9 < Deadline(5.0).at - time.monotonic() <= 5.0
        True
        >>> Deadline(None).at
        inf
    """

    __slots__ = ("at",)

    def __init__(self, seconds: float | None) -> None:
        self.at = math.inf if seconds is None else time.monotonic() + seconds


def check_timeout(name: str, value: float | None, *, optional: bool = True) -> None:
    """Refuse a timeout that is not a positive, finite number of seconds (``None`` is allowed when ``optional``).

    Examples:
        >>> check_timeout("stop_timeout", 2.5)
        >>> check_timeout("stop_timeout", float("inf"))
        Traceback (most recent call last):
        ...
        ValueError: stop_timeout must be a positive number of seconds or None, got inf.
        >>> check_timeout("close_timeout", True, optional=False)
        Traceback (most recent call last):
        ...
        TypeError: close_timeout must be a positive number of seconds, got True.
        >>> check_timeout("stop_timeout", "2")
        Traceback (most recent call last):
        ...
        TypeError: stop_timeout must be a positive number of seconds or None, got '2'.
    """
    if value is None and optional:
        return
    allowed = " or None" if optional else ""
    refusal = f"{name} must be a positive number of seconds{allowed}, got {value!r}."
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(refusal)
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(refusal)


def side_by_side(
    calls: Sequence[tuple[str, Callable[[], object]]], until: float
) -> list[bool]:
    """Run each ``(thread name, call)`` on a :class:`~rlpulse.runtime.threads.MonitorThread` of its own, all at once; wait for them until monotonic time ``until``.

    Returns, per call, whether it finished in time: one that hangs delays
    none of the others, and is left running.

    Examples:
        >>> import threading
        >>> stuck = threading.Event()
        >>> side_by_side([("rlpulse-a", lambda: None), ("rlpulse-b", stuck.wait)], time.monotonic() + 0.1)
        [True, False]
        >>> stuck.set()
    """
    threads = [MonitorThread(name, call) for name, call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, until - time.monotonic()))
    return [not thread.is_alive() for thread in threads]
