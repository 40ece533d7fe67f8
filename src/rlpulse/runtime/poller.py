"""The polling thread: rounds of polls on a timer, on request, and the final ones.

Provider calls run inline on the polling thread — no thread hand-off per
call. When one call holds a round up for too long, the watchdog
(:mod:`rlpulse.runtime.watchdog`) hands the rest of the round to a fresh
thread (:meth:`Poller.leave_behind`); the thread left behind finishes its call
whenever it returns, takes its watch off the supervision table and exits.
A thread polls only while it is the one its round names: that, not a
counter, is how a thread learns it was left behind. A round reads whether
a watch is still watched after naming it its current one, and
``unwatch()`` marks it unwatched before it reads which one is current: so
either the round skips the watch or ``unwatch()`` waits for its call.

Whether a call that returns just as the watchdog gives up on it was left
behind is settled by one atomic ``dict.setdefault`` on the call's index:
the thread claims it done, or the watchdog claims it abandoned, never both.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from rlpulse.runtime.reporting import Reporter, RoundTally
from rlpulse.runtime.supervision import Supervision
from rlpulse.runtime.threads import MonitorThread
from rlpulse.watch import Watch

__all__ = ["MIN_GAP", "Poller", "Round", "poll_final"]

# The polling thread's claim of a call that returned; the watchdog claims
# one abandoned with a token of its own (Round.give_up_on).
_DONE = "done"

Poll = Callable[[Watch, bool, "float | None"], "dict[str, float] | None"]
"""Polls one watch (``force``: whatever its schedule says; then when its round was due, if on the timer); returns its payload, if logged."""

_UNAWAITED = threading.Event()
"""The ``done`` of every round nobody awaits; never set, so that its lock is
never taken: a child forked meanwhile would inherit it held."""


class Round:
    """One pass of polls over a list of watches, possibly finished by a later thread.

    Examples:
        >>> polls = Round((), force=False)
        >>> polls.done.is_set(), polls.logged
        (False, {})
    """

    __slots__ = (
        "claims",
        "current",
        "deadline",
        "done",
        "error",
        "finished",
        "force",
        "index",
        "logged",
        "scheduled",
        "thread",
        "watches",
    )

    def __init__(
        self,
        watches: Sequence[Watch],
        *,
        force: bool,
        deadline: float = math.inf,
        awaited: bool = True,
        scheduled: float | None = None,
    ) -> None:
        self.watches = watches
        self.force = force
        self.deadline = deadline
        # When a timed round was due (its place in the poller's cadence).
        self.scheduled = scheduled
        self.index = 0
        # What the round logged, by watch, for whoever awaits it; the
        # thread's own timed (unawaited) rounds keep nothing.
        self.logged: dict[str, dict[str, float]] = {}
        self.current: Watch | None = None
        # The thread polling this round; None once it is given up.
        self.thread: threading.Thread | None = None
        # Per polled index, who settled that call: _DONE or a give-up's token.
        self.claims: dict[int, object] = {}
        self.error: BaseException | None = None
        self.finished = False
        # Nobody waits for the thread's own timed rounds: they share one
        # event rather than make one per round.
        self.done = threading.Event() if awaited else _UNAWAITED

    @classmethod
    def timed(
        cls, watches: Sequence[Watch], scheduled: float, thread: threading.Thread
    ) -> Round:
        """The polling ``thread``'s own round, due at ``scheduled``; nobody awaits it."""
        polls = cls(watches, force=False, awaited=False, scheduled=scheduled)
        polls.thread = thread
        return polls

    @property
    def unfinished(self) -> list[Watch]:
        """The watches this round has not reached (yet)."""
        return list(self.watches[self.index :])

    def give_up_on(self, watch: Watch) -> bool:
        """Claim the call of ``watch`` under way abandoned, unless it has returned already."""
        index = self.index - 1
        if index < 0 or self.watches[index] is not watch:
            return False
        # A claim of its own: a second give-up of the same call loses too.
        claim = object()
        return self.claims.setdefault(index, claim) is claim


MIN_GAP = 0.5
"""A timed round polls no watch polled less than this share of the poll interval ago."""


