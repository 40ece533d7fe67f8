"""``rlpulse top`` on the command line (the live view itself is ``tests/read/test_top.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlpulse.cli import main
from tests.support import OLD_SQLITE_FILES, copy_of_fixture, table_rows


@pytest.mark.parametrize("name", OLD_SQLITE_FILES)
def test_top_once_of_a_sqlite_file_of_format_version_1_or_2_names_its_watches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    copy = copy_of_fixture(name, tmp_path)

    assert main(["top", str(copy), "--once"]) == 0

    out = capsys.readouterr().out
    assert out.startswith(f"run tuned in {copy}: 99 records over 11.0 s")
    watches = {metric.split("/")[0] for metric in table_rows(out)}
    assert watches == {"buffer", "collector", "learner"}
    assert "stalled collector: no progress (frames) for 30.0s" in out
