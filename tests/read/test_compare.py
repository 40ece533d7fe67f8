"""``rlpulse compare`` (SPEC 7): runs side by side, a row per metric, each run's ratio to the first.

Runs written by the real sinks (SQLite with two runs, CSV, JSON lines) and
read back through the command line.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from rlpulse import CSVLogger, JSONLLogger, SQLiteLogger
from rlpulse.cli import main
from rlpulse.naming import Kind, Payload

pytestmark = pytest.mark.timeout(60)


def write_run(
    sink: SQLiteLogger | CSVLogger | JSONLLogger, frames_per_second: float, size: float
) -> None:
    """Four seconds of a collector at ``frames_per_second`` and a buffer holding ``size`` then ``3 * size``."""
    with sink:
        for second in range(5):
            sink.log_metrics(
                {
                    "collector/frames": frames_per_second * second,
                    "buffer/size": size if second < 2 else 3 * size,
                },
                step=second,
                timestamp=1000.0 + second,
            )


def rows(out: str) -> dict[str, list[str]]:
    table = out.split("\n\n")[1]  # the verdicts' tables after it left out
    return {line.split()[0]: line.split()[1:] for line in table.splitlines()[1:]}


def test_compare_puts_each_runs_figures_beside_the_first_runs_with_the_ratio(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "runs.sqlite"
    write_run(SQLiteLogger(store, run="baseline"), 1000.0, 10.0)
    write_run(SQLiteLogger(store, run="faster"), 1500.0, 10.0)
    table = tmp_path / "other.csv"
    write_run(CSVLogger(table), 500.0, 20.0)

    assert main(["compare", f"{store}:baseline", str(store), str(table)]) == 0

    out = capsys.readouterr().out
    assert out.splitlines()[:3] == [
        f"A: {store}:baseline (run baseline)",
        f"B: {store} (run faster)",
        f"C: {table} (run other.csv)",
    ]
    assert rows(out) == {
        "buffer/size": ["mean", "22", "22", "1.00x", "44", "2.00x"],
        "collector/frames": ["rate/s", "1000", "1500", "1.50x", "500", "0.50x"],
    }
    assert out.split("\n\n", 1)[1].splitlines()[0].split() == [
        "metric",
        "figure",
        "A",
        "B",
        "B/A",
        "C",
        "C/A",
    ]


def test_compare_fits_its_table_to_the_terminals_width(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    long_name = "replay_buffer/samples_returned_per_second"
    paths = [tmp_path / "a.csv", tmp_path / "b.csv"]
    for path in paths:
        with CSVLogger(path) as sink:
            sink.log_metrics({long_name: 9930.0}, step=0, timestamp=1.0)
            sink.log_metrics({long_name: 9931.0}, step=1, timestamp=2.0)

    monkeypatch.setenv("COLUMNS", "60")
    assert main(["compare", *map(str, paths)]) == 0
    table = capsys.readouterr().out.split("\n\n")[1].splitlines()
    monkeypatch.delenv("COLUMNS")
    assert main(["compare", *map(str, paths)]) == 0
    whole = capsys.readouterr().out.split("\n\n")[1].splitlines()

    assert all(len(line) <= 60 for line in table)
    assert table[1].startswith("replay_buf")
    assert "…" in table[1].split()[0]
    assert whole[1].split()[0] == long_name


def test_compare_keeps_the_metrics_matched_and_marks_the_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_run(JSONLLogger(first), 1000.0, 10.0)
    with JSONLLogger(second) as sink:
        sink.log_metrics({"buffer/size": 5.0}, step=0, timestamp=1.0)
    assert main(["compare", str(first), str(second), "--match", "collector/*"]) == 0
    assert rows(capsys.readouterr().out) == {
        "collector/frames": ["rate/s", "1000", "-", "-"],
    }


def test_compare_says_in_one_line_what_it_cannot_read(tmp_path: Path) -> None:
    present = tmp_path / "a.sqlite"
    write_run(SQLiteLogger(present, run="only"), 1000.0, 10.0)
    for arguments, expected in (
        (
            [str(present), str(tmp_path / "missing.sqlite")],
            "missing.sqlite: no such file",
        ),
        ([str(present), f"{present}:nope"], "has no run named 'nope'"),
    ):
        result = subprocess.run(
            [sys.executable, "-m", "rlpulse", "compare", *arguments],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 2
        assert result.stdout == ""
        assert len(result.stderr.splitlines()) == 1
        assert expected in result.stderr
    result = subprocess.run(
        [sys.executable, "-m", "rlpulse", "compare", str(present)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "at least two runs" in result.stderr


def test_a_counter_logged_once_in_a_run_is_not_compared_with_the_others_rate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    once, steady = tmp_path / "once.jsonl", tmp_path / "steady.jsonl"
    with JSONLLogger(once) as sink:
        sink.log_metrics({"c/frames": 100.0}, step=0, timestamp=1.0)
    with JSONLLogger(steady) as sink:
        for second in range(3):
            sink.log_metrics(
                {"c/frames": 250.0 * second}, step=second, timestamp=1.0 + second
            )
    assert main(["compare", str(once), str(steady), "--match", "c/*"]) == 0
    assert rows(capsys.readouterr().out) == {"c/frames": ["rate/s", "-", "250", "-"]}


def test_a_counter_no_name_says_is_compared_by_its_rate_never_its_mean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A monitor's own polls and a SharedCounters' episodes: counters by kind.
    kinds = {"monitor/polls": Kind.COUNTER, "workers/episodes": Kind.COUNTER}
    paths = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    for path, speed in zip(paths, (10.0, 20.0), strict=True):
        with JSONLLogger(path) as sink:
            sink.log_payloads(
                Payload(
                    {"monitor/polls": speed * second, "workers/episodes": 2.0 * second},
                    second,
                    1000.0 + second,
                    kinds,
                )
                for second in range(5)
            )

    assert main(["compare", *map(str, paths)]) == 0

    assert rows(capsys.readouterr().out) == {
        "monitor/polls": ["rate/s", "10", "20", "2.00x"],
        "workers/episodes": ["rate/s", "2", "2", "1.00x"],
    }


def test_compare_puts_each_distributions_quantiles_over_the_run_side_by_side(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    log_tally_intervals: Callable[..., None],
) -> None:
    store = tmp_path / "runs.sqlite"
    log_tally_intervals(store, [[1.0] * 99 + [4.0], [1.0] * 100], run="baseline")
    log_tally_intervals(store, [[2.0] * 99 + [8.0]], run="slower")

    assert main(["compare", f"{store}:baseline", f"{store}:slower"]) == 0

    table = capsys.readouterr().out.split("\n\n", 1)[1].splitlines()
    distribution_rows = [
        line.split() for line in table if line.startswith("learner/loss ")
    ]
    assert distribution_rows == [
        ["learner/loss", "p50", "1", "2", "2.00x"],
        ["learner/loss", "p99", "1", "2", "2.00x"],
    ]


def test_compare_of_runs_without_histograms_has_no_distribution_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = tmp_path / "a.csv", tmp_path / "b.jsonl"
    write_run(CSVLogger(first), 1000.0, 10.0)
    write_run(JSONLLogger(second), 1000.0, 10.0)

    assert main(["compare", str(first), str(second)]) == 0

    assert set(rows(capsys.readouterr().out)) == {"buffer/size", "collector/frames"}


def test_a_bottleneck_watchs_codes_get_no_ratio_its_figures_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def write_verdicts(path: Path, bound: float, wait_share: float) -> None:
        with JSONLLogger(path) as sink:
            for window in range(3):
                sink.log_metrics(
                    {
                        "bottleneck/window_s": 30.0,
                        "bottleneck/consumer_busy_share": 1.0 - wait_share,
                        "bottleneck/consumer_wait_share": wait_share,
                        "bottleneck/bound_known": 1.0,
                        "bottleneck/bound": bound,
                        "bottleneck/side/collector": -1.0,
                        "bottleneck/side/learner": 1.0,
                    },
                    timestamp=1000.0 + 30.0 * window,
                )

    collector_bound, learner_bound = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_verdicts(collector_bound, -1.0, 0.6)
    write_verdicts(learner_bound, 1.0, 0.0)

    assert main(["compare", str(collector_bound), str(learner_bound)]) == 0

    out = capsys.readouterr().out
    table = rows(out)
    # -1, 0 and +1 say which side: a ratio of two of them means nothing.
    assert table["bottleneck/bound"] == ["mean", "-1", "1", "-"]
    assert table["bottleneck/bound_known"] == ["mean", "1", "1", "-"]
    assert table["bottleneck/side/collector"] == ["mean", "-1", "-1", "-"]
    assert table["bottleneck/consumer_wait_share"] == ["mean", "0.6", "0", "0.00x"]
    assert "A    collector-bound 100% of 3 windows" in out
    assert "B    learner-bound 100% of 3 windows" in out


def write_speedups(path: Path, windows: list[tuple[float, float]]) -> None:
    """A bottleneck watch's windows, each ``(bound, speedup)``, 30 s apart, as a JSON lines run."""
    with JSONLLogger(path) as sink:
        for index, (bound, speedup) in enumerate(windows):
            sink.log_metrics(
                {
                    "bottleneck/window_s": 30.0,
                    "bottleneck/consumer_busy_share": 0.5,
                    "bottleneck/consumer_wait_share": 0.5,
                    "bottleneck/bound_known": 1.0,
                    "bottleneck/bound": bound,
                    "bottleneck/speedup": speedup,
                    "bottleneck/side/collector": -1.0,
                    "bottleneck/side/learner": 1.0,
                },
                timestamp=1000.0 + 30.0 * index,
            )


