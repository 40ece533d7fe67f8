"""One deadline for ``stop()``: it returns in time whatever a sink does; bad timeouts are refused."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping

import pytest

from rlpulse import LoggerMonitor
from rlpulse.testing import InMemorySink
from tests.support import Recorder, Source, frames_logged, rlpulse_warnings, wait_until

pytestmark = pytest.mark.timeout(60)


def test_stop_returns_in_time_while_a_sink_blocks_forever(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate = threading.Event()

    class Frozen:
        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            gate.wait()

    good = InMemorySink()
    monitor = LoggerMonitor([Frozen(), good], poll_interval=0.01, stop_timeout=1.0)
    monitor.watch(Source(), name="source")
    with caplog.at_level(logging.WARNING):
        monitor.start()
        assert wait_until(lambda: frames_logged(good, "source") >= 3)
        started = time.monotonic()
        monitor.stop()
        took = time.monotonic() - started
    gate.set()
    assert took < 1.5
    assert any("without draining sink Frozen" in m for m in rlpulse_warnings(caplog))
    final, _ = good.calls[-1]
    assert "source/frames_per_second" in final  # the final snapshot, with rates


@pytest.mark.parametrize("hangs_in", ["log_metrics", "flush"])
def test_manual_stop_returns_in_time_while_a_sink_hangs(
    caplog: pytest.LogCaptureFixture, hangs_in: str
) -> None:
    gate = threading.Event()

    class Frozen:
        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            if hangs_in == "log_metrics":
                gate.wait(20)

        def flush(self) -> None:
            gate.wait(20)

    class Flushed(Recorder):
        flushed = False

        def flush(self) -> None:
            self.flushed = True

    good = Flushed()
    monitor = LoggerMonitor([Frozen(), good], background=False, stop_timeout=1.0)
    monitor.watch(Source(), name="source")
    try:
        with caplog.at_level(logging.WARNING):
            started = time.monotonic()
            monitor.stop()
            took = time.monotonic() - started
    finally:
        gate.set()
    assert took < 1.5
    assert good.flushed  # the hung sink kept no other from its flush
    assert any("without flushing sink Frozen" in m for m in rlpulse_warnings(caplog))


@pytest.mark.parametrize(
    "options",
    [
        {"poll_interval": "1"},
        {"poll_timeout": "5"},
        {"stop_timeout": True},
    ],
    ids=["poll_interval", "poll_timeout", "stop_timeout"],
)
def test_a_setting_of_seconds_that_is_no_number_is_a_type_error(
    options: dict[str, object],
) -> None:
    [name] = options
    with pytest.raises(TypeError, match=f"{name} must be a positive"):
        LoggerMonitor(InMemorySink(), **options)  # type: ignore[arg-type]
    monitor = LoggerMonitor(InMemorySink(), background=False)
    with pytest.raises(TypeError, match="stall_after must be a positive"):
        monitor.watch(Source(), stall_after="60", progress_key="frames")  # type: ignore[arg-type]


def test_bad_timeouts_and_queue_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="poll_timeout"):
        LoggerMonitor(InMemorySink(), poll_timeout=0)
    with pytest.raises(ValueError, match="stop_timeout"):
        LoggerMonitor(InMemorySink(), stop_timeout=-1)
    with pytest.raises(ValueError, match="queue_size"):
        LoggerMonitor(InMemorySink(), queue_size=0)
    monitor = LoggerMonitor(InMemorySink(), background=False)
    with pytest.raises(ValueError, match="poll_timeout"):
        monitor.watch(Source(), poll_timeout=float("inf"))
