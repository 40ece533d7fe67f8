"""ConsoleLogger: one compact line per payload on a text stream."""

from __future__ import annotations

import fcntl
import io
import itertools
import os
import select
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from rlpulse import ConsoleLogger, LoggerMonitor, Tally
from rlpulse.naming import Kind, Payload
from rlpulse.read.summary import format_number
from rlpulse.sinks.console import DEFAULT_WIDTH, format_payload

NOON = time.mktime((2024, 5, 1, 12, 3, 4, 0, 0, -1))


@pytest.fixture(autouse=True)
def _no_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines of the default width, whatever the shell running the tests exports."""
    monkeypatch.delenv("COLUMNS", raising=False)


def logged_lines(metrics: dict[str, float], step: int | None = None) -> list[str]:
    stream = io.StringIO()
    ConsoleLogger(stream).log_metrics(metrics, step=step, timestamp=NOON)
    return stream.getvalue().splitlines()


def test_payload_is_one_line_with_time_step_watch_and_compact_numbers() -> None:
    lines = logged_lines(
        {"collector/frames": 12000.0, "collector/frames_per_second": 3400.0}, step=1200
    )

    assert lines == [
        "12:03:04 step=1200 collector  frames_per_second=3400 frames=12,000"
    ]


def test_a_watchs_rates_come_first_then_its_gauges_then_its_counters() -> None:
    line = format_payload(
        {
            "buffer/write_count": 84000.0,
            "buffer/size": 5000.0,
            "buffer/episodes": 12.0,
            "buffer/episodes_per_second": 0.5,
            "buffer/utilization": 0.05,
            "buffer/writes_per_second": 3100.0,
            "buffer/episode_return_count": 12.0,
        },
        None,
        NOON,
    )

    assert line == (
        "12:03:04 buffer  episodes_per_second=0.5 writes_per_second=3100 "
        "size=5000 utilization=0.05 write_count=84,000 episodes=12 "
        "episode_return_count=12"
    )


def test_a_monitors_payload_is_ordered_by_the_kinds_its_watch_decided() -> None:
    stream = io.StringIO()
    kinds = {
        "monitor/polls": Kind.COUNTER,
        "monitor/cpu_s_per_second": Kind.RATE,
        "monitor/queued": Kind.GAUGE,
    }
    metrics = {"monitor/polls": 40.0, "monitor/queued": 2.0}
    metrics["monitor/cpu_s_per_second"] = 0.01

    ConsoleLogger(stream).log_payloads([Payload(metrics, None, NOON, kinds)])

    assert stream.getvalue() == (
        "12:03:04 monitor  cpu_s_per_second=0.01 queued=2 polls=40\n"
    )


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


def test_numbers_are_written_as_rlpulse_show_writes_them() -> None:
    values = {
        "x/size": 1600.0,
        "x/capacity": 50000.0,
        "x/rss_bytes": 406_400_000.0,
        "x/a": 3.14159,
        "x/b": -0.000123456,
        "x/c": 123456.0,
        "x/d": float("nan"),
    }

    (line,) = logged_lines(values)

    assert line == (
        "12:03:04 x  size=1600 capacity=50,000 rss_bytes=406.4M a=3.142 "
        "b=-0.0001235 c=123,456 d=nan"
    )
    items = line.split("  ", 1)[1].split()
    assert items == [f"{key[2:]}={format_number(v)}" for key, v in values.items()]


def test_integers_are_written_as_integers_without_exponent_or_point() -> None:
    (line,) = logged_lines({"x/size": 1600.0, "x/ready": 8.0, "x/zero": 0.0})

    assert line == "12:03:04 x  size=1600 ready=8 zero=0"
    assert "e+" not in line
    assert "." not in line


def test_empty_payload_says_it_has_no_metrics() -> None:
    assert logged_lines({}, step=5) == ["12:03:04 step=5 (no metrics)"]
    assert logged_lines({}) == ["12:03:04 (no metrics)"]


@pytest.mark.parametrize("background", [False, True])
def test_an_empty_snapshot_a_monitor_logs_names_its_watch(background: bool) -> None:
    stream = io.StringIO()
    monitor = LoggerMonitor(
        ConsoleLogger(stream), background=background, poll_interval=0.05
    )
    monitor.watch(Tally(), name="learner")
    monitor.watch(Tally(), name="collector")
    if background:
        with monitor:
            time.sleep(0.3)
    else:
        monitor.step()

    lines = stream.getvalue().splitlines()
    if background:  # stopped: the monitor's last line says so
        assert "ok stopped: LoggerMonitor stopped" in lines.pop()
    assert lines
    assert {line.split(" ", 1)[1] for line in lines} == {
        "learner  (no metrics)",
        "collector  (no metrics)",
    }


def test_an_empty_snapshot_names_its_watch_from_a_sink_process_too(
    tmp_path: Path,
) -> None:
    out = tmp_path / "console.txt"
    code = """
