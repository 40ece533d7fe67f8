"""TorchRL multiprocess collectors: the watch known to deadlock when polled from a thread.

A TorchRL multiprocess collector answers ``stats(workers="per_worker")`` or
``stats(workers="both")`` by asking every worker over its control pipes.
Polled from the monitor's thread while the main thread iterates the
collector, the two race on those pipes and the whole pipeline hangs. A
background monitor refuses such a watch; manual ``step()`` calls from the
training loop (the thread that iterates) stay allowed.

This module imports nothing from TorchRL: it recognises the collector by
its class, so registering it costs ``import rlpulse`` nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlpulse.targets import TargetKind

__all__ = ["MULTIPROCESS_COLLECTOR", "is_multiprocess_collector", "per_worker_hazard"]

_PER_WORKER_VIEWS = ("per_worker", "both")


def is_multiprocess_collector(target: Any) -> bool:
    """Whether ``target`` is a TorchRL multiprocess collector (a ``MultiCollector``).

    Examples:
        >>> is_multiprocess_collector(object())
        False
    """
    for cls in type(target).__mro__:
        if cls.__name__ == "MultiCollector" and cls.__module__.startswith(
            "torchrl.collectors"
        ):
            return True
    return False


def per_worker_hazard(
    target: Any, provider: Any, stats_kwargs: Mapping[str, Any]
) -> str | None:
    """Return why polling a collector's per-worker view from a thread would hang, or ``None``."""
    if stats_kwargs.get("workers") not in _PER_WORKER_VIEWS:
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


MULTIPROCESS_COLLECTOR = TargetKind(
    "TorchRL multiprocess collector",
    matches=is_multiprocess_collector,
    hazard=per_worker_hazard,
)
"""The registry entry of TorchRL's multiprocess collectors."""
