"""Per-sink bounded queues: in background mode each sink is fed from its own.

At the end of each round the polling thread appends the round's payloads
to every sink's queue and wakes its sender; a sender thread per sink
delivers them in order. A sink that takes payloads without waiting
(``try_log_payloads``: a :class:`~rlpulse.SinkProcess` writing into its
pipe) is handed the round on the polling thread instead, while its queue
holds nothing, and its sender is not woken. A slow or hung sink delays only its own queue. A
call that fails with a :class:`~rlpulse.runtime.retry.TransientSinkError`
leaves its payloads at the head of the queue, to be sent again after a
back-off. A full queue drops its oldest payloads, counted, so memory stays
bounded whatever the sink does. Every payload queued is, in the end,
delivered, dropped (counted), rejected (a call that failed for good,
counted) or, at :meth:`SinkQueue.close`, discarded (counted) or still in
the call the queue gave up on (counted as rejected should that call fail).
A sink that hands payloads on (``losses()``: a
:class:`~rlpulse.SinkProcess`) says what it lost after taking them, which
is counted too.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import operator
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from rlpulse.naming import Kind, Payload
from rlpulse.runtime.events import Event
from rlpulse.runtime.retry import TransientSinkError, payloads_lost, retry_delay
from rlpulse.runtime.sinks import NOTHING_LOST, Losses, LossReader, Sink
from rlpulse.runtime.threads import MonitorThread
from rlpulse.text import plural

__all__ = ["Item", "QueueListener", "SinkQueue"]

_log = logging.getLogger("rlpulse")


class Item(NamedTuple):
    """One payload as the runtime hands it on: to the sinks inline, or through their queues."""

    metrics: dict[str, float]
    step: int | None
    wall_time: float
    watch: str
    """The name of the watch that logged it (``""``: a payload a child process received)."""
    kinds: Mapping[str, Kind]
    distributions: Mapping[str, Any]


def _ignore(*_: object) -> None:
    """What a :class:`QueueListener` does with what it was not asked to hear."""


@dataclass(frozen=True)
class QueueListener:
    """What a :class:`SinkQueue` tells its owner, each on the thread it happens on; anything not given is ignored."""

    on_failure: Callable[[Sink, str, Exception], None] = _ignore
    """A call failed: the sink, the watch of its first payload, the error."""
    on_success: Callable[[Sink], None] = _ignore
    """A call went through while the sink was failing."""
    on_drop: Callable[[SinkQueue, int], None] = _ignore
    """The full queue dropped this many of its oldest payloads."""
    on_reject: Callable[[int], None] = _ignore
    """This many payloads were lost to a call that failed for good (a call ``close()`` gave up on included, should it fail later)."""
    on_lost_behind: Callable[[Losses], None] = _ignore
    """The sink says it lost more after taking them (its ``losses()``)."""
    on_delivered: Callable[[int], None] = _ignore
    """This many payloads were delivered."""
    on_event_failure: Callable[[Sink, Event, Exception], None] = _ignore
    """The sink's ``log_event`` failed: a streak of its own, apart from its payloads'."""
    on_event_logged: Callable[[Sink], None] = _ignore
    """An event went through while the sink's events were failing."""


_triple_of = operator.itemgetter(0, 1, 2)
"""An item's ``(metrics, step, wall_time)``, as ``log_batch`` takes it (fields by position: built in C)."""


_payload_fields = operator.itemgetter(0, 1, 2, 4, 5, 3)
_new_payload = functools.partial(tuple.__new__, Payload)


def _typed(items: Sequence[Item]) -> list[Payload]:
    """Items as ``log_payloads`` takes them: :class:`~rlpulse.naming.Payload` values, built in C (half the time of ``Payload(...)``).

    >>> _typed([Item({"w/x": 1.0}, 3, 1.5, "w", {}, {})])
    [Payload(metrics={'w/x': 1.0}, step=3, wall_time=1.5, kinds={}, distributions={}, watch='w')]
    """
    return list(map(_new_payload, map(_payload_fields, items)))


def _triples(items: Sequence[Item]) -> list[tuple[Any, ...]]:
    # Items as log_batch takes them: (metrics, step, timestamp).
    return list(map(_triple_of, items))


