"""Run summaries: what ``rlpulse show`` computes from the records, and how it prints them."""

from __future__ import annotations

import math
import re
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from rlpulse.distributions import RELATIVE_ERROR
from rlpulse.naming import Kind, Payload
from rlpulse.read.records import Record, RunFileError, read
from rlpulse.read.summary import (
    MetricSummary,
    RunSummary,
    format_summary,
    narrow_summary,
    pinned_run,
    summarize,
    summarize_file,
)
from rlpulse.sinks import CSVLogger, JSONLLogger, SQLiteLogger
from rlpulse.sources import Tally
from rlpulse.text import format_number


def _summary(records: list[Record]) -> RunSummary:
    return summarize(records, run="baseline", source="metrics.db")


def _metric(summary: RunSummary, name: str) -> MetricSummary:
    (metric,) = [metric for metric in summary.metrics if metric.name == name]
    return metric


# Computing


def test_metric_summary_holds_first_last_and_extremes_in_record_order() -> None:
    summary = _summary(
        [
            Record(1.0, None, "buffer/size", 5.0),
            Record(2.0, None, "buffer/size", 9.0),
            Record(3.0, None, "buffer/size", 2.0),
            Record(4.0, None, "buffer/size", 4.0),
        ]
    )

    metric = _metric(summary, "buffer/size")

    assert (metric.first, metric.last, metric.minimum, metric.maximum) == (
        5.0,
        4.0,
        2.0,
        9.0,
    )
    assert metric.count == 4
    assert (metric.first_wall_time, metric.last_wall_time) == (1.0, 4.0)


def test_counter_whose_rate_is_logged_gets_the_mean_rate_over_its_wall_time_span() -> (
    None
):
    summary = _summary(
        [
            Record(10.0, 0, "learner/updates", 100.0),
            Record(10.0, 0, "learner/other", 1.0),
            Record(14.0, 4, "learner/updates", 300.0),
            Record(14.0, 4, "learner/updates_per_second", 50.0),
            Record(20.0, 4, "learner/other", 1.0),
        ]
    )

    updates = _metric(summary, "learner/updates")

    assert updates.is_counter
    assert updates.mean_rate == pytest.approx(50.0)


def test_known_counter_name_is_a_counter_even_without_its_rate() -> None:
    summary = _summary(
        [
            Record(0.0, 0, "buffer/write_count", 0.0),
            Record(2.0, 10, "buffer/write_count", 10.0),
        ]
    )

    write_count = _metric(summary, "buffer/write_count")

    assert write_count.is_counter
    assert write_count.mean_rate == pytest.approx(5.0)


def test_a_tallys_observation_count_is_a_counter_with_a_mean_rate(
    tmp_path: Path,
) -> None:
    tally = Tally()
    path = tmp_path / "metrics.sqlite"
    with SQLiteLogger(path, run="episodes") as sink:
        for second, episode_return in enumerate((10.0, 12.0, 9.0, 11.0, 10.0)):
            tally.observe("episode_return", episode_return)
            stats = {f"tally/{key}": value for key, value in tally.stats().items()}
            sink.log_metrics(stats, step=second, timestamp=100.0 + 2 * second)

    summary = summarize_file(path)

    count = _metric(summary, "tally/episode_return_count")
    assert count.is_counter
    assert count.mean_rate == pytest.approx(0.5)  # 4 more episodes in 8 s
    assert _metric(summary, "tally/episode_return_mean").mean_rate is None
    row = next(
        line
        for line in format_summary(summary).splitlines()
        if line.startswith("tally/episode_return_count")
    )
    assert row.split()[-1] == "0.5"


def test_bare_counter_name_without_watch_prefix_is_recognised() -> None:
    summary = _summary(
        [
            Record(0.0, None, "episodes", 0.0),
            Record(0.0, None, "episodes_per_second", 0.0),
            Record(4.0, None, "episodes", 2.0),
        ]
    )

    assert _metric(summary, "episodes").mean_rate == pytest.approx(0.5)


def test_gauge_has_no_mean_rate() -> None:
    summary = _summary(
        [
            Record(0.0, None, "buffer/utilization", 0.1),
            Record(5.0, None, "buffer/utilization", 0.9),
        ]
    )

    utilization = _metric(summary, "buffer/utilization")

    assert not utilization.is_counter
    assert utilization.mean_rate is None