from rlpulse import LoggerMonitor, SinkProcess, Tally
if __name__ == "__main__":
    with SinkProcess("console:") as sink:
        monitor = LoggerMonitor(sink, background=False)
        monitor.watch(Tally(), name="learner")
        tally = Tally()
        tally.inc("frames")
        monitor.watch(tally, name="collector")
        monitor.step()
"""
    script = tmp_path / "script.py"
    script.write_text(code)
    with open(out, "w") as stderr:  # the child's console writes to it
        subprocess.run(
            [sys.executable, str(script)], check=True, timeout=60, stderr=stderr
        )

    lines = out.read_text().splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == [
        "learner  (no metrics)",
        "collector  frames=1",
    ]


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
    sink = ConsoleLogger(stream, width=60)
    payload = {f"x/metric_{index}": float(index) for index in range(20)}

    def log_payloads() -> None:
        for _ in range(50):
            sink.log_metrics(payload, timestamp=NOON)

    threads = [threading.Thread(target=log_payloads) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert stream.getvalue() == (format_payload(payload, None, NOON, 60) + "\n") * 200


def test_repr_names_the_stream_and_a_fixed_width() -> None:
    assert repr(ConsoleLogger()) == "ConsoleLogger(None)"
    assert repr(ConsoleLogger(width=80)) == "ConsoleLogger(None, width=80)"


# Fitting the width


WIDE_PAYLOAD = {
    **{f"collector/worker_{i}/frames_per_second": 1234.5 + i for i in range(6)},
    "collector/frames": 1_234_567.0,
    "buffer/size": 50000.0,
    "buffer/capacity": 100_000.0,
    "buffer/utilization": 0.5,
    "system/process/rss_bytes": 406_400_000.0,
    "system/host/cpu_percent": 87.25,
}


def _items(text: str) -> list[str]:
    """The ``key=value`` items of a payload's text, in order, whatever its line breaks."""
    return [word for word in text.split() if "=" in word]


def test_a_long_payload_continues_on_indented_lines_within_the_width() -> None:
    stream = io.StringIO()

    ConsoleLogger(stream, width=72).log_metrics(WIDE_PAYLOAD, step=9, timestamp=NOON)

    lines = stream.getvalue().splitlines()
    assert len(lines) > 1
    assert all(len(line) <= 72 for line in lines)
    assert lines[0].startswith("12:03:04 step=9 collector  worker_0/frames_per_second=")
    assert all(line.startswith(" " * 9) and line[9] != " " for line in lines[1:])
    assert _items(stream.getvalue()) == _items(format_payload(WIDE_PAYLOAD, 9, NOON))


def test_a_watch_name_stays_with_its_first_metric_across_a_break() -> None:
    text = format_payload(WIDE_PAYLOAD, None, NOON, width=72)

    for line in text.splitlines():
        assert not line.rstrip().endswith(("collector", "buffer", "system", "|"))
    assert "  buffer  size=50,000" in text or "| buffer  size=50,000" in text


def test_a_metric_longer_than_the_width_stays_whole_on_its_own_line() -> None:
    name = "x/" + "a" * 50

    lines = format_payload({name: 1.0, "x/b": 2.0}, None, NOON, width=30).splitlines()

    assert lines == ["12:03:04", f"{' ' * 9}x  {'a' * 50}=1", f"{' ' * 9}b=2"]


def test_lines_break_where_this_payloads_numbers_end_not_where_the_last_ones_did() -> (
    None
):
    # Same names, numbers of other lengths: the breaks move with them.
    short = format_payload({"w/a": 1.0, "w/b": 2.0, "w/c": 3.0}, None, NOON, width=30)
    long = format_payload({"w/a": 1.25, "w/b": 2.125, "w/c": 3.5}, None, NOON, width=30)

    assert short == "12:03:04 w  a=1 b=2 c=3"
    assert long.splitlines() == ["12:03:04 w  a=1.25 b=2.125", f"{' ' * 9}c=3.5"]


def test_a_file_gets_lines_of_the_default_width_without_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    path = tmp_path / "console.log"

    with path.open("w") as file, ConsoleLogger(file) as sink:
        sink.log_metrics(WIDE_PAYLOAD, timestamp=NOON)

    lines = path.read_text().splitlines()
    assert len(lines) > 1
    assert max(len(line) for line in lines) <= DEFAULT_WIDTH
    assert max(len(line) for line in lines) > DEFAULT_WIDTH - 40


