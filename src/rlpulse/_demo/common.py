"""What every demo pipeline shares: its sinks, how a demo is recorded, how it ends.

A pipeline (:mod:`rlpulse._demo.synthetic`, :mod:`rlpulse._demo.torchrl_pipeline`)
is a :class:`DemoPipeline`; :func:`record_demo` opens its :class:`DemoSinks`,
drives it, closes them whether or not Ctrl-C stopped it early, prints the
summary of the recorded run and its chart (:func:`report`) and returns the
:class:`DemoResult`.
"""

from __future__ import annotations

import abc
import contextlib
import functools
import math
import os
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from rlpulse.monitor import LoggerMonitor
from rlpulse.read.plot import INSTALL_HINT, plot_file
from rlpulse.read.records import read_events
from rlpulse.read.summary import (
    format_duration,
    format_events,
    format_summary,
    format_verdicts,
    summarize_file,
)
from rlpulse.schedules import Every
from rlpulse.sinks import ConsoleLogger, SQLiteLogger
from rlpulse.sinks.prometheus import PrometheusExporter
from rlpulse.sinks.registry import MetricSink, open_sinks
from rlpulse.sources.tally import Tally
from rlpulse.text import terminal_width, wrapped

__all__ = [
    "DEFAULT_OUT",
    "EPISODE_WINDOW",
    "RETURN_KEY",
    "DemoOutput",
    "DemoPipeline",
    "DemoResult",
    "DemoSinks",
    "chart_path",
    "check_cost",
    "episode_stats",
    "record_demo",
    "report",
    "verdict_window",
    "watch_learning",
]

DEFAULT_OUT = Path("runs") / "demo.sqlite"
"""Where ``rlpulse demo`` records its runs unless told otherwise."""

RETURN_KEY = "episode_return"
"""The key a demo's tally observes each finished episode's return under."""

EPISODE_WINDOW = 20
"""How many of the latest episodes the ``episodes`` watch's mean, smallest and largest return cover: few enough that the mean follows the learning."""


@dataclass(frozen=True)
class DemoResult:
    """What one demo did: the file and the name of the run it recorded, for how long.

    ``frames`` is the number of frames the collector wrote in all,
    ``interrupted`` tells whether Ctrl-C ended the demo early, and ``chart``
    is the image drawn of the run (``None`` when matplotlib is not installed).

    >>> DemoResult(Path("runs/demo.sqlite"), "baseline", 2.0, 8000, False).run
    'baseline'
    """

    path: Path
    run: str
    seconds: float
    frames: int
    interrupted: bool
    chart: Path | None = None


@dataclass(frozen=True)
class DemoOutput:
    """Where a demo's output goes besides its store: extra sinks, the chart, what it prints, the console.

    ``sinks`` are the extra sinks' specs (see :class:`DemoSinks`);
    ``chart`` whether the run's chart is drawn (see :func:`report`);
    ``stdout`` takes what the demo prints (standard output when ``None``)
    and ``console`` the console sink's lines (standard error when ``None``).

    >>> DemoOutput(sinks=["csv:runs/demo.csv"]).chart
    True
    """

    sinks: Sequence[str] = ()
    chart: bool = True
    stdout: TextIO | None = None
    console: TextIO | None = None