class Cadence:
    """When the polling thread's next timed round is due, and the thread's sleep until then.

    One interval after the last was due, not after it ended (a busy
    thread's GIL turn delays each wake-up, and the delays would add up), at
    once after a round that overran (a watch polled late in it is not
    polled again in that round: :data:`MIN_GAP`), and no earlier than
    ``next_due()``:
    a round that would call nothing is not woken for. :meth:`wake` ends the
    sleep; with ``nudge`` the next round is also brought back within one
    interval of now.

    Examples:
        >>> cadence = Cadence(0.5, lambda: math.inf)  # nothing will be due
        >>> cadence.start()
        >>> cadence.advance(due_at=cadence.next_tick, now=time.monotonic())
        >>> cadence.next_tick
        inf
        >>> cadence.wake(nudge=True)
        >>> cadence.sleep()  # woken at once, and the next round within 0.5 s
        True
        >>> cadence.next_tick - time.monotonic() <= 0.5
        True
    """

    def __init__(
        self,
        interval: float,
        next_due: Callable[[], float],
        on_sooner: Callable[[], None] | None = None,
    ) -> None:
        self.interval = interval
        self._next_due = next_due
        # Told when a nudge brings the next round forward (the watchdog
        # sleeps until the round it knew of).
        self._on_sooner = on_sooner
        self.next_tick = 0.0
        self._wake = threading.Event()
        # Set by wake(nudge=True) on any thread; the sleeping thread acts on it.
        self._nudged = False

    def start(self) -> None:
        """The first round is due one interval from now."""
        self.next_tick = time.monotonic() + self.interval

    @property
    def due(self) -> bool:
        """Whether the next round is due now."""
        return time.monotonic() >= self.next_tick

    def advance(self, due_at: float, now: float) -> None:
        """A round due at ``due_at`` ended at ``now``: set when the next is due."""
        self.next_tick = max(due_at + self.interval, now, self._next_due())

    def wake(self, *, nudge: bool = False) -> None:
        """End the sleep under way or the next; ``nudge``: a watch may need a call sooner than planned."""
        if nudge:
            self._nudged = True
        self._wake.set()

    def sleep(self) -> bool:
        """Sleep until the next round is due or :meth:`wake`; whether there was time to sleep."""
        if self._nudged:
            self._nudged = False
            sooner = time.monotonic() + self.interval
            if sooner < self.next_tick:
                self.next_tick = sooner
                if self._on_sooner is not None:
                    self._on_sooner()
        timeout = self.next_tick - time.monotonic()
        if timeout <= 0:
            return False
        self._wake.wait(min(timeout, threading.TIMEOUT_MAX))
        self._wake.clear()
        return True


