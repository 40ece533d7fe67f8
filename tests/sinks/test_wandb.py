"""WandbLogger: offline W&B runs, read back from their transaction log with W&B's own CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import wandb

from rlpulse import Every, LoggerMonitor
from rlpulse.distributions import MOST_BINS, Histogram, bins
from rlpulse.naming import Payload
from rlpulse.sinks.wandb import WandbLogger

QUIET = {"console": "off", "silent": True, "x_disable_stats": True}


@pytest.fixture(scope="module", autouse=True)
def offline_wandb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    # Nothing may reach the network, and nothing may be written outside the
    # test's own directories.
    home = tmp_path_factory.mktemp("wandb_home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WANDB_MODE", "offline")
        patch.setenv("WANDB_SILENT", "true")
        patch.setenv("WANDB_ERROR_REPORTING", "false")
        patch.setenv("WANDB_DIR", str(home))
        for variable in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
            patch.setenv(variable, str(home / variable.lower()))
        yield


def start_run(directory: Path) -> Any:
    return wandb.init(project="rlpulse-tests", dir=directory, settings=QUIET)


def read_records(run: Any) -> list[dict[str, Any]]:
    """Return the records of a finished run's transaction log, decoded by ``wandb leet inspect``."""
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "wandb",
            "leet",
            "inspect",
            "--json",
            run.settings.sync_dir,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [json.loads(line) for line in completed.stdout.splitlines() if line.strip()]


def history_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return the history rows without W&B's own bookkeeping keys (``_step``, ``_runtime``)."""
    return [
        {
            key: value
            for key, value in record["history"]["item"].items()
            if key not in ("_step", "_runtime")
        }
        for record in records
        if record["type"] == "history"
    ]


def x_axes(records: list[dict[str, Any]]) -> dict[str, str]:
    """Return ``{glob: step metric}`` of the run's ``define_metric`` calls."""
    return {
        record["metric"]["glob_name"]: record["metric"]["step_metric"]
        for record in records
        if record["type"] == "metric" and "glob_name" in record["metric"]
    }


class Counter:
    def __init__(self, key: str) -> None:
        self.key = key
        self.value = 0

    def stats(self) -> dict[str, float]:
        return {self.key: self.value}


@pytest.mark.timeout(120)
def test_each_watch_steps_on_its_own_axis_and_rows_carry_the_poll_time(
    tmp_path: Path,
) -> None:
    with WandbLogger(project="rlpulse-tests", dir=tmp_path, settings=QUIET) as sink:
        sink.log_metrics({"collector/frames": 1000.0}, step=1000, timestamp=1000.25)
        # A step far below the collector's: W&B would drop it on a shared axis.
        sink.log_metrics({"buffer/write_count": 5.0}, step=5, timestamp=1001.5)
        sink.log_metrics({"collector/frames": 2000.0}, step=2000, timestamp=1002.0)

    records = read_records(sink.run)
    assert x_axes(records) == {
        "collector/*": "collector/step",
        "buffer/*": "buffer/step",
    }
    assert history_rows(records) == [
        {"collector/frames": 1000, "collector/step": 1000, "_timestamp": 1000.25},
        {"buffer/write_count": 5, "buffer/step": 5, "_timestamp": 1001.5},
        {"collector/frames": 2000, "collector/step": 2000, "_timestamp": 1002},
    ]
    assert [
        record["exit"]["exit_code"] for record in records if record["type"] == "exit"
    ] == [0]


@pytest.mark.timeout(120)
def test_a_monitor_with_watches_on_different_counters_keeps_every_payload(
    tmp_path: Path,
) -> None:
    collector, buffer = Counter("frames"), Counter("write_count")
    with WandbLogger(project="rlpulse-tests", dir=tmp_path, settings=QUIET) as sink:
        monitor = LoggerMonitor(sink, background=False)
        monitor.watch(
            collector, name="collector", schedule=Every.counter("frames", 1000)
        )
        monitor.watch(buffer, name="buffer", schedule=Every.counter("write_count", 10))
        for _ in range(3):
            collector.value += 1000
            buffer.value += 10
            monitor.step()

    rows = history_rows(read_records(sink.run))
    assert [row["collector/step"] for row in rows if "collector/step" in row] == [
        1000,
        2000,
        3000,
    ]
    assert [row["buffer/step"] for row in rows if "buffer/step" in row] == [10, 20, 30]
    assert [
        row["buffer/write_count"] for row in rows if "buffer/write_count" in row
    ] == [10, 20, 30]
    assert "collector/frames_per_second" in rows[-2]


