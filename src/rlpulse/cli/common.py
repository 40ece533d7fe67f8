"""What the commands share: their options, and turning an error into one line and exit code 2."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeAlias

from rlpulse.read.span import Span

MATCH_HELP = """\
--match PATTERN is a glob (matched against the whole name) when it holds *,
? or [, a substring otherwise; repeated, it keeps the metrics matching any.
Patterns that match no metric are an error that lists the metrics there
are."""


NUMBERS_HELP = """\
Numbers below a thousand show four significant digits (0.3333), whole
numbers up to 999,999 show in full (19,999), larger ones four significant
digits with M, G or T (1.999M), from 10^15 on in scientific notation
(4.611e+18); digits are cut, never rounded up, so 19,999 never shows as
20,000. --exact writes every value in full. On a terminal (or with COLUMNS
set) a table fits its width, names too long shortened in the middle (…),
and longer lines break between words; into a pipe or a file names and
lines are written whole.
"""


SPAN_HELP = """\
--since T and --until T read only a span of the run: T is seconds from the
run's first record, with s, m or h for seconds, minutes or hours (90, 90s,
1.5m, 2h); a negative T counts back from the run's last record (--since -5m:
the last five minutes). Each bound is inclusive and either may be left out:
--since alone runs to the end, --until alone from the start. Over a span
each metric's last, smallest and largest value are those of the span, a
counter's mean rate its growth within the span over the span's time, and a
distribution's count and quantiles those of the intervals logged in the
span (their histograms merged, as SQLite stores them). A span without
records is an error."""


GIVE_METRICS_FILE = "give the path of a metrics file written by an rlpulse file sink"


Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


Handler: TypeAlias = Callable[[argparse.Namespace], int]


def add_command(
    commands: Commands,
    name: str,
    summary: str,
    description: str,
    handler: Handler,
    *,
    runs: str | None = None,
) -> argparse.ArgumentParser:
    """Add the command ``name``, which ``main`` hands to ``handler``.

    A command that reads one run or more gives ``runs``, what its RUN
    arguments are (files, or ``FILE:NAME``): it takes them first, as
    ``args.runs``.
    """
    command = commands.add_parser(
        name,
        help=summary,
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        # An option is spelled out: a prefix (--int for --interval) would
        # change meaning once another option shares it.
        allow_abbrev=False,
    )
    # Its own parser, for an error about its arguments (see main).
    command.set_defaults(handler=handler, command_parser=command)
    if runs is not None:
        command.add_argument("runs", nargs="+", metavar="RUN", help=runs)
    return command


def add_run_file_argument(command: argparse.ArgumentParser) -> None:
    """Add the RUN argument of a command that reads one run file."""
    command.add_argument(
        "path",
        type=Path,
        metavar="RUN",
        help="metrics file written by an rlpulse file sink (SQLite, CSV, JSON lines)",
    )


def add_match_option(command: argparse.ArgumentParser) -> None:
    """Add ``--match PATTERN``, repeatable: which metrics the command keeps."""
    command.add_argument(
        "--match",
        metavar="PATTERN",
        action="append",
        help="only metrics whose name matches: a glob with *, ? or [, else a "
        "substring; repeat it to keep the metrics matching any; matching none "
        "is an error listing the metrics",
    )


def add_exact_option(command: argparse.ArgumentParser) -> None:
    """Add ``--exact``: every value in full rather than at a glance."""
    command.add_argument(
        "--exact",
        action="store_true",
        help="write every value in full (4611686018427387904, 0.1) rather than "
        "short (4.611e+18, 19,999)",
    )


def add_run_option(
    container: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup, verb: str
) -> None:
    """Add ``--run NAME``, which picks the run of a SQLite file that the command will ``verb``."""
    container.add_argument(
        "--run",
        metavar="NAME",
        help=f"which run of a SQLite file to {verb} (default: the latest)",
    )


_SPAN_BOUND = re.compile(r"(-?)(\d+(?:\.\d*)?|\.\d+)([smh]?)")
_SECONDS_PER_UNIT = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def span_bound(text: str) -> float:
    """A bound of ``--since`` or ``--until``: seconds from the run's first record, negative from its last.

    >>> span_bound("90"), span_bound("1.5m"), span_bound("2h"), span_bound("-5m")
    (90.0, 90.0, 7200.0, -300.0)
    >>> span_bound("-0")
    -0.0
    """
    found = _SPAN_BOUND.fullmatch(text.strip())
    if found is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time in the run: give seconds from its first "
            "record, with s, m or h for seconds, minutes or hours (90, 90s, "
            "1.5m, 2h), negative to count back from its end (-5m)"
        )
    sign, number, unit = found.groups()
    seconds = float(number) * _SECONDS_PER_UNIT[unit]
    return -seconds if sign else seconds


# Also a negative time with a unit (-5m) is the value of an option, not an
# option of its own, as argparse takes a negative number.
# A value, not an option: what starts as a negative number does (no option
# does), so that a mistyped time ("-10x") is told what a time is.
_NEGATIVE_NUMBER_OR_TIME = re.compile(r"^-\.?\d")


def add_span_options(command: argparse.ArgumentParser) -> None:
    """Add ``--since T`` and ``--until T``: the span of each run the command reads (:func:`span_of`)."""
    command._negative_number_matcher = _NEGATIVE_NUMBER_OR_TIME
    command.add_argument(
        "--since",
        metavar="T",
        type=span_bound,
        help="read from T into each run on: seconds from its first record, "
        "with s, m or h (600, 10m), negative back from its end (-5m: the "
        "last five minutes)",
    )
    command.add_argument(
        "--until",
        metavar="T",
        type=span_bound,
        help="read up to T into each run, as --since counts it (15m; -1m: all "
        "but the last minute)",
    )


def span_of(args: argparse.Namespace) -> Span:
    """The span ``--since`` and ``--until`` asked for (:func:`add_span_options`); open where left out."""
    return Span(args.since, args.until)


def not_a_metrics_file(path: Path) -> str | None:
    """Why ``path`` cannot be a metrics file to read (a directory, nothing there), else ``None``."""
    if path.is_dir():
        return f"{path} is a directory; {GIVE_METRICS_FILE}"
    if not path.exists():
        return f"{path}: no such file; {GIVE_METRICS_FILE}"
    return None


def describe(error: OSError) -> str:
    message = error.strerror or str(error)
    if error.filename is not None and str(error.filename) not in message:
        message = f"{error.filename}: {message}"
    return message


def fail(message: str) -> int:
    one_line = " ".join(message.split())
    print(f"rlpulse: error: {one_line}", file=sys.stderr)
    return 2
