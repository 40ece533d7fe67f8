"""Runs side by side: one row per metric, each run's figure and its ratio to the first run's.

What ``rlpulse compare`` prints. A metric's figure is what says how a run
went: for a cumulative counter its mean rate per second over the run (see
:class:`~rlpulse.read.summary.MetricSummary`), never the mean of its
values; for a gauge or a rate the mean of its values. A metric is a
counter when its records say so (as :func:`rlpulse.read` gives their
kinds: a monitor's ``polls``, a ``SharedCounters``' counters), whatever its
name. A distribution a SQLite run stores the histograms of (a watched
``Tally``'s observed key) gets two rows more, its p50 and p99 over the
whole run. A run with a bottleneck watch (``LoggerMonitor.bottleneck``)
gets a verdict row: how its verdict split over the run; its codes
(``bound``, ``bound_known``, ``side/<watch>``) get no ratio, nor does its
``speedup`` unless every run's speed-ups are of one side, the same (a
faster collector's gain is no measure of a faster learner's). Ratios are to
the first run, the baseline. Given a span (:class:`~rlpulse.read.span.Span`),
every figure is over that span of each run, each placed by its own run's
first and last record: the last five minutes of each run, say.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rlpulse.formats import RunAggregate
from rlpulse.naming import split
from rlpulse.read.match import (
    Match,
    MatchError,
    metrics_there,
    patterns_text,
    select_metrics,
    unmatched,
)
from rlpulse.read.records import DistributionRecord, Record
from rlpulse.read.span import WHOLE_RUN, Span, Within
from rlpulse.read.summary import (
    VerdictSummary,
    aggregate_and_verdicts,
    read_file_run,
    run_letter,
    summary_of,
)
from rlpulse.text import (
    format_exact,
    format_name,
    format_number,
    format_table,
    natural_order,
    wrapped,
)
from rlpulse.verdict import is_verdict_code

__all__ = [
    "COMPARED_QUANTILES",
    "Figures",
    "compare_files",
    "figures_of",
    "format_comparison",
    "run_argument",
]


COMPARED_QUANTILES = ("p50", "p99")
"""The quantiles over the whole run by which runs' distributions are compared."""


@dataclass(frozen=True)
class Figures:
    """One run's figure per metric: ``{name: (what, value)}``, ``what`` being ``"rate/s"`` or ``"mean"``; and its distributions' quantiles.

    ``distributions`` holds, by distribution name, its
    :data:`COMPARED_QUANTILES` over the whole run (``{"p50": ..., "p99": ...}``).

    >>> figures = figures_of(
    ...     [Record(0.0, 0, "c/frames", 0.0), Record(2.0, 1, "c/frames", 500.0),
    ...      Record(0.0, 0, "b/size", 1.0), Record(2.0, 1, "b/size", 3.0)],
    ...     label="a.sqlite", run="r1",
    ... )
    >>> figures.metrics
    {'b/size': ('mean', 2.0), 'c/frames': ('rate/s', 250.0)}
    """

    label: str
    run: str
    metrics: dict[str, tuple[str, float]]
    distributions: dict[str, dict[str, float]] = field(default_factory=dict)
    verdicts: dict[str, str] = field(default_factory=dict)
    """By bottleneck watch, how its verdict split over the run (``learner-bound 80%, unknown 20% of 5 windows``)."""
    within: Within | None = None
    """Where the span compared lies in the run; ``None``: the whole run."""
    speedup_of: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """By bottleneck watch, the labels of its windows that logged a speed-up (``("learner-bound",)``): what its ``speedup`` figure is a speed-up of."""


def figures_of(
    records: Iterable[Record],
    *,
    label: str,
    run: str,
    distributions: Iterable[DistributionRecord] = (),
) -> Figures:
    """The figures of a run's ``records``: counters' mean rates, the means of the rest (finite values only); and its ``distributions``' quantiles.

    A counter seen at a single instant has no rate, so no figure. Each
    distribution's :data:`COMPARED_QUANTILES` are over all of its stored
    intervals (see :func:`rlpulse.read.summary.summarize_distributions`).

    >>> from rlpulse.naming import Kind
    >>> polls = [Record(0.0, None, "m/polls", 0.0, Kind.COUNTER), Record(4.0, None, "m/polls", 8.0, Kind.COUNTER)]
    >>> figures_of(polls, label="a.db", run="r").metrics
    {'m/polls': ('rate/s', 2.0)}
    """
    run_aggregate, verdicts = aggregate_and_verdicts(records)
    return _figures(
        run_aggregate,
        label=label,
        run=run,
        distributions=distributions,
        verdicts=verdicts,
    )


