"""Following a store: what ``rlpulse top`` costs while a run is written, and what it costs the writer.

A writer process stores payloads of six metrics with ``SQLiteLogger``, one
per call, paced at 1,000 payloads/s; a follower process does what
``rlpulse top`` does at each frame (read what was written since the last
frame with ``RunFollower``, keep it in a ``LiveRun``, build the 80x24 frame
and draw it with rich), a frame a second. Rounds alternate the writer alone
and the writer followed (the order reversed every other round); the
figures are medians over rounds: the follower's CPU time as a share of one
core, the writer's payloads per second and its median time per store call,
with the follower over alone.
"""

from __future__ import annotations

import io
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks import Budget, machine, progress, reflow

__all__ = [
    "BUDGETS",
    "FollowResult",
    "Settings",
    "follow_for",
    "measure",
    "render",
    "run",
    "write_for",
]

CPU_BUDGET = 0.10
"""The most of one core ``top`` may use following a store written at 1,000 payloads/s."""

THROUGHPUT_BUDGET = 0.99
"""The least share of its throughput alone the writer keeps with ``top`` following."""

CALL_BUDGET = 1.25
"""The most the writer's median time per store call may grow with ``top`` following."""


@dataclass(frozen=True)
class Settings:
    """Rounds, window and rates.

    Examples:
        >>> Settings().paced_rate, Settings().interval
        (1000, 1.0)
    """

    rounds: int = 6
    window_s: float = 6.0
    paced_rate: int = 1000
    interval: float = 1.0
    metrics: int = 6


@dataclass
class FollowResult:
    """Per round: top's share of a core, and the writer's payloads per second alone and with top following."""

    top_cpu: list[float]
    frames: list[int]
    records: list[int]
    alone: list[float]
    followed: list[float]
    alone_call_s: list[float]
    followed_call_s: list[float]

    @property
    def cpu_share(self) -> float:
        """Median over rounds of top's CPU time over the window, as a share of one core."""
        return statistics.median(self.top_cpu)

    @property
    def throughput_ratio(self) -> float:
        """Median over rounds of the writer's throughput with top following over alone."""
        return _median_ratio(self.followed, self.alone)

    @property
    def call_ratio(self) -> float:
        """Median over rounds of the writer's median time per store call with top following over alone."""
        return _median_ratio(self.followed_call_s, self.alone_call_s)


def _median_ratio(ours: list[float], theirs: list[float]) -> float:
    return statistics.median(a / b for a, b in zip(ours, theirs, strict=True))


BUDGETS: tuple[Budget[FollowResult], ...] = (
    Budget("top's CPU, share of a core", lambda result: result.cpu_share, CPU_BUDGET),
    Budget(
        "writer's throughput with top, of alone",
        lambda result: result.throughput_ratio,
        THROUGHPUT_BUDGET,
        at_least=True,
    ),
    Budget(
        "writer's time per store call with top, of alone",
        lambda result: result.call_ratio,
        CALL_BUDGET,
    ),
)
"""The section's limits."""


def write_for(path: str, seconds: float, rate: float, metrics: int) -> dict[str, float]:
    """Store payloads of ``metrics`` metrics into ``path`` for ``seconds``, ``rate`` a second, one per call; return how many and the median call's time."""
    from rlpulse import SQLiteLogger
    from rlpulse.naming import Kind, Payload

    names = [f"w{index % 3}/m{index}" for index in range(metrics)]
    kinds = {name: Kind.COUNTER for name in names[::2]}
    calls: list[float] = []
    with SQLiteLogger(path, run="bench") as sink:
        started = time.perf_counter()
        while (elapsed := time.perf_counter() - started) < seconds:
            if len(calls) >= elapsed * rate:
                time.sleep(0.0005)
                continue
            values = dict.fromkeys(names, float(len(calls)))
            before = time.perf_counter()
            sink.log_payloads([Payload(values, len(calls), time.time(), kinds)])
            calls.append(time.perf_counter() - before)
    return {"written": len(calls), "call_s": statistics.median(calls)}


def follow_for(path: str, seconds: float, interval: float) -> dict[str, float]:
    """Follow ``path`` as ``rlpulse top`` does for ``seconds``, a frame each ``interval``; return the CPU time, frames and records."""
    from rich.console import Console

    from rlpulse.formats import RunFollower
    from rlpulse.read.live import LiveRun
    from rlpulse.read.top import TopView, frame_lines, render

    follower = RunFollower(Path(path))
    live = LiveRun(path)
    view = TopView()
    console = Console(file=io.StringIO(), width=80, height=24, force_terminal=True)
    frames = records = 0
    cpu_before = _cpu_s()
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        followed = follower.read_new()
        live.add(followed)
        records += len(followed.records)
        console.print(
            render(frame_lines([(follower, live)], view, 80, 24, time.time()))
        )
        frames += 1
        time.sleep(max(0.0, interval - (time.monotonic() - started) % interval))
    follower.close()
    return {"cpu_s": _cpu_s() - cpu_before, "frames": frames, "records": records}


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _start(*arguments: str) -> subprocess.Popen[str]:
    root = Path(__file__).resolve().parent.parent
    return subprocess.Popen(
        [sys.executable, "-m", "benchmarks.top_follow", *arguments],
        cwd=root,
        stdout=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                filter(None, (os.environ.get("PYTHONPATH"), str(root)))
            ),
        },
    )


