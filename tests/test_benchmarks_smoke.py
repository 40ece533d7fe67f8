"""The benchmark code works: a tiny monitor-overhead run and the document it writes.

These runs are far too short to mean anything as measurements; they only
prove that ``python -m benchmarks`` will not crash and keeps other sections.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks import SECTIONS
from benchmarks.__main__ import main, split_sections, write_section
from benchmarks.monitor_overhead import (
    CASES,
    Case,
    CaseResult,
    CollectorLike,
    Settings,
    measure,
    render,
)

TINY = Settings(rounds=1, watches=3, steps=3, warmup_steps=1)


@pytest.fixture(scope="module")
def tiny_results() -> tuple[CaseResult, ...]:
    return measure(TINY)


def test_monitor_benchmark_measures_every_case_on_both_monitors(
    tiny_results: tuple[CaseResult, ...],
) -> None:
    assert [result.case for result in tiny_results] == list(CASES)
    for result in tiny_results:
        assert len(result.torchrl_ns) == len(result.rlpulse_ns) == TINY.rounds
        assert all(ns > 0 for ns in result.torchrl_ns + result.rlpulse_ns)


def test_monitor_section_renders_a_row_per_case_with_a_verdict(
    tiny_results: tuple[CaseResult, ...],
) -> None:
    markdown = render(tiny_results, TINY)
    rows = [line for line in markdown.splitlines() if line.startswith("| (")]
    assert [row.split(" | ")[0] for row in rows] == [
        f"| {case.label}" for case in CASES
    ]
    assert all(row.endswith(("| pass |", "| **OVER BUDGET** |")) for row in rows)


def test_a_case_whose_monitors_skip_the_expected_logging_is_refused() -> None:
    never_due_but_labelled_logging = Case(
        "(x) mislabelled", lambda every: every.seconds(3600), 1.0, True
    )
    with pytest.raises(RuntimeError, match="logged 0 watches, expected 3"):
        measure(TINY, cases=(never_due_but_labelled_logging,), report=print)


def test_ratio_over_budget_is_reported_as_over_budget() -> None:
    result = CaseResult(CASES[0], torchrl_ns=(1000.0,), rlpulse_ns=(900.0,))
    assert not result.within_budget
    assert "**OVER BUDGET**" in render((result,), TINY)


def test_collector_like_source_builds_a_fresh_six_key_snapshot_each_call() -> None:
    source = CollectorLike()
    first = source.stats()
    source.advance()
    second = source.stats()
    assert first is not second
    assert len(second) == 6
    assert second["frames"] > first["frames"]
    assert second["batches"] == first["batches"] + 1


def test_writing_a_section_keeps_the_other_sections(tmp_path: Path) -> None:
    path = tmp_path / "benchmarks.md"
    write_section(path, "sinks", "## Sinks\nkept\n")
    write_section(path, "monitor", "## Monitor\nfirst\n")
    write_section(path, "monitor", "## Monitor\nsecond\n")
    assert split_sections(path.read_text()) == {
        "monitor": "## Monitor\nsecond\n",
        "sinks": "## Sinks\nkept\n",
    }


def test_sections_are_written_in_registry_order(tmp_path: Path) -> None:
    path = tmp_path / "benchmarks.md"
    write_section(path, "unlisted", "## Unlisted\n")
    write_section(path, "monitor", "## Monitor\n")
    assert list(split_sections(path.read_text())) == ["monitor", "unlisted"]


@pytest.mark.timeout(120)
def test_quick_run_of_the_monitor_section_writes_its_block_and_exits_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "benchmarks.md"
    write_section(path, "other", "## Other\n")
    assert main(["--only", "monitor", "--quick", "--output", str(path)]) == 0
    blocks = split_sections(path.read_text())
    assert set(blocks) == {"monitor", "other"}
    assert blocks["monitor"].startswith("## Monitor overhead")
    printed = capsys.readouterr().out
    assert "round 1/" in printed
    assert "| case | TorchRL ns/poll | rlpulse ns/poll |" in printed


def test_only_rejects_an_unknown_section(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--only", "nonexistent", "--output", str(tmp_path / "b.md")])
    assert exit_info.value.code == 2
    assert "nonexistent" not in SECTIONS
    assert not (tmp_path / "b.md").exists()
