"""The bottleneck verdict's rules, hysteresis and words (rlpulse.verdict).

What a bottleneck watch reads each window and tells: tests/watch/test_bottleneck.py.
"""

from __future__ import annotations

import pytest

from rlpulse.verdict import (
    Bound,
    Hysteresis,
    Reading,
    Window,
    describe,
    describe_metrics,
    judge,
    measure,
)

P, B, C = Bound.PRODUCER, Bound.BALANCED, Bound.CONSUMER

# (case, window, expected bound or None for unknown, expected speed-up or None)
RULES = [
    # Stage timing: a synchronous loop (the producer busy while the consumer waits).
    (
        "sync: the learner waits 63%",
        Window(30, consumer_busy=0.37, consumer_wait=0.63),
        P,
        1 / 0.37,
    ),
    (
        "sync: the learner busy 80%",
        Window(30, consumer_busy=0.8, consumer_wait=0.2),
        C,
        1 / 0.2,
    ),
    (
        "sync: within 15%",
        Window(30, consumer_busy=0.52, consumer_wait=0.48),
        B,
        1 / 0.48,
    ),
    # Stage timing: both sides timed (a thread or process each).
    ("async: the learner waits", Window(30, 1.0, 0.0, 0.4, 0.6), P, 1 / 0.4),
    ("async: the collector waits", Window(30, 0.5, 0.5, 1.0, 0.0), C, 2.0),
    ("async: neither waits", Window(30, 0.95, 0.05, 1.0, 0.0), B, 1 / 0.95),
    (
        "async: only waits recorded",
        Window(30, producer_wait=0.5, consumer_wait=0.0),
        C,
        2.0,
    ),
    # Replay ratio against its target (Reverb's rate limiter).
    (
        "ratio below target",
        Window(30, replay_ratio=4.0, replay_ratio_target=8.0),
        C,
        2.0,
    ),
    (
        "ratio above target",
        Window(30, replay_ratio=16.0, replay_ratio_target=8.0),
        P,
        2.0,
    ),
    (
        "ratio on target",
        Window(30, replay_ratio=8.5, replay_ratio_target=8.0),
        B,
        8.5 / 8,
    ),
    (
        "ratio decides where both are busy",
        Window(30, 1.0, 0.0, 1.0, 0.0, 4.0, 8.0),
        C,
        2.0,
    ),
    (
        "ratio held on target, the learner waiting",
        Window(30, 1.0, 0.0, 0.1, 0.9, 8.0, 8.0),
        P,
        1 / 0.1,
    ),
    (
        "ratio held on target, the collector waiting",
        Window(30, 0.4, 0.6, 1.0, 0.0, 8.0, 8.0),
        C,
        1 / 0.4,
    ),
    (
        "ratio on target, both busy",
        Window(30, 1.0, 0.0, 0.95, 0.05, 8.0, 8.0),
        B,
        1.0,
    ),
    ("a ratio without a target", Window(30, replay_ratio=4.0), None, None),
    # Neither side waits beside a sampled buffer: they run apart, and the
    # ratio's target alone can say which is too slow.
    (
        "apart: the learner slow, no target",
        Window(30, 0.93, 0.07, 0.99, 0.01, replay_ratio=0.16),
        None,
        None,
    ),
    (
        "apart: the collector slow, no target",
        Window(30, 0.99, 0.01, 0.96, 0.04, replay_ratio=125.0),
        None,
        None,
    ),
    (
        "apart: the learner below target",
        Window(30, 0.93, 0.07, 0.99, 0.01, 0.16, 1.0),
        C,
        1 / 0.16,
    ),
    # A bounded queue (RLlib).
    ("queue full", Window(30, fill=1.0), C, None),
    ("queue dropping", Window(30, fill=0.5, dropped=3.0), C, None),
    (
        "queue empty, learner waiting",
        Window(30, consumer_wait=0.6, fill=0.0),
        P,
        1 / 0.4,
    ),
    ("queue half full", Window(30, fill=0.5), None, None),
    (
        "a learner barely started bounds no speed-up",
        Window(30, 1.0, 0.0, 0.000_007, 0.999_993),
        P,
        None,
    ),
    ("a learner busy 1 % of the window", Window(30, 1.0, 0.0, 0.01, 0.99), P, 100.0),
    (
        "a sampled buffer's fill is no queue",
        Window(30, replay_ratio=8, fill=1.0),
        None,
        None,
    ),
    (
        "stage timing over the full queue",
        Window(30, 0.95, 0.05, 1.0, 0.0, fill=1.0),
        B,
        1 / 0.95,
    ),
    # Samples drawn and no frame: the consumer starved.
    (
        "samples drawn and no frame arrived",
        Window(1, replay_ratio_target=1.0, samples=4000.0, frames=0.0),
        P,
        None,
    ),
    (
        "a starved learner's full buffer is no queue",
        Window(1, replay_ratio_target=1.0, fill=1.0, samples=4000.0, frames=0.0),
        P,
        None,
    ),
    (
        "samples drawn and no frame, without a target",
        Window(1, samples=4000.0, frames=0.0),
        None,
        None,
    ),
    # Unknown: missing or disagreeing signals, never a guess.
    (
        "no sample drawn and no frame",
        Window(1, replay_ratio_target=1.0, samples=0.0, frames=0.0),
        None,
        None,
    ),
    (
        "frames and no sample drawn",
        Window(1, replay_ratio=0.0, replay_ratio_target=1.0, samples=0.0, frames=800.0),
        None,
        None,
    ),
    ("nothing reported", Window(30), None, None),
    ("nobody busy", Window(30, 0.0, 0.0, 0.0, 0.0), None, None),
    ("ratio and timing disagree", Window(30, 1.0, 0.0, 0.3, 0.7, 4.0, 8.0), None, None),
    ("queue and timing disagree", Window(30, 1.0, 0.0, 0.3, 0.7, fill=1.0), None, None),
]


