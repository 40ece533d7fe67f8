"""The engine: the moving parts of one monitor, from a provider call to the sinks.

It polls one watch (:meth:`Engine.poll`: call, decide, deliver, commit),
runs rounds inline (manual mode) or on a :class:`~rlpulse.runtime.poller.Poller`
with its :class:`~rlpulse.runtime.watchdog.Watchdog` (background mode), and
stops them under one :class:`~rlpulse.runtime.deadline.Deadline`. Its one
generation counter moves on at every start and stop: a call that returns
after either (one left behind as slow or hung) delivers nothing.
"""

from __future__ import annotations

import functools
import math
import threading
import time
from collections.abc import Callable, Sequence

from rlpulse.runtime.agenda import Agenda
from rlpulse.runtime.deadline import Deadline, check_timeout
from rlpulse.runtime.delivery import Delivery
from rlpulse.runtime.events import Event
from rlpulse.runtime.poller import Poller, Round, poll_final
from rlpulse.runtime.queues import Item
from rlpulse.runtime.reporting import OnError, Reporter
from rlpulse.runtime.sinks import Sink
from rlpulse.runtime.supervision import Supervision
from rlpulse.runtime.watchdog import Watchdog
from rlpulse.watch import Watch

__all__ = ["Engine"]

_FLUSH_RESERVE_S = 1.0
"""What stop() keeps of its deadline for the sinks' final flush (at most a quarter of it).

Waiting for calls left behind and for final snapshots may take until the
deadline otherwise, and a sink's sender needs a moment to flush."""


