"""``rlpulse top``'s live view: frames drawn through rich's recording console at 80x24, from real stores.

Each test writes a store with ``SQLiteLogger``, follows it as ``top`` does
(``RunFollower`` into ``LiveRun``), draws the frame as a terminal of 80
columns and 24 lines would show it, and reads the text back.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from rlpulse import Event, LoggerMonitor, SQLiteLogger, Tally
from rlpulse.naming import Kind
from rlpulse.read.top import TopView, frame, frame_lines, keys_of, plain
from tests.support import COUNTER, START, followed, heading, pipeline, screen, store


def test_a_frame_fits_80_by_24_with_the_run_named_at_the_top(tmp_path: Path) -> None:
    text = screen(followed(store(tmp_path / "run.sqlite", pipeline())))
    lines = text.splitlines()

    assert len(lines) == 24
    assert max(len(line) for line in lines) <= 80
    assert lines[0].startswith("run live in ")
    assert lines[0].endswith("/run.sqlite")
    assert "age 11.0 s" in lines[1]
    assert "q quit" in lines[-1]


def test_a_counter_shows_its_rate_a_sparkline_and_its_total(tmp_path: Path) -> None:
    text = screen(followed(store(tmp_path / "run.sqlite", pipeline())))
    [frames] = [line for line in text.splitlines() if "frames" in line]

    assert frames.split()[:2] == ["frames", "100/s"]
    assert frames.split()[-1] == "1000"
    assert "▄▄▄▄▄" in frames  # a steady rate: flat, halfway up
    assert "█" not in frames  # never a full bar, as a filled capacity draws


def test_a_blocks_line_wider_than_the_terminal_ends_with_an_ellipsis_and_the_latest_events_say_it_whole(
    tmp_path: Path,
) -> None:
    message = "waited " + "a long while for the learner to take a batch " * 3
    events = (Event(START + 9, "buffer", "stalled", message, 3.0),)
    runs = followed(store(tmp_path / "run.sqlite", pipeline(), events))
    view = TopView()
    for key in ["/", *"buffer", "enter"]:
        view.press(key)

    lines = screen(runs, view).splitlines()

    [in_block] = [line for line in lines if line.startswith("  !! waited a long")]
    assert len(in_block) == 80
    assert in_block.endswith("…")
    start = next(i for i, line in enumerate(lines) if "stalled buffer: waited" in line)
    said = [lines[start]]
    said += itertools.takewhile(
        lambda line: line.startswith(" " * 9), lines[start + 1 :]
    )
    assert len(said) > 1
    assert all(len(line) <= 80 and "…" not in line for line in said)
    assert " ".join(line.strip() for line in said).endswith(message.strip())


def test_a_paused_view_keeps_the_ages_it_had_when_reading_stopped(
    tmp_path: Path,
) -> None:
    runs = followed(store(tmp_path / "run.sqlite", pipeline()))
    view = TopView()
    view.press("p")

    assert "last data 1.0 s ago" in screen(runs, view, now=START + 11)
    paused = screen(runs, view, now=START + 50)
    assert "age 11.0 s  last data 1.0 s ago" in paused
    assert heading(paused, "buffer") == ["buffer", "running"]
    view.press("p")
    assert "no new data for 40.0 s" in screen(runs, view, now=START + 50)


def test_a_name_too_long_for_its_column_keeps_its_start_and_end(
    tmp_path: Path,
) -> None:
    metrics = {
        "collector/requested_frames_per_batch": 200.0,
        "workers/worker_0/heartbeat_age_s": 0.25,
        "a_watch_with_a_rather_long_name/size": 3.0,
    }
    path = store(tmp_path / "run.sqlite", [(1.0, metrics, {})])

    names = [line.split()[0] for line in screen(followed(path)).splitlines()[3:9]]

    assert names == [
        "a_watch_with…r_long_name",
        "size",
        "collector",
        "requested_f…_per_batch",
        "workers",
        "worker_0/he…beat_age_s",
    ]


def test_the_monitor_cost_is_in_the_header(tmp_path: Path) -> None:
    text = screen(followed(store(tmp_path / "run.sqlite", pipeline())))

    assert "monitor 0.4% of a core" in text.splitlines()[1]


# One window of a bottleneck watch: the learner waited 63% of it.
COLLECTOR_BOUND = {
    "bottleneck/window_s": 30.0,
    "bottleneck/consumer_busy_share": 0.37,
    "bottleneck/consumer_wait_share": 0.63,
    "bottleneck/bound_known": 1.0,
    "bottleneck/bound": -1.0,
    "bottleneck/side/collector": -1.0,
    "bottleneck/side/learner": 1.0,
}


def test_the_bottleneck_verdict_is_said_under_the_run_as_show_says_it(
    tmp_path: Path,
) -> None:
    window = COLLECTOR_BOUND
    unknown = {"bottleneck/bound_known": 0.0, "bottleneck/window_s": 30.0}
    text = screen(
        followed(store(tmp_path / "a.sqlite", [(1.0, window, {})])), now=START + 2
    )

    lines = text.splitlines()
    assert lines[2].startswith("  collector-bound: the learner waited 63% of the last")
    assert not any(line.startswith("bottleneck") for line in lines)  # no block
    said = " ".join(line.strip() for line in lines[2:5])
    assert "a faster collector up to 2.7x before the learner limits" in said
    assert all(len(line) <= 80 for line in lines)

    later = screen(
        followed(store(tmp_path / "b.sqlite", [(1.0, window, {}), (2.0, unknown, {})])),
        now=START + 3,
    )
    assert "collector-bound" not in later
    assert later.splitlines()[2].startswith("  unknown")


def test_a_narrow_terminal_says_the_verdicts_side_once(tmp_path: Path) -> None:
    runs = followed(store(tmp_path / "run.sqlite", [(1.0, COLLECTOR_BOUND, {})]))

    lines = plain(frame_lines(runs, TopView(), 20, 40, START + 2)).splitlines()

    assert lines[2] == "  collector-bound:"
    assert lines[3] == "    the learner"


def test_a_short_terminal_gives_the_header_half_its_lines_and_the_body_the_rest(
    tmp_path: Path,
) -> None:
    failing = tuple(
        Event(START + 9, "", "sink_failing", f"sink {name} failed: OSError()", 0.0)
        for name in ("A", "B", "C")
    )
    paths = [
        store(
            tmp_path / f"{name}.sqlite",
            [*pipeline(), (10.0, COLLECTOR_BOUND, {})],
            failing,
        )
        for name in ("a", "b")
    ]
    runs = followed(*paths)

    tall = plain(frame_lines(runs, TopView(), 80, 60, START + 11)).splitlines()
    short = plain(frame_lines(runs, TopView(), 80, 16, START + 11)).splitlines()

    medium = plain(frame_lines(runs, TopView(), 80, 24, START + 11)).splitlines()

    def header(lines: list[str]) -> list[str]:
        return lines[: next(i for i, line in enumerate(lines) if line.startswith("─"))]

    # A tall terminal: everything, the verdicts whole and every sink.
    assert sum("sink_failing" in line for line in header(tall)) == 6
    assert sum("learner limits" in line for line in header(tall)) == 2
    assert len(header(medium)) <= 24 // 2 - 1
    assert len(header(short)) <= 16 // 2 - 1
    for lines in (medium, short):
        # Each run named, with its state under it.
        assert [line for line in lines if line.startswith(("A run ", "B run "))] == [
            line for line in tall if line.startswith(("A run ", "B run "))
        ]
        assert sum("age 11.0 s" in line for line in header(lines)) == 2
        assert any(line.startswith("buffer") for line in lines)
    # Six runs on a short terminal: each still named, with its state.
    six = followed(*(store(tmp_path / f"{n}.sqlite", pipeline()) for n in "cdefgh"))
    crowded = plain(frame_lines(six, TopView(), 80, 16, START + 11)).splitlines()
    assert [line[:6] for line in header(crowded)[::2]] == [
        f"{letter} run " for letter in "ABCDEF"
    ]
    assert sum("age 11.0 s" in line for line in header(crowded)) == 6
    verdicts = [line for line in header(medium) if "collector-bound:" in line]
    assert len(verdicts) == 2
    assert all(line.endswith("a …") for line in verdicts)  # cut short, once
    assert sum("sink_failing" in line for line in header(short)) == 2  # the first


def test_one_plain_frame_ends_with_the_bottleneck_verdict_as_show_does(
    tmp_path: Path,
) -> None:
    path = store(tmp_path / "run.sqlite", [(1.0, COLLECTOR_BOUND, {})])

    *_, last_window, over_the_run = frame(path, None).splitlines()

    assert last_window.startswith(
        "bottleneck, the last window: collector-bound: the learner waited 63% of"
    )
    assert over_the_run == "bottleneck over the run: collector-bound 100% of 1 window"


def test_match_narrows_the_blocks_but_not_the_runs_age_cost_or_verdict(
    tmp_path: Path,
) -> None:
    payloads = pipeline()
    payloads += [(8.0 + second, {"late/x": 1.0}, {}) for second in range(3)]
    payloads += [(10.0, COLLECTOR_BOUND, {})]
    runs = followed(store(tmp_path / "run.sqlite", payloads), match="late/*")

    lines = screen(runs).splitlines()

    assert "age 11.0 s" in lines[1]  # from the run's first record, not late/x's
    assert "last data 1.0 s ago" in lines[1]
    assert "monitor 0.4% of a core" in lines[1]
    assert lines[2].startswith("  collector-bound:")
    blocks = [line.split()[0] for line in lines[3:] if line[:1].isalpha()]
    assert blocks[:1] == ["late"]
    assert "collector" not in blocks


def test_a_file_deleted_while_followed_says_its_last_figures_are_kept(
    tmp_path: Path,
) -> None:
    path = store(tmp_path / "run.sqlite", pipeline())
    runs = followed(path)
    path.unlink()
    follower, live = runs[0]
    live.add(follower.read_new())

    lines = screen(runs).splitlines()

    assert lines[1] == "  waiting: run.sqlite does not exist yet; showing what it held"
    assert any(line.startswith("collector") for line in lines)


def test_match_selecting_nothing_says_so_with_the_runs_watches(tmp_path: Path) -> None:
    runs = followed(store(tmp_path / "run.sqlite", pipeline()), match="zzz")

    header = screen(runs, width=160).splitlines()[1]
    narrow = screen(runs).splitlines()[1]

    assert "no metric matches --match 'zzz'; its watches: buffer, collector" in header
    # Last on its line: a long list of watches hides no state.
    assert narrow.index("last data") < narrow.index("no metric matches")


@pytest.mark.parametrize("how", ["match", "filter"])
def test_a_bottleneck_watch_asked_for_by_name_shows_its_figures(
    tmp_path: Path, how: str
) -> None:
    path = store(tmp_path / "run.sqlite", [(1.0, COLLECTOR_BOUND, {})])
    runs = followed(path, match="bottleneck" if how == "match" else None)
    view = TopView()
    if how == "filter":
        view.filter = "bottleneck"

    text = screen(runs, view, now=START + 2)

    assert heading(text, "bottleneck")[1] == "running"
    assert any(line.startswith("  consumer_wait_share") for line in text.splitlines())
    assert "no watch or metric matches" not in text


def test_the_filter_keeps_a_watch_or_the_metrics_it_matches(tmp_path: Path) -> None:
    runs = followed(store(tmp_path / "run.sqlite", pipeline()))
    view = TopView()
    for key in ["/", *"buffer", "enter"]:
        view.press(key)

    text = screen(runs, view)
    assert "size" in text
    assert "collector" not in text
    assert "filter: buffer" in text.splitlines()[-1]

    view.press("/")  # edits the filter in force
    assert screen(runs, view).splitlines()[-1].startswith("/buffer")
    for key in ["backspace"] * len("buffer") + list("loss"):
        view.press(key)
    text = screen(runs, view)
    assert "loss_mean" in text
    assert "size" not in text
    assert text.splitlines()[-1].startswith("/loss")

    view.press("escape")
    assert "size" in screen(runs, view)


def test_a_filter_that_matches_nothing_says_so(tmp_path: Path) -> None:
    runs = followed(store(tmp_path / "run.sqlite", pipeline()))
    view = TopView()
    for key in ["/", *"xyzzy", "enter"]:
        view.press(key)

    lines = screen(runs, view).splitlines()

    assert lines[3] == "no watch or metric matches 'xyzzy' (Esc clears the filter)"
    view.press("escape")
    assert "no watch or metric" not in screen(runs, view)


def thirty_watches() -> list[tuple[float, dict[str, float], dict[str, Kind]]]:
    # A body of 60 lines: more than a screen.
    return [
        (float(second), {f"w{index:02d}/size": float(index) for index in range(30)}, {})
        for second in range(3)
    ]


def test_the_body_scrolls_under_a_header_that_stays(tmp_path: Path) -> None:
    runs = followed(store(tmp_path / "run.sqlite", thirty_watches()))
    view = TopView()

    top = screen(runs, view, now=START + 3).splitlines()
    for key in keys_of(b"jjj\x1b[B"):
        view.press(key)
    scrolled = screen(runs, view, now=START + 3).splitlines()

    assert top[0] == scrolled[0]
    assert top[0].startswith("run live in ")
    assert top[3].startswith("w00")
    assert scrolled[3] == top[7]
    assert "lines 5-24 of 60" in scrolled[-1]
    for key in ["page down"] * 10:
        view.press(key)
    assert "lines 41-60 of 60" in screen(runs, view, now=START + 3).splitlines()[-1]


def test_a_block_scrolled_into_keeps_its_watch_at_the_top_of_the_body(
    tmp_path: Path,
) -> None:
    # Two watches with a metric of the same name, the second's block longer
    # than a screen.
    metrics = {"collector/busy_s": 1.0, "learner/busy_s": 2.0}
    metrics |= {f"learner/m{index:02d}": float(index) for index in range(30)}
    runs = followed(store(tmp_path / "run.sqlite", [(0.0, metrics, {})]))
    view = TopView()
    for key in "jjjjj":
        view.press(key)

    body = screen(runs, view, now=START + 1).splitlines()[3:-1]

    assert body[0].split() == ["learner", "running"]
    assert body[1].split()[:2] == ["m01", "1"]  # the line scrolled to, below it


def test_paging_through_a_long_block_shows_every_line_below_its_pinned_heading(
    tmp_path: Path,
) -> None:
    metrics = {f"learner/m{index:02d}": float(index) for index in range(50)}
    runs = followed(store(tmp_path / "run.sqlite", [(0.0, metrics, {})]))
    view = TopView()
    seen: list[str] = []
    footers = []
    for _ in range(6):
        lines = screen(runs, view, now=START + 1).splitlines()
        seen += [line.split()[0] for line in lines[3:-1] if line.startswith("  m")]
        footers.append(lines[-1])
        view.press("page down")

    assert sorted(set(seen)) == [f"m{index:02d}" for index in range(50)]
    # The footer counts the lines below the heading kept on top.
    assert "lines 1-20 of 51" in footers[0]
    assert "lines 21-39 of 51" in footers[1]
    assert "lines 33-51 of 51" in footers[-1]


@pytest.mark.parametrize(
    ("home", "end"),
    [
        (b"\x1b[1~", b"\x1b[4~"),  # tmux, screen, the Linux console
        (b"\x1b[H", b"\x1b[F"),  # xterm
        (b"\x1bOH", b"\x1bOF"),  # xterm's application mode
        (b"\x1b[7~", b"\x1b[8~"),  # rxvt
        (b"g", b"G"),
    ],
)
def test_end_shows_the_last_lines_and_home_the_first(
    tmp_path: Path, home: bytes, end: bytes
) -> None:
    runs = followed(store(tmp_path / "run.sqlite", thirty_watches()))
    view = TopView()

    for key in keys_of(end):
        view.press(key)
    bottom = screen(runs, view, now=START + 3).splitlines()
    for key in keys_of(home):
        view.press(key)
    top = screen(runs, view, now=START + 3).splitlines()

    assert "lines 41-60 of 60" in bottom[-1]
    assert "lines 1-20 of 60" in top[-1]


def test_the_footer_keeps_the_filter_the_pause_and_the_lines_shown_over_the_keys(
    tmp_path: Path,
) -> None:
    runs = followed(store(tmp_path / "run.sqlite", thirty_watches()))
    view = TopView()
    for key in ["/", *"size", "enter", "p"]:
        view.press(key)

    footer = screen(runs, view, now=START + 3).splitlines()[-1]

    assert footer.startswith("q quit  filter: size  PAUSED  lines 1-20 of 60  ")
    assert not footer.endswith("…")


def test_several_runs_show_the_same_watch_side_by_side(tmp_path: Path) -> None:
    slow = [
        (
            float(second),
            {"collector/frames": 50.0 * second},
            {"collector/frames": COUNTER},
        )
        for second in range(11)
    ]
    runs = followed(
        store(tmp_path / "a.sqlite", pipeline(), run="fast"),
        store(tmp_path / "b.sqlite", slow, run="slow"),
    )
    lines = screen(runs).splitlines()

    assert lines[0].startswith("A run fast in ")
    assert lines[2].startswith("B run slow in ")
    [frames] = [line for line in lines if "frames" in line]
    assert frames.split()[:2] == ["frames", "100/s"]
    assert "50/s" in frames.split()
    [size] = [line for line in lines if "size" in line]
    assert size.split()[-1] == "-"  # run B has no buffer
    assert heading("\n".join(lines), "collector") == [
        "collector",
        "A",
        "running",
        "B",
        "running",
    ]


def test_the_latest_events_of_several_runs_say_whose_they_are(tmp_path: Path) -> None:
    runs = followed(
        *(
            store(
                tmp_path / f"{name}.sqlite",
                pipeline(),
                (Event(START + second, "collector", "stalled", f"{name} stuck", 30.0),),
                run=name,
            )
            for name, second in (("first", 4.0), ("second", 5.0))
        )
    )

    lines = screen(runs).splitlines()
    events = lines[lines.index("latest events") + 1 :]

    assert events[0].startswith("A ")
    assert events[0].endswith("first stuck")
    assert events[1].startswith("B ")
    assert events[1].endswith("second stuck")


def test_a_narrow_terminal_shortens_the_names_to_show_every_runs_figures(
    tmp_path: Path,
) -> None:
    slow = [
        (
            float(second),
            {"collector/frames": 50.0 * second},
            {"collector/frames": COUNTER},
        )
        for second in range(11)
    ]
    runs = followed(
        store(tmp_path / "a.sqlite", pipeline(), run="fast"),
        store(tmp_path / "b.sqlite", slow, run="slow"),
    )

    [frames] = [
        line for line in screen(runs, width=40).splitlines() if "frames" in line
    ]

    assert frames.split()[:2] == ["frames", "100/s"]
    assert "50/s" in frames.split()


def test_each_runs_state_is_a_word_apart_however_long_it_is(tmp_path: Path) -> None:
    stopped = [
        (offset - 240.0, metrics, kinds) for offset, metrics, kinds in pipeline()
    ]
    runs = followed(
        store(tmp_path / "a.sqlite", pipeline(), run="fast"),
        store(tmp_path / "b.sqlite", stopped, run="stopped"),
    )

    text = screen(runs, width=60)

    # "B quiet 4 min 01 s" fills its column of 18 characters.
    assert heading(text, "collector")[:5] == ["collector", "A", "running", "B", "quiet"]


@pytest.mark.parametrize(
    ("data", "keys"),
    [
        (b"q", ["q"]),
        (b"/size\r", ["/", "s", "i", "z", "e", "enter"]),
        (b"\x1b", ["escape"]),
        (b"\x1b[A\x1b[B\x1b[5~\x1b[6~", ["up", "down", "page up", "page down"]),
        (b"x\x7f", ["x", "backspace"]),
    ],
)
def test_keys_are_read_as_the_terminal_sends_them(data: bytes, keys: list[str]) -> None:
    assert keys_of(data) == keys


def test_p_pauses_and_q_quits_but_not_while_typing_a_filter() -> None:
    view = TopView()
    assert view.press("p") is False
    assert view.paused
    view.press("/")
    assert view.press("q") is False
    assert view.filter == "q"
    view.press("enter")
    assert view.press("q") is True


def test_a_figure_too_wide_for_its_column_keeps_its_leading_digits(
    tmp_path: Path,
) -> None:
    counters = {"w/cpu_s": Kind.COUNTER, "w/events": Kind.COUNTER}
    payloads = [
        (1.0, {"w/cpu_s": 0.0, "w/events": 0.0}, counters),
        (2.0, {"w/cpu_s": 0.001429, "w/events": 12_345_678.0}, counters),
    ]
    lines = screen(followed(store(tmp_path / "run.sqlite", payloads)), now=START + 3)

    cpu = next(line for line in lines.splitlines() if line.startswith("  cpu_s"))
    assert cpu.split()[1] == "0.0014/s"  # 0.001429/s is wider than its column
    events = next(line for line in lines.splitlines() if line.startswith("  events"))
    assert events.split()[1] == "12.34M/s"


@pytest.mark.parametrize("width", [80, 120])
def test_exact_figures_are_written_whole_however_long(
    tmp_path: Path, width: int
) -> None:
    kinds = {"learner/busy_s": Kind.COUNTER, "learner/loss": Kind.GAUGE}
    payloads = [
        (1.0, {"learner/busy_s": 0.0, "learner/loss": 0.5}, kinds),
        (4.0, {"learner/busy_s": 23.89170909600074, "learner/loss": 16850.0}, kinds),
    ]
    runs = followed(store(tmp_path / "run.sqlite", payloads))

    text = screen(runs, now=START + 5, width=width, exact=True)

    lines = text.splitlines()
    assert max(map(len, lines)) <= width
    busy = next(line for line in lines if line.startswith("  busy_s"))
    assert busy.split()[1] == f"{23.89170909600074 / 3!r}/s"
    assert busy.split()[-1] == "23.89170909600074"  # the count, its digits all there
    loss = next(line for line in lines if line.startswith("  loss"))
    assert loss.split()[1] == "16850"  # a whole number, as show --exact writes it
    assert "…" not in busy + loss


def test_exact_figures_too_wide_for_several_runs_are_cut_at_their_end_and_say_so(
    tmp_path: Path,
) -> None:
    kinds = {"learner/busy_s": Kind.COUNTER}
    late = {
        "learner/busy_s": 23.89170909600074,
        "learner/x_p50": 1.2345678901234567,
        "learner/x_p90": 12345.678901234567,
        "learner/x_p99": 99999.12345678901,
    }
    payloads = [(1.0, {"learner/busy_s": 0.0}, kinds), (4.0, late, kinds)]
    paths = [store(tmp_path / f"{n}.sqlite", payloads) for n in "abc"]

    lines = screen(followed(*paths), now=START + 5, exact=True).splitlines()

    assert max(map(len, lines)) <= 80
    heading = next(line for line in lines if line.startswith("learner"))
    busy = next(line for line in lines if line.startswith("  busy_s"))
    quantiles = next(line for line in lines if line.startswith("  x "))
    # Each run's cell ends where its heading's word ends, as without --exact.
    ends = [heading.index(f"{letter} running") + len("A running") for letter in "ABC"]
    assert [index + 1 for index, mark in enumerate(busy) if mark == "▄"] == ends
    assert busy.split()[1] == "7.963903032000…"
    for line in (busy, quantiles):
        for figure in line.split()[1:]:
            assert (
                figure in {"p50", "p90", "p99", "▄"}
                or figure.endswith("…")
                or (figure.replace(".", "").replace("/s", "").isdigit())
            )
    assert "12345.67890123456 " not in quantiles  # never cut unmarked


class Outage:
    """A sink whose far end is away until ``back`` is set."""

    def __init__(self) -> None:
        self.back = False

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        if not self.back:
            raise OSError("connection refused")


class Archive(Outage):
    pass


class Dashboard(Outage):
    pass


def test_each_failing_sink_is_shown_until_it_recovers_itself(tmp_path: Path) -> None:
    # A real monitor's events: two sinks fail, then only the archive recovers.
    path = tmp_path / "run.sqlite"
    archive, dashboard, collector = Archive(), Dashboard(), Tally()
    with SQLiteLogger(path, run="live") as store:
        monitor = LoggerMonitor(
            [store, archive, dashboard], background=False, on_error="ignore"
        )
        monitor.watch(collector, name="collector")
        monitor.step()
        archive.back = True
        collector.inc("frames", 100)
        monitor.step()
        monitor.stop()
    runs = followed(path)
    now = runs[0][1].last_time + 1.0

    assert sinks_said(screen(runs, now=now)) == [
        "sinks: sink_failing: sink Dashboard failed: OSError('connection refused')"
    ]


def test_every_sink_still_failing_has_a_line_of_its_own(tmp_path: Path) -> None:
    events = (
        Event(START + 8, "", "sink_failing", "sink Archive failed: OSError()", 0.0),
        Event(START + 9, "", "sink_failing", "sink Dashboard failed: OSError()", 0.0),
    )
    text = screen(followed(store(tmp_path / "run.sqlite", pipeline(), events)))

    assert sinks_said(text) == [
        "sinks: sink_failing: sink Dashboard failed: OSError()",
        "sink_failing: sink Archive failed: OSError()",
    ]


def sinks_said(text: str) -> list[str]:
    """The header's lines about the sinks, from ``sinks:`` to the rule below the header."""
    lines = [line.strip() for line in text.splitlines()]
    start = next(
        (index for index, line in enumerate(lines) if line.startswith("sinks:")),
        len(lines),
    )
    end = next(index for index, line in enumerate(lines) if line.startswith("───"))
    return lines[start:end]