def test_speedups_of_runs_bound_on_different_sides_get_no_ratio_and_say_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    collector_bound, learner_bound = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_speedups(collector_bound, [(-1.0, 2.0)] * 3)
    write_speedups(learner_bound, [(1.0, 8.0)] * 3)

    assert main(["compare", str(collector_bound), str(learner_bound)]) == 0

    out = capsys.readouterr().out
    assert rows(out)["bottleneck/speedup"] == ["mean", "2", "8", "-"]
    assert out.rstrip().endswith(
        "no B/A of bottleneck/speedup: it is a speed-up of different sides "
        "(A collector-bound, B learner-bound)"
    )


def test_speedups_of_a_run_bound_on_several_sides_get_no_ratio(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mixed, collector_bound = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_speedups(mixed, [(-1.0, 2.0), (0.0, 1.1), (-1.0, 2.0)])
    write_speedups(collector_bound, [(-1.0, 4.0)] * 3)

    assert main(["compare", str(mixed), str(collector_bound)]) == 0

    out = capsys.readouterr().out
    assert rows(out)["bottleneck/speedup"][-1] == "-"
    assert "(A balanced and collector-bound, B collector-bound)" in out


def test_speedups_of_runs_bound_on_the_same_side_get_their_ratio(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    slower, faster = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_speedups(slower, [(-1.0, 2.0)] * 3)
    write_speedups(faster, [(-1.0, 4.0)] * 3)

    assert main(["compare", str(slower), str(faster)]) == 0

    out = capsys.readouterr().out
    assert rows(out)["bottleneck/speedup"] == ["mean", "2", "4", "2.00x"]
    assert "no B/A" not in out