class Engine:
    """Polls a monitor's watches and delivers their payloads to ``sinks``, inline or in the background.

    ``watches()`` gives the current registration, in order; ``on_error``
    and ``on_event`` are the monitor's (see :class:`Reporter`).
    """

    def __init__(
        self,
        watches: Callable[[], Sequence[Watch]],
        sinks: Sequence[Sink],
        *,
        on_error: OnError,
        on_event: tuple[Callable[[Event], object], ...],
        poll_interval: float,
        queue_size: int,
        stop_timeout: float | None,
    ) -> None:
        # A value of another type is a TypeError, as TorchRL's comparison
        # raises for one; a number out of range a ValueError.
        wrong_type = not isinstance(poll_interval, (int, float)) or isinstance(
            poll_interval, bool
        )
        if wrong_type or not (poll_interval > 0 and math.isfinite(poll_interval)):
            raise (TypeError if wrong_type else ValueError)(
                "poll_interval must be a positive, finite number of seconds, "
                f"got {poll_interval!r}."
            )
        check_timeout("stop_timeout", stop_timeout)
        if type(queue_size) is not int or queue_size < 1:  # bool is no size
            raise ValueError(
                f"queue_size must be a whole number of payloads, at least 1, "
                f"got {queue_size!r}."
            )
        self.watches = watches
        # Which watches a round calls; only one thread at a time asks (the
        # polling thread, or an inline step() under the poll lock).
        self.agenda = Agenda(watches)
        # The one cycle among the parts: the delivery reports its sinks'
        # failures to the reporter, whose events reach the sinks through
        # the delivery. Each is given the other's side as it is made.
        self.reporter = Reporter(on_error, on_event, to_sinks=self._to_sinks)
        self.delivery = Delivery(sinks, self.reporter, on_raise=self.nudge)
        self.poll_interval = float(poll_interval)
        self.queue_size = queue_size
        # None: long enough for a final round at the slowest poll pace.
        self.stop_timeout = (
            max(5.0, 2 * self.poll_interval) if stop_timeout is None else stop_timeout
        )
        self.generation = 0
        self.after_fork()

    def after_fork(self) -> None:
        """Forget every thread and lock, and start every watch afresh: what a forked child must not inherit.

        The parent's calls left behind, its stalls and its failing sinks
        are the parent's to end; the child's streaks are its own.
        """
        if hasattr(self, "supervision"):  # a fork, not __init__
            for watch in self.watches():
                watch.after_fork()
            self.agenda = Agenda(self.watches)
        self.supervision = Supervision()
        self.poll_lock = threading.Lock()
        # The thread of a step() polling inline, under the poll lock.
        self.stepping_thread: threading.Thread | None = None
        self.poller: Poller | None = None
        self.watchdog: Watchdog | None = None
        self.delivery.after_fork()
        self.reporter.after_fork()

    def _to_sinks(self, event: Event) -> None:
        self.delivery.deliver_event(event)

    # -- one watch --------------------------------------------------------

    def poll(
        self, watch: Watch, force: bool, scheduled: float | None = None
    ) -> dict[str, float] | None:
        """Poll ``watch`` once; return its payload when delivered.

        ``scheduled``: when the polling thread's round was due (see
        :meth:`~rlpulse.watch.Watch.commit`).
        """
        generation = self.generation
        failing = self.reporter.failing
        try:
            raw = watch.call()
            if watch.counter_gated and not force and watch.below_threshold(raw):
                if failing:
                    self.reporter.poll_recovered(watch)
                return None
            now = time.monotonic()
            if not watch.active or generation != self.generation:
                return None
            logged = watch.evaluate(raw, now, force)
        except Exception as err:
            self.reporter.poll_failed(watch, err)
            return None
        if failing:
            self.reporter.poll_recovered(watch)
        if logged is None:
            return None
        delivery = self.delivery
        wall_time = time.time() if delivery.wants_timestamp else 0.0
        payload = logged.payload
        distributions = logged.intervals.histograms
        if not delivery.deliver(
            Item(
                payload, logged.step, wall_time, watch.name, logged.kinds, distributions
            )
        ):
            return None
        watch.commit(logged, now, scheduled, self.poll_interval)
        return payload

    # -- rounds -----------------------------------------------------------

    def due(self, now: float) -> Sequence[Watch]:
        """The watches a round at ``now`` calls."""
        return self.agenda.due(now)

    def nudge(self) -> None:
        """Have the polling thread, if asleep until a later due time, run a round within an interval.

        For a watch just registered, and for a sink error that is to end
        polling (``on_error="raise"``), raised at the next round.
        """
        if self.poller is not None:
            self.poller.cadence.wake(nudge=True)

    def step(self) -> dict[str, dict[str, float]]:
        """Poll every watch once; on a polling thread that is alive, on that thread."""
        poller = self.poller
        if poller is not None and not poller.is_polling_thread() and poller.alive:
            polls = Round(self.watches(), force=False)
            poller.request(polls)
            while not polls.done.wait(0.05):
                if not poller.alive:
                    break
            if polls.error is not None:
                raise polls.error
            if polls.done.is_set() or polls.index > 0:
                return polls.logged
        # Manual mode, or the polling thread has ended (on_error="raise"
        # ended it): poll on this thread.
        return self._step_inline()

    def _step_inline(self) -> dict[str, dict[str, float]]:
        logged: dict[str, dict[str, float]] = {}
        left = self.supervision.left
        with self.poll_lock, self.reporter.events.inline():
            self.stepping_thread = threading.current_thread()
            tally = self.reporter.open_tally()
            started = now = time.monotonic()
            finished = False
            try:
                # A time-only schedule that is not due costs no call.
                for watch in self.due(now):
                    if left and watch in left:
                        continue
                    tally.polls += 1
                    payload = self.poll(watch, False)
                    if payload is not None:
                        tally.logged += 1
                        logged[watch.name] = payload
                finished = True
            finally:
                self.stepping_thread = None
                seconds = time.monotonic() - started
                self.reporter.close_tally(tally, finished=finished, seconds=seconds)
            # The polling thread may have ended: nobody else wakes the senders.
            self.delivery.end_round()
        return logged

    def wait_done_with(self, watch: Watch, timeout: float) -> None:
        """Wait until no thread but the caller's own is polling ``watch`` (unwatch())."""
        if threading.current_thread() is self.stepping_thread:
            return
        poller = self.poller
        if poller is not None and poller.alive:
            if not poller.is_polling_thread():
                poller.wait_done_with(watch, timeout)
        elif self.poll_lock.acquire(timeout=timeout):
            # A step() polling inline on another thread (manual mode, or the
            # polling thread ended) holds the poll lock.
            self.poll_lock.release()

    # -- background -------------------------------------------------------

    def start(self) -> None:
        """Open the sinks' queues and start polling in the background."""
        self.delivery.open_queues(self.queue_size)
        self.generation += 1
        poller = self._poller(
            self.watches, self.due, self.agenda.next_due, on_hung=self.reporter.hung
        )
        self.poller, self.watchdog = poller, Watchdog(poller)
        poller.start()
        self.watchdog.start()

    @property
    def running(self) -> str:
        """``"idle"``, ``"running"``, or ``"polling thread ended"``."""
        if self.poller is None:
            return "idle"
        return "running" if self.poller.alive else "polling thread ended"

    def stop_polling(self, deadline: Deadline) -> None:
        """Stop the polling thread and the watchdog, by ``deadline``."""
        poller, watchdog, self.poller = self.poller, self.watchdog, None
        if poller is not None and watchdog is not None:
            poller.stop(until=self._waits_end(deadline))
            watchdog.stop()
        self.generation += 1

    def finish(self, deadline: Deadline, log_final: bool | None) -> None:
        """Log the final snapshots, then drain and flush every sink, by ``deadline``.

        A watch gets one when its ``log_on_close`` is true, or whatever it
        is when ``log_final`` is not ``None``. Under ``on_error="raise"`` the
        first failure is raised, once the sinks are drained and flushed.
        """
        finals = [
            watch
            for watch in self.watches()
            if (watch.spec.log_on_close if log_final is None else log_final)
        ]
        error: BaseException | None = None
        # A step() on another thread polls inline now that the polling
        # thread is gone: the final snapshots wait for it, and it for them,
        # so that no watch is polled on two threads at once.
        # (Unless this thread is that step(): stop() called from a stats().)
        exclusive = False
        if self.stepping_thread is not threading.current_thread():
            wait = max(0.0, self._waits_end(deadline) - time.monotonic())
            exclusive = self.poll_lock.acquire(timeout=min(wait, threading.TIMEOUT_MAX))
        try:
            self._final_snapshots(finals, deadline)
        except Exception as err:
            error = err
        finally:
            if exclusive:
                self.poll_lock.release()
        # After the final snapshots, before the queues close: the last news.
        self.reporter.stopped()
        # A final snapshot's call that is still out delivers nothing later.
        self.generation += 1
        # Started again, the watches start afresh: no rate spans the stop.
        for watch in self.watches():
            watch.restart()
        self.agenda = Agenda(self.watches)
        drain_error = self.delivery.close(deadline, self.stop_timeout)
        self.reporter.events.close(deadline.at)
        error = error or drain_error
        if error is not None:
            raise error

    def _waits_end(self, deadline: Deadline) -> float:
        # Waiting for threads and calls ends a little before the deadline,
        # so that the sinks always have time for their final flush.
        return deadline.at - min(_FLUSH_RESERVE_S, self.stop_timeout / 4)

    def _final_snapshots(self, watches: Sequence[Watch], deadline: Deadline) -> None:
        # The watches whose call is not out get theirs at once; then a call
        # left behind within its poll_timeout is waited for: it may return
        # in time for its own.
        until = self._waits_end(deadline)
        table = self.supervision
        outstanding = {watch for watch in watches if table.outstanding(watch)}
        self._final_round([w for w in watches if w not in outstanding], until)
        # A call that overran its poll_timeout in that round was reported
        # then; one left behind may still return in time.
        late = [
            watch
            for watch in watches
            if watch in outstanding
            or (table.outstanding(watch) and not table.is_hung(watch))
        ]
        if not late:
            return
        table.wait_returned(late, until)
        for watch in late:
            if table.outstanding(watch):
                state = "hung" if table.is_hung(watch) else "outstanding"
                self.reporter.no_final_snapshot(
                    watch, f"its stats() call is still {state}."
                )
        self._final_round([w for w in late if not table.outstanding(w)], until)

    def _final_round(self, watches: list[Watch], until: float) -> None:
        if not watches:
            return
        polls = Round(watches, force=True, deadline=until)
        finisher = self._poller(
            lambda: watches,
            lambda now: watches,
            lambda: -math.inf,
            on_hung=functools.partial(
                self.reporter.hung_at_stop, stop_timeout=self.stop_timeout
            ),
        )
        watchdog = Watchdog(finisher)
        poll_final(finisher, polls, watchdog.check, watchdog.period())
        if polls.error is not None:
            raise polls.error  # on_error="raise": the first failure ends them
        for watch in polls.unfinished:
            if not self.supervision.outstanding(watch):
                self.reporter.no_final_snapshot(
                    watch, f"stop_timeout={self.stop_timeout}s ran out first."
                )

    def _poller(
        self,
        watches: Callable[[], Sequence[Watch]],
        due: Callable[[float], Sequence[Watch]],
        next_due: Callable[[], float],
        *,
        on_hung: Callable[[Watch, int], None],
    ) -> Poller:
        """A polling thread of this engine over ``watches``: the live one, or a final round's."""
        return Poller(
            poll=self.poll,
            watches=watches,
            interval=self.poll_interval,
            supervision=self.supervision,
            reporter=self.reporter,
            end_round=self.delivery.end_round,
            on_hung=on_hung,
            due=due,
            next_due=next_due,
            on_resumed=self.reporter.resumed,
        )
