"""The watchdog: notices a provider call that holds its round up, and one that hangs.

It samples which call the polling thread is in. When one call has held the
round up for longer than its watch's hand-over delay
(:func:`~rlpulse.runtime.supervision.handover_after`), it has the poller
leave the call behind, so the other watches are delayed by about that much,
once. The slow call's watch is skipped while the call is outstanding, and
marked hung (warned, counted) only if it outlasts ``poll_timeout``.

Between rounds it sleeps until the next timed round could have held on for
a check period (or a round someone asked for starts): a round that ends
sooner, as nearly all do, costs it one wake-up, none at the round's start,
when the polling thread wants the interpreter lock.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from typing import NamedTuple

from rlpulse.runtime.poller import Poller, Round
from rlpulse.runtime.supervision import handover_after
from rlpulse.runtime.threads import MonitorThread
from rlpulse.watch import Watch

__all__ = ["Watchdog"]


class _Sighting(NamedTuple):
    """A call the watchdog saw under way: of which round, to which watch, since when (monotonic)."""

    polls: Round
    watch: Watch
    since: float


class Watchdog:
    """The thread that supervises one :class:`~rlpulse.runtime.poller.Poller`'s calls."""

    def __init__(self, poller: Poller) -> None:
        self._poller = poller
        self._wake = threading.Event()
        self._stopping = False
        # The call the watchdog last saw.
        self._seen: _Sighting | None = None
        # The check period, and the watches it was computed for.
        self._period = 1.0
        self._period_of: object = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start supervising."""
        self._thread = MonitorThread("rlpulse-watchdog", self._loop)
        self._thread.start()

    def stop(self) -> None:
        """Stop supervising; wait (briefly) for the thread to end."""
        self._stopping = True
        self._wake.set()
        self._poller.busy.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(1.0)
        self._thread = None

    def period(self) -> float:
        """Seconds between two checks: a third of the shortest hand-over delay.

        A call is then handed over between 1x and about 1.3x its delay.
        Recomputed only when the watches change: the watchdog wakes often
        and competes for the interpreter lock.
        """
        watches: Sequence[Watch] = self._poller.watches()
        if watches is not self._period_of:
            interval = self._poller.interval
            delays = [
                handover_after(w.spec.poll_timeout, interval)
                for w in watches
                if w.spec.poll_timeout
            ]
            self._period = min(1.0, max(0.002, min(delays, default=1.0) / 3))
            self._period_of = watches
        return self._period

    def _loop(self) -> None:
        poller = self._poller
        while not self._stopping:
            polls = poller.active
            if polls is None and not poller.supervision.left:
                self._sleep_between_rounds()
                polls = poller.active
                if polls is not None and not self._stopping:
                    # A round under way as the sleep ends: its call is
                    # first seen now, not a check period later.
                    self.check(polls)
                continue
            if self._wake.wait(self.period()):
                return
            polls = poller.active
            if polls is not None:
                self.check(polls)
            self._check_left_behind()

    def _sleep_between_rounds(self) -> None:
        """Sleep until the next timed round is due and one check period more, or the poller says a round comes sooner.

        The poller sets ``busy`` when a requested round starts and when a
        nudge brings the next timed round forward. A timed round still under
        way when the sleep ends is checked from then on; one overdue (its
        thread waiting for its turn) is looked for again a period later.
        """
        poller = self._poller
        period = self.period()
        timeout = poller.cadence.next_tick + period - time.monotonic()
        if timeout == math.inf:
            poller.busy.wait()  # nothing is due until the poller says so
        else:
            poller.busy.wait(
                min(timeout if timeout > 0 else period, threading.TIMEOUT_MAX)
            )
        poller.busy.clear()

    def check(self, polls: Round) -> None:
        """Leave the current call of ``polls`` behind if it has held the round up too long."""
        watch = polls.current
        timeout = None if watch is None else watch.spec.poll_timeout
        if watch is None or (timeout is None and not polls.force):
            self._seen = None
            return
        now = time.monotonic()
        seen = self._seen
        if seen is None or seen.polls is not polls or seen.watch is not watch:
            self._seen = _Sighting(polls, watch, now)
            return
        held = now - seen.since
        hung = timeout is not None and held >= timeout
        if polls.force:
            # A final snapshot's call is left behind at its poll_timeout, or
            # halfway to the round's deadline if that comes first, so that
            # the watches after it get theirs; it may still return in time
            # for its own.
            limit = (polls.deadline - seen.since) / 2
            if timeout is not None:
                limit = min(limit, timeout)
        else:
            assert timeout is not None
            limit = handover_after(timeout, self._poller.interval)
        if held >= limit:
            self._seen = None
            self._poller.leave_behind(polls, watch, since=seen.since, hung=hung)

    def _check_left_behind(self) -> None:
        table = self._poller.supervision
        if not table.left:
            return
        now = time.monotonic()
        with table.lock:
            for watch, since in list(table.left.items()):
                timeout = watch.spec.poll_timeout
                if watch in table.hung or timeout is None:
                    continue
                if now - since >= timeout:
                    self._poller.on_hung(watch, table.mark_hung(watch))
