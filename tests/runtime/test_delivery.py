"""Delivery: how payloads reach every sink, inline or through the queues; a slow or failing sink holds up no other."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

import pytest

from rlpulse import LoggerMonitor
from rlpulse.runtime.sinks import Losses
from rlpulse.testing import InMemorySink
from tests.support import Source, frames_logged, wait_until

pytestmark = pytest.mark.timeout(60)


def test_a_slow_sink_delays_neither_polls_nor_the_fast_sink() -> None:
    class Sleepy:
        calls = 0

        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            self.calls += 1
            time.sleep(1.0)

    sleepy, fast = Sleepy(), InMemorySink()
    monitor = LoggerMonitor([sleepy, fast], poll_interval=0.01, stop_timeout=3)
    monitor.watch(Source(), name="source")
    with monitor:
        assert wait_until(lambda: frames_logged(fast, "source") >= 50, timeout=10)
        assert sleepy.calls <= 3


def test_a_payload_a_sink_refuses_in_manual_mode_is_counted_rejected() -> None:
    class Refusing:
        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            raise ValueError("refused")

    monitor = LoggerMonitor(
        [Refusing(), InMemorySink()], background=False, on_error="ignore"
    )
    monitor.watch(Source(), name="source")
    monitor.step()
    monitor.step()
    assert (monitor.stats()["rejected"], monitor.stats()["errors"]) == (2, 2)


def test_a_payload_every_sink_refuses_in_manual_mode_is_logged_and_rejected_as_in_background_mode() -> (
    None
):
    class Refusing:
        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            raise ValueError("refused")

    manual = LoggerMonitor(Refusing(), background=False, on_error="ignore")
    manual.watch(Source(), name="source")
    results = [manual.step() for _ in range(3)]
    stats = manual.stats()

    # Produced and refused: each of them counted as such. The watch keeps
    # its baseline, as TorchRL's monitor does after a failed log.
    assert (stats["logged"], stats["rejected"], stats["errors"]) == (3, 3, 3)
    assert results == [{}, {}, {}]
    background = LoggerMonitor(Refusing(), poll_interval=0.01, on_error="ignore")
    background.watch(Source(), name="source")
    with background:
        assert wait_until(lambda: background.stats()["rejected"] >= 3)
    stats = background.stats()
    assert stats["logged"] == stats["rejected"]


def test_on_error_raise_with_a_failing_sink_ends_background_polling() -> None:
    class Broken:
        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            raise RuntimeError("boom")

    source = Source()
    previous_hook = threading.excepthook
    raised: list[BaseException | None] = []
    threading.excepthook = lambda args: raised.append(args.exc_value)
    try:
        monitor = LoggerMonitor(Broken(), poll_interval=0.01, on_error="raise")
        monitor.watch(source, name="s")
        monitor.start()
        assert wait_until(lambda: bool(raised))
        frames = source.frames
        time.sleep(0.1)
        assert source.frames == frames  # polling ended
        monitor.stop(log_final=False)
    finally:
        threading.excepthook = previous_hook
    assert isinstance(raised[0], RuntimeError)


class _HandsOn:
    """A sink that hands what it takes on, where every payload is refused: its ``losses()`` grows by each one taken.

    Its first flush holds until ``release`` is set, so that a test can call
    the monitor while ``stop()`` drains it.
    """

    def __init__(self) -> None:
        self.taken = 0
        self.flushing = threading.Event()
        self.release = threading.Event()

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        self.taken += 1

    def losses(self) -> Losses:
        return Losses(dropped=0, rejected=self.taken)

    def flush(self) -> None:
        self.flushing.set()
        self.release.wait(30)


def test_what_a_sink_lost_behind_it_is_counted_once_when_a_step_delivers_while_stop_drains() -> (
    None
):
    sink = _HandsOn()
    monitor = LoggerMonitor(
        sink, poll_interval=0.01, stop_timeout=20, on_error="ignore"
    )
    monitor.watch(Source(), name="source")
    monitor.start()
    assert wait_until(lambda: monitor.stats()["rejected"] >= 3)
    stopping = threading.Thread(target=monitor.stop)
    stopping.start()
    assert sink.flushing.wait(20)
    # The queues are closed: this step's payload goes to the sink inline.
    monitor.step()
    sink.release.set()
    stopping.join(30)

    assert not stopping.is_alive()
    assert monitor.stats()["rejected"] == sink.taken


def test_drops_behind_each_of_two_sinks_of_one_class_are_each_said() -> None:
    class Behind:
        def __init__(self) -> None:
            self.lost = Losses(0, 0)

        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            pass

        def losses(self) -> Losses:
            return self.lost

    first, second, recorder = Behind(), Behind(), InMemorySink()
    monitor = LoggerMonitor([first, second, recorder], background=False)
    monitor.watch(Source(), name="source")
    monitor.start()
    first.lost = Losses(5, 0)
    monitor.step()
    second.lost = Losses(7, 0)
    monitor.step()

    # In manual mode each sink is told on the calling thread.
    dropping = [event.value for event in recorder.events if event.kind == "dropping"]
    assert dropping == [5.0, 7.0]
    assert monitor.stats()["dropped"] == 12
