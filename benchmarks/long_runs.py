"""Long runs: what ``rlpulse show`` and ``rlpulse plot`` cost on a run of a million records, before and after summarising where the data is.

A run of 50 watches of six metrics each (a counter, its logged rate, four
gauges of which a distribution's p50 and p99) is written into a SQLite
file by rlpulse's format module as ``SQLiteLogger`` writes (its summaries
included), 1,000,000 records. Each measurement runs
in a fresh Python process: the time of the call (``summarize_file`` and
``format_summary``, ``plot_file`` into a PNG) and the process's peak
resident memory. The code before these readers (``BASELINE_COMMIT``) is
measured in the same run from its sources, taken out of git into a
temporary folder (``git archive``); the memory of today's code is also
measured on a run a quarter as long, to show it does not grow with the
run.
"""

from __future__ import annotations

import compileall
import contextlib
import io
import itertools
import json
import math
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from benchmarks import Budget, machine, progress, reflow

__all__ = [
    "BASELINE_COMMIT",
    "BUDGETS",
    "PROBES",
    "SHORT_PAYLOADS",
    "Measurement",
    "Settings",
    "measure",
    "missed_budgets",
    "render",
    "run",
    "write_run",
]

BASELINE_COMMIT = "0965358"
"""The last commit whose ``show`` and ``plot`` read every record into Python."""

REPOSITORY = Path(__file__).resolve().parent.parent
_METRICS = (
    ("frames", "counter"),
    ("frames_per_second", "rate"),
    ("queue_depth", "gauge"),
    ("latency_s_p50", "gauge"),
    ("latency_s_p99", "gauge"),
    ("episode_return_mean", "gauge"),
)


@dataclass(frozen=True)
class Settings:
    """How long a run to read: watches times payloads times six metrics."""

    watches: int = 50
    payloads: int = 3334
    baseline: bool = True

    @classmethod
    def quick(cls) -> Settings:
        return cls(watches=5, payloads=400, baseline=False)

    @property
    def records(self) -> int:
        return self.watches * self.payloads * len(_METRICS)


@dataclass(frozen=True)
class Measurement:
    """One command's cost on one run by one version of the code: seconds and peak memory (MiB)."""

    code: str
    command: str
    records: int
    seconds: float
    peak_mib: float


PROBES = 3
"""Fresh processes that measure today's code on each run: the figure is their median (the baseline's, a minute each, is measured once)."""

SHORT_PAYLOADS = 20
"""Payloads a watch of the shortest run measured: about what one chart costs, whatever its run."""

_PAYLOADS_PER_BATCH = 1000
"""Payloads written per transaction, as a monitor's sender hands them over on a busy run."""

BUDGETS = (
    Budget[Measurement]("show of 1M records, s", lambda m: m.seconds, 0.5),
    Budget[Measurement]("plot of 1M records, s", lambda m: m.seconds, 2.0),
)


def write_run(path: Path, settings: Settings) -> None:
    """Write a run of ``settings.records`` records into a new SQLite file at ``path``, as SQLiteLogger stores them.

    Through the format's own writing, as the logger writes: batches of
    payloads (with each metric's kind), the run's summaries brought up to
    date every ``ROWS_PER_SUMMARY`` rows and at the end (as the logger
    closes).
    """
    from rlpulse.formats.sqlite import RunSummaries, create_tables, insert_batch
    from rlpulse.naming import Kind, Payload

    random_values = random.Random(1)
    kinds = {metric: Kind(kind) for metric, kind in _METRICS}

    def payloads() -> Iterator[Payload]:
        for index in range(settings.payloads):
            for watch in range(settings.watches):
                noise = random_values.random()
                values = {
                    "frames": 1000.0 * index,
                    "frames_per_second": 1000 + noise,
                    "queue_depth": float(index % 10),
                    "latency_s_p50": 0.01 + noise / 1000,
                    "latency_s_p99": 0.02 + noise / 100,
                    "episode_return_mean": math.log1p(index) + noise,
                }
                prefix = f"w{watch:02d}/"
                yield Payload(
                    {prefix + metric: value for metric, value in values.items()},
                    index,
                    1.7e9 + index + watch / 100,
                    {prefix + metric: kind for metric, kind in kinds.items()},
                )

    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
        create_tables(connection)
        connection.execute(
            "INSERT INTO runs (id, name, start_wall_time) VALUES (1, 'long', 1.7e9)"
        )
        summaries = RunSummaries(connection, 1)
        kinded: set[str] = set()
        remaining = payloads()
        while batch := list(itertools.islice(remaining, _PAYLOADS_PER_BATCH)):
            insert_batch(connection, 1, batch, kinded, summaries)
        summaries.store(connection)


_PROBE = """
import json, resource, sys, time
from pathlib import Path
command, path, output = sys.argv[1:4]
started = time.perf_counter()
if command == "show":
    from rlpulse.read.summary import format_summary, summarize_file
    text = format_summary(summarize_file(path))
else:
    import warnings
    from rlpulse.read.plot import plot_file
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plot_file(path, output)
seconds = time.perf_counter() - started
peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": seconds, "peak_mib": peak_kib / 1024}))
"""


def _median_probe(
    source: Path, command: str, run_path: Path, code: str, records: int
) -> Measurement:
    # Today's code, measured PROBES times: the median seconds, the largest peak.
    probes = [_probe(source, command, run_path, code, records) for _ in range(PROBES)]
    return Measurement(
        code,
        command,
        records,
        statistics.median(probe.seconds for probe in probes),
        max(probe.peak_mib for probe in probes),
    )


