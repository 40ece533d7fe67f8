"""``rlpulse top``: runs followed while they are written."""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
from pathlib import Path

from rlpulse.cli import common
from rlpulse.read.compare import run_argument
from rlpulse.read.records import RunFileError
from rlpulse.read.top import follow, frame, live_view_available
from rlpulse.text import terminal_width

SUMMARY = "follow runs as they are written, live"
"""What ``rlpulse --help`` says of the command."""

RUNS = (
    "a metrics file (its latest run, and a run started later in it once"
    " there is one) or FILE:NAME; several side by side"
)
"""What ``rlpulse top --help`` says of its RUN arguments."""

DESCRIPTION = f"""\
Follow runs while other processes write them, as htop follows processes.

On a terminal, with rich installed (pip install 'rlpulse[top]'), a live
view: a header that stays put (each run's age, "no new data for 40 s" once
its writer stops without a word, as a killed process does, or "ended 40 s
ago" once its monitor stopped, the monitor's own cost, a failing sink) over
a block per watch: its state from the run's events (running, stalled, hung,
dropping, ended), its counters' rates with a sparkline of the last minutes
and their totals, its gauges (as bars where they fill a capacity: a
buffer's size, the workers alive), its percentiles; then the latest
events. Each frame reads only what was written since the last, so following
a long run costs what it writes, not its length. A file that does not exist
yet is waited for.

keys: q quits; / filters watches or metrics (type a pattern as --match
takes it, or edit the one in force; Enter keeps it, Esc clears it); the
arrows, j and k, Page Up and Page Down scroll, Home and End (g and G) go to
the first and the last lines; p pauses (and resumes) reading.

Into a pipe or a file, with --once, or without rich: one plain frame, the
run's summary as rlpulse show prints it, its latest events and its
bottleneck verdict, then exit (scripts and CI logs keep working).

RUN is a file written by SQLiteLogger, CSVLogger or JSONLLogger: its latest
run, or FILE:NAME for the run NAME of a SQLite file; --run NAME picks the
run of every file given without one. Several runs show side by side, the
same watch's figures in adjacent columns, each of the latest events with its
run's letter. --match keeps only the metrics whose name matches PATTERN in
the blocks (the header's age, cost and verdict stay the whole run's; a
bottleneck watch it names shows its figures as a block, as / does).

{common.MATCH_HELP} Following a run (not with --once), top says so in its
header instead, and shows the metrics once the run logs one it matches.

{common.NUMBERS_HELP}
examples:
  rlpulse top runs/demo.sqlite
  rlpulse top runs/demo.sqlite --match 'collector/*' --interval 0.5
  rlpulse top runs/baseline.sqlite runs/new.sqlite
  rlpulse top runs/all.sqlite:first runs/all.sqlite:second
  rlpulse top runs/demo.sqlite --once
"""


def add(commands: common.Commands) -> None:
    top = common.add_command(commands, "top", SUMMARY, DESCRIPTION, run, runs=RUNS)
    common.add_run_option(top, "follow")
    top.add_argument(
        "--interval",
        type=float,
        default=1.0,
        metavar="S",
        help="seconds between frames (default: %(default)s)",
    )
    common.add_match_option(top)
    common.add_exact_option(top)
    top.add_argument(
        "--once",
        action="store_true",
        help="print one plain frame and exit, as into a pipe",
    )


def run(args: argparse.Namespace) -> int:
    runs = [
        (path, name if name is not None else args.run)
        for path, name in map(run_argument, args.runs)
    ]
    interval = args.interval
    if not (isinstance(interval, float) and math.isfinite(interval) and interval > 0):
        return common.fail(
            f"--interval must be a positive number of seconds, got {interval}"
        )
    terminal = sys.stdin.isatty() and sys.stdout.isatty()
    if args.once or not terminal or not live_view_available():
        if terminal and not args.once:
            print(
                "rlpulse: note: the live view needs rich: pip install "
                "'rlpulse[top]'; here is one plain frame",
                file=sys.stderr,
            )
        return _plain_frames(runs, args)
    for path, _ in runs:
        if path.is_dir():
            return common.fail(f"{path} is a directory; {common.GIVE_METRICS_FILE}")
    try:
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C quits as q does
            follow(runs, match=args.match, interval=interval, exact=args.exact)
    except RunFileError as error:
        return common.fail(str(error))
    return 0


def _plain_frames(runs: list[tuple[Path, str | None]], args: argparse.Namespace) -> int:
    for path, _ in runs:
        if (problem := common.not_a_metrics_file(path)) is not None:
            return common.fail(problem)
    width = terminal_width(sys.stdout)
    frames = [
        frame(path, name, args.match, width, exact=args.exact) for path, name in runs
    ]
    print("\n\n".join(frames))
    return 0
