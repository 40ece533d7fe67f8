"""SinkQueue: order, bounds, who frees a delivered payload, and what a queue leaves undelivered at stop."""

from __future__ import annotations

import errno
import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from rlpulse import Every, LoggerMonitor, SQLiteLogger, read
from rlpulse.runtime.events import Event
from rlpulse.runtime.queues import Item, QueueListener, SinkQueue
from rlpulse.runtime.retry import TransientSinkError
from rlpulse.runtime.sinks import Sink
from rlpulse.testing import InMemorySink
from tests.support import (
    BatchRecorder,
    Source,
    StepRecorder,
    not_delivered,
    queue_item,
    rlpulse_warnings,
    wait_for,
    wait_until,
)

pytestmark = pytest.mark.timeout(30)


def test_delivered_payloads_are_freed_by_the_producer_at_its_next_wake() -> None:
    recorder = StepRecorder()
    queue = SinkQueue(Sink(recorder), size=16)
    queue.start()
    try:
        for step in range(3):
            queue.put_all([Item({"w/x": float(step)}, step, 0.0, "w", {}, {})])
        queue.wake()
        wait_for(lambda: len(recorder.steps) == 3)
        # The sender keeps what it delivered for the producer, in order...
        assert [item[1] for item in queue.delivered] == [0, 1, 2]
        queue.wake()
        # ...which drops it at its next wake-up, on its own thread.
        assert not queue.delivered
    finally:
        assert queue.close(deadline=time.monotonic() + 5) is None
    assert recorder.steps == [0, 1, 2]
    assert not queue.delivered


def test_a_full_queue_drops_the_oldest_and_counts_it() -> None:
    recorder = StepRecorder()
    queue = SinkQueue(Sink(recorder), size=2)
    for step in range(5):
        queue.put_all([Item({"w/x": 1.0}, step, 0.0, "w", {}, {})])
    assert queue.dropped == 3
    queue.start()
    queue.wake()
    assert queue.close(deadline=time.monotonic() + 5) is None
    assert recorder.steps == [3, 4]


def test_a_round_beyond_the_queue_keeps_its_own_and_drops_the_older_at_once() -> None:
    recorder = StepRecorder()
    drops: list[int] = []
    queue = SinkQueue(
        Sink(recorder),
        size=3,
        listener=QueueListener(on_drop=lambda _queue, count: drops.append(count)),
    )
    queue.put_all([Item({"w/x": 1.0}, step, 0.0, "w", {}, {}) for step in range(2)])
    queue.put_all([Item({"w/x": 1.0}, step, 0.0, "w", {}, {}) for step in range(2, 7)])
    assert (queue.dropped, drops, queue.dropping) == (2, [2], True)
    queue.start()
    queue.wake()
    assert queue.close(deadline=time.monotonic() + 5) is None
    assert recorder.steps == [2, 3, 4, 5, 6]


def test_a_sink_with_log_batch_gets_everything_pending_in_one_call() -> None:
    recorder = BatchRecorder()
    queue = SinkQueue(Sink(recorder), size=16)
    for step in range(4):
        queue.put_all([Item({"w/x": float(step)}, step, 100.0 + step, "w", {}, {})])
    queue.start()
    queue.wake()
    assert queue.close(deadline=time.monotonic() + 5) is None
    # Each payload with the wall-clock time of its poll, whatever the
    # sink's log_metrics takes.
    assert recorder.batches == [[({"w/x": float(s)}, s, 100.0 + s) for s in range(4)]]


def test_a_failing_batch_is_one_failure_and_the_next_batch_is_sent() -> None:
    failures: list[str] = []

    class FailsOnce(BatchRecorder):
        def log_batch(
            self, payloads: list[tuple[Mapping[str, float], int | None, float | None]]
        ) -> None:
            super().log_batch(payloads)
            if len(self.batches) == 1:
                raise OSError("disk full")

    recorder = FailsOnce()
    queue = SinkQueue(
        Sink(recorder),
        size=16,
        listener=QueueListener(
            on_failure=lambda sink, watch, error: failures.append(f"{watch}: {error}")
        ),
    )
    queue.start()
    try:
        queue.put_all([Item({"w/x": 1.0}, 1, 0.0, "w", {}, {})])
        queue.wake()
        wait_for(lambda: len(recorder.batches) == 1)
        queue.put_all([Item({"w/x": 2.0}, 2, 0.0, "w", {}, {})])
        queue.wake()
        wait_for(lambda: len(recorder.batches) == 2)
    finally:
        assert queue.close(deadline=time.monotonic() + 5) is None
    assert failures == ["w: disk full"]
    assert [[step for _, step, _ in batch] for batch in recorder.batches] == [[1], [2]]


