"""The ``rlpulse`` command line: ``rlpulse demo``, ``rlpulse show`` and ``rlpulse plot``.

This module owns the arguments and turns the errors users can cause (a
missing or corrupt file, an unknown run, an unwritable path, a sink spec
with an unknown scheme, a missing optional dependency) into one line on
standard error and exit code 2. What the commands do lives in
:mod:`rlpulse._demo` (the synthetic and the TorchRL pipeline),
:mod:`rlpulse.read.summary` and :mod:`rlpulse.read.plot`.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import sqlite3
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO, TypeAlias

from rlpulse import __version__, stop_on_sigterm
from rlpulse._demo.common import DEFAULT_OUT
from rlpulse._demo.synthetic import run_demo
from rlpulse.read.compare import compare_files, format_comparison, run_argument
from rlpulse.read.match import MatchError
from rlpulse.read.plot import (
    MAX_LINES,
    MAX_PANELS,
    PlotError,
    PlotWarning,
    plot_files,
)
from rlpulse.read.records import RunFileError, RunFileWarning, read_events, run_infos
from rlpulse.read.summary import (
    format_events,
    format_summary,
    narrow_summary,
    summarize_file,
)
from rlpulse.read.top import follow, frame
from rlpulse.sinks.registry import SCHEMES, SinkSpecError
from rlpulse.text import format_duration, format_table

__all__ = ["build_parser", "main"]

_DESCRIPTION = """\
Pull-based operational monitoring for reinforcement-learning data pipelines.

Run a monitored demo pipeline, then look at what it recorded:

  rlpulse demo --seconds 10
  rlpulse show runs/demo.sqlite
  rlpulse plot runs/demo.sqlite -o runs/demo.png
"""

_DEMO_DESCRIPTION = f"""\
Run a monitored reinforcement-learning data pipeline and record it.

With TorchRL installed (pip install 'rlpulse[torchrl]'): a TorchRL Collector
steps gymnasium's CartPole-v1 with a random policy from its own thread into
a ReplayBuffer, a small DQN learner trains on batches sampled from it, and an
EpisodeTally records episode returns. Without TorchRL, or with
--synthetic, a standard-library stand-in runs instead: a collector thread,
a ring buffer and a learner thread.

A background LoggerMonitor polls their stats() into a new run of a SQLite
file (--out), prints each payload on standard error and feeds any extra
sinks (--sink). At the end (or on Ctrl-C) it logs final snapshots; the
summary of the run is printed and its chart drawn next to the SQLite file
(with matplotlib: pip install 'rlpulse[plot]'). On SIGTERM (what a job
scheduler sends) it logs the final snapshots and flushes every sink, then
ends by the signal, without the summary.

Sink specs are SCHEME:TARGET, with SCHEME one of:
  {", ".join(sorted(SCHEMES))}

examples:
  rlpulse demo --seconds 5 --out {DEFAULT_OUT}
  rlpulse demo --sink csv:runs/demo.csv --sink tensorboard:runs/tensorboard
  rlpulse demo --synthetic --seconds 10
