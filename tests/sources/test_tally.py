"""Tally: counters, gauges and windowed observations pushed by the hot path, pulled by stats()."""

from __future__ import annotations

import math
import queue
import sys
import threading
import time
import tracemalloc
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import rlpulse
from rlpulse import Every, JSONLLogger, LoggerMonitor, Tally
from rlpulse.naming import Kind


def test_counters_add_up_from_zero() -> None:
    tally = Tally()
    tally.inc("updates")
    tally.inc("updates")
    tally.inc("frames", 200)
    tally.inc("frames", 56)
    assert tally.stats() == {"updates": 2, "frames": 256}


def test_a_gauge_reports_its_latest_value_as_a_float() -> None:
    tally = Tally()
    tally.set("learning_rate", 1)
    tally.set("learning_rate", 0.5)
    assert tally.stats() == {"learning_rate": 0.5}
    assert type(tally.stats()["learning_rate"]) is float


def test_an_observed_key_reports_count_sum_mean_min_max_and_last() -> None:
    tally = Tally()
    for value in (3.0, 1.0, 2.0):
        tally.observe("loss", value)
    assert tally.stats() == {
        "loss_count": 3,
        "loss_sum": 6.0,
        "loss_mean": 2.0,
        "loss_min": 1.0,
        "loss_max": 3.0,
        "loss_last": 2.0,
    }


def test_the_summary_covers_only_the_most_recent_window_while_the_count_is_cumulative() -> (
    None
):
    tally = Tally(window=4)
    for value in range(1, 11):
        tally.observe("episode_return", value)
    stats = tally.stats()
    assert stats["episode_return_count"] == 10
    assert stats["episode_return_min"] == 7.0
    assert stats["episode_return_max"] == 10.0
    assert stats["episode_return_mean"] == 8.5
    assert stats["episode_return_last"] == 10.0


def test_a_window_of_one_reports_the_last_observation_only() -> None:
    tally = Tally(window=1)
    tally.observe("latency_s", 0.5)
    tally.observe("latency_s", 0.25)
    stats = tally.stats()
    assert (
        stats["latency_s_mean"],
        stats["latency_s_min"],
        stats["latency_s_max"],
    ) == (
        0.25,
        0.25,
        0.25,
    )
    assert stats["latency_s_count"] == 2


def test_tensors_are_read_into_floats_when_recorded() -> None:
    tally = Tally()
    loss = torch.tensor(0.75) * 2
    tally.observe("loss", loss)
    tally.set("grad_norm", torch.tensor(3.0))
    stats = tally.stats()
    assert stats["loss_last"] == 1.5
    assert type(stats["loss_last"]) is float
    assert type(stats["grad_norm"]) is float


def test_a_loss_that_requires_grad_is_read_without_a_warning() -> None:
    tally = Tally()
    weight = torch.tensor(0.5, requires_grad=True)
    loss = weight * 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # float() of it warns
        tally.observe("loss", loss)
        tally.set("loss_now", loss)
    stats = tally.stats()
    assert stats["loss_last"] == stats["loss_now"] == 1.5
    with pytest.raises(TypeError, match="must be a real number"):
        tally.observe("loss", torch.ones(2))


def test_stats_returns_a_fresh_snapshot_each_call() -> None:
    tally = Tally()
    tally.inc("updates")
    first = tally.stats()
    first["updates"] = 100
    tally.inc("updates")
    assert tally.stats()["updates"] == 2


def test_a_counter_name_cannot_become_a_gauge() -> None:
    tally = Tally()
    tally.inc("episodes")
    with pytest.raises(ValueError, match=r"'episodes'.*already belongs to the counter"):
        tally.set("episodes", 3)


def test_a_name_an_observed_key_produces_cannot_be_a_counter() -> None:
    tally = Tally()
    tally.observe("loss", 1.0)
    with pytest.raises(ValueError, match=r"'loss_mean'.*observed key 'loss'"):
        tally.inc("loss_mean")


