"""Sink cost: what handing one 20-metric payload to each sink costs, rlpulse's and TorchRL's.

Every sink is built once, in a temporary directory of its own, and fed the
same payloads — 20 metrics of one watch, the step advancing — the way the
monitor feeds it: ``log_metrics(payload, step=..., timestamp=...)`` for
rlpulse's sinks, ``log_metrics(payload, step=...)`` for TorchRL's loggers.
Rounds interleave the sinks so that the slow drifts of a shared machine hit
them alike.
"""

from __future__ import annotations

import contextlib
import gc
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import rlpulse
from benchmarks import progress

__all__ = [
    "BUDGETS",
    "REFERENCE",
    "SINKS",
    "Budget",
    "Settings",
    "SinkCase",
    "SinkResult",
    "measure",
    "missed_budgets",
    "payloads",
    "render",
    "run",
    "table",
]

METRICS_PER_PAYLOAD = 20


@dataclass(frozen=True)
class SinkCase:
    """One measured sink: its label, how to open it in a directory, and whether it takes a timestamp.

    ``open`` receives an empty directory and an exit stack that closes what
    it opens; ``read_back`` (for the file sinks) returns how many metrics
    the sink stored, so the benchmark can check that it measured real writes.

    Examples:
        >>> SINKS[0].label
        'rlpulse `SQLiteLogger`'
    """

    label: str
    open: Callable[[Path, contextlib.ExitStack], Any]
    takes_timestamp: bool = True
    read_back: Callable[[Path], int] | None = None


def _file_sink(
    sink_class: Any, file_name: str
) -> Callable[[Path, contextlib.ExitStack], Any]:
    def open_sink(directory: Path, stack: contextlib.ExitStack) -> Any:
        return stack.enter_context(sink_class(directory / file_name))

    return open_sink


def _records_in(file_name: str) -> Callable[[Path], int]:
    def count(directory: Path) -> int:
        return sum(1 for _ in rlpulse.read(directory / file_name))

    return count


def _console(directory: Path, stack: contextlib.ExitStack) -> Any:
    # A real file, as a redirected standard error would be.
    stream = stack.enter_context(open(directory / "console.log", "w"))  # noqa: SIM115
    return stack.enter_context(rlpulse.ConsoleLogger(stream))


def _tensorboard(directory: Path, stack: contextlib.ExitStack) -> Any:
    from rlpulse.sinks.tensorboard import TensorBoardLogger

    return stack.enter_context(TensorBoardLogger(directory))


def _wandb(directory: Path, stack: contextlib.ExitStack) -> Any:
    from rlpulse.sinks.wandb import WandbLogger

    return stack.enter_context(
        WandbLogger(
            project="rlpulse-benchmark",
            dir=directory,
            mode="offline",
            settings={"console": "off", "silent": True, "x_disable_stats": True},
        )
    )


def _mlflow(directory: Path, stack: contextlib.ExitStack) -> Any:
    from rlpulse.sinks.mlflow import MLflowLogger

    return stack.enter_context(
        MLflowLogger(tracking_uri=f"sqlite:///{directory / 'mlflow.db'}")
    )


def _prometheus(directory: Path, stack: contextlib.ExitStack) -> Any:
    from rlpulse.sinks.prometheus import PrometheusExporter

    return stack.enter_context(PrometheusExporter(port=0))


def _torchrl_csv(directory: Path, stack: contextlib.ExitStack) -> Any:
    from torchrl.record.loggers.csv import CSVLogger

    return CSVLogger(exp_name="benchmark", log_dir=str(directory))


def _torchrl_tensorboard(directory: Path, stack: contextlib.ExitStack) -> Any:
    from torchrl.record.loggers.tensorboard import TensorboardLogger

    logger = TensorboardLogger(exp_name="benchmark", log_dir=str(directory))
    stack.callback(logger.experiment.close)
    return logger


REFERENCE = "TorchRL `CSVLogger`"
"""The label of the sink every other sink is compared with."""

