"""TensorBoardLogger: event files read back with TensorBoard's own EventAccumulator."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy
import pytest
from tensorboard.backend.event_processing.event_accumulator import (
    HISTOGRAMS,
    EventAccumulator,
    HistogramEvent,
)

from rlpulse import Every, LoggerMonitor, TransientSinkError
from rlpulse.distributions import MOST_BINS, Histogram, bins
from rlpulse.naming import Kind, Payload
from rlpulse.sinks.tensorboard import TensorBoardLogger
from tests.support import Filler


def read_scalars(log_dir: Path) -> dict[str, list[tuple[float, int, float]]]:
    """Return ``{tag: [(wall_time, step, value), ...]}`` as TensorBoard loads them."""
    accumulator = EventAccumulator(str(log_dir))
    accumulator.Reload()
    return {
        tag: [
            (event.wall_time, event.step, event.value)
            for event in accumulator.Scalars(tag)
        ]
        for tag in accumulator.Tags()["scalars"]
    }


def read_histograms(log_dir: Path) -> dict[str, list[HistogramEvent]]:
    """Return ``{tag: [HistogramEvent, ...]}`` as TensorBoard loads them, every one kept."""
    accumulator = EventAccumulator(str(log_dir), size_guidance={HISTOGRAMS: 0})
    accumulator.Reload()
    return {
        tag: accumulator.Histograms(tag) for tag in accumulator.Tags()["histograms"]
    }


class Collector:
    def __init__(self) -> None:
        self.frames = 0

    def stats(self) -> dict[str, float]:
        return {"frames": self.frames, "workers_alive": 4}


def test_every_metric_is_a_scalar_at_the_payload_step_with_the_poll_wall_time(
    tmp_path: Path,
) -> None:
    with TensorBoardLogger(tmp_path) as sink:
        sink.log_metrics(
            {"collector/frames": 96.0, "collector/workers": 4.0},
            step=96,
            timestamp=1000.25,
        )
        sink.log_metrics(
            {"collector/frames": 192.0, "collector/workers": 3.0},
            step=192,
            timestamp=1001.5,
        )

    assert read_scalars(tmp_path) == {
        "collector/frames": [(1000.25, 96, 96.0), (1001.5, 192, 192.0)],
        "collector/workers": [(1000.25, 96, 4.0), (1001.5, 192, 3.0)],
    }


def test_a_monitor_polling_a_collector_writes_its_metrics_and_rates(
    tmp_path: Path,
) -> None:
    collector = Collector()
    with TensorBoardLogger(tmp_path) as sink:
        monitor = LoggerMonitor(sink, background=False)
        monitor.watch(collector, schedule=Every.counter("frames", 100))
        before = time.time()
        monitor.step()
        collector.frames = 250
        monitor.step()
        after = time.time()

    scalars = read_scalars(tmp_path)
    assert [step for _, step, _ in scalars["collector/frames"]] == [0, 250]
    assert [value for _, _, value in scalars["collector/frames"]] == [0.0, 250.0]
    # The first payload has no baseline yet, so the rate starts at the second.
    assert [step for _, step, _ in scalars["collector/frames_per_second"]] == [250]
    assert scalars["collector/frames_per_second"][0][2] > 0
    wall_times = [wall_time for wall_time, _, _ in scalars["collector/frames"]]
    assert before <= wall_times[0] <= wall_times[1] <= after


def test_payloads_without_a_step_are_numbered_per_watch(tmp_path: Path) -> None:
    with TensorBoardLogger(tmp_path) as sink:
        sink.log_metrics({"buffer/size": 1.0}, timestamp=1.0)
        sink.log_metrics({"buffer/size": 2.0, "env/fps": 30.0}, timestamp=2.0)
        sink.log_metrics(
            {"buffer/size": 3.0, "buffer/size_per_second": 1.0}, timestamp=3.0
        )

    scalars = read_scalars(tmp_path)
    assert scalars["buffer/size"] == [(1.0, 0, 1.0), (2.0, 1, 2.0), (3.0, 2, 3.0)]
    assert scalars["buffer/size_per_second"] == [(3.0, 2, 1.0)]
    assert scalars["env/fps"] == [(2.0, 0, 30.0)]


def test_payloads_of_keys_without_a_watch_are_numbered_together(
    tmp_path: Path,
) -> None:
    # A key without "/" has no watch (rlpulse.naming.split): such keys are
    # numbered as one watch's, not each on its own.
    with TensorBoardLogger(tmp_path) as sink:
        sink.log_metrics({"loss": 1.0}, timestamp=1.0)
        sink.log_metrics({"lr": 0.1}, timestamp=2.0)
        sink.log_metrics({"loss": 0.5}, timestamp=3.0)

    scalars = read_scalars(tmp_path)
    assert scalars["loss"] == [(1.0, 0, 1.0), (3.0, 2, 0.5)]
    assert [step for _, step, _ in scalars["lr"]] == [1]


def test_a_logged_payload_is_readable_before_the_logger_is_closed(
    tmp_path: Path,
) -> None:
    with TensorBoardLogger(tmp_path) as sink:
        sink.log_metrics({"learner/loss": 0.5}, step=1, timestamp=5.0)
        assert read_scalars(tmp_path) == {"learner/loss": [(5.0, 1, 0.5)]}


def test_two_loggers_on_one_directory_keep_both_event_files(tmp_path: Path) -> None:
    with TensorBoardLogger(tmp_path) as first, TensorBoardLogger(tmp_path) as second:
        first.log_metrics({"collector/frames": 1.0}, step=1, timestamp=1.0)
        second.log_metrics({"collector/frames": 2.0}, step=2, timestamp=2.0)

    assert len(list(tmp_path.glob("events.out.tfevents.*"))) == 2
    # TensorBoard reads the files in the order of their names, which two
    # made in one second do not set.
    (scalars,) = read_scalars(tmp_path).values()
    assert sorted(scalars) == [(1.0, 1, 1.0), (2.0, 2, 2.0)]


def test_the_log_dir_is_created_when_missing(tmp_path: Path) -> None:
    log_dir = tmp_path / "runs" / "tensorboard"
    with TensorBoardLogger(log_dir) as sink:
        sink.log_metrics({"collector/frames": 1.0}, step=1)
    assert read_scalars(log_dir)["collector/frames"][0][1:] == (1, 1.0)


def test_a_log_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    not_a_directory = tmp_path / "events"
    not_a_directory.write_text("")
    with pytest.raises(NotADirectoryError, match="is a file; give a directory"):
        TensorBoardLogger(not_a_directory)


def test_closing_twice_is_allowed_and_logging_after_close_raises(
    tmp_path: Path,
) -> None:
    sink = TensorBoardLogger(tmp_path)
    sink.close()
    sink.close()
    with pytest.raises(RuntimeError, match="is closed"):
        sink.log_metrics({"collector/frames": 1.0}, step=1)
    with pytest.raises(RuntimeError, match="is closed"):
        sink.flush()


def test_an_empty_payload_writes_no_scalar(tmp_path: Path) -> None:
    with TensorBoardLogger(tmp_path) as sink:
        sink.log_metrics({}, step=1)
        sink.log_metrics({})
        sink.flush()
    assert read_scalars(tmp_path) == {}
    assert repr(sink) == f"TensorBoardLogger({str(tmp_path)!r})"


def test_a_batch_of_payloads_is_read_back_as_one_event_each(tmp_path: Path) -> None:
    with TensorBoardLogger(tmp_path) as sink:
        sink.log_batch(
            [
                ({"collector/frames": 96.0}, 96, 1.0),
                ({"buffer/size": 1.0}, None, 2.0),
                ({"collector/frames": 192.0, "buffer/size": 2.0}, None, 3.0),
            ]
        )
        assert read_scalars(tmp_path) == {
            "collector/frames": [(1.0, 96, 96.0), (3.0, 0, 192.0)],
            "buffer/size": [(2.0, 0, 1.0), (3.0, 1, 2.0)],
        }


def test_a_batch_that_finds_no_space_leaves_the_file_readable_and_is_written_once_there_is_room(
    small_disk: Path,
) -> None:
    log_dir = small_disk / "tb"
    sink = TensorBoardLogger(log_dir)
    sink.log_metrics({"c/frames": 1.0}, step=1, timestamp=1.0)
    filler = Filler(small_disk)
    filler.fill()
    # Larger than any buffer in the way; one payload without a step.
    batch = [
        ({f"c/metric_{index:02d}_of_a_long_name": 1.0 for index in range(20)}, s, 2.0)
        for s in range(2, 300)
    ]
    batch.append(({"u/level": 5.0}, None, 3.0))
    for _ in range(2):
        with pytest.raises(
            TransientSinkError, match=f"cannot write metrics to {log_dir}"
        ):
            sink.log_batch(batch)
        assert read_scalars(log_dir) == {"c/frames": [(1.0, 1, 1.0)]}
    filler.free()
    # What a monitor's queue does: the same payloads again, then newer ones.
    sink.log_batch([*batch, ({"c/frames": 2.0}, 400, 4.0)])
    sink.close()
    scalars = read_scalars(log_dir)
    assert scalars["c/frames"] == [(1.0, 1, 1.0), (4.0, 400, 2.0)]
    assert [step for _, step, _ in scalars["c/metric_19_of_a_long_name"]] == list(
        range(2, 300)
    )
    assert scalars["u/level"] == [(3.0, 0, 5.0)]


def test_each_distribution_is_a_histogram_of_its_interval_at_the_payload_step(
    tmp_path: Path,
) -> None:
    rng = numpy.random.default_rng(3)
    intervals = [
        # Latencies from a microsecond to seconds, with zeros and negatives.
        [*rng.lognormal(-6.0, 2.5, 3000), *numpy.zeros(20), *-rng.lognormal(0, 1, 50)],
        list(rng.lognormal(1.0, 0.3, 500)),
    ]
    histograms = []
    with TensorBoardLogger(tmp_path) as sink:
        for step, values in zip((100, 200), intervals, strict=True):
            histogram = Histogram()
            histogram.add_all([float(value) for value in values])
            histograms.append(histogram)
            sink.log_payloads(
                [
                    Payload(
                        {"learner/loss_p50": histogram.quantile(0.5) or 0.0},
                        step,
                        float(step),
                        {"learner/loss_p50": Kind.GAUGE},
                        {"learner/loss": histogram},
                    )
                ]
            )

    events = read_histograms(tmp_path)["learner/loss"]
    assert [(event.step, event.wall_time) for event in events] == [
        (100, 100.0),
        (200, 200.0),
    ]
    for event, histogram, values in zip(events, histograms, intervals, strict=True):
        shown = event.histogram_value
        edges, counts, _ = bins(histogram)
        assert shown.num == len(values)
        assert shown.sum == pytest.approx(sum(values))
        assert (shown.min, shown.max) == (min(values), max(values))
        assert len(shown.bucket) <= MOST_BINS
        assert shown.bucket == counts
        assert shown.bucket_limit == pytest.approx(edges[1:])
        assert shown.sum_squares == pytest.approx(
            sum(value * value for value in values), rel=0.011
        )
    assert [step for _, step, _ in read_scalars(tmp_path)["learner/loss_p50"]] == [
        100,
        200,
    ]


def test_a_monitor_watching_a_tally_writes_each_interval_as_a_histogram(
    tmp_path: Path, log_tally_into: Callable[[Any, list[list[float]]], None]
) -> None:
    with TensorBoardLogger(tmp_path) as sink:
        log_tally_into(sink, [[0.5, 0.25, 2.0], [8.0]])

    histograms = read_histograms(tmp_path)
    assert list(histograms) == ["learner/loss"]
    shown = [
        (event.step, event.histogram_value.num, event.histogram_value.sum)
        for event in histograms["learner/loss"]
    ]
    assert shown == [(1, 3.0, 2.75), (2, 1.0, 8.0)]
    assert "learner/loss_p50" in read_scalars(tmp_path)


def test_a_distribution_of_a_payload_without_a_step_is_numbered_with_its_watch(
    tmp_path: Path,
) -> None:
    histogram = Histogram()
    histogram.add(1.0)
    with TensorBoardLogger(tmp_path) as sink:
        sink.log_metrics({"learner/updates": 1.0}, timestamp=1.0)
        sink.log_payloads(
            [
                Payload(
                    {"learner/updates": 2.0}, None, 2.0, {}, {"learner/loss": histogram}
                )
            ]
        )

    [event] = read_histograms(tmp_path)["learner/loss"]
    assert event.step == 1
    assert [step for _, step, _ in read_scalars(tmp_path)["learner/updates"]] == [0, 1]


def test_a_new_logger_on_a_directory_numbers_payloads_without_a_step_after_those_there(
    tmp_path: Path,
) -> None:
    # A restarted process: its logger finds the first one's event file.
    with TensorBoardLogger(tmp_path) as first:
        for level in (1.0, 2.0, 3.0):
            first.log_metrics({"buffer/size": level, "env/fps": 30.0})
        first.log_metrics({"buffer/size": 4.0})
        first.log_metrics({"learner/loss": 0.5}, step=1000)
    with TensorBoardLogger(tmp_path) as second:
        second.log_metrics({"buffer/size": 5.0, "env/fps": 31.0})
        second.log_metrics({"learner/loss": 0.25})

    scalars = read_scalars(tmp_path)
    assert [(step, value) for _, step, value in scalars["buffer/size"]] == [
        (0, 1.0),
        (1, 2.0),
        (2, 3.0),
        (3, 4.0),
        (4, 5.0),
    ]
    assert [step for _, step, _ in scalars["env/fps"]] == [0, 1, 2, 3]
    assert [step for _, step, _ in scalars["learner/loss"]] == [1000, 1001]


def test_an_event_file_cut_short_is_read_up_to_where_it_ends(tmp_path: Path) -> None:
    with TensorBoardLogger(tmp_path) as first:
        first.log_metrics({"buffer/size": 1.0})
        first.log_metrics({"buffer/size": 2.0})
    with first.path.open("ab") as torn:
        torn.write(b"\x40\x00\x00\x00\x00\x00\x00\x00 torn")
    with TensorBoardLogger(tmp_path) as second:
        second.log_metrics({"buffer/size": 3.0})

    steps = [step for _, step, _ in read_scalars(tmp_path)["buffer/size"]]
    assert steps[-1] == 2


def test_a_new_logger_given_steps_first_still_numbers_later_payloads_after_those_there(
    tmp_path: Path,
) -> None:
    with TensorBoardLogger(tmp_path) as first:
        for level in (1.0, 2.0):
            first.log_metrics({"buffer/size": level})
    with TensorBoardLogger(tmp_path) as second:
        second.log_metrics({"learner/loss": 0.5}, step=7)
        second.log_metrics({"buffer/size": 3.0})

    scalars = read_scalars(tmp_path)
    assert [(step, value) for _, step, value in scalars["buffer/size"]] == [
        (0, 1.0),
        (1, 2.0),
        (2, 3.0),
    ]
