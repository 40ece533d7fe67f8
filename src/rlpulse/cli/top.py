"""``rlpulse top``: a run followed while it is written."""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
from pathlib import Path

from rlpulse.cli import common
from rlpulse.read.top import follow, frame

SUMMARY = "follow a run as it is written"
"""What ``rlpulse --help`` says of the command."""

DESCRIPTION = f"""\
Follow a run while another process writes it: every --interval seconds the
run's summary as rlpulse show prints it (per metric the last, smallest and
largest value, a counter's mean rate), then its latest events, redrawn in
place on the terminal; q (or Ctrl-C) quits. Into a pipe or a file, or with
--once, one plain frame is printed.

RUN is a file written by SQLiteLogger, CSVLogger or JSONLLogger; --run
follows a named run of a SQLite file (default: the latest). A last line the
writer has not finished is read at the next frame. --match keeps only the
metrics whose name matches PATTERN.

{common.MATCH_HELP}

{common.NUMBERS_HELP}
examples:
  rlpulse top runs/demo.sqlite
  rlpulse top runs/demo.sqlite --match 'collector/*' --interval 0.5
  rlpulse top runs/demo.sqlite --once
"""


def add(commands: common.Commands) -> None:
    top = common.add_command(commands, "top", SUMMARY, DESCRIPTION, run)
    common.add_run_file_argument(top)
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
    path: Path = args.path
    if (problem := common.not_a_metrics_file(path)) is not None:
        return common.fail(problem)
    interval = args.interval
    if not (isinstance(interval, float) and math.isfinite(interval) and interval > 0):
        return common.fail(
            f"--interval must be a positive number of seconds, got {interval}"
        )
    if args.once or not (sys.stdin.isatty() and sys.stdout.isatty()):
        print(frame(path, args.run, args.match, exact=args.exact))
        return 0
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C quits as q does
        follow(path, args.run, match=args.match, interval=interval, exact=args.exact)
    return 0
