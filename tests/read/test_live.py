"""What ``rlpulse top`` keeps of a run it follows: rates, recent history, each watch's state and block, within bounds.

Read from real SQLite runs through a real ``RunFollower``, and seen as a
frame shows them.
"""

from __future__ import annotations

import time
from pathlib import Path

from rlpulse import Event, LoggerMonitor, SQLiteLogger, Tally
from rlpulse.naming import Kind
from rlpulse.read.live import HISTORY_POINTS, LiveRun
from tests.support import COUNTER, START, followed, heading, pipeline, screen, store


def test_a_final_snapshot_soon_after_the_last_log_keeps_the_counters_rate(
    tmp_path: Path,
) -> None:
    # What stop() logs a few milliseconds after a scheduled snapshot: the
    # collector, which counts its frames a batch at a time, has not
    # counted since.
    payloads = pipeline()
    last_offset, last_metrics, kinds = payloads[-1]
    payloads.append((last_offset + 0.004, last_metrics, kinds))
    text = screen(followed(store(tmp_path / "run.sqlite", payloads)))
    [frames] = [line for line in text.splitlines() if "frames" in line]

    assert frames.split()[:2] == ["frames", "99.6/s"]


def test_a_gauge_with_a_capacity_is_a_bar_and_its_capacity_no_line_of_its_own(
    tmp_path: Path,
) -> None:
    text = screen(followed(store(tmp_path / "run.sqlite", pipeline())))
    [size] = [line for line in text.splitlines() if "size" in line]

    assert "10,000 █████" in size
    assert "░" in size
    assert size.endswith("50% of 20,000")
    assert "capacity" not in text.split("─" * 80)[1]


def test_percentiles_of_a_key_share_one_line(tmp_path: Path) -> None:
    text = screen(followed(store(tmp_path / "run.sqlite", pipeline())))
    [update] = [line for line in text.splitlines() if "update_s" in line]

    assert update.split()[:3] == ["update_s", "p50", "0.002"]
    assert "p99 0.009" in update


def test_each_watch_is_a_block_headed_by_its_state(tmp_path: Path) -> None:
    text = screen(followed(store(tmp_path / "run.sqlite", pipeline())))
    headings = [line.split() for line in text.splitlines() if not line.startswith(" ")]

    assert ["buffer", "running"] in headings
    assert ["collector", "running"] in headings
    assert ["learner", "running"] in headings


def test_a_stalled_watch_is_marked_until_it_recovers(tmp_path: Path) -> None:
    stalled = Event(
        START + 5, "collector", "stalled", "no progress (frames) for 30.0s", 30.0
    )
    recovered = Event(START + 9, "collector", "recovered", "moving again", 4.0)
    stalling = followed(store(tmp_path / "a.sqlite", pipeline(), (stalled,)))
    moving = followed(store(tmp_path / "b.sqlite", pipeline(), (stalled, recovered)))

    assert heading(screen(stalling), "collector") == ["collector", "stalled"]
    assert "  !! no progress (frames) for 30.0s" in screen(stalling).splitlines()
    assert heading(screen(moving), "collector") == ["collector", "running"]


def test_hung_and_dropping_mark_their_watch_and_a_failing_sink_the_header(
    tmp_path: Path,
) -> None:
    events = (
        Event(START + 8, "learner", "hung", "stats() has not returned", 5.0),
        Event(START + 9, "buffer", "dropping", "queue full", 3.0),
        Event(START + 9, "", "sink_failing", "sink SQLiteLogger raised OSError", 0.0),
    )
    text = screen(followed(store(tmp_path / "run.sqlite", pipeline(), events)))

    assert heading(text, "learner") == ["learner", "hung"]
    assert heading(text, "buffer") == ["buffer", "dropping"]
    assert "sinks: sink_failing: sink SQLiteLogger raised OSError" in text


