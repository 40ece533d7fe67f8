"""SystemStats: process, host and GPU resource use read through psutil and NVML."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import rlpulse
from rlpulse import JSONLLogger, LoggerMonitor
from rlpulse.sources import SystemStats

PROCESS_KEYS = {
    "process/cpu_percent",
    "process/rss_bytes",
    "process/threads",
    "process/open_fds",
    "process/children",
}
HOST_KEYS = {"host/cpu_percent", "host/memory_used_bytes", "host/memory_percent"}


def _gpu_keys(stats: dict[str, float]) -> list[str]:
    return [key for key in stats if key.startswith("gpu_")]


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    process.kill()
    process.wait(10)


def test_a_snapshot_reports_this_processs_and_the_hosts_resource_use() -> None:
    stats = SystemStats(gpus=False).stats()
    assert set(stats) == PROCESS_KEYS | HOST_KEYS
    assert stats["process/rss_bytes"] > 1_000_000
    assert stats["process/threads"] >= 1
    assert stats["process/open_fds"] >= 3
    assert stats["host/memory_used_bytes"] > 0
    assert 0 < stats["host/memory_percent"] <= 100
    assert 0 <= stats["host/cpu_percent"] <= 100


def test_process_cpu_percent_shows_a_busy_thread() -> None:
    system = SystemStats(gpus=False)
    deadline = time.monotonic() + 0.3
    while time.monotonic() < deadline:
        sum(range(1000))
    assert system.stats()["process/cpu_percent"] > 10


@pytest.mark.timeout(30)
def test_child_processes_are_counted_while_they_run(
    sleeper: subprocess.Popen[bytes],
) -> None:
    system = SystemStats(gpus=False)
    assert system.stats()["process/children"] >= 1
    sleeper.kill()
    sleeper.wait(10)
    before = system.stats()["process/children"]
    with subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"]
    ) as other:
        assert system.stats()["process/children"] == before + 1
        other.kill()


def test_children_started_from_another_thread_are_counted(
    wait_until: Callable[..., bool],
) -> None:
    system = SystemStats(gpus=False)
    before = system.stats()["process/children"]
    started: list[subprocess.Popen[bytes]] = []
    thread = threading.Thread(
        target=lambda: started.append(
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        )
    )
    thread.start()
    try:
        assert wait_until(lambda: bool(started))
        assert system.stats()["process/children"] == before + 1
    finally:
        # The thread's task must stay listed while the child is counted.
        thread.join(10)
        for process in started:
            process.kill()
            process.wait(10)


@pytest.mark.timeout(30)
def test_another_process_can_be_reported_on(sleeper: subprocess.Popen[bytes]) -> None:
    system = SystemStats(sleeper.pid, gpus=False)
    stats = system.stats()
    assert system.pid == sleeper.pid
    assert stats["process/rss_bytes"] > 0
    assert stats["process/children"] == 0
    assert repr(system) == f"SystemStats(pid={sleeper.pid}, gpus=0)"


@pytest.mark.timeout(30)
def test_a_process_that_exits_raises_process_lookup_error_naming_it(
    sleeper: subprocess.Popen[bytes],
) -> None:
    system = SystemStats(sleeper.pid, gpus=False)
    sleeper.kill()
    sleeper.wait(10)
    with pytest.raises(ProcessLookupError, match=f"process {sleeper.pid} has exited"):
        system.stats()


def test_a_pid_without_a_process_is_refused_at_construction() -> None:
    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    gone = int(finished.stdout)
    with pytest.raises(ProcessLookupError, match=f"pid={gone}"):
        SystemStats(gone)


@pytest.mark.parametrize("pid", [-1, "1", 2.0, True])
def test_a_pid_that_is_not_a_process_id_is_refused(pid: object) -> None:
    with pytest.raises(ValueError, match="pid must be a process id"):
        SystemStats(pid)  # type: ignore[arg-type]


def test_the_default_pid_is_this_process() -> None:
    assert SystemStats(gpus=False).pid == os.getpid()


def test_gpu_entries_match_the_gpus_found() -> None:
    system = SystemStats()
    assert len(_gpu_keys(system.stats())) == 3 * system.gpu_count


def test_gpus_false_leaves_gpus_out() -> None:
    system = SystemStats(gpus=False)
    assert system.gpu_count == 0
    assert _gpu_keys(system.stats()) == []


def test_without_the_nvml_package_there_are_no_gpu_entries_and_no_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # None in sys.modules makes the import fail as if the package were absent.
    monkeypatch.setitem(sys.modules, "pynvml", None)
    system = SystemStats()
    assert system.gpu_count == 0
    assert set(system.stats()) == PROCESS_KEYS | HOST_KEYS


def test_without_psutil_construction_says_which_extra_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "psutil", None)
    with pytest.raises(ImportError, match=r"rlpulse\[system\]"):
        SystemStats()


def test_import_rlpulse_sources_needs_no_psutil() -> None:
    completed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.modules['psutil'] = None; import rlpulse.sources; "
            "print(sorted(m for m in sys.modules if m.startswith(('pynvml', 'torch'))))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "[]"


@pytest.mark.skipif(
    SystemStats().gpu_count == 0,
    reason="needs an NVIDIA GPU, its driver and nvidia-ml-py",
)
def test_each_gpu_reports_utilization_and_memory_in_use() -> None:
    system = SystemStats()
    stats = system.stats()
    for index in range(system.gpu_count):
        assert 0 <= stats[f"gpu_{index}/utilization_percent"] <= 100
        assert stats[f"gpu_{index}/memory_used_bytes"] >= 0
        assert 0 <= stats[f"gpu_{index}/memory_percent"] <= 100


def test_the_monitor_logs_system_stats_as_a_target(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    with JSONLLogger(path) as sink:
        monitor = LoggerMonitor(sink, background=False)
        monitor.watch(SystemStats(gpus=False), name="system")
        monitor.step()
    names = {record.name for record in rlpulse.read(path)}
    assert {f"system/{key}" for key in PROCESS_KEYS | HOST_KEYS} <= names


# A worker that starts a busy grandchild and prints its pid, then sleeps.
TREE_WORKER = """
import subprocess, sys, time
busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
print(busy.pid, flush=True)
try:
    time.sleep(60)
