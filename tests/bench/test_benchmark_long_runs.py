"""The long-run benchmark works: a short run through today's code, its table, and the budgets it checks.

Far too short to mean anything as a measurement; it proves that
``python -m benchmarks --only long_runs`` will not crash.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from benchmarks.long_runs import (
    Measurement,
    Settings,
    measure,
    missed_budgets,
    render,
    write_run,
)

from rlpulse.read.summary import summarize_file

TINY = Settings(watches=2, payloads=50, baseline=False)


def test_the_generated_run_is_an_rlpulse_store_of_the_records_asked_for(
    tmp_path: Path,
) -> None:
    path = tmp_path / "long.sqlite"
    write_run(path, TINY)

    summary = summarize_file(path)

    assert summary.records == TINY.records == 600
    frames = next(m for m in summary.metrics if m.name == "w00/frames")
    assert frames.mean_rate == pytest.approx(1000.0)
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA user_version").fetchone()[0] >= 2


@pytest.mark.timeout(180)
def test_the_long_run_benchmark_measures_show_and_plot_and_renders_a_row_each() -> None:
    results = measure(TINY)

    assert [(r.command, r.records) for r in results] == [
        ("show", 600),
        ("show", 144),
        ("show", 240),
        ("plot", 600),
        ("plot", 144),
        ("plot", 240),
    ]
    assert all(r.seconds > 0 and r.peak_mib > 0 for r in results)
    markdown = render(results, TINY)
    assert markdown.startswith("## Long runs")
    assert markdown.count("| `rlpulse ") == 6


def test_a_show_of_a_million_records_over_half_a_second_is_over_budget() -> None:
    slow = [
        Measurement("today", "show", 1_000_200, 0.7, 40.0),
        Measurement("today", "plot", 1_000_200, 1.5, 120.0),
        Measurement("before", "show", 1_000_200, 9.0, 400.0),
    ]

    assert missed_budgets(slow) == ["show of 1M records, s: 0.70 (budget < 0.5)"]
