"""The supervision table: which provider calls were left behind, since when, which are hung.

One table per monitor, outliving its polling threads (a call left behind
before a ``stop()`` is still watched after the next ``start()``). The
polling threads read it to skip a watch whose call is outstanding; the
watchdog writes it; a call that returns takes its watch off it. Every write
happens under the table's one lock, so a call returning just as the watchdog
gives up on it is settled once.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable

from rlpulse.watch import Watch

__all__ = ["MIN_HANDOVER_S", "Supervision", "call_budget", "handover_after"]

MIN_HANDOVER_S = 0.05
"""The least time one provider call holds a round up before the rest of the round moves on.

Shorter would start threads for ordinary remote calls.
"""


def handover_after(poll_timeout: float | None, poll_interval: float) -> float:
    """How long one call may hold a round up before the rest of the round moves to a fresh thread.

    About a poll interval, at least :data:`MIN_HANDOVER_S`, at most the
    watch's ``poll_timeout`` (``None``: never).

    Examples:
        >>> handover_after(5.0, 1.0), handover_after(5.0, 0.001), handover_after(None, 1.0)
        (1.0, 0.05, inf)
    """
    if poll_timeout is None:
        return math.inf
    return min(poll_timeout, max(poll_interval, MIN_HANDOVER_S))


def call_budget(poll_timeout: float) -> float:
    """How long a call that can give up by itself (a remote call) may take under ``poll_timeout``.

    It must give up before the watchdog marks its watch hung, with a margin
    for the watchdog's check period: a quarter of ``poll_timeout``, at most
    one second.

    Examples:
        >>> call_budget(2.0), call_budget(10.0)
        (1.5, 9.0)
    """
    return poll_timeout - min(0.25 * poll_timeout, 1.0)


class Supervision:
    """The calls left behind by the polling threads, and their watches' overrun streaks.

    Examples:
        >>> from rlpulse.watch import WatchSpec
        >>> table = Supervision()
        >>> watch = Watch(WatchSpec("w", provider=dict, poll_timeout=1.0))
        >>> with table.lock:
        ...     table.leave_behind(watch, since=0.0)
        >>> table.outstanding(watch), table.is_hung(watch)
        (True, False)
        >>> with table.lock:
        ...     table.mark_hung(watch)
        1
        >>> with table.lock:
        ...     table.returned(watch)  # it was hung
        True
        >>> table.outstanding(watch), table.overruns.get(watch)
        (False, 1)
        >>> table.returned_in_time(watch)  # its next call: the streak ends
        >>> table.overruns.get(watch) is None
        True
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        # Watch -> monotonic time its outstanding call was left behind.
        self.left: dict[Watch, float] = {}
        self.hung: set[Watch] = set()
        # Provider calls in a row that overran poll_timeout, per watch: one
        # warning a streak, which a call returning in time ends.
        self.overruns: dict[Watch, int] = {}
        self._returned = threading.Condition(self.lock)

    def outstanding(self, watch: Watch) -> bool:
        """Whether ``watch`` has a call left behind that has not returned."""
        return watch in self.left

    def is_hung(self, watch: Watch) -> bool:
        """Whether ``watch``'s outstanding call has overrun its ``poll_timeout``."""
        return watch in self.hung

    def leave_behind(self, watch: Watch, since: float) -> None:
        """Record that ``watch``'s call, running since ``since``, was left behind (call under :attr:`lock`)."""
        self.left[watch] = since

    def mark_hung(self, watch: Watch) -> int:
        """Mark ``watch``'s outstanding call hung (call under :attr:`lock`); return its overrun streak."""
        self.left.setdefault(watch, time.monotonic())
        self.hung.add(watch)
        overruns = self.overruns.get(watch, 0) + 1
        self.overruns[watch] = overruns
        return overruns

    def returned_in_time(self, watch: Watch) -> None:
        """``watch``'s call returned on its round, within ``poll_timeout``: its overrun streak ends."""
        with self.lock:
            self.overruns.pop(watch, None)

    def returned(self, watch: Watch) -> bool:
        """``watch``'s call left behind returned (call under :attr:`lock`): it is polled again; whether it was hung."""
        was_hung = watch in self.hung
        if not was_hung:
            self.overruns.pop(watch, None)  # in time, as in returned_in_time
        self.left.pop(watch, None)
        self.hung.discard(watch)
        self._returned.notify_all()
        return was_hung

    def wait_returned(self, watches: Iterable[Watch], until: float) -> None:
        """Wait, until monotonic time ``until``, for the calls of ``watches`` left behind within their ``poll_timeout``.

        A call that returns within its watch's ``poll_timeout`` may still
        make it into a final snapshot; a hung one is not waited for.
        """
        with self.lock:
            for watch in watches:
                while watch in self.left and watch not in self.hung:
                    timeout = watch.spec.poll_timeout or math.inf
                    limit = min(until, self.left[watch] + timeout)
                    remaining = limit - time.monotonic()
                    if remaining <= 0:
                        break
                    self._returned.wait(remaining)
