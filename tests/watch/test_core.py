"""The poll logic of one watch, driven with explicit times (no sleeping)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from rlpulse import Every
from rlpulse.watch import Watch, WatchSpec


def make_watch(schedule: Any = None, **kwargs: Any) -> Watch:
    return Watch(WatchSpec("w", provider=dict, schedule=schedule, **kwargs))


def poll(watch: Watch, raw: dict[str, Any], now: float) -> dict[str, float] | None:
    """One poll whose payload, if any, is delivered."""
    return watch.poll(raw, now)


def test_rates_are_deltas_over_elapsed_time_since_the_baseline() -> None:
    watch = make_watch()
    poll(watch, {"frames": 100, "batches": 1}, now=10.0)
    payload = poll(watch, {"frames": 400, "batches": 4}, now=12.0)
    assert payload == {
        "w/frames": 400.0,
        "w/batches": 4.0,
        "w/frames_per_second": 150.0,
        "w/batches_per_second": 1.5,
    }


def test_no_rates_when_no_time_elapsed() -> None:
    watch = make_watch()
    poll(watch, {"frames": 1}, now=5.0)
    assert poll(watch, {"frames": 2}, now=5.0) == {"w/frames": 2.0}


def test_explicit_rate_keys_replace_the_known_counters() -> None:
    watch = make_watch(rate_keys=("episodes", "missing"))
    poll(watch, {"frames": 0, "episodes": 2}, now=0.0)
    payload = poll(watch, {"frames": 10, "episodes": 6}, now=2.0)
    assert payload == {
        "w/frames": 10.0,
        "w/episodes": 6.0,
        "w/episodes_per_second": 2.0,
    }


def test_a_failed_delivery_keeps_the_previous_baseline() -> None:
    watch = make_watch()
    poll(watch, {"frames": 0}, now=0.0)
    assert watch.evaluate({"frames": 50}, 1.0, force=False) is not None  # not committed
    payload = poll(watch, {"frames": 100}, now=2.0)
    assert payload is not None
    assert payload["w/frames_per_second"] == 50.0


def test_a_composite_schedule_logs_on_counter_thresholds() -> None:
    watch = make_watch(Every.counter("frames", 100) | Every.seconds(60))
    assert poll(watch, {"frames": 0}, now=0.0) is not None  # log_on_start
    assert poll(watch, {"frames": 99}, now=1.0) is None
    assert poll(watch, {"frames": 100}, now=2.0) is not None
    assert poll(watch, {"frames": 150}, now=3.0) is None
    assert poll(watch, {"frames": 420}, now=4.0) is not None  # several thresholds: once
    assert poll(watch, {"frames": 499}, now=5.0) is None
    assert (
        poll(watch, {"frames": 500}, now=6.0) is not None
    )  # thresholds stay multiples


def test_a_composite_schedule_logs_at_least_every_interval_seconds() -> None:
    watch = make_watch(Every.counter("frames", 1000) | Every.seconds(10))
    poll(watch, {"frames": 0}, now=0.0)
    assert poll(watch, {"frames": 5}, now=9.0) is None
    assert poll(watch, {"frames": 6}, now=10.0) is not None


def test_composite_seconds_count_from_the_last_log_whatever_caused_it() -> None:
    watch = make_watch(Every.counter("frames", 100) | Every.seconds(10))
    poll(watch, {"frames": 0}, now=0.0)
    assert poll(watch, {"frames": 100}, now=8.0) is not None  # counter-caused log
    assert poll(watch, {"frames": 110}, now=12.0) is None  # only 4 s since that log
    assert poll(watch, {"frames": 120}, now=18.0) is not None


def test_a_composite_schedule_with_one_counter_steps_on_that_counter() -> None:
    watch = make_watch(Every.seconds(5) | Every.counter("write_count", 10))
    logged = watch.evaluate({"write_count": 37}, 0.0, force=False)
    assert logged is not None
    assert logged.step == 37


def test_a_composite_schedule_with_two_counters_has_no_default_step() -> None:
    watch = make_watch(Every.counter("frames", 10) | Every.counter("batches", 1))
    logged = watch.evaluate({"frames": 3, "batches": 1}, 0.0, force=False)
    assert logged is not None
    assert logged.step is None
    assert watch.step_key is None


def test_each_counter_part_keeps_its_own_thresholds() -> None:
    watch = make_watch(Every.counter("frames", 100) | Every.counter("batches", 5))
    poll(watch, {"frames": 0, "batches": 0}, now=0.0)
    assert poll(watch, {"frames": 50, "batches": 4}, now=1.0) is None
    assert poll(watch, {"frames": 60, "batches": 5}, now=2.0) is not None
    assert poll(watch, {"frames": 100, "batches": 6}, now=3.0) is not None
    assert poll(watch, {"frames": 150, "batches": 9}, now=4.0) is None


def test_a_counter_reset_in_a_composite_re_baselines_and_logs_nothing() -> None:
    watch = make_watch(Every.counter("frames", 100) | Every.seconds(5))
    poll(watch, {"frames": 500}, now=0.0)
    assert poll(watch, {"frames": 20}, now=6.0) is None  # reset wins over seconds
    payload = poll(watch, {"frames": 100}, now=8.0)
    assert payload is not None
    assert payload["w/frames_per_second"] == 40.0  # since the reset at t=6


def test_a_threshold_crossed_as_another_counter_resets_is_logged_at_the_next_poll() -> (
    None
):
    watch = make_watch(Every.counter("frames", 100) | Every.counter("updates", 10))
    poll(watch, {"frames": 50, "updates": 5}, now=0.0)
    # frames reset while updates crossed 10: the reset logs nothing...
    assert poll(watch, {"frames": 0, "updates": 12}, now=1.0) is None
    # ... and the crossing is not lost: updates logs before reaching 20.
    payload = poll(watch, {"frames": 5, "updates": 13}, now=2.0)
    assert payload is not None
    assert payload["w/updates"] == 13.0
    assert poll(watch, {"frames": 6, "updates": 15}, now=3.0) is None


def test_a_time_only_schedule_is_not_due_until_its_interval() -> None:
    watch = make_watch(Every.seconds(5) | Every.seconds(2))
    assert watch.clock_gated
    assert watch.next_due <= 0.0
    poll(watch, {}, now=0.0)
    assert watch.next_due > 1.9
    assert watch.next_due <= 2.0


def test_a_schedule_with_a_counter_is_never_clock_gated() -> None:
    watch = make_watch(Every.seconds(5) | Every.counter("frames", 10))
    assert not watch.clock_gated
    poll(watch, {"frames": 0}, now=0.0)
    assert watch.next_due <= 0.1


def test_a_seconds_schedule_without_log_on_start_is_due_from_its_baseline() -> None:
    watch = make_watch(Every.seconds(5), log_on_start=False)
    assert poll(watch, {"frames": 0}, now=0.0) is None
    assert watch.next_due > 4.0
    assert watch.next_due <= 5.0
    payload = poll(watch, {"frames": 50}, now=5.0)
    assert payload == {"w/frames": 50.0, "w/frames_per_second": 10.0}


def test_forced_polls_are_due_whatever_the_schedule() -> None:
    watch = make_watch(Every.counter("frames", 1000))
    poll(watch, {"frames": 0}, now=0.0)
    payload = watch.poll({"frames": 10}, 2.0, force=True)
    assert payload == {"w/frames": 10.0, "w/frames_per_second": 5.0}


def test_nested_snapshots_are_flattened_in_the_payload() -> None:
    watch = make_watch()
    payload = poll(watch, {"worker_0": {"frames": 3}, "frames": 3}, now=0.0)
    assert payload == {"w/worker_0/frames": 3.0, "w/frames": 3.0}


def test_snapshots_from_non_dict_mappings_are_logged() -> None:
    class Stats(dict[str, Any]):
        pass

    watch = make_watch()
    assert poll(watch, Stats(frames=2), now=0.0) == {"w/frames": 2.0}


def test_a_nested_step_key_gives_the_step() -> None:
    watch = make_watch(Every.counter("worker_0/frames", 10))
    logged = watch.evaluate({"worker_0": {"frames": 12}, "size": 3}, 0.0, force=False)
    assert logged is not None
    assert logged.payload == {"w/worker_0/frames": 12.0, "w/size": 3.0}
    assert logged.step == 12


def test_a_schedule_counts_from_when_its_round_was_due_not_from_when_it_ran() -> None:
    # Every.seconds(1) polled on a 1 s cadence: the round that logged it ran
    # 4 ms late, the next only 0.1 ms late; it is due all the same.
    watch = Watch(WatchSpec("w", provider=dict, schedule=Every.seconds(1)))
    assert (
        watch.poll({"frames": 1}, now=0.004, scheduled=0.0, poll_interval=1.0)
        is not None
    )
    assert watch.next_due <= 1.0001
    payload = watch.poll({"frames": 3}, now=1.0001)
    # Rates still count from when it ran.
    assert payload is not None
    assert payload["w/frames_per_second"] == pytest.approx(2 / 0.9961)


def test_a_round_that_overran_its_interval_counts_the_schedule_from_the_poll() -> None:
    # The round due at 0.0 reached the watch 2.5 s late: counted from 0.0 it
    # would be due again at once, in the round that follows straight away.
    watch = Watch(WatchSpec("w", provider=dict, schedule=Every.seconds(1)))
    assert watch.poll({"frames": 1}, now=2.5, scheduled=0.0) is not None
    assert watch.next_due > 2.5001
    assert watch.next_due <= 3.5


def test_a_schedule_shorter_than_the_poll_interval_is_due_at_every_round() -> None:
    # Every.seconds(0.1) polled every 0.2 s, reached 5 ms into its round:
    # the next round, at 0.2 s, finds it due.
    watch = Watch(WatchSpec("w", provider=dict, schedule=Every.seconds(0.1)))
    assert (
        watch.poll({"frames": 1}, now=0.005, scheduled=0.0, poll_interval=0.2)
        is not None
    )
    assert watch.next_due <= 0.2


def timed_poll(
    watch: Watch, now: float, scheduled: float, poll_interval: float
) -> bool:
    """One poll by the polling thread's round due at ``scheduled``, reaching the watch at ``now``; whether it logged."""
    if watch.next_due > now:  # not due: the round skips it
        return False
    payload = watch.poll(
        {"frames": now}, now, scheduled=scheduled, poll_interval=poll_interval
    )
    return payload is not None


