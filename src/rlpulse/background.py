"""The background threads: a worker that polls on a timer, and a watchdog.

Provider calls run inline on the worker thread — no thread hand-off per
call. The watchdog samples which call the worker is in. When one call has
held the round up for longer than its watch's hand-over delay (the poll
interval, at least :data:`MIN_HANDOVER_S` and at most the watch's
``poll_timeout``), a fresh worker carries on with the rest of the round, so
the other watches are delayed by about that much, once. The slow call's
watch is skipped while the call is outstanding, and marked hung (warned,
counted) only if it outlasts ``poll_timeout``. The abandoned worker
finishes its call whenever it returns, un-marks the watch (which then
resumes by itself) and exits.

Whether a call that returns just as the watchdog gives up on it was
abandoned is settled by one atomic ``dict.setdefault`` on the call's index:
the worker claims it done, or the watchdog claims it abandoned, never both.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from rlpulse.poll import Watch

__all__ = ["MIN_HANDOVER_S", "Poller", "Run"]

MIN_HANDOVER_S = 0.05
"""The least time one provider call holds a round up before the rest of the round moves on.

Shorter would start threads for ordinary remote calls.
"""

# Who settled a call: the worker (it returned) or the watchdog (given up).
_DONE = "done"
_ABANDONED = "abandoned"

Poll = Callable[[Watch, bool], "dict[str, float] | None"]


_UNAWAITED = threading.Event()


class Run:
    """One pass of polls over a list of watches, possibly finished by a later worker.

    Examples:
        >>> run = Run((), force=False)
        >>> run.done.is_set(), run.logged
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
        "watches",
    )

    def __init__(
        self,
        watches: Sequence[Watch],
        *,
        force: bool,
        deadline: float | None = None,
        awaited: bool = True,
    ) -> None:
        self.watches = watches
        self.force = force
        self.deadline = deadline
        self.index = 0
        # What the run logged, by watch, for whoever awaits it; the
        # worker's own timed (unawaited) runs keep nothing.
        self.logged: dict[str, dict[str, float]] = {}
        self.current: Watch | None = None
        # Per polled index, who settled that call: _DONE or _ABANDONED.
        self.claims: dict[int, str] = {}
        self.error: BaseException | None = None
        self.finished = False
        # Nobody waits for the worker's own timed runs: they share one event
        # rather than make one per round.
        self.done = threading.Event() if awaited else _UNAWAITED

    @property
    def unfinished(self) -> list[Watch]:
        """The watches this run has not reached (yet)."""
        return list(self.watches[self.index :])


