"""What the monitor tells its user: its exact counters and its warnings.

Every counter of :meth:`rlpulse.LoggerMonitor.stats` lives in one
:class:`Reporter` and changes under its one lock, whichever thread counts:
the polling thread adds a round's polls and payloads once per round, sender
threads count their sink's failures and drops. Warnings follow one rule:
one per failure streak (of a watch, a sink, a queue; a queue's drop
streaks at most once a minute), through the ``rlpulse`` logger, unless
``on_error="ignore"``; and, whatever ``on_error``, one
:class:`~rlpulse.runtime.events.Event` at each streak's start and end.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

from rlpulse.runtime.events import Event, EventBus, EventKind, about_sink
from rlpulse.runtime.retry import MAX_BACKOFF_S, TransientSinkError
from rlpulse.runtime.sinks import Losses
from rlpulse.text import plural
from rlpulse.verdict import Verdict, describe

if TYPE_CHECKING:
    from rlpulse.runtime.queues import SinkQueue
    from rlpulse.runtime.sinks import Sink
    from rlpulse.watch import Watch

__all__ = ["DROP_WARNING_INTERVAL_S", "OnError", "Reporter", "RoundTally"]

_log = logging.getLogger("rlpulse")

# What a watch does without an entry its options name (Reporter.entry_missing).
_WITHOUT = {
    "Every.counter": "its counter schedule never fires",
    "step": "its payloads carry no step",
    "rate_keys": "it gets no rate",
    "progress_key": "it counts as making no progress",
}

OnError = Literal["warn", "raise", "ignore"]

DROP_WARNING_INTERVAL_S = 60.0
"""The least time between two drop warnings of one sink's queue."""


class RoundTally:
    """The watches one thread polled in its part of a round, and the payloads they logged.

    Compared by identity: two threads' tallies are often equal.
    """

    __slots__ = ("logged", "polls")

    def __init__(self) -> None:
        self.polls = 0
        self.logged = 0


