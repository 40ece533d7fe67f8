"""What a kind of target needs from a monitor, registered by the integration that knows it.

The core never names an integration. An integration (``rlpulse.sources.*``)
registers a :class:`TargetKind` for the targets it knows: how a monitor
polls them (``adapt``: wrap the target, say for one remote call per poll)
and what polling them from a background thread would risk (``hazard``).
:meth:`rlpulse.LoggerMonitor.watch` and ``start()`` ask :func:`adapt` and
:func:`background_hazard`; nothing else consults the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "TargetKind",
    "adapt",
    "background_hazard",
    "refuse_in_background",
    "register",
]


@dataclass(frozen=True)
class TargetKind:
    """One kind of target: how to recognise it, poll it, and what polling it from a thread risks.

    Args:
        name: what the kind is, for a reader of the registry.
        matches: whether a target is of this kind.
        adapt: ``(target, poll_timeout) -> (target to poll, default watch
            name)``; ``None`` polls the target itself.
        hazard: ``(target, provider, stats_kwargs) -> reason or None``: why
            polling this watch from a background thread would hang.

    Examples:
        >>> kind = TargetKind("strings", matches=lambda target: isinstance(target, str))
        >>> kind.matches("frames"), kind.matches(3)
        (True, False)
    """

    name: str
    matches: Callable[[Any], bool]
    adapt: Callable[[Any, float | None], tuple[Any, str]] | None = None
    hazard: Callable[[Any, Any, Mapping[str, Any]], str | None] | None = None


_kinds: list[TargetKind] = []


def register(kind: TargetKind) -> None:
    """Add ``kind`` to the registry the monitor asks; registering the same kind again does nothing."""
    if kind not in _kinds:
        _kinds.append(kind)


def adapt(target: Any, poll_timeout: float | None) -> tuple[Any, str]:
    """Return the object a watch with ``poll_timeout`` polls for ``target``, and its default name.

    A target of no registered kind with an ``adapt`` is polled itself and
    named after its class, in lower case.

    Examples:
        >>> class Buffer:
        ...     def stats(self):
        ...         return {}
        >>> buffer = Buffer()
        >>> adapt(buffer, 5.0) == (buffer, "buffer")
        True
    """
    for kind in _kinds:
        if kind.adapt is not None and kind.matches(target):
            return kind.adapt(target, poll_timeout)
    return target, type(target).__name__.lower()


def background_hazard(
    target: Any, provider: Any, stats_kwargs: Mapping[str, Any]
) -> str | None:
    """Return why polling this watch from a background thread would hang, or ``None``.

    Examples:
        >>> class Buffer:
        ...     def stats(self):
        ...         return {}
        >>> buffer = Buffer()
        >>> background_hazard(buffer, buffer.stats, {}) is None
        True
    """
    for kind in _kinds:
        if kind.hazard is not None and kind.matches(target):
            reason = kind.hazard(target, provider, stats_kwargs)
            if reason is not None:
                return reason
    return None


class _Spec(Protocol):
    @property
    def target(self) -> Any: ...
    @property
    def provider(self) -> Any: ...
    @property
    def stats_kwargs(self) -> Mapping[str, Any]: ...


def refuse_in_background(spec: _Spec) -> None:
    """Raise :class:`ValueError` for a watch that polling from a background thread would hang.

    Examples:
        >>> from rlpulse.watch import WatchSpec
        >>> refuse_in_background(WatchSpec("w", provider=dict))
    """
    reason = background_hazard(spec.target, spec.provider, spec.stats_kwargs)
    if reason is not None:
        raise ValueError(f"A background LoggerMonitor refuses this watch: {reason}")