def _figures(
    run_aggregate: RunAggregate,
    *,
    label: str,
    run: str,
    distributions: Iterable[DistributionRecord],
    verdicts: Iterable[VerdictSummary] = (),
    within: Within | None = None,
) -> Figures:
    summary = summary_of(
        run_aggregate, run=run, source=label, distributions=distributions
    )
    means = {
        metric.name: metric.finite_sum / metric.finite_count
        for metric in run_aggregate.metrics
        if metric.finite_count
    }
    metrics: dict[str, tuple[str, float]] = {}
    for metric in summary.metrics:
        if metric.is_counter:
            if metric.mean_rate is not None:
                metrics[metric.name] = ("rate/s", metric.mean_rate)
        elif metric.name in means:
            metrics[metric.name] = ("mean", means[metric.name])
    quantiles = {
        distribution.name: {
            label: distribution.quantiles[label]
            for label in COMPARED_QUANTILES
            if label in distribution.quantiles
        }
        for distribution in summary.distributions
    }
    verdicts = tuple(verdicts)
    splits = {verdict.watch: verdict.split for verdict in verdicts}
    speedup_of = {verdict.watch: verdict.speedup_of for verdict in verdicts}
    return Figures(label, run, metrics, quantiles, splits, within, speedup_of)


def run_argument(text: str) -> tuple[Path, str | None]:
    """A run as ``rlpulse compare`` takes it: ``FILE``, or ``FILE:RUN`` for one run of a SQLite file.

    A path that exists as it is is a file, colons and all; else the file is
    the part before the first colon that leaves a file that exists, the run
    the rest, colons and all (a run named ``seed:1``); where none does, the
    part before the last colon.

    >>> run_argument("runs/a.sqlite:baseline")
    (PosixPath('runs/a.sqlite'), 'baseline')
    >>> run_argument("runs/a.sqlite")
    (PosixPath('runs/a.sqlite'), None)
    """
    path = Path(text)
    if os.path.lexists(path) or ":" not in text:
        return path, None
    colons = [index for index, character in enumerate(text) if character == ":"]
    at = next((i for i in colons if os.path.lexists(text[:i])), colons[-1])
    return Path(text[:at]), text[at + 1 :] or None


def compare_files(
    runs: Sequence[tuple[Path, str | None]],
    match: Match = None,
    span: Span = WHOLE_RUN,
) -> list[Figures]:
    """Read each ``(file, run)`` (``None``: its latest run) into its :class:`Figures` over ``span`` of it, keeping the metrics ``match`` selects.

    Raises :class:`~rlpulse.read.match.MatchError`, listing the runs'
    metrics, when ``match`` keeps none of any run's; a run it keeps none of
    shows ``-`` beside the others. Raises
    :class:`~rlpulse.read.span.SpanError` when the span of a run holds
    none of its records.
    """
    compared = []
    for path, asked in runs:
        label = str(path) if asked is None else f"{path}:{asked}"
        file_run = read_file_run(path, asked, span)
        compared.append(
            _figures(
                file_run.aggregate,
                label=label,
                run=file_run.name,
                distributions=file_run.distributions,
                verdicts=file_run.verdicts,
                within=file_run.within,
            )
        )
    if match is None:
        return compared
    names = {
        name
        for figures in compared
        for name in (*figures.metrics, *figures.distributions)
    }
    missing = unmatched(names, match) if names else []
    if missing:
        raise MatchError(
            f"no run has a metric matching {patterns_text(missing)}; their "
            f"{metrics_there(names)}"
        )
    kept = set(select_metrics(names, match))
    return [
        dataclasses.replace(
            figures,
            metrics={n: v for n, v in figures.metrics.items() if n in kept},
            distributions={n: v for n, v in figures.distributions.items() if n in kept},
        )
        for figures in compared
    ]


