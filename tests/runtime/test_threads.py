"""The monitor's own cost (SPEC 6.4): rlpulse's threads are named ``rlpulse-...``, and ``stats()["cpu_s"]`` counts their CPU time.

Real threads doing real work, CPU time measured by each thread itself with
``time.thread_time()``; a real forked child. Linux only: elsewhere ``cpu_s``
is left out (``/proc`` is what reads a running thread's CPU time).
"""

from __future__ import annotations

import ast
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from rlpulse import LoggerMonitor
from rlpulse.runtime import threads
from rlpulse.runtime.threads import MonitorThread, cpu_seconds
from rlpulse.testing import InMemorySink
from tests.support import REPO, wait_until

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(
        not sys.platform.startswith("linux"), reason="cpu_s is read from /proc"
    ),
]

SRC = REPO / "src" / "rlpulse"


def spin(seconds: float) -> float:
    """Use ``seconds`` of this thread's CPU time; return the CPU time used."""
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        sum(range(1000))
    return time.thread_time() - start


class Spinning:
    """A source whose ``stats()`` uses 20 ms of CPU, adding up what its calls used."""

    def __init__(self) -> None:
        self.used_s = 0.0
        self.calls = 0

    def stats(self) -> dict[str, float]:
        self.used_s += spin(0.02)
        self.calls += 1
        return {"calls": float(self.calls)}


def test_cpu_s_counts_the_work_done_on_the_polling_thread_and_its_rate_is_a_share_of_a_core() -> (
    None
):
    source = Spinning()
    sink = InMemorySink()
    monitor = LoggerMonitor(sink, poll_interval=0.05)
    monitor.watch(source, name="spinning")
    monitor.watch(monitor, name="monitor", rate_keys=("cpu_s",))
    before = monitor.stats()["cpu_s"]
    with monitor:
        assert wait_until(lambda: source.used_s >= 0.3)
    after = monitor.stats()["cpu_s"]
    assert after - before >= source.used_s
    rates = [
        p.metrics["monitor/cpu_s_per_second"]
        for p in sink.payloads
        if "monitor/cpu_s_per_second" in p.metrics
    ]
    assert rates, "no rate of cpu_s was logged"
    # 20 ms of CPU a round of about 70 ms: a good part of one core, at most two.
    assert 0.05 < max(rates) <= 2.0


def test_cpu_s_leaves_out_the_threads_rlpulse_did_not_start() -> None:
    monitor = LoggerMonitor(InMemorySink(), poll_interval=0.05)
    before = monitor.stats()["cpu_s"]
    used_here = spin(0.3)
    other = threading.Thread(target=spin, args=(0.3,))
    other.start()
    other.join()
    assert used_here >= 0.3
    assert monitor.stats()["cpu_s"] - before < 0.1


def test_a_thread_that_ended_keeps_counting_and_the_total_never_goes_back() -> None:
    used: list[float] = []
    start = cpu_seconds()
    assert start is not None
    seen = [start]
    workers = [
        MonitorThread(f"rlpulse-test-{n}", lambda: used.append(spin(0.05)))
        for n in range(4)
    ]
    for worker in workers:
        worker.start()
    while any(worker.is_alive() for worker in workers):
        seen.append(cpu_seconds() or 0.0)
    for worker in workers:
        worker.join()
    seen.append(cpu_seconds() or 0.0)
    assert seen == sorted(seen), "cpu_seconds() went back as threads ended"
    assert seen[-1] - start >= sum(used) >= 0.2


def test_a_forked_child_counts_from_zero_not_its_parents_threads() -> None:
    worker = MonitorThread("rlpulse-test-parent", spin, (0.2,))
    worker.start()
    worker.join()
    parent = cpu_seconds()
    assert parent is not None
    assert parent >= 0.2
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            first = cpu_seconds()
            child_worker = MonitorThread("rlpulse-test-child", spin, (0.1,))
            child_worker.start()
            child_worker.join()
            os.write(write_end, f"{first} {cpu_seconds()}".encode())
        finally:
            os._exit(0)
    os.close(write_end)
    os.waitpid(pid, 0)
    first, then = map(float, os.read(read_end, 100).decode().split())
    os.close(read_end)
    assert first == 0.0
    assert 0.1 <= then < parent


def test_rlpulse_thread_names_start_with_its_prefix() -> None:
    with pytest.raises(ValueError, match="rlpulse-"):
        MonitorThread("poller", time.sleep, (0,))


def test_the_background_threads_of_a_monitor_are_all_rlpulse_threads() -> None:
    before = set(threading.enumerate())
    monitor = LoggerMonitor([InMemorySink(), InMemorySink()], poll_interval=0.01)
    monitor.watch(Spinning(), name="spinning")
    with monitor:
        time.sleep(0.2)
        started = set(threading.enumerate()) - before
    names = sorted(thread.name for thread in started)
    assert {"rlpulse-poller", "rlpulse-watchdog"} <= set(names)
    assert len([name for name in names if name.startswith("rlpulse-sink-")]) == 2
    assert all(isinstance(thread, MonitorThread) for thread in started), names


def test_rlpulse_starts_threads_only_as_monitor_threads() -> None:
    # Anything else would run outside cpu_s and could go unnamed. The demo's
    # threads are the workload it simulates, not monitoring.
    starts = []
    for path in sorted(SRC.rglob("*.py")):
        if path.parent.name == "_demo" or path == Path(threads.__file__):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "Thread"
            ):
                starts.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert starts == []


def test_procs_two_readings_of_a_threads_cpu_agree_and_an_ended_task_is_none() -> None:
    task = f"/proc/self/task/{threading.get_native_id()}"
    spin(0.05)
    precise = threads._schedstat_seconds(task)
    ticks = threads._stat_seconds(task)
    assert abs(precise - ticks) < 0.05
    assert threads._cpu_of_task(0) is None  # no task 0: an ended thread's file is gone