class _Gated(BatchRecorder):
    """A batch recorder whose every call waits for a token of ``gate``."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Semaphore(0)

    def log_batch(
        self, payloads: list[tuple[Mapping[str, float], int | None, float | None]]
    ) -> None:
        self.gate.acquire()
        super().log_batch(payloads)


def test_one_drop_warning_per_streak_that_ends_once_the_sender_caught_up() -> None:
    warned: list[int] = []
    sink = _Gated()
    queue = SinkQueue(
        Sink(sink),
        size=2,
        listener=QueueListener(
            on_drop=lambda q, count: None if q.dropping else warned.append(q.dropped)
        ),
    )

    def round_of(payloads: int) -> None:
        for step in range(payloads):
            queue.put_all([Item({"w/x": 1.0}, step, 0.0, "w", {}, {})])
        queue.wake()

    queue.start()
    try:
        round_of(1)
        wait_for(lambda: not queue.pending)  # the sender is in its call
        round_of(3)  # the first drop starts a streak: one warning
        assert warned == [1]
        sink.gate.release()
        wait_for(lambda: not queue.pending)  # it took the next batch at once
        round_of(3)  # room in the queue was no recovery: no new warning
        assert warned == [1]
        sink.gate.release(2)
        wait_for(lambda: queue.caught_up)  # it delivered all it was given
        round_of(1)  # the streak ends
        wait_for(lambda: not queue.pending)
        round_of(3)
        assert warned == [1, 3]  # the second streak's first drop is the third
    finally:
        sink.gate.release(10)
        assert queue.close(deadline=time.monotonic() + 5) is None
    assert queue.dropped == 3


def test_payloads_delivered_while_the_queues_close_reach_the_sink_once_each() -> None:
    # Another thread delivers and ends rounds while the queues open and close
    # again and again; with the interpreter switching threads as often as it
    # can, every payload taken reaches the sink exactly once: queued before
    # the queues closed, else inline.
    from rlpulse.runtime.deadline import Deadline
    from rlpulse.runtime.delivery import Delivery
    from rlpulse.runtime.reporting import Reporter

    received: list[int] = []
    lock = threading.Lock()

    class Recorder:
        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            with lock:
                received.append(int(metrics["w/x"]))

    delivery = Delivery((Sink(Recorder()),), Reporter("warn"))
    taken: list[int] = []
    stop = threading.Event()

    def produce() -> None:
        number = 0
        while not stop.is_set():
            if delivery.deliver(Item({"w/x": float(number)}, number, 0.0, "w", {}, {})):
                taken.append(number)
            number += 1
            if number % 7 == 0:
                delivery.end_round()

    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    producer = threading.Thread(target=produce)
    try:
        producer.start()
        for _ in range(100):
            delivery.open_queues(1_000_000)
            time.sleep(0.001)
            assert delivery.close(Deadline(5.0), 5.0) is None
    finally:
        stop.set()
        producer.join()
        sys.setswitchinterval(switch_interval)
    delivery.end_round()
    assert len(taken) > 100
    assert sorted(received) == taken  # none lost, none twice


def test_an_event_noticed_as_the_queues_close_reaches_the_sink() -> None:
    # The queues close (stop()) between deliver_event() seeing them open and
    # its queueing the event: the event still reaches the sink, once.
    from rlpulse.runtime.deadline import Deadline
    from rlpulse.runtime.delivery import Delivery
    from rlpulse.runtime.events import Event
    from rlpulse.runtime.reporting import Reporter

    received: list[Event] = []

    class Recorder:
        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            pass

        def log_event(self, event: Event) -> None:
            received.append(event)

    delivery = Delivery((Sink(Recorder()),), Reporter("warn"))

    class ClosingFirst(deque[Event]):
        """The events' queue, whose first append waits for the queues to close first."""

        closed = False

        def append(self, event: Event) -> None:
            if not self.closed:
                self.closed = True
                assert delivery.close(Deadline(5.0), 5.0) is None
            super().append(event)

    delivery.open_queues(100)
    delivery._events = ClosingFirst()
    event = Event(0.0, "w", "stalled", "no progress", 1.0)
    delivery.deliver_event(event)

    assert received == [event]


