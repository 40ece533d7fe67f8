"""The sink benchmark works: a tiny run over every sink and the section it renders.

Far too short to mean anything as a measurement; it only proves that
``python -m benchmarks --only sinks`` will not crash and checks its writes.
"""

from __future__ import annotations

import pytest
from benchmarks.sinks import (
    REFERENCE,
    SINKS,
    Settings,
    SinkCase,
    SinkResult,
    measure,
    missed_budgets,
    render,
    table,
)

TINY = Settings(rounds=1, payloads=2, warmup_payloads=1)


# Opening a W&B run and creating an MLflow store take seconds each; the
# quick benchmark run covers them, this test the rest of the machinery.
FAST_SINKS = tuple(
    case for case in SINKS if "Wandb" not in case.label and "MLflow" not in case.label
)


@pytest.mark.timeout(120)
def test_the_sink_benchmark_times_every_sink_and_renders_a_row_for_each() -> None:
    results = measure(TINY, cases=FAST_SINKS, report=lambda line: None)
    assert [result.case for result in results] == list(FAST_SINKS)
    assert all(cost > 0 for result in results for cost in result.round_us)
    markdown = render(results, TINY)
    rows = [
        line
        for line in markdown.splitlines()
        if line.startswith("| rlpulse") or line.startswith("| TorchRL")
    ]
    assert [row.split(" | ")[0] for row in rows] == [
        f"| {case.label}" for case in FAST_SINKS
    ]


def test_a_file_sink_that_stores_fewer_metrics_than_sent_is_refused() -> None:
    sqlite = SINKS[0]
    undercounting = SinkCase(
        "undercounting", sqlite.open, read_back=lambda directory: 0
    )
    with pytest.raises(RuntimeError, match="stored 0 metrics, expected 60"):
        measure(TINY, cases=(undercounting,), report=lambda line: None)


def test_a_sink_missing_its_budget_is_reported_over_budget() -> None:
    by_label = {case.label: case for case in SINKS}
    results = (
        SinkResult(by_label["rlpulse `CSVLogger`"], (50.0,)),
        SinkResult(by_label["rlpulse `SQLiteLogger`"], (10.0,)),
        SinkResult(by_label[REFERENCE], (100.0,)),
    )
    assert "| rlpulse `CSVLogger` | 50.0 | 2.00 | >= 5.0 | **OVER BUDGET** |" in table(
        results
    )
    assert "| rlpulse `SQLiteLogger` | 10.0 | 10.00 | >= 2.5 | pass |" in table(results)
    assert missed_budgets(results) == [
        f"rlpulse `CSVLogger`: 2.00 times cheaper than {REFERENCE}, budget >= 5.0"
    ]
