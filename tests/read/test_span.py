"""``rlpulse show`` and ``rlpulse compare`` over a span of a run (``--since``, ``--until``).

Runs written by the real sinks with known times and values, read back
through the command line, each figure checked against a hand computation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlpulse import CSVLogger, Event, JSONLLogger, SQLiteLogger
from rlpulse.cli import main
from rlpulse.distributions import RELATIVE_ERROR, Histogram
from rlpulse.naming import Kind, Payload
from tests.support import frames_at, write_run

pytestmark = pytest.mark.timeout(60)

START = 1_700_000_000.0


def rows(out: str) -> dict[str, list[str]]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("metric ")) + 1
    end = next((i for i in range(start, len(lines)) if not lines[i]), len(lines))
    return {line.split()[0]: line.split()[1:] for line in lines[start:end]}


def show(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["show", *args, "--exact"]) == 0
    return capsys.readouterr().out


def failure(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(list(args)) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err


# show


def test_show_over_a_span_gives_its_last_extremes_and_a_counters_rate_within_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.sqlite"
    write_run(SQLiteLogger(path, run="r"))

    out = show(capsys, str(path), "--since", "18m", "--until", "23m")

    # Minutes 18 to 23: frames 108,000 to 174,000 in 300 s; sizes 4 5 6 0 1 2.
    assert out.startswith(
        f"run r in {path}: 12 records from 18 min 00 s to 23 min 00 s of "
        "40 min 00 s, the run from "
    )
    assert rows(out) == {
        "buffer/size": ["2", "0", "6"],
        "collector/frames": ["174000", "108000", "174000", "220"],
    }


def test_show_since_a_negative_time_is_the_end_of_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.sqlite"
    write_run(SQLiteLogger(path, run="r"))

    out = show(capsys, str(path), "--since", "-5m")

    # Minutes 35 to 40: sizes 0 1 2 3 4 5, frames at 300 frames/s.
    assert "12 records from 35 min 00 s to 40 min 00 s of 40 min 00 s" in out
    assert rows(out) == {
        "buffer/size": ["5", "0", "5"],
        "collector/frames": ["480000", "390000", "480000", "300"],
    }


def test_show_until_alone_is_the_run_from_its_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.sqlite"
    write_run(SQLiteLogger(path, run="r"))

    out = show(capsys, str(path), "--until", "120")

    assert "6 records from 0.0 s to 2 min 00 s of 40 min 00 s" in out
    assert rows(out) == {
        "buffer/size": ["2", "0", "2"],
        "collector/frames": ["12000", "0", "12000", "100"],
    }


@pytest.mark.parametrize(
    ("make_sink", "name"),
    [(CSVLogger, "run.csv"), (JSONLLogger, "run.jsonl"), (SQLiteLogger, "run.db")],
)
def test_show_over_a_span_gives_the_same_figures_whatever_the_format(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    make_sink: type[CSVLogger | JSONLLogger | SQLiteLogger],
    name: str,
) -> None:
    path = tmp_path / name
    write_run(make_sink(path))

    out = show(capsys, str(path), "--since", "18m", "--until", "23m")

    assert "12 records from 18 min 00 s to 23 min 00 s of 40 min 00 s" in out
    assert rows(out) == {
        "buffer/size": ["2", "0", "6"],
        "collector/frames": ["174000", "108000", "174000", "220"],
    }


def test_show_over_a_span_of_a_run_the_writer_summarised_reads_only_the_span(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Enough rows that the writer stores the run's summaries more than once.
    path = tmp_path / "run.sqlite"
    with SQLiteLogger(path, run="r") as sink:
        for second in range(3000):
            sink.log_metrics(
                {"c/frames": 10.0 * second, "b/size": float(second)},
                timestamp=START + second,
            )

    out = show(capsys, str(path), "--since", "1000", "--until", "1999")

    assert "2,000 records from 16 min 40 s to 33 min 19 s of 49 min 59 s" in out
    assert rows(out) == {
        "b/size": ["1999", "1000", "1999"],
        "c/frames": ["19990", "10000", "19990", "10"],
    }


def test_show_over_a_span_lists_only_the_events_in_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.sqlite"
    with SQLiteLogger(path, run="r") as sink:
        for minute in range(11):
            sink.log_metrics({"c/frames": float(minute)}, timestamp=START + 60 * minute)
        sink.log_event(Event(START + 60, "c", "stalled", "early stall", 30.0))
        sink.log_event(Event(START + 540, "c", "stalled", "late stall", 30.0))

    out = show(capsys, str(path), "--since", "-5m")

    assert "1 event:" in out
    assert "late stall" in out
    assert "early stall" not in out


def interval_values(minute: int) -> list[float]:
    rng = np.random.default_rng(minute)
    return [float(value) for value in rng.lognormal(float(minute) / 4, 1.0, 300)]


def test_show_over_a_span_gives_quantiles_of_that_spans_observations_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.sqlite"
    with SQLiteLogger(path, run="r") as sink:
        for minute in range(10):
            histogram = Histogram()
            for value in interval_values(minute):
                histogram.add(value)
            sink.log_payloads(
                [
                    Payload(
                        {"learner/updates": float(minute)},
                        minute,
                        START + 60 * minute,
                        {"learner/updates": Kind.COUNTER},
                        {"learner/loss": histogram},
                    )
                ]
            )

    out = show(capsys, str(path), "--since", "4m", "--until", "6m")

    # The intervals logged at minutes 4, 5 and 6.
    values = [value for minute in (4, 5, 6) for value in interval_values(minute)]
    table = out.split("distributions over the span:\n")[1].splitlines()
    assert table[0].split() == ["distribution", "count", "p50", "p90", "p99"]
    name, count, *quantiles = table[1].split()
    assert (name, count) == ("learner/loss", "900")
    for q, shown in zip((0.5, 0.9, 0.99), quantiles, strict=True):
        expected = float(np.quantile(values, q, method="inverted_cdf"))
        assert float(shown) == pytest.approx(expected, rel=RELATIVE_ERROR)


# compare


def test_compare_over_a_span_compares_the_same_span_of_each_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = tmp_path / "baseline.sqlite"
    faster = tmp_path / "faster.csv"
    write_run(SQLiteLogger(baseline, run="r"), late_rate=300.0)
    # 40 minutes too, a minute later in time; its last minutes at 600 frames/s.
    with CSVLogger(faster) as sink:
        for minute in range(41):
            sink.log_metrics(
                {
                    "collector/frames": frames_at(minute, 600.0),
                    "buffer/size": 2.0 * (minute % 7),
                },
                step=minute,
                timestamp=START + 3600 + 60 * minute,
            )

    assert main(["compare", str(baseline), str(faster), "--since", "-5m"]) == 0

    out = capsys.readouterr().out
    assert (
        f"A: {baseline} (run r, from 35 min 00 s to 40 min 00 s of 40 min 00 s)" in out
    )
    assert rows(out) == {
        # Minutes 35 to 40: sizes 0 to 5, a mean of 2.5; doubled in B.
        "buffer/size": ["mean", "2.5", "5", "2.00x"],
        "collector/frames": ["rate/s", "300", "600", "2.00x"],
    }


# Errors


def test_a_span_past_the_end_of_the_run_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.sqlite"
    write_run(SQLiteLogger(path, run="r"))

    err = failure(capsys, "show", str(path), "--since", "1h")

    assert err == (
        "rlpulse: error: run r has no records from 1 h 00 min: it is 40 min 00 s "
        "long; give a span within it (a negative time counts back from its end: "
        "--since -5m)\n"
    )


def test_a_span_that_ends_before_it_begins_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.sqlite"
    write_run(SQLiteLogger(path, run="r"))

    err = failure(
        capsys, "compare", str(path), str(path), "--since", "10m", "--until", "-35m"
    )

    assert err == (
        "rlpulse: error: the span of run r from 10 min 00 s to 35 min 00 s before "
        "the end is empty: it ends before it begins; give --since a time before "
        "--until's\n"
    )


def test_a_span_in_a_gap_of_the_run_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.jsonl"
    with JSONLLogger(path) as sink:
        sink.log_metrics({"b/size": 1.0}, timestamp=START)
        sink.log_metrics({"b/size": 2.0}, timestamp=START + 600)

    err = failure(capsys, "show", str(path), "--since", "1m", "--until", "9m")

    assert err == (
        "rlpulse: error: run run.jsonl has no records from 1 min 00 s to 9 min 00 s "
        "of 10 min 00 s; give a wider span\n"
    )