class _EmptyThenSlow(deque[Item]):
    """A queue whose sender, once ``armed``, finds it empty and is then held up: another thread's turn comes in between."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = threading.Event()
        self.held = threading.Event()

    def __len__(self) -> int:
        length = super().__len__()
        if (
            length == 0
            and self.armed.is_set()
            and sys._getframe(1).f_code.co_name == "_send_pending"
        ):
            self.armed.clear()
            self.held.set()
            time.sleep(0.3)
        return length


def test_a_payload_handed_over_as_closing_begins_is_sent_before_the_flush() -> None:
    sink = StepRecorder()
    queue = SinkQueue(Sink(sink), size=8)
    pending = queue.pending = _EmptyThenSlow()
    queue.start()
    pending.armed.set()
    queue.put_all([Item({"w/x": 1.0}, 1, 0.0, "w", {}, {})])
    queue.wake()
    assert pending.held.wait(5)  # the sender found the queue empty, and waits

    queue.put_all(
        [Item({"w/x": 2.0}, 2, 0.0, "w", {}, {})]
    )  # the final round, then close(): as Delivery does
    queue.wake()
    assert queue.close(deadline=time.monotonic() + 5) is None

    assert sink.steps == [1, 2]
    assert queue.dropped == 0


class _Flaky(BatchRecorder):
    """A batch recorder whose far end is away while ``away`` is set: its calls raise TransientSinkError and store nothing."""

    def __init__(self, retry_after: float | None = 0.02) -> None:
        super().__init__()
        self.away = threading.Event()
        self.retry_after = retry_after
        self.failed_calls = 0

    def log_batch(
        self, payloads: list[tuple[Mapping[str, float], int | None, float | None]]
    ) -> None:
        if self.away.is_set():
            self.failed_calls += 1
            raise TransientSinkError("far end away", retry_after=self.retry_after)
        super().log_batch(payloads)

    def steps(self) -> list[int | None]:
        return [step for batch in self.batches for _, step, _ in batch]


def test_a_transient_failure_keeps_its_payloads_and_sends_them_again_in_order() -> None:
    failures: list[Exception] = []
    sink = _Flaky()
    queue = SinkQueue(
        Sink(sink),
        size=100,
        listener=QueueListener(on_failure=lambda s, w, error: failures.append(error)),
    )
    queue.start()
    try:
        queue.put_all([queue_item(0)])
        queue.wake()
        wait_for(lambda: sink.steps() == [0])
        sink.away.set()
        for step in range(1, 20):  # rounds go on while the far end is away
            queue.put_all([queue_item(step)])
            queue.wake()
            time.sleep(0.005)
        wait_for(lambda: sink.failed_calls >= 3)
        assert queue.retry_error is not None
        sink.away.clear()
        wait_for(lambda: sink.steps()[-1:] == [19])
    finally:
        assert queue.close(deadline=time.monotonic() + 5) is None
    # Every payload once, in order; every failed try reported.
    assert sink.steps() == list(range(20))
    assert len(failures) == sink.failed_calls
    assert all(isinstance(error, TransientSinkError) for error in failures)
    assert queue.dropped == 0
    assert queue.retry_error is None


def test_while_retrying_a_full_queue_drops_its_oldest_payloads() -> None:
    sink = _Flaky()
    sink.away.set()
    queue = SinkQueue(Sink(sink), size=5)
    queue.start()
    try:
        for step in range(12):
            queue.put_all([queue_item(step)])
            queue.wake()
            wait_for(lambda: sink.failed_calls >= 1)
        assert queue.dropped >= 12 - 5 - 1  # one batch may be out in a try
        sink.away.clear()
        wait_for(lambda: sink.steps()[-1:] == [11])
    finally:
        assert queue.close(deadline=time.monotonic() + 5) is None
    # The newest kept, in order, each once: the oldest went first.
    assert sink.steps() == list(range(12 - len(sink.steps()), 12))
    assert len(sink.steps()) + queue.dropped == 12


def test_closing_a_queue_whose_sink_keeps_failing_is_bounded_and_counts_what_is_left() -> (
    None
):
    sink = _Flaky(retry_after=30.0)
    sink.away.set()
    queue = SinkQueue(Sink(sink), size=100)
    queue.start()
    queue.put_all([queue_item(step) for step in range(7)])
    queue.wake()
    wait_for(lambda: sink.failed_calls == 1)
    started = time.monotonic()
    queue.begin_close()
    # Closing tries once more at once, then waits out its back-off...
    wait_for(lambda: sink.failed_calls == 2, seconds=1)
    discarded = queue.close(deadline=time.monotonic() + 0.3)
    # ...until the deadline: the seven are counted, and the sender ends.
    assert discarded == 7
    assert time.monotonic() - started < 1.5
    assert isinstance(queue.retry_error, TransientSinkError)
    wait_for(lambda: not queue.busy, seconds=2)
    assert sink.failed_calls == 2


def test_an_event_that_fails_transiently_is_kept_and_written_after_the_payloads() -> (
    None
):
    from rlpulse.runtime.events import Event

    written: list[str] = []
    away = threading.Event()
    away.set()

    class Store(BatchRecorder):
        def log_batch(self, payloads: list[Any]) -> None:
            if away.is_set():
                raise TransientSinkError("disk full", retry_after=0.01)
            written.extend(f"step {step}" for _, step, _ in payloads)

        def log_event(self, event: Event) -> None:
            if away.is_set():
                raise TransientSinkError("disk full", retry_after=0.01)
            written.append(event.kind)

    queue = SinkQueue(Sink(Store()), size=10)
    queue.start()
    try:
        queue.put_all([queue_item(1)])
        queue.put_events([Event(0.0, "", "sink_failing", "disk full", 0.0)])
        queue.wake()
        time.sleep(0.1)
        away.clear()
        wait_for(lambda: len(written) == 2)
    finally:
        assert queue.close(deadline=time.monotonic() + 5) is None
    assert written == ["step 1", "sink_failing"]


class _TakesRoundsAtOnce:
    """A sink that takes payloads without waiting while ``accepting``; records each payload's step, thread and path."""

    def __init__(self) -> None:
        self.accepting = True
        self.arrived: list[tuple[int | None, str, str]] = []

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        self.arrived.append((step, threading.current_thread().name, "log_metrics"))

    def log_payloads(self, payloads: list[Any]) -> None:
        for payload in payloads:
            self.arrived.append(
                (payload.step, threading.current_thread().name, "log_payloads")
            )

    def try_log_payloads(self, payloads: list[Any]) -> bool:
        if not self.accepting:
            return False
        for payload in payloads:
            self.arrived.append(
                (payload.step, threading.current_thread().name, "try_log_payloads")
            )
        return True


