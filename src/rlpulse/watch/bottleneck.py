"""The target of a bottleneck watch: each window, the producer's and consumer's snapshots, judged.

:meth:`rlpulse.LoggerMonitor.bottleneck` watches a :class:`Bottleneck` like
any other target, on a time schedule of one window: each ``stats()`` call
reads the other watches' providers itself (so the pipeline's own stages
stay as they are), measures the window since the last call and judges it
(:mod:`rlpulse.verdict`). When a new verdict has held for two windows it
calls ``on_change`` with it: the monitor's ``bottleneck`` event.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import KW_ONLY, InitVar, dataclass, field
from typing import Any

from rlpulse.metrics import snapshot_of
from rlpulse.naming import Kind
from rlpulse.verdict import Hysteresis, Reading, Verdict, judge, measure

__all__ = ["Bottleneck"]

_Provider = Callable[[], Any]


@dataclass(eq=False, repr=False)
class Bottleneck:
    """Judges, at each ``stats()`` call, the window since the last one: which side held the pipeline back.

    ``producer``, ``consumer`` and ``buffer`` are the providers of the
    watches of each side (what their polls call); ``names`` the producer's
    and the consumer's watch names, for the verdict's words. The first call
    only takes the first reading (``{}``); a window shorter than half of
    ``window`` seconds is judged unknown.

    Examples:
        >>> from rlpulse.verdict import describe
        >>> learner = {"busy_s": 0.0, "wait_s": 0.0}
        >>> clock = iter([0.0, 30.0])
        >>> said = []
        >>> judged = Bottleneck(dict, lambda: learner, names=("collector", "learner"),
        ...                     window=30.0, on_change=said.append, hold=1,
        ...                     clock=lambda: next(clock))
        >>> judged.stats()
        {}
        >>> learner.update(busy_s=11.1, wait_s=18.9)
        >>> judged.stats()["bound"]
        -1.0
        >>> print(describe(said[0]))
        collector-bound: the learner waited 63% of the last 30 s for data; a faster learner gains nothing, a faster collector up to 2.7x before the learner limits
    """

    producer: _Provider
    consumer: _Provider
    buffer: _Provider | None = None
    _: KW_ONLY
    names: tuple[str, str]
    window: float
    target_ratio: float | None = None
    on_change: Callable[[Verdict], object] | None = None
    hold: InitVar[int] = 2
    clock: Callable[[], float] = time.monotonic
    _hysteresis: Hysteresis = field(init=False)
    _last: Reading | None = field(default=None, init=False)
    _held: Verdict | None = field(default=None, init=False)

    def __post_init__(self, hold: int) -> None:
        self._hysteresis = Hysteresis(hold)

    @property
    def current(self) -> Verdict | None:
        """The last verdict that held (announced), ``None`` before any."""
        return self._held

    def stats(self) -> dict[str, float]:
        """Read both sides (and the buffer), judge the window since the last call, and return its figures and verdict."""
        reading = Reading(
            self.clock(),
            snapshot_of(self.producer()),
            snapshot_of(self.consumer()),
            None if self.buffer is None else snapshot_of(self.buffer()),
        )
        before = self._last
        # The next window starts from each counter's last value seen: one
        # left out of this reading (NaN) keeps the one before.
        self._last = reading if before is None else _carried(before, reading)
        if before is None:
            return {}
        window = measure(before, reading, self.target_ratio)
        producer, consumer = self.names
        verdict = judge(window, producer, consumer, minimum_s=self.window / 2)
        if self._hysteresis.update(verdict.bound):
            self._held = verdict
            if self.on_change is not None:
                self.on_change(verdict)
        return verdict.metrics()

    def metric_kinds(self) -> dict[str, Kind]:
        """None of its entries is a counter: each is a window's share, ratio or verdict."""
        return {}

    def __repr__(self) -> str:
        producer, consumer = self.names
        return f"Bottleneck({producer!r} -> {consumer!r}, window={self.window:g})"


def _carried(before: Reading, after: Reading) -> Reading:
    """``after``, with each figure it lacks that ``before`` had."""
    buffer = after.buffer
    if before.buffer is not None and buffer is not None:
        buffer = {**before.buffer, **buffer}
    return Reading(
        after.time,
        {**before.producer, **after.producer},
        {**before.consumer, **after.consumer},
        buffer,
    )