def test_observing_a_key_whose_entries_are_taken_is_refused() -> None:
    tally = Tally()
    tally.set("loss_max", 2.0)
    with pytest.raises(ValueError, match="cannot be used as a observed key"):
        tally.observe("loss", 1.0)


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (lambda tally: tally.inc("frames", "ten"), r"Tally.inc\('frames', n='ten'\)"),
        (lambda tally: tally.set("queue", "full"), r"Tally.set\('queue', 'full'\)"),
        (lambda tally: tally.observe("loss", None), r"Tally.observe\('loss', None\)"),
        # A number written out is no number: float() would take it.
        (lambda tally: tally.inc("frames", "1"), r"Tally.inc\('frames', n='1'\)"),
        (lambda tally: tally.set("queue", "0.5"), r"Tally.set\('queue', '0.5'\)"),
        (lambda tally: tally.observe("loss", b"1"), r"Tally.observe\('loss', b'1'\)"),
    ],
    ids=["inc", "set", "observe", "inc text", "set text", "observe bytes"],
)
def test_a_value_that_is_not_a_number_is_refused_with_the_call_named(
    write: object, message: str
) -> None:
    tally = Tally()
    with pytest.raises(TypeError, match=message):
        write(tally)  # type: ignore[operator]
    assert tally.stats() == {}


def test_a_bad_increment_of_an_existing_counter_leaves_it_unchanged() -> None:
    tally = Tally()
    tally.inc("frames", 10)
    with pytest.raises(TypeError, match="n must be a number"):
        tally.inc("frames", [1])  # type: ignore[arg-type]
    assert tally.stats() == {"frames": 10}


def test_a_refused_first_write_does_not_reserve_the_name() -> None:
    tally = Tally()
    with pytest.raises(TypeError):
        tally.set("queue", "full")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tally.inc("frames", "ten")  # type: ignore[arg-type]
    tally.set("queue", 2)
    tally.inc("frames", 10)
    assert tally.stats() == {"queue": 2.0, "frames": 10}