def test_a_watch_hung_before_it_logged_anything_has_a_block_that_says_so(
    tmp_path: Path,
) -> None:
    hung = Event(START + 2, "queue", "hung", "stats() has not returned", 2.0)
    text = screen(followed(store(tmp_path / "run.sqlite", pipeline(), (hung,))))

    lines = text.splitlines()
    at = lines.index("queue                    hung")
    assert lines[at + 1] == "  !! stats() has not returned"
    assert heading(text, "collector") == ["collector", "running"]


def test_a_dropping_watch_runs_again_a_minute_later(tmp_path: Path) -> None:
    events = (Event(START + 9, "buffer", "dropping", "queue full", 3.0),)
    runs = followed(store(tmp_path / "run.sqlite", pipeline(70), events))

    assert heading(screen(runs, now=START + 70), "buffer") == ["buffer", "running"]


def test_a_writer_that_stopped_reads_as_no_new_data_and_its_watches_as_quiet(
    tmp_path: Path,
) -> None:
    runs = followed(store(tmp_path / "run.sqlite", pipeline()))

    assert "last data 1.0 s ago" in screen(runs, now=START + 11)
    assert heading(screen(runs, now=START + 11), "buffer") == ["buffer", "running"]
    stopped = screen(runs, now=START + 50)
    assert "no new data for 40.0 s" in stopped
    assert heading(stopped, "buffer") == ["buffer", "quiet", "40.0", "s"]


def test_a_run_whose_monitor_stopped_reads_as_ended_not_as_no_new_data(
    tmp_path: Path,
) -> None:
    stopped = Event(START + 10.5, "", "stopped", "LoggerMonitor stopped", 33.0)
    runs = followed(store(tmp_path / "run.sqlite", pipeline(), (stopped,)))

    ended = screen(runs, now=START + 50)
    assert "ran 10.0 s  ended 39.5 s ago" in ended
    assert "no new data" not in ended
    assert heading(ended, "buffer") == ["buffer", "ended"]


def test_a_monitor_that_stops_ends_its_run_as_top_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "run.sqlite"
    tally = Tally()
    with SQLiteLogger(path, run="live") as sink:
        with LoggerMonitor(sink, background=False) as monitor:
            monitor.watch(tally, name="learner")
            tally.inc("updates")
            monitor.step()
        runs = followed(path)

    (_, live), now = runs[0], time.time()
    assert live.ended
    assert heading(screen(runs, now=now), "learner") == ["learner", "ended"]


def test_a_run_that_logs_again_after_its_monitor_stopped_runs_again(
    tmp_path: Path,
) -> None:
    stopped = Event(START + 5.5, "", "stopped", "LoggerMonitor stopped", 18.0)
    runs = followed(store(tmp_path / "run.sqlite", pipeline(), (stopped,)))

    assert "age 11.0 s  last data 1.0 s ago" in screen(runs, now=START + 11)
    assert "no new data for 40.0 s" in screen(runs, now=START + 50)


def test_a_sparkline_follows_the_rate_of_the_last_minutes(tmp_path: Path) -> None:
    payloads = [
        (float(second), {"c/frames": 10.0 * second * second}, {"c/frames": COUNTER})
        for second in range(40)
    ]
    text = screen(followed(store(tmp_path / "run.sqlite", payloads)), now=START + 40)
    [frames] = [line for line in text.splitlines() if "frames" in line]
    spark = frames.split()[2]

    assert spark[0] < spark[len(spark) // 2] < spark[-1] == "█"


def test_what_a_run_keeps_is_bounded_whatever_its_length() -> None:
    from rlpulse.formats.records import Followed, Record

    live = LiveRun("long")
    for second in range(5 * HISTORY_POINTS):
        live.add(
            Followed([Record(START + second / 10, None, "c/size", 1.0, Kind.GAUGE)], [])
        )
        live.add(Followed([], [Event(START, "c", "hung", "m", 1.0)]))

    assert len(live.series["c/size"].history) == HISTORY_POINTS
    assert len(live.events) == 100
