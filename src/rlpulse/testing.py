"""What a test of code that monitors needs: a sink that keeps everything in memory.

:class:`InMemorySink` is an rlpulse sink like the others: a
:class:`~rlpulse.LoggerMonitor` hands it every payload with its metrics'
kinds and distributions, and every event. A test asserts on what it kept,
as OpenTelemetry's ``InMemoryMetricReader`` lets a test read what an SDK
collected.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from rlpulse.naming import Kind, Payload
from rlpulse.runtime.events import Event
from rlpulse.sinks.base import BaseSink

__all__ = ["InMemorySink"]


class InMemorySink(BaseSink):
    """A sink that keeps every payload and every event it is given, in order; safe to read while a monitor writes.

    Examples:
        >>> from rlpulse import LoggerMonitor, Tally
        >>> tally = Tally()
        >>> tally.inc("episodes", 3)
        >>> sink = InMemorySink()
        >>> monitor = LoggerMonitor(sink, background=False)
        >>> monitor.watch(tally, name="learner")
        'learner'
        >>> _ = monitor.step()
        >>> sink.values("learner/episodes"), str(sink.kind("learner/episodes"))
        ([3.0], 'counter')
        >>> sink.calls
        [({'learner/episodes': 3.0}, None)]
    """

    def __init__(self) -> None:
        super().__init__()
        self._destination = "memory"
        self._kept: list[Payload] = []
        self._events: list[Event] = []
        # Notified whenever something is kept; its own lock, never held
        # while the sink's is taken.
        self._changed = threading.Condition()

    @property
    def payloads(self) -> list[Payload]:
        """Every payload kept, in order (a copy)."""
        with self._lock:
            return list(self._kept)

    @property
    def calls(self) -> list[tuple[dict[str, float], int | None]]:
        """Every payload as a plain sink gets it: ``(metrics, step)``."""
        return [(dict(payload.metrics), payload.step) for payload in self.payloads]

    @property
    def events(self) -> list[Event]:
        """Every event kept, in order (a copy)."""
        with self._lock:
            return list(self._events)

    def values(self, name: str) -> list[float]:
        """Every value logged for metric ``name`` (``"<watch>/<metric>"``), in order."""
        return [p.metrics[name] for p in self.payloads if name in p.metrics]

    def kind(self, name: str) -> Kind | None:
        """The kind metric ``name`` was last logged with (``None``: never logged)."""
        for payload in reversed(self.payloads):
            if name in payload.metrics:
                kind: Kind = payload.kind(name)
                return kind
        return None

    def names(self) -> set[str]:
        """Every metric name logged."""
        return {name for payload in self.payloads for name in payload.metrics}

    def wait_for(
        self, condition: Callable[[InMemorySink], bool], timeout: float = 10.0
    ) -> bool:
        """Wait until ``condition(self)`` holds, at most ``timeout`` seconds; whether it does.

        For background monitors: it is checked again whenever a payload or
        an event arrives.
        """
        deadline = time.monotonic() + timeout
        while not condition(self):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            with self._changed:
                self._changed.wait(min(left, 0.05))
        return True

    def clear(self) -> None:
        """Forget everything kept so far."""
        with self._lock:
            self._kept.clear()
            self._events.clear()

    def log_event(self, event: Event) -> None:
        """Keep ``event``."""
        self._log_event(self._keep_event, event)

    def _keep_event(self, event: Event) -> None:
        self._events.append(event)
        self._tell()

    def _write_batch(self, payloads: Sequence[Payload]) -> None:
        self._kept.extend(payloads)
        self._tell()

    def _tell(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def __repr__(self) -> str:
        return f"InMemorySink({len(self._kept)} payloads, {len(self._events)} events)"
