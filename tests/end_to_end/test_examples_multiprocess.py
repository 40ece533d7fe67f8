"""examples/multiprocess_pipeline.py, run as a user runs it: four real worker processes, a real SQLite store."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import rlpulse

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "multiprocess_pipeline.py"
WORKERS = 4

pytestmark = pytest.mark.timeout(120)


@dataclass(frozen=True)
class Run:
    completed: subprocess.CompletedProcess[str]
    last: dict[str, float]
    names: set[str]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    store = tmp_path_factory.mktemp("multiprocess") / "run.sqlite"
    completed = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE),
            "--seconds",
            "2",
            "--interval",
            "0.5",
            "--db",
            str(store),
            "--run",
            "example",
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    last: dict[str, float] = {}
    for record in rlpulse.read(store, run="example"):
        last[record.name] = record.value
    return Run(completed, last, set(last))


def test_every_worker_counts_frames_into_the_store(run: Run) -> None:
    per_worker = [
        run.last[f"workers/worker_{index}/frames"] for index in range(WORKERS)
    ]
    assert all(frames > 0 for frames in per_worker)
    assert sum(per_worker) == run.last["workers/frames"]


def test_all_four_workers_are_alive_in_the_last_snapshot(run: Run) -> None:
    assert run.last["workers/workers_alive"] == WORKERS


def test_episodes_and_the_episode_return_gauge_reach_the_store(run: Run) -> None:
    assert run.last["workers/episodes"] > 0
    assert all(
        run.last[f"workers/worker_{index}/episode_return"] > 0
        for index in range(WORKERS)
    )


def test_the_learner_is_watched_beside_the_workers(run: Run) -> None:
    assert run.last["learner/updates"] > 0


def test_the_summary_of_the_run_is_printed_at_the_end(run: Run) -> None:
    summary = run.completed.stdout
    assert summary.startswith("run example in ")
    assert "workers/workers_alive" in summary
    assert "workers/worker_3/frames" in summary


def test_the_console_gets_each_payload_on_a_line_and_its_continuations(
    run: Run,
) -> None:
    # A payload starts with its time stamp; lines fitted to the width go on
    # indented.
    payloads: list[str] = []
    for line in run.completed.stderr.splitlines():
        if line.startswith(" ") and payloads:
            payloads[-1] += line
        else:
            payloads.append(line)
    workers = [payload for payload in payloads if " workers " in payload]
    assert workers
    assert all("workers_alive=" in payload for payload in workers)


def test_a_duration_that_is_not_positive_is_refused(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, str(EXAMPLE), "--seconds", "0", "--db", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 2
    assert "must be positive" in completed.stderr
    assert not (tmp_path / "x").exists()
