"""Loop slowdown: what a background monitor costs the training loop it watches.

The same loop runs on the main thread with no monitor, with TorchRL's
``LoggerMonitor`` logging to TorchRL's ``CSVLogger``, and with rlpulse's
``LoggerMonitor`` logging to ``SQLiteLogger`` and ``ConsoleLogger``; each
monitor has the same 100 collector-like watches, polled at 10 Hz in
background mode. Configurations alternate round by round in one process, the
order rotating, so the drifts of a shared machine hit them alike.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import rlpulse
from benchmarks import Budget, machine, progress, reflow
from benchmarks.monitor_overhead import AdvancingCollectorLike
from rlpulse.naming import Payload
from rlpulse.testing import InMemorySink

__all__ = [
    "BARE_SINK",
    "BUDGETED",
    "CONFIGURATIONS",
    "SINKS_ALONE",
    "CountingSink",
    "LoopResult",
    "Sample",
    "Settings",
    "between",
    "budgets",
    "cpu_loop",
    "measure",
    "process_cpu_s",
    "render",
    "run",
]

CONFIGURATIONS = (
    "no monitor",
    "TorchRL",
    "rlpulse",
    "rlpulse, sinks in a process",
    "rlpulse, counting sink",
    "the sinks alone, fed by threads",
)
"""The configurations of each round, in their first round's order."""

TORCHRL = CONFIGURATIONS[1]
"""TorchRL's own ``LoggerMonitor`` logging to its ``CSVLogger``: the reference."""

IN_PROCESS = CONFIGURATIONS[2]
"""rlpulse's monitor logging to ``SQLiteLogger`` and ``ConsoleLogger`` on its sender threads."""

OFF_PROCESS = CONFIGURATIONS[3]
"""The same sinks in a :class:`rlpulse.SinkProcess`, in a child process."""

BARE_SINK = CONFIGURATIONS[4]
"""rlpulse's monitor logging to a sink that only counts: the monitor's own cost, without the sinks' work."""

SINKS_ALONE = CONFIGURATIONS[5]
"""No monitor: the payloads it would deliver handed to ``SQLiteLogger`` and ``ConsoleLogger`` by a thread each, every poll interval: the sinks' own cost."""


class CountingSink:
    """A sink that only counts the payloads it is given, one batch at a time.

    Examples:
        >>> sink = CountingSink()
        >>> sink.log_batch([({"w/frames": 1.0}, None, None)] * 3)
        >>> sink.log_metrics({"w/frames": 2.0})
        >>> sink.payloads
        4
    """

    def __init__(self) -> None:
        self.payloads = 0

    def log_metrics(self, metrics: Any, step: int | None = None) -> None:
        """Count one payload."""
        self.payloads += 1

    def log_batch(self, payloads: list[Any]) -> None:
        """Count a batch's payloads."""
        self.payloads += len(payloads)


@dataclass(frozen=True)
class Settings:
    """How long and how big: rounds of one window per configuration and loop.

    Examples:
        >>> Settings().watches, Settings().poll_interval
        (100, 0.1)
    """

    rounds: int = 16
    # Half an interval past a round, so that the last round due is not
    # raced by the window's end.
    window_s: float = 2.05
    watches: int = 100
    poll_interval: float = 0.1
    loops: tuple[str, ...] = ("CPU-bound Python loop", "TorchRL collector loop")


