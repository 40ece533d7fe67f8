"""rlpulse's benchmarks: each section measures one thing and renders its markdown.

``python -m benchmarks`` (``make bench``) runs every section listed in
:data:`SECTIONS` and writes each one's block into ``docs/benchmarks.md``,
leaving the other sections' blocks as they are. A section is a module with
``run(*, quick: bool = False) -> str`` returning its markdown (starting with
a ``##`` heading); adding one is one new module and one line here.
"""

from __future__ import annotations

import sys
import textwrap

__all__ = ["SECTIONS", "progress", "reflow"]

SECTIONS: dict[str, str] = {
    "monitor": "benchmarks.monitor_overhead",
    "sinks": "benchmarks.sinks",
    "throughput": "benchmarks.throughput",
    "loop_slowdown": "benchmarks.loop_slowdown",
    "keeping_up": "benchmarks.keeping_up",
    "watch_count": "benchmarks.watch_count",
    "reliability": "benchmarks.reliability",
    "scale_out": "benchmarks.scale_out",
}
"""Section name (as given to ``--only``) → module implementing ``run()``, in document order."""


def progress(message: str) -> None:
    """Print one progress line of a running benchmark, at once.

    Examples:
        >>> progress("monitor: round 1/15")
        monitor: round 1/15
    """
    print(message, file=sys.stdout, flush=True)


def reflow(markdown: str, width: int = 78) -> str:
    """Refill the paragraphs of a section filled in with figures, so the document reads evenly; headings and tables stay.

    Examples:
        >>> print(reflow("## Title\\n\\nA  paragraph\\nof words.", width=12), end="")
        ## Title
        <BLANKLINE>
        A paragraph
        of words.
    """
    paragraphs = []
    for paragraph in markdown.strip().split("\n\n"):
        if paragraph.startswith(("#", "|")):
            paragraphs.append(paragraph)
        else:
            paragraphs.append(
                textwrap.fill(
                    " ".join(paragraph.split()),
                    width,
                    break_long_words=False,
                    break_on_hyphens=False,
                )
            )
    return "\n\n".join(paragraphs) + "\n"
