"""The throughput benchmark works: its search, tiny real trials and loops, the CPU part, and the section it renders.

Far too short to mean anything as measurements; they only prove that
``python -m benchmarks --only throughput`` will not crash, refuses what it
did not measure, and reports its budgets.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from benchmarks import SECTIONS
from benchmarks.__main__ import main, split_sections
from benchmarks.sinks import REFERENCE
from benchmarks.throughput import (
    CASES,
    SQLITE,
    CpuResult,
    Results,
    SearchOutcome,
    Settings,
    ThroughputCase,
    Trial,
    measure,
    measure_cpu,
    measure_loop,
    missed_budgets,
    rate_search,
    render,
    run_trial,
    table,
)

pytest.importorskip("torchrl.record.loggers.csv")

TINY = Settings(
    rounds=1,
    warmup_s=0.02,
    window_payloads=20,
    min_window_s=0.05,
    max_window_s=0.5,
    start_interval_s=0.01,
    min_interval_s=0.005,
    bisections=1,
    cpu_s=0.1,
    watches=3,
)


def _quiet(line: str) -> None:
    pass


def test_the_section_is_registered_after_the_sink_cost_section() -> None:
    names = list(SECTIONS)
    assert names.index("throughput") == names.index("sinks") + 1
    assert SECTIONS["throughput"] == "benchmarks.throughput"


def test_the_search_halves_while_trials_pass_then_bisects_and_stops() -> None:
    settings = Settings(start_interval_s=0.04, bisections=2)
    outcome = SearchOutcome()
    assert rate_search(settings, outcome) == 0.04
    outcome.trials.append(Trial(0.04, 2_500.0, 0))
    assert rate_search(settings, outcome) == 0.02
    outcome.trials.append(Trial(0.02, 5_000.0, 0))
    assert rate_search(settings, outcome) == 0.01
    outcome.trials.append(Trial(0.01, 9_000.0, 40))
    assert rate_search(settings, outcome) == pytest.approx(0.02**0.5 * 0.01**0.5)
    outcome.trials.append(Trial(0.0141, 7_000.0, 0))
    assert rate_search(settings, outcome) == pytest.approx((0.0141 * 0.01) ** 0.5)
    outcome.trials.append(Trial(0.0119, 8_000.0, 3))
    assert rate_search(settings, outcome) is None
    assert outcome.sustained == 7_000.0
    assert not outcome.limited


def test_the_search_doubles_the_interval_while_trials_drop() -> None:
    settings = Settings(start_interval_s=0.25, max_interval_s=1.0, bisections=0)
    outcome = SearchOutcome([Trial(0.25, 400.0, 5)])
    assert rate_search(settings, outcome) == 0.5
    outcome.trials.append(Trial(0.5, 200.0, 2))
    assert rate_search(settings, outcome) == 1.0
    outcome.trials.append(Trial(1.0, 100.0, 1))
    assert rate_search(settings, outcome) is None
    assert outcome.sustained == 0.0


def test_the_search_ends_on_the_monitors_limit_when_the_rate_stops_growing() -> None:
    settings = Settings(start_interval_s=0.001, min_interval_s=1e-4)
    outcome = SearchOutcome([Trial(0.001, 60_000.0, 0), Trial(0.0005, 64_000.0, 0)])
    assert rate_search(settings, outcome) is None
    assert outcome.limited
    assert outcome.sustained == 64_000.0
    floor = SearchOutcome([Trial(0.0001, 90_000.0, 0)])
    assert rate_search(settings, floor) is None
    assert floor.limited


@pytest.mark.timeout(60)
def test_a_trial_into_sqlite_drops_nothing_and_stores_every_payload() -> None:
    trial = run_trial(CASES[0], 0.01, TINY)
    assert trial.passed
    assert trial.rate > 0
    assert trial.longest_call_s > 0


@pytest.mark.timeout(60)
def test_a_trial_into_torchrls_csv_logger_counts_its_files_lines() -> None:
    reference = next(case for case in CASES if case.label == REFERENCE)
    trial = run_trial(reference, 0.01, TINY)
    assert trial.passed
    assert trial.rate > 0


@pytest.mark.timeout(60)
def test_a_trial_whose_sink_stored_less_than_was_logged_is_refused() -> None:
    undercounting = ThroughputCase(CASES[0].sink, stored=lambda directory: 0)
    with pytest.raises(RuntimeError, match="stored 0 payloads, expected"):
        run_trial(undercounting, 0.01, TINY)


class _SlowSink:
    # A sink that takes a long time over every batch, so its queue overflows.
    def __init__(self, directory: Path, stack: Any) -> None:
        self.batches = 0

    def log_metrics(self, metrics: Any, step: int | None = None) -> None:
        time.sleep(0.3)

    def log_batch(self, payloads: Any) -> None:
        time.sleep(0.3)


@pytest.mark.timeout(60)
def test_a_trial_whose_sink_falls_behind_reports_its_drops_and_longest_call() -> None:
    slow = ThroughputCase(replace(CASES[0].sink, open=_SlowSink), stored=None)
    trial = run_trial(slow, 0.0005, replace(TINY, watches=20, min_window_s=0.4))
    assert not trial.passed
    assert trial.dropped > 0
    assert trial.longest_call_s >= 0.3


@pytest.mark.timeout(60)
def test_a_loop_into_every_sink_is_timed_and_checked() -> None:
    for case in CASES:
        assert measure_loop(case, TINY) > 0, case.label


@pytest.mark.timeout(60)
def test_the_cpu_part_times_the_monitor_and_the_idle_process() -> None:
    monitor_s, idle_s, window_s, rate = measure_cpu(TINY)
    assert monitor_s > 0
    assert idle_s >= 0
    assert window_s >= TINY.cpu_s
    assert rate > 0


@pytest.mark.timeout(120)
def test_a_tiny_measurement_renders_both_tables_with_verdicts() -> None:
    results = measure(TINY, cases=(CASES[0], CASES[-1]), report=_quiet)
    markdown = render(results, TINY)
    assert markdown.startswith("## Sustained sink throughput")
    budget_rows = [
        line
        for line in markdown.splitlines()
        if line.endswith(("pass |", "BUDGET** |"))
    ]
    assert len(budget_rows) == 2
    sink_rows = [
        line
        for line in markdown.splitlines()
        if line.startswith(("| rlpulse `SQLiteLogger` |", "| TorchRL `CSVLogger` |"))
    ]
    assert len(sink_rows) == 2


def _results(
    sqlite_rate: float, reference_rate: float, cpu_s: float, torchrl_monitor: float
) -> Results:
    return Results(
        {SQLITE: (50_000.0,), REFERENCE: (reference_rate,)},
        {
            SQLITE: (
                SearchOutcome(
                    [Trial(0.02, sqlite_rate, 0), Trial(0.01, 2 * sqlite_rate, 9)]
                ),
            ),
            REFERENCE: (SearchOutcome([Trial(0.01, 9_000.0, 0)], limited=True),),
        },
        CpuResult((cpu_s,), (0.0,), (1.0,), (1_000.0,)),
        torchrl_monitor_rates=(torchrl_monitor,),
    )


def test_budgets_are_reported_over_budget_and_met_ones_pass() -> None:
    over = _results(5_000.0, 1_000.0, cpu_s=0.04, torchrl_monitor=4_000.0)
    assert (
        f"| {SQLITE} behind rlpulse's monitor / TorchRL `CSVLogger` behind "
        "TorchRL's monitor, payloads/s | 5,000 / 4,000 = 1.2x | >= 2x | "
        "**OVER BUDGET** |"
    ) in table(over)
    assert len(missed_budgets(over)) == 2
    assert "4.00%, budget < 3%" in missed_budgets(over)[1]
    met = _results(20_000.0, 1_000.0, cpu_s=0.02, torchrl_monitor=4_000.0)
    assert "= 5.0x | >= 2x | pass |" in table(met)
    assert missed_budgets(met) == []


def test_a_sink_whose_search_ended_on_the_monitors_limit_is_marked_as_a_bound() -> None:
    rows = table(_results(5_000.0, 1_000.0, 0.01, 4_000.0)).splitlines()
    reference_row = next(row for row in rows if row.startswith(f"| {REFERENCE} |"))
    assert "| >= 9,000 | >= 9.0x |" in reference_row
    sqlite_row = next(row for row in rows if row.startswith(f"| {SQLITE} |"))
    assert "| 5,000 | 5.0x |" in sqlite_row


@pytest.mark.timeout(120)
def test_quick_run_of_the_section_writes_its_block_and_exits_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "benchmarks.md"
    assert main(["--only", "throughput", "--quick", "--output", str(path)]) == 0
    blocks = split_sections(path.read_text())
    assert list(blocks) == ["throughput"]
    assert blocks["throughput"].startswith("## Sustained sink throughput")
    printed = capsys.readouterr().out
    assert "throughput (a) round 1/1:" in printed
    assert "throughput (b) rlpulse `SQLiteLogger`: interval" in printed


def _with_longest_calls(sqlite_s: float, others_s: float) -> Results:
    def outcome(longest_s: float) -> SearchOutcome:
        return SearchOutcome(
            [Trial(0.02, 5_000.0, 0, longest_s), Trial(0.01, 9_000.0, 3, longest_s)]
        )

    return Results(
        {SQLITE: (50_000.0,), REFERENCE: (30_000.0,)},
        {SQLITE: (outcome(sqlite_s),), REFERENCE: (outcome(others_s),)},
        CpuResult((0.01,), (0.0,), (1.0,), (1_000.0,)),
    )


def test_sqlites_checkpoint_stalls_are_named_only_when_its_calls_stand_out() -> None:
    stalled = " ".join(render(_with_longest_calls(0.15, 0.005), TINY).split())
    assert "that call took up to 150 ms here" in stalled
    assert "against 5.0 ms for the other sinks" in stalled
    even = " ".join(render(_with_longest_calls(0.02, 0.005), TINY).split())
    assert "checkpoints" not in even
    assert "(d) TorchRL's" not in even  # not measured here


def test_the_reference_of_the_budget_is_torchrls_monitor_in_the_same_rounds() -> None:
    text = " ".join(
        render(_results(9_000.0, 1_000.0, 0.01, torchrl_monitor=3_000.0), TINY).split()
    )
    assert "delivered 3,000 payloads a second into its `CSVLogger`" in text
    assert "to sustain 2 times that in the same round" in text