SINKS: tuple[SinkCase, ...] = (
    SinkCase(
        "rlpulse `SQLiteLogger`",
        _file_sink(rlpulse.SQLiteLogger, "metrics.sqlite"),
        read_back=_records_in("metrics.sqlite"),
    ),
    SinkCase(
        "rlpulse `CSVLogger`",
        _file_sink(rlpulse.CSVLogger, "metrics.csv"),
        read_back=_records_in("metrics.csv"),
    ),
    SinkCase(
        "rlpulse `JSONLLogger`",
        _file_sink(rlpulse.JSONLLogger, "metrics.jsonl"),
        read_back=_records_in("metrics.jsonl"),
    ),
    SinkCase("rlpulse `ConsoleLogger` (to a file)", _console),
    SinkCase("rlpulse `TensorBoardLogger`", _tensorboard),
    SinkCase("rlpulse `WandbLogger` (offline)", _wandb),
    SinkCase("rlpulse `MLflowLogger` (SQLite store)", _mlflow),
    SinkCase("rlpulse `PrometheusExporter`", _prometheus),
    SinkCase(REFERENCE, _torchrl_csv, takes_timestamp=False),
    SinkCase(
        "TorchRL `TensorboardLogger`", _torchrl_tensorboard, takes_timestamp=False
    ),
)
"""Every measured sink, in table order."""


@dataclass(frozen=True)
class Budget:
    """A required speed-up: ``label`` must be at least ``times`` cheaper than the reference.

    Examples:
        >>> BUDGETS[0]
        Budget(label='rlpulse `CSVLogger`', times=5.0)
    """

    label: str
    times: float


BUDGETS: tuple[Budget, ...] = (
    Budget("rlpulse `CSVLogger`", 5.0),
    Budget("rlpulse `SQLiteLogger`", 2.5),
)
"""The budgets of this section, against TorchRL's ``CSVLogger``."""


@dataclass(frozen=True)
class Settings:
    """How much to measure: rounds, payloads per sink per round, untimed warm-up payloads.

    Examples:
        >>> Settings.quick().rounds < Settings().rounds
        True
    """

    rounds: int = 15
    payloads: int = 200
    warmup_payloads: int = 20

    @classmethod
    def quick(cls) -> Settings:
        """Return settings for a smoke run: a few short rounds."""
        return cls(rounds=2, payloads=5, warmup_payloads=1)


def payloads(count: int, start: int = 0) -> Iterator[tuple[dict[str, float], int]]:
    """Yield ``count`` payloads of 20 metrics of one watch, with advancing steps.

    Examples:
        >>> payload, step = next(payloads(1))
        >>> len(payload), step, sorted(payload)[0]
        (20, 200, 'collector/batches')
    """
    names = [
        "frames",
        "batches",
        "frames_per_second",
        "batches_per_second",
        "workers_alive",
        "frames_in_flight",
        "elapsed_s",
        "buffer_size",
        "write_count",
        "writes_per_second",
        "sample_calls",
        "samples_per_second",
        "episode_return_mean",
        "episode_return_min",
        "episode_return_max",
        "episode_length_mean",
        "loss",
        "grad_norm",
        "learning_rate",
        "policy_version",
    ]
    for index in range(start, start + count):
        step = (index + 1) * 200
        yield (
            {
                f"collector/{name}": float(step + position) / 3
                for position, name in enumerate(names)
            },
            step,
        )


@dataclass(frozen=True)
class SinkResult:
    """The per-round costs of one sink, in microseconds per payload.

    Examples:
        >>> result = SinkResult(SINKS[1], (10.0, 12.0))
        >>> result.median_us
        11.0
    """

    case: SinkCase
    round_us: tuple[float, ...]

    @property
    def median_us(self) -> float:
        """Median cost over the rounds."""
        return statistics.median(self.round_us)

    def times_cheaper_than(self, reference: SinkResult) -> float:
        """Median over rounds of the reference's cost divided by this sink's in the same round."""
        return statistics.median(
            theirs / ours
            for ours, theirs in zip(self.round_us, reference.round_us, strict=True)
        )