@pytest.mark.timeout(120)
def test_payloads_without_a_step_get_no_axis_of_their_own(tmp_path: Path) -> None:
    with WandbLogger(project="rlpulse-tests", dir=tmp_path, settings=QUIET) as sink:
        sink.log_metrics({"env/fps": 30.0}, timestamp=7.0)
        sink.log_metrics({"unnamespaced": 1.0}, step=3, timestamp=8.0)

    records = read_records(sink.run)
    assert x_axes(records) == {}
    assert history_rows(records) == [
        {"env/fps": 30, "_timestamp": 7},
        {"unnamespaced": 1, "_timestamp": 8},
    ]


@pytest.mark.timeout(120)
def test_a_given_run_is_logged_into_and_left_running(tmp_path: Path) -> None:
    run = start_run(tmp_path)
    try:
        with WandbLogger(run) as sink:
            sink.log_metrics({"learner/loss": 0.5}, step=1, timestamp=9.0)
        assert sink.run is run
        assert wandb.run is run
        run.log({"after": 1.0})
    finally:
        run.finish()

    rows = history_rows(read_records(run))
    assert rows[0] == {"learner/loss": 0.5, "learner/step": 1, "_timestamp": 9}
    assert rows[1]["after"] == 1


@pytest.mark.timeout(120)
def test_the_current_run_is_used_when_no_run_is_given(tmp_path: Path) -> None:
    run = start_run(tmp_path)
    try:
        with WandbLogger() as sink:
            sink.log_metrics({"env/fps": 60.0}, timestamp=10.0)
        assert sink.run is run
        assert wandb.run is run
    finally:
        run.finish()
    assert history_rows(read_records(run)) == [{"env/fps": 60, "_timestamp": 10}]


@pytest.mark.timeout(120)
def test_init_arguments_are_refused_with_a_current_or_given_run(tmp_path: Path) -> None:
    run = start_run(tmp_path)
    try:
        with pytest.raises(ValueError, match="already active"):
            WandbLogger(project="other")
        with pytest.raises(ValueError, match="give one or the other"):
            WandbLogger(run, project="other")
    finally:
        run.finish()


@pytest.mark.timeout(120)
def test_closing_twice_is_allowed_and_logging_after_close_raises(
    tmp_path: Path,
) -> None:
    sink = WandbLogger(project="rlpulse-tests", dir=tmp_path, settings=QUIET)
    sink.flush()
    sink.close()
    sink.close()
    assert wandb.run is None
    assert repr(sink) == f"WandbLogger(run={sink.run.id!r})"
    with pytest.raises(RuntimeError, match="is closed"):
        sink.log_metrics({"env/fps": 1.0})
    with pytest.raises(RuntimeError, match="is closed"):
        sink.flush()


@pytest.mark.timeout(120)
def test_each_distribution_is_a_histogram_of_its_interval_on_its_watchs_axis(
    tmp_path: Path,
) -> None:
    numpy = pytest.importorskip("numpy")
    values = [
        *numpy.random.default_rng(5).lognormal(-6.0, 2.5, 2000),
        0.0,
        -0.5,
    ]
    histogram = Histogram()
    histogram.add_all([float(value) for value in values])
    with WandbLogger(project="rlpulse-tests", dir=tmp_path, settings=QUIET) as sink:
        sink.log_payloads(
            [
                Payload(
                    {"learner/loss_p50": 0.5},
                    7,
                    3.0,
                    {},
                    {"learner/loss": histogram},
                )
            ]
        )

    [row] = history_rows(read_records(sink.run))
    edges, counts, _ = bins(histogram)
    # The transaction log keeps a histogram's fields as "<key>.<field>".
    assert row["learner/loss._type"] == "histogram"
    assert row["learner/loss.values"] == counts
    assert row["learner/loss.bins"] == pytest.approx(edges)
    assert sum(row["learner/loss.values"]) == len(values)
    assert len(row["learner/loss.values"]) <= MOST_BINS
    assert (row["learner/step"], row["learner/loss_p50"]) == (7, 0.5)


@pytest.mark.timeout(120)
def test_a_monitor_watching_a_tally_logs_each_interval_as_a_histogram(
    tmp_path: Path, log_tally_into: Callable[[Any, list[list[float]]], None]
) -> None:
    with WandbLogger(project="rlpulse-tests", dir=tmp_path, settings=QUIET) as sink:
        log_tally_into(sink, [[0.5, 0.25, 2.0], [8.0]])

    rows = history_rows(read_records(sink.run))
    assert [(row["learner/step"], sum(row["learner/loss.values"])) for row in rows] == [
        (1, 3),
        (2, 1),
    ]