def _result(process: subprocess.Popen[str]) -> dict[str, float]:
    output, _ = process.communicate(timeout=600)
    if process.returncode != 0:
        raise RuntimeError(f"a benchmark process failed ({process.returncode})")
    result: dict[str, float] = json.loads(output)
    return result


def measure(settings: Settings) -> FollowResult:
    """Each round the paced writer alone and followed, in alternating order."""
    result = FollowResult([], [], [], [], [], [], [])
    window = str(settings.window_s)
    with tempfile.TemporaryDirectory() as tmp:
        for round_index in range(settings.rounds):
            order = (
                ("alone", "followed") if round_index % 2 == 0 else ("followed", "alone")
            )
            for configuration in order:
                store = str(Path(tmp) / f"{configuration}{round_index}.sqlite")
                writer = _start(
                    "write",
                    store,
                    window,
                    str(settings.paced_rate),
                    str(settings.metrics),
                )
                if configuration == "followed":
                    followed = _result(
                        _start("follow", store, window, str(settings.interval))
                    )
                    result.top_cpu.append(followed["cpu_s"] / settings.window_s)
                    result.frames.append(int(followed["frames"]))
                    result.records.append(int(followed["records"]))
                written = _result(writer)
                getattr(result, configuration).append(
                    written["written"] / settings.window_s
                )
                getattr(result, f"{configuration}_call_s").append(written["call_s"])
            progress(f"top_follow: round {round_index + 1}/{settings.rounds}")
    return result


def render(result: FollowResult, settings: Settings) -> str:
    """The section's markdown."""
    lines = [
        "## Following a store: what `rlpulse top` costs",
        "",
        "A writer process stores payloads of "
        f"{settings.metrics} metrics with `SQLiteLogger`, one per call, paced "
        f"at {settings.paced_rate:,} payloads/s; a follower process does what "
        "`rlpulse top` does each frame: it reads what was written since the "
        "last frame (`RunFollower`: the rows after the last one read, on a "
        "read-only connection), keeps it in a `LiveRun` and draws the 80x24 "
        f"frame with rich, a frame every {settings.interval:g} s. Rounds of "
        f"{settings.window_s:g} s alternate the writer alone and the writer "
        "followed (the order reversed every other round); "
        f"{settings.rounds} rounds, medians of the per-round figures: the "
        "follower's CPU time as a share of one core, the writer's payloads "
        "per second and its median time per store call.",
        "",
        "| figure | alone | with top following | ratio | budget | verdict |",
        "|---|---:|---:|---:|---:|---|",
        f"| top's CPU, share of one core | | {100 * result.cpu_share:.1f} % | | "
        f"< {100 * CPU_BUDGET:.0f} % | {_verdict(BUDGETS[0], result)} |",
        f"| writer, payloads/s | {statistics.median(result.alone):,.0f} | "
        f"{statistics.median(result.followed):,.0f} | "
        f"{result.throughput_ratio:.3f} | >= {THROUGHPUT_BUDGET:.2f} | "
        f"{_verdict(BUDGETS[1], result)} |",
        f"| writer, median µs per store call | "
        f"{1e6 * statistics.median(result.alone_call_s):,.0f} | "
        f"{1e6 * statistics.median(result.followed_call_s):,.0f} | "
        f"{result.call_ratio:.2f} | < {CALL_BUDGET:.2f} | "
        f"{_verdict(BUDGETS[2], result)} |",
        "",
        f"The follower drew {statistics.median(result.frames):g} frames and read "
        f"{statistics.median(result.records):,.0f} records a window (median): "
        "each frame reads only what the last one had not.",
        "",
        machine("rich"),
    ]
    return reflow("\n".join(lines))


def _verdict(budget: Budget[FollowResult], result: FollowResult) -> str:
    return "pass" if budget.passes(result) else "OVER BUDGET"


def run(*, quick: bool = False) -> str:
    """Measure and render the section (``quick``: a smoke run whose numbers mean nothing)."""
    settings = Settings(rounds=1, window_s=1.0) if quick else Settings()
    return render(measure(settings), settings)


def _main(arguments: list[str]) -> None:
    command, path, seconds, *rest = arguments
    if command == "write":
        rate, metrics = rest
        print(json.dumps(write_for(path, float(seconds), float(rate), int(metrics))))
    else:
        print(json.dumps(follow_for(path, float(seconds), float(rest[0]))))


if __name__ == "__main__":
    _main(sys.argv[1:])