def _round(*steps: int) -> list[Item]:
    return [Item({"w/x": float(step)}, step, 0.0, "w", {}, {}) for step in steps]


def test_a_sink_that_takes_a_round_without_waiting_is_handed_it_on_the_producers_thread() -> (
    None
):
    sink = _TakesRoundsAtOnce()
    queue = SinkQueue(Sink(sink), size=16)
    queue.start()
    try:
        queue.put_round(_round(0, 1))
        queue.put_round(_round(2))
        # Taken at once, nothing left for the sender to wake for.
        assert not queue.pending
        here = threading.current_thread().name
        assert sink.arrived == [(step, here, "try_log_payloads") for step in range(3)]
    finally:
        assert queue.close(deadline=time.monotonic() + 5) is None


def test_a_refused_round_goes_to_the_sender_and_later_rounds_queue_behind_it() -> None:
    sink = _TakesRoundsAtOnce()
    queue = SinkQueue(Sink(sink), size=16)
    queue.start()
    try:
        sink.accepting = False
        queue.put_round(_round(0, 1))
        sink.accepting = True
        # Round 0-1 is pending: round 2 may not pass it.
        queue.put_round(_round(2))
        queue.wake()
        wait_for(lambda: len(sink.arrived) == 3)
        queue.put_round(_round(3))
    finally:
        assert queue.close(deadline=time.monotonic() + 5) is None
    assert [step for step, _, _ in sink.arrived] == [0, 1, 2, 3]
    assert [path for _, _, path in sink.arrived][:3] == ["log_payloads"] * 3
    assert sink.arrived[3][2] == "try_log_payloads"


def test_a_round_is_queued_while_the_sender_holds_payloads_the_sink_has_not_taken() -> (
    None
):
    sink = _TakesRoundsAtOnce()
    entered, release = threading.Event(), threading.Event()
    logged = sink.log_payloads

    def slow_log_payloads(payloads: list[Any]) -> None:
        entered.set()
        release.wait(10)
        logged(payloads)

    sink.log_payloads = slow_log_payloads  # type: ignore[method-assign]
    queue = SinkQueue(Sink(sink), size=16)
    queue.start()
    try:
        queue.put_all(_round(0))
        queue.wake()
        assert entered.wait(10)
        # The sender holds round 0 in a call: round 1 waits behind it.
        queue.put_round(_round(1))
        assert [item[1] for item in queue.pending] == [1]
        release.set()
        queue.wake()
        wait_for(lambda: len(sink.arrived) == 2)
    finally:
        assert queue.close(deadline=time.monotonic() + 5) is None
    assert [step for step, _, _ in sink.arrived] == [0, 1]