def test_the_columns_environment_variable_sets_the_width(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "console.log"
    with path.open("w") as file, ConsoleLogger(file) as sink:
        monkeypatch.setenv("COLUMNS", "60")
        sink.log_metrics(WIDE_PAYLOAD, timestamp=NOON)
        monkeypatch.setenv("COLUMNS", "400")
        sink.log_metrics(WIDE_PAYLOAD, timestamp=NOON)

    lines = path.read_text().splitlines()
    assert all(len(line) <= 60 for line in lines[:-1])
    assert len(lines[-1]) > 200  # the second payload, on one line


def _read_terminal(master: int) -> str:
    chunks = []
    while select.select([master], [], [], 0.5)[0]:
        chunks.append(os.read(master, 65536))
    return b"".join(chunks).decode().replace("\r\n", "\n")


@pytest.mark.timeout(30)
@pytest.mark.parametrize("columns", [60, 132])
def test_lines_fit_the_width_of_the_terminal_they_are_written_to(
    columns: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    master, follower = os.openpty()
    try:
        fcntl.ioctl(
            follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0)
        )
        with open(follower, "w", closefd=False) as terminal:
            ConsoleLogger(terminal).log_metrics(WIDE_PAYLOAD, timestamp=NOON)
            shown = _read_terminal(master)
    finally:
        os.close(follower)
        os.close(master)

    lines = shown.splitlines()
    assert len(lines) > 1
    assert all(len(line) <= columns for line in lines)
    assert max(len(line) for line in lines) > columns - 40
    assert _items(shown) == _items(format_payload(WIDE_PAYLOAD, None, NOON))


@pytest.mark.parametrize("width", [0, -5, 2.5, True, "80"])
def test_a_width_that_is_not_a_positive_integer_is_refused(width: object) -> None:
    with pytest.raises(ValueError, match=r"width=\.\.\.\) must be a positive number"):
        ConsoleLogger(width=width)  # type: ignore[arg-type]


def test_a_stream_with_only_write_and_flush_gets_the_default_width(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)

    class Lines:
        def __init__(self) -> None:
            self.text = ""

        def write(self, text: str) -> int:
            self.text += text
            return len(text)

        def flush(self) -> None:
            pass

    stream = Lines()
    ConsoleLogger(stream).log_metrics(WIDE_PAYLOAD, timestamp=NOON)  # type: ignore[arg-type]

    assert stream.text == format_payload(WIDE_PAYLOAD, None, NOON, DEFAULT_WIDTH) + "\n"


@pytest.mark.parametrize("stream", [5, "stdout"])
def test_a_stream_without_write_is_refused_at_once(stream: object) -> None:
    with pytest.raises(TypeError, match="takes a text stream"):
        ConsoleLogger(stream)  # type: ignore[arg-type]


def collector_bound_lines(width: int) -> list[str]:
    """What a console ``width`` wide prints of a monitor whose learner waited 63 % of a window for data."""
    stream = io.StringIO()
    monitor = LoggerMonitor(ConsoleLogger(stream, width=width), background=False)
    learner = Tally()
    monitor.watch(Tally(), name="collector")
    monitor.watch(learner, name="learner")
    monitor.bottleneck(window=0.01)
    monitor.step()
    learner.inc("busy_s", 0.37)
    learner.inc("wait_s", 0.63)
    time.sleep(0.02)
    monitor.step()
    return stream.getvalue().splitlines()


def test_a_bottleneck_watch_s_payload_is_followed_by_its_verdict_in_words() -> None:
    said = "\n".join(collector_bound_lines(width=1000))
    assert "=> bottleneck: collector-bound: the learner waited" in said


def test_a_verdict_breaks_between_words_as_a_payload_does() -> None:
    lines = collector_bound_lines(width=60)

    start = next(i for i, line in enumerate(lines) if "=> bottleneck:" in line)
    verdict = [lines[start]]
    verdict += itertools.takewhile(
        lambda line: line.startswith(" " * 9), lines[start + 1 :]
    )
    assert len(verdict) > 1
    assert all(len(line) <= 60 for line in verdict)
    said = " ".join(line.strip() for line in verdict)
    assert "=> bottleneck: collector-bound: the learner waited 63% of" in said
    assert said.endswith("before the learner limits")


def test_a_bottleneck_event_says_the_change_once_beside_the_window_s_sentence() -> None:
    stream = io.StringIO()
    monitor = LoggerMonitor(ConsoleLogger(stream, width=1000), background=False)
    learner = Tally()
    monitor.watch(Tally(), name="collector")
    monitor.watch(learner, name="learner")
    monitor.bottleneck(window=0.01)
    monitor.step()
    # Two windows of a waiting learner, then two of a busy one: two events.
    for busy, wait in [(0.37, 0.63), (0.37, 0.63), (0.9, 0.1), (0.9, 0.1)]:
        learner.inc("busy_s", busy)
        learner.inc("wait_s", wait)
        time.sleep(0.02)
        monitor.step()
    monitor.stop()
    said = [line.split(" ", 1)[1] for line in stream.getvalue().splitlines()]
    verdicts = [line for line in said if line.startswith("=> bottleneck:")]
    changes = [line for line in verdicts if line.startswith("=> bottleneck: now ")]
    assert changes == [
        "=> bottleneck: now collector-bound",
        "=> bottleneck: now learner-bound (was collector-bound)",
    ]
    sentences = [line for line in verdicts if line not in changes]
    assert [sentence.split(":")[1] for sentence in sentences] == [
        " collector-bound",
        " collector-bound",
        " learner-bound",
        " learner-bound",
    ]