"""

_MATCH_HELP = """\
--match PATTERN is a glob (matched against the whole name) when it holds *,
? or [, a substring otherwise; repeated, it keeps the metrics matching any.
Patterns that match no metric are an error that lists the metrics there
are."""

_NUMBERS_HELP = """\
Numbers below a thousand show four significant digits (0.3333), whole
numbers up to 999,999 show in full (19,999), larger ones four significant
digits with M, G or T (1.999M), from 10^15 on in scientific notation
(4.611e+18); digits are cut, never rounded up, so 19,999 never shows as
20,000. --exact writes every value in full.
"""

_SHOW_DESCRIPTION = f"""\
Summarize a recorded run: per metric the last, smallest and largest value,
and for cumulative counters the mean rate per second over the run; then the
run's events (a stall, a hung call, a failing sink, drops), one a line, as
SQLiteLogger and JSONLLogger store them.

RUN is a file written by SQLiteLogger, CSVLogger or JSONLLogger, or by
hand in their formats (blank lines are skipped; a JSON lines payload
without "step" has none). A last line cut short (a crash, or a writer still
at it) is left out with a note on standard error. A SQLite file holds
several runs: --run picks one (default: the latest) and --runs lists them,
each with its start, length and number of records. --match keeps only the
metrics whose name matches PATTERN.

{_MATCH_HELP}

{_NUMBERS_HELP}
examples:
  rlpulse show runs/demo.sqlite
  rlpulse show runs/demo.sqlite --runs
  rlpulse show runs/demo.sqlite --run 2024-05-01_12-03-04
  rlpulse show runs/demo.sqlite --match 'collector/*' --exact
  rlpulse show metrics.csv
"""


_TOP_DESCRIPTION = f"""\
Follow a run while another process writes it: every --interval seconds the
run's summary as rlpulse show prints it (per metric the last, smallest and
largest value, a counter's mean rate), then its latest events, redrawn in
place on the terminal; q (or Ctrl-C) quits. Into a pipe or a file, or with
--once, one plain frame is printed.

RUN is a file written by SQLiteLogger, CSVLogger or JSONLLogger; --run
follows a named run of a SQLite file (default: the latest). A last line the
writer has not finished is read at the next frame. --match keeps only the
metrics whose name matches PATTERN.

{_MATCH_HELP}

{_NUMBERS_HELP}
examples:
  rlpulse top runs/demo.sqlite
  rlpulse top runs/demo.sqlite --match 'collector/*' --interval 0.5
  rlpulse top runs/demo.sqlite --once
"""


_COMPARE_DESCRIPTION = f"""\
Put recorded runs side by side: one row per metric, its figure in each run
and each run's ratio to the first (the baseline). A cumulative counter's
figure is its mean rate per second over the run, a gauge's the mean of its
values; a metric a run lacks shows -.

RUN is a file written by SQLiteLogger, CSVLogger or JSONLLogger: its latest
run, or FILE:NAME for the run NAME of a SQLite file (list them with
rlpulse show FILE --runs). --match keeps only the metrics whose name
matches PATTERN; a run that has none of them shows -.

{_MATCH_HELP}

{_NUMBERS_HELP}
examples:
  rlpulse compare runs/baseline.sqlite runs/new.sqlite
  rlpulse compare runs/all.sqlite:first runs/all.sqlite:second
  rlpulse compare a.sqlite b.csv --match 'collector/*'
  rlpulse compare a.sqlite b.sqlite --exact
"""


_PLOT_DESCRIPTION = f"""\
Draw a recorded run into an image: one panel per watch (the part of a metric
name before the first '/'), over the time since the run started, or over the
logged step with --x step (watches without a step are left out, and named).
A panel has one axis per unit: rates (per second, solid lines), then bytes,
percent, seconds and plain gauges (dashed). A cumulative counter is drawn as
its rate (itself too with --cumulative); metrics that never changed are
listed above their panel. Axes whose lines differ widely in size are
logarithmic. A chart draws at most {MAX_PANELS} watches of {MAX_LINES} lines each and
says what it left out: narrow it with --match.

RUN is a file written by SQLiteLogger, CSVLogger or JSONLLogger; --run picks
a run of a SQLite file (default: the latest). Several RUNs are drawn over
each other, each over the time since its own start, a line style per run
(FILE:NAME picks the run NAME of a SQLite file). --match keeps only the metrics
whose name matches PATTERN: a glob (matched against the whole name) when it
holds *, ? or [, a substring otherwise; repeated, it keeps the metrics
matching any; patterns that match no metric are an error that lists the
metrics there are. The image format follows the extension of FILE (.png, .svg,
.pdf). Needs matplotlib: pip install 'rlpulse[plot]'.

examples:
  rlpulse plot runs/demo.sqlite -o runs/demo.png
  rlpulse plot runs/demo.sqlite -o collector.png --match 'collector/*'
  rlpulse plot runs/demo.sqlite -o two.png --match 'collector/*' --match 'buffer/*'
  rlpulse plot metrics.csv -o rates.png --match _per_second --x step
  rlpulse plot runs/baseline.sqlite runs/new.sqlite -o both.png --match 'collector/*'
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
    _add_demo_command(commands)
    _add_show_command(commands)
    _add_top_command(commands)
    _add_compare_command(commands)
    _add_plot_command(commands)
    return parser


_Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _add_demo_command(commands: _Commands) -> None:
    demo = _add_command(
        commands,
        "demo",
        "run a monitored demo pipeline and record it",
        _DEMO_DESCRIPTION,
        _demo,
    )
    demo.add_argument(
        "--seconds",
        type=_positive_seconds,
        default=30.0,
        help="how long to run (default: %(default)g)",
    )
    demo.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        metavar="FILE",
        help="SQLite file to record the run in; the chart goes next to it, "
        "with .png (default: %(default)s)",
    )
    demo.add_argument(
        "--sink",
        action="append",
        default=[],
        dest="sinks",
        metavar="SPEC",
        help="also log to the sink SCHEME:TARGET (as in csv:runs/demo.csv); "
        "repeat for more",
    )
    demo.add_argument(
        "--synthetic",
        action="store_true",
        help="run the standard-library pipeline even when TorchRL is installed",
    )


def _add_show_command(commands: _Commands) -> None:
    show = _add_run_file_command(
        commands, "show", "summarize a recorded run", _SHOW_DESCRIPTION, _show
    )
    choice = show.add_mutually_exclusive_group()
    _add_run_option(choice, "show")
    choice.add_argument(
        "--runs",
        action="store_true",
        help="list the runs of a SQLite file instead, oldest first, each with "
        "its start, length and number of records",
    )
    _add_match_option(show)
    _add_exact_option(show)


def _add_top_command(commands: _Commands) -> None:
    top = _add_run_file_command(
        commands, "top", "follow a run as it is written", _TOP_DESCRIPTION, _top
    )
    _add_run_option(top, "follow")
    top.add_argument(
        "--interval",
        type=float,
        default=1.0,
        metavar="S",
        help="seconds between frames (default: %(default)s)",
    )
    _add_match_option(top)
    _add_exact_option(top)
    top.add_argument(
        "--once",
        action="store_true",
        help="print one plain frame and exit, as into a pipe",
    )


def _add_compare_command(commands: _Commands) -> None:
    compare = _add_command(
        commands,
        "compare",
        "put recorded runs side by side",
        _COMPARE_DESCRIPTION,
        _compare,
    )
    compare.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="a metrics file (its latest run) or FILE:NAME; the first is the baseline",
    )
    _add_match_option(compare)
    _add_exact_option(compare)


