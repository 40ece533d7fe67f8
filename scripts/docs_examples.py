"""Run the documentation's examples as a user runs them; rewrite its sample output from a run.

Every fenced block of README.md and docs/ that a user would copy runs in the
test suite (the repository's ``conftest.py`` collects them through Sybil, so
``pytest docs/torchrl.md`` runs one page). A document's blocks run in order,
in a fresh directory of their own, as a user runs one after the other:

- ```` ```python ````: a complete script, saved to a file and run by this
  Python; it must exit with 0, print no traceback and log no warning
  through rlpulse's logger. A server an example opens for other machines
  (``addr="0.0.0.0"``, a fixed port) is opened on 127.0.0.1 and a free
  port instead: a test serves nothing beyond this machine, and two runs
  side by side do not collide.
- ```` ```console ````: ``$ command`` lines (``rlpulse ...`` is this
  Python's ``-m rlpulse``), each followed by the output it prints. The output
  shown must have the shape of what the command prints now: the same lines
  with the same words, any number standing for any number (timings, counts
  and dates vary from run to run).
- ```` ```sh ````: install steps (``pip install``, ``make``), which a test
  cannot take; a block with any other command must be a console block.
- ```` ```yaml ````: parsed.

A block that is not meant to run as it is follows
``<!-- skip: next "why" -->``.

Usage::

    python scripts/docs_examples.py docs/torchrl.md [...]   # rewrite the sample output

runs each document's examples and writes what its console commands print now
in place of the output shown.
"""

from __future__ import annotations

import argparse
import difflib
import logging
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import unittest
from collections.abc import Callable
from pathlib import Path

from sybil import Document, Example
from sybil.parsers.markdown import CodeBlockParser, SkipParser

from rlpulse.text import plural

ROOT = Path(__file__).resolve().parent.parent
# Where a test finds the documents, relative to the repository (see
# pathlib.PurePath.match).
DOCUMENTS = ("README.md", "docs/*.md", "docs/sinks/*.md")
# The longest an example may run: inside pytest-timeout's 60 s, so that a
# slow example fails with its own output rather than a stack dump.
EXAMPLE_TIMEOUT_S = 50.0
# Where each block's evaluator finds the document's working directory.
DIRECTORY_KEY = "example_dir"
# What a console evaluator does with the output a command printed.
OUTPUT_KEY = "on_console_output"

_WARNED = "rlpulse warned: "
# Runs a script as `python script.py` does, with rlpulse's warnings marked.
_RUNNER = f"""
import logging, runpy, sys

class Mark(logging.Handler):
    def emit(self, record):
        sys.stderr.write({_WARNED!r} + record.getMessage() + "\\n")

logging.getLogger("rlpulse").addHandler(Mark(logging.WARNING))
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
# What an example opens for other machines, as the tests open it instead.
_LOCAL_ONLY = (
    (re.compile(r'addr="0\.0\.0\.0"'), 'addr="127.0.0.1"'),
    (re.compile(r"\bport=\d+"), "port=0"),
)
_INSTALL_STEP = re.compile(r"(pip install|make)\b")
# A number as the readers print it: 20k, 0.0012, 1.5e-05, 12,544, a date, a
# time, a run named after the time (2026-12-02_15-33-50), a share or a ratio
# (63%, 2.7x), a number that ends a clause (80%,) or stands in parentheses.
_NUMBER = re.compile(r"\(?[-+]?[\d.:_-]*\d[\d.:_,-]*(?:e[-+]?\d+)?[kMGT]?[%x]?\)?[,;]?")


def environment() -> dict[str, str]:
    """The environment an example runs in: the rlpulse under test, W&B offline."""
    import rlpulse

    environ = dict(os.environ)
    source = str(Path(rlpulse.__file__).resolve().parent.parent)
    environ["PYTHONPATH"] = os.pathsep.join(
        [source, *filter(None, [environ.get("PYTHONPATH")])]
    )
    # The W&B page's example logs a run without an account.
    environ["WANDB_MODE"] = "offline"
    environ["WANDB_SILENT"] = "true"
    return environ


def run(argv: list[str], directory: Path) -> subprocess.CompletedProcess[str]:
    """Run a command in ``directory`` under the examples' deadline, with its process group."""
    process = subprocess.Popen(
        argv,
        cwd=directory,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its worker processes end with it on timeout
    )
    try:
        stdout, stderr = process.communicate(timeout=EXAMPLE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        stderr += f"\n(killed after {EXAMPLE_TIMEOUT_S:g} s)"
        return subprocess.CompletedProcess(argv, -signal.SIGKILL, stdout, stderr)
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)


