"""Which watches a round calls: the cost of a round follows what is due, not how many are watched.

A watch on a time-only schedule (``Every.seconds``) needs no call until its
``next_due``; every other watch is called every round. The agenda keeps the
time-gated watches in a heap ordered by due time, so that a round finds
the due ones without looking at the others: 10,000 watches of which 100
are due cost a round about what those 100 cost alone.

The heap is lazy. A watch's ``next_due`` only ever moves later (it is
set from its last log, or its first baseline), so an entry may be early,
never late: an entry that comes up before its watch is due is pushed
again at the watch's current due time.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence

from rlpulse.watch import Watch

__all__ = ["Agenda"]


class Agenda:
    """The watches due at a given time, in registration order, from ``watches()`` (the registration).

    Examples:
        >>> from rlpulse import Every
        >>> from rlpulse.watch import WatchSpec
        >>> every = Watch(WatchSpec("every", provider=dict))
        >>> hourly = Watch(WatchSpec("hourly", provider=dict, schedule=Every.seconds(3600)))
        >>> agenda = Agenda(lambda: (hourly, every))
        >>> [watch.name for watch in agenda.due(0.0)]  # never polled: both
        ['hourly', 'every']
        >>> hourly.poll({}, now=0.0)
        {}
        >>> [watch.name for watch in agenda.due(1.0)]
        ['every']
        >>> [watch.name for watch in agenda.due(3600.0)]
        ['hourly', 'every']
    """

    def __init__(self, watches: Callable[[], Sequence[Watch]]) -> None:
        self._watches = watches
        self._registered: Sequence[Watch] | None = None
        # Called every round, in registration order; with their indices.
        self._always: list[Watch] = []
        self._always_indexed: list[tuple[int, Watch]] = []
        # (due time, registration index, watch) of the time-gated watches.
        self._heap: list[tuple[float, int, Watch]] = []
        # Registration index of each time-gated watch.
        self._index: dict[Watch, int] = {}
        # Time-gated watches handed to the last round: back in the heap at
        # the next, by the due time their polls left them.
        self._taken: list[Watch] = []

    def due(self, now: float) -> Sequence[Watch]:
        """The watches that need a call at monotonic time ``now``, in registration order."""
        registered = self._watches()
        if registered is not self._registered:
            self._rebuild(registered)
        heap = self._heap
        index = self._index
        for watch in self._taken:
            heapq.heappush(heap, (watch.next_due, index[watch], watch))
        taken: list[Watch] = []
        while heap and heap[0][0] <= now:
            _, position, watch = heapq.heappop(heap)
            if watch.next_due <= now:
                taken.append(watch)
            else:  # logged since it was pushed: due later
                heapq.heappush(heap, (watch.next_due, position, watch))
        self._taken = taken
        if not taken:
            return self._always
        # Back in registration order: the every-round watches are one
        # sorted run already, so the sort costs about what is due.
        merged = self._always_indexed + [(index[watch], watch) for watch in taken]
        merged.sort(key=_position)
        return [watch for _, watch in merged]

    def next_due(self) -> float:
        """The earliest monotonic time a watch may need a call: ``-inf`` when one needs every round.

        Until then a round would call nothing, so the polling thread sleeps
        through (a changed registration needs a round at once). The time may
        be early (the heap is lazy), never late.

        Examples:
            >>> from rlpulse import Every
            >>> from rlpulse.watch import WatchSpec
            >>> hourly = Watch(WatchSpec("hourly", provider=dict, schedule=Every.seconds(3600)))
            >>> registered = (hourly,)
            >>> agenda = Agenda(lambda: registered)
            >>> [watch.name for watch in agenda.due(0.0)]
            ['hourly']
            >>> hourly.poll({}, now=0.0)
            {}
            >>> agenda.next_due()
            3600.0
            >>> Agenda(lambda: (Watch(WatchSpec("every", provider=dict)),)).next_due()
            -inf
        """
        if self._watches() is not self._registered or self._always:
            return -math.inf
        earliest = self._heap[0][0] if self._heap else math.inf
        return min([earliest, *(watch.next_due for watch in self._taken)])

    def _rebuild(self, registered: Sequence[Watch]) -> None:
        self._registered = registered
        self._always_indexed = [
            (position, watch)
            for position, watch in enumerate(registered)
            if not watch.clock_gated
        ]
        self._always = [watch for _, watch in self._always_indexed]
        self._index = {
            watch: position
            for position, watch in enumerate(registered)
            if watch.clock_gated
        }
        self._heap = [
            (watch.next_due, position, watch) for watch, position in self._index.items()
        ]
        heapq.heapify(self._heap)
        self._taken = []


def _position(entry: tuple[int, Watch]) -> int:
    return entry[0]
