"""Sources: objects whose cheap ``stats()`` snapshot a monitor pulls.

The standard-library sources are importable from here; :class:`Tally` and
:class:`SharedCounters` also from ``rlpulse``:

- :class:`Tally` — counters, gauges and windowed observations pushed by the
  hot path (episode returns, losses, latencies);
- :class:`SharedCounters` — per-worker counters, gauges and heartbeats of
  worker processes in one shared-memory segment
  (:func:`remove_leaked_segments` removes those of killed creators);
- :class:`SystemStats` — process, host and GPU resource use (needs the
  ``rlpulse[system]`` extra when created).

TorchRL helpers live in :mod:`rlpulse.sources.torchrl` and import TorchRL
only there. Integrations register what the monitor must know of their
targets here, one line each (:mod:`rlpulse.targets`): Ray actors are polled
with one remote call (:mod:`rlpulse.sources.ray`), TorchRL multiprocess
collectors' per-worker views are refused in the background
(:mod:`rlpulse.sources.collectors`).

>>> from rlpulse.sources import Tally
>>> tally = Tally()
>>> tally.inc("updates")
>>> tally.stats()
{'updates': 1}
"""

from typing import Any

from rlpulse import targets
from rlpulse.sources.collectors import MULTIPROCESS_COLLECTOR
from rlpulse.sources.shared import (
    SharedCounters,
    WorkerCounters,
    remove_leaked_segments,
)
from rlpulse.sources.system import SystemStats
from rlpulse.sources.tally import Tally


def _is_ray_actor(target: Any) -> bool:
    # A Ray actor handle (Ray's own class) or a RayTarget, told apart by
    # module, so that watching anything else imports neither Ray nor ours.
    return type(target).__module__ in ("ray.actor", "rlpulse.sources.ray")


def _polled_remotely(target: Any, poll_timeout: float | None) -> tuple[Any, str]:
    from rlpulse.sources.ray import polled_remotely

    return polled_remotely(target, poll_timeout)


# What the monitor needs to know of the targets an integration knows: one
# line per integration (see rlpulse.targets).
targets.register(targets.TargetKind("Ray actor", _is_ray_actor, _polled_remotely))
targets.register(MULTIPROCESS_COLLECTOR)

__all__ = [
    "SharedCounters",
    "SystemStats",
    "Tally",
    "WorkerCounters",
    "remove_leaked_segments",
]
