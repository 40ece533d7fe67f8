"""``rlpulse compare`` on the command line: the verdict rows (the figures side by side are ``tests/read/test_compare.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlpulse.cli import main
from tests.support import write_pipeline_run


def test_compare_has_a_verdict_row_per_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.db"
    write_pipeline_run(path, "slow-env", learner_busy=0.37)
    write_pipeline_run(path, "slow-learner", learner_busy=0.9)

    assert main(["compare", f"{path}:slow-env", f"{path}:slow-learner"]) == 0

    out = capsys.readouterr().out.splitlines()
    assert out[-5:] == [
        "run  bottleneck over the run",
        "A    collector-bound 100% of 4 windows",
        "B    learner-bound 100% of 4 windows",
        "",
        "no B/A of bottleneck/speedup: it is a speed-up of different sides "
        "(A collector-bound, B learner-bound)",
    ]
