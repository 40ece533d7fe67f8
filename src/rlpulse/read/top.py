"""``rlpulse top``: runs followed while other processes write them, in a terminal, as people use htop.

Two ways to show a run. On a terminal, with ``rich`` installed
(``rlpulse[top]``), the live view (:func:`follow`): a header that stays put
(each run's name, age and whether data still comes, the monitor's own cost,
the bottleneck verdict where a run logs one, a sink that fails) over a
body that scrolls, a block per watch: its state from the run's events
(running, stalled, hung, dropping), its counters' rates with a sparkline
of the last minutes and their totals, its gauges (as bars where they fill
a capacity), its percentiles, then the latest events. Several runs show
side by side, the same watch's figures in adjacent columns. Each frame
reads only what was written since the last (:class:`~rlpulse.formats.RunFollower`)
into what the view keeps (:class:`~rlpulse.read.live.LiveRun`). Keys: ``q``
quits, ``/`` filters watches or metrics, arrows or ``j``/``k`` scroll,
Home and End go to the first and the last lines, ``p`` pauses. Everywhere else (a pipe, a file, ``--once``, no ``rich``)
one plain frame (:func:`frame`): the run's summary as ``rlpulse show``
prints it, its latest events and its bottleneck verdict.

A frame is built as plain :class:`Segment` lines (:func:`frame_lines`),
without ``rich``; :func:`render` hands them to ``rich``, the one module of
rlpulse that imports it, and only when drawing.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import select
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from rlpulse.formats import RunFollower
from rlpulse.read.live import MONITOR_WATCH, Line, LiveRun
from rlpulse.read.match import Match, patterns_text, select_metrics
from rlpulse.read.records import (
    RunFileError,
    RunFileLockedError,
    RunFileWarning,
    read_events,
)
from rlpulse.read.summary import (
    format_event,
    format_summary,
    format_verdicts,
    narrow_summary,
    run_letter,
    summarize_file,
)
from rlpulse.runtime.events import mark_of
from rlpulse.text import (
    format_duration,
    format_exact,
    format_number,
    shortened,
    wrap_words,
)
from rlpulse.verdict import describe_metrics

if TYPE_CHECKING:
    from rich.console import RenderableType

__all__ = [
    "QUIET_AFTER_S",
    "Segment",
    "TopView",
    "follow",
    "frame",
    "frame_lines",
    "keys_of",
    "render",
    "sparkline",
]

QUIET_AFTER_S = 5.0
"""The shortest silence that reads as "no new data": longer for a run that logs less often."""

_EVENTS_SHOWN = 5
_SPARKS = "▁▂▃▄▅▆▇█"
_VALUE_WIDTH = 9
_NOTE_WIDTH = 14
_LABEL_WIDTH = 24
_NARROWEST_LABEL = 10
_NARROWEST_CELL = 16  # a figure and a sparkline of four
_READ_BUDGET_S = 0.25  # the most a frame spends catching up on a long run
# An event's line coloured by its mark (runtime.events.mark_of); a verdict
# as it is.
_EVENT_STYLES = {"!!": "red", "ok": "green"}


# One plain frame


def frame(
    path: Path,
    run: str | None,
    match: Match = None,
    width: int | None = None,
    *,
    exact: bool = False,
) -> str:
    """One plain frame of ``rlpulse top``: the summary of the run's metrics ``match`` keeps, its latest events, then the bottleneck verdict as ``rlpulse show`` ends.

    What a pipe, a file or ``--once`` gets. A ``width`` (a terminal's)
    fits the summary's tables to it as ``show`` does (``None``: names
    whole); ``exact=True`` writes every value in full. Raises what :func:`rlpulse.read` raises for a missing,
    empty or corrupt file, and :class:`~rlpulse.read.match.MatchError` when
    ``match`` keeps none of the run's metrics.

    >>> import tempfile, pathlib
    >>> from rlpulse import CSVLogger
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "run.csv"
    ...     with CSVLogger(path) as sink:
    ...         sink.log_metrics({"c/frames": 10.0, "b/size": 3.0}, step=1, timestamp=100.0)
    ...     print(frame(path, None, match="c/*").split("\\n", 1)[1])
    <BLANKLINE>
    metric    last  min  max  mean rate/s
    c/frames    10   10   10
    """
    summary = narrow_summary(summarize_file(path, run), match)
    lines = format_summary(summary, exact=exact, width=width).split("\n")
    events = _latest_events(path, run)
    if events:
        lines += ["", "latest events:", *events]
    if verdicts := format_verdicts(summary):
        lines += ["", *verdicts.split("\n")]
    return "\n".join(lines)


def _latest_events(path: Path, run: str | None) -> list[str]:
    try:
        events = list(read_events(path, run))
    except RunFileLockedError:
        raise
    except RunFileError:
        return []  # a CSV file stores none
    return [format_event(event) for event in events[-_EVENTS_SHOWN:]]


# The live view's frame, without rich


class Segment(NamedTuple):
    """A stretch of a frame's line in one style (a ``rich`` style name; ``""`` plain)."""

    text: str
    style: str = ""


