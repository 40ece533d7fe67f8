"""The top_follow benchmark works: a tiny real run of a writer and a follower process, and the section it renders.

Far too short to mean anything as a measurement; it only proves that
``python -m benchmarks --only top_follow`` will not crash and reports its
budgets.
"""

from __future__ import annotations

import pytest
from benchmarks import SECTIONS
from benchmarks.top_follow import BUDGETS, FollowResult, Settings, measure, render

TINY = Settings(rounds=1, window_s=1.5, paced_rate=200, interval=0.25)


@pytest.mark.timeout(120)
def test_the_follower_reads_what_the_paced_writer_stores_and_the_writer_is_timed_both_ways() -> (
    None
):
    result = measure(TINY)

    assert len(result.top_cpu) == len(result.alone) == len(result.followed) == 1
    assert len(result.alone_call_s) == len(result.followed_call_s) == 1
    assert result.frames[0] >= 3
    assert result.records[0] > 0
    assert result.alone[0] > 0
    assert result.followed[0] > 0


def test_the_section_states_each_budget_and_its_verdict() -> None:
    result = FollowResult([0.02], [6], [6000], [1000.0], [998.0], [0.0001], [0.00011])

    text = render(result, Settings())

    assert text.startswith("## Following a store: what `rlpulse top` costs")
    for row in (
        "| top's CPU, share of one core | | 2.0 % | | < 10 % | pass |",
        "| writer, payloads/s | 1,000 | 998 | 0.998 | >= 0.99 | pass |",
        "| writer, median µs per store call | 100 | 110 | 1.10 | < 1.25 | pass |",
    ):
        assert row in text
    assert all(budget.passes(result) for budget in BUDGETS)
    assert "top_follow" in SECTIONS
