"""The poll logic of one watch (rlpulse.watch.core), driven with explicit times (no sleeping): rates, steps, payloads, kinds.

Then, over random counter paths on a manual monitor, that no rate is ever
negative. When the schedule makes a poll due: tests/watch/test_schedule.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlpulse import Every, LoggerMonitor
from rlpulse.testing import InMemorySink
from rlpulse.watch import Watch, WatchSpec
from tests.support import PROPERTIES, Counters, make_watch, poll


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


def test_a_known_counter_stays_a_counter_when_rate_keys_leave_it_unrated() -> None:
    from rlpulse.naming import Kind

    # rate_keys chooses what is rated, not what counts: a collector's frames
    # and a buffer's write_count are counters all the same.
    watch = Watch(WatchSpec("c", provider=dict, rate_keys=("updates",)))
    poll(watch, {"frames": 1000, "updates": 7, "write_count": 3, "size": 5}, now=0.0)

    assert watch.kinds == {
        "c/frames": Kind.COUNTER,
        "c/updates": Kind.COUNTER,
        "c/write_count": Kind.COUNTER,
        "c/size": Kind.GAUGE,
    }


COUNTERS = ("frames", "batches", "write_count", "episodes")


counter_snapshots = st.lists(
    st.fixed_dictionaries({}, optional={key: st.integers(0, 1000) for key in COUNTERS}),
    min_size=1,
    max_size=30,
)


rate_key_choices = st.none() | st.lists(
    st.sampled_from([*COUNTERS, "absent"]), unique=True
).map(tuple)


@PROPERTIES
@given(
    snapshots=counter_snapshots,
    rate_keys=rate_key_choices,
    scheduled=st.booleans(),
    log_on_start=st.booleans(),
)
def test_no_rate_is_ever_negative(
    snapshots: list[dict[str, int]],
    rate_keys: tuple[str, ...] | None,
    scheduled: bool,
    log_on_start: bool,
) -> None:
    sink = InMemorySink()
    source = Counters()
    monitor = LoggerMonitor(sink, background=False)
    monitor.watch(
        source,
        name="w",
        schedule=Every.counter("frames", 7) if scheduled else None,
        rate_keys=rate_keys,
        log_on_start=log_on_start,
    )
    for snapshot in snapshots:
        source.values = snapshot
        monitor.step()
    monitor.stop()
    rates = [
        value
        for payload, _ in sink.calls
        for key, value in payload.items()
        if key.endswith("_per_second")
    ]
    assert all(rate >= 0 for rate in rates)