class DemoSinks:
    """The sinks of one demo: a new run of the SQLite store, the console, and extra sinks from specs.

    Extra sinks are built with :func:`~rlpulse.sinks.registry.open_sinks` from ``SCHEME:TARGET``
    specs (``csv:runs/demo.csv``, ``tensorboard:runs/tb``, …). Everything is
    opened here and closed by :meth:`close`; when one cannot be opened, the
    ones already open are closed before the error propagates: a
    :class:`SinkSpecError` for an extra sink (a bad spec, a backend that is
    not installed or refuses to start), an ``OSError`` or ``RunFileError``
    for a store that cannot be written.

    >>> import io, tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     sinks = DemoSinks(pathlib.Path(tmp) / "demo.sqlite",
    ...                       [f"csv:{pathlib.Path(tmp) / 'demo.csv'}"], io.StringIO())
    ...     [type(sink).__name__ for sink in sinks.all]
    ...     sinks.close()
    ['SQLiteLogger', 'ConsoleLogger', 'CSVLogger']
    """

    def __init__(
        self,
        out: str | os.PathLike[str],
        specs: Sequence[str] = (),
        console: TextIO | None = None,
    ) -> None:
        self.out = out
        self.specs = tuple(specs)
        self.extra: list[MetricSink] = open_sinks(specs)
        try:
            self.store = SQLiteLogger(out)
        except BaseException:
            self._close_all(self.extra)
            raise
        self.console = ConsoleLogger(console)

    @property
    def all(self) -> list[MetricSink]:
        """The store, the console and the extra sinks, in that order.

        >>> import io, tempfile, pathlib
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     sinks = DemoSinks(pathlib.Path(tmp) / "demo.sqlite", console=io.StringIO())
        ...     len(sinks.all)
        ...     sinks.close()
        2
        """
        return [self.store, self.console, *self.extra]

    def describe(self) -> str:
        """Where the demo is recorded, as its opening line names it: the store and its run, the extra sinks' specs, the console.

        A sink that serves its metrics (``prometheus:``, on a free port
        unless given one) says where: ``prometheus: (serving
        http://127.0.0.1:PORT/metrics)``.

        >>> import io, tempfile, pathlib
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     sinks = DemoSinks(pathlib.Path(tmp) / "demo.sqlite",
        ...                       [f"csv:{pathlib.Path(tmp) / 'demo.csv'}"], io.StringIO())
        ...     description = sinks.describe().replace(tmp, "TMP").replace(sinks.store.run, "RUN")
        ...     sinks.close()
        >>> description
        'TMP/demo.sqlite (run RUN), csv:TMP/demo.csv and the console'
        """
        extra = "".join(
            f", {spec}{_serving(sink)}"
            for spec, sink in zip(self.specs, self.extra, strict=True)
        )
        return f"{self.out} (run {self.store.run}){extra} and the console"

    def close(self) -> None:
        """Close every sink, even when closing one of them fails; closing again does nothing.

        >>> import io, tempfile, pathlib
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     sinks = DemoSinks(pathlib.Path(tmp) / "demo.sqlite", console=io.StringIO())
        ...     sinks.close()
        ...     sinks.close()
        """
        self._close_all(self.all)

    @staticmethod
    def _close_all(sinks: Sequence[MetricSink]) -> None:
        # An exit stack runs every callback even when one raises, then
        # re-raises; callbacks run last in, first out.
        with contextlib.ExitStack() as stack:
            for sink in reversed(sinks):
                stack.callback(sink.close)


def _serving(sink: MetricSink) -> str:
    """Where ``sink`` serves its metrics, or posts them (an OTLP receiver's URL, which may come from the environment), as ``describe`` adds it; ``""`` for a sink that does neither."""
    if isinstance(sink, PrometheusExporter) and sink.url is not None:
        return f" (serving {sink.url})"
    url = getattr(sink, "url", None)
    if isinstance(url, str):
        return f" (posting to {url})"
    return ""


class DemoPipeline(abc.ABC):
    """A monitored demo pipeline, as :func:`record_demo` drives it.

    A pipeline is built with its settings (and rejects bad ones) before any
    sink is opened; :meth:`drive` then monitors it into the sinks for a
    while, and :meth:`frames` tells how many frames its collector wrote.

    >>> import io, tempfile, pathlib
    >>> class Idle(DemoPipeline):
    ...     def drive(self, sinks, seconds, stdout):
    ...         sinks.store.log_metrics({"collector/frames": 8.0}, step=8)
    ...         return False
    ...     def frames(self):
    ...         return 8
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     output = DemoOutput(chart=False, stdout=io.StringIO(), console=io.StringIO())
    ...     result = record_demo(Idle(), 1.0, pathlib.Path(tmp) / "demo.sqlite", output)
    >>> result.frames, result.interrupted
    (8, False)
    """

    @abc.abstractmethod
    def drive(self, sinks: DemoSinks, seconds: float, stdout: TextIO) -> bool:
        """Monitor the pipeline into ``sinks`` for ``seconds``, then stop it; return whether it stopped early.

        It prints its opening line (naming :meth:`DemoSinks.describe`) and
        any progress to ``stdout``. Ctrl-C may also end it by raising
        ``KeyboardInterrupt``, once the pipeline and its monitor stopped.
        """

    @abc.abstractmethod
    def frames(self) -> int:
        """The number of frames the pipeline's collector wrote in all (0 before it started)."""

    def updates_reached(self) -> int | None:
        """The update count the pipeline was to end at, once its learner reached it before its time was up; else ``None``."""
        return None