def _document(example: Example) -> str:
    """The example's document, relative to the repository when it is in it."""
    path = Path(example.path)
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _where(example: Example) -> str:
    return f"{_document(example)}, line {example.line}"


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def run_python(example: Example) -> str | None:
    """Save a python block as a script and run it; a message when it failed."""
    directory: Path = example.namespace[DIRECTORY_KEY]
    script = directory / f"{Path(example.path).stem}_line_{example.line}.py"
    source = example.parsed
    for pattern, local in _LOCAL_ONLY:
        source = pattern.sub(local, source)
    script.write_text(source)
    result = run([sys.executable, "-c", _RUNNER, script.name], directory)
    warnings = [line for line in result.stderr.splitlines() if line.startswith(_WARNED)]
    if result.returncode == 0 and "Traceback" not in result.stderr and not warnings:
        return None
    return (
        f"the example at {_where(example)} exited with {result.returncode}"
        f"{', printed a traceback' if 'Traceback' in result.stderr else ''}"
        f"{', logged warnings' if warnings else ''}; its standard error ends:\n"
        f"{_tail(result.stderr)}"
    )


def commands(block: str) -> list[tuple[str, str]]:
    """The ``$ command`` lines of a console block, each with the output shown below it."""
    found: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            found.append((line[2:], []))
        elif found:
            found[-1][1].append(line)
        elif line.strip():
            raise ValueError(f"a console block starts with '$ command', not {line!r}")
    return [(command, "\n".join(output).strip("\n")) for command, output in found]


def shape(output: str) -> list[str]:
    """The lines of a command's output, words kept and each number as ``#``."""
    return [
        " ".join("#" if _NUMBER.fullmatch(word) else word for word in line.split())
        for line in output.strip("\n").splitlines()
    ]


def run_console(example: Example) -> str | None:
    """Run a console block's commands; a message when one failed or printed another shape."""
    directory: Path = example.namespace[DIRECTORY_KEY]
    for command, shown in commands(example.parsed):
        argv = shlex.split(command)
        if argv[0] == "rlpulse":
            argv = [sys.executable, "-m", "rlpulse", *argv[1:]]
        result = run(argv, directory)
        if result.returncode != 0:
            return (
                f"'{command}' at {_where(example)} exited with {result.returncode}:\n"
                f"{_tail(result.stderr)}"
            )
        printed = result.stdout.strip("\n")
        on_output: Callable[[Example, str, str], None] | None = example.namespace.get(
            OUTPUT_KEY
        )
        if on_output is not None:
            on_output(example, command, printed)
        elif shape(shown) != shape(printed):
            difference = "\n".join(
                difflib.unified_diff(
                    shape(shown), shape(printed), "shown", "printed", lineterm=""
                )
            )
            return (
                f"'{command}' at {_where(example)} prints another output than the one "
                f"shown (numbers aside); rewrite it with "
                f"`python scripts/docs_examples.py {_document(example)}`:\n"
                f"{difference}\n\nIt prints:\n{printed}"
            )
    return None


def check_install_steps(example: Example) -> str | None:
    """A sh block holds install steps only; anything else runs as a console block."""
    for line in example.parsed.splitlines():
        command = line.split("#")[0].strip()
        if command and not _INSTALL_STEP.match(command):
            return (
                f"'{command}' at {_where(example)} is not an install step: write it as "
                f"'$ {command}' in a console block, so that it runs with the tests"
            )
    return None


def parse_yaml(example: Example) -> str | None:
    """Parse a yaml block; a message when it does not parse."""
    import yaml

    try:
        yaml.safe_load(example.parsed)
    except yaml.YAMLError as error:
        return f"the YAML at {_where(example)} does not parse: {error}"
    return None


PARSERS = [
    SkipParser(),
    CodeBlockParser("python", run_python),
    CodeBlockParser("console", run_console),
    CodeBlockParser("sh", check_install_steps),
    CodeBlockParser("yaml", parse_yaml),
]


def rewrite_output(path: Path) -> int:
    """Run a document's examples and write what its console commands print in place of the output shown.

    Returns the number of console blocks rewritten.
    """
    document = Document.parse(str(path), *PARSERS)
    printed_by_block: dict[tuple[int, int], list[str]] = {}

    def record(example: Example, command: str, printed: str) -> None:
        start = example.start + example.parsed.offset
        block = printed_by_block.setdefault((start, start + len(example.parsed)), [])
        block.append(f"$ {command}\n{printed}\n" if printed else f"$ {command}\n")

    with tempfile.TemporaryDirectory(prefix="rlpulse-docs-") as directory:
        document.namespace[DIRECTORY_KEY] = Path(directory)
        document.namespace[OUTPUT_KEY] = record
        for example in document:
            try:
                example.evaluate()
            except unittest.SkipTest:
                continue
    text = path.read_text()
    for (start, end), outputs in sorted(printed_by_block.items(), reverse=True):
        text = text[:start] + "".join(outputs) + text[end:]
    path.write_text(text)
    return len(printed_by_block)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("documents", nargs="+", type=Path, help="Markdown files")
    arguments = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for path in arguments.documents:
        rewritten = rewrite_output(path.resolve())
        logging.info("%s: %s rewritten", path, plural(rewritten, "sample output"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