def test_a_transient_error_taking_a_round_at_once_leaves_it_to_the_senders_retries() -> (
    None
):
    sink = _TakesRoundsAtOnce()
    failures = iter([True])

    def try_log_payloads(payloads: list[Any]) -> bool:
        raise TransientSinkError("the far end is away")

    def log_payloads(payloads: list[Any]) -> None:
        if next(failures, False):
            raise TransientSinkError("still away", retry_after=0.01)
        sink.arrived.extend((p.step, "", "log_payloads") for p in payloads)

    sink.try_log_payloads = try_log_payloads  # type: ignore[method-assign]
    sink.log_payloads = log_payloads  # type: ignore[method-assign]
    errors: list[Exception] = []
    queue = SinkQueue(
        Sink(sink),
        size=16,
        listener=QueueListener(on_failure=lambda sink, name, err: errors.append(err)),
    )
    queue.start()
    try:
        queue.put_round(_round(0, 1))
        queue.wake()
        wait_for(lambda: len(sink.arrived) == 2)
    finally:
        assert queue.close(deadline=time.monotonic() + 5) is None
    assert [step for step, _, _ in sink.arrived] == [0, 1]
    # The refusal is no failure; the sender's failed try is.
    assert [str(err) for err in errors] == ["still away"]


class _TakesRoundsPartly(_TakesRoundsAtOnce):
    """A sink that takes a round at once but for a rest its sender is to finish."""

    def __init__(self) -> None:
        super().__init__()
        self.unfinished = False
        self.finished_on: list[str] = []

    def try_log_payloads(self, payloads: list[Any]) -> bool:
        self.unfinished = True
        return super().try_log_payloads(payloads)

    def finish_sending(self) -> None:
        self.finished_on.append(threading.current_thread().name)
        self.unfinished = False


def test_the_rest_of_a_round_taken_only_partly_is_finished_by_the_sender_at_once() -> (
    None
):
    sink = _TakesRoundsPartly()
    queue = SinkQueue(Sink(sink), size=16)
    queue.start()
    try:
        queue.put_round(_round(0))
        # No later round, no flush: the sender finishes it by itself.
        wait_for(lambda: not sink.unfinished)
        assert sink.finished_on
        assert sink.finished_on[0] != threading.current_thread().name
    finally:
        assert queue.close(deadline=time.monotonic() + 5) is None


class _HeldCall(_Flaky):
    """A batch sink whose next call, once ``armed``, waits for ``outcome`` and then raises it, or, set to ``None``, stores the batch."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = threading.Event()
        self.in_call = threading.Event()
        self.go = threading.Event()
        self.outcome: Exception | None = None

    def log_batch(self, payloads: list[Any]) -> None:
        if self.armed.is_set():
            self.armed.clear()
            self.in_call.set()
            assert self.go.wait(10)
            if self.outcome is not None:
                raise self.outcome
        super().log_batch(payloads)


def _call_held_with(
    steps: range, pending: deque[Item] | None = None
) -> tuple[_HeldCall, SinkQueue, list[int]]:
    # A queue (on ``pending``, if given) whose sink is in a call holding
    # ``steps``, held; what it rejects is counted in the list returned.
    sink = _HeldCall()
    rejected: list[int] = []
    queue = SinkQueue(
        Sink(sink), size=100, listener=QueueListener(on_reject=rejected.append)
    )
    if pending is not None:
        queue.pending = pending
    queue.start()
    sink.armed.set()
    queue.put_all([queue_item(step) for step in steps])
    queue.wake()
    assert sink.in_call.wait(5)
    return sink, queue, rejected


class _HandedBackSlowly(deque[Item]):
    """A queue whose sender, putting a failed call's payloads back, is held up until ``closed``: close() gets its turn in between."""

    def __init__(self) -> None:
        super().__init__()
        self.handing_back = threading.Event()
        self.closed = threading.Event()

    def extendleft(self, items: Any) -> None:
        self.handing_back.set()
        self.closed.wait(5)
        super().extendleft(items)