def _add_plot_command(commands: _Commands) -> None:
    plot = _add_command(
        commands,
        "plot",
        "draw recorded runs into an image",
        _PLOT_DESCRIPTION,
        _plot,
    )
    plot.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="metrics file written by an rlpulse file sink (SQLite, CSV, JSON "
        "lines), or FILE:NAME; several are drawn over each other",
    )
    plot.add_argument(
        "-o",
        "--output",
        type=Path,
        required=True,
        metavar="FILE",
        help="image file to write (.png, .svg or .pdf)",
    )
    _add_match_option(plot)
    plot.add_argument(
        "--cumulative",
        action="store_true",
        help="draw each cumulative counter itself too, beside its rate",
    )
    plot.add_argument(
        "--x",
        choices=("time", "step"),
        default="time",
        help="the x axis: time since the start of the run, or the logged step "
        "(default: %(default)s)",
    )
    _add_run_option(plot, "draw")


_Handler: TypeAlias = Callable[[argparse.Namespace], int]


def _add_command(
    commands: _Commands,
    name: str,
    summary: str,
    description: str,
    handler: _Handler,
) -> argparse.ArgumentParser:
    """Add the command ``name``, which ``main`` hands to ``handler``."""
    command = commands.add_parser(
        name,
        help=summary,
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.set_defaults(handler=handler)
    return command


def _add_run_file_command(
    commands: _Commands,
    name: str,
    summary: str,
    description: str,
    handler: _Handler,
) -> argparse.ArgumentParser:
    """Add a command that reads the run file given as its RUN argument."""
    command = _add_command(commands, name, summary, description, handler)
    command.add_argument(
        "path",
        type=Path,
        metavar="RUN",
        help="metrics file written by an rlpulse file sink (SQLite, CSV, JSON lines)",
    )
    return command


def _add_match_option(command: argparse.ArgumentParser) -> None:
    """Add ``--match PATTERN``, repeatable: which metrics the command keeps."""
    command.add_argument(
        "--match",
        metavar="PATTERN",
        action="append",
        help="only metrics whose name matches: a glob with *, ? or [, else a "
        "substring; repeat it to keep the metrics matching any; matching none "
        "is an error listing the metrics",
    )


def _add_exact_option(command: argparse.ArgumentParser) -> None:
    """Add ``--exact``: every value in full rather than at a glance."""
    command.add_argument(
        "--exact",
        action="store_true",
        help="write every value in full (4611686018427387904, 0.1) rather than "
        "short (4.611e+18, 19,999)",
    )


def _add_run_option(
    container: argparse.ArgumentParser | argparse._MutuallyExclusiveGroup, verb: str
) -> None:
    """Add ``--run NAME``, which picks the run of a SQLite file that the command will ``verb``."""
    container.add_argument(
        "--run",
        metavar="NAME",
        help=f"which run of a SQLite file to {verb} (default: the latest)",
    )


def main(argv: list[str] | None = None) -> int:
    """Run the ``rlpulse`` command line with ``argv`` (default: ``sys.argv[1:]``) and return the exit code.

    Errors a user can cause print one ``rlpulse: error: ...`` line on standard
    error and return 2; bad arguments exit with argparse's usual code 2. A
    reader that closes standard output early (``rlpulse show RUN | head``) is
    no error: the command stops quietly and returns 141, as a command killed
    by ``SIGPIPE`` exits in a shell.

    >>> import contextlib, io
    >>> errors = io.StringIO()
    >>> with contextlib.redirect_stderr(errors):
    ...     main(["show", "no/such/file.sqlite"])
    2
    >>> print(errors.getvalue().strip())
    rlpulse: error: no/such/file.sqlite: no such file; give the path of a metrics file written by an rlpulse file sink
    """
    args = build_parser().parse_args(argv)
    handler: _Handler = args.handler
    try:
        with _notes_printed():
            code = handler(args)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return code
    except BrokenPipeError:
        _discard_standard_output()
        return _CLOSED_PIPE
    except OSError as error:
        return _fail(_describe(error))
    except (RunFileError, MatchError, PlotError, SinkSpecError, sqlite3.Error) as error:
        return _fail(str(error))


_NOTES = (PlotWarning, RunFileWarning)
"""What rlpulse left out as asked (of a chart, of a file): a note, not a traceback."""


@contextlib.contextmanager
def _notes_printed() -> Iterator[None]:
    """While a command runs, each :data:`_NOTES` warning is one ``rlpulse: note: ...`` line on standard error, when it happens.

    Other warnings are shown as Python shows them.
    """
    with warnings.catch_warnings():
        for category in _NOTES:
            warnings.simplefilter("always", category)
        show_warning = warnings.showwarning

        def show(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: TextIO | None = None,
            line: str | None = None,
        ) -> None:
            if issubclass(category, _NOTES):
                one_line = " ".join(str(message).split())
                print(f"rlpulse: note: {one_line}", file=sys.stderr, flush=True)
            else:
                show_warning(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        yield


_CLOSED_PIPE = 128 + 13
"""The exit code after standard output was closed: a shell's for ``SIGPIPE``."""


def _discard_standard_output() -> None:
    """Point standard output at the null device, so the interpreter's last flush has nowhere to fail."""
    with contextlib.suppress(AttributeError, OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)


_TORCHRL_MODULES = frozenset({"torch", "torchrl", "tensordict", "gymnasium"})


def _demo(args: argparse.Namespace) -> int:
    with _stopping_on_sigterm():
        return _run_demo(args)


@contextlib.contextmanager
def _stopping_on_sigterm() -> Iterator[None]:
    """While the demo runs, ``SIGTERM`` keeps its final snapshots (:func:`rlpulse.stop_on_sigterm`)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may handle signals
        return
    previous = signal.getsignal(signal.SIGTERM)
    stop_on_sigterm()
    try:
        yield
    finally:
        # None: a handler from outside Python, which cannot be put back.
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def _run_demo(args: argparse.Namespace) -> int:
    line_format = {".csv": "csv", ".jsonl": "jsonl"}.get(Path(args.out).suffix.lower())
    if line_format is not None:
        return _fail(
            f"--out {args.out} names a {line_format.upper()} file, but the demo "
            f"records its run in a SQLite file: give --out a .sqlite path, and "
            f"add --sink {line_format}:{args.out} for a {line_format.upper()} copy"
        )
    if not args.synthetic:
        try:
            from rlpulse._demo.torchrl_pipeline import run_torchrl_demo
        except ModuleNotFoundError as error:
            missing = (error.name or "").partition(".")[0]
            if missing not in _TORCHRL_MODULES:
                raise
            print(
                f"rlpulse demo: TorchRL is not installed ({missing} is "
                "missing; pip install 'rlpulse[torchrl]'), so this is the "
                "synthetic pipeline",
                flush=True,
            )
        else:
            run_torchrl_demo(args.seconds, args.out, sinks=args.sinks)
            return 0
    run_demo(args.seconds, args.out, sinks=args.sinks)
    return 0


def _plot(args: argparse.Namespace) -> int:
    runs = [run_argument(text) for text in args.runs]
    if args.run is not None:
        if len(runs) > 1:
            return _fail("--run picks the run of one RUN; name each run as FILE:NAME")
        runs = [(runs[0][0], args.run)]
    for path, _ in runs:
        if (problem := _not_a_metrics_file(path)) is not None:
            return _fail(problem)
    try:
        written = plot_files(
            runs, args.output, match=args.match, x=args.x, cumulative=args.cumulative
        )
    except ImportError as error:
        return _fail(str(error))
    print(f"wrote {written}")
    return 0


def _show(args: argparse.Namespace) -> int:
    path: Path = args.path
    if (problem := _not_a_metrics_file(path)) is not None:
        return _fail(problem)
    if args.runs:
        print(_runs_table(path))
        return 0
    summary = narrow_summary(summarize_file(path, args.run), args.match)
    print(format_summary(summary, exact=args.exact))
    if events := _events_of(path, args.run):
        print()
        print(events)
    return 0


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


def _events_of(path: Path, run: str | None) -> str:
    """The events of the run as ``show`` lists them; ``""`` for none, or a file that stores none (CSV)."""
    try:
        return format_events(read_events(path, run))
    except RunFileError:
        return ""


def _top(args: argparse.Namespace) -> int:
    path: Path = args.path
    if (problem := _not_a_metrics_file(path)) is not None:
        return _fail(problem)
    interval = args.interval
    if not (isinstance(interval, float) and math.isfinite(interval) and interval > 0):
        return _fail(f"--interval must be a positive number of seconds, got {interval}")
    if args.once or not (sys.stdin.isatty() and sys.stdout.isatty()):
        print(frame(path, args.run, args.match, exact=args.exact))
        return 0
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C quits as q does
        follow(path, args.run, match=args.match, interval=interval, exact=args.exact)
    return 0


def _compare(args: argparse.Namespace) -> int:
    if len(args.runs) < 2:
        return _fail(
            "compare needs at least two runs, the first the baseline: "
            "rlpulse compare RUN_A RUN_B [...]"
        )
    runs = [run_argument(text) for text in args.runs]
    for path, _ in runs:
        if (problem := _not_a_metrics_file(path)) is not None:
            return _fail(problem)
    print(format_comparison(compare_files(runs, args.match), exact=args.exact))
    return 0


def _not_a_metrics_file(path: Path) -> str | None:
    """Why ``path`` cannot be a metrics file to read (a directory, nothing there), else ``None``."""
    if path.is_dir():
        return f"{path} is a directory; {_GIVE_METRICS_FILE}"
    if not path.exists():
        return f"{path}: no such file; {_GIVE_METRICS_FILE}"
    return None


def _describe(error: OSError) -> str:
    message = error.strerror or str(error)
    if error.filename is not None and str(error.filename) not in message:
        message = f"{error.filename}: {message}"
    return message


def _fail(message: str) -> int:
    one_line = " ".join(message.split())
    print(f"rlpulse: error: {one_line}", file=sys.stderr)
    return 2
