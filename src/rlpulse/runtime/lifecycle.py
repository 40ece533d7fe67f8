"""Process lifecycle: monitors still running at exit are stopped; forks start inert.

Both registries hold monitors weakly, so a dropped monitor is collected.
At interpreter exit every running monitor is stopped (final snapshots,
sink queues drained and flushed). In a child made by ``os.fork`` every
inherited monitor is reset: no thread, no lock held by a thread that does
not exist there; it can be started again.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import weakref
from typing import Protocol

__all__ = ["running", "stopped", "track"]


class _Monitor(Protocol):
    def stop(self) -> None: ...

    def _after_fork_in_child(self) -> None: ...


_all: weakref.WeakSet[_Monitor] = weakref.WeakSet()
_running: weakref.WeakSet[_Monitor] = weakref.WeakSet()


def track(monitor: _Monitor) -> None:
    """Reset ``monitor`` in forked children from now on."""
    _all.add(monitor)


def running(monitor: _Monitor) -> None:
    """Stop ``monitor`` at interpreter exit unless :func:`stopped` is called first."""
    _running.add(monitor)


def stopped(monitor: _Monitor) -> None:
    """Forget ``monitor`` for the exit hook."""
    _running.discard(monitor)


def _stop_running_monitors() -> None:
    for monitor in list(_running):
        # An exit hook must not let one monitor's failure stop the others.
        with contextlib.suppress(Exception):
            monitor.stop()


def _reset_in_child() -> None:
    _running.clear()
    for monitor in list(_all):
        monitor._after_fork_in_child()


atexit.register(_stop_running_monitors)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_in_child)