def episode_stats(tally: Tally) -> dict[str, float]:
    """Return the episode view of a tally of episode returns (``RETURN_KEY``), as the demos' ``episodes`` watch logs it.

    ``episodes`` finished so far and the mean, smallest and largest return
    of the latest ones. CartPole pays one point per step, so an episode's
    length equals its return and is left out.

    >>> tally = Tally()
    >>> for episode_return in (12.0, 30.0):
    ...     tally.observe("episode_return", episode_return)
    ...     tally.observe("episode_length", episode_return)
    >>> episode_stats(tally)
    {'episodes': 2, 'episode_return_mean': 21.0, 'episode_return_min': 12.0, 'episode_return_max': 30.0}
    """
    stats = tally.stats()
    view = {"episodes": stats.get(f"{RETURN_KEY}_count", 0)}
    for part in ("mean", "min", "max"):
        key = f"{RETURN_KEY}_{part}"
        if key in stats:
            view[key] = stats[key]
    return view


def verdict_window(seconds: float) -> float:
    """The window of a demo's bottleneck verdict, for a demo of ``seconds``: a sixth of it, from 1 s to 5 s.

    Long enough to average a few batches and updates, short enough that a
    demo of a few seconds still judges some windows.

    >>> verdict_window(30.0), verdict_window(9.0), verdict_window(2.0)
    (5.0, 1.5, 1.0)
    """
    return min(5.0, max(1.0, seconds / 6))


def watch_learning(
    monitor: LoggerMonitor,
    *,
    learner: object,
    episodes: object,
    buffer: str,
    target_ratio: float,
    window: float,
) -> None:
    """Watch a demo's learning side, the same in every demo: the learner, its episodes, the monitor itself, and the bottleneck verdict.

    Every 2 s: ``learner`` (its ``updates`` the step, rated with its
    ``frames_sampled``) and ``episodes`` (a tally's :func:`episode_stats`), and the
    monitor (``monitor/cpu_s_per_second`` is the share of a core monitoring
    takes). The verdict judges, every ``window`` seconds, the ``collector``
    watch against the ``learner``, with the replay buffer watched as
    ``buffer`` between them and the learner's ``target_ratio`` of samples
    per frame.
    """
    every = Every.seconds(2)
    monitor.watch(
        learner,
        name="learner",
        schedule=every,
        step="updates",
        rate_keys=("updates", "frames_sampled"),
    )
    monitor.watch(
        episodes,
        name="episodes",
        # A demo's episodes: a Tally's (episode_stats) or a stand-in's own.
        stats_fn=(
            functools.partial(episode_stats, episodes)
            if isinstance(episodes, Tally)
            else None
        ),
        schedule=every,
        step="episodes",
        rate_keys=("episodes",),
    )
    monitor.watch(monitor, name="monitor", schedule=every, rate_keys=("cpu_s",))
    monitor.bottleneck(
        "collector",
        "learner",
        buffer=buffer,
        target_ratio=target_ratio,
        window=window,
    )


def say(text: str, stdout: TextIO) -> None:
    """Print ``text`` to ``stdout`` at once, broken between words where it is wider than a terminal ``stdout`` is (whole into a pipe)."""
    print(wrapped(text, terminal_width(stdout)), file=stdout, flush=True)


def check_cost(name: str, seconds: float) -> None:
    """Refuse a cost (``env_cost``, ``learner_cost``) that is not a finite number of seconds, zero or more.

    >>> check_cost("env_cost", 0.002)
    >>> check_cost("learner_cost", -1)
    Traceback (most recent call last):
    ...
    ValueError: learner_cost must be a finite number of seconds, zero or more, got -1
    """
    if not (seconds >= 0 and math.isfinite(seconds)):
        raise ValueError(
            f"{name} must be a finite number of seconds, zero or more, got {seconds!r}"
        )


def check_updates(updates: int | None) -> None:
    """Refuse an update count to end a demo at (``updates``) that is not a whole number, at least 1, or ``None`` (no limit).

    >>> check_updates(1000), check_updates(None)
    (None, None)
    >>> check_updates(0)
    Traceback (most recent call last):
    ...
    ValueError: updates must be a whole number of updates, at least 1, or None (no limit), got 0
    """
    if updates is not None and (
        isinstance(updates, bool) or not isinstance(updates, int) or updates < 1
    ):
        raise ValueError(
            f"updates must be a whole number of updates, at least 1, or None "
            f"(no limit), got {updates!r}"
        )


def demo_length(seconds: float, updates: int | None) -> str:
    """How long a demo runs, as its opening line says it: ``seconds``, or ``updates`` updates if those come first.

    >>> demo_length(150.0, 1000), demo_length(30.0, None)
    ('2 min 30 s or 1,000 updates', '30.0 s')
    """
    length = format_duration(seconds)
    if updates is None:
        return length
    return f"{length} or {updates:,} updates"


