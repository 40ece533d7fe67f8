"""Which metrics a command keeps: ``--match PATTERN`` of ``show``, ``top``, ``compare`` and ``plot``.

A pattern is a glob when it holds ``*``, ``?`` or ``[``, else a substring;
several keep the metrics matching any. Patterns that keep nothing are an
error that lists what there is (:class:`MatchError`), the same in every
command.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from typing import TypeAlias

from rlpulse.text import format_name

__all__ = [
    "Match",
    "MatchError",
    "matching",
    "no_metric_matching",
    "patterns_text",
    "select_metrics",
    "some_names",
]

Match: TypeAlias = "str | Sequence[str] | None"

_MAX_NAMES_IN_ERROR = 12


class MatchError(ValueError):
    """``--match`` patterns that keep none of a run's metrics; its message lists the metrics there are.

    >>> try:
    ...     matching(["collector/frames"], "buffer", run="baseline")
    ... except MatchError as error:
    ...     print(error)
    run baseline has no metric matching 'buffer'; its metrics are collector/frames
    """


def select_metrics(names: Iterable[str], match: Match = None) -> list[str]:
    """Return the metric names ``--match`` keeps, sorted.

    A pattern is a glob when it holds ``*``, ``?`` or ``[`` (matched against
    the whole name, case-sensitively, as in ``collector/*`` or
    ``*_per_second``), else a substring of the name (``buffer``,
    ``episode_return``). ``match`` is one pattern or several (a name
    matching any of them is kept); ``None`` keeps every name.

    >>> names = ["collector/frames", "collector/frames_per_second", "buffer/size"]
    >>> select_metrics(names, "*_per_second")
    ['collector/frames_per_second']
    >>> select_metrics(names, "frames")
    ['collector/frames', 'collector/frames_per_second']
    >>> select_metrics(names, ["buffer/*", "*_per_second"])
    ['buffer/size', 'collector/frames_per_second']
    >>> select_metrics(names)
    ['buffer/size', 'collector/frames', 'collector/frames_per_second']
    """
    unique = sorted(set(names))
    if match is None:
        return unique
    patterns = [match] if isinstance(match, str) else list(match)
    return [
        name for name in unique if any(_matches(name, pattern) for pattern in patterns)
    ]


def matching(names: Iterable[str], match: Match, *, run: str) -> list[str]:
    """Return :func:`select_metrics` of run ``run``'s metric ``names``; raise :class:`MatchError` when it keeps none of them.

    A run without metrics keeps its none without an error.

    >>> matching(["c/frames", "b/size"], "c/*", run="r")
    ['c/frames']
    """
    names = list(names)
    kept = select_metrics(names, match)
    if names and not kept:
        raise MatchError(no_metric_matching(run, match, names))
    return kept


def no_metric_matching(run: str, match: Match, names: Iterable[str]) -> str:
    """The one-line message for patterns that keep none of run ``run``'s metric ``names``.

    >>> no_metric_matching("r", ["zz", "y*"], ["b/size", "c/frames"])
    "run r has no metric matching 'zz' or 'y*'; its metrics are b/size, c/frames"
    """
    return (
        f"run {format_name(run)} has no metric matching {patterns_text(match)}; "
        f"its metrics are {some_names(names)}"
    )


def patterns_text(match: Match) -> str:
    """The patterns as an error names them: quoted, joined with ``or``.

    >>> patterns_text("collector/*"), patterns_text(["a", "b"])
    ("'collector/*'", "'a' or 'b'")
    """
    patterns = [match] if isinstance(match, str) or match is None else list(match)
    return " or ".join(repr(pattern) for pattern in patterns)


def some_names(names: Iterable[str]) -> str:
    """The first names in order, for a one-line message: a dozen, then how many more.

    >>> some_names(f"m{index:02d}" for index in range(14))
    'm00, m01, m02, m03, m04, m05, m06, m07, m08, m09, m10, m11 and 2 more'
    """
    ordered = sorted(names)
    shown = ", ".join(format_name(name) for name in ordered[:_MAX_NAMES_IN_ERROR])
    if len(ordered) > _MAX_NAMES_IN_ERROR:
        shown += f" and {len(ordered) - _MAX_NAMES_IN_ERROR} more"
    return shown


def _matches(name: str, pattern: str) -> bool:
    if any(character in pattern for character in "*?["):
        return fnmatch.fnmatchcase(name, pattern)
    return pattern in name
