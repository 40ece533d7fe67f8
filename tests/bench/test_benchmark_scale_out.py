"""The scale-out benchmark works: tiny runs of its four parts, a real collector included, and the section it renders.

Far too short to mean anything as measurements; they only prove that
``python -m benchmarks --only scale_out`` will not crash, checks what it
measured, and stays bounded.
"""

from __future__ import annotations

import pytest
from benchmarks import SECTIONS
from benchmarks.scale_out import (
    COLLECTOR_WORKERS,
    WIDE_STATS_KEYS,
    WIDE_STATS_WORKERS,
    IncrementResult,
    Results,
    Settings,
    SnapshotResult,
    SystemResult,
    measure_increments,
    measure_shared_stats,
    measure_snapshots,
    measure_system,
    missed_budgets,
    render,
    table,
)

pytest.importorskip("torchrl.collectors")

TINY = Settings(
    increment_rounds=2,
    increments=1_000,
    stats_rounds=2,
    stats_calls=3,
    collector_batches=2,
    frames_per_batch=20,
    system_rounds=1,
    system_calls=3,
)


def _quiet(line: str) -> None:
    pass


@pytest.fixture(scope="module")
def snapshots() -> SnapshotResult:
    return measure_snapshots(TINY, report=_quiet)


def test_the_section_is_registered() -> None:
    assert "scale_out" in SECTIONS
    assert SECTIONS["scale_out"] == "benchmarks.scale_out"


def test_the_increment_benchmark_times_both_loops_in_every_round() -> None:
    result = measure_increments(TINY, report=_quiet)
    assert len(result.plain_ns) == len(result.inc_ns) == TINY.increment_rounds
    assert all(cost > 0 for cost in result.plain_ns + result.inc_ns)


def test_the_stats_benchmark_times_every_round_over_sixty_four_workers() -> None:
    rounds = measure_shared_stats(TINY, report=_quiet)
    assert len(rounds) == TINY.stats_rounds
    assert all(cost > 0 for cost in rounds)


def test_the_stats_benchmark_times_every_round_over_256_workers_of_16_keys() -> None:
    lines: list[str] = []
    rounds = measure_shared_stats(
        TINY, report=lines.append, workers=WIDE_STATS_WORKERS, keys=WIDE_STATS_KEYS
    )
    assert len(rounds) == TINY.stats_rounds
    assert all(cost > 0 for cost in rounds)
    assert lines[-1].endswith("per stats() of 256 workers x 16 keys")


@pytest.mark.timeout(180)
def test_the_snapshot_benchmark_times_both_views_after_every_batch(
    snapshots: SnapshotResult,
) -> None:
    assert len(snapshots.shared_us) == len(snapshots.torchrl_us) == 2
    assert all(latency > 0 for latency in snapshots.shared_us + snapshots.torchrl_us)


@pytest.mark.timeout(180)
def test_a_collector_run_past_its_deadline_is_stopped_and_reported() -> None:
    hurried = Settings(
        collector_batches=1_000, frames_per_batch=20, collector_deadline_s=0.2
    )
    with pytest.raises(TimeoutError, match="overran its deadline"):
        measure_snapshots(hurried, report=_quiet)


def test_the_system_benchmark_times_every_call() -> None:
    pytest.importorskip("psutil")
    result = measure_system(TINY, report=_quiet)
    assert len(result.cpu_us) == len(result.wall_us) == 3
    assert all(cost > 0 for cost in result.wall_us)


@pytest.mark.timeout(180)
def test_the_section_renders_five_budgeted_rows_and_the_latency_table(
    snapshots: SnapshotResult,
) -> None:
    pytest.importorskip("psutil")
    results = Results(
        increments=measure_increments(TINY, report=_quiet),
        shared_stats_us=measure_shared_stats(TINY, report=_quiet),
        wide_stats_us=measure_shared_stats(
            TINY, report=_quiet, workers=WIDE_STATS_WORKERS, keys=WIDE_STATS_KEYS
        ),
        snapshots=snapshots,
        system=measure_system(TINY, report=_quiet),
    )
    markdown = render(results, TINY)
    assert markdown.startswith("## Scale-out")
    budget_rows = [line for line in markdown.splitlines() if line.startswith("| (")]
    assert [row[:5] for row in budget_rows] == [
        "| (a)",
        "| (b)",
        "| (b)",
        "| (c)",
        "| (d)",
    ]
    assert all(row.endswith(("| pass |", "| **OVER BUDGET** |")) for row in budget_rows)
    assert '| TorchRL `collector.stats(workers="both")`, from the loop | 2 |' in (
        markdown
    )
    assert f"{COLLECTOR_WORKERS} CartPole workers" in markdown


def test_missed_budgets_are_reported_over_budget_and_met_ones_pass() -> None:
    results = Results(
        increments=IncrementResult((30.0,), (120.0,), (10.0,)),
        shared_stats_us=(150.0,),
        wide_stats_us=(900.0,),
        snapshots=SnapshotResult((10.0,), (500.0,), ()),
        system=SystemResult(cpu_us=(200.0,), wall_us=(250.0,), gpus=1),
    )
    rows = [line for line in table(results).splitlines() if line.startswith("| (")]
    verdicts = [row.rsplit(" | ", 1)[1] for row in rows]
    assert verdicts == [
        "**OVER BUDGET** |",
        "**OVER BUDGET** |",
        "pass |",
        "pass |",
        "pass |",
    ]
    missed = missed_budgets(results)
    assert len(missed) == 2
    assert "4.00x, budget <= 3.0x" in missed[0]
    assert "150.0 us, budget <= 100 us" in missed[1]


def test_a_stats_over_256_workers_slower_than_a_millisecond_is_over_budget() -> None:
    results = Results(
        increments=IncrementResult((30.0,), (60.0,), (10.0,)),
        shared_stats_us=(50.0,),
        wide_stats_us=(1500.0,),
        snapshots=SnapshotResult((10.0,), (500.0,), ()),
        system=SystemResult(cpu_us=(200.0,), wall_us=(250.0,), gpus=1),
    )
    assert (
        "| (b) `SharedCounters.stats()`, 256 workers x 16 keys | 1,500.0 us "
        "| <= 1,000 us | **OVER BUDGET** |"
    ) in table(results)
    assert missed_budgets(results) == [
        "(b) `SharedCounters.stats()`, 256 workers x 16 keys: 1,500.0 us, "
        "budget <= 1,000 us"
    ]