@dataclass(frozen=True)
class Sample:
    """One window of one configuration: what the loop did and what the monitor delivered.

    Examples:
        >>> sample = Sample(1000, 2.0, 1.98, 2.01, 0.004, delivered=1980, due=2000)
        >>> round(sample.off_cpu, 3), round(sample.others_cpu, 3), sample.delivered_share
        (0.01, 0.015, 0.99)
        >>> round(sample.core_wait, 3), round(sample.lock_wait, 3)
        (0.002, 0.008)
    """

    iterations: int
    wall_s: float
    loop_cpu_s: float
    process_cpu_s: float
    # Time the loop's thread was ready to run but waited for a core (Linux
    # only: the scheduler's count; 0.0 where it cannot be read).
    core_wait_s: float = 0.0
    delivered: int = 0
    due: int = 0
    # CPU time of the process's children over the window (a SinkProcess).
    children_cpu_s: float = 0.0

    @property
    def off_cpu(self) -> float:
        """The share of the window the loop's thread was off the CPU (waiting for the GIL or a core)."""
        return max(0.0, 1.0 - self.loop_cpu_s / self.wall_s)

    @property
    def core_wait(self) -> float:
        """The share of the window the loop's thread was ready to run but waited for a core."""
        return min(self.off_cpu, self.core_wait_s / self.wall_s)

    @property
    def lock_wait(self) -> float:
        """The rest of its time off the CPU: blocked, waiting for the GIL (the loop does no I/O)."""
        return self.off_cpu - self.core_wait

    @property
    def others_cpu(self) -> float:
        """CPU time of every other thread of the process and of its children, as a share of one core."""
        others = self.process_cpu_s - self.loop_cpu_s + self.children_cpu_s
        return max(0.0, others) / self.wall_s

    @property
    def delivered_share(self) -> float:
        """Payloads that reached the sink, of those due at the poll rate (1.0 with no monitor)."""
        return self.delivered / self.due if self.due else 1.0


def between(before: Sample, after: Sample) -> Sample:
    """The bare loop as it ran around a monitored window: the two bare windows on either side, added up.

    Iterations and times are summed, so every share and rate is that of
    both windows together.

    Examples:
        >>> before = Sample(1000, 2.0, 1.99, 2.0, 0.0)
        >>> after = Sample(800, 2.0, 1.97, 2.0, 0.002)
        >>> base = between(before, after)
        >>> base.iterations, base.wall_s, round(base.off_cpu, 3), round(base.core_wait, 4)
        (1800, 4.0, 0.01, 0.0005)
    """
    return Sample(
        before.iterations + after.iterations,
        before.wall_s + after.wall_s,
        before.loop_cpu_s + after.loop_cpu_s,
        before.process_cpu_s + after.process_cpu_s,
        before.core_wait_s + after.core_wait_s,
    )


@dataclass
class LoopResult:
    """Every window of one loop, by configuration, in order; and each monitored window's bare loop."""

    loop: str
    samples: dict[str, list[Sample]] = field(
        default_factory=lambda: {name: [] for name in CONFIGURATIONS}
    )
    # Per monitored configuration, for each of its windows, the bare
    # windows just before and after it (see between()).
    bases: dict[str, list[Sample]] = field(
        default_factory=lambda: {name: [] for name in CONFIGURATIONS[1:]}
    )

    def _paired(self, name: str, value: Callable[[Sample, Sample], float]) -> float:
        return statistics.median(
            value(sample, base)
            for sample, base in zip(self.samples[name], self.bases[name], strict=True)
        )

    def iterations_down(self, name: str) -> float:
        """Median over rounds of the loop's iterations lost against the bare loop around the window."""
        return self._paired(
            name,
            lambda s, b: 1.0 - (s.iterations / s.wall_s) / (b.iterations / b.wall_s),
        )

    def off_cpu_added(self, name: str) -> float:
        """Median over rounds of the loop thread's off-CPU share, less the bare loop's around the window."""
        return self._paired(name, lambda s, b: s.off_cpu - b.off_cpu)

    def lock_wait_added(self, name: str) -> float:
        """Median over rounds of the loop thread's share waiting for the GIL, less the bare loop's around the window."""
        return self._paired(name, lambda s, b: s.lock_wait - b.lock_wait)

    def monitor_cpu(self, name: str) -> float:
        """Median over rounds of the other threads' CPU (a share of one core), less the bare loop's around the window."""
        return self._paired(name, lambda s, b: s.others_cpu - b.others_cpu)

    def lost_per_payload(self, name: str) -> float:
        """Median over rounds of the loop's added time off the CPU, in seconds, per payload delivered."""
        return self._paired(
            name,
            lambda s, b: (s.off_cpu - b.off_cpu) * s.wall_s / max(s.delivered, 1),
        )

    def lost_per_payload_of_torchrl(self, name: str) -> float:
        """:meth:`lost_per_payload` of ``name`` over TorchRL's: what a delivered payload costs the loop, against TorchRL's monitor."""
        torchrl = self.lost_per_payload(TORCHRL)
        return self.lost_per_payload(name) / torchrl if torchrl > 0 else float("inf")

    def delivered(self, name: str) -> float:
        """Median over rounds of the share of due payloads delivered."""
        return statistics.median(s.delivered_share for s in self.samples[name])


