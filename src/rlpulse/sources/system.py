"""Process, host and GPU metrics as a monitor target (extra ``rlpulse[system]``).

Reads what the operating system already keeps — through psutil, and through
NVIDIA's management library (the ``nvidia-ml-py`` package) for GPUs when it
and a driver are present — in well under a millisecond per snapshot.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

__all__ = ["SystemStats"]


class SystemStats:
    """A target whose ``stats()`` reports one process's and the host's resource use.

    Watch it beside the pipeline's own targets to see whether a slowdown is
    the machine's: ``monitor.watch(SystemStats(), name="system")``.

    ``stats()`` returns:

    - ``process/cpu_percent`` (since the previous snapshot; above 100 when
      the process uses more than one core), ``process/rss_bytes``,
      ``process/threads``, ``process/open_fds`` (every open descriptor:
      files, sockets, pipes; ``process/open_handles`` on Windows) and
      ``process/children`` (direct child processes);
    - ``host/cpu_percent`` (all cores, since the previous snapshot),
      ``host/memory_used_bytes`` (memory not available to new processes)
      and ``host/memory_percent``;
    - per GPU ``i`` seen by the NVIDIA driver (its own numbering, which
      ``CUDA_VISIBLE_DEVICES`` does not change),
      ``gpu_<i>/utilization_percent``, ``gpu_<i>/memory_used_bytes`` and
      ``gpu_<i>/memory_percent`` — only when the ``nvidia-ml-py`` package
      and an NVIDIA driver are installed; otherwise no GPU entries, and no
      error.

    With ``children=True``, also every process of the tree below (children,
    their children, …), each as ``child_<pid>/cpu_percent`` (since the
    previous snapshot: from a process's second snapshot on),
    ``child_<pid>/rss_bytes`` and ``child_<pid>/threads``, and the tree with
    the watched process: ``tree/processes``, ``tree/cpu_percent``,
    ``tree/rss_bytes`` and ``tree/threads``. Where NVML reports the GPU
    memory of processes, ``process/gpu_memory_bytes``,
    ``child_<pid>/gpu_memory_bytes`` and ``tree/gpu_memory_bytes`` too. A
    process that ends (or cannot be read) is left out from then on, never
    an error. The tree costs more than the process alone: Linux lists a
    process's children per thread, so each descendant's threads are read.

    The first snapshot's CPU percentages cover the time since construction.
    A snapshot costs a fraction of a millisecond (on Linux; elsewhere,
    counting child processes scans the process table).

    Args:
        pid: the process to report on (default: this one).

    Keyword Args:
        gpus: ``False`` leaves GPUs out even when they could be read.
        children: report every process of the tree below too (see above).

    Raises:
        ImportError: psutil is not installed (``pip install 'rlpulse[system]'``).
        ProcessLookupError: no process has that ``pid``.

    Examples:
        >>> system = SystemStats()
        >>> stats = system.stats()
        >>> stats["process/rss_bytes"] > 0, stats["process/threads"] >= 1
        (True, True)
        >>> sorted(key for key in stats if key.startswith("host/"))
        ['host/cpu_percent', 'host/memory_percent', 'host/memory_used_bytes']
    """

    def __init__(
        self, pid: int | None = None, *, gpus: bool = True, children: bool = False
    ) -> None:
        try:
            import psutil
        except ImportError as error:
            raise ImportError(
                "SystemStats needs psutil: pip install 'rlpulse[system]' "
                "(and nvidia-ml-py for GPU metrics)."
            ) from error
        if pid is not None and (
            isinstance(pid, bool) or not isinstance(pid, int) or pid < 0
        ):
            raise ValueError(
                f"SystemStats(pid={pid!r}): pid must be a process id (an int >= 0), "
                "or None for this process."
            )
        self._psutil: Any = psutil
        try:
            self._process: Any = psutil.Process(pid)
        except psutil.NoSuchProcess:
            raise ProcessLookupError(
                f"SystemStats(pid={pid}): no process has this id; pass the pid of "
                "a running process, or None for this one."
            ) from None
        self._pid: int = self._process.pid
        self._children_files = _can_read_children_files(self._pid)
        # Prime the CPU counters so the first snapshot covers the time since
        # construction rather than reporting nothing.
        self._process.cpu_percent(None)
        self._host_busy, self._host_total = _busy_and_total(psutil.cpu_times())
        self._nvml: Any = None
        self._gpu_handles: list[Any] = []
        if gpus:
            self._nvml, self._gpu_handles = _open_gpus()
        # children=True: each process of the tree below, when it was read
        # last (monotonic time, its CPU seconds) and when it started (a pid
        # reused by a new process is a new process).
        self._tree: dict[int, tuple[Any, float, float, float]] | None = (
            {} if children else None
        )

    @property
    def pid(self) -> int:
        """The id of the process reported on.

        Examples:
            >>> import os
            >>> SystemStats().pid == os.getpid()
            True
        """
        return self._pid

    @property
    def gpu_count(self) -> int:
        """How many GPUs the snapshots cover (0 without ``nvidia-ml-py`` or a driver).

        Examples:
            >>> SystemStats(gpus=False).gpu_count
            0
        """
        return len(self._gpu_handles)

    def stats(self) -> dict[str, float]:
        """Return the process's, the host's and every GPU's current resource use.

        Raises ``ProcessLookupError`` once the process has exited.

        Examples:
            >>> stats = SystemStats(gpus=False).stats()
            >>> 0 <= stats["host/memory_percent"] <= 100
            True
        """
        psutil = self._psutil
        process = self._process
        try:
            with process.oneshot():
                snapshot: dict[str, float] = {
                    "process/cpu_percent": process.cpu_percent(None),
                    "process/rss_bytes": process.memory_info().rss,
                    "process/threads": process.num_threads(),
                }
                if hasattr(process, "num_fds"):
                    snapshot["process/open_fds"] = process.num_fds()
                else:
                    snapshot["process/open_handles"] = process.num_handles()
                snapshot["process/children"] = self._count_children()
        except psutil.NoSuchProcess:
            raise ProcessLookupError(
                f"SystemStats: process {self._pid} has exited; unwatch this target "
                "or create a SystemStats for a running process."
            ) from None
        busy, total = _busy_and_total(psutil.cpu_times())
        elapsed = total - self._host_total
        share = (busy - self._host_busy) / elapsed if elapsed > 0 else 0.0
        # Sums of floats: an idle host's share may come out a hair below 0.
        snapshot["host/cpu_percent"] = 100.0 * min(1.0, max(0.0, share))
        self._host_busy, self._host_total = busy, total
        memory = psutil.virtual_memory()
        snapshot["host/memory_used_bytes"] = memory.total - memory.available
        snapshot["host/memory_percent"] = memory.percent
        if self._gpu_handles:
            snapshot.update(_gpu_stats(self._nvml, self._gpu_handles))
        if self._tree is not None:
            snapshot.update(self._tree_stats(snapshot))
        return snapshot

    def _tree_stats(self, snapshot: dict[str, float]) -> dict[str, float]:
        """Every process of the tree below, and the tree's totals with the watched process."""
        psutil = self._psutil
        gpu_memory = _gpu_memory_by_pid(self._nvml, self._gpu_handles)
        totals = {
            "tree/processes": 1.0,
            "tree/cpu_percent": snapshot["process/cpu_percent"],
            "tree/rss_bytes": snapshot["process/rss_bytes"],
            "tree/threads": snapshot["process/threads"],
        }
        entries: dict[str, float] = {}
        if gpu_memory is not None:
            own = gpu_memory.get(self._pid, 0)
            entries["process/gpu_memory_bytes"] = totals["tree/gpu_memory_bytes"] = own
        tree = self._tree
        assert tree is not None
        seen: dict[int, tuple[Any, float, float, float]] = {}
        for pid in self._descendants():
            try:
                process = tree[pid][0] if pid in tree else psutil.Process(pid)
                # A process object stays bound to the process it was made
                # for: a reused pid gets a fresh one.
                if not process.is_running():
                    process = psutil.Process(pid)
                with process.oneshot():
                    if process.status() == psutil.STATUS_ZOMBIE:
                        continue  # ended, its parent has yet to reap it
                    times = process.cpu_times()
                    used = times.user + times.system
                    rss = process.memory_info().rss
                    threads = process.num_threads()
                    born = process.create_time()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue  # ended, or not ours to read: left out
            now = time.monotonic()
            seen[pid] = (process, now, used, born)
            prefix = f"child_{pid}/"
            known = tree.get(pid)
            if known is not None and known[3] == born:
                # (First seen, or a reused pid: no CPU percent until the next.)
                elapsed = now - known[1]
                cpu = 100.0 * (used - known[2]) / elapsed if elapsed > 0 else 0.0
                entries[prefix + "cpu_percent"] = cpu
                totals["tree/cpu_percent"] += cpu
            entries[prefix + "rss_bytes"] = rss
            entries[prefix + "threads"] = threads
            totals["tree/processes"] += 1
            totals["tree/rss_bytes"] += rss
            totals["tree/threads"] += threads
            if gpu_memory is not None:
                memory = gpu_memory.get(pid, 0)
                entries[prefix + "gpu_memory_bytes"] = memory
                totals["tree/gpu_memory_bytes"] += memory
        self._tree = seen
        return {**entries, **totals}

    def _descendants(self) -> list[int]:
        """The pids of the tree below the watched process, parents before children."""
        if not self._children_files:
            try:
                return [p.pid for p in self._process.children(recursive=True)]
            except self._psutil.NoSuchProcess:
                return []
        found: list[int] = []
        parents = [self._pid]
        while parents:
            children = [child for parent in parents for child in _children_of(parent)]
            found += children
            parents = children
        return found

    def __repr__(self) -> str:
        return f"SystemStats(pid={self._pid}, gpus={self.gpu_count})"

    def _count_children(self) -> int:
        if not self._children_files:
            return len(self._process.children())
        if not os.path.isdir(f"/proc/{self._pid}/task"):
            raise self._psutil.NoSuchProcess(self._pid)
        return len(_children_of(self._pid))


def _can_read_children_files(pid: int) -> bool:
    # Reading /proc/<pid>/task/<tid>/children costs microseconds where
    # psutil's children() reads the stat file of every process on the host;
    # the files exist on Linux kernels built with CONFIG_PROC_CHILDREN.
    return sys.platform.startswith("linux") and os.path.exists(
        f"/proc/{pid}/task/{pid}/children"
    )


def _children_of(pid: int) -> list[int]:
    # A process's children, as Linux lists them under each of its threads;
    # none for one that ended meanwhile.
    children: list[int] = []
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return children
    for thread in threads:
        try:
            with open(f"/proc/{pid}/task/{thread}/children", "rb") as file:
                children += [int(child) for child in file.read().split()]
        except OSError:
            continue
    return children


def _gpu_memory_by_pid(nvml: Any, handles: list[Any]) -> dict[int, int] | None:
    """The GPU memory each process uses over every GPU, as NVML reports it; ``None`` without GPUs."""
    if not handles:
        return None
    used: dict[int, int] = {}
    for handle in handles:
        try:
            processes = nvml.nvmlDeviceGetComputeRunningProcesses(
                handle
            ) + nvml.nvmlDeviceGetGraphicsRunningProcesses(handle)
        except nvml.NVMLError:
            continue
        for process in processes:
            # None where the driver does not say (some virtualised GPUs).
            memory = getattr(process, "usedGpuMemory", None) or 0
            used[process.pid] = used.get(process.pid, 0) + memory
    return used


def _busy_and_total(times: Any) -> tuple[float, float]:
    # Guest time is already counted in user and nice time on Linux, and
    # waiting for I/O is idle time, as psutil counts them.
    total = sum(times)
    total -= getattr(times, "guest", 0.0) + getattr(times, "guest_nice", 0.0)
    idle = times.idle + getattr(times, "iowait", 0.0)
    return total - idle, total


def _open_gpus() -> tuple[Any, list[Any]]:
    try:
        import pynvml
    except ImportError:
        return None, []
    try:
        pynvml.nvmlInit()
        handles = [
            pynvml.nvmlDeviceGetHandleByIndex(index)
            for index in range(pynvml.nvmlDeviceGetCount())
        ]
    except pynvml.NVMLError:
        # No driver, no device, or a driver too old for this library: the
        # snapshots simply have no GPU entries.
        return None, []
    return pynvml, handles


def _gpu_stats(nvml: Any, handles: list[Any]) -> dict[str, float]:
    snapshot: dict[str, float] = {}
    for index, handle in enumerate(handles):
        try:
            utilization = nvml.nvmlDeviceGetUtilizationRates(handle).gpu
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        except nvml.NVMLError:
            # A GPU that cannot be read now (reset, fallen off the bus) is
            # left out of this snapshot instead of hiding every other metric.
            continue
        snapshot[f"gpu_{index}/utilization_percent"] = utilization
        snapshot[f"gpu_{index}/memory_used_bytes"] = memory.used
        snapshot[f"gpu_{index}/memory_percent"] = 100.0 * memory.used / memory.total
    return snapshot
