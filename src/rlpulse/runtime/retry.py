"""Failures that pass: the error a sink raises for one, and how long to wait before trying again.

A sink whose far end is away for a while (a collector restarting, a server
redeploying, a full disk) raises :class:`TransientSinkError`; its queue then
keeps the payloads and calls the sink again after :func:`retry_delay`.
Any other error is final for the payloads of that call.
"""

from __future__ import annotations

import random

__all__ = [
    "MAX_BACKOFF_S",
    "TransientSinkError",
    "backoff",
    "payloads_lost",
    "retry_delay",
]

FIRST_BACKOFF_S = 1.0
"""The wait after a first failed try."""
MAX_BACKOFF_S = 32.0
"""The longest wait between two tries, whatever the far end asks."""
JITTER = 0.2
"""Each wait is within this fraction of its base either way: senders that failed together try again apart."""


def payloads_lost(error: Exception, count: int) -> int:
    """How many of the ``count`` payloads of a sink call that raised ``error`` for good it lost: all of them, unless the sink took them and raised only to report a failure (an error whose ``payloads_taken`` is true, as a :class:`~rlpulse.SinkProcess` raises for a sink failing in its child).

    >>> payloads_lost(ValueError("refused"), 3)
    3
    >>> reported = RuntimeError("a sink in the child failed")
    >>> reported.payloads_taken = True
    >>> payloads_lost(reported, 3)
    0
    """
    return 0 if getattr(error, "payloads_taken", False) else count


class TransientSinkError(OSError):
    """A sink call that failed for a reason that passes; the same call may succeed later.

    rlpulse's sinks raise it when their far end is away: a receiver or
    server that refuses connections, does not answer in time or answers a
    retryable status (429, 502, 503, 504), a file system with no room
    left (``ENOSPC``), and a SQLite store another connection keeps locked
    past the busy timeout. Behind a background
    :class:`~rlpulse.LoggerMonitor` the payloads of that call stay at the
    head of the sink's queue and are handed to it again after a back-off
    (:func:`retry_delay`), in order, with whatever queued up meanwhile.
    Any other exception is final: the payloads of that call are not sent
    again.

    A sink of your own opts in by raising it (an ``OSError``: what catches
    those catches it), as a rule ``from`` the error it stands for;
    ``retry_after`` is the seconds the far end asked to wait, if it said.
    The sink must leave nothing of a failed call behind, or the payloads
    are stored twice once it succeeds.

    >>> import errno
    >>> error = TransientSinkError(errno.ENOSPC, "disk full", retry_after=None)
    >>> isinstance(error, OSError), error.errno == errno.ENOSPC, error.retry_after
    (True, True, None)
    >>> TransientSinkError("collector restarting", retry_after=5.0).retry_after
    5.0
    """

    def __init__(self, *args: object, retry_after: float | None = None) -> None:
        super().__init__(*args)
        self.retry_after = retry_after
        """The seconds the far end asked to wait before the next try (``None``: it did not say)."""


def backoff(tries: int) -> float:
    """The seconds to wait after try number ``tries`` failed: 1, 2, 4, 8, 16, then about 27, each within 20 % either way: at most 32.

    The exponential back-off with jitter of OpenTelemetry's OTLP exporters,
    its base capped so that the jitter stays whole at the cap: senders
    that failed together keep trying apart however long the far end is away.

    >>> all(0.8 <= backoff(1) <= 1.2 and 3.2 <= backoff(3) <= 4.8 for _ in range(100))
    True
    >>> waits = [backoff(30) for _ in range(100)]
    >>> max(waits) <= MAX_BACKOFF_S, len(set(waits)) > 1
    (True, True)
    """
    base = min(FIRST_BACKOFF_S * 2.0 ** min(tries - 1, 16), _MAX_BASE_S)
    return base * random.uniform(1 - JITTER, 1 + JITTER)


# The base of the longest waits: jittered, at most MAX_BACKOFF_S.
_MAX_BASE_S = MAX_BACKOFF_S / (1 + JITTER)


def retry_delay(tries: int, retry_after: float | None = None) -> float:
    """The seconds to wait after try number ``tries`` failed: :func:`backoff`, or longer where the far end asked to wait longer (``retry_after``); at most :data:`MAX_BACKOFF_S`.

    As OpenTelemetry's exporters wait, the greater of the back-off and the
    delay asked for: a far end that asks for no wait at all (``0``, a date
    passed already) is not tried again at once, over and over.

    >>> retry_delay(1, retry_after=3.0), retry_delay(1, retry_after=600.0)
    (3.0, 32.0)
    >>> 0.8 <= retry_delay(1) <= 1.2, 0.8 <= retry_delay(1, retry_after=0.0) <= 1.2
    (True, True)
    """
    wait = backoff(tries)
    if retry_after is not None and retry_after > wait:  # False for a NaN
        wait = retry_after
    return min(wait, MAX_BACKOFF_S)