BUDGETED = (IN_PROCESS, OFF_PROCESS, BARE_SINK)
"""The configurations rlpulse's budgets apply to: its monitor with SQLite and the console, the sinks in this process or in a child, and with a sink that only counts."""

OFF_CPU_LIMITS = {IN_PROCESS: 0.03, OFF_PROCESS: 0.018, BARE_SINK: 0.013}
"""The most of the loop thread's time a configuration may take off the CPU.

The counting sink's is the floor measured here (the polls of 100 watches at
10 Hz and their hand-over to a sender); the sinks in a child may add half of
it again (one encoding and one pipe write a round), the sinks in this process
what storing and printing 1,000 payloads a second under the GIL costs.
"""


def budgets(name: str) -> tuple[Budget[LoopResult], ...]:
    """rlpulse's budgets for configuration ``name``, applied to every loop.

    The loop iterations lost are reported, not budgeted: two bare windows
    next to each other differ here by 5-9 %.

    Examples:
        >>> [budget.label for budget in budgets(OFF_PROCESS)][0]
        'delivered, of due'
        >>> budgets(BARE_SINK)[1].limit
        0.013
    """
    return (
        Budget("delivered, of due", lambda r: r.delivered(name), 0.99, at_least=True),
        Budget(
            "loop thread off the CPU, added",
            lambda r: r.off_cpu_added(name),
            OFF_CPU_LIMITS[name],
            at_most=True,
        ),
        Budget(
            "loop time lost a delivered payload, of TorchRL's",
            lambda r: r.lost_per_payload_of_torchrl(name),
            0.1,
            at_most=True,
        ),
    )


def cpu_loop() -> Callable[[float], int]:
    """A CPU-bound pure-Python loop, as a training loop's Python side is: returns ``run(seconds) -> iterations``.

    Examples:
        >>> cpu_loop()(0.01) > 0
        True
    """

    def run(seconds: float) -> int:
        deadline = time.monotonic() + seconds
        iterations = 0
        while time.monotonic() < deadline:
            total = 0
            for value in range(1000):
                total += value * value
            iterations += 1
        return iterations

    return run


def collector_loop(stack: contextlib.ExitStack) -> Callable[[float], int]:
    """A TorchRL collector on CartPole filling a replay buffer: ``run(seconds) -> batches``.

    A random policy, 64 frames a batch; one torch thread, so that the
    process's other threads are the monitor's.
    """
    import torch
    from torchrl.collectors import Collector
    from torchrl.data import LazyTensorStorage, ReplayBuffer
    from torchrl.envs import GymEnv

    torch.set_num_threads(1)
    buffer = ReplayBuffer(storage=LazyTensorStorage(100_000))
    collector = Collector(
        GymEnv("CartPole-v1"), None, frames_per_batch=64, total_frames=-1
    )
    stack.callback(collector.shutdown)
    batches = iter(collector)

    def run(seconds: float) -> int:
        deadline = time.monotonic() + seconds
        iterations = 0
        while time.monotonic() < deadline:
            buffer.extend(next(batches))
            iterations += 1
        return iterations

    return run


