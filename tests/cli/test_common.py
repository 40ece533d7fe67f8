"""The options the commands share (rlpulse.cli.common): ``--exact`` and the times of ``--since`` and ``--until``, the same in every command that takes them.

What each command does with them: its own tests; what ``--match`` keeps:
tests/read/test_match.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rlpulse import CSVLogger, SQLiteLogger
from rlpulse.cli import main
from tests.support import write_run


@pytest.mark.parametrize("command", ["show", "top", "compare"])
def test_exact_writes_every_value_in_full(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    path = tmp_path / "metrics.csv"
    with CSVLogger(path) as sink:
        sink.log_metrics({"c/size": 2.0**62, "c/share": 0.1}, step=0, timestamp=1.0)
    arguments = {"show": [], "top": ["--once"], "compare": [str(path)]}[command]

    assert main([command, str(path), *arguments]) == 0
    short = capsys.readouterr().out
    assert main([command, str(path), *arguments, "--exact"]) == 0
    exact = capsys.readouterr().out

    assert "4.611e+18" in short
    assert "4611686018427387904" in exact
    assert "4.611e+18" not in exact


@pytest.mark.parametrize(
    ("text", "after"),
    [
        *((text, "=") for text in ["soon", "5 min", "10x", "--5m", "1e3", "nan", ""]),
        # After a space too, where a leading "-" read as an option's.
        *((text, " ") for text in ["-10x", "-1e3", "-5 min"]),
    ],
)
def test_a_time_that_is_not_one_is_refused_saying_the_accepted_forms(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, after: str
) -> None:
    path = tmp_path / "run.sqlite"
    write_run(SQLiteLogger(path, run="r"))
    since = [f"--since={text}"] if after == "=" else ["--since", text]

    with pytest.raises(SystemExit) as exit_info:
        main(["show", str(path), *since])

    assert exit_info.value.code == 2
    last_line = capsys.readouterr().err.splitlines()[-1]
    assert last_line == (
        f"rlpulse show: error: argument --since: {text!r} is not a time in the run: "
        "give seconds from its first record, with s, m or h for seconds, minutes "
        "or hours (90, 90s, 1.5m, 2h), negative to count back from its end (-5m)"
    )


@pytest.mark.parametrize("command", ["show", "compare"])
def test_help_explains_the_span_with_an_example(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])

    out = capsys.readouterr().out
    assert exit_info.value.code == 0
    assert "--since T" in out
    assert "--until T" in out
    assert "negative T counts back from the" in out
    assert f"rlpulse {command} " in out
    assert "--since -5m\n" in out
