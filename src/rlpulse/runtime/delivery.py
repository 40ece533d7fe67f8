"""Delivery: how a payload reaches every sink, inline or through the sinks' queues.

Manual mode calls every sink on the polling thread before ``step()``
returns. In background mode every sink has its own bounded
:class:`~rlpulse.runtime.queues.SinkQueue` and sender thread: a round's
payloads are kept together while it polls, then queued for every sink at
once and the senders woken, once per round (a sink that takes a round
without waiting is handed it then, on the polling thread); :meth:`close`
closes every queue at once, so the queues drain side by side under one
deadline and a hung sink keeps no other sink from its final flush.
"""

from __future__ import annotations

import functools
import threading
from collections import deque
from collections.abc import Callable, Sequence

from rlpulse.naming import Payload
from rlpulse.runtime.deadline import Deadline, side_by_side
from rlpulse.runtime.events import Event
from rlpulse.runtime.queues import Item, QueueListener, SinkQueue
from rlpulse.runtime.reporting import Reporter
from rlpulse.runtime.retry import payloads_lost
from rlpulse.runtime.sinks import LossReader, Sink

__all__ = ["Delivery"]


class Delivery:
    """The sinks of one monitor and, while it polls in the background, their queues.

    Examples:
        >>> class Printer:
        ...     def log_metrics(self, metrics, step=None):
        ...         print(step, metrics)
        >>> delivery = Delivery((Sink(Printer()),), Reporter("warn"))
        >>> delivery.deliver(Item({"rb/size": 1.0}, 3, 0.0, "rb", {}, {}))
        3 {'rb/size': 1.0}
        True
    """

    def __init__(
        self,
        sinks: Sequence[Sink],
        reporter: Reporter,
        *,
        on_raise: Callable[[], None] = lambda: None,
    ) -> None:
        self.sinks = tuple(sinks)
        self.wants_timestamp = any(sink.wants_timestamp for sink in self.sinks)
        self._reporter = reporter
        self.queues: tuple[SinkQueue, ...] = ()
        # Told when a queued sink's error is to end polling (on_error="raise"):
        # the polling thread may be asleep until a watch is due.
        self._on_raise = on_raise
        # What the sinks that hand payloads on lose behind them: one reader
        # a sink, for inline calls and its queues alike, and for every
        # monitor it is a sink of, so that a loss is counted once whichever
        # reads it first.
        self._losses = {
            sink: LossReader.of(sink.target, sink.losses)
            for sink in self.sinks
            if sink.losses is not None
        }
        self.after_fork()

    def after_fork(self) -> None:
        """Forget the queues and their threads, and what the parent polled: a forked child's parent delivers that.

        A sink failing in the parent is not failing in the child: its
        failure streak, and the end of it, are the parent's to tell.
        """
        self.queues = ()
        for sink in self.sinks:
            sink.failing = False
            sink.events_failing = False
            # Held by a parent's sender, maybe: no thread of the child's.
            sink.calls = threading.Lock()
        # While close() drains the queues: the events noticed meanwhile,
        # for the sinks drained in time (None the rest of the time).
        self._draining: list[Event] | None = None
        # The payloads polled since the last round ended, for every queue.
        self._polled: deque[Item] = deque()
        # The events noticed since the last hand-over, for every queue.
        self._events: deque[Event] = deque()
        # One hand-over at a time: a call left behind, or a step() on another
        # thread, may end a round while the polling thread does, or while the
        # queues close. Adding a payload needs no lock (see deliver()).
        self._lock = threading.Lock()

    def open_queues(self, size: int) -> None:
        """Feed every sink from its own queue of ``size`` payloads from now on."""
        self._draining = None
        self._events.clear()
        self.queues = tuple(
            SinkQueue(
                sink,
                size=size,
                listener=QueueListener(
                    on_failure=self._queued_sink_failed,
                    on_success=self._reporter.sink_recovered,
                    on_drop=self._reporter.dropped,
                    on_reject=self._reporter.rejected,
                    on_lost_behind=functools.partial(self._reporter.lost_behind, sink),
                    on_event_failure=self._queued_event_failed,
                    on_event_logged=self._reporter.event_logged,
                ),
                losses=self._losses.get(sink),
            )
            for sink in self.sinks
        )
        for queue in self.queues:
            queue.start()

    def deliver(self, item: Item) -> bool:
        """Hand ``item`` to every sink; whether any took it.

        Queued: always taken, and queued for every sink when the round
        ends (:meth:`end_round`). Inline: under ``on_error="raise"`` the first
        sink error is raised once every sink has been called.
        """
        queues = self.queues
        if queues:
            self._polled.append(item)
            if self.queues is queues:
                return True  # the queues still open: the hand-over will find it
            # They closed meanwhile (close() empties self.queues before it
            # hands over): unless the hand-over took it, it goes inline.
            try:
                self._polled.remove(item)
            except ValueError:
                return True
        payload, step, wall_time, watch_name, kinds, distributions = item
        delivered = False
        first_error: Exception | None = None
        for sink in self.sinks:
            if not sink.calls.acquire(blocking=False):
                # A call stop() left behind is still in this sink (a step()
                # after stop()): it is not called beside it.
                self._reporter.add(dropped=1)
                continue
            try:
                if sink.log_payloads is not None:
                    sink.log_payloads(
                        [
                            Payload(
                                payload,
                                step,
                                wall_time,
                                kinds,
                                distributions,
                                watch_name,
                            )
                        ]
                    )
                elif sink.timestamp_keyword:
                    sink.log_metrics(payload, step=step, timestamp=wall_time)
                else:
                    sink.log_metrics(payload, step=step)
            except Exception as err:
                first_error = first_error or err
                lost = payloads_lost(err, 1)
                self._reporter.rejected(lost)
                self._reporter.sink_failed(sink, watch_name, err, queued=False)
                # A sink that took it and raised only to report a failure
                # behind it (SinkProcess) has it: not to be logged again.
                delivered = delivered or not lost
                continue
            finally:
                sink.calls.release()
                if self._losses:
                    self._count_losses(sink)
            if sink.failing:
                self._reporter.sink_recovered(sink)
            delivered = True
        if first_error is not None and not delivered:
            # Produced and refused by every sink: logged, as a queued one
            # is when polled, though the watch keeps its baseline (its next
            # payload covers the interval again, as after a failed poll).
            self._reporter.add(logged=1)
        if first_error is not None and self._reporter.on_error == "raise":
            raise first_error
        return delivered

    def deliver_event(self, event: Event) -> None:
        """Hand ``event`` to every sink with ``log_event``: queued at once if it can be, inline otherwise.

        Queued, it goes with the payloads of the next hand-over: now, unless
        a hand-over is under way (one that drops payloads notices an event),
        then at the next round's end. While :meth:`close` drains the queues
        (``stop()`` in background mode) no sink is called off its sender
        thread: an event noticed then (a sink that recovers) is kept, and
        handed to each sink drained in time once its sender has ended.
        Without queues (manual mode, or after ``stop()``: the events of a
        ``step()``, which the bus hands on) it goes inline.
        """
        queues = self.queues
        if queues and self._draining is None:
            self._events.append(event)
            if self.queues is queues:
                if self._lock.acquire(blocking=False):
                    try:
                        self._hand_over(self.queues)
                    finally:
                        self._lock.release()
                return
            # They closed meanwhile (close() empties self.queues before its
            # last hand-over): unless that hand-over took it, it goes on as
            # an event noticed after.
            try:
                self._events.remove(event)
            except ValueError:
                return
        draining = self._draining
        if draining is not None:
            draining.append(event)
            return
        for sink in self.sinks:
            self._log_event(sink, event)

    def end_round(self) -> None:
        """Queue the round's payloads for every sink and wake every sender once: a round of polls has ended."""
        with self._lock:
            self._hand_over(self.queues)

    def _hand_over(self, queues: tuple[SinkQueue, ...]) -> None:
        # Under the lock: what was polled so far goes to every one of
        # ``queues``, whose sender is woken. A payload added meanwhile waits
        # for the next hand-over.
        if not queues:
            # Closed: a payload or an event added now is delivered inline
            # (deliver(), deliver_event()).
            return
        polled = self._polled
        items: list[Item] = []
        for _ in range(len(polled)):
            try:
                items.append(polled.popleft())
            except IndexError:  # deliver() took one back, the queues closing
                break
        events: list[Event] = []
        while self._events:
            events.append(self._events.popleft())
        for queue in queues:
            if items:
                queue.put_round(items)
            if events:
                queue.put_events(events)
            queue.wake()

    def refuse_on_sender_thread(self, call: str) -> None:
        """Raise ``RuntimeError`` when the caller is a sink's sender thread: ``call`` would wait for it to end."""
        for queue in self.queues:
            if queue.on_sender_thread:
                raise RuntimeError(
                    f"{call} was called inside a call of sink {queue.sink.name}, on "
                    "the thread that feeds it, and would wait for that thread to "
                    "end: call it from another thread (the training loop's, say, "
                    "seeing a flag the sink sets)"
                )

    @property
    def queued(self) -> int:
        """Payloads waiting in the sinks' queues."""
        waiting = sum(len(queue.pending) for queue in self.queues)
        return waiting + len(self._polled) * len(self.queues)

    def close(self, deadline: Deadline, stop_timeout: float) -> BaseException | None:
        """Drain and flush every sink by ``deadline``; return the error to raise under ``on_error="raise"``.

        Queued: every queue is closed at once and drained side by side; a
        sink still stuck in a call at the deadline, or still failing
        transiently, has the payloads still queued for it dropped (counted,
        warned in one line, with those of the call it is stuck in, which
        that call may still deliver) and gets no more calls; each sink that
        lost payloads since ``start()`` is told in one line. Inline: every
        sink is flushed. Sinks are never closed.
        """
        with self._lock:
            queues = self.queues
            if queues:
                # Closed first, then handed over: a payload added after the
                # hand-over finds the queues closed and goes inline.
                self.queues = ()
                self._draining = []
                self._hand_over(queues)
                for queue in queues:
                    queue.begin_close()
        if not queues:
            return self._flush_inline(deadline, stop_timeout)
        drained = []
        for queue in queues:
            discarded = queue.close(deadline.at)
            if discarded is None:
                drained.append(queue.sink)
            self._reporter.sink_stopped(queue, stop_timeout, discarded)
        self._tell_drained(drained)
        error = self._reporter.take_sink_error()
        return error if self._reporter.on_error == "raise" else None

    def _tell_drained(self, sinks: list[Sink]) -> None:
        # The events noticed while the queues drained (a sink that took a
        # call again) go to each sink whose sender has ended: on this
        # thread, then, its one caller; what a sink still stuck in a call
        # would have got is lost with its payloads. From now on an event
        # goes inline, as payloads do (a step() after stop()).
        with self._lock:
            events, self._draining = self._draining or [], None
        for sink in sinks:
            for event in events:
                self._log_event(sink, event)

    def _flush_inline(
        self, deadline: Deadline, stop_timeout: float
    ) -> BaseException | None:
        # Each sink flushed on a thread of its own, side by side, and waited
        # for until the deadline: a sink stuck in a call (a final snapshot's
        # delivery left behind) or in its flush holds stop() up no longer.
        errors: dict[Sink, Exception] = {}

        def flush(sink: Sink) -> None:
            try:
                sink.flush()
            except Exception as err:
                errors[sink] = err

        flushed = [sink for sink in self.sinks if sink.can_flush]
        finished = side_by_side(
            [
                (f"rlpulse-flush-{sink.name}", functools.partial(flush, sink))
                for sink in flushed
            ],
            deadline.at,
        )
        error: BaseException | None = None
        for sink, in_time in zip(flushed, finished, strict=True):
            if not in_time:
                self._reporter.not_flushed(sink, stop_timeout)
                continue
            # Flushed, a sink has said what it lost of all it took.
            self._count_losses(sink)
            failure = errors.get(sink)
            if failure is not None:
                self._reporter.sink_failed(sink, "", failure, queued=False)
                if error is None and self._reporter.on_error == "raise":
                    error = failure
        return error

    def _count_losses(self, sink: Sink) -> None:
        reader = self._losses.get(sink)
        if reader is not None:
            more = reader.more()
            if more.dropped or more.rejected:
                self._reporter.lost_behind(sink, more)

    def _queued_sink_failed(self, sink: Sink, watch_name: str, err: Exception) -> None:
        self._reporter.sink_failed(sink, watch_name, err, queued=True)
        if self._reporter.on_error == "raise":
            self._on_raise()

    def _queued_event_failed(self, sink: Sink, event: Event, err: Exception) -> None:
        self._reporter.event_failed(sink, event, err, queued=True)
        if self._reporter.on_error == "raise":
            self._on_raise()

    def _log_event(self, sink: Sink, event: Event) -> None:
        # An event handed to a sink on this thread (no queue): a failure
        # counted and said in the sink's streak of events.
        if sink.log_event is None or not sink.calls.acquire(blocking=False):
            return  # a call stop() left behind is still in it: not beside it
        try:
            sink.log_event(event)
        except Exception as err:
            self._reporter.event_failed(sink, event, err, queued=False)
        else:
            if sink.events_failing:
                self._reporter.event_logged(sink)
        finally:
            sink.calls.release()