def record_demo(
    pipeline: DemoPipeline,
    seconds: float,
    out: str | os.PathLike[str],
    output: DemoOutput | None = None,
) -> DemoResult:
    """Drive ``pipeline`` for ``seconds``, recording it into a new run of ``out``; print how it ended.

    The sinks (see :class:`DemoSinks`: the SQLite file ``out``, the
    console and the extra sinks of ``output``) are closed whether the
    pipeline ran its time, stopped early on Ctrl-C or failed. What the
    demo prints, then the :func:`report` of the run (``output.chart`` as
    there), go to ``output.stdout``; ``None`` is ``DemoOutput()``. An
    example is :class:`DemoPipeline`'s.
    """
    if not seconds > 0:
        raise ValueError(f"seconds must be positive, got {seconds!r}")
    output = DemoOutput() if output is None else output
    stdout = sys.stdout if output.stdout is None else output.stdout
    demo_sinks = DemoSinks(out, output.sinks, output.console)
    started = time.monotonic()
    try:
        interrupted = pipeline.drive(demo_sinks, seconds, stdout)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        demo_sinks.close()
    elapsed = time.monotonic() - started
    if not interrupted and (updates := pipeline.updates_reached()) is not None:
        say(
            f"Ended at the learner's update {updates:,}, after "
            f"{format_duration(elapsed)}.",
            stdout,
        )
    drawn = report(
        demo_sinks,
        elapsed=elapsed,
        interrupted=interrupted,
        stdout=stdout,
        chart=output.chart,
    )
    return DemoResult(
        path=demo_sinks.store.path,
        run=demo_sinks.store.run,
        seconds=elapsed,
        frames=pipeline.frames(),
        interrupted=interrupted,
        chart=drawn,
    )


def chart_path(out: str | os.PathLike[str]) -> Path:
    """Where a demo recording into ``out`` draws its chart: the same name with ``.png``.

    >>> chart_path("runs/demo.sqlite"), chart_path("runs/demo.png")
    (PosixPath('runs/demo.png'), PosixPath('runs/demo.png.png'))
    """
    out = Path(out)
    chart = out.with_suffix(".png")
    return chart if chart != out else out.with_name(out.name + ".png")


def report(
    sinks: DemoSinks,
    *,
    elapsed: float,
    interrupted: bool,
    stdout: TextIO,
    chart: bool = True,
) -> Path | None:
    """Print how a demo ended: the summary of its run ending with its bottleneck verdict, its chart, how to see it again; return the chart's path.

    The chart is drawn next to the store (see :func:`chart_path`) with
    :func:`rlpulse.read.plot.plot_file`; without matplotlib, or with
    ``chart=False``, it is skipped (with a one-line note in the first case)
    and ``None`` is returned. The last line printed is always the
    ``rlpulse show`` command that prints the summary again.

    >>> import io, tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     sinks = DemoSinks(pathlib.Path(tmp) / "demo.sqlite", console=io.StringIO())
    ...     sinks.store.log_metrics({"collector/frames": 96.0}, step=3)
    ...     sinks.close()
    ...     output = io.StringIO()
    ...     report(sinks, elapsed=1.0, interrupted=True, stdout=output, chart=False)
    ...     print(output.getvalue().splitlines()[0])
    Stopped early after 1.0 s.
    """
    if interrupted:
        print(f"Stopped early after {format_duration(elapsed)}.", file=stdout)
    store = sinks.store
    print(file=stdout)
    # Fitted to a terminal as rlpulse show fits it: lines broken between words.
    width = terminal_width(stdout)
    summary = summarize_file(store.path, store.run)
    print(format_summary(summary, width=width), file=stdout)
    if events := format_events(read_events(store.path, store.run)):
        print(file=stdout)
        print(wrapped(events, width), file=stdout)
    verdicts = format_verdicts(summary, width) or wrapped(
        "No bottleneck verdict: the run ended before the bottleneck watch "
        "closed its first window; a longer run is judged.",
        width,
    )
    print(file=stdout)
    print(verdicts, file=stdout)
    print(file=stdout)
    quoted_out = shlex.quote(os.fspath(sinks.out))
    drawn: Path | None = None
    if chart:
        target = chart_path(sinks.out)
        try:
            drawn = plot_file(store.path, target, run=store.run)
        except ImportError:
            print(
                f"No chart: matplotlib is not installed ({INSTALL_HINT}).",
                file=stdout,
            )
        else:
            redraw = f"rlpulse plot {quoted_out} -o {shlex.quote(os.fspath(target))}"
            print(
                wrapped(
                    f"Chart of the run: {target} (redraw it with: {redraw})", width
                ),
                file=stdout,
            )
    print(f"See it again with: rlpulse show {quoted_out}", file=stdout, flush=True)
    return drawn
