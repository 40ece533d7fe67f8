"""Which metrics a command keeps: ``--match PATTERN`` of ``show``, ``top``, ``compare`` and ``plot``.

A pattern is a glob when it holds ``*``, ``?`` or ``[``, else a substring;
several keep the metrics matching any. Patterns that keep nothing are an
error that lists what there is (:class:`MatchError`), the same in every
command.
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Iterable, Sequence
from typing import TypeAlias

from rlpulse.naming import split
from rlpulse.text import format_name, noun_for

__all__ = [
    "Match",
    "MatchError",
    "matching",
    "metrics_there",
    "no_metric_matching",
    "patterns_text",
    "select_metrics",
    "some_names",
    "unmatched",
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
    """Return :func:`select_metrics` of run ``run``'s metric ``names``; raise :class:`MatchError` when a pattern matches none of them (a typo among several too).

    A run without metrics keeps its none without an error.

    >>> matching(["c/frames", "b/size"], "c/*", run="r")
    ['c/frames']
    >>> matching(["c/frames", "b/size"], ["c/*", "sise"], run="r")
    Traceback (most recent call last):
    ...
    rlpulse.read.match.MatchError: run r has no metric matching 'sise'; its metrics are b/size, c/frames
    """
    names = list(names)
    missing = unmatched(names, match) if names else []
    if missing:
        raise MatchError(no_metric_matching(run, missing, names))
    return select_metrics(names, match)


def unmatched(names: Iterable[str], match: Match) -> list[str]:
    """The patterns of ``match`` that match none of ``names``; none without a match.

    >>> unmatched(["c/frames", "b/size"], ["c/*", "epsiode", "size"])
    ['epsiode']
    """
    if match is None:
        return []
    names = list(names)
    patterns = [match] if isinstance(match, str) else list(match)
    return [p for p in patterns if not any(_matches(name, p) for name in names)]


def no_metric_matching(run: str, match: Match, names: Iterable[str]) -> str:
    """The one-line message for patterns that keep none of run ``run``'s metric ``names``: the patterns that would, where a pattern is close to one, and what there is.

    >>> no_metric_matching("r", ["zz", "y*"], ["b/size", "c/frames"])
    "run r has no metric matching 'zz' or 'y*'; its metrics are b/size, c/frames"
    >>> no_metric_matching("r", "colector/frames", ["collector/frames", "b/size"])
    "run r has no metric matching 'colector/frames'; did you mean 'collector/frames'? Its metrics are b/size, collector/frames"
    >>> no_metric_matching("r", "frames*", ["collector/frames", "b/size"])
    "run r has no metric matching 'frames*'; did you mean '*frames*' (a pattern with *, ? or [ matches whole names)? Its metrics are b/size, collector/frames"
    """
    names = sorted(set(names))
    patterns = [match] if isinstance(match, str) or match is None else list(match)
    close, widened = _closest(
        [pattern for pattern in patterns if pattern is not None], names
    )
    said = f"run {format_name(run)} has no metric matching {patterns_text(match)}; "
    if not close:
        return said + f"its {metrics_there(names)}"
    return (
        said
        + f"did you mean {' or '.join(map(repr, close))}"
        + (" (a pattern with *, ? or [ matches whole names)" if widened else "")
        + f"? Its {metrics_there(names)}"
    )


def metrics_there(names: Iterable[str]) -> str:
    """What metrics ``names`` are, for a message that follows "its" or "their": the names where few or of one watch, else the watches they are of.

    >>> metrics_there(["b/size", "c/frames"])
    'metrics are b/size, c/frames'
    >>> metrics_there([f"learner/m{index:02d}" for index in range(20)] + ["buffer/size"])
    "21 metrics are those of the watches buffer (1) and learner (20), as 'buffer/*' matches"
    """
    names = sorted(set(names))
    counts: dict[str, int] = {}
    for name in names:
        watch = split(name)[0] or "(no watch)"
        counts[watch] = counts.get(watch, 0) + 1
    if len(names) <= _MAX_NAMES_IN_ERROR or len(counts) == 1:
        return f"metrics are {some_names(names)}"
    watches = [
        f"{format_name(watch)} ({count})" for watch, count in sorted(counts.items())
    ]
    if len(watches) > _MAX_NAMES_IN_ERROR:
        watches = [
            *watches[:_MAX_NAMES_IN_ERROR],
            f"{len(watches) - _MAX_NAMES_IN_ERROR} more",
        ]
    listed = (
        ", ".join(watches[:-1]) + " and " + watches[-1]
        if len(watches) > 1
        else watches[0]
    )
    example = next((watch for watch in sorted(counts) if watch != "(no watch)"), None)
    return (
        f"{len(names):,} metrics are those of the {noun_for(len(counts), 'watch')} {listed}"
        + (f", as '{example}/*' matches" if example else "")
    )


def _closest(patterns: list[str], names: list[str]) -> tuple[list[str], bool]:
    # For each pattern, the glob made to match within names where that
    # keeps some (and whether one was), else the names and watch patterns
    # spelled most like it.
    watches = sorted({split(name)[0] for name in names} - {""})
    candidates = names + [f"{watch}/*" for watch in watches]
    close: list[str] = []
    widened = False
    for pattern in patterns:
        within = f"*{pattern.strip('*')}*"
        if _is_glob(pattern) and within != pattern and select_metrics(names, within):
            found = [within]
            widened = True
        else:
            found = difflib.get_close_matches(pattern, candidates, n=3, cutoff=0.75)
        close += [name for name in found if name not in close]
    return close, widened


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


def _is_glob(pattern: str) -> bool:
    return any(character in pattern for character in "*?[")


def _matches(name: str, pattern: str) -> bool:
    if _is_glob(pattern):
        return fnmatch.fnmatchcase(name, pattern)
    return pattern in name
