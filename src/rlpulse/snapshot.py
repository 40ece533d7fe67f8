"""Snapshot rules: which values of a ``stats()`` mapping are metrics, and how.

A snapshot keeps every entry whose value is a finite real number, converted
to ``float``: Python numbers (bools as 0.0/1.0), NumPy scalars and 0-d
arrays, 0-d tensors (through ``item()``; for a CUDA tensor that
synchronises the device). Nested mappings are flattened with ``/``. Keys
become ``str``. Everything else is dropped silently, never raised.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["as_metric", "counter_value", "snapshot_of"]


def as_metric(value: Any) -> float | None:
    """Return ``value`` as a finite float, or ``None`` when it is not a metric.

    Examples:
        >>> as_metric(3), as_metric(True), as_metric(2.5)
        (3.0, 1.0, 2.5)
        >>> as_metric(float("nan")), as_metric("12"), as_metric(None), as_metric(10**400)
        (None, None, None, None)
    """
    kind = type(value)
    if kind is float:
        # x - x is 0.0 exactly when x is finite (inf - inf and nan - nan are nan).
        return value if value - value == 0.0 else None
    if kind is int or kind is bool:
        try:
            number = float(value)
        except OverflowError:
            return None
        return number if number - number == 0.0 else None
    return _as_metric_slow(value)


def _as_metric_slow(value: Any) -> float | None:
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
    _collect(raw, "", snapshot)
    return snapshot


def _collect(raw: Mapping[Any, Any], prefix: str, into: dict[str, float]) -> None:
    # The common value types are tested by exact type first: this loop runs
    # for every entry of every poll, and an ABC isinstance check is slow.
    for key, value in raw.items():
        kind = type(value)
        if kind is float:
            if value - value != 0.0:
                continue
        elif kind is int:
            try:
                value = float(value)
            except OverflowError:
                continue
        elif kind is bool:
            value = 1.0 if value else 0.0
        elif kind is dict or isinstance(value, Mapping):
            _collect(value, f"{prefix}{key}/", into)
            continue
        else:
            value = _as_metric_slow(value)
            if value is None:
                continue
        if prefix or type(key) is not str:
            key = f"{prefix}{key}"
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
    if type(value) is int:
        try:
            return float(value)
        except OverflowError:
            return None
    if value is None and "/" in key:
        return snapshot_of(raw).get(key)
    return as_metric(value)
