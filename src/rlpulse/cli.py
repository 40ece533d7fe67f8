"""The ``rlpulse`` command line: ``rlpulse demo`` and ``rlpulse show``.

This module owns the arguments and turns the errors users can cause (a
missing or corrupt file, an unknown run, an unwritable path) into one line
on standard error and exit code 2. What the commands do lives in
:mod:`rlpulse.demo` and :mod:`rlpulse.summary`.
"""

from __future__ import annotations

import argparse
import math
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

from rlpulse import __version__
from rlpulse.demo import DEFAULT_OUT, run_demo
from rlpulse.records import RunFileError, list_runs
from rlpulse.summary import format_summary, summarize_file

__all__ = ["build_parser", "main"]

_DESCRIPTION = """\
Pull-based operational monitoring for reinforcement-learning data pipelines.

Run a monitored demo pipeline, then look at what it recorded:

  rlpulse demo --seconds 10
  rlpulse show runs/demo.sqlite
"""

_DEMO_DESCRIPTION = f"""\
Run a self-contained, monitored data pipeline (standard library only): a
collector thread writes a few thousand frames per second, in batches, into a
bounded ring buffer that a learner thread samples from. A background
LoggerMonitor polls their stats() into a new run of a SQLite file and prints
each payload on standard error. At the end (or on Ctrl-C) the monitor logs
final snapshots and the summary of the run is printed.

example:
  rlpulse demo --seconds 5 --out {DEFAULT_OUT}
"""

_SHOW_DESCRIPTION = """\
Summarize a recorded run: per metric the last, smallest and largest value,
and for cumulative counters the mean rate per second over the run.

RUN is a file written by SQLiteLogger, CSVLogger or JSONLLogger. A SQLite
file holds several runs: --run picks one (default: the latest) and --runs
lists them.

examples:
  rlpulse show runs/demo.sqlite
  rlpulse show runs/demo.sqlite --runs
  rlpulse show runs/demo.sqlite --run 2024-05-01_12-03-04
  rlpulse show metrics.csv
"""


_GIVE_METRICS_FILE = "give the path of a metrics file written by an rlpulse file sink"


def _positive_seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of seconds, got {text!r}"
        ) from None
    if not (seconds > 0 and math.isfinite(seconds)):
        raise argparse.ArgumentTypeError(
            f"the demo needs a positive, finite number of seconds, got {text!r}"
        )
    return seconds


def build_parser() -> argparse.ArgumentParser:
    """Return the parser of the ``rlpulse`` command line, one subcommand per command.

    >>> args = build_parser().parse_args(["show", "runs/demo.sqlite", "--run", "baseline"])
    >>> args.command, args.path, args.run
    ('show', PosixPath('runs/demo.sqlite'), 'baseline')
    """
    parser = argparse.ArgumentParser(
        prog="rlpulse",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"rlpulse {__version__}")
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", title="commands", required=True
    )

    demo = commands.add_parser(
        "demo",
        help="run a monitored demo pipeline and record it",
        description=_DEMO_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument(
        "--seconds",
        type=_positive_seconds,
        default=10.0,
        help="how long to run (default: %(default)g)",
    )
    demo.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        metavar="FILE",
        help="SQLite file to record the run in (default: %(default)s)",
    )
    demo.set_defaults(handler=_demo)

    show = commands.add_parser(
        "show",
        help="summarize a recorded run",
        description=_SHOW_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    show.add_argument(
        "path",
        type=Path,
        metavar="RUN",
        help="metrics file written by an rlpulse file sink (SQLite, CSV, JSON lines)",
    )
    choice = show.add_mutually_exclusive_group()
    choice.add_argument(
        "--run",
        metavar="NAME",
        help="which run of a SQLite file to show (default: the latest)",
    )
    choice.add_argument(
        "--runs",
        action="store_true",
        help="list the runs of a SQLite file, oldest first, instead",
    )
    show.set_defaults(handler=_show)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the ``rlpulse`` command line with ``argv`` (default: ``sys.argv[1:]``) and return the exit code.

    Errors a user can cause print one ``rlpulse: error: ...`` line on standard
    error and return 2; bad arguments exit with argparse's usual code 2.

    >>> import contextlib, io
    >>> errors = io.StringIO()
    >>> with contextlib.redirect_stderr(errors):
    ...     main(["show", "no/such/file.sqlite"])
    2
    >>> print(errors.getvalue().strip())
    rlpulse: error: no/such/file.sqlite: no such file; give the path of a metrics file written by an rlpulse file sink
    """
    args = build_parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except OSError as error:
        return _fail(_describe(error))
    except (RunFileError, sqlite3.Error) as error:
        return _fail(str(error))


def _demo(args: argparse.Namespace) -> int:
    run_demo(args.seconds, args.out)
    return 0


def _show(args: argparse.Namespace) -> int:
    path: Path = args.path
    if path.is_dir():
        return _fail(f"{path} is a directory; {_GIVE_METRICS_FILE}")
    if not path.exists():
        return _fail(f"{path}: no such file; {_GIVE_METRICS_FILE}")
    if args.runs:
        for name in list_runs(path):
            print(name)
        return 0
    print(format_summary(summarize_file(path, args.run)))
    return 0


def _describe(error: OSError) -> str:
    message = error.strerror or str(error)
    if error.filename is not None and str(error.filename) not in message:
        message = f"{error.filename}: {message}"
    return message


def _fail(message: str) -> int:
    one_line = " ".join(message.split())
    print(f"rlpulse: error: {one_line}", file=sys.stderr)
    return 2