class Reporter:
    """The monitor's counters and failure warnings, for one ``on_error`` mode.

    Examples:
        >>> reporter = Reporter("ignore")
        >>> tally = reporter.open_tally()
        >>> tally.polls += 3
        >>> tally.logged += 2
        >>> reporter.close_tally(tally, finished=True, seconds=0.5)
        >>> reporter.poll_failed(None, ValueError("bad"))
        >>> reporter.counts()
        {'rounds': 1, 'polls': 3, 'logged': 2, 'errors': 1, 'timeouts': 0, 'dropped': 0, 'rejected': 0}
    """

    def __init__(
        self,
        on_error: OnError,
        on_event: tuple[Callable[[Event], object], ...] = (),
        *,
        to_sinks: Callable[[Event], None] = lambda event: None,
    ) -> None:
        self.check_on_error(on_error)
        self.on_error = on_error
        # to_sinks: the monitor's Delivery (see Engine), none in a reporter alone.
        self.events = EventBus(on_event, to_sinks=to_sinks)
        self.after_fork()
        self._counts = dict.fromkeys(
            ("rounds", "polls", "logged", "errors", "timeouts", "dropped", "rejected"),
            0,
        )
        self.last_round_s = 0.0

    @staticmethod
    def check_on_error(on_error: object) -> None:
        """Raise ``ValueError`` unless ``on_error`` is one of the three modes."""
        if on_error not in ("warn", "raise", "ignore"):
            raise ValueError(
                "on_error must be one of 'warn', 'raise' or 'ignore', "
                f"got {on_error!r}."
            )

    def after_fork(self) -> None:
        """Forget what belonged to the parent's threads, which a forked child does not have.

        Their lock (held by one of them, it would never be released), their
        rounds in progress (they would be counted forever), and a sink error
        they were to raise; and the failure streaks of its watches, which
        the child's polls start afresh.
        """
        self._lock = threading.Lock()
        # Watches whose polls are failing: one warning each until they recover.
        self.failing: set[Watch] = set()
        # The tallies of the rounds in progress, one per polling thread.
        self._tallies: set[RoundTally] = set()
        # An error raised by a sink's sender thread, for the polling thread
        # to raise under on_error="raise".
        self._sink_error: BaseException | None = None
        # When each sink was last said to drop behind it.
        self._drops_behind_said: dict[Sink, float] = {}
        self.events.after_fork()

    def add(self, **counts: int) -> None:
        """Add to the named counters, atomically."""
        with self._lock:
            for name, count in counts.items():
                self._counts[name] += count

    def open_tally(self) -> RoundTally:
        """A tally for one thread's part of a round, counted in :meth:`counts` until closed.

        Only the thread that opened it writes to it, so its counts need no
        lock; :meth:`close_tally` adds them to the counters once.
        """
        tally = RoundTally()
        with self._lock:
            self._tallies.add(tally)
        return tally

    def close_tally(self, tally: RoundTally, *, finished: bool, seconds: float) -> None:
        """Add ``tally`` to the counters; a ``finished`` round also counts as a round of ``seconds``."""
        with self._lock:
            # Not there in a child forked while the round was under way.
            self._tallies.discard(tally)
            counts = self._counts
            counts["polls"] += tally.polls
            counts["logged"] += tally.logged
            if finished:
                counts["rounds"] += 1
                self.last_round_s = seconds

    def counts(self) -> dict[str, int]:
        """A consistent copy of every counter, the rounds in progress included."""
        with self._lock:
            counts = dict(self._counts)
            for tally in self._tallies:
                counts["polls"] += tally.polls
                counts["logged"] += tally.logged
        return counts

    def poll_failed(self, watch: Watch | None, error: Exception) -> None:
        """Count a failed poll; tell (a ``poll_failing`` event) and warn once per streak; raise it under ``on_error="raise"``.

        A target that is gone (a Ray actor killed, a server down) raises at
        every poll: its streak is what says so, an event an alert can
        follow, until :meth:`poll_recovered` ends it.
        """
        self.add(errors=1)
        if self.on_error == "raise":
            raise error
        # An unwatched watch's call that fails late starts no streak: its
        # streaks ended at unwatch(), and nothing more is said of it.
        if watch is None or watch in self.failing or not watch.active:
            return
        self.failing.add(watch)
        self.events.emit(watch.name, EventKind.POLL_FAILING, f"failed: {error!r}")
        if self.on_error == "warn":
            _log.warning(
                "LoggerMonitor failed to poll or log watch %r: %r. Further errors "
                "for this watch will be silent until it recovers.",
                watch.name,
                error,
            )

    def sink_failed(
        self, sink: Sink, watch_name: str, error: Exception, *, queued: bool
    ) -> None:
        """Count a failed sink call (``watch_name`` empty for a flush); warn once per streak.

        A queued sink's error under ``on_error="raise"`` is kept for the
        polling thread to raise (:meth:`take_sink_error`). A queued sink's
        :class:`~rlpulse.runtime.retry.TransientSinkError` is tried again
        by its queue, and the warning says so.
        """
        self._count_sink_error(error, queued=queued)
        if sink.failing:
            return
        # Failing before it is said: the event reaches this sink too.
        sink.failing = True
        self._sink_event(sink, EventKind.SINK_FAILING, f"failed: {error!r}")
        if self.on_error != "warn":
            return
        if not watch_name:
            _log.warning("LoggerMonitor failed to flush sink %s: %r.", sink.name, error)
            return
        retried = queued and isinstance(error, TransientSinkError)
        _log.warning(
            "LoggerMonitor failed to log watch %r to sink %s: %r. %s Further "
            "errors of this sink will be silent until it recovers.",
            watch_name,
            sink.name,
            error,
            f"Its payloads stay queued and are tried again, waiting up to "
            f"{MAX_BACKOFF_S:g} s between tries; its queue drops the oldest only once full."
            if retried
            else "Those payloads are not sent again.",
        )

    def event_failed(
        self, sink: Sink, event: Event, error: Exception, *, queued: bool
    ) -> None:
        """Count a failed ``log_event`` of ``sink``; warn once per streak of its events failing.

        A streak of its own, apart from its payloads' (``sink_failing`` and
        ``sink_recovered``, which are events too: a sink whose every event
        fails would otherwise start a streak with each event that says one
        ended). Kept for the polling thread to raise as a payload's error
        is, under ``on_error="raise"``.
        """
        self._count_sink_error(error, queued=queued)
        if sink.events_failing:
            return
        sink.events_failing = True
        if self.on_error != "warn":
            return
        retried = queued and isinstance(error, TransientSinkError)
        _log.warning(
            "LoggerMonitor failed to log a %s event to sink %s: %r. %s Further "
            "event errors of this sink will be silent until it logs an event again.",
            event.kind,
            sink.name,
            error,
            "The event stays queued and is tried again after a back-off."
            if retried
            else "That event is not sent again.",
        )

    def _count_sink_error(self, error: Exception, *, queued: bool) -> None:
        # Counted; a queued sink's kept for the polling thread to raise
        # under on_error="raise" (a call on the caller's thread raises there).
        self.add(errors=1)
        if self.on_error == "raise" and queued:
            with self._lock:
                self._sink_error = error

    def event_logged(self, sink: Sink) -> None:
        """``sink`` logged an event: a streak of its events failing ends."""
        sink.events_failing = False

    def sink_recovered(self, sink: Sink) -> None:
        """A failing sink took a call again: its failure streak ends."""
        if sink.failing:
            sink.failing = False
            self._sink_event(sink, EventKind.SINK_RECOVERED, "writes again")
            if self.on_error == "warn":
                # Its end said too, a level below its start (see above).
                _log.info("LoggerMonitor logs to sink %s again.", sink.name)

    def _sink_event(self, sink: Sink, kind: EventKind, what: str) -> None:
        # A sink's streak, of no watch.
        self.events.emit("", kind, about_sink(sink.name, what), subject=sink)

    def take_sink_error(self) -> BaseException | None:
        """The error a sender thread kept under ``on_error="raise"``, once."""
        with self._lock:
            error, self._sink_error = self._sink_error, None
        return error

    def dropped(self, queue: SinkQueue, count: int = 1) -> None:
        """Count ``count`` payloads dropped from a full queue; warn at the start of a drop streak.

        At most once every :data:`DROP_WARNING_INTERVAL_S` per queue: a sink
        that keeps catching up and falling behind again would warn at every
        fall.
        """
        self.add(dropped=count)
        if queue.dropping:
            return
        self.events.emit(
            "",
            EventKind.DROPPING,
            about_sink(
                queue.sink.name,
                f"dropped {plural(count, 'payload')}: its queue of {queue.size} is full",
            ),
            count,
        )
        if self.on_error != "warn":
            return
        now = time.monotonic()
        if (
            queue.warned_at is not None
            and now - queue.warned_at < DROP_WARNING_INTERVAL_S
        ):
            return
        queue.warned_at = now
        what = "payload" if count == 1 else f"payloads, {count} of them,"
        earlier = queue.dropped - count
        why = (
            "the sink keeps failing, and its payloads wait to be tried again"
            if queue.retry_error is not None
            else "the sink is slower than the polls"
        )
        _log.warning(
            "LoggerMonitor dropped the oldest pending %s of sink %s: its "
            "queue of %d is full (%s)%s. Further "
            "drops are counted silently until the sink catches up; one that "
            "falls behind again is warned about at most once a minute.",
            what,
            queue.sink.name,
            queue.size,
            why,
            f"; {earlier} dropped from it before" if earlier > 0 else "",
        )

    def rejected(self, count: int) -> None:
        """Count ``count`` payloads lost to a sink's call that failed for good (the failure itself is :meth:`sink_failed`'s)."""
        self.add(rejected=count)

    def lost_behind(self, sink: Sink, losses: Losses) -> None:
        """Count payloads ``sink`` lost after taking them (its ``losses()``: a queue in a :class:`~rlpulse.SinkProcess`'s child was full, the child died, a sink there refused them); the failure itself, if any, is :meth:`sink_failed`'s.

        Drops behind a sink are said as a full queue's are, a ``dropping``
        event and a warning, at most once every
        :data:`DROP_WARNING_INTERVAL_S` per sink: its queues are out of
        sight, so that is the only streak there is to go by.
        """
        self.add(dropped=losses.dropped, rejected=losses.rejected)
        if not losses.dropped:
            return
        now = time.monotonic()
        with self._lock:
            said = self._drops_behind_said.get(sink)
            if said is not None and now - said < DROP_WARNING_INTERVAL_S:
                return
            self._drops_behind_said[sink] = now
        count = losses.dropped
        self.events.emit(
            "",
            EventKind.DROPPING,
            about_sink(
                sink.name,
                f"dropped {plural(count, 'payload')} it had taken: a queue behind "
                "it was full, or what held them is gone",
            ),
            count,
        )
        if self.on_error == "warn":
            _log.warning(
                "LoggerMonitor: sink %s dropped %s it had taken: a queue behind "
                "it was full (one of a SinkProcess's sinks failing or slower "
                "than the polls), or the process that held them is gone. "
                "Further drops behind it are counted silently, said again at "
                "most once a minute.",
                sink.name,
                plural(count, "payload"),
            )

    def hung(self, watch: Watch, overruns: int) -> None:
        """Count a provider call that overran ``poll_timeout``; warn at the start of a streak."""
        self.add(timeouts=1)
        if overruns > 1 or not watch.active:
            return  # within a streak, or of a watch unwatched: nothing to say
        timeout = watch.spec.poll_timeout or 0.0
        self.events.emit(
            watch.name,
            EventKind.HUNG,
            f"stats() has not returned within poll_timeout={timeout}s",
            timeout,
        )
        if self.on_error != "ignore":
            _log.warning(
                "LoggerMonitor skipped watch %r: its stats() call has not returned "
                "within poll_timeout=%ss. The other watches go on; this one is "
                "polled again once the call returns. Further overruns are counted "
                "silently until a call returns in time.",
                watch.name,
                watch.spec.poll_timeout,
            )

    def hung_at_stop(self, watch: Watch, overruns: int, stop_timeout: float) -> None:
        """Count a final snapshot's call that overran ``poll_timeout`` (or, without one, the stop's ``stop_timeout``), and name it."""
        self.add(timeouts=1)
        limit = watch.spec.poll_timeout
        within = (
            f"stop_timeout={stop_timeout}s"
            if limit is None or limit >= stop_timeout
            else f"poll_timeout={limit}s"
        )
        self.events.emit(
            watch.name,
            EventKind.HUNG,
            f"no final snapshot: stats() did not return within {within}",
            limit or stop_timeout,
        )
        _log.warning(
            "LoggerMonitor logged no final snapshot of watch %r: its stats() call "
            "did not return within %s.",
            watch.name,
            within,
        )

    def poll_recovered(self, watch: Watch) -> None:
        """``watch`` was polled without an error: a streak of failed polls ends (an unwatched one's ended at ``unwatch()``)."""
        failing = self.failing
        if watch not in failing:
            return
        failing.discard(watch)
        if watch.active:
            self.events.emit(
                watch.name, EventKind.POLL_RECOVERED, "polled without an error again"
            )
            if self.on_error == "warn":
                # Its end said too, a level below its start: warnings stay
                # TorchRL's, one a streak.
                _log.info("LoggerMonitor polls and logs watch %r again.", watch.name)

    def resumed(self, watch: Watch) -> None:
        """A hung call of ``watch`` returned: it is polled again (an unwatched one's streak ended at ``unwatch()``)."""
        if not watch.active:
            return
        self.events.emit(
            watch.name, EventKind.RESUMED, "stats() returned; polled again"
        )

    def unwatched(self, watch: Watch) -> None:
        """``watch`` was unwatched: each of its streaks still open ends now, so that none stays open for a watch gone, then an ``unwatched`` event says it is gone.

        Told at once, on the thread of ``unwatch()``, also while the
        monitor is stopped: a sink serving the latest values stops serving
        the watch's.
        """
        with self.events.inline():
            self._end_streaks(watch)
            self.events.emit(
                watch.name, EventKind.UNWATCHED, "no longer watched (unwatch())"
            )

    def stopped(self) -> None:
        """The monitor stopped, its final snapshots handed on: a ``stopped`` event says so, after them."""
        logged = self.counts()["logged"]
        self.events.emit(
            "",
            EventKind.STOPPED,
            f"LoggerMonitor stopped, having logged {plural(logged, 'payload')}",
            logged,
        )

    def _end_streaks(self, watch: Watch) -> None:
        for started in self.events.open_streaks(watch.name):
            if started.kind == EventKind.STALLED:
                # Polled without progress: a time stopped counts for nothing.
                seconds = watch.seconds_without_progress()
                if seconds is None:
                    seconds = started.value + max(0.0, time.time() - started.wall_time)
                self.events.emit(
                    watch.name,
                    EventKind.RECOVERED,
                    f"no longer watched (unwatch()) after {seconds:.1f}s without progress",
                    seconds,
                )
            elif started.kind == EventKind.HUNG:
                self.events.emit(
                    watch.name,
                    EventKind.RESUMED,
                    "no longer watched (unwatch()); its stats() call was still out",
                )
            elif started.kind == EventKind.POLL_FAILING:
                self.failing.discard(watch)
                self.events.emit(
                    watch.name,
                    EventKind.POLL_RECOVERED,
                    "no longer watched (unwatch()); its polls were still failing",
                )

    def workers_lost(
        self, watch: Watch, alive: float, before: float, lost: float
    ) -> None:
        """``watch``'s ``workers_alive`` fell from ``before`` to ``alive``, ``lost`` of them without finishing."""
        message = f"{lost:g} worker{'s' if lost != 1 else ''} lost: {alive:g} of {before:g} alive"
        finished = before - alive - lost
        if finished > 0:
            message += f" ({finished:g} finished)"
        self.events.emit(watch.name, EventKind.WORKER_LOST, message, alive)

    def bottleneck(self, watch: str, verdict: Verdict) -> None:
        """The verdict of bottleneck watch ``watch`` changed to ``verdict`` (and held): its sentence, its side as the value."""
        bound = 0.0 if verdict.bound is None else float(verdict.bound)
        self.events.emit(watch, EventKind.BOTTLENECK, describe(verdict), bound)

    def stalled(self, watch: Watch, stalled: bool, seconds: float) -> None:
        """``watch`` has made no progress for ``seconds`` (``stalled``), or moves again after ``seconds`` without."""
        spec = watch.spec
        keys = spec.progress_key
        progress = keys if isinstance(keys, str) else ", ".join(keys or ())
        kind, message = (
            (EventKind.STALLED, f"no progress ({progress}) for {seconds:.1f}s")
            if stalled
            else (
                EventKind.RECOVERED,
                f"progress ({progress}) again after {seconds:.1f}s",
            )
        )
        self.events.emit(watch.name, kind, message, seconds)
        if not stalled:
            return
        _log.warning(
            "LoggerMonitor: watch %r has made no progress (%s) for %.1fs "
            "(stall_after=%ss); its payloads carry %s/stalled = 1.0 until it "
            "moves again.",
            watch.name,
            progress,
            seconds,
            spec.stall_after,
            watch.name,
        )

    def entry_missing(
        self, watch: Watch, option: str, key: str, entries: Sequence[str]
    ) -> None:
        """Warn that ``watch``'s snapshot has no entry ``key``, which ``option`` names."""
        shown = ", ".join(entries[:20]) + (", ..." if len(entries) > 20 else "")
        _log.warning(
            "LoggerMonitor: watch %r: %s names %r, but its snapshots have had no "
            "such numeric entry so far; it has: %s. Check the name: until it "
            "appears, %s.",
            watch.name,
            option,
            key,
            shown,
            _WITHOUT[option],
        )

    def no_final_snapshot(self, watch: Watch, why: str) -> None:
        """Warn that ``watch`` got no final snapshot, and why."""
        _log.warning(
            "LoggerMonitor logged no final snapshot of watch %r: %s", watch.name, why
        )

    def not_flushed(self, sink: Sink, stop_timeout: float) -> None:
        """Warn about a sink whose flush at stop did not return in time (manual mode)."""
        _log.warning(
            "LoggerMonitor stopped without flushing sink %s: its flush() "
            "(or a call it was in) did not return within stop_timeout=%ss.",
            sink.name,
            stop_timeout,
        )

    def sink_stopped(
        self, queue: SinkQueue, stop_timeout: float, discarded: int | None
    ) -> None:
        """Say in one line what ``queue``'s sink did not take from ``start()`` to ``stop()``, if anything; count in ``dropped`` the payloads ``stop()`` ``discarded`` (``None``: it drained in time).

        A sink not drained is named whatever ``on_error`` says, with why
        (:meth:`SinkQueue.why_undrained <rlpulse.runtime.queues.SinkQueue.why_undrained>`;
        else it was stuck in a call), apart from the payloads of the call
        it was stuck in, which that call may still deliver. What it lost
        before (its full queue's drops, its failed calls' rejections) is
        told with it; for a sink drained in time, unless ``on_error="ignore"``.
        """
        behind = queue.lost_behind
        parts = (
            (queue.rejected, "lost to its failed calls (counted in rejected)"),
            (queue.dropped, "dropped from its full queue (counted in dropped)"),
            (behind.rejected, "refused by the sinks it feeds (counted in rejected)"),
            (behind.dropped, "lost after it took them (counted in dropped)"),
        )
        earlier = [f"{count} {what}" for count, what in parts if count]
        name = queue.sink.name
        if discarded is None:
            if earlier and self.on_error != "ignore":
                _log.warning(
                    "LoggerMonitor: since start(), sink %s did not deliver %s: %s.",
                    name,
                    plural(sum(count for count, _ in parts), "payload"),
                    _listed(earlier),
                )
            return
        self.add(dropped=discarded)
        in_flight = queue.in_flight
        left = [
            f"{plural(count, 'payload')} {'was' if count == 1 else 'were'} {what}"
            for count, what in (
                (discarded, "not delivered (counted in dropped)"),
                (
                    in_flight,
                    "still being written by it (counted in rejected only if "
                    "that call fails)",
                ),
            )
            if count
        ]
        _log.warning(
            "LoggerMonitor stopped without draining sink %s: %s within "
            "stop_timeout=%ss; %s, and it gets no more calls until the monitor "
            "is started again.%s",
            name,
            queue.why_undrained() or "it did not return",
            stop_timeout,
            _listed(left) if left else "no payload was left in its queue",
            f" Since start(), {_listed(earlier)}." if earlier else "",
        )


def _listed(parts: Sequence[str]) -> str:
    """``parts`` in one phrase.

    >>> _listed(["a"]), _listed(["a", "b"]), _listed(["a", "b", "c"])
    ('a', 'a and b', 'a, b and c')
    """
    return " and ".join(filter(None, (", ".join(parts[:-1]), parts[-1])))