def format_comparison(
    runs: Sequence[Figures], *, exact: bool = False, width: int | None = None
) -> str:
    """Render runs side by side: a legend, then one row per metric with each run's figure and its ratio to the first.

    A metric a run lacks shows ``-``, as does a ratio to a baseline of zero
    and one of a bottleneck watch's codes (its ``bound``, -1, 0 or +1); its
    ``speedup`` shows one only where every run's speed-ups are of the same
    side, and a line after the verdicts says why not otherwise.
    A counter is compared by its rate: a run where it has none (logged
    once) shows ``-`` rather than a mean beside the others' rates. A
    distribution gets a row for each of its quantiles over the whole run
    (figure ``p50``, ``p99``), beside its metrics. Runs compared over a
    span say in the legend where it lies in each. Figures
    are written as :func:`rlpulse.text.format_number` writes them, or in
    full with ``exact=True``. With a ``width`` (a terminal's), names too
    long for the table to fit in it are shortened in the middle
    (:func:`rlpulse.text.format_table`).

    >>> a = Figures("a.sqlite", "r1", {"c/frames": ("rate/s", 1000.0), "b/size": ("mean", 4.0)})
    >>> b = Figures("b.sqlite", "r2", {"c/frames": ("rate/s", 1250.0)})
    >>> print(format_comparison([a, b]))
    A: a.sqlite (run r1)
    B: b.sqlite (run r2)
    <BLANKLINE>
    metric    figure     A     B    B/A
    b/size    mean       4     -      -
    c/frames  rate/s  1000  1250  1.25x
    >>> a = Figures("a.sqlite", "r1", {}, {"l/update_s": {"p50": 0.01, "p99": 0.04}})
    >>> b = Figures("b.sqlite", "r2", {}, {"l/update_s": {"p50": 0.01, "p99": 0.02}})
    >>> print(format_comparison([a, b]))
    A: a.sqlite (run r1)
    B: b.sqlite (run r2)
    <BLANKLINE>
    metric      figure     A     B    B/A
    l/update_s  p50     0.01  0.01  1.00x
    l/update_s  p99     0.04  0.02  0.50x

    Runs with a bottleneck watch end with a row each: how its verdict
    split over the run.

    >>> a = Figures("a.sqlite", "r1", {}, verdicts={"bottleneck": "learner-bound 100% of 9 windows"})
    >>> b = Figures("b.sqlite", "r2", {}, verdicts={"bottleneck": "collector-bound 90%, balanced 10% of 10 windows"})
    >>> print(format_comparison([a, b]).split(chr(10) * 2)[-1])
    run  bottleneck over the run
    A    learner-bound 100% of 9 windows
    B    collector-bound 90%, balanced 10% of 10 windows

    A speed-up of a faster learner and one of a faster collector make no ratio:

    >>> a = Figures("a.sqlite", "r1", {"bottleneck/speedup": ("mean", 3.0)},
    ...             verdicts={"bottleneck": "learner-bound 100% of 9 windows"},
    ...             speedup_of={"bottleneck": ("learner-bound",)})
    >>> b = Figures("b.sqlite", "r2", {"bottleneck/speedup": ("mean", 8.4)},
    ...             verdicts={"bottleneck": "collector-bound 100% of 9 windows"},
    ...             speedup_of={"bottleneck": ("collector-bound",)})
    >>> print(format_comparison([a, b]).split(chr(10) * 2)[1])
    metric              figure  A    B  B/A
    bottleneck/speedup  mean    3  8.4    -
    >>> print(format_comparison([a, b]).split(chr(10) * 2)[-1])
    no B/A of bottleneck/speedup: it is a speed-up of different sides (A learner-bound, B collector-bound)
    """
    letters = [run_letter(index) for index in range(len(runs))]
    legend = [
        f"{letter}: {figures.label} (run {format_name(figures.run)}"
        + ("" if figures.within is None else f", {figures.within.describe()}")
        + ")"
        for letter, figures in zip(letters, runs, strict=True)
    ]
    header = ["metric", "figure", letters[0]]
    for letter in letters[1:]:
        header += [letter, f"{letter}/{letters[0]}"]
    number = format_exact if exact else format_number
    rows = [header]
    keyed_rows: list[tuple[tuple[str, str], list[str]]] = []
    notes: list[str] = []
    names = sorted({name for figures in runs for name in figures.metrics})
    bottlenecks = {watch for figures in runs for watch in figures.verdicts}
    for name in names:
        kinds = {f.metrics[name][0] for f in runs if name in f.metrics}
        what = "rate/s" if "rate/s" in kinds else "mean"
        figures_of_kind = [
            figure if figure is not None and figure[0] == what else None
            for figure in (f.metrics.get(name) for f in runs)
        ]
        watch, metric = split(name)
        # A verdict's codes make no ratio; its speed-ups only of one side.
        no_ratio = watch in bottlenecks and is_verdict_code(metric)
        if watch in bottlenecks and metric == "speedup":
            unlike = _unlike_speedups(name, runs, letters)
            no_ratio = unlike is not None
            notes += [] if unlike is None else [unlike]
        keyed_rows.append(
            (
                (name, ""),
                _row(name, what, figures_of_kind, number, ratios=not no_ratio),
            )
        )
    distributions = {name for figures in runs for name in figures.distributions}
    for name in distributions:
        for label in COMPARED_QUANTILES:
            quantiles = [
                figures.distributions.get(name, {}).get(label) for figures in runs
            ]
            figures_of_quantile = [
                None if value is None else (label, value) for value in quantiles
            ]
            keyed_rows.append(
                ((name, label), _row(name, label, figures_of_quantile, number))
            )
    rows += [
        row
        for _, row in sorted(
            keyed_rows, key=lambda keyed: (natural_order(keyed[0][0]), keyed[0][1])
        )
    ]
    lines = [
        wrapped("\n".join(legend), width),
        "",
        format_table(rows, left=2, width=width),
    ]
    for watch in sorted({watch for figures in runs for watch in figures.verdicts}):
        over = "run" if all(figures.within is None for figures in runs) else "span"
        verdict_rows = [("run", f"{watch} over the {over}")]
        verdict_rows += [
            (letter, figures.verdicts.get(watch, "-"))
            for letter, figures in zip(letters, runs, strict=True)
        ]
        lines += ["", format_table(verdict_rows, left=2)]
    if notes:
        lines += ["", wrapped("\n".join(notes), width)]
    return "\n".join(lines)