def test_a_round_that_reached_the_watch_late_does_not_push_the_next_log_later() -> None:
    # Every.seconds(5) due at 5.0, reached 0.7 s late (a slow call earlier in
    # the round): the next is due at 10.0 all the same, not 10.7.
    watch = Watch(WatchSpec("w", provider=dict, schedule=Every.seconds(5)))
    assert timed_poll(watch, now=0.001, scheduled=0.0, poll_interval=1.0)
    assert not timed_poll(watch, now=4.999, scheduled=4.0, poll_interval=1.0)
    assert timed_poll(watch, now=5.7, scheduled=5.0, poll_interval=1.0)
    assert watch.next_due == 10.0


def test_a_round_late_by_several_intervals_logs_once_and_keeps_the_cadence() -> None:
    # A stats() call hung for 12 s: one log when it returns, none to catch
    # up, and the next at the cadence's next due time.
    watch = Watch(WatchSpec("w", provider=dict, schedule=Every.seconds(5)))
    assert timed_poll(watch, now=0.0, scheduled=0.0, poll_interval=1.0)
    assert timed_poll(watch, now=17.0, scheduled=5.0, poll_interval=1.0)
    assert watch.next_due == 20.0
    assert not timed_poll(watch, now=18.0, scheduled=18.0, poll_interval=1.0)


