"""Process lifecycle: monitors still running at exit are stopped; forks start inert.

Both registries hold monitors weakly, so a dropped monitor is collected.
At interpreter exit every running monitor is stopped (final snapshots,
sink queues drained and flushed); :func:`stop_on_sigterm` does the same on
``SIGTERM``, which skips the exit hook otherwise. In a child made by
``os.fork`` every inherited monitor is reset: no thread, no lock held by a
thread that does not exist there; it can be started again.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import signal
import threading
import time
import weakref
from collections.abc import Callable
from types import FrameType
from typing import Protocol

from rlpulse.runtime.deadline import side_by_side

__all__ = ["running", "stop_on_sigterm", "stopped", "track"]


class _Monitor(Protocol):
    def stop(self) -> None: ...

    def _after_fork_in_child(self) -> None: ...


_all: weakref.WeakSet[_Monitor] = weakref.WeakSet()
# Each running monitor, with the seconds its stop() may take.
_running: weakref.WeakKeyDictionary[_Monitor, float] = weakref.WeakKeyDictionary()


def track(monitor: _Monitor) -> None:
    """Reset ``monitor`` in forked children from now on."""
    _all.add(monitor)


def running(monitor: _Monitor, stop_timeout: float) -> None:
    """Stop ``monitor`` (within ``stop_timeout`` seconds) at interpreter exit unless :func:`stopped` is called first."""
    _running[monitor] = stop_timeout
    _run_exit_hook_first()


def _run_exit_hook_first() -> None:
    # Exit hooks run last registered first: registered again, the hook runs
    # before those registered since import (a library's), while what the
    # monitor polls and logs to is still there.
    atexit.unregister(_stop_running_monitors)
    atexit.register(_stop_running_monitors)


def stopped(monitor: _Monitor) -> None:
    """Forget ``monitor`` for the exit hook."""
    _running.pop(monitor, None)


def _stop_running_monitors() -> None:
    for monitor in list(_running):
        _stop(monitor)


def _stop(monitor: _Monitor) -> None:
    # An exit hook must not let one monitor's failure stop the others.
    with contextlib.suppress(Exception):
        monitor.stop()


def _stop_side_by_side() -> None:
    # Each monitor on a thread of its own, all waited for until one
    # deadline, the longest stop_timeout and a second: a monitor that cannot
    # stop (its lock held by the thread this runs on) delays no other.
    monitors = list(_running.items())
    longest = max((timeout for _, timeout in monitors), default=0.0)
    side_by_side(
        [
            ("rlpulse-sigterm", functools.partial(_stop, monitor))
            for monitor, _ in monitors
        ],
        time.monotonic() + longest + 1.0,
    )


def stop_on_sigterm() -> None:
    """On ``SIGTERM``, stop every running monitor, then end the process as ``SIGTERM`` would have.

    ``SIGTERM`` — what SLURM, Kubernetes and most schedulers send before
    they kill a job — ends a Python process without running the exit hook
    that logs the final snapshots. After this call, a ``SIGTERM`` first
    stops every running background monitor (final snapshots, sink queues
    drained and flushed, within each one's ``stop_timeout``), then hands
    the signal on to the handler installed before: a Python handler is
    called (whatever it does — return, raise ``SystemExit`` — happens as
    before); with none, or the default, the process ends by ``SIGTERM``
    (its exit status says so, as without this call); a ``SIGTERM`` that
    was ignored stays ignored, and no monitor is stopped. Calling it again
    changes nothing. Python lets only the main thread install signal
    handlers: from any other thread this raises ``RuntimeError``.

    Examples:
        >>> import signal
        >>> before = signal.getsignal(signal.SIGTERM)
        >>> stop_on_sigterm()
        >>> signal.getsignal(signal.SIGTERM) is before
        False
        >>> _ = signal.signal(signal.SIGTERM, before)  # as it was
    """
    global _sigterm_handler
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError(
            "stop_on_sigterm() installs a signal handler, which Python allows "
            "only in the main thread: call it there, for instance at the start "
            "of the script"
        )
    previous = signal.getsignal(signal.SIGTERM)
    if _sigterm_handler is not None and previous is _sigterm_handler:
        return

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        if previous == signal.SIG_IGN:
            return
        # Not on this thread: the handler runs between two bytecodes of the
        # main thread, which may hold a lock stop() needs (inside stats(),
        # say). Past their stop timeouts the signal goes on without them.
        _stop_side_by_side()
        if callable(previous):
            previous(signum, frame)
            return
        # The default disposition (or a handler Python does not know of,
        # installed outside it): end the process by the signal.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # pragma: no cover - ends
        signal.raise_signal(signal.SIGTERM)  # pragma: no cover - the process

    signal.signal(signal.SIGTERM, on_sigterm)
    _sigterm_handler = on_sigterm


_sigterm_handler: Callable[[int, FrameType | None], None] | None = None
"""The handler :func:`stop_on_sigterm` installed, once it did."""


def _reset_in_child() -> None:
    _running.clear()
    for monitor in list(_all):
        monitor._after_fork_in_child()


# weakref.finalize runs the finalizers still pending at exit from an exit
# hook of its own, registered when the first finalizer is made. A
# SinkProcess closes its pipe and a SharedCounters releases its memory in
# one: made now, that hook is registered before the monitors' and runs after
# it, so the final snapshots still reach them.
weakref.finalize(_running, lambda: None)
atexit.register(_stop_running_monitors)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_in_child)
