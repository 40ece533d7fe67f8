"""Metric names (``rlpulse.naming``): a counter's rate name, instance segments as labels; the module's docstring examples test the rest (``pytest src/rlpulse/naming.py``)."""

from __future__ import annotations

import re

from rlpulse.naming import RATE_NAMES, labelled, rate_name
from rlpulse.sources import SharedCounters

# What Prometheus accepts as a label name (and OpenTelemetry as an attribute key).
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def test_rate_names_follow_torchrl() -> None:
    assert RATE_NAMES["write_count"] == "writes_per_second"
    assert rate_name("sample_calls") == "samples_per_second"
    assert rate_name("episodes") == "episodes_per_second"


def test_every_worker_of_shared_counters_is_one_metric_labelled_by_worker() -> None:
    with SharedCounters(3, counters=("frames",), gauges=("queue",)) as counters:
        for index in range(3):
            counters.worker(index).inc("frames", index + 1)
            counters.worker(index).heartbeat()
        names = [name for name in counters.stats() if "/" in name]

    served = {labelled(name) for name in names}

    assert {(entry.metric, entry.labels) for entry in served} == {
        (metric, (("worker", str(index)),))
        for metric in ("frames", "queue", "heartbeat_age_s")
        for index in range(3)
    }


def test_a_child_process_is_labelled_by_its_pid() -> None:
    assert labelled("child_4242/rss_bytes") == ("rss_bytes", (("pid", "4242"),))


def test_a_gpu_and_a_nested_instance_of_a_target_s_own_are_labelled_by_their_word() -> (
    None
):
    assert labelled("gpu_1/memory_percent") == ("memory_percent", (("gpu", "1"),))
    assert labelled("actors/env_12/steps") == ("actors/steps", (("env", "12"),))


def test_the_metric_s_own_key_and_segments_that_are_no_instances_stay_in_its_name() -> (
    None
):
    for metric in ("worker_frames", "p_99", "tree/cpu_percent", "side/learner_2"):
        assert labelled(metric) == (metric, ())
    assert labelled("worker_x/frames") == ("worker_x/frames", ())


def test_one_instance_named_in_either_order_is_one_series() -> None:
    # Served as two series of one label set, they would make the scrape one
    # Prometheus rejects (a duplicate sample).
    assert labelled("gpu_0/worker_1/x") == labelled("worker_1/gpu_0/x")
    assert labelled("worker_1/gpu_0/x").labels == (("gpu", "0"), ("worker", "1"))


def test_an_instance_segment_never_takes_a_label_the_series_has_already() -> None:
    assert labelled("watch_1/frames") == ("watch_1/frames", ())
    assert labelled("le_3/x") == ("le_3/x", ())
    assert labelled("worker_0/worker_1/x") == ("worker_1/x", (("worker", "0"),))


def test_every_label_an_instance_takes_is_a_valid_label_name() -> None:
    for metric in ("a_b_7/x", "Env2_0/x", "child_1/y", "gpu_0/z"):
        for label, number in labelled(metric).labels:
            assert LABEL_NAME.fullmatch(label), metric
            assert not label.startswith("__")
            assert number.isdigit()
