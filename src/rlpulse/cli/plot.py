"""``rlpulse plot``: recorded runs drawn into an image."""

from __future__ import annotations

import argparse
from pathlib import Path

from rlpulse.cli import common
from rlpulse.read.compare import run_argument
from rlpulse.read.plot import (
    BUCKETS,
    MAX_LINES,
    MAX_PANELS,
    plot_files,
)

SUMMARY = "draw recorded runs into an image"
"""What ``rlpulse --help`` says of the command."""

RUNS = (
    "metrics file written by an rlpulse file sink (SQLite, CSV, JSON lines), "
    "or FILE:NAME; several are drawn over each other"
)
"""What ``rlpulse plot --help`` says of its RUN arguments."""

DESCRIPTION = f"""\
Draw a recorded run into an image: one panel per watch (the part of a metric
name before the first '/'), over the time since the run started, over the
logged step with --x step (watches without a step are left out, and named),
or over any counter of the run with --x COUNTER (--x collector/frames: every
watch's points placed at the counter's value at their time, interpolated
between its records, so that watches logged at different times line up).
A panel has one axis per unit: rates (per second, solid lines), then bytes,
percent, seconds and plain gauges (dashed). A cumulative counter is drawn as
its rate (itself too with --cumulative); metrics that never changed are
listed above their panel. Axes whose lines differ widely in size are
logarithmic. A distribution's p50 (a Tally's observed key) is drawn with a
shaded band between two of its quantiles, where they were logged: p10 to
p90, else p50 to p99. --smooth WEIGHT smooths every line as TensorBoard's
smoothing slider does (an exponential moving average, debiased at its
start: 0 none, 0.9 strong), the line as logged kept faint beneath. A long
run is drawn as a chart can show it: each line downsampled to about
{BUCKETS} buckets of time, each keeping its smallest and largest value, so
that spikes survive. A chart draws at most {MAX_PANELS} watches of {MAX_LINES} lines each and
says what it left out: narrow it with --match.

RUN is a file written by SQLiteLogger, CSVLogger or JSONLLogger; --run picks
a run of a SQLite file (default: the latest). Several RUNs are drawn over
each other, each over the time since its own start, a line style per run
(FILE:NAME picks the run NAME of a SQLite file). --match keeps only the metrics
whose name matches PATTERN: a glob (matched against the whole name) when it
holds *, ? or [, a substring otherwise; repeated, it keeps the metrics
matching any; patterns that match no metric are an error that lists the
metrics there are. The image format follows the extension of FILE (.png, .svg,
.pdf); the image is written beside FILE and renamed onto it, so a plot that
fails or is interrupted leaves the FILE there was. Needs matplotlib:
pip install 'rlpulse[plot]'.

examples:
  rlpulse plot runs/demo.sqlite -o runs/demo.png
  rlpulse plot runs/demo.sqlite -o collector.png --match 'collector/*'
  rlpulse plot runs/demo.sqlite -o two.png --match 'collector/*' --match 'buffer/*'
  rlpulse plot metrics.csv -o rates.png --match _per_second --x step
  rlpulse plot runs/demo.sqlite -o frames.png --x collector/frames --smooth 0.9
  rlpulse plot runs/baseline.sqlite runs/new.sqlite -o both.png --match 'collector/*'
"""


def add(commands: common.Commands) -> None:
    plot = common.add_command(commands, "plot", SUMMARY, DESCRIPTION, run, runs=RUNS)
    plot.add_argument(
        "-o",
        "--output",
        type=Path,
        required=True,
        metavar="FILE",
        help="image file to write (.png, .svg or .pdf)",
    )
    common.add_match_option(plot)
    plot.add_argument(
        "--cumulative",
        action="store_true",
        help="draw each cumulative counter itself too, beside its rate",
    )
    plot.add_argument(
        "--x",
        default="time",
        metavar="AXIS",
        help="the x axis: 'time' since the start of the run, 'step' (the logged "
        "step), or the name of a counter, as in collector/frames (default: "
        "%(default)s)",
    )
    plot.add_argument(
        "--smooth",
        type=_weight,
        default=0.0,
        metavar="WEIGHT",
        help="smooth each line as TensorBoard does, from 0 (none) to below 1 "
        "(0.9: strong), the line as logged drawn faint (default: none)",
    )
    common.add_run_option(plot, "draw")


def run(args: argparse.Namespace) -> int:
    runs = [run_argument(text) for text in args.runs]
    if args.run is not None:
        if len(runs) > 1:
            return common.fail(
                "--run picks the run of one RUN; name each run as FILE:NAME"
            )
        runs = [(runs[0][0], args.run)]
    for path, _ in runs:
        if (problem := common.not_a_metrics_file(path)) is not None:
            return common.fail(problem)
    # The folders the chart's path names that do not exist yet: made, and said.
    folder = Path(args.output).absolute().parent
    missing = folder
    while not missing.parent.exists() and missing.parent != missing:
        missing = missing.parent
    made = None if folder.exists() else missing
    try:
        written = plot_files(
            runs,
            args.output,
            match=args.match,
            x=args.x,
            cumulative=args.cumulative,
            smooth=args.smooth,
        )
    except ImportError as error:
        return common.fail(str(error))
    print(f"wrote {written}" + (f" (made the folder {made})" if made else ""))
    return 0


def _weight(text: str) -> float:
    try:
        weight = float(text)
    except ValueError:
        weight = -1.0
    if not 0.0 <= weight < 1.0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is no smoothing weight: give a number from 0 (none) to "
            "below 1, as 0.9"
        )
    return weight
