"""Sinks as the monitor sees them: what a sink with ``log_batch`` is given, in background and in manual mode."""

from __future__ import annotations

import dataclasses
import gc
import time
import weakref
from collections.abc import Mapping
from typing import Any

import pytest

from rlpulse import LoggerMonitor
from rlpulse.runtime.sinks import Losses, LossReader
from tests.support import BatchRecorder, wait_until

pytestmark = pytest.mark.timeout(30)


@pytest.mark.timeout(30)
def test_a_monitor_gives_a_log_batch_sink_each_payloads_poll_time() -> None:
    class Counter:
        frames = 0.0

        def stats(self) -> dict[str, float]:
            self.frames += 1.0
            return {"frames": self.frames}

    recorder = BatchRecorder()
    before = time.time()
    with LoggerMonitor(recorder, poll_interval=0.01) as monitor:
        monitor.watch(Counter(), name="c")
        time.sleep(0.2)
    after = time.time()

    times = [triple[2] for batch in recorder.batches for triple in batch]
    assert len(times) >= 2
    assert all(isinstance(at, float) and before <= at <= after for at in times), times


def test_a_log_batch_sink_in_manual_mode_gets_log_metrics_without_a_timestamp() -> None:
    # Its log_metrics takes no timestamp=: giving its batches their poll
    # times must not pass one to it.
    class Both:
        def __init__(self) -> None:
            self.logged: list[tuple[dict[str, float], int | None]] = []

        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            self.logged.append((dict(metrics), step))

        def log_batch(self, payloads: list[Any]) -> None:
            raise AssertionError("manual mode calls log_metrics")

    class Source:
        def stats(self) -> dict[str, float]:
            return {"x": 1.0}

    sink = Both()
    monitor = LoggerMonitor(sink, background=False, on_error="raise")
    monitor.watch(Source(), name="w")
    monitor.step()
    monitor.stop()

    assert [metrics for metrics, _ in sink.logged] == [{"w/x": 1.0}] * len(sink.logged)
    assert sink.logged


class _LossKeeper:
    """A logger that keeps the training losses it was given, and has a ``losses()`` of its own: they, not what it lost."""

    def __init__(self) -> None:
        self.logged: list[Mapping[str, float]] = []

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        self.logged.append(metrics)

    def losses(self) -> list[float]:
        return [metrics["learner/loss"] for metrics in self.logged]


class _Learner:
    def __init__(self) -> None:
        self.updates = 0

    def stats(self) -> dict[str, float]:
        self.updates += 1
        return {"loss": 1.0 / self.updates}


def test_a_logger_whose_losses_method_is_its_own_is_logged_to_as_any_other() -> None:
    logger = _LossKeeper()
    monitor = LoggerMonitor(logger, background=False, on_error="raise")
    monitor.watch(_Learner(), name="learner")
    for _ in range(3):
        monitor.step()
    monitor.stop(log_final=False)

    assert logger.losses() == [1.0, 0.5, pytest.approx(1 / 3)]
    assert (monitor.stats()["dropped"], monitor.stats()["rejected"]) == (0, 0)


def test_a_background_monitor_logs_to_a_logger_whose_losses_method_is_its_own() -> None:
    logger = _LossKeeper()
    monitor = LoggerMonitor(logger, poll_interval=0.01, on_error="raise")
    monitor.watch(_Learner(), name="learner")
    with monitor:
        assert wait_until(lambda: len(logger.logged) >= 3)
    assert monitor.stats()["errors"] == 0
    assert (monitor.stats()["dropped"], monitor.stats()["rejected"]) == (0, 0)


def test_sinks_equal_by_value_have_a_loss_reader_each_and_one_gone_leaves_none_behind() -> (
    None
):
    @dataclasses.dataclass(frozen=True)
    class Behind:
        name: str

        def losses(self) -> Losses:
            return Losses(0, 0)

    first, second = Behind("same"), Behind("same")
    reader = LossReader.of(first, first.losses)

    assert LossReader.of(first, first.losses) is reader
    assert LossReader.of(second, second.losses) is not reader
    kept = weakref.ref(first)
    del first, reader
    gc.collect()
    assert kept() is None
