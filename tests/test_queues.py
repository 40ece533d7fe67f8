"""SinkQueue: order, bounds, and who frees a delivered payload."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import pytest

from rlpulse.runtime.queues import SinkQueue
from rlpulse.runtime.sinks import Sink

pytestmark = pytest.mark.timeout(30)


class _Recorder:
    def __init__(self) -> None:
        self.steps: list[int | None] = []

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        self.steps.append(step)


def _wait_for(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def test_delivered_payloads_are_freed_by_the_producer_at_its_next_wake() -> None:
    recorder = _Recorder()
    queue = SinkQueue(Sink(recorder), size=16)
    queue.start()
    try:
        for step in range(3):
            queue.put(({"w/x": float(step)}, step, 0.0, "w"))
        queue.wake()
        _wait_for(lambda: len(recorder.steps) == 3)
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
    recorder = _Recorder()
    queue = SinkQueue(Sink(recorder), size=2)
    for step in range(5):
        queue.put(({"w/x": 1.0}, step, 0.0, "w"))
    assert queue.dropped == 3
    queue.start()
    queue.wake()
    assert queue.close(deadline=time.monotonic() + 5) is None
    assert recorder.steps == [3, 4]