@pytest.mark.parametrize("key", ["", 7, None])
def test_keys_must_be_non_empty_strings(key: object) -> None:
    with pytest.raises(TypeError, match="non-empty strings"):
        Tally().observe(key, 1.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("window", [0, -3])
def test_a_window_below_one_is_refused(window: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Tally(window=window)


@pytest.mark.parametrize("window", [2.5, True, "100"])
def test_a_window_that_is_not_an_int_is_refused(window: object) -> None:
    with pytest.raises(TypeError, match="must be an int"):
        Tally(window=window)  # type: ignore[arg-type]


def test_window_and_repr_describe_the_tally() -> None:
    tally = Tally(window=8)
    tally.inc("updates")
    tally.observe("loss", 1.0)
    assert tally.window == 8
    assert repr(tally) == "Tally(window=8, counters=1, gauges=0, observed=1)"


@pytest.mark.timeout(60)
def test_readers_see_consistent_snapshots_while_one_thread_writes() -> None:
    tally = Tally(window=16)
    writes = 20_000
    finished = threading.Event()
    failures: list[BaseException] = []

    def write() -> None:
        for index in range(writes):
            tally.inc("steps")
            tally.observe("value", float(index))
            # New keys appear while readers copy the containers.
            if index % 1000 == 0:
                tally.set(f"gauge_{index}", index)
                tally.observe(f"observed_{index}", index)
        finished.set()

    def read() -> None:
        previous_steps = 0
        try:
            while not finished.is_set():
                stats = tally.stats()
                steps = stats.get("steps", 0)
                assert steps >= previous_steps
                previous_steps = steps
                if "value_count" in stats:
                    assert (
                        stats["value_min"] <= stats["value_mean"] <= stats["value_max"]
                    )
                    assert stats["value_max"] - stats["value_min"] <= 16
        except BaseException as error:
            failures.append(error)

    readers = [threading.Thread(target=read) for _ in range(3)]
    writer = threading.Thread(target=write)
    for thread in (*readers, writer):
        thread.start()
    for thread in (writer, *readers):
        thread.join(timeout=50)
    assert failures == []
    stats = tally.stats()
    assert stats["steps"] == writes
    assert stats["value_count"] == writes
    assert stats["value_last"] == writes - 1
    assert stats["value_min"] == writes - 16
    histogram = tally.histograms()["value"]
    assert histogram.count == writes
    assert histogram.sum == stats["value_sum"] == sum(range(writes))


def test_readers_of_histograms_and_stats_together_see_each_observation_once() -> None:
    tally = Tally()
    writes = 30_000
    finished = threading.Event()

    def write() -> None:
        for index in range(writes):
            tally.observe("latency_s", 1.0 + index % 7)
            if index % 5000 == 0:
                tally.observe("latency_s", math.nan)
        finished.set()

    def read() -> None:
        while not finished.is_set():
            tally.histograms()
            tally.stats()

    threads = [threading.Thread(target=read) for _ in range(2)]
    threads.append(threading.Thread(target=write))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=50)
    stats = tally.stats()
    assert stats["latency_s_count"] == tally.histograms()["latency_s"].count == writes
    assert stats["latency_s_nonfinite"] == writes // 5000
    assert stats["latency_s_sum"] == sum(1.0 + index % 7 for index in range(writes))


def test_a_tally_nobody_reads_keeps_its_memory_bounded() -> None:
    tally = Tally()
    tally.observe("loss", 0.5)
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for index in range(200_000):
            tally.observe("loss", index / 7)
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # 200,000 floats kept would take over 6 MB.
    assert after - before < 500_000
    assert tally.stats()["loss_count"] == 200_001


def logged_in_one_step(path: Path, name: str, tally: Tally) -> dict[str, float]:
    """What one step() of a monitor watching ``tally`` under ``name`` stores, by metric."""
    with JSONLLogger(path) as sink:
        monitor = LoggerMonitor(sink, background=False)
        monitor.watch(tally, name=name)
        monitor.step()
    return {record.name: record.value for record in rlpulse.read(path)}


def test_a_monitor_logs_the_tally_with_its_window_summaries(tmp_path: Path) -> None:
    tally = Tally()
    tally.inc("updates", 3)
    for episode_return in (10.0, 30.0):
        tally.observe("episode_return", episode_return)
    logged = logged_in_one_step(tmp_path / "metrics.jsonl", "training", tally)
    assert logged["training/updates"] == 3.0
    assert logged["training/episode_return_mean"] == 20.0
    assert logged["training/episode_return_count"] == 2.0


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_observations_are_counted_apart_from_the_window(bad: float) -> None:
    tally = Tally(window=3)
    tally.observe("loss", bad)
    assert tally.stats() == {"loss_count": 0, "loss_sum": 0.0, "loss_nonfinite": 1}
    for value in (0.5, 0.25):
        tally.observe("loss", value)
    tally.observe("loss", bad)
    assert tally.stats() == {
        "loss_count": 2,
        "loss_sum": 0.75,
        "loss_nonfinite": 2,
        "loss_mean": 0.375,
        "loss_min": 0.25,
        "loss_max": 0.5,
        "loss_last": 0.25,
    }


def test_a_diverged_loss_shows_in_the_monitors_logs(tmp_path: Path) -> None:
    tally = Tally()
    tally.observe("loss", 0.5)
    tally.observe("loss", float("nan"))
    logged = logged_in_one_step(tmp_path / "metrics.jsonl", "learner", tally)
    assert logged["learner/loss_nonfinite"] == 1.0
    assert logged["learner/loss_mean"] == 0.5


def test_a_name_a_non_finite_count_would_take_is_refused_as_an_observed_key() -> None:
    tally = Tally()
    tally.inc("loss_nonfinite")
    with pytest.raises(ValueError, match="'loss_nonfinite' already belongs"):
        tally.observe("loss", 1.0)


@pytest.mark.parametrize("value", [float("nan"), float("inf")], ids=["nan", "inf"])
def test_a_non_finite_increment_is_left_out_and_counted(value: float) -> None:
    tally = Tally()
    tally.inc("frames", 10)
    tally.inc("frames", value)
    tally.inc("frames", 5)
    assert tally.stats() == {"frames": 15, "frames_nonfinite": 1}


@pytest.mark.parametrize(
    "value", [-1, -0.5, -float("inf")], ids=["int", "float", "-inf"]
)
def test_a_negative_increment_is_refused_with_what_to_use_instead(value: float) -> None:
    tally = Tally()
    tally.inc("frames", 10)
    with pytest.raises(
        ValueError, match=r"a counter only goes up.*Tally\.set\('frames'"
    ):
        tally.inc("frames", value)
    with pytest.raises(ValueError, match="a counter only goes up"):
        tally.inc("episodes", value)  # a counter not seen yet is not made
    tally.inc("frames", 0)
    assert tally.stats() == {"frames": 10}


def test_a_counter_whose_first_increment_is_nan_starts_at_zero() -> None:
    tally = Tally()
    tally.inc("frames", float("nan"))
    assert tally.stats() == {"frames": 0, "frames_nonfinite": 1}


def test_a_counter_schedule_keeps_firing_after_a_nan_increment() -> None:
    class Discard:
        def log_metrics(self, metrics: Any, step: int | None = None) -> None:
            pass

    tally = Tally()
    monitor = LoggerMonitor(Discard(), background=False)
    monitor.watch(tally, name="t", schedule=Every.counter("frames", 10))
    tally.inc("frames")
    monitor.step()
    tally.inc("frames", float("nan"))
    tally.inc("frames", 12)
    assert "t/frames" in monitor.step()["t"]


def test_time_of_an_async_def_covers_the_whole_await() -> None:
    import asyncio

    tally = Tally()

    @tally.time("fetch_s")
    async def fetch() -> int:
        await asyncio.sleep(0.05)
        return 7

    assert asyncio.run(fetch()) == 7
    stats = tally.stats()
    assert stats["fetch_s_count"] == 1
    assert stats["fetch_s_last"] >= 0.05


def test_time_of_a_generator_function_covers_the_whole_iteration() -> None:
    import time

    tally = Tally()

    @tally.time("batches_s")
    def batches() -> Any:
        for batch in range(3):
            time.sleep(0.02)
            yield batch
        return "done"

    assert list(batches()) == [0, 1, 2]
    stats = tally.stats()
    assert stats["batches_s_count"] == 1
    assert stats["batches_s_last"] >= 0.06
    abandoned = batches()
    next(abandoned)
    abandoned.close()
    assert tally.stats()["batches_s_count"] == 2


def test_time_of_an_async_generator_covers_the_whole_iteration() -> None:
    import asyncio

    tally = Tally()

    @tally.time("stream_s")
    async def stream() -> Any:
        for item in range(3):
            await asyncio.sleep(0.02)
            yield item

    async def consume() -> list[int]:
        return [item async for item in stream()]

    assert asyncio.run(consume()) == [0, 1, 2]
    stats = tally.stats()
    assert stats["stream_s_count"] == 1
    assert stats["stream_s_last"] >= 0.06


@pytest.mark.parametrize("background", [False, True], ids=["manual", "background"])
def test_a_watched_tallys_interval_histograms_reach_rlpulses_sinks(
    background: bool,
) -> None:
    from rlpulse.naming import Payload
    from rlpulse.sinks.base import BaseSink

    class Payloads(BaseSink):
        def __init__(self) -> None:
            super().__init__()
            self.payloads: list[Payload] = []

        def _write_batch(self, payloads: Any) -> None:
            self.payloads.extend(payloads)

    tally, sink = Tally(), Payloads()
    monitor = LoggerMonitor(sink, background=background, poll_interval=0.05)
    monitor.watch(tally, name="learner", schedule=Every.counter("updates", 1))
    tally.inc("updates")
    with monitor:
        for loss in (0.5, 0.25, 0.125):
            tally.observe("loss", loss)
        tally.inc("updates")
        if background:
            deadline = time.monotonic() + 10
            while not any(p.distributions for p in sink.payloads) and (
                time.monotonic() < deadline
            ):
                time.sleep(0.01)
        else:
            monitor.step()
            monitor.step()
    histograms = [
        payload.distributions.get("learner/loss") for payload in sink.payloads
    ]
    counted = [histogram.count for histogram in histograms if histogram is not None]
    # Each interval's observations once: all three in one interval here.
    assert sum(counted) == 3
    last = next(h for h in reversed(histograms) if h is not None)
    assert (last.min, last.max) == (0.125, 0.5)


@pytest.mark.timeout(30)
def test_a_wait_under_way_counts_in_wait_s_before_its_item_comes() -> None:
    tally = Tally()
    release = threading.Event()

    def batches() -> Any:
        release.wait(10)
        yield "batch"

    waited: list[str] = []
    consumer = threading.Thread(target=lambda: waited.extend(tally.waiting(batches())))
    consumer.start()
    try:
        time.sleep(0.3)
        during = tally.stats()["wait_s"]
        time.sleep(0.1)
        later = tally.stats()["wait_s"]
    finally:
        release.set()
        consumer.join()

    assert 0.25 <= during < later
    assert tally.stats()["wait_s"] >= later
    assert waited == ["batch"]


@pytest.mark.timeout(30)
def test_a_wait_that_is_no_iteration_is_timed_as_a_block_under_way_too() -> None:
    tally = Tally()
    batches: queue.Queue[str] = queue.Queue()

    def learner() -> None:
        with tally.waiting():
            batches.get(timeout=10)

    consumer = threading.Thread(target=learner)
    consumer.start()
    try:
        time.sleep(0.3)
        during = tally.stats()["wait_s"]
    finally:
        batches.put("batch")
        consumer.join()

    assert 0.25 <= during <= tally.stats()["wait_s"]
    assert "busy_s" not in tally.stats()
    assert tally.metric_kinds()["wait_s"] is Kind.COUNTER


def test_waiting_for_a_string_is_refused_saying_to_name_the_counter() -> None:
    with pytest.raises(
        TypeError, match=r"waiting\(key='learner_wait_s'\) times a block"
    ):
        Tally().waiting("learner_wait_s")


@pytest.mark.timeout(30)
def test_wait_s_only_grows_while_waits_begin_and_end() -> None:
    tally = Tally()
    stop = threading.Event()

    def consume() -> None:
        for _ in tally.waiting(iter(lambda: time.sleep(0.0005), "never")):
            if stop.is_set():
                return

    consumer = threading.Thread(target=consume)
    consumer.start()
    try:
        readings = [tally.stats()["wait_s"] for _ in range(5000)]
    finally:
        stop.set()
        consumer.join()

    assert readings == sorted(readings)
    assert readings[-1] > 0


@pytest.mark.timeout(30)
def test_a_busy_block_under_way_counts_in_busy_s_before_it_ends() -> None:
    tally = Tally()
    release = threading.Event()

    def update() -> None:
        with tally.busy():
            release.wait(10)

    worker = threading.Thread(target=update)
    worker.start()
    try:
        time.sleep(0.3)
        during = tally.stats()["busy_s"]
        time.sleep(0.1)
        later = tally.stats()["busy_s"]
    finally:
        release.set()
        worker.join()

    assert 0.25 <= during < later
    assert tally.stats()["busy_s"] >= later


@pytest.mark.timeout(30)
def test_busy_s_sums_blocks_under_way_on_several_threads_and_only_grows() -> None:
    tally = Tally()
    stop = threading.Event()

    @tally.busy()
    def step() -> None:
        time.sleep(0.0005)

    def work() -> None:
        while not stop.is_set():
            step()

    workers = [threading.Thread(target=work) for _ in range(3)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    try:
        readings = [tally.stats()["busy_s"] for _ in range(5000)]
        time.sleep(0.2)
    finally:
        stop.set()
        for worker in workers:
            worker.join()
    elapsed = time.perf_counter() - started

    assert readings == sorted(readings)
    # Three threads busy nearly all the time: close to three seconds a second.
    assert (
        1.5 * elapsed < tally.stats()["busy_s"] <= 3 * (time.perf_counter() - started)
    )


def test_a_busy_block_within_another_on_one_thread_counts_its_seconds_once() -> None:
    # A decorated update called inside a busy block: the thread is busy once.
    tally = Tally()

    @tally.busy()
    def update() -> None:
        time.sleep(0.05)

    started = time.perf_counter()
    with tally.busy():
        update()
        with tally.busy():
            time.sleep(0.02)
    elapsed = time.perf_counter() - started

    assert 0.07 <= tally.stats()["busy_s"] <= elapsed


def on_a_thread(work: Callable[[], object]) -> None:
    """Run ``work`` on a thread of its own and wait for it."""
    thread = threading.Thread(target=work)
    thread.start()
    thread.join(10)
    assert not thread.is_alive()


def test_a_busy_block_ended_on_another_thread_counts_its_seconds_once() -> None:
    # A handle entered by the loop and handed to a worker that exits it.
    tally = Tally()
    block = tally.busy()
    started = time.perf_counter()
    on_a_thread(block.__enter__)
    time.sleep(0.05)
    block.__exit__(None, None, None)
    elapsed = time.perf_counter() - started

    ended = tally.stats()["busy_s"]
    time.sleep(0.05)
    # Ended: no longer under way, so it grows no more.
    assert 0.05 <= ended <= elapsed
    assert tally.stats()["busy_s"] == ended


def test_a_busy_generator_iterated_from_two_threads_counts_its_seconds_once() -> None:
    tally = Tally()

    @tally.busy()
    def batches() -> Iterator[int]:
        for batch in range(2):
            time.sleep(0.03)
            yield batch

    iterator = batches()
    started = time.perf_counter()
    on_a_thread(lambda: next(iterator))  # begun on a worker...
    assert list(iterator) == [1]  # ...ended on this thread
    elapsed = time.perf_counter() - started

    ended = tally.stats()["busy_s"]
    time.sleep(0.05)
    assert 0.06 <= ended <= elapsed
    assert tally.stats()["busy_s"] == ended


def test_a_busy_handle_used_on_two_threads_at_once_ends_each_threads_block() -> None:
    tally = Tally()
    shared = tally.busy()
    inside, release = threading.Barrier(2), threading.Event()

    def work() -> None:
        with shared:
            inside.wait(5)
            release.wait(5)

    worker = threading.Thread(target=work)
    worker.start()
    with shared:
        inside.wait(5)
    # This thread's block ended; the worker's goes on, under way.
    during = tally.stats()["busy_s"]
    time.sleep(0.05)
    assert tally.stats()["busy_s"] >= during + 0.04
    release.set()
    worker.join(10)
    ended = tally.stats()["busy_s"]
    time.sleep(0.05)
    assert tally.stats()["busy_s"] == ended


def test_waits_within_a_wait_on_one_thread_count_once() -> None:
    tally = Tally()

    def slow(count: int) -> Iterator[int]:
        for item in range(count):
            time.sleep(0.01)
            yield item

    started = time.perf_counter()
    # The outer iterator's next() runs the inner one's: one wait, not two.
    assert list(tally.waiting(tally.waiting(slow(3)))) == [0, 1, 2]
    elapsed = time.perf_counter() - started

    assert 0.03 <= tally.stats()["wait_s"] <= elapsed


def first_use_of_step_s(
    how: str, tally: Tally, barrier: threading.Barrier, errors: list[Exception]
) -> None:
    barrier.wait()
    try:
        if how == "time":
            with tally.time("step_s"):
                pass
        elif how == "busy":
            with tally.busy("step_s"):
                pass
        else:
            tally.observe("step_s", 0.5)
    except Exception as error:
        errors.append(error)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["time", "busy", "observe"])
def test_threads_first_using_one_key_at_once_all_record(how: str) -> None:
    # Threads of a pool timing one key: the first uses race to create it,
    # which must record every one of them, not refuse the key as taken.
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-7)
    try:
        for _ in range(100):
            tally = Tally()
            threads = 8
            barrier = threading.Barrier(threads)
            errors: list[Exception] = []
            workers = [
                threading.Thread(
                    target=first_use_of_step_s, args=(how, tally, barrier, errors)
                )
                for _ in range(threads)
            ]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
            assert errors == []
            stats = tally.stats()
            if how == "busy":
                assert stats["step_s"] >= 0
            else:
                assert stats["step_s_count"] == threads
    finally:
        sys.setswitchinterval(switch_interval)


def test_inc_takes_a_tensor_or_numpy_number_as_the_python_number_it_holds() -> None:
    # A tensor was kept as given: a counter of shape [1] never reached a
    # sink, and one with requires_grad held its graph, growing with each inc.
    torch = pytest.importorskip("torch")
    numpy = pytest.importorskip("numpy")
    weights = torch.nn.Linear(2, 1)
    loss = weights(torch.ones(2)).pow(2).mean()
    tally = Tally()

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warns of float(a tensor with a graph)
        tally.inc("done", torch.tensor([3.0]))
        tally.inc("frames", torch.tensor(200))
        tally.inc("frames", numpy.int64(5))
        tally.inc("loss_total", loss)
        tally.inc("share", numpy.float32(0.5))

    stats = tally.stats()
    assert stats == {
        "done": 3.0,
        "frames": 205,
        "loss_total": pytest.approx(loss.item()),
        "share": 0.5,
    }
    assert all(type(value) in (int, float) for value in stats.values())
    with pytest.raises(TypeError, match="n must be a number"):
        tally.inc("done", torch.tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="only goes up"):
        tally.inc("done", torch.tensor(-1.0))
