"""Run rlpulse's benchmarks and write their sections into ``docs/benchmarks.md``.

Usage::

    python -m benchmarks                  # every section, full rounds
    python -m benchmarks --only monitor   # one section (repeatable)
    python -m benchmarks --quick          # few rounds: a smoke test, not a measurement

Each section's block in the document is delimited by HTML comments naming
the section, so a run replaces only the blocks of the sections it ran and
keeps every other block.
"""

from __future__ import annotations

import argparse
import importlib
import re
from collections.abc import Sequence
from pathlib import Path

from benchmarks import SECTIONS, progress

__all__ = ["main", "merge_section", "split_sections", "write_section"]

DEFAULT_OUTPUT = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"

PREAMBLE = """\
# Benchmarks

These numbers are generated, not written: `make bench` (that is,
`python -m benchmarks`) runs every benchmark section and rewrites its block
below; `python -m benchmarks --only monitor` reruns one section and keeps the
others. Each section says what it measures, how, and on which machine. The
machines are shared and noisy, so every section interleaves the compared
implementations round by round and reports medians over many rounds; compare
ratios, not absolute nanoseconds, across machines. `--quick` runs a few
rounds only, to check that the benchmarks work; its numbers mean nothing.
"""

_BLOCK = re.compile(
    r"<!-- benchmark:(?P<name>[\w.-]+):start -->\n"
    r"(?P<body>.*?)"
    r"<!-- benchmark:(?P=name):end -->\n?",
    re.DOTALL,
)


def split_sections(document: str) -> dict[str, str]:
    """Return the section blocks of a benchmarks document, by section name, in order.

    Examples:
        >>> split_sections(
        ...     "# Title\\n<!-- benchmark:sinks:start -->\\n## Sinks\\n"
        ...     "<!-- benchmark:sinks:end -->\\n"
        ... )
        {'sinks': '## Sinks\\n'}
    """
    return {match["name"]: match["body"] for match in _BLOCK.finditer(document)}


def merge_section(document: str, name: str, markdown: str) -> str:
    """Return ``document`` with section ``name``'s block replaced by (or added as) ``markdown``.

    The preamble is rewritten; the other sections' blocks are kept, in the
    order of :data:`~benchmarks.SECTIONS`, followed by any block of a section
    that is no longer listed there.

    Examples:
        >>> document = merge_section("", "monitor", "## Monitor\\nold\\n")
        >>> document = merge_section(document, "extra", "## Extra\\n")
        >>> document = merge_section(document, "monitor", "## Monitor\\nnew\\n")
        >>> split_sections(document)
        {'monitor': '## Monitor\\nnew\\n', 'extra': '## Extra\\n'}
    """
    blocks = split_sections(document)
    blocks[name] = markdown if markdown.endswith("\n") else markdown + "\n"
    ordered = [section for section in SECTIONS if section in blocks]
    ordered += [section for section in blocks if section not in SECTIONS]
    parts = [PREAMBLE]
    for section in ordered:
        parts.append(
            f"\n<!-- benchmark:{section}:start -->\n"
            f"{blocks[section]}"
            f"<!-- benchmark:{section}:end -->\n"
        )
    return "".join(parts)


def write_section(path: Path, name: str, markdown: str) -> None:
    """Write section ``name``'s ``markdown`` into the benchmarks document at ``path``.

    Creates the file (and its folder) when missing; keeps the other sections.

    Examples:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "docs" / "benchmarks.md"
        >>> write_section(path, "monitor", "## Monitor\\n")
        >>> list(split_sections(path.read_text()))
        ['monitor']
    """
    existing = path.read_text(encoding="utf-8") if path.exists() else ""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(merge_section(existing, name, markdown), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the chosen benchmark sections and write them into the document; return 0.

    A missed budget is reported in the output (``OVER BUDGET``), not by the
    exit code: a benchmark measures, it does not gate.
    """
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Run rlpulse's benchmarks and write docs/benchmarks.md.",
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=list(SECTIONS),
        metavar="SECTION",
        help=f"run only this section (repeatable); one of: {', '.join(SECTIONS)}",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="few rounds, to check the benchmarks work; the numbers mean nothing",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=DEFAULT_OUTPUT,
        help="markdown document to update (default: docs/benchmarks.md)",
    )
    args = parser.parse_args(argv)
    names = args.only or list(SECTIONS)
    for name in names:
        progress(f"== {name} ==")
        module = importlib.import_module(SECTIONS[name])
        markdown: str = module.run(quick=args.quick)
        write_section(args.output, name, markdown)
        progress(f"{name}: written to {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