@pytest.mark.parametrize(
    ("seconds", "poll_interval"),
    [(1.0, 0.5), (5.0, 1.0), (1.0, 0.3), (0.25, 1.0), (1.0, 1.0), (0.7, 0.2)],
)
def test_a_seconds_schedule_on_the_polling_thread_logs_each_due_time_without_drift(
    seconds: float, poll_interval: float
) -> None:
    # Rounds every poll_interval, each reaching the watch 1-9 ms late: every
    # log is within a poll interval of a due time seconds apart, each due
    # time is logged once at most, and a watch is called only when due.
    watch = Watch(WatchSpec("w", provider=dict, schedule=Every.seconds(seconds)))
    logs, calls = [], 0
    for round_number in range(400):
        scheduled = round_number * poll_interval
        now = scheduled + 0.001 + 0.008 * ((round_number * 7) % 5) / 4
        if watch.next_due <= now:
            calls += 1
            assert timed_poll(watch, now, scheduled, poll_interval)
            logs.append(now)
    assert calls == len(logs)
    # The first log, in the round due at 0.0, sets the due times: k * seconds.
    served = [math.floor(log / seconds + 1e-9) for log in logs]
    for log, k in zip(logs, served, strict=True):
        assert 0 <= log - k * seconds < poll_interval
    assert len(set(served)) == len(served)
    if seconds >= poll_interval:  # then every due time is logged
        assert served == list(range(len(logs)))


