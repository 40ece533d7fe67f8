from collections.abc import Callable

class Writer:
    def inc(self, key: str, n: float = 1.0) -> None: ...
    def set(self, key: str, value: float) -> None: ...
    def heartbeat(self) -> None: ...
    def _bind(
        self,
        view: memoryview[float],
        counters: dict[str, int],
        gauges: dict[str, int],
        heartbeat: int,
        clock: Callable[[], float],
    ) -> None: ...