@pytest.mark.parametrize(
    ("window", "bound", "speedup"),
    [case[1:] for case in RULES],
    ids=[case[0] for case in RULES],
)
def test_each_rule_gives_its_verdict_and_speedup(
    window: Window, bound: Bound | None, speedup: float | None
) -> None:
    verdict = judge(window, "collector", "learner")
    assert verdict.bound == bound
    assert verdict.speedup == (None if speedup is None else pytest.approx(speedup))


def test_a_window_shorter_than_the_minimum_is_unknown() -> None:
    window = Window(0.5, consumer_busy=0.37, consumer_wait=0.63)
    assert judge(window, minimum_s=15.0).bound is None
    assert judge(window, minimum_s=15.0).rule == "window too short"


def test_hysteresis_announces_a_verdict_only_once_it_held_for_two_windows() -> None:
    held = Hysteresis(hold=2)
    windows = [C, C, P, C, P, P, None, B, None, B]
    announced = [held.update(bound) for bound in windows]
    assert announced == [False, True, False, False, False, True] + [False] * 4
    assert held.current is P  # B never held two windows in a row


def test_hysteresis_refuses_a_hold_of_no_windows() -> None:
    with pytest.raises(ValueError, match="hold must be a whole number"):
        Hysteresis(hold=0)


def test_measure_takes_shares_of_the_window_and_the_replay_ratio() -> None:
    before = Reading(
        0.0,
        {"busy_s": 0.0, "wait_s": 0.0, "frames": 0.0, "policy_version": 3.0},
        {"busy_s": 0.0, "wait_s": 0.0, "policy_version": 5.0},
        {"samples": 0.0, "size": 50.0, "capacity": 100.0, "dropped": 1.0},
    )
    after = Reading(
        10.0,
        {"busy_s": 9.0, "wait_s": 1.0, "frames": 1000.0, "policy_version": 3.0},
        {"busy_s": 4.0, "wait_s": 6.0, "policy_version": 7.0},
        {"samples": 4000.0, "size": 75.0, "capacity": 100.0, "dropped": 4.0},
    )
    window = measure(before, after, target_ratio=8.0)
    assert window == Window(
        10.0, 0.9, 0.1, 0.4, 0.6, 4.0, 8.0, 0.75, 0.25, 3.0, 4.0, 4000.0, 1000.0
    )


def test_a_learner_that_draws_samples_while_no_frame_arrives_is_collector_bound() -> (
    None
):
    window = measure(
        Reading(0.0, {"frames": 1000.0}, {"samples_returned": 5000.0}),
        Reading(1.0, {"frames": 1000.0}, {"samples_returned": 9000.0}),
        target_ratio=1.0,
    )
    verdict = judge(window, "collector", "learner")
    assert verdict.bound is Bound.PRODUCER
    assert describe(verdict) == (
        "collector-bound: the learner drew 4000 samples and no frame arrived over "
        "the last 1 s; a faster learner gains nothing, only a faster collector helps"
    )


def test_a_starved_window_logs_its_counts_not_an_infinite_ratio() -> None:
    window = Window(1.0, replay_ratio_target=1.0, samples=4000.0, frames=0.0)
    logged = judge(window, "collector", "learner").metrics()
    assert "replay_ratio" not in logged
    assert "speedup" not in logged
    assert (logged["samples_drawn"], logged["frames_produced"]) == (4000.0, 0.0)
    assert logged["bound"] == -1.0


def test_a_window_in_which_neither_side_moved_is_unknown_and_says_so() -> None:
    window = measure(
        Reading(0.0, {"frames": 1000.0}, {"samples_returned": 5000.0}),
        Reading(1.0, {"frames": 1000.0}, {"samples_returned": 5000.0}),
        target_ratio=1.0,
    )
    assert describe(judge(window, "collector", "learner")) == (
        "unknown: no frame arrived and the learner drew no samples over the last 1 s"
    )