@dataclass
class TopView:
    """What the person at the keyboard chose: the filter, the scroll position, a pause; :meth:`press` takes a key.

    >>> view = TopView()
    >>> for key in ["/", "b", "u", "f", "enter", "j", "j", "k", "p"]:
    ...     quit = view.press(key)
    >>> view.filter, view.scroll, view.paused, quit, view.press("q")
    ('buf', 1, True, False, True)
    >>> for key in ["/", "f", "backspace", "backspace", "enter"]:
    ...     quit = view.press(key)
    >>> view.filter  # "/" edits the filter in force
    'bu'
    """

    filter: str = ""
    typing: bool = False
    scroll: int = 0
    paused: bool = False
    page: int = 10
    # The time a paused view's frames are drawn at: what was read stays as
    # old as it was when reading stopped, so a pause never reads as a
    # writer gone quiet.
    paused_at: float | None = None

    def press(self, key: str) -> bool:
        """Take one key (as :func:`keys_of` names it); whether it quits."""
        if self.typing:
            if key == "enter":
                self.typing = False
            elif key == "escape":
                self.typing, self.filter = False, ""
            elif key == "backspace":
                self.filter = self.filter[:-1]
            elif len(key) == 1 and key.isprintable():
                self.filter += key
            self.scroll = 0
            return False
        if key in ("q", "Q", "end of input"):
            return True
        if key == "/":
            # The filter in force is edited, not thrown away: backspace
            # shortens it, Esc clears it.
            self.typing, self.scroll = True, 0
        elif key == "escape":
            self.filter, self.scroll = "", 0
        elif key in ("down", "j"):
            self.scroll += 1
        elif key in ("up", "k"):
            self.scroll = max(0, self.scroll - 1)
        elif key in ("page down", " "):
            self.scroll += self.page
        elif key == "page up":
            self.scroll = max(0, self.scroll - self.page)
        elif key in ("home", "g"):
            self.scroll = 0
        elif key in ("end", "G"):
            # The frame brings it back to the last screenful.
            self.scroll = sys.maxsize
        elif key in ("p", "P"):
            self.paused = not self.paused
        return False

    def keeps(self, watch: str, label: str) -> bool:
        """Whether the filter keeps ``label`` of ``watch``: a pattern as ``--match`` takes it, matched against the watch, the line, or both."""
        if not self.filter:
            return True
        return bool(
            select_metrics([watch], self.filter)
            or select_metrics([label], self.filter)
            or select_metrics([f"{watch}/{label}"], self.filter)
        )


# A terminal's key sequence: CSI parameters and a final byte, or SS3 and one.
_UNKNOWN_ESCAPE = re.compile(r"\x1b(?:\[[0-9;]*[@-~]|O.)")

_ESCAPES = {
    "\x1b[A": "up",
    "\x1b[B": "down",
    "\x1bOA": "up",
    "\x1bOB": "down",
    "\x1b[5~": "page up",
    "\x1b[6~": "page down",
    # Home and End as xterm, its application mode, tmux and the Linux
    # console, and rxvt send them.
    "\x1b[H": "home",
    "\x1bOH": "home",
    "\x1b[1~": "home",
    "\x1b[7~": "home",
    "\x1b[F": "end",
    "\x1bOF": "end",
    "\x1b[4~": "end",
    "\x1b[8~": "end",
    "\x1b[C": "right",
    "\x1b[D": "left",
}


