"""What a file sink reported written survives ``kill -9``, under load (SPEC 3).

A real child process runs a background monitor of 200 watches polled every
20 ms beside a CPU-bound loop, so that each sink call carries a large batch.
Its sink reports on standard output, after each call returned, the payloads
that call wrote; the test kills the child with ``SIGKILL`` mid-run and reads
the file back.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rlpulse import CSVLogger, JSONLLogger, SQLiteLogger, read

CHILD = textwrap.dedent(
    """
    import sys

    import rlpulse
    from rlpulse import LoggerMonitor

    sink_class = getattr(rlpulse, sys.argv[1])


    class Reporting(sink_class):
        # One line per call, once it returned: its size, then watch=step per payload.
        def log_payloads(self, payloads):
            payloads = list(payloads)
            super().log_payloads(payloads)
            written = [
                f"{name[: -len('/frames')]}={metrics[name]:.0f}"
                for metrics, *_ in payloads
                for name in metrics
                if name.endswith("/frames")
            ]
            sys.stdout.write(f"{len(payloads)} {' '.join(written)}\\n")
            sys.stdout.flush()


    class Source:
        def __init__(self):
            self.frames = 0

        def stats(self):
            self.frames += 1
            return {"frames": self.frames, "loss": 0.5, "size": 1000, "writes": 7}


    monitor = LoggerMonitor(Reporting(sys.argv[2]), poll_interval=0.02)
    for index in range(200):
        monitor.watch(Source(), name=f"watch_{index}", step="frames")
    monitor.start()
    value = 0
    while True:  # a training loop: pure Python, CPU-bound
        value = (value * 31 + 7) % 1_000_003
    """
)

FILE_SINKS = {
    "SQLiteLogger": "metrics.db",
    "CSVLogger": "metrics.csv",
    "JSONLLogger": "metrics.jsonl",
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("sink_name", list(FILE_SINKS))
def test_every_payload_a_sink_reported_written_under_load_survives_kill_9(
    tmp_path: Path, sink_name: str
) -> None:
    path = tmp_path / FILE_SINKS[sink_name]
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, sink_name, str(path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    lines = []
    try:
        first = child.stdout.readline()
        assert first, "the child exited before its sink wrote anything"
        lines.append(first)
        killed_at = time.monotonic() + 2
        while time.monotonic() < killed_at:
            line = child.stdout.readline()
            assert line, "the child exited before it was killed"
            lines.append(line)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        # Read through the text wrapper: it may already hold lines read ahead.
        lines += child.stdout.read().splitlines(keepends=True)
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL

    # A line cut short by the kill is left out: its call had returned, but
    # what it says cannot be trusted whole.
    calls = [line.split() for line in lines if line.endswith("\n")]
    reported = {tuple(entry.split("=")) for call in calls for entry in call[1:]}
    assert max(int(call[0]) for call in calls) > 1, "no call carried a batch"
    assert len(reported) >= 200

    stored = {
        (record.name[: -len("/frames")], f"{record.value:.0f}")
        for record in read(path)
        if record.name.endswith("/frames")
    }
    assert reported <= stored
    # The file is intact and the run can be resumed.
    if sink_name == "SQLiteLogger":
        with sqlite3.connect(path) as connection:
            assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        connection.close()
        SQLiteLogger(path, run="after").close()
    else:
        sink_class = CSVLogger if sink_name == "CSVLogger" else JSONLLogger
        sink = sink_class(path, resume=True)
        sink.log_metrics({"after/frames": 1.0}, step=1)
        sink.close()
        assert ("after", "1") in {
            (record.name[: -len("/frames")], f"{record.value:.0f}")
            for record in read(path)
        }