def test_a_window_of_frames_and_no_sample_drawn_is_unknown_and_says_so() -> None:
    window = measure(
        Reading(0.0, {"frames": 1000.0}, {"samples_returned": 5000.0}),
        Reading(1.0, {"frames": 1800.0}, {"samples_returned": 5000.0}),
        target_ratio=1.0,
    )
    assert describe(judge(window, "collector", "learner")) == (
        "unknown: the learner drew no samples while 800 frames arrived over the "
        "last 1 s (not started, or in a step longer than the window)"
    )


def test_a_ratio_without_a_target_says_the_target_is_missing() -> None:
    window = Window(30.0, replay_ratio=8.3, samples=830.0, frames=100.0)
    assert describe(judge(window, "collector", "learner")) == (
        "unknown: the learner drew 8.3 samples per frame over the last 30 s, and no "
        "target ratio to judge that by (bottleneck(target_ratio=...))"
    )


def test_two_sides_that_never_wait_beside_a_sampled_buffer_say_they_run_apart() -> None:
    # A learner drawing as fast as it can, slower than the collector: both busy.
    window = Window(3.0, 0.93, 0.07, 0.99, 0.01, replay_ratio=0.16)
    assert describe(judge(window, "actor", "learner")) == (
        "unknown: the learner drew 0.16 samples per frame over the last 3 s while "
        "neither side waited for the other (the actor busy 93%, the learner 99%), "
        "and no target ratio to judge that by (bottleneck(target_ratio=...))"
    )


def test_a_target_with_no_samples_nor_frames_says_which_counters_it_reads() -> None:
    # A learner counting its samples under another name: nothing to rate.
    window = Window(3.0, replay_ratio_target=16.0)
    assert describe(judge(window, "actor", "learner")) == (
        "unknown: no stage timing, replay ratio or queue figures over the last 3 s "
        "(record busy_s and wait_s; for the target ratio, count samples or "
        "samples_returned in the learner's or the buffer's stats and frames in the "
        "actor's, or write_count in the buffer's: docs/finding-the-bottleneck.md)"
    )


def test_a_bound_without_a_speedup_says_which_side_helps() -> None:
    window = Window(30.0, 1.0, 0.0, 0.000_007, 0.999_993)
    sentence = describe(judge(window, "collector", "learner"))
    assert sentence.endswith(
        "; a faster learner gains nothing, only a faster collector helps"
    )


def test_a_balanced_window_within_5_percent_says_one_side_alone_gains_nothing() -> None:
    window = Window(30.0, replay_ratio=8.0, replay_ratio_target=8.0)
    assert describe(judge(window, "collector", "learner")).endswith(
        "; speeding up one side alone gains nothing"
    )


def test_a_full_queue_says_how_full_at_the_window_end() -> None:
    sentence = describe(judge(Window(30.0, fill=0.97), "collector", "learner"))
    assert sentence.startswith(
        "learner-bound: the queue was 97% full at the end of the last 30 s;"
    )


def test_rules_that_disagree_say_what_each_said() -> None:
    window = Window(30, 1.0, 0.0, 0.3, 0.7, 4.0, 8.0)
    assert describe(judge(window, "collector", "learner")) == (
        "unknown: the replay ratio says learner-bound and the stage timing says "
        "collector-bound over the last 30 s"
    )


def test_several_workers_summed_give_shares_of_all_their_time() -> None:
    # Four workers over 10 s: 40 s recorded, 30 of them busy.
    before = Reading(0.0, {"busy_s": 0.0, "wait_s": 0.0}, {})
    after = Reading(10.0, {"busy_s": 30.0, "wait_s": 10.0}, {})
    window = measure(before, after)
    assert (window.producer_busy, window.producer_wait) == (0.75, 0.25)


def test_the_sentence_names_the_sides_and_the_gain() -> None:
    verdict = judge(
        Window(30, consumer_busy=0.37, consumer_wait=0.63), "collector", "learner"
    )
    assert describe(verdict) == (
        "collector-bound: the learner waited 63% of the last 30 s for data; a faster "
        "learner gains nothing, a faster collector up to 2.7x before the learner limits"
    )


@pytest.mark.parametrize(
    "window", [case[1] for case in RULES], ids=[case[0] for case in RULES]
)
def test_the_logged_metrics_give_the_same_sentence(window: Window) -> None:
    verdict = judge(window, "collector", "learner")
    assert describe_metrics(verdict.metrics()) == describe(verdict)


def test_a_window_logged_as_too_short_reads_back_as_too_short() -> None:
    verdict = judge(
        Window(1.0, consumer_busy=0.4, consumer_wait=0.6), "c", "l", minimum_s=5
    )
    sentence = describe_metrics(verdict.metrics())
    assert sentence == "unknown: a window of 1 s is too short to judge"
