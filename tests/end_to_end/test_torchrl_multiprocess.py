"""A real TorchRL MultiSyncCollector with two CartPole workers (SPEC 2.11).

The aggregate view is watched in the background; the per-worker view,
which travels over the collector's control pipes, is refused by a
background monitor and polled with manual ``step()`` from the loop.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rlpulse import Every, LoggerMonitor
from rlpulse.testing import InMemorySink

torchrl_collectors = pytest.importorskip("torchrl.collectors")
torchrl_envs = pytest.importorskip("torchrl.envs")

pytestmark = pytest.mark.timeout(180)

FRAMES_PER_BATCH = 64
TOTAL_FRAMES = 640


def make_env() -> object:
    return torchrl_envs.GymEnv("CartPole-v1")


@pytest.fixture(scope="module")
def collector() -> Iterator[object]:
    collector = torchrl_collectors.MultiSyncCollector(
        [make_env, make_env],
        policy=None,
        frames_per_batch=FRAMES_PER_BATCH,
        total_frames=TOTAL_FRAMES,
    )
    yield collector
    collector.shutdown()


def test_a_started_background_monitor_refuses_the_per_worker_view(
    collector: object,
) -> None:
    monitor = LoggerMonitor(InMemorySink(), poll_interval=0.05)
    with monitor, pytest.raises(ValueError, match="control pipes") as raised:
        monitor.watch(collector, name="collector", stats_kwargs={"workers": "both"})
    message = str(raised.value)
    assert "background=False" in message
    assert "SharedCounters" in message
    assert monitor.stats()["watches"] == 0


def test_start_refuses_a_background_monitor_with_the_per_worker_view(
    collector: object,
) -> None:
    monitor = LoggerMonitor(InMemorySink(), poll_interval=0.05)
    monitor.watch(collector, name="collector", stats_kwargs={"workers": "per_worker"})
    with pytest.raises(ValueError, match="per-worker view"):
        monitor.start()
    assert repr(monitor).endswith("idle)")
    monitor.stop(log_final=False)


def test_the_aggregate_view_in_the_background_and_per_worker_by_hand(
    collector: object,
) -> None:
    background_sink, manual_sink = InMemorySink(), InMemorySink()
    background = LoggerMonitor(background_sink, poll_interval=0.05)
    background.watch(
        collector, name="collector", schedule=Every.counter("frames", FRAMES_PER_BATCH)
    )
    manual = LoggerMonitor(manual_sink, background=False)
    manual.watch(collector, name="collector", stats_kwargs={"workers": "both"})
    with background:
        for _ in collector:  # type: ignore[attr-defined]
            manual.step()
    manual.stop()
    frames = [metrics["collector/frames"] for metrics, _ in background_sink.calls]
    assert frames[-1] == TOTAL_FRAMES
    assert frames == sorted(frames)
    last, _ = manual_sink.calls[-1]
    assert last["collector/workers_alive"] == 2.0
    assert last["collector/worker_0/frames"] + last["collector/worker_1/frames"] == (
        TOTAL_FRAMES
    )
    rates = [
        metrics["collector/frames_per_second"]
        for metrics, _ in background_sink.calls
        if "collector/frames_per_second" in metrics
    ]
    assert rates
    # Every scheduled snapshot saw frames move; the final one, forced at
    # stop(), may come after the last batch and see none.
    assert all(rate > 0 for rate in rates[:-1])
    assert rates[-1] >= 0
