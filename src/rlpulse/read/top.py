"""``rlpulse top``: follow a run while another process writes it, in a terminal.

Each frame is the run's summary as ``rlpulse show`` prints it (per metric
the last, smallest and largest value and a counter's mean rate), narrowed
with ``--match``, then the run's latest events. On a terminal the frame is
redrawn every ``interval`` seconds on the terminal's alternate screen until
``q`` (or Ctrl-C); elsewhere (a pipe, a file) or with ``--once`` one plain
frame is printed. Terminal handling is the standard library's (``termios``,
``select``): the frame is plain text, and the command needs no extra. Each
frame reads the run afresh, as ``show`` does: for a long run, a longer
``--interval``.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

from rlpulse.read.match import Match
from rlpulse.read.records import RunFileError, RunFileWarning, read_events
from rlpulse.read.summary import (
    format_event,
    format_summary,
    narrow_summary,
    summarize_file,
)

__all__ = ["follow", "frame"]

_EVENTS_SHOWN = 5
_ENTER_SCREEN = "\x1b[?1049h\x1b[?25l"  # alternate screen, cursor hidden
_LEAVE_SCREEN = "\x1b[?25h\x1b[?1049l"
_HOME_AND_CLEAR = "\x1b[H\x1b[2J"


def frame(
    path: Path,
    run: str | None,
    match: Match = None,
    width: int = 0,
    *,
    exact: bool = False,
) -> str:
    """One frame of ``rlpulse top``: the summary of the run's metrics ``match`` keeps, then its latest events.

    ``width`` cuts each line to that many characters (``0``: whole lines);
    ``exact=True`` writes every value in full. Raises what
    :func:`rlpulse.read` raises for a missing, empty or corrupt file, and
    :class:`~rlpulse.read.match.MatchError` when ``match`` keeps none of the
    run's metrics.

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
    lines = format_summary(summary, exact=exact).split("\n")
    events = _latest_events(path, run)
    if events:
        lines += ["", "latest events:", *events]
    if width > 0:
        lines = [line[:width] for line in lines]
    return "\n".join(lines)


def _latest_events(path: Path, run: str | None) -> list[str]:
    try:
        events = list(read_events(path, run))
    except RunFileError:
        return []  # a CSV file stores none
    return [format_event(event) for event in events[-_EVENTS_SHOWN:]]


def follow(
    path: Path,
    run: str | None,
    *,
    match: Match = None,
    interval: float = 1.0,
    stream: TextIO | None = None,
    exact: bool = False,
) -> None:
    """Redraw :func:`frame` on the terminal every ``interval`` seconds until ``q`` or Ctrl-C.

    The first frame must be readable (errors as :func:`frame`'s); a later
    one that cannot be read (the file being replaced, say) shows why and
    is tried again at the next interval. A last line the writer has not
    finished is waited for, without a :class:`~rlpulse.read.records.RunFileWarning`.
    """
    out = sys.stdout if stream is None else stream

    def current() -> str:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RunFileWarning)
            return frame(path, run, match, _width(), exact=exact)

    first = current()
    with _keys() as pressed, _screen(out):
        text = first
        while True:
            out.write(_HOME_AND_CLEAR + _footer(text, interval))
            out.flush()
            if pressed(interval):
                return
            try:
                text = current()
            except (OSError, RunFileError) as error:
                text = f"rlpulse top: cannot read {path} now: {error}"


def _footer(text: str, interval: float) -> str:
    clock = time.strftime("%H:%M:%S")
    return f"{text}\n\n{clock}  every {interval:g} s  q quits\n"


def _width() -> int:
    return shutil.get_terminal_size().columns


@contextlib.contextmanager
def _screen(out: TextIO) -> Iterator[None]:
    out.write(_ENTER_SCREEN)
    try:
        yield
    finally:
        out.write(_LEAVE_SCREEN)
        out.flush()


@contextlib.contextmanager
def _keys() -> Iterator[Callable[[float], bool]]:
    """Standard input a key at a time; the function waits up to a timeout and says whether ``q`` was pressed."""
    import termios
    import tty

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)

    def pressed(timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            readable, _, _ = select.select([fd], [], [], left)
            # q quits; so does the end of input (the terminal gone).
            if readable and os.read(fd, 1) in (b"q", b"Q", b""):
                return True
        return False

    try:
        yield pressed
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