def core_wait_s() -> float:
    """Seconds the calling thread has so far been ready to run but waiting for a core; 0.0 where unknown.

    Linux's scheduler statistics (``/proc/thread-self/schedstat``, its
    second field, in nanoseconds).

    Examples:
        >>> core_wait_s() >= 0.0
        True
    """
    try:
        with open("/proc/thread-self/schedstat") as stats:
            return int(stats.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user and system) process ``pid`` has used so far; 0.0 where unknown.

    Linux's ``/proc/PID/stat``, its 14th and 15th fields, in clock ticks.

    Examples:
        >>> process_cpu_s(os.getpid()) >= 0.0
        True
    """
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _window(
    loop: Callable[[float], int],
    seconds: float,
    monitor: Any,
) -> tuple[int, float, float, float, float]:
    if monitor is not None:
        monitor.start()
    started, thread_started, process_started, wait_started = (
        time.monotonic(),
        time.thread_time(),
        time.process_time(),
        core_wait_s(),
    )
    iterations = loop(seconds)
    wall = time.monotonic() - started
    loop_cpu = time.thread_time() - thread_started
    process_cpu = time.process_time() - process_started
    core_wait = core_wait_s() - wait_started
    if monitor is not None:
        monitor.stop(log_final=False)
    return iterations, wall, loop_cpu, process_cpu, core_wait


def _watched(monitor: Any, watches: int) -> Any:
    for index in range(watches):
        monitor.watch(AdvancingCollectorLike(), name=f"worker_{index}")
    return monitor


def _sample(
    name: str,
    loop: Callable[[float], int],
    settings: Settings,
    directory: Path,
    round_index: int,
) -> Sample:
    seconds, watches = settings.window_s, settings.watches
    # Polls are due one interval after start, then every interval.
    due = watches * int(seconds / settings.poll_interval)
    if name == "no monitor":
        return Sample(*_window(loop, seconds, None))
    if name == "TorchRL":
        from torchrl.record.loggers.csv import CSVLogger
        from torchrl.record.loggers.monitoring import LoggerMonitor

        logger = CSVLogger(f"round_{round_index}", log_dir=str(directory / "torchrl"))
        monitor = _watched(
            LoggerMonitor(logger, poll_interval=settings.poll_interval), watches
        )
        measured = _window(loop, seconds, monitor)
        scalars = logger.experiment.scalars
        delivered = sum(len(scalars[f"worker_{i}/frames"]) for i in range(watches))
        for handle in logger.experiment.files.values():
            handle.close()
        return Sample(*measured, delivered=delivered, due=due)
    if name == BARE_SINK:
        counter = CountingSink()
        monitor = _watched(
            rlpulse.LoggerMonitor(counter, poll_interval=settings.poll_interval),
            watches,
        )
        measured = _window(loop, seconds, monitor)
        return Sample(*measured, delivered=counter.payloads, due=due)
    store = directory / "rlpulse.sqlite"
    if name == SINKS_ALONE:
        with (
            rlpulse.SQLiteLogger(store, run=f"round_{round_index}") as sqlite_sink,
            open(directory / "console.log", "a") as stream,
            rlpulse.ConsoleLogger(stream) as console,
            _fed((sqlite_sink, console), _payloads(watches), settings.poll_interval),
        ):
            measured = _window(loop, seconds, None)
        return Sample(*measured, delivered=_frames_rows(store), due=due)
    if name == OFF_PROCESS:
        with (
            _stderr_into(directory / "console.log"),
            rlpulse.SinkProcess(f"sqlite:{store}", "console:") as sinks,
        ):
            monitor = _watched(
                rlpulse.LoggerMonitor(sinks, poll_interval=settings.poll_interval),
                watches,
            )
            child_started = process_cpu_s(sinks.pid)
            measured = _window(loop, seconds, monitor)
            child_cpu = process_cpu_s(sinks.pid) - child_started
        return Sample(
            *measured,
            delivered=_frames_rows(store),
            due=due,
            children_cpu_s=child_cpu,
        )
    with (
        rlpulse.SQLiteLogger(store, run=f"round_{round_index}") as sqlite_sink,
        open(directory / "console.log", "a") as stream,  # as a redirected stderr
        rlpulse.ConsoleLogger(stream) as console,
    ):
        monitor = _watched(
            rlpulse.LoggerMonitor(
                [sqlite_sink, console], poll_interval=settings.poll_interval
            ),
            watches,
        )
        measured = _window(loop, seconds, monitor)
    return Sample(*measured, delivered=_frames_rows(store), due=due)


def _payloads(watches: int) -> list[Payload]:
    """One round's payloads as the monitor hands them to its sinks: ``watches`` collector-like watches, with their rates."""
    kept = InMemorySink()
    monitor = _watched(rlpulse.LoggerMonitor(kept, background=False), watches)
    monitor.step()
    monitor.step()
    return kept.payloads[-watches:]


