"""Snapshot rules: which values of a ``stats()`` mapping are metrics, and how.

A snapshot keeps every entry whose value is a finite real number, converted
to ``float``: Python numbers (bools as 0.0/1.0), NumPy scalars and 0-d
arrays, 0-d tensors (through ``item()``; for a CUDA tensor that
synchronises the device). Nested mappings are flattened with ``/``. Keys
become ``str``. Everything else is dropped silently, never raised.

This module is the one place these rules live: the value conversion
(:func:`as_metric`), the flattening (:func:`collect`), the lookup of one
counter (:func:`counter_value`) and per-second rates (:func:`add_rates`,
and which earlier value a rate counts from: :func:`too_soon_to_rate`).
Pure functions, no state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from rlpulse.naming import RATE_NAMES, rate_name

__all__ = [
    "RATE_NAMES",
    "add_rates",
    "as_metric",
    "collect",
    "counter_value",
    "finite_counter",
    "rate_name",
    "snapshot_of",
    "too_soon_to_rate",
]


def add_rates(
    into: dict[str, float],
    current: Mapping[str, float],
    previous: Mapping[str, float],
    rated: Iterable[tuple[str, str]],
    elapsed: float,
) -> None:
    """Add to ``into`` the per-second rate of each counter of ``rated``, ``(key, rate's key)`` pairs.

    A rate is the counter's change from ``previous`` to ``current`` over
    ``elapsed`` seconds; none without a previous value or when the counter
    went down (a reset), so no rate is ever negative.

    Examples:
        >>> into = {}
        >>> add_rates(into, {"frames": 30.0, "batches": 1.0}, {"frames": 10.0, "batches": 4.0},
        ...           [("frames", "w/frames_per_second"), ("batches", "w/batches_per_second")], 4.0)
        >>> into
        {'w/frames_per_second': 5.0}
    """
    for key, rate_key in rated:
        now = current.get(key)
        before = previous.get(key)
        if now is not None and before is not None and now >= before:
            into[rate_key] = (now - before) / elapsed


def too_soon_to_rate(elapsed: float, elapsed_before: float) -> bool:
    """Whether a value ``elapsed`` s after the last one comes too soon to rate from it, the last having come ``elapsed_before`` s after its own.

    Less than half the interval before (a final snapshot at ``stop()`` a
    few milliseconds after a scheduled one) would rate a few milliseconds,
    0 for a counter that moves in batches: its rate counts from the value
    before the last, over both intervals. The monitor rates its final
    snapshots so, and ``rlpulse plot`` and ``rlpulse top`` the counters
    they rate themselves.

    Examples:
        >>> too_soon_to_rate(0.004, 2.5), too_soon_to_rate(2.0, 2.5)
        (True, False)
    """
    return elapsed < elapsed_before / 2


def as_metric(value: Any) -> float | None:
    """Return ``value`` as a finite float, or ``None`` when it is not a metric.

    Examples:
        >>> as_metric(3), as_metric(True), as_metric(2.5)
        (3.0, 1.0, 2.5)
        >>> as_metric(float("nan")), as_metric("12"), as_metric(None), as_metric(10**400)
        (None, None, None, None)
    """
    kind = type(value)
    if kind is float or kind is int:
        return finite_counter(value)
    if value is None or isinstance(value, (str, bytes, bytearray, complex)):
        return None
    try:
        ndim = getattr(value, "ndim", None)
        if ndim is not None:
            # NumPy scalars and arrays, tensors: only 0-d values are scalars.
            if ndim != 0:
                return None
            value = value.item()
            if isinstance(value, (str, bytes, complex)):
                return None
        number = float(value)
    except Exception:
        return None
    return number if number - number == 0.0 else None


def finite_counter(value: Any) -> float | None:
    """Return an exact ``int`` or ``float`` as a finite float; ``None`` for anything else.

    The check a counter schedule makes at every poll, so only the two
    types a counter has: anything else goes through :func:`as_metric`.

    Examples:
        >>> finite_counter(7), finite_counter(2.5), finite_counter(float("inf"))
        (7.0, 2.5, None)
        >>> finite_counter(True) is None, finite_counter(10**400) is None
        (True, True)
    """
    kind = type(value)
    if kind is float:
        # x - x is 0.0 exactly when x is finite (inf - inf and nan - nan are nan).
        return value if value - value == 0.0 else None
    if kind is int:
        try:
            number: float = value + 0.0  # float(value), without the call
        except OverflowError:
            return None
        return number
    return None


def snapshot_of(raw: Any) -> dict[str, float]:
    """Return the metrics of one ``stats()`` result, flattened and converted.

    Raises :class:`TypeError` when ``raw`` is not a mapping.

    Examples:
        >>> snapshot_of({"frames": 10, "name": "cartpole", "worker_0": {"alive": True}})
        {'frames': 10.0, 'worker_0/alive': 1.0}
    """
    if type(raw) is not dict and not isinstance(raw, Mapping):
        raise TypeError(
            f"stats() must return a mapping of scalars, got {type(raw).__name__}."
        )
    snapshot: dict[str, float] = {}
    collect(raw, snapshot)
    return snapshot


def collect(
    raw: Mapping[Any, Any],
    into: dict[str, float],
    prefix: str = "",
    names: Mapping[Any, str] | None = None,
    name_new: Callable[[Any], str] | None = None,
) -> None:
    """Add the metrics of mapping ``raw`` to ``into``, keyed ``prefix + key``, nested keys joined by ``/``.

    ``names``, when given, maps a top-level key of ``raw`` to its key in
    ``into``, and ``name_new`` names a key it does not know yet (a watch
    keeps them, so a key is named once, not at every poll).

    Examples:
        >>> into = {}
        >>> collect({"frames": 3, "rb": {"size": 2.5}, "env": "cartpole"}, into, "w/")
        >>> into
        {'w/frames': 3.0, 'w/rb/size': 2.5}
    """
    # This loop runs for every entry of every poll: the common value types
    # are tested by exact type first (an ABC isinstance check is slow), as
    # finite_counter does, without a call per entry.
    for key, value in raw.items():
        kind = type(value)
        if kind is int:
            try:
                value = value + 0.0
            except OverflowError:
                continue
        elif kind is float:
            if value - value != 0.0:
                continue
        elif kind is bool:
            value = 1.0 if value else 0.0
        elif kind is dict or isinstance(value, Mapping):
            collect(value, into, f"{prefix}{key}/")
            continue
        else:
            value = as_metric(value)
            if value is None:
                continue
        if names is not None:
            try:
                into[names[key]] = value
            except KeyError:
                into[name_new(key) if name_new else f"{prefix}{key}"] = value
        elif prefix or type(key) is not str:
            into[f"{prefix}{key}"] = value
        else:
            into[key] = value


def counter_value(raw: Any, key: str) -> float | None:
    """Return snapshot entry ``key`` of ``raw`` without building the whole snapshot.

    A nested key (``"worker_0/frames"``) is looked up through the nested
    mappings. ``None`` when absent or not a metric.

    Examples:
        >>> counter_value({"frames": 7, "batches": 1}, "frames")
        7.0
        >>> counter_value({"worker_0": {"frames": 5}}, "worker_0/frames")
        5.0
        >>> counter_value({"frames": "many"}, "frames") is None
        True
    """
    if type(raw) is not dict and not isinstance(raw, Mapping):
        raise TypeError(
            f"stats() must return a mapping of scalars, got {type(raw).__name__}."
        )
    value = raw.get(key)
    if value is None and "/" in key:
        return snapshot_of(raw).get(key)
    return as_metric(value)
