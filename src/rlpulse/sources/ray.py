"""Ray actors as monitor targets: one remote call per poll, with a deadline (extra ``rlpulse[ray]``).

``monitor.watch(actor)`` on a Ray actor handle whose actor has a ``stats()``
method wraps the handle in a :class:`RayTarget`; ``RayTarget(actor, method=...)``
is the explicit form. Ray is imported when a :class:`RayTarget` is created,
never by ``import rlpulse``.

A remote call that has not answered in time is never issued a second time:
it stays outstanding, later polls fail at once (they do not wait again) until
its result arrives, and then that result is used. A :class:`RayTarget`
gives up before its watch's ``poll_timeout``, so a slow actor is reported as
an error of its own watch rather than counted as hung, and it delays the
other watches once, by about a ``poll_interval`` (the monitor's round moves
on without a slow call), never piling calls up in the actor's queue.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

from rlpulse.runtime.supervision import call_budget

__all__ = ["ActorTimeoutError", "ActorUnreachableError", "RayTarget", "polled_remotely"]


class ActorTimeoutError(TimeoutError):
    """A Ray actor's ``stats()`` call has not answered within its deadline; it stays outstanding.

    >>> issubclass(ActorTimeoutError, TimeoutError)
    True
    """


class ActorUnreachableError(RuntimeError):
    """A Ray actor died or cannot be reached; the message names the actor.

    >>> issubclass(ActorUnreachableError, RuntimeError)
    True
    """


class RayTarget:
    """A monitor target whose ``stats()`` is one remote call to a Ray actor.

    Watch a Ray actor from the driver (or any process connected to the
    cluster). ``monitor.watch(actor)`` builds one for a handle whose actor
    has a ``stats()`` method; build it yourself to call another method
    (``method="metrics"``) or to set your own ``timeout``. The default watch
    name is the actor's class name in lower case.

    Each ``stats(**kwargs)`` calls ``actor.<method>.remote(**kwargs)`` and
    waits for the answer until the call's deadline: ``timeout`` seconds
    after it was issued, or less when a watch's ``poll_timeout`` is shorter
    (the target then gives up a little before the watch's watchdog would
    fire; in manual mode too, so a hung actor never blocks ``step()``).
    ``timeout=None`` on a watch with ``poll_timeout=None`` waits forever.

    - **Slow actor.** A call that misses its deadline raises
      :class:`ActorTimeoutError` (a :class:`TimeoutError`; the monitor's
      ``on_error`` decides what follows) and stays outstanding: it is never
      issued twice. Until it answers, each ``stats()`` checks it without
      waiting and raises again; once it has answered, the next ``stats()``
      returns that answer, and the one after issues a new call.
    - **Dead actor.** Raises :class:`ActorUnreachableError` naming the
      actor's class and id. Point the target at a replacement actor with
      ``target.handle = new_actor`` (or unwatch it and watch the new one).
    - **Failing method.** The actor's own exception is raised as Ray raises
      it (an instance of the original exception type).

    Args:
        handle: a Ray actor handle (what ``ActorClass.remote(...)`` returns).
        method: the actor method returning the snapshot (default ``"stats"``).
        timeout: seconds a call may take before :class:`ActorTimeoutError`
            (``None``: the watch's ``poll_timeout`` decides).

    Raises:
        TypeError: ``handle`` is not a Ray actor handle, or its actor has no
            such method.
        ValueError: ``timeout`` is not a positive number of seconds.

    Typical use, with Ray running::

        collector = Collector.remote()
        monitor.watch(collector)  # watch name "collector"
        monitor.watch(RayTarget(buffer, method="metrics", timeout=2.0))

    Examples:
        >>> RayTarget(object())
        Traceback (most recent call last):
        ...
        TypeError: RayTarget needs a Ray actor handle (what ActorClass.remote() returns), got object.
    """

    def __init__(
        self, handle: Any, method: str = "stats", timeout: float | None = None
    ) -> None:
        _check_handle(handle)
        if timeout is not None and not (timeout > 0 and math.isfinite(timeout)):
            raise ValueError(
                f"timeout must be a positive number of seconds or None, got {timeout!r}."
            )
        import ray

        self._ray: Any = ray
        self._method = method
        self._timeout = timeout
        _check_method(handle, method)
        self._handle = handle
        # The tightest bound asked for by the watches of this target.
        self._watch_bound: float | None = None
        self._lock = threading.Lock()
        self._pending: Any = None
        self._issued_at = 0.0
        self._deadline: float | None = None

    @classmethod
    def for_watch(cls, target: Any, poll_timeout: float | None) -> RayTarget:
        """Return the :class:`RayTarget` that a watch with ``poll_timeout`` polls for ``target``.

        ``target`` is a Ray actor handle (wrapped in a new :class:`RayTarget`)
        or a :class:`RayTarget` (returned itself). Either way its calls are
        made to give up before a watchdog with ``poll_timeout`` would fire.
        :meth:`rlpulse.LoggerMonitor.watch` calls this for such targets.

        >>> RayTarget.for_watch(object(), 5.0)
        Traceback (most recent call last):
        ...
        TypeError: RayTarget needs a Ray actor handle (what ActorClass.remote() returns), got object.
        """
        ray_target = target if isinstance(target, RayTarget) else cls(target)
        ray_target.bound_by(poll_timeout)
        return ray_target

    def bound_by(self, poll_timeout: float | None) -> None:
        """Make every call give up before a watchdog with ``poll_timeout`` fires.

        The call's deadline becomes at most ``poll_timeout`` less the
        watchdog's margin (:func:`rlpulse.runtime.supervision.call_budget`:
        a quarter of it, at most one second). The tightest of all bounds
        given, and of ``timeout``, applies. ``None`` adds no bound.
        """
        if poll_timeout is None:
            return
        if not (poll_timeout > 0 and math.isfinite(poll_timeout)):
            raise ValueError(
                "poll_timeout must be a positive number of seconds or None, got "
                f"{poll_timeout!r}."
            )
        bound = call_budget(poll_timeout)
        with self._lock:
            if self._watch_bound is None or bound < self._watch_bound:
                self._watch_bound = bound

    @property
    def timeout(self) -> float | None:
        """Seconds a call may take: ``timeout``, or less when bounded by a watch."""
        bounds = [b for b in (self._timeout, self._watch_bound) if b is not None]
        return min(bounds, default=None)

    @property
    def method(self) -> str:
        """The actor method called for each snapshot."""
        return self._method

    @property
    def handle(self) -> Any:
        """The actor handle called; assign a replacement actor's handle to recover from a dead one.

        Assigning forgets a call still outstanding on the previous actor.
        """
        return self._handle

    @handle.setter
    def handle(self, handle: Any) -> None:
        _check_handle(handle)
        _check_method(handle, self._method)
        with self._lock:
            self._handle = handle
            self._pending = None
            self._deadline = None

    @property
    def actor_class(self) -> str:
        """The class name of the actor behind the handle."""
        return _actor_class(self._handle)

    def stats(self, **kwargs: Any) -> Any:
        """Return the actor's snapshot: one remote call, answered within the deadline.

        Keyword arguments are passed to the remote method. A call that
        misses its deadline raises :class:`ActorTimeoutError` and stays
        outstanding (see the class documentation); a dead actor raises
        :class:`ActorUnreachableError`.
        """
        ray = self._ray
        with self._lock:
            handle = self._handle
            pending = self._pending
            earlier = pending is not None
            if pending is None:
                pending = getattr(handle, self._method).remote(**kwargs)
                self._pending = pending
                self._issued_at = time.monotonic()
                timeout = self.timeout
                self._deadline = None if timeout is None else self._issued_at + timeout
            deadline = self._deadline
            issued_at = self._issued_at
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            result = ray.get(pending, timeout=wait)
        except ray.exceptions.GetTimeoutError:
            waited = time.monotonic() - issued_at
            raise ActorTimeoutError(
                f"{_describe(handle)}: {self._method}() has not answered for "
                f"{waited:.1f}s (timeout {self.timeout}s). The call stays outstanding "
                "and is not issued again; its answer is used once it arrives."
                if earlier
                else f"{_describe(handle)}: {self._method}() did not answer within "
                f"{self.timeout}s. The call stays outstanding and is not issued "
                "again; its answer is used once it arrives."
            ) from None
        except ray.exceptions.RayActorError as error:
            self._settle(pending)
            state = (
                "died"
                if isinstance(error, ray.exceptions.ActorDiedError)
                else "is unavailable"
            )
            raise ActorUnreachableError(
                f"{_describe(handle)} {state}: {_reason(error)} Watch a replacement "
                "actor (or assign its handle to RayTarget.handle) to resume."
            ) from error
        except BaseException:
            self._settle(pending)
            raise
        self._settle(pending)
        return result

    def _settle(self, call: Any) -> None:
        with self._lock:
            if self._pending is call:
                self._pending = None
                self._deadline = None

    def __repr__(self) -> str:
        return (
            f"RayTarget({_describe(self._handle)}, method={self._method!r}, "
            f"timeout={self.timeout})"
        )


def _is_actor_handle(target: Any) -> bool:
    kind = type(target)
    return kind.__module__ == "ray.actor" and kind.__name__ == "ActorHandle"


def _check_handle(handle: Any) -> None:
    if not _is_actor_handle(handle):
        raise TypeError(
            "RayTarget needs a Ray actor handle (what ActorClass.remote() returns), "
            f"got {type(handle).__name__}."
        )


def _check_method(handle: Any, method: str) -> None:
    try:
        getattr(handle, method)
    except AttributeError:
        raise TypeError(
            f"Cannot watch Ray actor {_actor_class(handle)} "
            f"({type(handle).__name__}): its class has no {method}() method. Give "
            "the actor a stats() method returning a mapping of scalars, or name "
            "the one it has: RayTarget(handle, method=...)."
        ) from None


def _actor_class(handle: Any) -> str:
    descriptor = getattr(handle, "_ray_actor_creation_function_descriptor", None)
    name = getattr(descriptor, "class_name", None)
    return name if isinstance(name, str) and name else "Actor"


def _describe(handle: Any) -> str:
    actor_id = getattr(handle, "_actor_id", None)
    hex_id = actor_id.hex() if actor_id is not None else "?"
    return f"Ray actor {_actor_class(handle)} (id {hex_id})"


def _reason(error: BaseException) -> str:
    # Ray's message spans several lines (class, id, pid, ...); its last one
    # says why.
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


def polled_remotely(target: Any, poll_timeout: float | None) -> tuple[Any, str]:
    """Return the :class:`RayTarget` a watch with ``poll_timeout`` polls for ``target``, and its default name.

    The registry entry of Ray actors (:mod:`rlpulse.sources`) calls it for
    a Ray actor handle or a :class:`RayTarget`: one remote call per poll,
    giving up before the watch's watchdog would fire.

    >>> polled_remotely(object(), 5.0)
    Traceback (most recent call last):
    ...
    TypeError: RayTarget needs a Ray actor handle (what ActorClass.remote() returns), got object.
    """
    ray_target = RayTarget.for_watch(target, poll_timeout)
    return ray_target, ray_target.actor_class.lower()
