"""rlpulse's benchmarks: each section measures one thing and renders its markdown.

``python -m benchmarks`` (``make bench``) runs every section listed in
:data:`SECTIONS` and writes each one's block into ``docs/benchmarks.md``,
leaving the other sections' blocks as they are. A section is a module with
``run(*, quick: bool = False) -> str`` returning its markdown (starting with
a ``##`` heading); adding one is one new module and one line here.
"""

from __future__ import annotations

import os
import platform
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from typing import Generic, TypeVar

__all__ = ["SECTIONS", "Budget", "machine", "progress", "reflow"]

_Result = TypeVar("_Result")

SECTIONS: dict[str, str] = {
    "monitor": "benchmarks.monitor_overhead",
    "sinks": "benchmarks.sinks",
    "throughput": "benchmarks.throughput",
    "loop_slowdown": "benchmarks.loop_slowdown",
    "keeping_up": "benchmarks.keeping_up",
    "watch_count": "benchmarks.watch_count",
    "histograms": "benchmarks.histograms",
    "reliability": "benchmarks.reliability",
    "scale_out": "benchmarks.scale_out",
    "top_follow": "benchmarks.top_follow",
    "long_runs": "benchmarks.long_runs",
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


@dataclass(frozen=True)
class Budget(Generic[_Result]):
    """A limit on one figure of a section's results: at least ``limit``, below it, or (``at_most``) no more than it.

    Examples:
        >>> share = Budget("delivered", lambda result: result["delivered"], 0.99, at_least=True)
        >>> share.passes({"delivered": 1.0}), share.sign
        (True, '>=')
        >>> Budget("lost", lambda result: result["lost"], 0.02).passes({"lost": 0.02})
        False
        >>> most = Budget("lost", lambda result: result["lost"], 0.02, at_most=True)
        >>> most.passes({"lost": 0.02}), most.sign
        (True, '<=')
    """

    label: str
    figure: Callable[[_Result], float]
    limit: float
    at_least: bool = False
    at_most: bool = False

    @property
    def sign(self) -> str:
        """How the figure compares with the limit when it passes: ``>=``, ``<=`` or ``<``."""
        return ">=" if self.at_least else "<=" if self.at_most else "<"

    def passes(self, result: _Result) -> bool:
        """Whether ``result`` keeps within the limit."""
        value = self.figure(result)
        if self.at_least:
            return value >= self.limit
        return value <= self.limit if self.at_most else value < self.limit


def machine(*packages: str) -> str:
    """The line naming the machine and the versions a section ran with: Python's, the ``packages``', rlpulse's.

    Examples:
        >>> machine().startswith("Machine: ")
        True
    """
    versions = ", ".join(
        f"{'TorchRL' if name == 'torchrl' else name} {version(name)}"
        for name in (*packages, "rlpulse")
    )
    return (
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, {platform.system()}; {versions}."
    )