def test_a_step_counts_the_seconds_from_its_log_as_in_torchrl() -> None:
    # step() is no round of the polling thread: due seconds after the last log.
    watch = Watch(WatchSpec("w", provider=dict, schedule=Every.seconds(5)))
    assert poll(watch, {"frames": 1}, now=0.0) is not None
    assert poll(watch, {"frames": 2}, now=7.0) is not None
    assert poll(watch, {"frames": 3}, now=11.0) is None
    assert poll(watch, {"frames": 4}, now=12.0) is not None


def test_a_counter_log_restarts_the_seconds_of_a_composite_from_its_round() -> None:
    # Every 10 frames or 5 s: the counter logged in the round due at 3.0,
    # so the seconds are due at 8.0, counted from the last log.
    watch = Watch(
        WatchSpec(
            "w", provider=dict, schedule=Every.counter("frames", 10) | Every.seconds(5)
        )
    )
    for frames, now, scheduled, logged in (
        (0, 0.002, 0.0, True),
        (4, 1.002, 1.0, False),
        (12, 3.002, 3.0, True),
        (13, 7.002, 7.0, False),
        (14, 8.002, 8.0, True),
    ):
        payload = watch.poll(
            {"frames": frames}, now, scheduled=scheduled, poll_interval=1.0
        )
        assert (payload is not None) == logged, now


def test_a_final_snapshot_soon_after_a_log_rates_the_interval_before_too() -> None:
    # Logged at 0 and 1 s, stopped 3 ms later: 100 frames a second, not the
    # 0 of a batch that has not come yet.
    watch = make_watch()
    poll(watch, {"frames": 0}, now=0.0)
    poll(watch, {"frames": 100}, now=1.0)
    payload = watch.poll({"frames": 100}, 1.003, force=True)
    assert payload is not None
    assert payload["w/frames_per_second"] == pytest.approx(100 / 1.003)


def test_a_final_snapshot_long_after_a_log_rates_only_since_it() -> None:
    watch = make_watch()
    poll(watch, {"frames": 0}, now=0.0)
    poll(watch, {"frames": 100}, now=1.0)
    payload = watch.poll({"frames": 160}, 1.6, force=True)
    assert payload is not None
    assert payload["w/frames_per_second"] == pytest.approx(100.0)