def _unlike_speedups(
    name: str, runs: Sequence[Figures], letters: Sequence[str]
) -> str | None:
    """Why the runs' ``speedup`` figures (``name``) make no ratio: their speed-ups are not all of one side; ``None`` when they are."""
    watch = split(name)[0]
    compared = [
        (letter, figures.speedup_of.get(watch, ()))
        for letter, figures in zip(letters, runs, strict=True)
        if name in figures.metrics
    ]
    if len(compared) < 2 or (
        len({labels for _, labels in compared}) == 1 and len(compared[0][1]) == 1
    ):
        return None
    said = ", ".join(
        f"{letter} {' and '.join(labels) or 'no window'}" for letter, labels in compared
    )
    ratio = f"{letters[1]}/{letters[0]}" if len(letters) == 2 else "ratio"
    return f"no {ratio} of {name}: it is a speed-up of different sides ({said})"


def _row(
    name: str,
    what: str,
    figures: list[tuple[str, float] | None],
    number: Callable[[float], str],
    *,
    ratios: bool = True,
) -> list[str]:
    base = figures[0]
    row = [name, what, _value(base, number)]
    for other in figures[1:]:
        row += [_value(other, number), _ratio(other, base) if ratios else "-"]
    return row


def _value(figure: tuple[str, float] | None, number: Callable[[float], str]) -> str:
    return "-" if figure is None else number(figure[1])


def _ratio(other: tuple[str, float] | None, base: tuple[str, float] | None) -> str:
    """``other``'s figure over ``base``'s: two decimals, or two significant digits below 0.01 (``0.0012x``, never ``0.00x`` but for 0).

    >>> _ratio(("mean", 3.0), ("mean", 2.0)), _ratio(("mean", 0.00048), ("mean", 0.48))
    ('1.50x', '0.001x')
    """
    if other is None or base is None or base[1] == 0 or not math.isfinite(base[1]):
        return "-"
    ratio = other[1] / base[1]
    if 0 < abs(ratio) < 0.005:
        return f"{ratio:.2g}x"
    return f"{ratio:.2f}x"
