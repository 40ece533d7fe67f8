"""Watches known to deadlock when polled from a background thread.

A TorchRL multiprocess collector answers ``stats(workers="per_worker")`` or
``stats(workers="both")`` by asking every worker over its control pipes.
Polled from the monitor's thread while the main thread iterates the
collector, the two race on those pipes and the whole pipeline hangs. A
background monitor refuses such a watch; manual ``step()`` calls from the
training loop (the thread that iterates) stay allowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["background_hazard"]

_PER_WORKER_VIEWS = ("per_worker", "both")


def background_hazard(
    target: Any, provider: Any, stats_kwargs: Mapping[str, Any]
) -> str | None:
    """Return why polling this watch from a background thread would hang, or ``None``.

    Examples:
        >>> class Buffer:
        ...     def stats(self):
        ...         return {}
        >>> buffer = Buffer()
        >>> background_hazard(buffer, buffer.stats, {}) is None
        True
    """
    if stats_kwargs.get("workers") not in _PER_WORKER_VIEWS:
        return None
    if not _is_torchrl_multiprocess_collector(target):
        return None
    if getattr(provider, "__self__", None) is not target:
        return None  # a custom stats_fn: the user decides what it touches
    return (
        f"stats_kwargs={dict(stats_kwargs)!r} asks a {type(target).__name__} for its "
        "per-worker view, which travels over the collector's control pipes; polled "
        "from a background thread while the main thread iterates the collector, it "
        "deadlocks the pipeline. Watch the aggregate view in the background (drop "
        "stats_kwargs), poll the per-worker view with a manual monitor "
        "(LoggerMonitor(..., background=False)) calling step() from the training "
        "loop, or count per worker with rlpulse.SharedCounters."
    )


def _is_torchrl_multiprocess_collector(target: Any) -> bool:
    for cls in type(target).__mro__:
        if cls.__name__ == "MultiCollector" and cls.__module__.startswith(
            "torchrl.collectors"
        ):
            return True
    return False