def keys_of(data: bytes) -> list[str]:
    """The keys in what the terminal sent at once: characters, and ``up``, ``down``, ``enter``, ``escape``, ``backspace``, ….

    >>> keys_of(b"j\\x1b[Aq"), keys_of(b"\\x1b"), keys_of(b"\\r\\x7f")
    (['j', 'up', 'q'], ['escape'], ['enter', 'backspace'])
    >>> keys_of(b"\\x1bOQ"), keys_of(b"\\x1b[15~j")  # F2, F5: no keys of rlpulse's
    ([], ['j'])
    """
    text = data.decode("utf-8", errors="replace")
    keys = []
    index = 0
    while index < len(text):
        character = text[index]
        if character == "\x1b":
            for sequence, name in _ESCAPES.items():
                if text.startswith(sequence, index):
                    keys.append(name)
                    index += len(sequence)
                    break
            else:
                # Another key's sequence (F1, F2, ...) is skipped whole: its
                # letters are no keys of their own. A lone ESC is escape.
                unknown = _UNKNOWN_ESCAPE.match(text, index)
                if unknown is None:
                    keys.append("escape")
                    index += 1
                else:
                    index = unknown.end()
            continue
        if character in "\r\n":
            keys.append("enter")
        elif character in "\x7f\b":
            keys.append("backspace")
        else:
            keys.append(character)
        index += 1
    return keys


_FLAT = 1 / len(_SPARKS)
"""A sparkline's values within this share of the highest (one of its levels, from zero) draw as a line that never moved."""


def sparkline(values: Sequence[float | None], width: int) -> str:
    """``values`` drawn in ``width`` characters, from zero (or the lowest below it) to the highest (``None``: a gap).

    >>> sparkline([0.0, 1.0, 2.0, 3.0, None], 5)
    '▁▃▆█ '
    >>> sparkline([5.0, 5.0], 2), sparkline([0.0, 0.0], 2), sparkline([50.0, 50.6], 2)
    ('▄▄', '▁▁', '▄▄')
    >>> sparkline([40.0, 50.0], 2)
    '▇█'
    """
    shown = [
        value for value in values[-width:] if value is not None and math.isfinite(value)
    ]
    if not shown:
        return " " * width
    # From zero, as htop draws its graphs: a steady rate reads as steady.
    # A line that never moved has no height to show: it is drawn halfway,
    # never full like a filled bar (or at the floor, where it is zero); so
    # is one that moved by less than a level, which from zero would draw as
    # a full bar all along (50.0 to 50.6 a second).
    low, high = min(0.0, *shown), max(shown)
    flat = high - min(shown) <= _FLAT * abs(high)
    marks = []
    for value in values[-width:]:
        if value is None or not math.isfinite(value):
            marks.append(" ")
        elif flat:
            marks.append(_SPARKS[3] if high else _SPARKS[0])
        else:
            level = (value - low) / (high - low)
            marks.append(_SPARKS[round(level * (len(_SPARKS) - 1))])
    return "".join(marks).ljust(width)


def _bar(fill: float, width: int) -> str:
    """A bar ``width`` wide filled to ``fill`` (0 to 1), rounded down: a bar short of full never reads as full.

    >>> _bar(0.9995, 10), _bar(1.0, 10), _bar(1.5, 4), _bar(-0.5, 4)
    ('█████████░', '██████████', '████', '░░░░')
    """
    filled = min(max(math.floor(fill * width), 0), width)
    return "█" * filled + "░" * (width - filled)


class _Source(NamedTuple):
    # A followed run: where it comes from, and what the view keeps of it.
    follower: RunFollower
    live: LiveRun


def frame_lines(
    runs: Sequence[tuple[RunFollower, LiveRun]],
    view: TopView,
    width: int,
    height: int,
    now: float,
    *,
    exact: bool = False,
) -> list[list[Segment]]:
    """The live view's frame, ``height`` lines of at most ``width`` characters: the header, the body scrolled as ``view`` says, the footer.

    ``runs`` are each run's follower (its file, its run, what it waits for)
    and what the view keeps of it; ``now`` the time (seconds since the
    epoch) that ages and silences are counted to, or while ``view`` is
    paused the time of its first paused frame.
    """
    if not view.paused:
        view.paused_at = None
    elif view.paused_at is None:
        view.paused_at = now
    now = view.paused_at if view.paused_at is not None else now
    sources = [_Source(follower, live) for follower, live in runs]
    header = _header(sources, width, height, now)
    body, headings = _body(sources, view, width, now, exact)
    room = max(1, height - len(header) - 1)
    view.page = room
    last_scroll = max(0, len(body) - room)
    if room > 1 and _pinned(headings, last_scroll) is not None:
        last_scroll += 1  # the last line comes below its block's heading
    view.scroll = max(0, min(view.scroll, last_scroll))
    shown = body[view.scroll : view.scroll + room]
    # A block scrolled into keeps its heading on top, above the lines that
    # follow: a metric of the same name in two watches (busy_s) says whose
    # it is.
    heading = _pinned(headings, view.scroll) if room > 1 else None
    if heading is not None:
        shown = [body[heading], *shown[: room - 1]]
    footer = _footer(view, len(body), room, width, len(shown) - (heading is not None))
    lines = [*header, *shown]
    lines += [[]] * (height - 1 - len(lines))
    return [_cut(line, width) for line in [*lines[: height - 1], footer]]