class SinkQueue:
    """One sink's bounded queue and the thread that drains it.

    Its ``listener`` (:class:`QueueListener`) is told of failures and
    recoveries (on the sender thread), drops (on the producer's), payloads
    rejected or delivered, events failing, and what a sink with
    ``losses()`` says it lost after taking payloads, read through
    ``losses``, the sink's :class:`~rlpulse.runtime.sinks.LossReader`,
    which others may read too: each loss is told to one of them; one of
    its own by default.

    A call that raises :class:`~rlpulse.runtime.retry.TransientSinkError`
    puts its payloads (or its event) back at the head of the queue; the
    sender waits :func:`~rlpulse.runtime.retry.retry_delay` and calls the
    sink again with them and whatever queued up behind them, until a call
    succeeds, fails for good, or the queue is closed. Meanwhile the
    producer keeps queueing, dropping the oldest once the queue is full.
    Any other error is final for the payloads of that call.

    Examples:
        >>> class Printer:
        ...     def log_metrics(self, metrics, step=None):
        ...         print(step, metrics)
        >>> queue = SinkQueue(Sink(Printer()), size=8)
        >>> queue.start()
        >>> queue.put_all([Item({"rb/size": 1.0}, 3, 0.0, "rb", {}, {})])
        >>> queue.wake()
        >>> queue.close(deadline=time.monotonic() + 5) is None
        3 {'rb/size': 1.0}
        True
    """

    def __init__(
        self,
        sink: Sink,
        *,
        size: int,
        listener: QueueListener | None = None,
        losses: LossReader | None = None,
    ) -> None:
        self.sink = sink
        self.size = size
        self.pending: deque[Item] = deque()
        # Events go to the sink after the payloads handed over with them;
        # the oldest are dropped past this many.
        self.events: deque[Event] = deque(maxlen=size)
        # What the sender delivered, kept for the producer to free (wake()):
        # freed on the sender's thread, a payload's memory would move to
        # the other core and back at every reuse.
        self.delivered: deque[Item] = deque()
        self.dropped = 0
        # The payloads lost to calls that failed for good.
        self.rejected = 0
        # What the sink lost after taking it, as its losses() says, that
        # this queue read (no reader: it says nothing).
        self.lost_behind = NOTHING_LOST
        if losses is None and sink.losses is not None:
            losses = LossReader.of(sink.target, sink.losses)
        self._losses = losses
        # In a drop streak (one warning a streak); whether the sender has
        # delivered all it was given since the last drop (the streak's end).
        self.dropping = False
        self.caught_up = True
        # When its last drop warning was given (time.monotonic()).
        self.warned_at: float | None = None
        self._told = listener or QueueListener()
        self._wakeup = threading.Event()
        # A round handed over on the polling thread whose rest the sender is
        # to write (put_round).
        self._finishing = False
        # Held by the sender while it holds payloads the sink has not taken
        # yet: put_round() gives the sink none meanwhile, which would pass
        # them. The sink's own: a sender an earlier queue of it left behind,
        # stuck in a call, keeps this one's from calling it meanwhile.
        self._sending = sink.calls
        self._closing = False
        # Set when close() gave up on a stuck sink: the sender must not call it again.
        self._abandoned = False
        self._thread: threading.Thread | None = None
        # What ended the sender, where a sink raised what it does not catch
        # (SystemExit, say): close() then counts what it had not delivered.
        self.sender_died_of: BaseException | None = None
        # The last error of a streak of transient failures (None once a
        # call succeeds or fails for good), how many tries in a row failed
        # so, and whether the sender is to wait before the next.
        self.retry_error: TransientSinkError | None = None
        # Whether retry_error is an event's (log_event), not the payloads'.
        self._retrying_event = False
        self._tries = 0
        self._backing_off = False
        # Wakes a wait between tries: closing begins (then the sender tries
        # again at once), gives up, or a flush is asked for.
        self._interrupt = threading.Event()
        self._retry_at_once = False
        # Called once the sink has taken what was pending when each was asked for.
        self._flush_answers: deque[Callable[[], None]] = deque()
        # Set when the sender found the queue empty, waits to try again, or
        # ended, and when closing begins: it wakes a producer waiting for room.
        self._settled = threading.Event()
        # How many payloads the call under way holds, and how many the call
        # close() gave up on held: their fate is that call's.
        self._in_call = 0
        self.in_flight = 0
        # Held while payloads change hands between the queue and a call
        # (taken, put back, known lost) and while close() gives up on the
        # sink: each payload is then counted once, queued or in the call.
        self._accounts = threading.Lock()

    def start(self) -> None:
        """Start the sender thread."""
        self._thread = MonitorThread(f"rlpulse-sink-{self.sink.name}", self._run_sender)
        self._thread.start()

    def put_all(self, items: Sequence[Item]) -> None:
        """Queue ``items`` (a round's payloads), dropping the oldest pending ones beyond the queue's size.

        A round larger than the queue drops none of its own: the queue holds
        at least the payloads of the last hand-over.
        """
        pending = self.pending
        pending.extend(items)
        dropped = 0
        limit = max(self.size, len(items))
        while len(pending) > limit:
            try:
                pending.popleft()
            except IndexError:  # the sender took them meanwhile
                break
            dropped += 1
        if dropped:
            self.dropped += dropped
            self.caught_up = False
            self._told.on_drop(self, dropped)
            self.dropping = True

    def put_round(self, items: Sequence[Item]) -> None:
        """Hand a round's ``items`` to the sink now if it takes them without waiting, else queue them (:meth:`put_all`).

        Now: on the caller's thread, through the sink's ``try_log_payloads``,
        when nothing is pending, the sender holds none, and the sink says
        it took them; they are then delivered and the sender has nothing to
        do. Otherwise (another call under way, a full pipe, payloads or
        events waiting, a sink being retried) they queue behind the rest,
        in order. A :class:`~rlpulse.runtime.retry.TransientSinkError` is
        a refusal: the sender's call then meets it and retries.
        """
        try_log_payloads = self.sink.try_log_payloads
        if (
            try_log_payloads is None
            or self._closing
            or not self._sending.acquire(blocking=False)
        ):
            self.put_all(items)
            return
        try:
            if self.pending or self.events or self._abandoned:
                self.put_all(items)
                return
            try:
                taken = try_log_payloads(_typed(items))
            except TransientSinkError:
                taken = False
            except Exception as err:
                self._rejected(payloads_lost(err, len(items)))
                self._failed(items[0].watch, err)
                self._count_losses()
                return
            if self._losses is not None:
                self._count_losses()
            if not taken:
                self.put_all(items)
                return
            self._told.on_delivered(len(items))
            self._succeeded()
            if self.sink.finish_sending is not None and self.sink.target.unfinished:
                # The pipe took part of the round: the sender writes the rest
                # as soon as there is room, not at the next round's write.
                self._finishing = True
                self._wakeup.set()
        finally:
            self._sending.release()

    def put_events(self, events: Sequence[Event]) -> None:
        """Queue ``events`` for the sink's ``log_event`` (nothing is sent to a sink without one)."""
        if self.sink.log_event is not None:
            self.events.extend(events)

    def wake(self) -> None:
        """Tell the sender there is work (once per round, not per payload); free what it delivered.

        A drop streak ends once the sender has caught up: it found its
        queue empty after a call. Room in the queue is no recovery: the
        sender takes all the queue holds at once, so under sustained
        overload a round often finds it empty.
        """
        self.delivered.clear()
        if self.caught_up:
            self.dropping = False
        if self.pending or self.events:
            self._wakeup.set()

    @property
    def on_sender_thread(self) -> bool:
        """Whether the caller is this queue's sender thread (inside the sink's call)."""
        return self._thread is threading.current_thread()

    @property
    def busy(self) -> bool:
        """Whether the sender is still running."""
        return self._thread is not None and self._thread.is_alive()

    def begin_close(self) -> None:
        """Have the sender drain what is pending, flush the sink and exit, without waiting for it.

        A sender waiting to try a failed call again tries it at once, then
        waits its back-off again if it fails again.
        """
        if not self._closing:
            self._closing = True
            self._retry_at_once = True
            self._interrupt.set()
            self._settled.set()
        self._wakeup.set()

    def wait_for_room(self, count: int) -> None:
        """Wait until the queue has room for ``count`` more payloads without dropping, its sink is failing, or the queue is closing.

        For a producer that would rather wait for a slow sink than drop
        (the sink process's reader: the pipe in front of it then fills, and
        its writer waits in turn); a sink that fails for a while (a
        :class:`~rlpulse.runtime.retry.TransientSinkError`) is not waited
        for, its queue dropping its oldest payloads once full, nor is a
        queue closing (:meth:`begin_close`, which ends a wait under way).
        """
        pending = self.pending
        while len(pending) + count > self.size and pending:
            self._settled.clear()
            if self.retry_error is not None or not self.busy or self._closing:
                return
            if not pending:
                return
            self._settled.wait()

    def flush_then(self, answer: Callable[[], None]) -> None:
        """Have the sender flush the sink once it has delivered what is pending now, then call ``answer()``.

        A sender waiting to try a failed call again calls ``answer()`` at
        once, without flushing: what is pending waits for the sink, whose
        failure was reported already.
        """
        self._flush_answers.append(answer)
        self._wakeup.set()
        self._interrupt.set()

    def close(self, deadline: float) -> int | None:
        """Drain what is pending, flush the sink, stop the sender; by ``deadline``.

        Returns ``None`` when the sender finished in time. Otherwise the
        sink is stuck in a call, or its calls keep failing transiently
        (:attr:`retry_error`), or the sender ended on what a sink raised
        that no sender catches (:attr:`sender_died_of`): the payloads still
        queued are discarded (their number is returned), and the sender,
        whenever the sink's call returns, exits without calling the sink
        again. The payloads of the call under way (:attr:`in_flight`) are
        not counted here: they are delivered if that call succeeds, and
        rejected (``on_reject``) if it fails. The sink is never closed.
        """
        self.begin_close()
        thread = self._thread
        if thread is None:
            return None
        thread.join(max(0.0, deadline - time.monotonic()))
        self.delivered.clear()
        self._count_losses()
        if not thread.is_alive() and self.sender_died_of is None:
            return None
        with self._accounts:
            self._abandoned = True
            self.in_flight = self._in_call
            discarded = 0
            while self.pending:
                try:
                    self.pending.popleft()
                except IndexError:  # a full queue's producer took it, counted
                    break
                discarded += 1
        self._interrupt.set()
        # One at a time: the sender may still take one it then delivers.
        self.events.clear()
        return discarded

    def why_undrained(self) -> str | None:
        """What kept the sink from taking what :meth:`close` discarded, where known: the end of the thread feeding it, or a streak of transient failures; ``None`` for a sink stuck in a call."""
        if self.sender_died_of is not None:
            return f"the thread feeding it ended on {self.sender_died_of!r} raised by the sink"
        if self.retry_error is not None:
            return f"it was still failing ({self.retry_error!r})"
        return None

    def _run_sender(self) -> None:
        try:
            self._send_loop()
        except BaseException as error:
            self.sender_died_of = error
            # The call that ended the sender failed for good.
            with self._accounts:
                lost, self._in_call = self._in_call, 0
            self._rejected(lost)
            raise  # told by threading's excepthook, with its traceback
        finally:
            self._settled.set()

    def _send_loop(self) -> None:
        while True:
            self._wakeup.wait()
            self._wakeup.clear()
            with self._sending:
                if self._send_pending():
                    return

    def _finish_round(self) -> None:
        # The rest of a round the sink took only part of on the polling
        # thread (put_round); a failure shows at the sink's next call.
        self._finishing = False
        if self.sink.finish_sending is not None:
            with contextlib.suppress(Exception):
                self.sink.finish_sending()

    def _send_pending(self) -> bool:
        # Deliver what is pending, then flush when asked; whether the sender is to exit.
        pending = self.pending
        sink = self.sink
        while True:
            while True:
                if self._finishing:
                    self._finish_round()
                # Read before the queue is found empty: what was handed over
                # before closing began is then sent before the flush.
                closing = self._closing
                if not pending and not self.events:
                    break
                if pending and sink.log_payloads is not None:
                    self._send_payloads(sink.log_payloads)
                elif pending and sink.log_batch is not None:
                    self._send_batch(sink.log_batch)
                elif pending:
                    self._send_each()
                if self._losses is not None:
                    self._count_losses()
                if self.events and not self._abandoned and not self._backing_off:
                    self._send_events()
                if self._backing_off and not self._abandoned:
                    self._wait_to_retry()
                if self._abandoned:
                    return True
            self.caught_up = True
            self._settled.set()
            if self._abandoned:
                return True
            if self._flush_answers and (pending or self.events):
                # Handed over before the flush was asked for, after the
                # queue was found empty: sent first.
                continue
            if closing or self._flush_answers:
                try:
                    sink.flush()
                except Exception as err:
                    self._told.on_failure(sink, "", err)
                # Flushed, the sink has said what it lost of all it took.
                self._count_losses()
                self._answer_flushes()
            return closing

    def _send_each(self) -> None:
        # This loop runs once per payload, competing with the polling thread
        # for the GIL: it calls the sink directly, reads only what the call
        # needs, and reports a success only when it ends a failure streak.
        pending = self.pending
        popleft = pending.popleft
        release = self.delivered.append
        accounts = self._accounts
        sink = self.sink
        log_metrics = sink.log_metrics
        wants_timestamp = sink.timestamp_keyword
        # What is pending now, and no more: the events handed over with it
        # go next, not once a sink slower than the polls has caught up.
        for _ in range(len(pending)):
            with accounts:
                if not pending or self._abandoned:
                    return
                item = popleft()
                self._in_call = 1
            try:
                if wants_timestamp:
                    log_metrics(item.metrics, step=item.step, timestamp=item.wall_time)
                else:
                    log_metrics(item.metrics, step=item.step)
            except TransientSinkError as err:
                if self._put_back([item]):
                    self._retry_later(item.watch, err)
                else:
                    self._failed_after_stop(1, err)
                return
            except Exception as err:
                release(item)
                if self._lost([item], err):
                    return
                continue
            # Unlocked: close() counts no call as lost, so a call it gave up
            # on that succeeds is simply delivered.
            self._in_call = 0
            release(item)
            self._told.on_delivered(1)
            self._succeeded()

    def _send_batch(self, log_batch: Callable[..., Any]) -> None:
        # (metrics, step, timestamp) triples, to a sink with log_batch.
        self._send_all(log_batch, _triples)

    def _send_payloads(self, log_payloads: Callable[..., Any]) -> None:
        # Payloads with their kinds and distributions, to rlpulse's sinks.
        self._send_all(log_payloads, _typed)

    def _send_all(
        self,
        send: Callable[[list[Any]], Any],
        convert: Callable[[Sequence[Item]], list[Any]],
    ) -> None:
        # Everything pending in one call: under light load one payload (no
        # added latency), under heavy load as many as have queued up.
        pending = self.pending
        popleft = pending.popleft
        batch: list[Item] = []
        with self._accounts:
            if self._abandoned:
                return
            while pending:
                batch.append(popleft())
            self._in_call = len(batch)
        try:
            send(convert(batch))
        except TransientSinkError as err:
            if self._put_back(batch):
                self._retry_later(batch[0].watch, err)
            else:
                self._failed_after_stop(len(batch), err)
            return
        except Exception as err:
            self.delivered.extend(batch)
            self._lost(batch, err)
            return
        # Unlocked: close() counts no call as lost, so a call it gave up on
        # that succeeds is simply delivered.
        self._in_call = 0
        self.delivered.extend(batch)
        self._told.on_delivered(len(batch))
        self._succeeded()

    def _put_back(self, batch: list[Item]) -> bool:
        # The payloads of a call that failed for a while, back at the head
        # of the queue, in order; False, leaving them out, where close()
        # gave up on the sink during the call: it counted them in flight.
        with self._accounts:
            self._in_call = 0
            if self._abandoned:
                return False
            # In one step: extendleft() of a list's reversed iterator runs
            # without letting go of the GIL, so the producer finds the queue
            # with all of them or none of them.
            self.pending.extendleft(reversed(batch))
            return True

    def _lost(self, batch: list[Item], err: Exception) -> bool:
        # The payloads of a call that failed for good: rejected, and the
        # failure reported; whether close() had given up on the sink meanwhile.
        with self._accounts:
            self._in_call = 0
            late = self._abandoned
        if late:
            self._failed_after_stop(len(batch), err)
        else:
            self._rejected(payloads_lost(err, len(batch)))
            self._failed(batch[0].watch, err)
        return late

    def _send_events(self) -> None:
        # Events fail and succeed in a streak of their own: an event written
        # ends no failure streak of the payloads (on a nearly full disk a
        # small event may fit where the payloads do not), nor does one that
        # fails start one (a sink that refuses every event would say it
        # fails and recovers at every payload written).
        events = self.events
        sink = self.sink
        log_event = sink.log_event
        while events and log_event is not None:
            event = events.popleft()
            try:
                log_event(event)
            except TransientSinkError as err:
                if not self._abandoned:
                    events.appendleft(event)
                    self._back_off(err, event=True)
                    self._event_failed(event, err)
                return
            except Exception as err:
                if self._abandoned:
                    return
                self._event_failed(event, err)
            else:
                if self._retrying_event:
                    # The failure backed off from was this event's: over.
                    self._tries = 0
                    self.retry_error = None
                    self._retrying_event = False
                if sink.events_failing:
                    self._told.on_event_logged(sink)

    def _event_failed(self, event: Event, err: Exception) -> None:
        self._told.on_event_failure(self.sink, event, err)

    def _failed_after_stop(self, count: int, err: Exception) -> None:
        # The call close() gave up on failed in the end: its payloads
        # rejected, and why it held the stop up (a receiver that was never
        # there, say), said once.
        lost = payloads_lost(err, count)
        self._rejected(lost)
        _log.warning(
            "the call to sink %s that stop() left behind failed: %s%s",
            self.sink.name,
            err,
            f"; its {plural(lost, 'payload')} {'was' if lost == 1 else 'were'} "
            "not delivered (counted in rejected)"
            if lost
            else "",
        )

    def _count_losses(self) -> None:
        # What the sink lost after taking it since its losses() was last
        # read, counted once whichever thread reads it.
        if self._losses is None:
            return
        more = self._losses.more()
        if more.dropped or more.rejected:
            with self._accounts:  # the sender and close() may both read
                self.lost_behind = Losses(
                    self.lost_behind.dropped + more.dropped,
                    self.lost_behind.rejected + more.rejected,
                )
            self._told.on_lost_behind(more)

    def _rejected(self, count: int) -> None:
        if count:
            self.rejected += count
            self._told.on_reject(count)

    def _retry_later(self, watch_name: str, err: TransientSinkError) -> None:
        # A call failed for a while: counted and reported as any failure,
        # its payloads back at the head of the queue for the next try.
        self._back_off(err)
        self._failed(watch_name, err)

    def _back_off(self, err: TransientSinkError, *, event: bool = False) -> None:
        # The next try waits (_wait_to_retry), the longer the more tries
        # failed; whether the try failed was an event's.
        self.retry_error = err
        self._tries += 1
        self._backing_off = True
        self._retrying_event = event

    def _wait_to_retry(self) -> None:
        # The back-off before the next try; closing cuts it short once, and
        # giving up on the sink (close() at its deadline) for good. A flush
        # asked for meanwhile is answered without waiting for the sink.
        error = self.retry_error
        asked = None if error is None else error.retry_after
        until = time.monotonic() + retry_delay(self._tries, asked)
        self._settled.set()
        while not self._abandoned:
            self._answer_flushes()
            if self._retry_at_once:
                self._retry_at_once = False
                break
            left = until - time.monotonic()
            if left <= 0:
                break
            if self._interrupt.wait(left):
                self._interrupt.clear()
        self._backing_off = False

    def _answer_flushes(self) -> None:
        answers = self._flush_answers
        while answers:
            answers.popleft()()

    def _failed(self, watch_name: str, err: Exception) -> None:
        if not isinstance(err, TransientSinkError):
            self._tries = 0
            self.retry_error = None
        self._told.on_failure(self.sink, watch_name, err)

    def _succeeded(self) -> None:
        self._tries = 0
        self.retry_error = None
        if self.sink.failing:
            self._told.on_success(self.sink)
