"""The benchmark code works: a tiny monitor-overhead run, in both modes, and the document it writes.

These runs are far too short to mean anything as measurements; they only
prove that ``python -m benchmarks`` will not crash and keeps other sections.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from benchmarks import SECTIONS
from benchmarks.__main__ import main, split_sections, write_section
from benchmarks.monitor_overhead import (
    CASES,
    IDLE_CASE,
    AdvancingCollectorLike,
    BackgroundResults,
    Case,
    CaseResult,
    CollectorLike,
    Settings,
    _check_background_work_done,
    _TorchRLBackgroundRig,
    measure,
    measure_background,
    render,
)

TINY = Settings(
    rounds=1,
    watches=3,
    steps=3,
    warmup_steps=1,
    background_rounds=1,
    background_window_s=0.02,
)


# The first test to ask for one of these module fixtures pays for measuring
# it: a few seconds here, more on a loaded machine.
@pytest.fixture(scope="module")
def tiny_results() -> tuple[CaseResult, ...]:
    return measure(TINY)


@pytest.fixture(scope="module")
def tiny_background() -> BackgroundResults:
    return measure_background(TINY)


@pytest.mark.timeout(180)
def test_monitor_benchmark_measures_every_case_on_both_monitors(
    tiny_results: tuple[CaseResult, ...],
) -> None:
    assert [result.case for result in tiny_results] == list(CASES)
    for result in tiny_results:
        assert len(result.torchrl_ns) == len(result.rlpulse_ns) == TINY.rounds
        assert all(ns > 0 for ns in result.torchrl_ns + result.rlpulse_ns)


@pytest.mark.timeout(180)
def test_background_benchmark_measures_every_case_and_an_idle_round_on_both_monitors(
    tiny_background: BackgroundResults,
) -> None:
    assert [result.case for result in tiny_background.cases] == list(CASES)
    assert [result.case for result in tiny_background.gross] == list(CASES)
    assert tiny_background.idle.case is IDLE_CASE
    expected_logged = TINY.watches * TINY.background_rounds
    assert tiny_background.payloads >= expected_logged
    for result in (*tiny_background.gross, *tiny_background.cases):
        assert len(result.torchrl_ns) == len(result.rlpulse_ns) == 1
    # One idle round of each monitor beside every round of every case.
    assert len(tiny_background.idle.rlpulse_ns) == len(CASES)
    for result in (*tiny_background.gross, tiny_background.idle):
        assert all(ns > 0 for ns in result.torchrl_ns)
        # With nothing due rlpulse's thread sleeps: no round, nothing spent.
        expected = (
            (lambda ns: ns == 0) if result.case.nothing_due else (lambda ns: ns > 0)
        )
        assert all(expected(ns) for ns in result.rlpulse_ns), result.case


@pytest.mark.timeout(180)
def test_background_cost_of_a_watch_poll_is_the_round_minus_the_idle_round_per_watch(
    tiny_background: BackgroundResults,
) -> None:
    idle = tiny_background.idle
    for index, (gross, marginal) in enumerate(
        zip(tiny_background.gross, tiny_background.cases, strict=True)
    ):
        assert marginal.rlpulse_ns[0] == pytest.approx(
            gross.rlpulse_ns[0] - idle.rlpulse_ns[index] / TINY.watches
        )
        assert marginal.torchrl_ns[0] == pytest.approx(
            gross.torchrl_ns[0] - idle.torchrl_ns[index] / TINY.watches
        )


@pytest.mark.timeout(180)
def test_monitor_section_renders_a_row_per_case_and_mode_with_a_verdict(
    tiny_results: tuple[CaseResult, ...], tiny_background: BackgroundResults
) -> None:
    markdown = render(tiny_results, TINY, tiny_background)
    manual, background = markdown.split("### Background mode")
    for part in (manual, background):
        rows = [line for line in part.splitlines() if line.startswith("| (")]
        assert [row.split(" | ")[0] for row in rows] == [
            f"| {case.label}" for case in CASES
        ]
        assert all(row.endswith(("| pass |", "| **OVER BUDGET** |")) for row in rows)
    assert "An idle round (the same monitor without watches)" in " ".join(
        background.split()
    )


@pytest.mark.timeout(180)
def test_monitor_section_without_background_results_has_no_background_table(
    tiny_results: tuple[CaseResult, ...],
) -> None:
    markdown = render(tiny_results, TINY)
    assert "### Manual mode" in markdown
    assert "Background mode" not in markdown


def test_a_case_whose_monitors_skip_the_expected_logging_is_refused() -> None:
    never_due_but_labelled_logging = Case(
        "(x) mislabelled", lambda every: every.seconds(3600), 1.0, True
    )
    with pytest.raises(RuntimeError, match="logged 0 watches, expected 3"):
        measure(TINY, cases=(never_due_but_labelled_logging,), report=print)


@pytest.mark.timeout(60)
def test_a_background_case_whose_monitors_skip_the_expected_logging_is_refused() -> (
    None
):
    never_due_but_labelled_logging = Case(
        "(x) mislabelled", lambda every: every.seconds(3600), 1.0, True
    )
    # TorchRL's monitor polls and logs nothing; rlpulse's does not even poll.
    refused = "logged 0 watches, expected 3|rlpulse.monitor's monitor completed no"
    with pytest.raises(RuntimeError, match=refused):
        measure_background(TINY, cases=(never_due_but_labelled_logging,), report=print)


def _not_started_torchrl_rig(case: Case) -> _TorchRLBackgroundRig:
    from torchrl.record.loggers import monitoring

    return _TorchRLBackgroundRig(monitoring.Every, case, TINY.watches)


def test_background_rlpulse_payloads_where_none_were_due_are_refused() -> None:
    rig = _not_started_torchrl_rig(CASES[1])
    before = {"rounds": 10, "polls": 0, "logged": 0, "dropped": 0}
    after = {"rounds": 12, "polls": 3, "logged": 3, "dropped": 0}
    with pytest.raises(RuntimeError, match="logged 3 payloads of 3 polls in 2 rounds"):
        _check_background_work_done(CASES[1], rig, before, after)


@pytest.mark.timeout(180)
def test_background_section_reports_payloads_dropped_by_rlpulses_queue(
    tiny_results: tuple[CaseResult, ...], tiny_background: BackgroundResults
) -> None:
    lossy = replace(tiny_background, payloads=1200, dropped=7)
    text = " ".join(render(tiny_results, TINY, lossy).split())
    assert "dropped 7 of the 1,200 payloads" in text
    lossless = replace(tiny_background, payloads=1200, dropped=0)
    text = " ".join(render(tiny_results, TINY, lossless).split())
    assert "delivered all 1,200 payloads" in text


def test_torchrl_background_rig_counts_the_rounds_of_its_monitors_thread() -> None:
    rig = _not_started_torchrl_rig(CASES[0])
    rig.warm_up()
    assert rig.rounds() >= 2
    assert len(rig.counter.last_logged) == TINY.watches


def test_settings_refuse_counts_below_one_and_a_window_that_is_not_positive() -> None:
    with pytest.raises(ValueError, match="background_rounds must be at least 1"):
        Settings(background_rounds=0)
    with pytest.raises(ValueError, match="watches must be at least 1"):
        Settings(watches=0)
    with pytest.raises(ValueError, match="background_window_s must be a positive"):
        Settings(background_window_s=float("nan"))


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


def test_advancing_source_moves_its_counters_on_at_every_snapshot() -> None:
    source = AdvancingCollectorLike(frames_per_batch=10)
    first = source.stats()
    second = source.stats()
    assert (first["frames"], first["batches"]) == (10, 1)
    assert (second["frames"], second["batches"]) == (20, 2)
    assert set(second) == set(CollectorLike().stats())


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
    assert "### Background mode" in blocks["monitor"]
    printed = capsys.readouterr().out
    assert "monitor (a) round 1/" in printed
    assert "monitor background (a) round 1/" in printed
    assert "manual mode:\n| case | TorchRL ns/poll | rlpulse ns/poll |" in printed
    assert "background mode:\n| case | TorchRL ns/poll | rlpulse ns/poll |" in printed


def test_only_rejects_an_unknown_section(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--only", "nonexistent", "--output", str(tmp_path / "b.md")])
    assert exit_info.value.code == 2
    assert "nonexistent" not in SECTIONS
    assert not (tmp_path / "b.md").exists()


@pytest.mark.timeout(120)
def test_loop_slowdown_benchmark_measures_every_configuration_of_both_loops() -> None:
    from benchmarks.loop_slowdown import (
        BARE_SINK,
        CONFIGURATIONS,
        OFF_PROCESS,
        SINKS_ALONE,
        Settings,
        measure,
        render,
    )

    settings = Settings(rounds=1, window_s=0.35, watches=3)
    results = measure(settings)

    assert [result.loop for result in results] == list(settings.loops)
    for result in results:
        # A bare window before the first monitored one and after each.
        assert [len(result.samples[name]) for name in CONFIGURATIONS] == [
            6, 1, 1, 1, 1, 1,
        ]  # fmt: skip
        assert [len(result.bases[name]) for name in CONFIGURATIONS[1:]] == [1] * 5
        assert all(s.iterations > 0 for s in result.samples["no monitor"])
        # Three watches, three rounds due in 0.35 s: the sinks got payloads.
        assert result.samples["rlpulse"][0].due == 9
        assert result.samples["rlpulse"][0].delivered > 0
        assert result.samples[BARE_SINK][0].delivered > 0
        assert result.samples[OFF_PROCESS][0].delivered > 0
        assert result.samples[SINKS_ALONE][0].delivered > 0
        assert result.samples["TorchRL"][0].delivered > 0
    markdown = render(results, settings)
    assert markdown.startswith("## Loop slowdown")
    assert markdown.count("### ") == len(settings.loops) + 1  # and the budgets
    budgets = markdown[markdown.index("### rlpulse's budgets") :]
    for name, limit in (
        ("rlpulse", "3.00 %"),
        (OFF_PROCESS, "1.80 %"),
        (BARE_SINK, "1.30 %"),
    ):
        assert f"| {name} | loop thread off the CPU, added |" in budgets
        assert f"| <= {limit} |" in budgets
    assert "| loop time lost a delivered payload, of TorchRL's |" in budgets
    assert "| <= 0.100x |" in budgets
    assert "loop iterations lost" not in budgets


@pytest.mark.timeout(120)
def test_watch_count_benchmark_times_both_monitors_in_both_modes() -> None:
    from benchmarks.watch_count import Settings, measure, render

    settings = Settings(watches=200, due=10, rounds=2, steps=3, background_window_s=0.2)
    result = measure(settings)

    for figures in (
        result.manual_all,
        result.manual_due,
        result.background_all,
        result.background_due,
    ):
        assert len(figures) == 2
        assert all(value > 0 for value in figures)
    markdown = render(result, settings)
    assert markdown.startswith("## Watch count")
    assert markdown.count("| <= 2.00 |") == 2


@pytest.mark.timeout(120)
def test_keeping_up_benchmark_counts_each_watchs_stored_payloads_for_both_monitors() -> (
    None
):
    from benchmarks.keeping_up import MONITORS, Settings, measure, render

    settings = Settings(rounds=1, window_s=0.35, watch_counts=(3, 4))
    results = measure(settings)

    assert [(r.monitor, r.watches) for r in results] == [
        (monitor, watches) for watches in (3, 4) for monitor in MONITORS
    ]
    for result in results:
        (sample,) = result.samples
        # Three rounds due in 0.35 s, for each watch.
        assert sample.due == 3 * result.watches
        assert 0 < sum(sample.rows.values()) <= sample.due
        assert set(sample.rows) <= {f"worker_{i}" for i in range(result.watches)}
    rlpulse_sample = results[0].samples[0]
    assert rlpulse_sample.warnings == rlpulse_sample.dropped == 0
    markdown = render(results, settings)
    assert markdown.startswith("## Keeping up")
    assert markdown.count("| pass |") + markdown.count("| OVER BUDGET |") == 6


@pytest.mark.timeout(60)
def test_histograms_benchmark_times_rlpulse_and_prometheus_client_side_by_side() -> (
    None
):
    from benchmarks.histograms import Settings, measure, render

    settings = Settings(rounds=2, calls=100)
    result = measure(settings)

    for figures in (
        result.prometheus_observe,
        result.tally_observe,
        result.prometheus_time,
        result.tally_time,
        result.tally_busy,
        result.tally_waiting,
    ):
        assert len(figures) == 2
        # Liveness only: a call takes some time, and less than a millisecond.
        assert all(0 < ns < 1_000_000 for ns in figures)
    markdown = render(result, settings)
    assert markdown.startswith("## Histograms")
    assert markdown.count("| pass |") + markdown.count("| OVER BUDGET |") == 2
    assert "| <= 0.35 |" in markdown
    assert "| <= 0.50 |" in markdown
    assert "| `with busy():` an empty block |" in markdown