def _time_payloads(sink: Any, case: SinkCase, start: int, count: int) -> float:
    log_metrics = sink.log_metrics
    clock = time.perf_counter_ns
    batch = list(payloads(count, start))
    wall_time = time.time()
    gc.collect()
    gc.disable()
    try:
        started = clock()
        if case.takes_timestamp:
            for payload, step in batch:
                log_metrics(payload, step=step, timestamp=wall_time)
        else:
            for payload, step in batch:
                log_metrics(payload, step=step)
        elapsed = clock() - started
    finally:
        gc.enable()
    return elapsed / count / 1000


def measure(
    settings: Settings,
    cases: tuple[SinkCase, ...] = SINKS,
    report: Callable[[str], None] = progress,
) -> tuple[SinkResult, ...]:
    """Time every sink on the same payloads, rounds interleaved; check the file sinks stored them.

    Examples:
        >>> tiny = Settings(rounds=1, payloads=2, warmup_payloads=1)
        >>> results = measure(tiny, cases=SINKS[:2], report=lambda line: None)
        >>> [result.case.label for result in results]
        ['rlpulse `SQLiteLogger`', 'rlpulse `CSVLogger`']
    """
    costs: dict[str, list[float]] = {case.label: [] for case in cases}
    with contextlib.ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        sinks = []
        for index, case in enumerate(cases):
            directory = root / f"sink_{index}"
            directory.mkdir()
            sink = case.open(directory, stack)
            _time_payloads(sink, case, 0, settings.warmup_payloads)
            sinks.append((case, sink, directory))
        sent = settings.warmup_payloads
        for round_index in range(settings.rounds):
            for case, sink, _ in sinks:
                costs[case.label].append(
                    _time_payloads(sink, case, sent, settings.payloads)
                )
            sent += settings.payloads
            report(
                f"sinks round {round_index + 1}/{settings.rounds}: "
                + ", ".join(
                    f"{case.label} {costs[case.label][-1]:,.1f} us"
                    for case, _, _ in sinks
                )
            )
        for case, _, directory in sinks:
            if case.read_back is not None:
                _check_stored(case, case.read_back(directory), sent)
    return tuple(SinkResult(case, tuple(costs[case.label])) for case in cases)


def _check_stored(case: SinkCase, stored: int, payload_count: int) -> None:
    expected = payload_count * METRICS_PER_PAYLOAD
    if stored != expected:
        raise RuntimeError(
            f"{case.label} stored {stored} metrics, expected {expected}; "
            "the benchmark would not measure what it says."
        )


def _verdicts(
    results: tuple[SinkResult, ...],
) -> dict[str, tuple[float, Budget | None]]:
    by_label = {result.case.label: result for result in results}
    reference = by_label.get(REFERENCE)
    budgets = {budget.label: budget for budget in BUDGETS}
    if reference is None:
        return {}
    return {
        result.case.label: (
            result.times_cheaper_than(reference),
            budgets.get(result.case.label),
        )
        for result in results
    }


def table(results: tuple[SinkResult, ...]) -> str:
    """Return the markdown table of ``results``: cost, speed-up over TorchRL's CSVLogger, budget.

    Examples:
        >>> reference = SinkResult(SINKS[8], (100.0,))
        >>> print(table((SinkResult(SINKS[1], (25.0,)), reference)))
        | sink | us per payload | times cheaper than TorchRL `CSVLogger` | budget | result |
        |---|---:|---:|---:|---|
        | rlpulse `CSVLogger` | 25.0 | 4.00 | >= 5.0 | **OVER BUDGET** |
        | TorchRL `CSVLogger` | 100.0 | 1.00 |  |  |
    """
    verdicts = _verdicts(results)
    lines = [
        f"| sink | us per payload | times cheaper than {REFERENCE} | budget | result |",
        "|---|---:|---:|---:|---|",
    ]
    for result in results:
        speed_up, budget = verdicts.get(result.case.label, (float("nan"), None))
        budget_text = verdict = ""
        if budget is not None:
            budget_text = f">= {budget.times:.1f}"
            verdict = "pass" if speed_up >= budget.times else "**OVER BUDGET**"
        lines.append(
            f"| {result.case.label} | {result.median_us:,.1f} | {speed_up:.2f} "
            f"| {budget_text} | {verdict} |"
        )
    return "\n".join(lines)