def _probe(
    source: Path, command: str, run_path: Path, code: str, records: int
) -> Measurement:
    output = run_path.with_suffix(f".{code}.png")
    environment = {**os.environ, "PYTHONPATH": str(source), "MPLBACKEND": "Agg"}
    completed = subprocess.run(
        [sys.executable, "-c", _PROBE, command, str(run_path), str(output)],
        env=environment,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"{code} {command} failed: {completed.stderr[-2000:]}")
    result = json.loads(completed.stdout.splitlines()[-1])
    return Measurement(code, command, records, result["seconds"], result["peak_mib"])


def _baseline_sources(directory: Path) -> Path:
    # The sources of BASELINE_COMMIT, out of git.
    archive = subprocess.run(
        ["git", "-C", str(REPOSITORY), "archive", BASELINE_COMMIT, "src"],
        capture_output=True,
        check=True,
    )
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as sources:
        sources.extractall(directory)
    return directory / "src"


def measure(settings: Settings) -> list[Measurement]:
    """Write the runs, then measure ``show`` and ``plot`` on them: today's code, and the baseline's when ``settings.baseline``."""
    results = []
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        full = folder / "long.sqlite"
        # Shorter runs, today's code only: a quarter as long, and one of a
        # few payloads a watch, whose chart costs what any chart of as many
        # panels does.
        shorter = {
            folder / "quarter.sqlite": Settings(
                settings.watches, max(settings.payloads // 4, 1), settings.baseline
            ),
            folder / "short.sqlite": Settings(
                settings.watches, SHORT_PAYLOADS, settings.baseline
            ),
        }
        progress(f"long_runs: writing {settings.records:,} records")
        write_run(full, settings)
        for path, short_settings in shorter.items():
            write_run(path, short_settings)
        codes = [("today", REPOSITORY / "src")]
        if settings.baseline:
            codes.append(("before", _baseline_sources(folder / "baseline")))
        for _, source in codes:
            # Byte-compiled, as pip leaves an installed package: a command's
            # figure is not its first compilation of rlpulse's sources.
            compileall.compile_dir(source, quiet=1)
        for command in ("show", "plot"):
            for code, source in codes:
                progress(f"long_runs: {command}, {code}'s code")
                probe = _median_probe if code == "today" else _probe
                results.append(probe(source, command, full, code, settings.records))
            for path, short_settings in shorter.items():
                results.append(
                    _median_probe(
                        REPOSITORY / "src",
                        command,
                        path,
                        "today",
                        short_settings.records,
                    )
                )
    return results


def missed_budgets(results: list[Measurement]) -> list[str]:
    """The budgets today's code missed on the full run, each a line."""
    longest = max(result.records for result in results)
    missed = []
    for budget, command in zip(BUDGETS, ("show", "plot"), strict=True):
        for result in results:
            measured = (result.code, result.command, result.records)
            if measured == ("today", command, longest) and not budget.passes(result):
                missed.append(
                    f"{budget.label}: {result.seconds:.2f} "
                    f"(budget {budget.sign} {budget.limit})"
                )
    return missed


def render(results: list[Measurement], settings: Settings) -> str:
    """The section's markdown: a table of every measurement and what it says."""
    rows = [
        "| command | code | records | seconds | peak memory, MiB |",
        "|---|---|---:|---:|---:|",
    ]
    for result in results:
        rows.append(
            f"| `rlpulse {result.command}` | {result.code} | {result.records:,} "
            f"| {result.seconds:.2f} | {result.peak_mib:.0f} |"
        )
    budgets = ", ".join(f"{b.label} {b.sign} {b.limit}" for b in BUDGETS)
    missed = missed_budgets(results)
    if settings.records < 1_000_000:
        missed = []
        budgets += " (for a million records: not checked on this shorter run)"
    verdict = (
        "Every budget is kept."
        if not missed
        else "Over budget: " + "; ".join(missed) + "."
    )
    text = f"""\
## Long runs: `show` and `plot` of a million records

A run of {settings.watches} watches of six metrics each ({settings.records:,}
records) in a SQLite file, written as `SQLiteLogger` writes it, with the
run's summaries. `show` reads the summaries (and aggregates the rows
after them, none here); `plot` has SQLite downsample the lines
it draws (the first twelve watches' metrics but the counters drawn as the
rates logged beside them) to {1000} buckets of time each in one scan of
the run, keeping each bucket's smallest and largest value at their times,
on a thread of its own while matplotlib is imported and the chart's axes
are made (the run's span and count come from its summaries), then draws
the chart and writes its PNG. "before" is the code at commit
`{BASELINE_COMMIT}`, which read every record into Python, run from its
sources in the same run, once (both byte-compiled first, as an installed
package is); each figure of today's code is the median
of {PROBES} fresh processes' (the call's seconds; the largest peak resident
memory), as this machine is shared. The last two rows of each
command are today's code on a run a quarter as long and on one of
{SHORT_PAYLOADS} payloads a watch: memory does not grow with the run, and
neither does much of the time: what remains of `plot` is mostly matplotlib's:
importing it, making and drawing twelve panels of three axes each (their
ticks, legends and lines), and the PNG, which the shortest run's chart costs
as well. Budgets: {budgets}.
{verdict}

{chr(10).join(rows)}

{machine("matplotlib")}
"""
    return reflow(text)


def run(*, quick: bool = False) -> str:
    """Measure, print the table, and return the section's markdown."""
    settings = Settings.quick() if quick else Settings()
    results = measure(settings)
    markdown = render(results, settings)
    print(markdown, flush=True)
    if not quick:
        for line in missed_budgets(results):
            print(f"OVER BUDGET: {line}", flush=True)
    return markdown