def test_close_giving_up_while_a_failed_call_is_handed_back_counts_its_payloads_once() -> (
    None
):
    pending = _HandedBackSlowly()
    sink, queue, rejected = _call_held_with(range(3), pending)
    sink.outcome = TransientSinkError("far end away", retry_after=30)
    sink.away.set()  # and stays away, should closing try once more
    sink.go.set()
    assert pending.handing_back.wait(5)
    discarded: list[int | None] = []
    closer = threading.Thread(
        target=lambda: discarded.append(queue.close(time.monotonic() + 0.2))
    )
    closer.start()
    closer.join(0.6)  # gives up on the sender, which is handing the three back
    pending.closed.set()
    closer.join(5)
    wait_for(lambda: not queue.busy)

    # Counted once: discarded by close(), or, where closing had the sender
    # try once more first, with that call; none left behind.
    [count] = discarded
    assert (count or 0) + sum(rejected) == 3
    assert (len(queue.pending), sink.batches) == (0, [])


def test_a_call_close_gave_up_on_that_then_succeeds_is_delivered_not_counted_lost() -> (
    None
):
    sink, queue, rejected = _call_held_with(range(3))
    queue.put_all([queue_item(3), queue_item(4)])  # queued behind the call

    discarded = queue.close(time.monotonic() + 0.2)
    assert (discarded, queue.in_flight) == (2, 3)
    sink.go.set()  # the call outlives the deadline, then succeeds
    wait_for(lambda: not queue.busy)

    assert sink.steps() == [0, 1, 2]
    assert rejected == []


