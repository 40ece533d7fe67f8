"""``rlpulse show``: a recorded run in numbers, and its events."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rlpulse.cli import common
from rlpulse.read.compare import run_argument
from rlpulse.read.records import (
    RunFileError,
    RunFileLockedError,
    detect_format,
    read_events,
    run_infos,
)
from rlpulse.read.span import Within
from rlpulse.read.summary import (
    format_events,
    format_summary,
    format_verdicts,
    narrow_summary,
    summarize_file,
)
from rlpulse.text import format_duration, format_table, terminal_width, wrapped

SUMMARY = "summarize a recorded run"
"""What ``rlpulse --help`` says of the command."""

DESCRIPTION = f"""\
Summarize a recorded run: per metric the last, smallest and largest value,
and for cumulative counters the mean rate per second over the run; then the
run's events (a stall, a hung call, a failing sink, drops), one a line, as
SQLiteLogger and JSONLLogger store them; last, for a run with a bottleneck
watch (LoggerMonitor.bottleneck), its verdict over the last window in
words, and how the verdict split over the run's windows.

RUN is a file written by SQLiteLogger, CSVLogger or JSONLLogger, or by
hand in their formats (blank lines are skipped; a JSON lines payload
without "step" has none). A last line cut short (a crash, or a writer still
at it) is left out with a note on standard error. A SQLite file holds
several runs: --run NAME or FILE:NAME picks one (default: the latest) and
--runs lists them, each with its start, length and number of records. --match keeps only the
metrics whose name matches PATTERN. --since and --until summarize a span
of the run instead of all of it; the first line then says where the span
lies ("1,200 records from 10 min 00 s to 15 min 00 s of 40 min 12 s").

{common.MATCH_HELP}

{common.SPAN_HELP} The events listed are those of the span.

{common.NUMBERS_HELP}
examples:
  rlpulse show runs/demo.sqlite
  rlpulse show runs/demo.sqlite --runs
  rlpulse show runs/demo.sqlite --run 2024-05-01_12-03-04
  rlpulse show runs/demo.sqlite:2024-05-01_12-03-04
  rlpulse show runs/demo.sqlite --match 'collector/*' --exact
  rlpulse show runs/demo.sqlite --since 10m --until 15m
  rlpulse show runs/demo.sqlite --since -5m
  rlpulse show metrics.csv
"""


def add(commands: common.Commands) -> None:
    show = common.add_command(commands, "show", SUMMARY, DESCRIPTION, run)
    common.add_run_file_argument(show)
    choice = show.add_mutually_exclusive_group()
    common.add_run_option(choice, "show")
    choice.add_argument(
        "--runs",
        action="store_true",
        help="list the runs of a SQLite file instead, oldest first, each with "
        "its start, length and number of records",
    )
    common.add_match_option(show)
    common.add_span_options(show)
    common.add_exact_option(show)


def _note_other_runs(path: Path, latest: str) -> None:
    """Where a SQLite file's latest run holds no records (a logger closed before its first payload), note the runs that may."""
    if detect_format(Path(path)) != "sqlite":
        return
    others = [info.name for info in run_infos(path) if info.records]
    if others:
        print(
            f"rlpulse: note: {latest}, the latest run of {path}, holds no records; "
            f"runs that do: {', '.join(others[-5:])} (--run NAME shows one, --runs "
            "lists them)",
            file=sys.stderr,
        )


def run(args: argparse.Namespace) -> int:
    # FILE:NAME as compare, plot and top take it, or --run NAME.
    path, named = run_argument(str(args.path))
    if (problem := common.not_a_metrics_file(path)) is not None:
        return common.fail(problem)
    if named is not None:
        if args.runs:
            return common.fail(
                f"--runs lists the runs of {path}; {args.path} names one of them: "
                f"give {path} --runs, or leave --runs out"
            )
        if args.run is not None and args.run != named:
            return common.fail(
                f"{args.path} names run {named!r} and --run names {args.run!r}: "
                "name the run once"
            )
        args.run = named
    if args.runs:
        if ignored := _options_of_one_run(args):
            return common.fail(
                f"--runs lists the file's runs; {' and '.join(ignored)} "
                f"{'narrows' if len(ignored) == 1 else 'narrow'} one run's summary: "
                "leave them out, or pick a run with --run"
            )
        kind = detect_format(Path(path))
        if kind != "sqlite":
            written = "CSV" if kind == "csv" else "JSON lines"
            return common.fail(
                f"{path} is a {written} file, which holds one run: rlpulse show "
                f"{path} shows it (--runs lists the runs of a SQLite file)"
            )
        print(_runs_table(path))
        return 0
    summary = narrow_summary(
        summarize_file(path, args.run, common.span_of(args)), args.match
    )
    width = terminal_width(sys.stdout)
    print(format_summary(summary, exact=args.exact, width=width))
    if summary.start_wall_time is None and args.run is None:
        _note_other_runs(path, summary.run)
    if events := _events_of(path, args.run, summary.within):
        print()
        print(wrapped(events, width))
    if verdicts := format_verdicts(summary, width):
        print()
        print(verdicts)
    return 0


def _options_of_one_run(args: argparse.Namespace) -> list[str]:
    """The options given that narrow a run's summary, which ``--runs`` has none of."""
    given = {
        "--match": args.match,
        "--since": args.since is not None,
        "--until": args.until is not None,
        "--exact": args.exact,
    }
    return [option for option, value in given.items() if value]


def _runs_table(path: Path) -> str:
    """The runs of a SQLite file as ``show --runs`` lists them: name, local start time, length, records."""
    rows = [("run", "start", "length", "records")]
    for info in run_infos(path):
        started = time.strftime(
            "%Y-%m-%d %H:%M:%S", time.localtime(info.start_wall_time)
        )
        rows.append(
            (info.name, started, format_duration(info.seconds), f"{info.records:,}")
        )
    return format_table(rows, left=2)


def _events_of(path: Path, run: str | None, within: Within | None) -> str:
    """The events of the run (those of the span ``within`` it, where given) as ``show`` lists them; ``""`` for none, or a file that stores none (CSV)."""
    try:
        events = read_events(path, run)
    except RunFileLockedError:
        raise
    except RunFileError:
        return ""
    if within is not None:
        events = (e for e in events if within.since <= e.wall_time <= within.until)
    return format_events(events)
