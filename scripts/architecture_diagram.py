"""Draw rlpulse's component diagram from its imports, into ``docs/architecture.md``.

Usage::

    python scripts/architecture_diagram.py           # rewrite the diagram block
    python scripts/architecture_diagram.py --check   # exit 1 when the block is stale

A component is a top-level module or subpackage of ``rlpulse``; an arrow
``a --> b`` means code in ``a`` imports ``b`` (imports inside functions
included). The package's ``__init__`` (the public names) and ``__main__``
are left out: they import everything by design.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "rlpulse"
DOCUMENT = ROOT / "docs" / "architecture.md"
CORE = (
    "schedules",
    "metrics",
    "targets",
    "distributions",
    "text",
    "naming",
    "verdict",
    "watch",
    "runtime",
    "monitor",
)
_BLOCK = re.compile(
    r"(<!-- diagram:start -->\n)(?P<body>.*?)(<!-- diagram:end -->)", re.DOTALL
)


def component_of(path: Path) -> str | None:
    """The component a source file belongs to, or ``None`` for the package's own entry points."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if parts in (("__init__",), ("__main__",)):
        return None
    return parts[0]


def imported_components(path: Path) -> set[str]:
    """The rlpulse components a source file imports."""
    package = ["rlpulse", *path.relative_to(PACKAGE).parent.parts]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[: len(package) - node.level + 1], base])
            names = [f"{base}.{alias.name}".strip(".") for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "rlpulse" and len(parts) > 1:
                found.add(parts[1])
    return found


def edges() -> list[tuple[str, str]]:
    """Every ``(importer, imported)`` pair of distinct components, sorted."""
    known = {component_of(path) for path in PACKAGE.rglob("*.py")} - {None}
    pairs: set[tuple[str, str]] = set()
    for path in PACKAGE.rglob("*.py"):
        source = component_of(path)
        if source is None:
            continue
        for target in imported_components(path) & known:
            if target != source:
                pairs.add((source, target))
    return sorted(pairs)


def diagram() -> str:
    """The Mermaid flowchart of the components, the core in its own box."""
    pairs = edges()
    names = sorted({name for pair in pairs for name in pair})
    core = [name for name in CORE if name in names]
    lines = ["```mermaid", "flowchart TD", "  subgraph core"]
    lines += [f"    {name}" for name in core]
    lines.append("  end")
    lines += [f"  {name}" for name in names if name not in core]
    lines += [f"  {source} --> {target}" for source, target in pairs]
    lines.append("```")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="exit 1 when the diagram is stale"
    )
    check = parser.parse_args(argv).check
    document = DOCUMENT.read_text()
    match = _BLOCK.search(document)
    if match is None:
        print(f"{DOCUMENT}: no <!-- diagram:start --> block", file=sys.stderr)
        return 2
    fresh = diagram()
    if match["body"] == fresh:
        return 0
    if check:
        print(f"{DOCUMENT}: the diagram is stale; run {__file__}", file=sys.stderr)
        return 1
    DOCUMENT.write_text(
        document[: match.start("body")] + fresh + document[match.end("body") :]
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