def missed_budgets(results: tuple[SinkResult, ...]) -> list[str]:
    """Return one line per budget the results miss.

    Examples:
        >>> reference = SinkResult(SINKS[8], (100.0,))
        >>> missed_budgets((SinkResult(SINKS[0], (50.0,)), reference))
        ['rlpulse `SQLiteLogger`: 2.00 times cheaper than TorchRL `CSVLogger`, budget >= 2.5']
    """
    return [
        f"{label}: {speed_up:.2f} times cheaper than {REFERENCE}, "
        f"budget >= {budget.times:.1f}"
        for label, (speed_up, budget) in _verdicts(results).items()
        if budget is not None and speed_up < budget.times
    ]


def render(results: tuple[SinkResult, ...], settings: Settings) -> str:
    """Return this section's markdown: heading, method, table and machine.

    Examples:
        >>> results = (SinkResult(SINKS[8], (100.0,)),)
        >>> print(render(results, Settings(rounds=1)).splitlines()[0])
        ## Sink cost: one 20-metric payload, rlpulse's sinks and TorchRL's loggers
    """
    import torchrl

    return f"""\
## Sink cost: one 20-metric payload, rlpulse's sinks and TorchRL's loggers

The cost of handing one payload of {METRICS_PER_PAYLOAD} metrics (one watch's
counters, gauges and rates, the step advancing) to a sink, in microseconds,
for each of rlpulse's sinks and for TorchRL's `CSVLogger` and
`TensorboardLogger` (`torchrl.record.loggers`), side by side in one process.
rlpulse's sinks get `log_metrics(payload, step=..., timestamp=...)`, TorchRL's
loggers `log_metrics(payload, step=...)`, as the monitor calls them. Every sink
is opened once in a temporary directory of its own and gets
{settings.warmup_payloads} untimed payloads first; each round then times
{settings.payloads} payloads per sink with `time.perf_counter_ns` and the
garbage collector disabled, the sinks one after another, for
{settings.rounds} rounds. Costs are medians over rounds; "times cheaper" is
the median over rounds of TorchRL's `CSVLogger` cost divided by the sink's in
the same round. The file sinks are read back afterwards to check that every
metric was stored. What each sink does per payload differs: rlpulse's
`SQLiteLogger` commits one transaction, its `CSVLogger` and `JSONLLogger`
write and flush one block, its `TensorBoardLogger` writes one event
framed by tensorboardX's record writer, in one write; TorchRL's `CSVLogger` writes and flushes one line per metric into one
file per metric, its `TensorboardLogger` queues one event per metric for a
background writer. `WandbLogger` hands a row to W&B's local service (offline
mode), `MLflowLogger` makes one `log_batch` call into a local SQLite tracking
store, `PrometheusExporter` only updates the values its HTTP server serves.

{table(results)}

Measured on {platform.system()} {platform.machine()} ({os.cpu_count()} CPUs), Python
{platform.python_version()}, TorchRL {torchrl.__version__}, rlpulse
{rlpulse.__version__}. Rerun with `python -m benchmarks --only sinks`.
"""


def run(*, quick: bool = False) -> str:
    """Measure every sink, print the table, and return the section's markdown."""
    settings = Settings.quick() if quick else Settings()
    # W&B prints to the terminal unless told not to, even offline; W&B and
    # MLflow report errors and usage over the network unless told not to.
    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ.setdefault("WANDB_ERROR_REPORTING", "false")
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    results = measure(settings)
    print(table(results), flush=True)
    for line in missed_budgets(results):
        print(f"OVER BUDGET: {line}", file=sys.stdout, flush=True)
    return render(results, settings)
