"""ConsoleLogger: one compact line per payload on a text stream."""

from __future__ import annotations

import io
import sys
import threading
import time

import pytest

from rlpulse import ConsoleLogger
from rlpulse.sinks.console import format_payload

NOON = time.mktime((2024, 5, 1, 12, 3, 4, 0, 0, -1))


def logged_lines(metrics: dict[str, float], step: int | None = None) -> list[str]:
    stream = io.StringIO()
    ConsoleLogger(stream).log_metrics(metrics, step=step, timestamp=NOON)
    return stream.getvalue().splitlines()


def test_payload_is_one_line_with_time_step_watch_and_compact_numbers() -> None:
    lines = logged_lines(
        {"collector/frames": 12000.0, "collector/frames_per_second": 3400.0}, step=1200
    )

    assert lines == [
        "12:03:04 step=1200 collector  frames=1.2e+04 frames_per_second=3.4e+03"
    ]


def test_metrics_are_grouped_by_watch_in_order_of_first_appearance() -> None:
    (line,) = logged_lines(
        {"collector/frames": 1.0, "buffer/size": 2.0, "collector/batches": 3.0}
    )

    assert line == "12:03:04 collector  frames=1 batches=3 | buffer  size=2"


def test_names_without_a_watch_prefix_are_shown_bare() -> None:
    (line,) = logged_lines({"loss": 0.25, "learner/lr": 0.0003})

    assert line == "12:03:04 loss=0.25 | learner  lr=0.0003"


def test_only_the_first_slash_separates_the_watch() -> None:
    (line,) = logged_lines({"collector/worker_0/frames": 5.0})

    assert line == "12:03:04 collector  worker_0/frames=5"


def test_numbers_keep_three_significant_digits() -> None:
    (line,) = logged_lines(
        {"x/a": 3.14159, "x/b": -0.000123456, "x/c": 123456.0, "x/d": float("nan")}
    )

    assert line == "12:03:04 x  a=3.14 b=-0.000123 c=1.23e+05 d=nan"


def test_empty_payload_prints_the_time_and_step() -> None:
    assert logged_lines({}, step=5) == ["12:03:04 step=5"]


def test_format_payload_is_the_logged_line() -> None:
    metrics = {"buffer/size": 3.0}

    assert logged_lines(metrics, step=2) == [format_payload(metrics, 2, NOON)]


def test_default_stream_is_standard_error_at_the_time_of_the_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sink = ConsoleLogger()
    replacement = io.StringIO()
    monkeypatch.setattr(sys, "stderr", replacement)

    sink.log_metrics({"x/v": 1.0}, timestamp=NOON)

    assert replacement.getvalue() == "12:03:04 x  v=1\n"
    assert sink.stream is replacement


def test_timestamp_defaults_to_the_time_of_the_call() -> None:
    stream = io.StringIO()
    before = time.time()
    ConsoleLogger(stream).log_metrics({"x/v": 1.0})
    after = time.time()

    clock = stream.getvalue().split(" ", 1)[0]
    seconds = range(int(before), int(after) + 1)
    assert clock in {time.strftime("%H:%M:%S", time.localtime(t)) for t in seconds}


def test_close_leaves_the_stream_open_and_is_idempotent() -> None:
    stream = io.StringIO()
    sink = ConsoleLogger(stream)
    sink.close()
    sink.close()

    assert not stream.closed


def test_context_manager_closes_the_logger_but_not_the_stream() -> None:
    stream = io.StringIO()
    with ConsoleLogger(stream) as sink:
        sink.log_metrics({"x/v": 1.0}, timestamp=NOON)

    assert not stream.closed
    with pytest.raises(RuntimeError, match="closed"):
        sink.log_metrics({"x/v": 2.0})


def test_logging_or_flushing_after_close_raises() -> None:
    sink = ConsoleLogger(io.StringIO())
    sink.close()

    with pytest.raises(RuntimeError, match="ConsoleLogger is closed"):
        sink.log_metrics({"x/v": 1.0})
    with pytest.raises(RuntimeError, match="ConsoleLogger is closed"):
        sink.flush()


def test_flush_flushes_the_stream() -> None:
    class CountingStream(io.StringIO):
        flushes = 0

        def flush(self) -> None:
            self.flushes += 1
            super().flush()

    stream = CountingStream()
    ConsoleLogger(stream).flush()

    assert stream.flushes == 1


def test_lines_from_several_threads_never_interleave() -> None:
    stream = io.StringIO()
    sink = ConsoleLogger(stream)
    payload = {f"x/metric_{index}": float(index) for index in range(20)}

    def log_payloads() -> None:
        for _ in range(50):
            sink.log_metrics(payload, timestamp=NOON)

    threads = [threading.Thread(target=log_payloads) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert stream.getvalue().splitlines() == [format_payload(payload, None, NOON)] * 200


def test_repr_names_the_stream() -> None:
    assert repr(ConsoleLogger()) == "ConsoleLogger(None)"
