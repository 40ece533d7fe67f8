"""A monitor's watches by name, in registration order."""

from __future__ import annotations

from collections.abc import Callable

from rlpulse.watch.core import Watch
from rlpulse.watch.spec import WatchSpec

__all__ = ["Watches"]


class Watches:
    """A monitor's watches by name, in registration order.

    :attr:`all` is a tuple, replaced (never changed) at each registration,
    so a polling thread iterating it needs no lock.

    Examples:
        >>> watches = Watches()
        >>> [watches.add(lambda name: Watch(WatchSpec(name, provider=dict)), None, "buffer").name
        ...  for _ in range(2)]
        ['buffer', 'buffer_1']
        >>> watches.remove("missing")
        Traceback (most recent call last):
        ...
        KeyError: "No watch named 'missing'."
    """

    def __init__(self) -> None:
        self._by_name: dict[str, Watch] = {}
        self.all: tuple[Watch, ...] = ()

    def add(
        self,
        new: Callable[[str], Watch],
        name: str | None,
        default: str,
        *,
        check: Callable[[WatchSpec], None] | None = None,
    ) -> Watch:
        """Register ``new(unique name)`` under ``name``, else ``default`` with ``_1``, ``_2``, … appended when taken.

        ``check(spec)`` may refuse the new watch by raising.
        """
        if name is None:
            name, suffix = default, 0
            while name in self._by_name:
                suffix += 1
                name = f"{default}_{suffix}"
        elif name in self._by_name:
            raise ValueError(f"A watch named {name!r} is already registered.")
        watch = new(name)
        if check is not None:
            check(watch.spec)
        self._by_name[name] = watch
        self.all = tuple(self._by_name.values())
        return watch

    def remove(self, name: str) -> Watch:
        """Unregister watch ``name`` and return it; it delivers nothing from now on."""
        watch = self._by_name.pop(name, None)
        if watch is None:
            raise KeyError(f"No watch named {name!r}.")
        self.all = tuple(self._by_name.values())
        watch.active = False
        return watch
