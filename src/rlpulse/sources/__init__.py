"""Sources: objects whose cheap ``stats()`` snapshot a monitor pulls.

The standard-library sources are importable from here; :class:`Tally` and
:class:`SharedCounters` also from ``rlpulse``:

- :class:`Tally` — counters, gauges and windowed observations pushed by the
  hot path (episode returns, losses, latencies);
- :class:`SharedCounters` — per-worker counters, gauges and heartbeats of
  worker processes in one shared-memory segment;
- :class:`SystemStats` — process, host and GPU resource use (needs the
  ``rlpulse[system]`` extra when created).

TorchRL helpers live in :mod:`rlpulse.sources.torchrl` and import TorchRL
only there.

>>> from rlpulse.sources import Tally
>>> tally = Tally()
>>> tally.inc("updates")
>>> tally.stats()
{'updates': 1}
"""

from rlpulse.sources.shared import SharedCounters, WorkerCounters
from rlpulse.sources.system import SystemStats
from rlpulse.sources.tally import Tally

__all__ = ["SharedCounters", "SystemStats", "Tally", "WorkerCounters"]
