"""A monitor's watches by name (rlpulse.watch.registry): registering and removing them while a polling thread reads them.

How a watch is named (its class's name, ``_1``, ``_2``, …; an explicit
name taken) is part of TorchRL's contract: tests/test_compat_torchrl.py
runs it against both monitors.
"""

from __future__ import annotations

import threading

import pytest

from rlpulse import LoggerMonitor
from rlpulse.testing import InMemorySink
from tests.support import Counter


@pytest.mark.timeout(30)
def test_watch_and_step_from_other_threads_while_polling_in_background() -> None:
    sink = InMemorySink()
    monitor = LoggerMonitor(sink, poll_interval=0.001)
    errors: list[BaseException] = []

    def churn(index: int) -> None:
        try:
            for round_ in range(50):
                name = monitor.watch(Counter(), name=f"t{index}_{round_}")
                monitor.step()
                monitor.unwatch(name)
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    with monitor:
        threads = [threading.Thread(target=churn, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []
    assert monitor.stats()["watches"] == 0
    assert sink.calls