def test_a_restarted_watch_starts_afresh_without_a_rate_over_the_stop() -> None:
    watch = make_watch(Every.seconds(5))
    poll(watch, {"frames": 0}, now=0.0)
    poll(watch, {"frames": 500}, now=5.0)
    watch.restart()
    assert watch.next_due <= 100.0
    assert poll(watch, {"frames": 600}, now=100.0) is None  # the new baseline
    payload = poll(watch, {"frames": 1100}, now=105.0)
    assert payload is not None
    assert payload["w/frames_per_second"] == pytest.approx(100.0)


def test_a_fractional_counter_interval_is_due_at_each_multiple_as_in_torchrl() -> None:
    # A counter of seconds trained, logged every 2.5 of them.
    watch = Watch(
        WatchSpec("w", provider=dict, schedule=Every.counter("seconds_trained", 2.5))
    )  # type: ignore[arg-type]
    due = []
    for value in (0.0, 1.0, 2.4, 2.6, 4.9, 5.1, 7.4):
        if watch.poll({"seconds_trained": value}, now=value) is not None:
            due.append(value)
    assert due == [0.0, 2.6, 5.1]
    assert Every.counter("frames", 1e4).interval == 10_000  # type: ignore[arg-type]


def test_a_seconds_schedule_given_a_key_is_a_seconds_schedule_as_in_torchrl() -> None:
    from torchrl.record.loggers.monitoring import Every as TorchRLEvery
    from torchrl.record.loggers.monitoring import LoggerMonitor as TorchRLMonitor

    from rlpulse import LoggerMonitor

    class Source:
        frames = 0

        def stats(self) -> dict[str, int]:
            return {"frames": self.frames}

    class Steps:
        def __init__(self) -> None:
            self.steps: list[int | None] = []

        def log_metrics(self, metrics: Any, step: int | None = None) -> None:
            self.steps.append(step)

    logged = {}
    for name, every, monitor_type in (
        ("torchrl", TorchRLEvery, TorchRLMonitor),
        ("rlpulse", Every, LoggerMonitor),
    ):
        source, sink = Source(), Steps()
        monitor = monitor_type(sink, background=False)
        monitor.watch(source, name="c", schedule=every("seconds", 5, key="frames"))
        monitor.step()
        for frames in (7, 12, 23):  # multiples of 5 crossed: no matter, in seconds
            source.frames = frames
            monitor.step()
        logged[name] = sink.steps
    assert logged["rlpulse"] == logged["torchrl"] == [None]


def test_each_payload_key_has_the_kind_decided_where_it_was_born() -> None:
    from rlpulse import Tally
    from rlpulse.naming import Kind

    tally = Tally()
    tally.inc("episodes", 2)
    tally.set("epsilon", 0.1)
    tally.observe("loss", 0.5)
    watch = Watch(
        WatchSpec(
            "t",
            provider=tally.stats,
            target=tally,
            schedule=Every.counter("updates", 10),
            rate_keys=("episodes", "updates"),
            aggregate=("mean",),
        )
    )
    tally.inc("updates")
    poll(watch, tally.stats(), now=0.0)
    tally.inc("updates", 10)
    poll(watch, tally.stats(), now=1.0)
    kinds = watch.kinds
    assert kinds["t/episodes"] is Kind.COUNTER  # a rate key
    assert kinds["t/updates"] is Kind.COUNTER  # the schedule's counter
    assert kinds["t/loss_count"] is Kind.COUNTER  # the tally says so
    assert kinds["t/loss_sum"] is Kind.COUNTER
    assert kinds["t/episodes_per_second"] is Kind.RATE
    assert kinds["t/epsilon"] is Kind.GAUGE
    assert kinds["t/loss_p50"] is Kind.GAUGE
    assert kinds["t/epsilon_mean"] is Kind.GAUGE