def test_a_plain_frame_fits_its_tables_to_a_width_and_keeps_its_sentences_whole(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.sqlite"
    long_name = "replay_buffer/samples_returned_per_second"
    with SQLiteLogger(path, run="r") as sink:
        sink.log_metrics({long_name: 9930.0, "collector/frames": 0.0}, timestamp=START)
        sink.log_event(
            Event(
                START + 1,
                "collector",
                "stalled",
                "no progress (frames) for 30.0s",
                30.0,
            )
        )
        sink.log_metrics(
            {long_name: 9931.0, "collector/frames": 100.0}, timestamp=START + 4
        )

    whole = frame(path, None).splitlines()
    fitted = frame(path, None, width=60).splitlines()

    table = fitted[fitted.index(next(x for x in fitted if x.startswith("metric "))) :]
    table = table[: table.index("")]
    assert all(len(line) <= 60 for line in table)
    assert any(line.startswith("replay_buf") and "…" in line for line in table)
    assert any(line.startswith(f"{long_name}  ") for line in whole)
    stalled = [line for line in fitted if "no progress (frames) for 30.0s" in line]
    assert len(stalled) == 1


def test_a_buffer_short_of_full_is_never_drawn_or_said_full(tmp_path: Path) -> None:
    payloads = [
        (
            float(second),
            {"buffer/size": 19_990.0, "buffer/capacity": 20_000.0},
            {"buffer/size": Kind.GAUGE, "buffer/capacity": Kind.GAUGE},
        )
        for second in range(10)
    ]
    text = screen(followed(store(tmp_path / "run.sqlite", payloads)))
    [size] = [line for line in text.splitlines() if line.split()[:1] == ["size"]]

    assert "99% of 20,000" in size
    assert "░" in size  # a bar short of full


def test_names_give_way_to_the_figures_on_a_narrow_terminal(tmp_path: Path) -> None:
    text = screen(followed(store(tmp_path / "run.sqlite", pipeline())), width=40)
    [frames] = [line for line in text.splitlines() if "frames" in line]

    assert max(len(line) for line in text.splitlines()) <= 40
    assert frames.count("▄") >= 8  # the sparkline, not four marks of it