class Poller:
    """The polling thread of one background monitor.

    ``poll(watch, force)`` polls one watch; ``watches()`` gives the current
    registration, ``due(now)`` the watches a timed round calls, ``next_due()``
    when one may next need a call (see :class:`Cadence`); ``end_round()`` is
    told of every round that ends, ``on_hung(watch, overruns)`` of every
    call marked hung and ``on_resumed(watch)`` of every hung call that
    returns (a final snapshot's too, after ``stop()``). Each thread counts its polls in a tally of
    ``reporter``, which also holds an error raised by a sink that must end
    polling (``on_error="raise"``).
    """

    def __init__(
        self,
        *,
        poll: Poll,
        watches: Callable[[], Sequence[Watch]],
        interval: float,
        supervision: Supervision,
        reporter: Reporter,
        end_round: Callable[[], None],
        on_hung: Callable[[Watch, int], None],
        due: Callable[[float], Sequence[Watch]],
        next_due: Callable[[], float],
        on_resumed: Callable[[Watch], None],
    ) -> None:
        self._poll = poll
        self.watches = watches
        self._due = due
        self.interval = interval
        # Set when a round someone asked for starts (a step()), when a nudge
        # brings the next timed round forward, and to end the watchdog:
        # between rounds it sleeps until a timed round may have held on for
        # a check period.
        self.busy = threading.Event()
        self.cadence = Cadence(interval, next_due, self.busy.set)
        self.supervision = supervision
        self._reporter = reporter
        self._end_round = end_round
        self.on_hung = on_hung
        self.on_resumed = on_resumed
        self._stopping = False
        self._requests: deque[Round] = deque()
        # The round being polled, for the watchdog.
        self.active: Round | None = None
        # An error raised by a call left behind, for the live thread to raise.
        self._late_error: BaseException | None = None
        # Who waits for the thread to be done with a watch (unwatch()).
        self._waiters: dict[Watch, threading.Event] = {}
        self._thread: threading.Thread | None = None
        # Set when the live polling thread exits.
        self._exited = threading.Event()

    def start(self) -> None:
        """Start the polling thread: its first round one interval from now."""
        self.cadence.start()
        self._spawn(None, live=True)

    @property
    def alive(self) -> bool:
        """Whether a thread is polling (or about to: one handed a round has not started yet)."""
        return self._thread is not None and not self._exited.is_set()

    def is_polling_thread(self) -> bool:
        """Whether the calling thread is this poller's live polling thread."""
        return threading.current_thread() is self._thread

    def request(self, polls: Round) -> None:
        """Have the polling thread poll ``polls`` as soon as it can."""
        self._requests.append(polls)
        self.cadence.wake()

    def wait_done_with(self, watch: Watch, timeout: float) -> None:
        """Wait until the polling thread is not polling ``watch``, or left its call behind."""
        waiter = self._waiters.setdefault(watch, threading.Event())
        active = self.active  # read after the waiter is known: no lost release
        if active is not None and active.current is watch:
            waiter.wait(timeout)
        self._waiters.pop(watch, None)

    def stop(self, until: float) -> None:
        """Stop polling, by monotonic time ``until``.

        A provider call under way is left behind, not waited for (its
        watch's final snapshot waits for it). A thread that does not end in
        time is given up on, and the watch it was polling marked hung.
        """
        self._stopping = True
        self.cadence.wake()
        self._leave_current_behind()
        ended = self.is_polling_thread() or self._exited.wait(
            max(0.0, until - time.monotonic())
        )
        if not ended:
            self.abandon_active()
        self._thread = None
        # Popped one at a time: another thread's step() may add one meanwhile.
        while self._requests:
            with contextlib.suppress(IndexError):
                self._requests.popleft().done.set()

    def _leave_current_behind(self) -> None:
        with self.supervision.lock:
            polls = self.active
            if polls is None or polls.force:
                return
            if self._give_up(polls, polls.current, since=time.monotonic(), hung=False):
                polls.thread = self._thread = None
                self._exited.set()  # nothing polls on: the thread left is in its call

    def spawn_final(self, polls: Round) -> None:
        """Poll a forced round on a fresh thread of its own (see :func:`poll_final`)."""
        self._spawn(polls, one_shot=True)

    def _spawn(
        self, polls: Round | None, *, one_shot: bool = False, live: bool = False
    ) -> None:
        thread = MonitorThread("rlpulse-poller", self._work, (polls, one_shot))
        # Named before it starts: a thread polls only while it is named.
        if polls is not None:
            polls.thread = thread
        if live:
            self._thread = thread
        thread.start()

    def _work(self, polls: Round | None, one_shot: bool) -> None:
        if one_shot:
            if polls is not None:
                self._execute(polls)
            return
        try:
            if polls is None:
                self._poll_on_timer()
            elif self._execute(polls):
                if polls.scheduled is not None:  # a timed round handed over
                    _after_timed(polls, polls.scheduled, self.cadence)
                self._poll_on_timer()
        finally:
            if self._thread is threading.current_thread():
                self._exited.set()

    def _poll_on_timer(self) -> None:
        me = threading.current_thread()
        cadence = self.cadence
        while not self._stopping and self._thread is me:
            if not self._requests and cadence.sleep():
                continue
            while self._requests:
                request = self._requests.popleft()
                request.thread = me
                if not self._execute(request):
                    return
            if self._stopping or not cadence.due:
                continue
            error = self._late_error or self._reporter.take_sink_error()
            if error is not None:
                self._late_error = None
                raise error
            due_at = cadence.next_tick
            tick = Round.timed(self._due(time.monotonic()), due_at, me)
            if not self._execute(tick):
                return
            _after_timed(tick, due_at, cadence)

    def _execute(self, polls: Round) -> bool:
        """Poll the rest of ``polls``; False when this thread was left behind meanwhile."""
        me = threading.current_thread()
        self.active = polls
        if polls.done is not _UNAWAITED:
            self.busy.set()  # not due on the timer: the watchdog is told
        started = time.monotonic()
        logged: dict[str, dict[str, float]] | None = (
            None if polls.done is _UNAWAITED else polls.logged
        )
        tally = self._reporter.open_tally()
        handed_on = True
        try:
            handed_on = self._poll_each(polls, me, logged, tally)
        finally:
            finished = not handed_on
            seconds = time.monotonic() - started
            self._reporter.close_tally(tally, finished=finished, seconds=seconds)
            if finished:
                self._end_round()
        if handed_on:
            return False
        polls.current = None
        self.active = None
        polls.finished = True
        if polls.done is not _UNAWAITED:  # never set: see _UNAWAITED
            polls.done.set()
        return True

    def _poll_each(
        self,
        polls: Round,
        me: threading.Thread,
        logged: dict[str, dict[str, float]] | None,
        counted: RoundTally,
    ) -> bool:
        # Returns True when this thread was left behind (or given up on).
        poll = self._poll
        watches = polls.watches
        force, scheduled = polls.force, polls.scheduled
        claim = polls.claims.setdefault
        left = self.supervision.left
        supervision = self.supervision
        overruns = supervision.overruns
        waiters = self._waiters
        # A timed round ends early once stop() is called: finals follow.
        timed = polls.done is _UNAWAITED
        bounded = polls.deadline != math.inf  # only final rounds have a deadline
        now = time.monotonic()
        # A timed round polls no watch polled less than this long ago: the
        # one at once after a round that overran would poll those polled
        # late in it again a moment later, and rate them over that moment
        # (a counter's rate of 0, a CPU share over 100 %).
        gap = MIN_GAP * self.cadence.interval if timed else -math.inf
        index = -1
        try:
            for index in range(polls.index, len(watches)):
                watch = watches[index]
                # A watch whose call is outstanding is skipped; a time-only
                # schedule that is not due costs no call, unless forced.
                if left and watch in left:
                    continue
                if now < watch.next_due and not force:
                    continue
                if polls.thread is not me:
                    return True  # given up on: the rest is left undone
                if self._stopping and timed:
                    break
                if bounded and time.monotonic() >= polls.deadline:
                    break
                polls.index = index + 1
                polls.current = watch
                if not watch.active:  # read after naming it: see the module
                    polls.current = None
                    continue
                # Only a timed round needs the time of each poll (the gap).
                polled_at = time.monotonic() if timed else now
                if polled_at - watch.polled_at < gap:
                    polls.current = None
                    continue
                watch.polled_at = polled_at
                counted.polls += 1
                payload = poll(watch, force, scheduled)
                if payload is not None:
                    counted.logged += 1
                if claim(index, _DONE) is not _DONE:
                    self._resume(watch)  # left behind: the round went on
                    return True
                polls.current = None
                if overruns:
                    supervision.returned_in_time(watch)
                if waiters:
                    _release(waiters, watch)
                if payload is not None and logged is not None:
                    logged[watch.name] = payload
            else:
                polls.index = len(watches)
        except BaseException as err:
            if index >= 0 and claim(index, _DONE) is not _DONE:
                # A call left behind raised (on_error="raise"): the live
                # thread raises it at its next round.
                self._late_error = err
                self._resume(watches[index])
                return True
            polls.error = err
        return False

    def _resume(self, watch: Watch) -> None:
        """A call left behind returned: poll its watch again (under the lock: never marked hung after)."""
        with self.supervision.lock:
            was_hung = self.supervision.returned(watch)
        if was_hung:
            self.on_resumed(watch)
        watch.schedule_next()
        self.cadence.wake(nudge=True)  # the thread may sleep past its due time

    def leave_behind(
        self, polls: Round, watch: Watch, *, since: float, hung: bool
    ) -> None:
        """Leave ``polls``'s call of ``watch`` behind, unless it has returned: a fresh thread polls the rest.

        ``hung``: the call has overrun its ``poll_timeout`` (else it only
        held the round up for its hand-over delay).
        """
        with self.supervision.lock:
            if self._give_up(polls, watch, since=since, hung=hung):
                self._spawn(polls, one_shot=polls.force, live=not polls.force)

    def abandon_active(self) -> None:
        """Give up on the round being polled: its thread stops after its call, which is marked hung."""
        with self.supervision.lock:
            polls = self.active
            if polls is not None:
                polls.thread = None
                self._give_up(polls, polls.current, since=0.0, hung=True)

    def _give_up(
        self, polls: Round, watch: Watch | None, *, since: float, hung: bool
    ) -> bool:
        """Claim ``polls``'s call of ``watch`` abandoned (False if it returned first), under the lock; record it left behind, or hung."""
        if watch is None or polls.finished or not polls.give_up_on(watch):
            return False
        table = self.supervision
        if hung:
            self.on_hung(watch, table.mark_hung(watch))
        else:
            table.leave_behind(watch, since)
        polls.current = None
        _release(self._waiters, watch)
        return True


def _after_timed(tick: Round, due_at: float, cadence: Cadence) -> None:
    # After a timed round, on whichever thread finished it (the one that
    # started it, or the one it was handed over to): raise its error
    # (on_error="raise"), and set when the next round is due.
    if tick.error is not None:
        raise tick.error
    cadence.advance(due_at, time.monotonic())


def _release(waiters: dict[Watch, threading.Event], watch: Watch) -> None:
    # Tell whoever waits for the thread to be done with watch (unwatch()).
    waiter = waiters.get(watch)
    if waiter is not None:
        waiter.set()


def poll_final(
    poller: Poller, polls: Round, check: Callable[[Round], None], period: float
) -> None:
    """Poll a forced round on a fresh thread, supervised from this one by ``check`` every ``period`` seconds.

    Returns when the round is done or at its deadline; watches not reached
    remain in ``polls.unfinished``.
    """
    poller.spawn_final(polls)
    while not polls.done.wait(min(period, 0.05)):
        check(polls)
        if time.monotonic() >= polls.deadline:
            poller.abandon_active()
            break
    poller.active = None
