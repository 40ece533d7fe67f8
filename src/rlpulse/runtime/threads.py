"""rlpulse's own threads: named ``rlpulse-...``, their CPU time counted together.

Every thread the runtime and the sinks start is a :class:`MonitorThread`.
:func:`cpu_seconds` adds up the CPU time of all of them, those still running
and those that ended, so that its rate is the share of one core that
monitoring takes from the process (``LoggerMonitor.stats()["cpu_s"]``).

Another thread's CPU time is read from Linux's ``/proc/self/task``: reading
a file cannot go wrong the way asking ``pthread_getcpuclockid`` for a thread
that just ended can (undefined behaviour). A thread that ends adds its own
``time.thread_time()`` to the total as its last act. Elsewhere than Linux
only the threads that ended can be counted, so :func:`cpu_seconds` returns
``None`` there rather than a figure that leaves the running threads out.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["PREFIX", "MonitorThread", "cpu_entry", "cpu_seconds"]

PREFIX = "rlpulse-"
"""How the name of every thread rlpulse starts begins."""

_TASKS = "/proc/self/task"


class _Ledger:
    """The running :class:`MonitorThread` objects and the CPU time of those that ended."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        # A forked child has none of its parent's threads, and a CPU clock of
        # its own starting at zero.
        self.lock = threading.Lock()
        self.running: set[MonitorThread] = set()
        self.ended_s = 0.0

    def enter(self, thread: MonitorThread) -> None:
        with self.lock:
            self.running.add(thread)

    def leave(self, thread: MonitorThread) -> None:
        # Under the lock: a reader that lists this thread as running reads its
        # task's file before the thread can end and its id be reused.
        with self.lock:
            self.running.discard(thread)
            self.ended_s += time.thread_time()

    def total(self) -> float | None:
        with self.lock:
            seconds = self.ended_s
            for thread in self.running:
                running_s = _cpu_of_task(thread.native_id)
                if running_s is None:
                    return None
                seconds += running_s
        return seconds


def _cpu_of_task(native_id: int | None) -> float | None:
    """The CPU time of this process's thread ``native_id`` so far, or ``None`` where Linux's ``/proc`` cannot say."""
    task = f"{_TASKS}/{native_id}"
    for read in (_schedstat_seconds, _stat_seconds):
        try:
            return read(task)
        except (OSError, ValueError, IndexError):
            continue
    return None


def _schedstat_seconds(task: str) -> float:
    # The first field: nanoseconds on a CPU, user and system together.
    with open(f"{task}/schedstat", "rb") as schedstat:
        return int(schedstat.read().split(maxsplit=1)[0]) / 1e9


def _stat_seconds(task: str) -> float:
    # Kernels without scheduler statistics: user and system clock ticks,
    # the 14th and 15th fields (the 2nd, the name in parentheses, may hold
    # spaces and parentheses of its own).
    with open(f"{task}/stat", "rb") as stat:
        fields = stat.read().rpartition(b")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


_ledger = _Ledger()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_ledger.reset)


class MonitorThread(threading.Thread):
    """A daemon thread of rlpulse's: named ``rlpulse-...``, its CPU time counted in :func:`cpu_seconds`.

    Raises ``ValueError`` for a name that does not start with :data:`PREFIX`.

    Examples:
        >>> before = cpu_seconds() or 0.0
        >>> thread = MonitorThread("rlpulse-example", sum, (range(10**6),))
        >>> thread.start(); thread.join()
        >>> thread.daemon, (cpu_seconds() or 1.0) > before
        (True, True)
    """

    def __init__(
        self, name: str, target: Callable[..., object], args: tuple[Any, ...] = ()
    ) -> None:
        if not name.startswith(PREFIX):
            raise ValueError(f"rlpulse's thread names start with {PREFIX!r}: {name!r}")
        super().__init__(target=target, args=args, name=name, daemon=True)

    def run(self) -> None:
        _ledger.enter(self)
        try:
            super().run()
        finally:
            _ledger.leave(self)


def cpu_seconds() -> float | None:
    """The CPU time of every :class:`MonitorThread` of this process so far, in seconds; ``None`` off Linux.

    Cumulative: a thread that ended keeps counting with what it used.

    Examples:
        >>> first = cpu_seconds()
        >>> first is None or first >= 0.0
        True
    """
    return _ledger.total()


def cpu_entry() -> dict[str, float]:
    """``{"cpu_s": cpu_seconds()}``, or nothing where that is ``None``: the entry of ``LoggerMonitor.stats()``."""
    seconds = _ledger.total()
    return {} if seconds is None else {"cpu_s": seconds}