def test_rate_metric_itself_is_not_a_counter() -> None:
    summary = _summary(
        [
            Record(0.0, None, "collector/frames", 0.0),
            Record(1.0, None, "collector/frames", 10.0),
            Record(1.0, None, "collector/frames_per_second", 10.0),
        ]
    )

    assert not _metric(summary, "collector/frames_per_second").is_counter


def test_counter_seen_at_a_single_instant_has_no_mean_rate() -> None:
    summary = _summary([Record(3.0, 7, "collector/frames", 700.0)])

    frames = _metric(summary, "collector/frames")

    assert frames.is_counter
    assert frames.mean_rate is None


def test_counter_that_went_backwards_over_the_run_has_no_mean_rate() -> None:
    summary = _summary(
        [
            Record(0.0, None, "buffer/write_count", 500.0),
            Record(1.0, None, "buffer/write_count", 20.0),
        ]
    )

    assert _metric(summary, "buffer/write_count").mean_rate is None


def test_a_counter_reset_leaves_its_stretch_out_of_the_mean_rate() -> None:
    values = [0.0, 500.0, 1000.0, 100.0, 200.0]  # reset between 2 s and 3 s
    summary = _summary(
        [Record(float(t), None, "buffer/write_count", v) for t, v in enumerate(values)]
    )

    # 500 + 500 + 100 over the three seconds it grew, not (200 - 0) / 4.
    assert _metric(summary, "buffer/write_count").mean_rate == pytest.approx(1100 / 3)


def test_nan_values_are_left_out_of_the_extremes() -> None:
    summary = _summary(
        [
            Record(0.0, None, "learner/loss", math.nan),
            Record(1.0, None, "learner/loss", 0.5),
            Record(2.0, None, "learner/loss", math.nan),
            Record(3.0, None, "learner/loss", 0.25),
        ]
    )

    loss = _metric(summary, "learner/loss")

    assert (loss.minimum, loss.maximum, loss.count) == (0.25, 0.5, 4)


def test_metric_that_is_only_nan_has_nan_extremes() -> None:
    summary = _summary([Record(0.0, None, "learner/loss", math.nan)])

    loss = _metric(summary, "learner/loss")

    assert math.isnan(loss.minimum)
    assert math.isnan(loss.maximum)


def test_run_summary_counts_records_and_spans_first_to_last_wall_time() -> None:
    summary = _summary(
        [
            Record(100.0, None, "a/x", 1.0),
            Record(103.5, None, "b/y", 1.0),
            Record(101.0, None, "a/x", 2.0),
        ]
    )

    assert summary.records == 3
    assert (summary.start_wall_time, summary.end_wall_time) == (100.0, 103.5)
    assert summary.span == 3.5


def test_metrics_are_sorted_by_name_so_each_watch_sits_together() -> None:
    summary = _summary(
        [
            Record(0.0, None, "collector/frames", 1.0),
            Record(0.0, None, "buffer/size", 1.0),
            Record(0.0, None, "collector/batches", 1.0),
        ]
    )

    assert [metric.name for metric in summary.metrics] == [
        "buffer/size",
        "collector/batches",
        "collector/frames",
    ]


def test_run_without_records_has_no_metrics_and_no_span() -> None:
    summary = _summary([])

    assert (summary.records, summary.metrics, summary.span) == (0, (), 0.0)
    assert summary.start_wall_time is None


# Reading files


