"""``rlpulse compare``: recorded runs side by side."""

from __future__ import annotations

import argparse
import sys

from rlpulse.cli import common
from rlpulse.read.compare import compare_files, format_comparison, run_argument
from rlpulse.text import terminal_width

SUMMARY = "put recorded runs side by side"
"""What ``rlpulse --help`` says of the command."""

RUNS = "a metrics file (its latest run) or FILE:NAME; the first is the baseline"
"""What ``rlpulse compare --help`` says of its RUN arguments."""

DESCRIPTION = f"""\
Put recorded runs side by side: one row per metric, its figure in each run
and each run's ratio to the first (the baseline). A cumulative counter's
figure is its mean rate per second over the run, a gauge's the mean of its
values; a metric a run lacks shows -.

RUN is a file written by SQLiteLogger, CSVLogger or JSONLLogger: its latest
run, or FILE:NAME for the run NAME of a SQLite file (list them with
rlpulse show FILE --runs). --match keeps only the metrics whose name
matches PATTERN; a run that has none of them shows -. --since and --until
compare the same span of each run, each counted from that run's own first
(or, negative, last) record: --since -5m compares the last five minutes of
each; the legend says where the span lies in each run.

{common.MATCH_HELP}

{common.SPAN_HELP}

{common.NUMBERS_HELP}
examples:
  rlpulse compare runs/baseline.sqlite runs/new.sqlite
  rlpulse compare runs/all.sqlite:first runs/all.sqlite:second
  rlpulse compare a.sqlite b.csv --match 'collector/*'
  rlpulse compare a.sqlite b.sqlite --exact
  rlpulse compare a.sqlite b.sqlite --since -5m
"""


def add(commands: common.Commands) -> None:
    compare = common.add_command(
        commands, "compare", SUMMARY, DESCRIPTION, run, runs=RUNS
    )
    common.add_match_option(compare)
    common.add_span_options(compare)
    common.add_exact_option(compare)


def run(args: argparse.Namespace) -> int:
    if len(args.runs) < 2:
        return common.fail(
            "compare needs at least two runs, the first the baseline: "
            "rlpulse compare RUN_A RUN_B [...]"
        )
    runs = [run_argument(text) for text in args.runs]
    for path, _ in runs:
        if (problem := common.not_a_metrics_file(path)) is not None:
            return common.fail(problem)
    compared = compare_files(runs, args.match, common.span_of(args))
    print(
        format_comparison(compared, exact=args.exact, width=terminal_width(sys.stdout))
    )
    return 0