class Poller:
    """The worker and watchdog threads of one background monitor.

    ``poll(watch, force)`` polls one watch and returns its payload, if
    logged. ``watches()`` gives the current registration. ``on_hung(watch)``
    is told of each hung call, ``on_error(error)`` of an exception that ends
    polling (``on_error="raise"``). ``pending_error()`` returns an error
    raised elsewhere (by a sink) that must end polling.
    """

    def __init__(
        self,
        *,
        poll: Poll,
        watches: Callable[[], Sequence[Watch]],
        interval: float,
        after_run: Callable[[], None],
        on_hung: Callable[[Watch], None],
        pending_error: Callable[[], BaseException | None],
    ) -> None:
        self._poll = poll
        self._watches = watches
        self._interval = interval
        self._after_run = after_run
        self._on_hung = on_hung
        self._pending_error = pending_error
        self._generation = 0
        self._stopping = False
        self._wake = threading.Event()
        self._watchdog_wake = threading.Event()
        self._requests: deque[Run] = deque()
        self._active: Run | None = None
        # What the watchdog last saw: (run, watch, first seen at).
        self._seen: tuple[Run, Watch, float] | None = None
        # Watches whose slow call was left behind before its poll_timeout.
        self._detached: list[Watch] = []
        # An error raised by a call left behind, for the live worker to raise.
        self._late_error: BaseException | None = None
        self._replace_lock = threading.Lock()
        # The watchdog's check period, and the watches it was computed for.
        self._period = 1.0
        self._period_of: object = None
        self._worker: threading.Thread | None = None
        self._watchdog: threading.Thread | None = None
        self._next_tick = 0.0

    # -- control ----------------------------------------------------------

    def start(self) -> None:
        """Start the worker (first poll one interval from now) and the watchdog.

        A watch whose call an earlier poller left behind is still watched
        for its ``poll_timeout``.
        """
        self._detached = [
            watch for watch in self._watches() if watch.detached and not watch.hung
        ]
        self._next_tick = time.monotonic() + self._interval
        self._worker = self._spawn(None, self._generation, one_shot=False)
        self._watchdog = threading.Thread(
            target=self._watch_loop, name="rlpulse-watchdog", daemon=True
        )
        self._watchdog.start()

    @property
    def alive(self) -> bool:
        """Whether a worker is polling."""
        worker = self._worker
        return worker is not None and worker.is_alive()

    def is_worker(self) -> bool:
        """Whether the calling thread is this poller's worker."""
        return threading.current_thread() is self._worker

    def polling(self, watch: Watch) -> bool:
        """Whether the live worker is polling ``watch`` right now."""
        run = self._active
        return run is not None and run.current is watch

    def request(self, run: Run) -> None:
        """Have the worker execute ``run`` as soon as it can."""
        self._requests.append(run)
        self._wake.set()

    def stop(self, deadline: float) -> bool:
        """Stop polling; wait for the worker until ``deadline``.

        The watchdog keeps replacing hung workers meanwhile. Returns whether
        the worker ended in time; if not, it is abandoned and the watch it
        was polling is marked hung.
        """
        self._stopping = True
        self._wake.set()
        while True:
            worker = self._worker
            if worker is None or worker is threading.current_thread():
                break
            worker.join(min(0.05, max(0.0, deadline - time.monotonic())))
            if not worker.is_alive() and worker is self._worker:
                break
            if time.monotonic() >= deadline:
                self._abandon_active()
                self._finish()
                return False
        self._finish()
        return True

    def run_final(self, run: Run) -> None:
        """Execute a forced ``run`` on a one-shot worker, supervised from this thread.

        Returns when the run is done or at ``run.deadline``; watches not
        reached remain in ``run.unfinished``.
        """
        self._spawn(run, self._generation, one_shot=True)
        deadline = run.deadline if run.deadline is not None else math.inf
        while not run.done.wait(min(self._check_period(), 0.05)):
            self._check(run)
            if time.monotonic() >= deadline:
                self._abandon_active()
                break
        self._active = None

    def _finish(self) -> None:
        self._watchdog_wake.set()
        watchdog = self._watchdog
        if watchdog is not None and watchdog is not threading.current_thread():
            watchdog.join(1.0)
        self._watchdog = None
        self._worker = None
        for run in self._requests:
            run.done.set()
        self._requests.clear()

    # -- worker -----------------------------------------------------------

    def _spawn(
        self, run: Run | None, generation: int, *, one_shot: bool
    ) -> threading.Thread:
        worker = threading.Thread(
            target=self._work,
            args=(run, generation, one_shot),
            name="rlpulse-poller",
            daemon=True,
        )
        worker.start()
        return worker

    def _work(self, run: Run | None, generation: int, one_shot: bool) -> None:
        if run is not None and not self._execute(run, generation):
            return
        if one_shot:
            return
        while True:
            if self._stopping or self._generation != generation:
                return
            timeout = self._next_tick - time.monotonic()
            if timeout > 0 and not self._requests:
                self._wake.wait(timeout)
                self._wake.clear()
                continue
            while self._requests:
                request = self._requests.popleft()
                if not self._execute(request, generation):
                    return
            if self._stopping:
                return
            if time.monotonic() < self._next_tick:
                continue
            error = self._late_error or self._pending_error()
            if error is not None:
                self._late_error = None
                raise error
            tick = Run(self._watches(), force=False, awaited=False)
            if not self._execute(tick, generation):
                return
            if tick.error is not None:
                raise tick.error
            self._next_tick = time.monotonic() + self._interval

    def _execute(self, run: Run, generation: int) -> bool:
        """Poll the rest of ``run``; False when this worker was abandoned meanwhile."""
        self._active = run
        poll = self._poll
        watches = run.watches
        force = run.force
        deadline = run.deadline
        logged = None if run.done is _UNAWAITED else run.logged
        claim = run.claims.setdefault
        done = _DONE
        now = time.monotonic()
        watch: Watch | None = None
        index = -1
        try:
            for index in range(run.index, len(watches)):
                watch = watches[index]
                # A watch whose call is outstanding has next_due = inf; a
                # time-only schedule that is not due is not polled at all. A
                # forced poll skips only watches whose call is outstanding.
                if now < watch.next_due and (not force or watch.detached):
                    continue
                if deadline is not None and time.monotonic() >= deadline:
                    break
                run.index = index + 1
                run.current = watch
                payload = poll(watch, force)
                if claim(index, done) is not done:
                    self._resume(watch)
                    return False
                if self._generation != generation:
                    # stop() ran out of time: the rest is left undone.
                    return False
                if watch.overruns:
                    # Returned within poll_timeout: the overrun streak ends.
                    watch.overruns = 0
                if logged is not None and payload is not None:
                    logged[watch.name] = payload
            else:
                run.index = len(watches)
        except BaseException as err:
            if watch is not None and claim(index, _DONE) is not _DONE:
                # A call left behind raised (on_error="raise"): the live
                # worker raises it at its next round.
                self._late_error = err
                self._resume(watch)
                return False
            run.error = err
        run.current = None
        self._active = None
        self._after_run()
        run.finished = True
        run.done.set()
        return True

    def _resume(self, watch: Watch) -> None:
        # An abandoned call returned: its watch is polled again. Under the
        # lock, so that the watchdog never marks it hung afterwards.
        with self._replace_lock:
            watch.resume()

    # -- watchdog ---------------------------------------------------------

    def _handover_after(self, watch: Watch) -> float:
        # How long one call may hold the round up before the rest of the
        # round moves to a fresh worker: about a poll interval.
        timeout = watch.poll_timeout
        if timeout is None:
            return math.inf
        return min(timeout, max(self._interval, MIN_HANDOVER_S))

    def _check_period(self) -> float:
        # Every third of the shortest hand-over delay: a call is handed over
        # between 1x and about 1.3x its delay. Recomputed only when the
        # watches change: the watchdog wakes often and competes for the
        # interpreter lock.
        watches = self._watches()
        if watches is not self._period_of:
            delays = [self._handover_after(w) for w in watches if w.poll_timeout]
            shortest = min(delays, default=1.0)
            self._period = min(1.0, max(0.002, shortest / 3))
            self._period_of = watches
        return self._period

    def _watch_loop(self) -> None:
        while not self._stopping or self._worker is not None:
            if self._watchdog_wake.wait(self._check_period()):
                return
            run = self._active
            if run is not None:
                self._check(run)
            if self._detached:
                self._check_detached()

    def _check(self, run: Run) -> None:
        watch = run.current
        if watch is None or watch.poll_timeout is None:
            self._seen = None
            return
        now = time.monotonic()
        seen = self._seen
        if seen is None or seen[0] is not run or seen[1] is not watch:
            self._seen = (run, watch, now)
            return
        held = now - seen[2]
        # Final snapshots (forced runs) wait for the whole poll_timeout.
        limit = watch.poll_timeout if run.force else self._handover_after(watch)
        if held >= limit:
            self._replace(run, watch, since=seen[2], hung=held >= watch.poll_timeout)

    def _check_detached(self) -> None:
        now = time.monotonic()
        with self._replace_lock:
            outstanding = []
            for watch in self._detached:
                if not watch.detached or watch.hung:
                    continue  # its call returned, or it is hung already
                timeout = watch.poll_timeout
                if timeout is not None and now - watch.detached_at >= timeout:
                    watch.mark_hung()
                    self._on_hung(watch)
                    continue
                outstanding.append(watch)
            self._detached = outstanding

    def _claim_current(self, run: Run, watch: Watch) -> bool:
        # Give up on run's call of watch, unless it has returned already.
        index = run.index - 1
        if index < 0 or run.watches[index] is not watch:
            return False
        return run.claims.setdefault(index, _ABANDONED) is _ABANDONED

    def _replace(self, run: Run, watch: Watch, *, since: float, hung: bool) -> None:
        with self._replace_lock:
            if run.finished or not self._claim_current(run, watch):
                return
            if hung:
                watch.mark_hung()
            else:
                watch.mark_detached(since)
                self._detached.append(watch)
            self._seen = None
            self._generation += 1
            generation = self._generation
            run.current = None
            if hung:
                self._on_hung(watch)
            if run.force:
                self._spawn(run, generation, one_shot=True)
            else:
                self._worker = self._spawn(run, generation, one_shot=False)

    def _abandon_active(self) -> None:
        with self._replace_lock:
            run = self._active
            self._generation += 1
            if run is None:
                return
            watch = run.current
            if watch is not None and self._claim_current(run, watch):
                watch.mark_hung()
                self._on_hung(watch)
                run.current = None
