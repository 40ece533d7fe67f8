"""What every format's records share (``rlpulse.formats.records``): a record's watch, metric and unit, and the kinds of a file of rlpulse 0.1.0 guessed from its names."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlpulse import read
from rlpulse.naming import Kind, Unit
from tests.support import FILE_SINKS, FIXTURES


@pytest.mark.parametrize("file_name", FILE_SINKS)
def test_a_record_says_its_watch_metric_and_unit(
    tmp_path: Path, file_name: str
) -> None:
    path = tmp_path / file_name
    with FILE_SINKS[file_name](path) as sink:
        sink.log_metrics({"collector/worker_0/rss_bytes": 5.0, "loss": 0.5})

    described = [(r.watch, r.metric, r.unit) for r in read(path)]

    assert described == [
        ("collector", "worker_0/rss_bytes", Unit.BYTES),
        ("", "loss", None),
    ]


OLD_FILES = ("v0.1.0.sqlite", "v0.1.0.csv", "v0.1.0.jsonl")


@pytest.mark.parametrize("file_name", OLD_FILES)
def test_a_file_of_rlpulse_0_1_0_reads_with_the_kinds_its_names_say(
    file_name: str,
) -> None:
    kinds = {record.name: record.kind for record in read(FIXTURES / file_name)}

    assert kinds["collector/frames"] is Kind.COUNTER
    assert kinds["collector/episodes"] is Kind.COUNTER  # its rate is logged
    assert kinds["collector/episodes_per_second"] is Kind.RATE
    assert kinds["episodes/episode_return_count"] is Kind.COUNTER
    assert kinds["monitor/polls"] is Kind.GAUGE  # no name says otherwise
    assert kinds["replay_buffer/size"] is Kind.GAUGE


def test_the_files_of_rlpulse_0_1_0_hold_the_same_records() -> None:
    sqlite, csv, jsonl = (list(read(FIXTURES / name)) for name in OLD_FILES)

    assert len(sqlite) == 68
    assert sqlite == csv == jsonl


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"names": "collector/frames"},
            r"a collection of metric names.*\['collector/frames'\]",
        ),
        ({"since": "5s"}, "since must be seconds since the epoch.*'5s'"),
        ({"until": True}, "until must be seconds since the epoch"),
    ],
)
def test_read_refuses_options_it_would_match_nothing_with(
    tmp_path: Path, options: dict[str, object], message: str
) -> None:
    # A name given as a string was read as its letters, a time as text
    # compared with none: no record, and no word why.
    from rlpulse import SQLiteLogger, read_distributions
    from rlpulse.formats import read_aggregate

    path = tmp_path / "run.sqlite"
    with SQLiteLogger(path, run="a") as sink:
        sink.log_metrics({"collector/frames": 1.0}, timestamp=10.0)

    with pytest.raises(TypeError, match=message):
        read(path, **options)  # type: ignore[arg-type]
    if "names" not in options:
        with pytest.raises(TypeError, match=message):
            read_aggregate(path, **options)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=message):
            read_distributions(path, **options)  # type: ignore[arg-type]
    assert len(list(read(path, names=["collector/frames"], since=10))) == 1


def test_read_of_file_colon_run_says_to_name_the_run_with_run(tmp_path: Path) -> None:
    from rlpulse import SQLiteLogger

    path = tmp_path / "run.sqlite"
    with SQLiteLogger(path, run="a") as sink:
        sink.log_metrics({"collector/frames": 1.0}, timestamp=10.0)

    with pytest.raises(
        FileNotFoundError,
        match=r"for run 'a' of .*run\.sqlite, read that file with run='a'",
    ):
        read(f"{path}:a")
    with pytest.raises(FileNotFoundError, match="No such file or directory"):
        read(tmp_path / "other.sqlite")
