"""The ``rlpulse`` parser, one subcommand per module of :mod:`rlpulse.cli`, and ``main``: errors as one line, notes as notes."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import sqlite3
import sys
import warnings
from collections.abc import Iterator
from typing import NoReturn, TextIO

from rlpulse import __version__
from rlpulse.cli import common, compare, demo, plot, show, top
from rlpulse.read.match import MatchError
from rlpulse.read.plot import (
    PlotError,
    PlotWarning,
)
from rlpulse.read.records import (
    RunFileError,
    RunFileLockedWarning,
    RunFileWarning,
)
from rlpulse.read.span import SpanError
from rlpulse.sinks.registry import SinkSpecError

_DESCRIPTION = """\
Pull-based operational monitoring for reinforcement-learning data pipelines.

Run a monitored demo pipeline, then look at what it recorded:

  rlpulse demo --seconds 10
  rlpulse show runs/demo.sqlite
  rlpulse plot runs/demo.sqlite -o runs/demo.png
"""


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
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"rlpulse {__version__}")
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", title="commands", required=True
    )
    for command in (demo, show, top, compare, plot):
        command.add(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the ``rlpulse`` command line with ``argv`` (default: ``sys.argv[1:]``) and return the exit code.

    Errors a user can cause print one ``rlpulse: error: ...`` line on standard
    error and return 2; bad arguments exit with argparse's usual code 2. A
    reader that closes standard output early (``rlpulse show RUN | head``) is
    no error: the command stops quietly and returns 141, as a command killed
    by ``SIGPIPE`` exits in a shell. Ctrl-C (``KeyboardInterrupt``) ends a
    command quietly too, with 130, a shell's code for ``SIGINT``; ``top``
    quits and ``demo`` stops early on it, as they say.

    >>> import contextlib, io
    >>> errors = io.StringIO()
    >>> with contextlib.redirect_stderr(errors):
    ...     main(["show", "no/such/file.sqlite"])
    2
    >>> print(errors.getvalue().strip())
    rlpulse: error: no/such/file.sqlite: no such file; give the path of a metrics file written by an rlpulse file sink
    """
    args, unknown = build_parser().parse_known_args(argv)
    if unknown:
        _refuse_unknown(args.command_parser, unknown)
    handler: common.Handler = args.handler
    try:
        with _notes_printed():
            code = handler(args)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return code
    except BrokenPipeError:
        _discard_standard_output()
        return _CLOSED_PIPE
    except KeyboardInterrupt:
        return _INTERRUPTED
    except OSError as error:
        return common.fail(common.describe(error))
    except (
        RunFileError,
        MatchError,
        SpanError,
        PlotError,
        SinkSpecError,
        sqlite3.Error,
    ) as error:
        return common.fail(str(error))


def _refuse_unknown(command: argparse.ArgumentParser, unknown: list[str]) -> NoReturn:
    """Exit as argparse does, with the command's own usage and, for a misspelled option, the one meant.

    The top-level parser would say it, with its usage, not the command's.
    """
    options = [
        option for action in command._actions for option in action.option_strings
    ]
    meant = [
        f"{given} (did you mean {close[0]}?)" if close else given
        for given in unknown
        for close in [
            difflib.get_close_matches(given, options, n=1)
            if given.startswith("-")
            else []
        ]
    ]
    command.error(f"unrecognized arguments: {' '.join(meant)}")


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
            if issubclass(category, RunFileLockedWarning) and not sys.stderr.isatty():
                return  # the error that ends the wait, if any, says it
            if issubclass(category, _NOTES):
                one_line = " ".join(str(message).split())
                print(f"rlpulse: note: {one_line}", file=sys.stderr, flush=True)
            else:
                show_warning(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        yield


_CLOSED_PIPE = 128 + 13
"""The exit code after standard output was closed: a shell's for ``SIGPIPE``."""

_INTERRUPTED = 128 + 2
"""The exit code after Ctrl-C: a shell's for ``SIGINT``."""


def _discard_standard_output() -> None:
    """Point standard output at the null device, so the interpreter's last flush has nowhere to common.fail."""
    with contextlib.suppress(AttributeError, OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
