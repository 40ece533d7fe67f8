"""The ``rlpulse`` command line: one module per command.

:mod:`~rlpulse.cli.main` builds the parser and runs a command, turning the
errors users can cause (a missing or corrupt file, an unknown run, an
unwritable path, a sink spec with an unknown scheme, a missing optional
dependency) into one line on standard error and exit code 2;
:mod:`~rlpulse.cli.common` holds the options the commands share; each of
:mod:`~rlpulse.cli.demo`, :mod:`~rlpulse.cli.show`, :mod:`~rlpulse.cli.top`,
:mod:`~rlpulse.cli.compare` and :mod:`~rlpulse.cli.plot` adds its
subcommand (``add``) and runs it (``run``). What the commands do lives in
:mod:`rlpulse._demo` and :mod:`rlpulse.read`.
"""

from rlpulse.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