finally:
    busy.kill()
"""


@pytest.mark.timeout(60)
def test_children_true_reports_every_process_of_the_tree_and_drops_those_that_end() -> (
    None
):
    worker = subprocess.Popen(
        [sys.executable, "-c", TREE_WORKER], stdout=subprocess.PIPE, text=True
    )
    try:
        assert worker.stdout is not None
        grandchild = int(worker.stdout.readline())
        system = SystemStats(children=True, gpus=False)
        time.sleep(0.5)
        stats = system.stats()
        for pid in (worker.pid, grandchild):
            assert stats[f"child_{pid}/rss_bytes"] > 1_000_000
            assert stats[f"child_{pid}/threads"] >= 1
        assert stats["tree/processes"] >= 3
        assert stats["tree/rss_bytes"] >= (
            stats["process/rss_bytes"]
            + stats[f"child_{worker.pid}/rss_bytes"]
            + stats[f"child_{grandchild}/rss_bytes"]
        )
        time.sleep(0.5)
        stats = system.stats()
        # The busy grandchild: most of a core since the previous snapshot.
        assert stats[f"child_{grandchild}/cpu_percent"] > 50
        assert stats[f"child_{worker.pid}/cpu_percent"] < 20
        assert stats["tree/cpu_percent"] >= stats[f"child_{grandchild}/cpu_percent"]
        os.kill(grandchild, 9)
        assert wait_for(lambda: f"child_{grandchild}/rss_bytes" not in system.stats())
        assert f"child_{worker.pid}/rss_bytes" in system.stats()
    finally:
        worker.kill()
        worker.wait(10)
    assert wait_for(lambda: f"child_{worker.pid}/rss_bytes" not in system.stats())


def test_without_children_the_tree_is_not_reported(
    sleeper: subprocess.Popen[bytes],
) -> None:
    stats = SystemStats(gpus=False).stats()
    assert not [key for key in stats if key.startswith(("child_", "tree/"))]


def wait_for(condition: Callable[[], bool], timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()
