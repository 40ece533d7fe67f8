"""The target of a bottleneck watch (rlpulse.watch.bottleneck): each window, the producer's, consumer's and buffer's providers read and judged.

The rules that judge a window: tests/test_verdict.py.
"""

from __future__ import annotations

import pytest

from rlpulse import LoggerMonitor, Tally
from rlpulse.testing import InMemorySink
from rlpulse.verdict import Bound
from rlpulse.watch.bottleneck import Bottleneck

C = Bound.CONSUMER


def test_the_bottleneck_target_judges_the_window_between_its_calls() -> None:
    learner = {"busy_s": 0.0, "wait_s": 0.0}
    times = iter([0.0, 10.0, 20.0, 30.0])
    said = []
    judged = Bottleneck(
        dict,
        lambda: learner,
        names=("collector", "learner"),
        window=10.0,
        on_change=said.append,
        clock=lambda: next(times),
    )
    assert judged.stats() == {}
    for busy in (8.0, 16.0, 24.0):
        learner.update(busy_s=busy, wait_s=busy / 8)
        assert judged.stats()["bound"] == 1.0
    assert [verdict.bound for verdict in said] == [C]  # once it held two windows


def test_the_bottleneck_watch_logs_gauges_under_its_name() -> None:
    sink = InMemorySink()
    monitor = LoggerMonitor(sink, background=False)
    learner = Tally()
    monitor.watch(Tally(), name="collector")
    monitor.watch(learner, name="learner")
    assert monitor.bottleneck(window=0.01) == "bottleneck"
    monitor.step()
    learner.inc("busy_s", 1.0)
    learner.inc("wait_s", 3.0)
    import time

    time.sleep(0.02)
    monitor.step()
    assert sink.values("bottleneck/bound") == [-1.0]
    assert str(sink.kind("bottleneck/consumer_wait_share")) == "gauge"
    assert sink.values("bottleneck/side/collector") == [-1.0]


def test_a_side_that_restarts_or_records_nothing_in_a_window_is_not_judged() -> None:
    learner = {"busy_s": 0.0, "wait_s": 0.0}
    times = iter([0.0, 10.0, 20.0, 30.0, 40.0])
    judged = Bottleneck(
        dict,
        lambda: learner,
        names=("collector", "learner"),
        window=10.0,
        clock=lambda: next(times),
    )
    judged.stats()
    learner.update(busy_s=9.0, wait_s=1.0)
    assert judged.stats()["bound"] == 1.0
    learner.update(busy_s=0.5, wait_s=0.1)  # restarted: its counters went down
    restarted = judged.stats()
    assert restarted["bound_known"] == 0.0
    assert "consumer_busy_share" not in restarted
    stuck = judged.stats()  # inside one long update: nothing recorded
    assert stuck["bound_known"] == 0.0
    assert "consumer_busy_share" not in stuck


def test_a_figure_left_out_of_one_reading_is_measured_from_its_last_value() -> None:
    learner: dict[str, float] = {"busy_s": 0.0, "wait_s": 0.0}
    times = iter([0.0, 10.0, 20.0, 30.0])
    judged = Bottleneck(
        dict,
        lambda: learner,
        names=("collector", "learner"),
        window=10.0,
        clock=lambda: next(times),
    )
    judged.stats()
    learner.update(busy_s=1.0, wait_s=9.0)
    assert judged.stats()["bound"] == -1.0
    learner.update(busy_s=float("nan"), wait_s=18.0)  # a NaN: left out
    judged.stats()
    learner.update(busy_s=3.0, wait_s=27.0)
    last = judged.stats()
    # From the last value seen (1 s busy, 18 s waiting), not from 0: 2 s
    # busy of the 11 s recorded.
    assert last["consumer_busy_share"] == pytest.approx(2 / 11)
