"""The runner of the documentation's examples (scripts/docs_examples.py), on small Markdown files of its own.

The documents themselves are collected by ./conftest.py; these tests pin
what makes one of their examples fail, with real scripts and real
``rlpulse show`` runs in a temporary directory.
"""

from __future__ import annotations

import textwrap
import unittest
from pathlib import Path

import pytest
from scripts import docs_examples
from sybil import Document
from sybil.example import SybilFailure

pytestmark = pytest.mark.timeout(60)

WRITE_RUN = """
```python
from rlpulse import SQLiteLogger

with SQLiteLogger("run.sqlite", run="a") as sink:
    sink.log_metrics({"loop/frames": 10.0, "loop/size": 3.0}, step=1, timestamp=1.0)
    sink.log_metrics({"loop/frames": 30.0, "loop/size": 4.0}, step=2, timestamp=2.0)
```
"""

SHOW = """
```console
$ rlpulse show run.sqlite
run a in run.sqlite: 5 records over 2.5 s, from 2026-12-02 15:33:50

metric       last  min  max  mean rate/s
loop/frames    20k   10   20k          7.5
{size_row}
```
"""


def evaluate(tmp_path: Path, markdown: str) -> None:
    """Run every example of ``markdown`` as the test suite runs a document's."""
    path = tmp_path / "page.md"
    path.write_text(textwrap.dedent(markdown))
    directory = tmp_path / "work"
    directory.mkdir(exist_ok=True)
    document = Document.parse(str(path), *docs_examples.PARSERS)
    document.namespace[docs_examples.DIRECTORY_KEY] = directory
    for example in document:
        example.evaluate()


def test_shown_output_with_other_numbers_passes(tmp_path: Path) -> None:
    size_row = "loop/size       4    3    4"
    evaluate(tmp_path, WRITE_RUN + SHOW.format(size_row=size_row))


def test_shown_output_missing_a_row_fails_with_what_is_printed(tmp_path: Path) -> None:
    with pytest.raises(SybilFailure, match=r"(?s)numbers aside.*\+loop/size # # #"):
        evaluate(tmp_path, WRITE_RUN + SHOW.format(size_row=""))


def test_shown_output_with_a_counter_shown_as_a_gauge_fails(tmp_path: Path) -> None:
    size_row = "loop/size       4    3    4         1"
    with pytest.raises(SybilFailure, match="prints another output"):
        evaluate(tmp_path, WRITE_RUN + SHOW.format(size_row=size_row))


def test_a_command_that_fails_fails_with_its_error(tmp_path: Path) -> None:
    with pytest.raises(SybilFailure, match=r"exited with 2:\n.*missing\.sqlite"):
        evaluate(tmp_path, "```console\n$ rlpulse show missing.sqlite\n```\n")


def test_an_example_that_raises_fails_with_its_traceback(tmp_path: Path) -> None:
    with pytest.raises(SybilFailure, match=r"(?s)exited with 1.*NameError"):
        evaluate(tmp_path, "```python\nmonitor.watch(collector)\n```\n")


def test_an_example_that_logs_a_warning_fails(tmp_path: Path) -> None:
    broken_source = """
    ```python
    from rlpulse import LoggerMonitor, SQLiteLogger

    def stats():
        raise RuntimeError("not ready")

    with SQLiteLogger("run.sqlite") as sink, LoggerMonitor(sink) as monitor:
        monitor.watch(stats, name="source", stats_fn=stats)
    ```
    """
    with pytest.raises(SybilFailure, match=r"(?s)logged warnings.*not ready"):
        evaluate(tmp_path, broken_source)


def test_a_server_an_example_opens_to_every_machine_is_opened_on_127_0_0_1(
    tmp_path: Path,
) -> None:
    # The example fails unless the server it opens is local, on a free port.
    serving = """
    ```python
    def serve(port, addr):
        assert (port, addr) == (0, "127.0.0.1"), (port, addr)

    serve(port=9464, addr="0.0.0.0")
    ```
    """
    evaluate(tmp_path, serving)


def test_a_sh_block_holds_install_steps_only(tmp_path: Path) -> None:
    evaluate(
        tmp_path, "```sh\npip install 'rlpulse[torchrl]'  # TorchRL\nmake test\n```\n"
    )
    with pytest.raises(
        SybilFailure, match=r"'\$ rlpulse show run.sqlite' in a console"
    ):
        evaluate(tmp_path, "```sh\nrlpulse show run.sqlite\n```\n")


def test_a_block_after_a_skip_comment_is_skipped_with_its_reason(
    tmp_path: Path,
) -> None:
    markdown = '<!-- skip: next "a fragment" -->\n\n```python\nundefined\n```\n'
    with pytest.raises(unittest.SkipTest, match="a fragment"):
        evaluate(tmp_path, markdown)


def test_rewriting_a_page_writes_what_its_commands_print(tmp_path: Path) -> None:
    path = tmp_path / "page.md"
    path.write_text(WRITE_RUN + SHOW.format(size_row=""))

    assert docs_examples.rewrite_output(path) == 1

    text = path.read_text()
    assert "run a in run.sqlite: 4 records over 1.0 s" in text
    assert "loop/frames    30   10   30           20\nloop/size" in text
    assert text.startswith(WRITE_RUN)
    evaluate(tmp_path, text)