def test_summarize_file_of_sqlite_shows_the_latest_run_by_default(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.db"
    with SQLiteLogger(path, run="first") as sink:
        sink.log_metrics({"collector/frames": 1.0}, timestamp=1.0)
    with SQLiteLogger(path, run="second") as sink:
        sink.log_metrics({"collector/frames": 2.0}, timestamp=2.0)

    summary = summarize_file(path)

    assert summary.run == "second"
    assert _metric(summary, "collector/frames").last == 2.0


def test_summarize_file_of_sqlite_shows_the_named_run(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    with SQLiteLogger(path, run="first") as sink:
        sink.log_metrics({"collector/frames": 1.0}, timestamp=1.0)
    with SQLiteLogger(path, run="second") as sink:
        sink.log_metrics({"collector/frames": 2.0}, timestamp=2.0)

    summary = summarize_file(path, run="first")

    assert summary.run == "first"
    assert _metric(summary, "collector/frames").last == 1.0


def test_summarize_file_names_a_csv_run_after_the_file(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    with CSVLogger(path) as sink:
        sink.log_metrics({"buffer/size": 3.0}, step=1, timestamp=5.0)

    summary = summarize_file(path)

    assert (summary.run, summary.source, summary.records) == (
        "metrics.csv",
        str(path),
        1,
    )


def test_summarize_file_reads_json_lines(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    with JSONLLogger(path) as sink:
        sink.log_metrics({"buffer/size": 3.0, "buffer/capacity": 8.0}, timestamp=5.0)

    summary = summarize_file(path)

    assert [metric.name for metric in summary.metrics] == [
        "buffer/capacity",
        "buffer/size",
    ]


def test_summarize_file_of_missing_file_raises_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        summarize_file(tmp_path / "missing.db")


def test_summarize_file_of_unknown_run_raises_run_file_error(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    SQLiteLogger(path, run="first").close()

    with pytest.raises(RunFileError, match="no run named 'other'"):
        summarize_file(path, run="other")


# Printing


def _demo_like_summary() -> RunSummary:
    return summarize(
        [
            Record(1000.0, 0, "collector/frames", 0.0),
            Record(1000.0, 0, "collector/frames_per_second", 3900.0),
            Record(1000.0, 0, "buffer/utilization", 0.0),
            Record(1010.0, 40_000, "collector/frames", 40_000.0),
            Record(1010.0, 40_000, "collector/frames_per_second", 4100.0),
            Record(1010.0, 40_000, "buffer/utilization", 1.0),
        ],
        run="demo-run",
        source="runs/demo.sqlite",
    )


def test_format_summary_header_names_run_file_record_count_and_span() -> None:
    header = format_summary(_demo_like_summary()).splitlines()[0]

    assert header.startswith("run demo-run in runs/demo.sqlite: 6 records over 10.0 s")


def test_format_summary_has_one_row_per_metric_with_last_min_max_and_rate() -> None:
    lines = format_summary(_demo_like_summary()).splitlines()

    rows = {line.split()[0]: line.split()[1:] for line in lines[3:]}

    assert lines[2].split() == ["metric", "last", "min", "max", "mean", "rate/s"]
    assert rows == {
        "buffer/utilization": ["1", "0", "1"],
        "collector/frames": ["40,000", "0", "40,000", "4000"],
        "collector/frames_per_second": ["4100", "3900", "4100"],
    }


def test_format_summary_right_aligns_the_value_columns() -> None:
    lines = format_summary(_demo_like_summary()).splitlines()[2:]

    max_column_ends = {list(re.finditer(r"\S+", line))[3].end() for line in lines}

    assert len(max_column_ends) == 1


def test_format_summary_exact_writes_every_value_in_full() -> None:
    summary = summarize(
        [Record(0.0, 0, "c/frames", 0.0), Record(3.0, 1, "c/frames", 19_999.0)],
        run="r",
        source="r.csv",
    )

    rows = format_summary(summary, exact=True).splitlines()[3:]

    assert rows[0].split() == ["c/frames", "19999", "0", "19999", "6666.333333333333"]


def test_format_summary_of_one_record_says_record() -> None:
    summary = summarize([Record(0.0, 0, "c/frames", 1.0)], run="r", source="r.csv")

    assert "r.csv: 1 record over 0.0 s" in format_summary(summary)


def test_format_summary_shows_a_name_with_a_newline_escaped_on_one_row() -> None:
    summary = summarize(
        [Record(0.0, 0, "c/bad\nname", 1.0), Record(0.0, 0, "c/good", 2.0)],
        run="r",
        source="r.csv",
    )

    lines = format_summary(summary).splitlines()

    assert len(lines) == 5
    assert lines[3].split() == ["'c/bad\\nname'", "1", "1", "1"]
    assert lines[4].split() == ["c/good", "2", "2", "2"]


def test_format_summary_of_a_run_without_records_says_so() -> None:
    text = format_summary(summarize([], run="empty", source="metrics.db"))

    assert text == "run empty in metrics.db: no records"


def test_a_nested_metric_belongs_to_the_watch_it_was_logged_under() -> None:
    records = [
        Record(100.0, None, "collector/worker_0/frames", 10.0),
        Record(101.0, None, "collector/worker_0/frames", 30.0),
        Record(101.0, None, "collector/worker_0/frames_per_second", 20.0),
    ]
    summary = summarize(records, run="r", source="s")
    frames = next(m for m in summary.metrics if m.name == "collector/worker_0/frames")
    assert (frames.watch, frames.key) == ("collector", "worker_0/frames")
    assert frames.is_counter


def test_a_metric_is_a_counter_when_its_stored_kind_says_so(tmp_path: Path) -> None:
    path = tmp_path / "metrics.db"
    with SQLiteLogger(path, run="r") as sink:
        sink.log_payloads(
            Payload(
                {"monitor/polls": 10.0 * second, "monitor/queued": 1.0},
                None,
                100.0 + second,
                {"monitor/polls": Kind.COUNTER},
            )
            for second in range(3)
        )

    polls, queued = summarize_file(path).metrics

    assert (polls.is_counter, polls.kind, polls.mean_rate) == (True, Kind.COUNTER, 10.0)
    assert (queued.is_counter, queued.kind, queued.mean_rate) == (
        False,
        Kind.GAUGE,
        None,
    )


# Distributions over the whole run


def _observations(seed: int, count: int) -> list[float]:
    return [float(v) for v in np.random.default_rng(seed).gamma(2.0, 0.01, count)]


def test_each_distributions_quantiles_over_the_run_match_numpys_within_the_buckets_error(
    tmp_path: Path, log_tally_intervals: Callable[..., None]
) -> None:
    path = tmp_path / "metrics.db"
    intervals = [_observations(seed, 1000) for seed in range(4)]
    log_tally_intervals(path, intervals)
    everything = [value for interval in intervals for value in interval]

    (loss,) = summarize_file(path).distributions

    assert (loss.name, loss.count) == ("learner/loss", 4000)
    for label, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        expected = float(np.quantile(everything, q, method="inverted_cdf"))
        assert loss.quantiles[label] == pytest.approx(expected, rel=RELATIVE_ERROR)


def test_show_prints_each_distributions_quantiles_over_the_whole_run(
    tmp_path: Path, log_tally_intervals: Callable[..., None]
) -> None:
    path = tmp_path / "metrics.db"
    # The intervals' p50 are 1 and 3; the run's is 1, its p90 and p99 3.
    log_tally_intervals(path, [[1.0] * 100, [3.0] * 100])
    summary = summarize_file(path)

    lines = format_summary(summary).splitlines()

    (loss,) = summary.distributions
    assert loss.quantiles["p50"] == 1.0
    assert loss.quantiles["p90"] == pytest.approx(3.0, rel=RELATIVE_ERROR)
    assert loss.quantiles["p99"] == pytest.approx(3.0, rel=RELATIVE_ERROR)
    title = lines.index("distributions over the whole run:")
    assert lines[title + 1].split() == ["distribution", "count", "p50", "p90", "p99"]
    assert lines[title + 2].split() == [
        "learner/loss",
        "200",
        "1",
        format_number(loss.quantiles["p90"]),
        format_number(loss.quantiles["p99"]),
    ]
    assert lines[title + 2 :] == lines[-1:]


@pytest.mark.parametrize("file_name", ["metrics.csv", "metrics.jsonl"])
def test_a_run_in_a_line_file_shows_no_distributions(
    tmp_path: Path, file_name: str
) -> None:
    path = tmp_path / file_name
    sink_type = CSVLogger if file_name.endswith(".csv") else JSONLLogger
    with sink_type(path) as sink:
        sink.log_metrics({"learner/loss_p50": 1.0}, timestamp=1.0)

    summary = summarize_file(path)

    assert summary.distributions == ()
    assert "distribution" not in format_summary(summary)


def test_a_match_keeps_the_distributions_it_names(
    tmp_path: Path, log_tally_intervals: Callable[..., None]
) -> None:
    path = tmp_path / "metrics.db"
    log_tally_intervals(path, [[1.0, 2.0]])
    summary = summarize_file(path)

    kept = narrow_summary(summary, "learner/loss*")
    others = narrow_summary(summary, "learner/updates*")

    assert [d.name for d in kept.distributions] == ["learner/loss"]
    assert others.distributions == ()
    assert "distribution" not in format_summary(others)


# Long runs: summarised where the data is


def _long_run(path: Path, payloads: int, *, nan_every: int = 997) -> None:
    """A run of six metrics per payload: a counter reset once, a rate, gauges with NaN now and then."""
    with SQLiteLogger(path, run="long") as sink:
        for index in range(payloads):
            frames = 1000.0 * (
                index if index < payloads // 2 else index - payloads // 2
            )
            value = math.nan if index % nan_every == 0 else math.sin(index) * 3.5
            sink.log_payloads(
                [
                    Payload(
                        {
                            "collector/frames": frames,
                            "collector/frames_per_second": 1000.0 + index % 7,
                            "collector/busy_s": 0.37 * index,
                            "buffer/size": float(index % 1000),
                            "learner/loss": value,
                            "learner/episode_return_mean": math.log1p(index) / 3,
                        },
                        index,
                        1_700_000_000.0 + index * 0.731,
                        {
                            "collector/frames": Kind.COUNTER,
                            "collector/busy_s": Kind.COUNTER,
                        },
                    )
                ]
            )


def test_a_long_sqlite_runs_summary_from_sql_equals_the_one_from_its_records(
    tmp_path: Path,
) -> None:
    path = tmp_path / "long.sqlite"
    _long_run(path, 12_000)

    from_sql = summarize_file(path)
    from_records = summarize(read(path), run="long", source=str(path))

    assert from_sql == from_records
    assert from_sql.records == 72_000
    assert format_summary(from_sql, exact=True) == format_summary(
        from_records, exact=True
    )


def test_a_long_runs_counter_reset_and_nan_values_summarise_as_from_the_records(
    tmp_path: Path,
) -> None:
    path = tmp_path / "long.sqlite"
    _long_run(path, 3_000, nan_every=2)

    frames = _metric(summarize_file(path), "collector/frames")
    loss = _metric(summarize_file(path), "learner/loss")

    assert frames.mean_rate == pytest.approx(1000.0 / 0.731)
    assert math.isnan(loss.first)
    assert not math.isnan(loss.minimum)
    assert loss == _metric(summarize(read(path), run="long", source=""), "learner/loss")


def test_a_long_line_files_summary_is_read_in_one_pass_without_keeping_its_records(
    tmp_path: Path,
) -> None:
    path = tmp_path / "long.jsonl"
    with JSONLLogger(path) as sink:
        for index in range(20_000):
            sink.log_metrics(
                {"c/frames": 10.0 * index}, step=index, timestamp=float(index)
            )
    tracemalloc.start()
    try:
        summary = summarize_file(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert summary.records == 20_000
    assert _metric(summary, "c/frames").mean_rate == 10.0
    # 20,000 records held at once would take several megabytes.
    assert peak < 1_000_000


def test_the_latest_run_is_pinned_once_for_every_read_of_a_summary(
    tmp_path: Path,
) -> None:
    store = tmp_path / "runs.sqlite"
    for name in ("first", "second"):
        with SQLiteLogger(store, run=name) as sink:
            sink.log_metrics({"c/frames": 1.0}, step=0, timestamp=1.0)
    lines = tmp_path / "run.csv"
    with CSVLogger(lines) as sink:
        sink.log_metrics({"c/frames": 1.0}, step=0, timestamp=1.0)

    assert pinned_run(store, None) == "second"
    assert pinned_run(store, "first") == "first"
    assert pinned_run(lines, None) is None  # a line file holds one run
    assert pinned_run(tmp_path / "missing.sqlite", None) is None  # the reader says why


def test_show_lists_workers_as_people_count_them() -> None:
    # worker_10 came between worker_1 and worker_2.
    records = [
        Record(
            1700000000.0 + second, None, f"workers/worker_{index}/frames", 10.0 * second
        )
        for second in range(2)
        for index in (0, 1, 2, 10)
    ]
    text = format_summary(summarize(records, run="r", source="runs/w.sqlite"))

    listed = [
        line.split()[0] for line in text.splitlines() if line.startswith("workers/")
    ]
    assert listed == [
        "workers/worker_0/frames",
        "workers/worker_1/frames",
        "workers/worker_2/frames",
        "workers/worker_10/frames",
    ]
