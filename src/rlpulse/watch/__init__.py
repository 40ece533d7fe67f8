"""A watch: its frozen options, its schedule state and the pure decision, in stages.

Given one raw ``stats()`` result at monotonic time ``now``,
:meth:`Watch.evaluate` says whether a payload is due and returns what to log
(:class:`Logged`); :meth:`Watch.commit` makes a delivered one the watch's
last log. Plain, deterministic code: the clock is an argument, so it is
tested without sleeping. Who calls providers, on which thread, and what
happens to a call that does not return is the runtime's business
(:mod:`rlpulse.runtime`).

- :mod:`~rlpulse.watch.spec`: the options (:class:`WatchSpec`) and their checks;
- :mod:`~rlpulse.watch.schedule`: when a snapshot is due;
- :mod:`~rlpulse.watch.stages`: the stages of a poll, each with its state
  (aggregates, stalls, the rates' baseline, worker loss, entry names, kinds);
- :mod:`~rlpulse.watch.core`: :class:`Watch`, the decision, staged;
- :mod:`~rlpulse.watch.registry`: a monitor's :class:`Watches`;
- :mod:`~rlpulse.watch.bottleneck`: the target of a bottleneck watch.
"""

from rlpulse.watch.core import Logged, Watch
from rlpulse.watch.registry import Watches
from rlpulse.watch.spec import AGGREGATES, WatchSpec, provider_of
from rlpulse.watch.stages import WatchEvents

__all__ = [
    "AGGREGATES",
    "Logged",
    "Watch",
    "WatchEvents",
    "WatchSpec",
    "Watches",
    "provider_of",
]