@contextlib.contextmanager
def _fed(
    sinks: tuple[Any, ...], payloads: list[Payload], interval: float
) -> Iterator[None]:
    """Each of ``sinks`` handed ``payloads`` every ``interval`` seconds by a thread of its own, as a monitor's senders are, while the block runs."""
    stop = threading.Event()

    def feed(sink: Any) -> None:
        due = time.monotonic() + interval
        while not stop.wait(max(0.0, due - time.monotonic())):
            sink.log_payloads(payloads)
            due += interval

    threads = [threading.Thread(target=feed, args=(sink,)) for sink in sinks]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join()


def _frames_rows(store: Path) -> int:
    """How many payloads a store of one window holds: one ``frames`` row each."""
    with contextlib.closing(sqlite3.connect(store)) as connection:
        (rows,) = connection.execute(
            "SELECT count(*) FROM metrics WHERE name LIKE '%/frames'"
        ).fetchone()
    return int(rows)


@contextlib.contextmanager
def _stderr_into(path: Path) -> Iterator[None]:
    """Standard error redirected into ``path`` while the block starts processes, as a shell's ``2>`` would."""
    saved = os.dup(2)
    try:
        with open(path, "a") as stream:
            os.dup2(stream.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


@contextlib.contextmanager
def _loops(settings: Settings) -> Iterator[dict[str, Callable[[float], int]]]:
    with contextlib.ExitStack() as stack:
        made: dict[str, Callable[[float], int]] = {}
        for loop in settings.loops:
            made[loop] = cpu_loop() if loop.startswith("CPU") else collector_loop(stack)
        yield made


def measure(settings: Settings) -> list[LoopResult]:
    """Run every round: each loop, each monitored configuration once, the order rotating, a bare window between any two.

    A shared machine's speed drifts by more than a monitor costs within
    seconds: each monitored window is measured against the bare windows
    just before and after it, not against one bare window of its round.
    """
    results = [LoopResult(loop) for loop in settings.loops]
    monitored = CONFIGURATIONS[1:]
    with tempfile.TemporaryDirectory() as tmp, _loops(settings) as loops:
        for loop in loops.values():
            loop(min(1.0, settings.window_s))  # warm-up: imports, caches, the env
        for round_index in range(settings.rounds):
            turn = round_index % len(monitored)
            order = monitored[turn:] + monitored[:turn]
            for result in results:
                _bracketed_round(
                    result, order, loops[result.loop], settings, tmp, round_index
                )
            progress(f"loop_slowdown: round {round_index + 1}/{settings.rounds}")
    return results


def _bracketed_round(
    result: LoopResult,
    order: tuple[str, ...],
    loop: Callable[[float], int],
    settings: Settings,
    tmp: str,
    round_index: int,
) -> None:
    """One round of one loop: a bare window, then each configuration of ``order`` followed by a bare window."""

    def sample(name: str) -> Sample:
        directory = Path(tmp) / (
            f"{round_index}-{len(result.loop)}-{name}-{len(result.samples[name])}"
        )
        directory.mkdir()
        taken = _sample(name, loop, settings, directory, round_index)
        result.samples[name].append(taken)
        return taken

    before = sample("no monitor")
    for name in order:
        sample(name)
        after = sample("no monitor")
        result.bases[name].append(between(before, after))
        before = after


def _percent(value: float) -> str:
    return f"{100 * value:.1f} %"


def table(result: LoopResult) -> str:
    """The markdown table of one loop's figures, per configuration."""
    lines = [
        "| configuration | delivered, of due | loop iterations lost | loop thread off the CPU (added) | of which waiting for the GIL (added) | monitor CPU, share of a core |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in CONFIGURATIONS:
        bare = name == "no monitor"
        off = statistics.median(s.off_cpu for s in result.samples[name])
        lock = statistics.median(s.lock_wait for s in result.samples[name])
        lines.append(
            f"| {name} | {'—' if bare else _percent(result.delivered(name))} | "
            f"{'—' if bare else _percent(result.iterations_down(name))} | "
            f"{_percent(off)}{'' if bare else f' ({_percent(result.off_cpu_added(name))})'} | "
            f"{_percent(lock)}{'' if bare else f' ({_percent(result.lock_wait_added(name))})'} | "
            f"{'—' if bare else _percent(result.monitor_cpu(name))} |"
        )
    return "\n".join(lines)


def render(results: list[LoopResult], settings: Settings) -> str:
    """The section's markdown: method, one table per loop, rlpulse's budgets."""
    parts = [
        "## Loop slowdown: what monitoring costs a training loop",
        "",
        "A loop runs on the main thread for a "
        f"{settings.window_s:g} s window per configuration: with no monitor, "
        "with TorchRL's `LoggerMonitor` logging to TorchRL's `CSVLogger`, and "
        "with rlpulse's `LoggerMonitor` logging to `SQLiteLogger` and "
        "`ConsoleLogger` (into a file, as a redirected standard error). Each "
        f"monitor has {settings.watches} collector-like watches (six-key "
        "`stats()`, counters moving at every call) polled in background mode "
        f"every {settings.poll_interval:g} s, no schedule: "
        f"{round(settings.watches / settings.poll_interval):,} payloads due a "
        "second. Configurations alternate in one process, their order rotating "
        f"each round, for {settings.rounds} rounds, with a bare window (no "
        "monitor) before the first and after each monitored one: figures are "
        "medians over rounds, each monitored window against the two bare "
        "windows on either side of it, together (this machine's speed drifts "
        "within seconds by more than a monitor costs; against one bare window "
        "of the round, several windows away, the iterations lost spread about "
        "twice as widely). "
        "*Delivered* counts the payloads in the sink afterwards (rlpulse: rows "
        "of the SQLite run; TorchRL: its logger's scalars) against those due at "
        "the poll rate. *Off the CPU* is the share of the window the loop's "
        "thread was not running (`time.thread_time` against wall time: waiting "
        "for the GIL or for a core); *added* is that less the bare window's, "
        "the part the monitor caused. *Waiting for the GIL* is the part of it "
        "the thread was blocked rather than ready to run and waiting for a core "
        "(Linux's scheduler statistics, `/proc/thread-self/schedstat`; the loop "
        "does no I/O, so a blocked loop waits for the interpreter lock): time "
        "the monitor's threads held the GIL, not cores they took. "
        "*Monitor CPU* is the CPU time of the "
        "process's other threads and of its child processes, less the bare "
        "window's, as a share of one core. "
        f"*{OFF_PROCESS}* is the same monitor logging to a `SinkProcess` that "
        "runs the same two sinks (`sqlite:` and `console:`, its standard error "
        "redirected into a file) in a child process: this process encodes each "
        "batch once and writes it into a pipe. "
        f"*{BARE_SINK}* is rlpulse's monitor with the same watches logging to a "
        "sink that only counts the payloads it is given: the monitor's own "
        "share (polls, queue, sender), without what storing and printing cost. "
        f"*{SINKS_ALONE}* has no monitor: the payloads it would deliver each "
        "round (the same watches', with their rates) are handed to the same "
        "`SQLiteLogger` and `ConsoleLogger` every interval by a thread each, as "
        "the monitor's sender threads hand them: what the two sinks cost the "
        "loop by themselves.",
    ]
    for result in results:
        parts += ["", f"### {result.loop}", "", table(result)]
    parts += ["", _shares(results, settings)]
    parts += [
        "",
        "### rlpulse's budgets",
        "",
        "| loop | configuration | figure | rlpulse | budget | result |",
        "|---|---|---|---:|---:|---|",
    ]
    for result in results:
        for name in BUDGETED:
            for budget in budgets(name):
                verdict = "pass" if budget.passes(result) else "OVER BUDGET"
                parts.append(
                    f"| {result.loop} | {name} | {budget.label} "
                    f"| {_budget_figure(budget, budget.figure(result))} "
                    f"| {budget.sign} {_budget_figure(budget, budget.limit)} "
                    f"| {verdict} |"
                )
    parts += ["", machine("torchrl")]
    return reflow("\n".join(parts))


def _shares(results: list[LoopResult], settings: Settings) -> str:
    """Where rlpulse's share of the loop's time goes: the monitor itself, then the sinks."""
    rate = settings.watches / settings.poll_interval

    def per_payload(result: LoopResult, name: str) -> str:
        return f"{result.off_cpu_added(name) * 1e6 / rate:.0f} µs"

    alone = "; ".join(
        f"{result.loop}: {_percent(result.off_cpu_added(SINKS_ALONE))} "
        f"({per_payload(result, SINKS_ALONE)} a payload)"
        for result in results
    )
    figures = "; ".join(
        f"{result.loop}: {_percent(result.off_cpu_added(BARE_SINK))} "
        f"({per_payload(result, BARE_SINK)} a payload) of "
        f"{_percent(result.off_cpu_added(IN_PROCESS))} with the sinks in this "
        f"process ({per_payload(result, IN_PROCESS)}), of "
        f"{_percent(result.off_cpu_added(OFF_PROCESS))} with them in a child "
        f"({per_payload(result, OFF_PROCESS)})"
        for result in results
    )
    return (
        "How much of rlpulse's added time off the CPU is the monitor's own "
        f"(*{BARE_SINK}*, at {rate:,.0f} payloads a second): {figures}. The "
        "rest is the sinks' work: in this process, storing and printing every "
        "payload on their sender threads, which hold the GIL while they run "
        "Python code; in a child, encoding the batch and writing it into the "
        "pipe, while the storing and printing compete with the loop only for "
        "the machine's cores (its monitor CPU counts the child's). The sinks "
        f"alone (*{SINKS_ALONE}*) take {alone}: with the monitor's own share, "
        "that is the least the sinks in this process can cost the loop, "
        "however little the monitor does."
    )


def run(*, quick: bool = False) -> str:
    """Measure and render the section (``quick``: a smoke run whose numbers mean nothing)."""
    settings = (
        Settings(rounds=1, window_s=0.35, watches=5, loops=("CPU-bound Python loop",))
        if quick
        else Settings()
    )
    return render(measure(settings), settings)


def _budget_figure(budget: Budget[LoopResult], value: float) -> str:
    """A budget's figure as it reads: a ratio to TorchRL's as ``0.08x``, a share in percent to two decimals (a figure at the limit reads whether it passes)."""
    if budget.label.endswith("of TorchRL's"):
        return f"{value:.3f}x"
    return f"{100 * value:.2f} %"
