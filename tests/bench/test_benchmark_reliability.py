"""The reliability benchmark works: tiny runs of its three cases and the section it renders.

Far too short to mean anything as measurements; they prove that
``python -m benchmarks --only reliability`` will not crash, that each case
puts the monitors in the situation it describes, and that missed goals are
reported.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks.__main__ import main, split_sections
from benchmarks.reliability import (
    DEFAULT_POLL_TIMEOUT,
    DEFAULT_QUEUE_SIZE,
    HungResult,
    MemoryResult,
    MemorySample,
    Settings,
    SinkResult,
    _check_queue_full,
    hung_table,
    measure_hung_provider,
    measure_memory,
    measure_slow_sink,
    memory_table,
    missed_goals,
    sink_table,
)


def _silent(line: str) -> None:
    pass


@pytest.mark.timeout(60)
def test_healthy_watches_keep_logging_on_rlpulse_and_stall_on_torchrl_behind_a_hung_stats() -> (
    None
):
    tiny = Settings(
        duration_s=1.0, poll_interval=0.02, hung_watches=4, poll_timeouts=(0.1,)
    )
    torchrl, ours = measure_hung_provider(tiny, report=_silent)
    # TorchRL's first round logs the two watches before the hung one, then stops.
    assert torchrl.monitor == "TorchRL"
    assert torchrl.delivered <= 2
    assert ours.monitor == "rlpulse"
    assert ours.delivered > 10
    assert ours.timeouts == 1
    assert any("'hung'" in message for message in ours.warnings)


@pytest.mark.timeout(60)
def test_the_fast_sink_gets_rlpulses_payloads_while_torchrls_wait_on_the_slow_one() -> (
    None
):
    tiny = Settings(duration_s=1.0, poll_interval=0.02, sink_watches=2, slow_sink_s=0.5)
    torchrl, ours = measure_slow_sink(tiny, report=_silent)
    # One payload per slow call: at most three in one second.
    assert torchrl.produced <= 3
    assert torchrl.fast_delivered <= torchrl.produced
    assert ours.fast_delivered > 10
    assert ours.slow_calls <= 3


@pytest.mark.timeout(120)
def test_memory_children_sample_both_monitors_with_rlpulses_queue_full() -> None:
    tiny = Settings(
        poll_interval=0.01,
        memory_watches=20,
        memory_duration_s=3.0,
        memory_sample_s=0.5,
        memory_settle_s=2.0,
        progress_every_s=1.0,
    )
    lines: list[str] = []
    torchrl, ours = measure_memory(tiny, report=lines.append)
    assert torchrl.monitor == "TorchRL"
    assert torchrl.end.produced == 1  # blocked in its first sink call
    assert ours.reference.queued == DEFAULT_QUEUE_SIZE
    assert ours.end.dropped > 0
    assert ours.end.elapsed_s >= tiny.memory_duration_s
    assert all(sample.rss > 0 for sample in ours.samples + torchrl.samples)
    assert any("rlpulse at" in line for line in lines)


def test_a_memory_run_whose_queue_never_filled_is_refused() -> None:
    samples = (MemorySample(15.0, 30_000_000, 500, 500, 0),)
    with pytest.raises(RuntimeError, match="held 500 payloads and had dropped 0"):
        _check_queue_full(MemoryResult("rlpulse", samples, 15.0, goal=True))


def test_a_memory_child_that_ended_before_settling_has_no_reference() -> None:
    samples = (MemorySample(1.0, 30_000_000, 500, 500, 0),)
    with pytest.raises(RuntimeError, match="no memory sample 15 s after start"):
        _ = MemoryResult("rlpulse", samples, 15.0, goal=True).reference


def test_memory_growth_is_measured_from_the_first_sample_after_settling_to_the_peak() -> (
    None
):
    samples = (
        MemorySample(5.0, 10_000_000, 0, 0, 0),
        MemorySample(15.0, 30_000_000, 1, 1000, 1),
        MemorySample(300.0, 31_200_000, 2, 1000, 2),
        MemorySample(600.0, 30_600_000, 3, 1000, 3),
    )
    result = MemoryResult("rlpulse", samples, 15.0, goal=True)
    assert result.reference.elapsed_s == 15.0
    assert result.peak.elapsed_s == 300.0
    assert result.growth_mb == pytest.approx(1.2)
    assert result.flat


def test_missed_goals_are_reported_over_budget_in_every_table() -> None:
    hung = [HungResult("rlpulse", 1.0, 30.0, 5700.0, 5000, True, 1, ())]
    sinks = [SinkResult("rlpulse", 30.0, 3000.0, 3000, 2000, 30, 0, ())]
    grown = (
        MemorySample(15.0, 30_000_000, 1, 1000, 1),
        MemorySample(600.0, 33_000_000, 2, 1000, 2),
    )
    memory = [MemoryResult("rlpulse", grown, 15.0, goal=True)]
    assert "| >= 95% | **OVER BUDGET** |" in hung_table(hung)
    assert "| >= 95% | **OVER BUDGET** |" in sink_table(sinks)
    assert "| < 5% | **OVER BUDGET** |" in memory_table(memory)
    assert [line[:3] for line in missed_goals(hung, sinks, memory)] == [
        "(a)",
        "(b)",
        "(c)",
    ]


def test_rows_without_a_goal_carry_no_verdict() -> None:
    hung = [
        HungResult("TorchRL", None, 30.0, 5700.0, 10, False, 0, ()),
        HungResult("rlpulse", DEFAULT_POLL_TIMEOUT, 30.0, 5700.0, 10, False, 1, ()),
    ]
    rows = hung_table(hung).splitlines()[2:]
    assert rows[0].endswith("| 0.2% |  |  |")
    assert rows[1].endswith("| for information |  |")
    assert "(default)" in rows[1]
    assert missed_goals(hung, [], []) == []


def test_settings_refuse_what_the_cases_cannot_measure() -> None:
    with pytest.raises(ValueError, match="hung_watches must be at least 2"):
        Settings(hung_watches=1)
    with pytest.raises(ValueError, match="poll_timeouts needs at least one"):
        Settings(poll_timeouts=())
    with pytest.raises(ValueError, match="memory_settle_s must be shorter"):
        Settings(memory_duration_s=5.0, memory_settle_s=5.0)


@pytest.mark.timeout(180)
def test_quick_run_of_the_reliability_section_writes_its_block_and_exits_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "benchmarks.md"
    assert main(["--only", "reliability", "--quick", "--output", str(path)]) == 0
    block = split_sections(path.read_text())["reliability"]
    assert block.startswith("## Reliability")
    assert [line for line in block.splitlines() if line.startswith("### ")] == [
        "### (a) One hung `stats()` among 20 watches",
        "### (b) A slow sink next to a fast one",
        "### (c) Memory while a sink never returns",
    ]
    assert "Rerun with `python -m benchmarks --only reliability`." in block
    printed = capsys.readouterr().out
    assert "reliability (a) TorchRL:" in printed
    assert "reliability (b) rlpulse: fast sink got" in printed
    assert "reliability (c) memory" in printed