# What a header line gives way to on a short terminal, last to first: a
# verdict's further lines, then each sink's line but the first, then the
# verdicts' first lines, then the first sink's; a run's name and state stay.
_STAYS, _FIRST_SINK, _VERDICT, _ANOTHER_SINK, _FURTHER = range(5)
_CUT_SHORT = Segment(" …")
_EVENT_INDENT = len("00:00:00 ")
"""How far an event's further lines are indented: past its time."""


def _header(
    sources: Sequence[_Source], width: int, height: int, now: float
) -> list[list[Segment]]:
    """The header: each run's file, state, verdict and failing sinks, over a rule; at most half of ``height``, what says least giving way first."""
    lines: list[tuple[int, list[Segment]]] = []
    several = len(sources) > 1
    for index, (follower, live) in enumerate(sources):
        title = f"{run_letter(index)} " if several else ""
        title += f"run {follower.run} in " if follower.run else ""
        where = str(follower.path)
        if len(title) + len(where) > width:  # the file's name, not the run's
            where = "…" + where[len(title) + len(where) + 1 - width :]
        lines.append((_STAYS, [Segment(title, "bold"), Segment(where)]))
        lines.append((_STAYS, _run_status(follower, live, now)))
        lines += _verdicts(live, width)
        sinks = live.state("", now)
        # One line per sink that fails, or dropped of late: newest first.
        for index, event in enumerate((*sinks.streaks, *sinks.recent)):
            label = "  sinks: " if index == 0 else " " * len("  sinks: ")
            line = [
                Segment(label, "bold"),
                Segment(f"{event.kind}: {event.message}", "bold red"),
            ]
            lines.append((_FIRST_SINK if index == 0 else _ANOTHER_SINK, line))
    # Each run's name and state stay, on a terminal too short for them too.
    room = max(2 * len(sources), height // 2 - 1)
    for giving_way in (_FURTHER, _ANOTHER_SINK, _VERDICT, _FIRST_SINK):
        if len(lines) <= room:
            break
        kept = []
        for rank, line in lines:
            if rank < giving_way:
                kept.append((rank, line))
            elif kept and rank == _FURTHER and kept[-1][0] == _VERDICT:
                # A verdict cut short says so, once.
                verdict = kept[-1][1]
                if verdict[-1] != _CUT_SHORT:
                    kept[-1] = (_VERDICT, [*verdict, _CUT_SHORT])
        lines = kept
    shown = [line for _, line in lines[:room]]
    shown.append([Segment("─" * width, "dim")])
    return shown


def _watch_word(live: LiveRun, watch: str, now: float) -> tuple[str, str]:
    """What a watch's heading says of it, and in which style: what is wrong with it, ``quiet`` for how long where it has logged nothing for as long as the run's writer reads as stopped, else ``running``."""
    state = live.state(watch, now)
    if not state.healthy:
        return state.word, "bold red"
    if watch not in live.watches():
        return "-", "green"
    if live.ended:
        return "ended", "dim"
    silent = now - live.last_time_of(watch)
    if silent > live.quiet_after(QUIET_AFTER_S):
        return f"quiet {format_duration(silent)}", "yellow"
    return state.word, "green"


def _run_status(follower: RunFollower, live: LiveRun, now: float) -> list[Segment]:
    if follower.waiting is not None:
        # The header's first line has the whole path.
        waiting = follower.waiting.replace(str(follower.path), follower.path.name)
        if not math.isnan(live.last_time) and not follower.path.exists():
            # Deleted while followed: what it held stays until it is written anew.
            waiting += "; showing what it held"
        return [Segment("  waiting: ", "bold yellow"), Segment(waiting)]
    if math.isnan(live.last_time):
        return [Segment("  waiting for its first records", "yellow")]
    line = _run_age(live, now)
    cost = _monitor_cost(live)
    if cost:
        line.append(Segment("  monitor " + cost, "dim"))
    if live.matches_nothing():
        # Last: its list of watches, however long, hides no state.
        watches = ", ".join(live.watches(every=True))
        line.append(
            Segment(
                f"  no metric matches --match {patterns_text(live.match)}; "
                f"its watches: {watches}",
                "bold yellow",
            )
        )
    return line


def _run_age(live: LiveRun, now: float) -> list[Segment]:
    """How long the run ran and how long ago it ended, where its monitor said it stopped; else its age and how long ago it last logged ("no new data" once that reads as its writer having stopped)."""
    if live.ended:
        ran = format_duration(max(0.0, live.last_time - live.first_time))
        ago = format_duration(max(0.0, now - live.stopped_at))
        return [Segment(f"  ran {ran}"), Segment(f"  ended {ago} ago", "bold")]
    age = Segment(f"  age {format_duration(max(0.0, now - live.first_time))}")
    silent = now - live.last_time
    if silent > live.quiet_after(QUIET_AFTER_S):
        return [
            age,
            Segment(f"  no new data for {format_duration(silent)}", "bold red"),
        ]
    return [
        age,
        Segment(f"  last data {format_duration(max(0.0, silent))} ago", "green"),
    ]


def _monitor_cost(live: LiveRun) -> str:
    # The monitor's own CPU time is a counter: its rate is the share of a core.
    parts = []
    cpu = live.series.get(f"{MONITOR_WATCH}/cpu_s")
    if cpu is not None and math.isfinite(cpu.rate):
        parts.append(f"{100 * cpu.rate:.2g}% of a core")
    for counter in ("dropped", "rejected", "errors"):
        count = live.value(f"{MONITOR_WATCH}/{counter}")
        if count:
            parts.append(f"{format_number(count)} {counter}")
    return ", ".join(parts)


def _verdicts(live: LiveRun, width: int) -> list[tuple[int, list[Segment]]]:
    # The sentence of each bottleneck watch's latest window, as the console
    # and ``rlpulse show`` say it (rlpulse.verdict), wrapped to the width:
    # its first line, then its further lines (see _header).
    lines: list[tuple[int, list[Segment]]] = []
    for watch in live.watches(every=True):
        if live.value(f"{watch}/bound_known") is None:
            continue
        sentence = describe_metrics(live.latest(watch))
        if sentence is None:
            continue
        side, _, rest = sentence.partition(": ")
        # The side ("collector-bound:") stays whole on the first line, the
        # one drawn in its own style; a narrow terminal cuts what follows.
        wrapped = wrap_words(
            f"{side}: {rest}",
            width - 4,
            initial_indent="  ",
            subsequent_indent="    ",
            break_on_hyphens=False,
            break_long_words=False,
        )
        first = wrapped[0][len("  ") + len(side) + 1 :]
        lines.append(
            (
                _VERDICT,
                [Segment("  "), Segment(f"{side}:", "bold magenta"), Segment(first)],
            )
        )
        lines += [(_FURTHER, [Segment(line)]) for line in wrapped[1:]]
    return lines


class _Body(NamedTuple):
    # The body's lines, and for each the index of the heading of its block
    # (a watch's, or the latest events'); None outside a block.
    lines: list[list[Segment]]
    headings: list[int | None]


def _body(
    sources: Sequence[_Source], view: TopView, width: int, now: float, exact: bool
) -> _Body:
    watches = _shown_watches(sources, view, now)
    # Names give way first on a narrow terminal, to two fifths of it (at 40
    # columns a name of 24 left a sparkline of four): every run's figures show.
    label_width = min(
        _LABEL_WIDTH,
        max(
            _NARROWEST_LABEL,
            min(width * 2 // 5, width - len(sources) * _NARROWEST_CELL),
        ),
    )
    cell_width = max(12, (width - label_width) // len(sources))
    columns = _columns(sources, watches, cell_width, exact)
    lines: list[list[Segment]] = []
    headings: list[int | None] = []
    for watch in watches:
        blocks = [source.live.block(watch) for source in sources]
        labels = list(
            dict.fromkeys(
                line.label
                for block in blocks
                for line in block
                if view.keeps(watch, line.label)
            )
        )
        troubled = any(not source.live.state(watch, now).healthy for source in sources)
        if not labels and not (troubled and view.keeps(watch, "")):
            continue
        heading = [
            Segment(shortened(watch, label_width).ljust(label_width), "bold cyan")
        ]
        for index, source in enumerate(sources):
            word, style = _watch_word(source.live, watch, now)
            if len(sources) > 1:
                # A blank before each run's word, however long: "A running"
                # and "B quiet 4 min 01 s" never read as one.
                word = f"{run_letter(index)} {word}"
                if len(word) >= cell_width:
                    word = word[: cell_width - 2] + "…"
                word = word.rjust(cell_width - 1)
            heading.append(Segment(" " + word, style))
        lines.append(heading)
        by_label = [{line.label: line for line in block} for block in blocks]
        for label in labels:
            line = [
                Segment("  " + shortened(label, label_width - 2).ljust(label_width - 2))
            ]
            for source, lines_of_run in zip(sources, by_label, strict=True):
                cell = lines_of_run.get(label)
                line += _cell(cell, source.live.last_time, columns)
            lines.append(line)
        if len(sources) == 1:
            for event in (
                *sources[0].live.state(watch, now).streaks,
                *sources[0].live.state(watch, now).recent,
            ):
                lines.append([Segment("  !! " + event.message, "red")])
        headings += [len(headings)] * (len(lines) - len(headings))
    if view.filter and not lines:
        lines.append(
            [
                Segment(f"no watch or metric matches {view.filter!r}", "bold yellow"),
                Segment(" (Esc clears the filter)"),
            ]
        )
        headings.append(None)
    events = [
        (event, index)
        for index, source in enumerate(sources)
        for event in source.live.events
    ]
    if events:
        heading_at = len(lines)
        lines.append([Segment("latest events", "bold")])
        latest = sorted(events, key=lambda pair: pair[0].wall_time)[-_EVENTS_SHOWN:]
        for event, index in latest:
            # Several runs' events are one list: each says whose it is. Each
            # is whole, broken between words (a block's line of it is cut).
            whose = f"{run_letter(index)} " if len(sources) > 1 else ""
            style = _EVENT_STYLES.get(mark_of(event.kind), "")
            said = wrap_words(
                whose + format_event(event),
                width,
                subsequent_indent=" " * (len(whose) + _EVENT_INDENT),
                break_on_hyphens=False,
            )
            lines += [[Segment(line, style)] for line in said]
        headings += [heading_at] * (len(lines) - len(headings))
    return _Body(lines, headings)


def _shown_watches(sources: Sequence[_Source], view: TopView, now: float) -> list[str]:
    """The watches with a block: those that logged in any run, and those that have not but are in trouble (a first ``stats()`` call that hangs), the monitor's own last.

    A bottleneck watch is said in words in the header instead, unless the
    filter or ``--match`` asks for it by name: then its figures show too.
    """
    names = set()
    for _, live in sources:
        names.update(live.watches())
        names.update(
            event.watch
            for event in live.events
            if event.watch and not live.state(event.watch, now).healthy
        )

    def asked_for(watch: str) -> bool:
        return any(
            (live.match is not None and watch in live.watches())
            or (
                view.filter
                and any(view.keeps(watch, line.label) for line in live.block(watch))
            )
            for _, live in sources
        )

    return sorted(
        (
            watch
            for watch in names
            # Only a bottleneck watch needs asking for: the others show anyway.
            if all(live.value(f"{watch}/bound_known") is None for _, live in sources)
            or asked_for(watch)
        ),
        key=lambda watch: (watch == MONITOR_WATCH, watch),
    )


class _Columns(NamedTuple):
    # How a run's cell is laid out: its value, graphic and note (a
    # counter's count, a bar's capacity) widths, and how numbers are written.
    value: int
    graphic: int
    note: int
    number: Callable[[float], str]


def _columns(
    sources: Sequence[_Source], watches: Sequence[str], cell_width: int, exact: bool
) -> _Columns:
    """The layout of every cell ``cell_width`` wide: with ``exact``, the value and note columns as wide as their longest figure, the graphic giving way (a figure wider than the cell is cut at its end, marked …)."""
    note = _NOTE_WIDTH if cell_width >= 34 else 0
    if not exact:
        return _Columns(
            _VALUE_WIDTH,
            max(1, cell_width - _VALUE_WIDTH - note - 3),
            note,
            format_number,
        )
    lines = [
        line for _, live in sources for watch in watches for line in live.block(watch)
    ]
    value = max(
        [_VALUE_WIDTH] + [len(_value_text(line, format_exact)) for line in lines]
    )
    value = max(1, min(value, cell_width - 3))
    if note:
        note = max([note] + [len(_note(line, format_exact)) for line in lines])
        if value + note + 4 > cell_width:
            note = 0  # a figure whole, rather than a note cut
    return _Columns(value, max(1, cell_width - value - note - 3), note, format_exact)


def _value_text(line: Line, number: Callable[[float], str]) -> str:
    """A line's value as its column shows it: ``format_number``'s with fewer digits where it is too wide, never cut at its start (which would change it); any other ``number``'s whole.

    >>> _value_text(Line("cpu_s", 0.001429, True), format_number)
    '0.0014/s'
    >>> _value_text(Line("x", 0.30000000000000004, True), format_exact)
    '0.30000000000000004/s'
    """
    suffix = "/s" if line.per_second else ""
    text = number(line.value) + suffix
    if len(text) > _VALUE_WIDTH and number is format_number:
        text = f"{line.value:.2g}" + suffix
        if len(text) > _VALUE_WIDTH:
            text = text[: _VALUE_WIDTH - 1] + "…"
    return text


def _note(line: Line, number: Callable[[float], str]) -> str:
    """What a line's note says: a counter's count, or a bar's share of its capacity."""
    if line.total is not None:
        return number(line.total)
    if line.fill is not None:
        # Rounded down, as the bar: 19,990 of 20,000 is 99 %, not 100 %.
        return f"{math.floor(100 * line.fill)}% of {number(line.capacity or 0.0)}"
    return ""


def _quantiles_text(
    quantiles: Sequence[tuple[str, float]], number: Callable[[float], str], width: int
) -> str:
    """As many of ``quantiles`` as fit in ``width``, each whole (a cut number reads as another value), evenly spaced.

    >>> _quantiles_text([("p50", 22.02), ("p90", 119.3), ("p99", 155.0)], "{:g}".format, 30)
    'p50 22.02  p90 119.3  p99 155 '
    >>> _quantiles_text([("p50", 22.02), ("p90", 119.3), ("p99", 155.0)], "{:g}".format, 24)
    'p50 22.02  p90 119.3    '
    """
    text = ""
    for statistic, value in quantiles:
        part = f"{statistic} {number(value).strip()}"
        longer = f"{text}  {part}" if text else part
        if len(longer) > width:
            break
        text = longer
    if not text and quantiles:  # not even the first fits: cut at its end
        statistic, value = quantiles[0]
        text = f"{statistic} {number(value).strip()}"[: width - 1] + "…"
    return text.ljust(width)


def _cell(line: Line | None, until: float, columns: _Columns) -> list[Segment]:
    graphic_width, note_width = columns.graphic, columns.note
    if line is None:
        return [
            Segment(
                " " + "-".rjust(columns.value) + " " * (graphic_width + note_width + 2)
            )
        ]
    number = columns.number
    value = "" if not math.isfinite(line.value) else _value_text(line, number)
    if len(value) > columns.value:
        value = value[: columns.value - 1] + "…"  # cut at its end, never its start
    cell = [
        Segment(" " + value.rjust(columns.value), "bold"),
        Segment(" "),
    ]
    if line.fill is not None:
        cell.append(
            Segment(
                _bar(line.fill, graphic_width),
                "green" if line.fill < 0.95 else "yellow",
            )
        )
    elif line.quantiles:
        cell.append(Segment(_quantiles_text(line.quantiles, number, graphic_width)))
    elif line.series is not None:
        cell.append(
            Segment(
                sparkline(line.series.recent(graphic_width, until), graphic_width),
                "cyan",
            )
        )
    else:
        cell.append(Segment(" " * graphic_width))
    if note_width:
        note = _note(line, number)
        if len(note) > note_width:
            note = note[: note_width - 1] + "…"  # cut at its end, never its start
        cell.append(Segment(" " + note.rjust(note_width), "dim"))
    return cell


def _pinned(headings: Sequence[int | None], scroll: int) -> int | None:
    """The line of the heading kept on top when the body is scrolled to line ``scroll``: ``None`` where that line is no block's, or its heading.

    >>> _pinned([0, 0, 0, None, 4, 4], 1), _pinned([0, 0, 0, None, 4, 4], 4)
    (0, None)
    """
    if scroll >= len(headings):
        return None
    heading = headings[scroll]
    return None if heading == scroll else heading


def _footer(
    view: TopView, body_lines: int, room: int, width: int, shown: int
) -> list[Segment]:
    if view.typing:
        return [
            Segment("/" + view.filter, "bold reverse"),
            Segment("  Enter keeps it, Esc clears it"),
        ]
    said = []
    if view.filter:
        said.append(Segment(f"  filter: {view.filter}", "bold yellow"))
    if view.paused:
        said.append(Segment("  PAUSED", "bold reverse"))
    if body_lines > room:
        last = view.scroll + shown
        said.append(Segment(f"  lines {view.scroll + 1}-{last} of {body_lines}"))
    said.append(Segment("  " + time.strftime("%H:%M:%S")))
    # What the view is in comes before the keys' reminder where both do not
    # fit: the reminder shrinks to the one key that matters most.
    keys = "q quit  / filter  ↑↓ j k scroll  p pause"
    if len(keys) + sum(len(segment.text) for segment in said) > width:
        keys = "q quit"
    return [Segment(keys, "dim"), *said]


def _cut(line: list[Segment], width: int) -> list[Segment]:
    # A line no wider than the terminal: wider ones would wrap and push the
    # header off the screen. Where what is cut off is more than blanks, an
    # ellipsis says so.
    text = "".join(segment.text for segment in line)
    cut_off = text[width:].strip() != ""
    cut, left = [], width - 1 if cut_off else width
    for segment in line:
        if left <= 0:
            break
        cut.append(Segment(segment.text[:left], segment.style))
        left -= len(segment.text[:left])
    if cut_off and cut:
        cut.append(Segment("…", cut[-1].style))
    return cut


def plain(lines: Sequence[Sequence[Segment]]) -> str:
    """A frame's lines as plain text, trailing spaces dropped."""
    return "\n".join(
        "".join(segment.text for segment in line).rstrip() for line in lines
    )


# Drawing with rich


def render(lines: Sequence[Sequence[Segment]]) -> RenderableType:
    """A frame's lines as ``rich`` draws them (needs ``rlpulse[top]``)."""
    from rich.console import Group
    from rich.text import Text

    return Group(
        *(
            Text.assemble(
                *((segment.text, segment.style) for segment in line),
                no_wrap=True,
                overflow="crop",
            )
            for line in lines
        )
    )


def live_view_available() -> bool:
    """Whether ``rich``, which draws the live view, is installed (``rlpulse[top]``)."""
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True


def follow(
    runs: Sequence[tuple[Path, str | None]],
    *,
    match: Match = None,
    interval: float = 1.0,
    exact: bool = False,
) -> None:
    """The live view of ``runs`` (each a file and a run, ``None`` its latest) on the terminal until ``q`` or Ctrl-C; the terminal is restored either way.

    Every ``interval`` seconds each run's follower reads what was written
    since the last frame; a key redraws at once. A file that is not there
    yet is waited for, the header saying so. Needs ``rich``
    (``rlpulse[top]``) and a terminal on standard input and output; a file
    that is no rlpulse metrics file raises ``RunFileError``.
    """
    from rich.console import Console
    from rich.live import Live

    sources = [
        (RunFollower(path, run), LiveRun(str(path), match=match)) for path, run in runs
    ]
    view = TopView()
    console = Console()
    try:
        with (
            _keys() as pressed,
            Live(
                console=console, screen=True, auto_refresh=False, redirect_stdout=False
            ) as live,
        ):
            due = 0.0
            while True:
                if time.monotonic() >= due:
                    if not view.paused:
                        _read(sources)
                    due = time.monotonic() + interval
                width, height = console.size
                lines = frame_lines(
                    sources, view, width, height, time.time(), exact=exact
                )
                live.update(render(lines), refresh=True)
                for key in pressed(max(0.0, due - time.monotonic())):
                    if view.press(key):
                        return
    finally:
        for follower, _ in sources:
            follower.close()


def _read(sources: Sequence[tuple[RunFollower, LiveRun]]) -> None:
    # What each run gained; a long run is caught up on over several frames.
    deadline = time.monotonic() + _READ_BUDGET_S
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RunFileWarning)
        for follower, live in sources:
            while True:
                followed = follower.read_new()
                live.add(followed)
                if not followed.more or time.monotonic() > deadline:
                    break


@contextlib.contextmanager
def _keys() -> Iterator[Callable[[float], list[str]]]:
    """Standard input a key at a time (no echo, no line editing); the function waits up to a timeout for keys. The terminal's settings come back on exit."""
    import termios
    import tty

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)
    # SIGTERM (`timeout 60 rlpulse top ...`) ends it as q does: the screen
    # and the terminal's settings restored on the way out.
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _end_on_signal)

    def pressed(timeout: float) -> list[str]:
        readable, _, _ = select.select([fd], [], [], timeout)
        if not readable:
            return []
        data = os.read(fd, 64)
        return keys_of(data) if data else ["end of input"]  # the terminal gone

    try:
        yield pressed
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _end_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)