def test_a_call_close_gave_up_on_that_then_fails_has_its_payloads_rejected(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink, queue, rejected = _call_held_with(range(3))

    assert queue.close(time.monotonic() + 0.2) == 0
    sink.outcome = ValueError("the backend refuses them")
    sink.go.set()
    wait_for(lambda: not queue.busy)

    assert rejected == [3]
    assert queue.rejected == 3
    [said] = [r.getMessage() for r in caplog.records if r.name == "rlpulse"]
    assert said == (
        "the call to sink _HeldCall that stop() left behind failed: the backend "
        "refuses them; its 3 payloads were not delivered (counted in rejected)"
    )


def test_the_payloads_of_a_call_that_fails_for_good_are_counted_rejected() -> None:
    sink, queue, rejected = _call_held_with(range(3))
    sink.outcome = ValueError("the backend refuses them")
    sink.go.set()
    wait_for(lambda: rejected == [3])
    queue.put_all([queue_item(3)])
    queue.wake()
    wait_for(lambda: sink.steps() == [3])

    assert queue.close(time.monotonic() + 5) is None
    assert (queue.rejected, queue.dropped) == (3, 0)


def test_an_error_raised_after_the_sink_took_the_payloads_rejects_none() -> None:
    sink, queue, rejected = _call_held_with(range(3))
    reported = RuntimeError("a sink downstream failed earlier")
    reported.payloads_taken = True  # type: ignore[attr-defined]
    sink.outcome = reported
    sink.go.set()
    wait_for(lambda: not queue.in_flight and not queue.pending)

    assert queue.close(time.monotonic() + 5) is None
    assert (rejected, queue.rejected) == ([], 0)


def test_a_full_queue_drops_the_oldest_payload_and_counts_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate = threading.Event()

    class Stuck:
        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            gate.wait()

    monitor = LoggerMonitor(
        [Stuck(), InMemorySink()], poll_interval=0.005, queue_size=5, stop_timeout=1
    )
    monitor.watch(Source(), name="source")
    with caplog.at_level(logging.WARNING):
        monitor.start()
        assert wait_until(lambda: monitor.stats()["dropped"] >= 10)
        assert monitor.stats()["queued"] <= 5 + 5  # Stuck's queue stays bounded
        monitor.stop()
    gate.set()
    drop_warnings = [m for m in rlpulse_warnings(caplog) if "dropped the oldest" in m]
    assert len(drop_warnings) == 1
    assert "Stuck" in drop_warnings[0]


class Overrunning:
    """A batch sink whose call, once ``armed``, outlives stop(): it waits for ``go``, then stores its payloads."""

    def __init__(self) -> None:
        self.delivered = 0
        self.armed = threading.Event()
        self.in_call = threading.Event()
        self.go = threading.Event()

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        self.log_batch([(metrics, step, None)])

    def log_batch(self, payloads: list[Any]) -> None:
        if self.armed.is_set():
            self.armed.clear()
            self.in_call.set()
            assert self.go.wait(20)
        self.delivered += len(payloads)


def test_a_call_that_outlives_stop_and_then_succeeds_is_not_counted_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink, kept = Overrunning(), InMemorySink()
    monitor = LoggerMonitor([sink, kept], poll_interval=0.01, stop_timeout=0.5)
    monitor.watch(Source(), name="source")
    with caplog.at_level(logging.WARNING):
        monitor.start()
        assert wait_until(lambda: sink.delivered >= 3)
        sink.armed.set()
        assert sink.in_call.wait(5)
        time.sleep(0.05)  # rounds queued behind the call
        monitor.stop()
    sink.go.set()  # the call returns after stop() gave up on it: delivered
    assert wait_until(
        lambda: (
            not any(t.name == "rlpulse-sink-Overrunning" for t in threading.enumerate())
        )
    )
    stats = monitor.stats()

    assert sink.delivered + stats["dropped"] + stats["rejected"] == len(kept.payloads)
    [drained] = [m for m in rlpulse_warnings(caplog) if "without draining" in m]
    if stats["dropped"]:
        assert f"{not_delivered(stats['dropped'])} (counted in dropped)" in drained
    else:  # never "0 payloads were not delivered"
        assert "not delivered" not in drained
    assert (
        "still being written by it (counted in rejected only if that call fails)"
        in drained
    )


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_sink_that_ends_its_feeding_thread_is_said_at_stop_with_what_it_left(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Exiting:
        calls = 0

        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            self.calls += 1
            if self.calls == 2:
                raise SystemExit(3)  # what no thread of rlpulse catches

    sink = Exiting()
    monitor = LoggerMonitor(sink, poll_interval=0.01, stop_timeout=1.0)
    monitor.watch(Source(), name="source")
    with caplog.at_level(logging.WARNING):
        monitor.start()
        assert wait_until(lambda: sink.calls == 2)
        time.sleep(0.1)  # rounds polled after it, never delivered
        monitor.stop()
    stats = monitor.stats()
    assert stats["dropped"] > 0
    [drained] = [m for m in rlpulse_warnings(caplog) if "without draining" in m]
    assert "the thread feeding it ended on SystemExit(3)" in drained
    assert not_delivered(stats["dropped"]) in drained


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_the_payloads_of_the_call_that_ended_a_sinks_feeding_thread_count_as_rejected() -> (
    None
):
    class ExitingBatches:
        def __init__(self) -> None:
            self.delivered = 0
            self.calls = 0

        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            self.log_batch([(metrics, step, None)])

        def log_batch(self, payloads: list[Any]) -> None:
            self.calls += 1
            if self.calls == 3:
                raise SystemExit(3)  # what no thread of rlpulse catches
            self.delivered += len(payloads)

    sink = ExitingBatches()
    kept = InMemorySink()
    monitor = LoggerMonitor([sink, kept], poll_interval=0.01, stop_timeout=1.0)
    monitor.watch(Source(), name="source")
    with monitor:
        assert wait_until(lambda: sink.calls == 3)
        time.sleep(0.1)  # rounds polled after it, never delivered
    stats = monitor.stats()

    assert stats["rejected"] >= 1  # the call's payloads: the sink raised on them
    assert sink.delivered + stats["dropped"] + stats["rejected"] == len(kept.payloads)


def test_a_sink_stuck_at_stop_gets_no_more_calls_once_stop_returns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate = threading.Event()

    class Frozen:
        def __init__(self) -> None:
            self.calls = 0
            self.flushed = False

        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            self.calls += 1
            gate.wait()

        def flush(self) -> None:
            self.flushed = True

    sink = Frozen()
    monitor = LoggerMonitor(sink, poll_interval=0.01, stop_timeout=1.0)
    monitor.watch(Source(), name="source")
    with caplog.at_level(logging.WARNING):
        monitor.start()
        assert wait_until(lambda: monitor.stats()["queued"] >= 5)
        monitor.stop()
    calls_at_stop = sink.calls
    queued = monitor.stats()["queued"]
    gate.set()  # the stuck call returns after stop() gave up on the sink
    time.sleep(0.3)
    assert sink.calls == calls_at_stop == 1
    assert not sink.flushed
    assert queued == 0
    assert monitor.stats()["dropped"] >= 5
    assert any("gets no more calls" in m for m in rlpulse_warnings(caplog))


class Batches:
    """A sink with log_batch that records each batch's size and takes ``seconds`` per call."""

    def __init__(self, seconds: float = 0.0) -> None:
        self.seconds = seconds
        self.sizes: list[int] = []

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        raise AssertionError("a sink with log_batch gets batches")

    def log_batch(self, payloads: list[object]) -> None:
        self.sizes.append(len(payloads))
        time.sleep(self.seconds)


def test_batches_grow_when_the_sink_is_slower_than_the_polls() -> None:
    busy = Batches(seconds=0.05)
    monitor = LoggerMonitor(busy, poll_interval=0.005, queue_size=10_000)
    for index in range(20):
        monitor.watch(Source(), name=f"w{index}")
    with monitor:
        assert wait_until(lambda: sum(busy.sizes) >= 400)
    assert monitor.stats()["dropped"] == 0
    assert max(busy.sizes) > 20  # several rounds' payloads in one call
    assert sum(busy.sizes) == monitor.stats()["logged"]  # none lost


def test_under_light_load_a_batch_is_one_payload_and_sqlite_keeps_them_all(
    tmp_path: Path,
) -> None:
    quick = Batches()
    store = SQLiteLogger(tmp_path / "light.sqlite")
    monitor = LoggerMonitor([quick, store], poll_interval=0.2)
    source = Source()
    monitor.watch(source, name="source")
    try:
        with monitor:
            assert wait_until(lambda: len(quick.sizes) >= 5)
            # While it runs: stop() may add its final snapshot to the last
            # round's payload before the sender has taken that one.
            running = list(quick.sizes)
        frames = [r.value for r in read(store.path) if r.name == "source/frames"]
    finally:
        store.close()
    assert set(running) == {1}
    assert frames == [float(n) for n in range(1, source.frames + 1)]


def _three_watches(monitor: LoggerMonitor) -> LoggerMonitor:
    for name in ("a", "b", "c"):
        monitor.watch(None, name=name, stats_fn=lambda: {"x": 1})
    return monitor


def test_the_final_round_never_drops_its_own_payloads_from_a_small_queue(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = InMemorySink()
    monitor = _three_watches(LoggerMonitor(sink, poll_interval=10.0, queue_size=1))
    monitor.start()
    with caplog.at_level(logging.WARNING, logger="rlpulse"):
        monitor.stop()  # before the first timed round: the finals of all three
    assert sorted(next(iter(metrics)) for metrics, _ in sink.calls) == [
        "a/x",
        "b/x",
        "c/x",
    ]
    assert monitor.stats()["dropped"] == 0
    assert not [r for r in caplog.records if "dropped" in r.getMessage()]


def test_a_step_on_the_polling_thread_never_drops_its_own_payloads() -> None:
    sink = InMemorySink()
    monitor = _three_watches(LoggerMonitor(sink, poll_interval=10.0, queue_size=1))
    monitor.start()
    logged = monitor.step()  # a request round of all three
    monitor.stop(log_final=False)
    assert sorted(logged) == ["a", "b", "c"]
    assert len(sink.calls) == 3


def test_a_queue_holds_its_size_again_after_a_round_larger_than_it() -> None:
    # Five hourly watches make the first round larger than the queue; the
    # rounds after it poll one watch, and the sink hangs: the queue's bound
    # is queue_size again, not the largest round.

    gate = threading.Event()

    class Hung:
        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            gate.wait(30)

    monitor = LoggerMonitor(Hung(), poll_interval=0.05, queue_size=2, stop_timeout=1)
    for index in range(5):
        monitor.watch(
            None,
            name=f"h{index}",
            stats_fn=lambda: {"x": 1},
            schedule=Every.seconds(3600),
        )
    monitor.watch(None, name="every", stats_fn=lambda: {"x": 1})
    monitor.start()
    try:
        assert wait_until(lambda: monitor.stats()["rounds"] >= 5)
        queued = monitor.stats()["queued"]
    finally:
        gate.set()
        monitor.stop(log_final=False)
    assert queued <= 2


def test_an_event_that_goes_through_after_failing_for_a_while_leaves_no_failure_behind() -> (
    None
):
    # Its TransientSinkError stayed the queue's retry_error: close() said the
    # sink was still failing, and a SinkProcess would drop instead of wait.
    class BusyOnce:
        def __init__(self) -> None:
            self.event_calls = 0

        def log_metrics(self, metrics: Any, step: Any = None) -> None:
            pass

        def log_event(self, event: Event) -> None:
            self.event_calls += 1
            if self.event_calls == 1:
                raise TransientSinkError(errno.EBUSY, "busy")

    sink = BusyOnce()
    queue = SinkQueue(Sink(sink), size=8)
    queue.start()
    queue.put_events([Event(time.time(), "w", "stalled", "no progress", 1.0)])
    queue.wake()
    wait_for(lambda: sink.event_calls == 2 and not queue.events, seconds=10)

    assert queue.retry_error is None
    assert queue.close(deadline=time.monotonic() + 5) is None
