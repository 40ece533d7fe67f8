"""``rlpulse demo``: the run it records, its sinks, its one-line errors, and how Ctrl-C and SIGTERM end it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from rlpulse import Record, read
from rlpulse.cli import main
from rlpulse.sinks.registry import SCHEMES
from tests.support import RLPULSE_SCRIPT, restore_default_sigint, table_rows


@pytest.mark.timeout(60)
def test_demo_records_a_run_and_prints_its_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "demo.sqlite"

    assert main(["demo", "--synthetic", "--seconds", "1", "--out", str(path)]) == 0

    captured = capsys.readouterr()
    rows = table_rows(captured.out)
    assert {"collector/frames", "buffer/size", "learner/updates"} <= rows.keys()
    assert captured.out.splitlines()[-1] == f"See it again with: rlpulse show {path}"
    assert " collector  frames=" in captured.err
    assert any(record.name == "collector/frames" for record in read(path))


@pytest.mark.timeout(60)
def test_demo_breaks_its_lines_between_words_on_a_narrow_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "50")
    path = tmp_path / "a long folder name for the demo" / "demo.sqlite"

    assert main(["demo", "--synthetic", "--seconds", "1", "--out", str(path)]) == 0

    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("rlpulse demo: collector -> ring buffer ->")
    opening = []
    for line in lines:
        if opening and not line.startswith("    "):
            break
        opening.append(line)
    assert len(opening) > 1
    assert all(len(line) <= 50 for line in opening if " " in line.strip())
    said = " ".join(line.strip() for line in opening)
    assert "Ctrl-C stops early" in said  # whole words, nothing lost


def test_demo_writes_to_runs_demo_sqlite_by_default(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)

    assert main(["demo", "--synthetic", "--seconds", "0.2"]) == 0

    assert (tmp_path / "runs" / "demo.sqlite").is_file()
    assert (tmp_path / "runs" / "demo.png").is_file()
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "See it again with: rlpulse show runs/demo.sqlite"
    # Too short for a window of the verdict: it says why there is none.
    assert "No bottleneck verdict: the run ended before the bottleneck watch" in out


def test_demo_into_an_unwritable_path_is_a_one_line_error(
    tmp_path: Path, error_line: Callable[[], str]
) -> None:
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")

    assert main(["demo", "--out", str(not_a_directory / "demo.sqlite")]) == 2

    line = error_line()
    assert line.startswith("rlpulse: error: ")
    assert str(not_a_directory) in line


@pytest.mark.parametrize("name", ["demo.csv", "demo.JSONL"])
def test_demo_out_with_a_line_files_extension_is_refused_naming_the_sink_to_use(
    tmp_path: Path, error_line: Callable[[], str], name: str
) -> None:
    out = tmp_path / name

    assert main(["demo", "--synthetic", "--out", str(out)]) == 2

    line = error_line()
    scheme = name.rpartition(".")[2].lower()
    assert "records its run in a SQLite file" in line
    assert f"--sink {scheme}:{out}" in line
    assert list(tmp_path.iterdir()) == []


def test_demo_into_a_file_that_is_not_sqlite_is_a_one_line_error(
    tmp_path: Path, error_line: Callable[[], str]
) -> None:
    path = tmp_path / "notes.sqlite"
    path.write_text("these are my notes, not a database\n" * 10)

    assert main(["demo", "--synthetic", "--out", str(path)]) == 2

    assert error_line().startswith("rlpulse: error: ")
    assert path.read_text().startswith("these are my notes")


def test_demo_into_a_directory_is_a_one_line_error(
    tmp_path: Path, error_line: Callable[[], str]
) -> None:
    assert main(["demo", "--synthetic", "--out", str(tmp_path)]) == 2

    line = error_line()
    assert line.startswith("rlpulse: error: ")
    assert str(tmp_path) in line


def test_demo_into_a_dangling_symlink_is_a_one_line_error(
    tmp_path: Path, error_line: Callable[[], str]
) -> None:
    link = tmp_path / "demo.sqlite"
    link.symlink_to(tmp_path / "gone" / "demo.sqlite")

    assert main(["demo", "--synthetic", "--out", str(link)]) == 2

    line = error_line()
    assert line.startswith("rlpulse: error: ")
    assert str(link) in line


def test_demo_runs_the_torchrl_pipeline_when_torchrl_is_installed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torchrl")
    path = tmp_path / "demo.sqlite"

    assert main(["demo", "--seconds", "2", "--out", str(path)]) == 0

    out = capsys.readouterr().out
    assert out.startswith("rlpulse demo: TorchRL Collector on CartPole-v1")
    rows = table_rows(out)
    assert {"collector/frames", "replay_buffer/write_count", "episodes/episodes"} <= (
        rows.keys()
    )
    assert (tmp_path / "demo.png").is_file()
    assert out.splitlines()[-1] == f"See it again with: rlpulse show {path}"


@pytest.mark.timeout(60)
def test_demo_ends_at_the_learners_nth_update_when_it_comes_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "demo.sqlite"
    argv = ["demo", "--synthetic", "--seconds", "60", "--updates", "20"]

    assert main([*argv, "--out", str(path)]) == 0

    out = capsys.readouterr().out
    assert "for 1 min 00 s or 20 updates" in out.splitlines()[0]
    updates = [
        record.value for record in read(path) if record.name == "learner/updates"
    ]
    # Its final snapshot, taken as the demo ends, has the 20th.
    assert updates[-1] == 20.0
    (ended_after,) = re.findall(
        r"^Ended at the learner's update 20, after ([\d.]+) s\.$", out, re.M
    )
    assert float(ended_after) < 30


@pytest.mark.timeout(120)
def test_the_torchrl_demo_ends_at_the_learners_nth_update_when_it_comes_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torchrl")
    path = tmp_path / "demo.sqlite"

    assert main(["demo", "--seconds", "90", "--updates", "5", "--out", str(path)]) == 0

    out = capsys.readouterr().out
    assert "for 1 min 30 s or 5 updates" in out.splitlines()[0]
    assert "Ended at the learner's update 5, after " in out
    updates = [
        record.value for record in read(path) if record.name == "learner/updates"
    ]
    assert updates[-1] == 5.0


def test_demo_without_torchrl_says_so_in_one_line_and_runs_the_synthetic_pipeline(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delitem(sys.modules, "rlpulse._demo.torchrl_pipeline", raising=False)
    for name in [name for name in sys.modules if name.partition(".")[0] == "torchrl"]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "torchrl", None)
    path = tmp_path / "demo.sqlite"

    assert main(["demo", "--seconds", "0.3", "--out", str(path)]) == 0

    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        "rlpulse demo: TorchRL is not installed (torchrl is missing; pip install "
        "'rlpulse[torchrl]'), so this is the synthetic pipeline"
    )
    assert lines[1].startswith("rlpulse demo: collector -> ring buffer -> learner")
    assert any(record.name == "learner/updates" for record in read(path))


def test_demo_does_not_hide_a_missing_module_other_than_torchrls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(sys.modules, "rlpulse._demo.torchrl_pipeline", raising=False)
    monkeypatch.setitem(sys.modules, "rlpulse.sources.torchrl", None)

    with pytest.raises(ModuleNotFoundError, match=r"rlpulse\.sources\.torchrl"):
        main(["demo", "--seconds", "0.3", "--out", str(tmp_path / "demo.sqlite")])


@pytest.mark.parametrize("pipeline", [[], ["--synthetic"]])
def test_demo_with_an_unknown_sink_scheme_is_a_one_line_error_listing_the_known_ones(
    tmp_path: Path, error_line: Callable[[], str], pipeline: list[str]
) -> None:
    path = tmp_path / "demo.sqlite"

    assert main(["demo", *pipeline, "--out", str(path), "--sink", "kafka:topic"]) == 2

    line = error_line()
    assert line.startswith("rlpulse: error: unknown sink scheme 'kafka'")
    assert ", ".join(sorted(SCHEMES)) in line
    assert list(tmp_path.iterdir()) == []


def test_demo_with_a_sink_spec_without_a_scheme_is_a_one_line_error(
    tmp_path: Path, error_line: Callable[[], str]
) -> None:
    argv = ["demo", "--synthetic", "--out", str(tmp_path / "d.sqlite")]

    assert main([*argv, "--sink", "runs/metrics.csv"]) == 2

    assert "has no scheme" in error_line()


def test_demo_with_a_sink_whose_backend_is_missing_is_a_one_line_error(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    error_line: Callable[[], str],
) -> None:
    monkeypatch.delitem(sys.modules, "rlpulse.sinks.tensorboard", raising=False)
    # Submodules an earlier test imported would still be found without
    # their package.
    for module in ("tensorboardX", "tensorboardX.proto", "tensorboardX.record_writer"):
        monkeypatch.setitem(sys.modules, module, None)
    argv = ["demo", "--synthetic", "--out", str(tmp_path / "d.sqlite")]

    assert main([*argv, "--sink", f"tensorboard:{tmp_path / 'tb'}"]) == 2

    assert "pip install 'rlpulse[tensorboard]'" in error_line()
    assert not (tmp_path / "d.sqlite").exists()


@pytest.mark.timeout(60)
def test_demo_sink_repeats_for_several_extra_sinks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv_path = tmp_path / "demo.csv"
    jsonl_path = tmp_path / "demo.jsonl"
    argv = ["demo", "--synthetic", "--seconds", "0.5", "--out", str(tmp_path / "d.db")]

    assert (
        main([*argv, "--sink", f"csv:{csv_path}", "--sink", f"jsonl:{jsonl_path}"]) == 0
    )

    stored = sorted(read(tmp_path / "d.db"))
    assert sorted(read(csv_path)) == stored
    assert sorted(read(jsonl_path)) == stored
    assert f"csv:{csv_path}, jsonl:{jsonl_path}" in capsys.readouterr().out


def test_demo_help_explains_both_pipelines_and_the_sink_specs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["demo", "--help"])

    out = capsys.readouterr().out
    assert "CartPole-v1" in out
    assert "--synthetic" in out
    assert "--sink SPEC" in out
    assert ", ".join(sorted(SCHEMES)) in out
    assert "rlpulse demo --sink csv:runs/demo.csv" in out


def test_the_demo_in_process_puts_back_the_sigterm_handler_it_found(
    tmp_path: Path,
) -> None:
    before = signal.getsignal(signal.SIGTERM)
    argv = ["demo", "--synthetic", "--seconds", "0.2", "--out", str(tmp_path / "d.db")]

    assert main(argv) == 0

    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.timeout(60)
def test_the_demo_runs_from_a_thread_that_cannot_handle_signals(tmp_path: Path) -> None:
    codes: list[int] = []
    argv = ["demo", "--synthetic", "--seconds", "0.2", "--out", str(tmp_path / "d.db")]
    thread = threading.Thread(target=lambda: codes.append(main(argv)))
    thread.start()
    thread.join(timeout=50)

    assert codes == [0]
    assert any(r.name == "collector/frames" for r in read(tmp_path / "d.db"))


# As a real command


def _names(records: list[Record], name: str) -> list[float]:
    return [record.value for record in records if record.name == name]


def _demo_command(path: Path, *options: str) -> list[str]:
    return [sys.executable, "-m", "rlpulse", "demo", *options, "--out", str(path)]


@pytest.mark.timeout(90)
def test_demo_and_show_as_real_commands(tmp_path: Path) -> None:
    path = tmp_path / "runs" / "demo.sqlite"
    # Into a pipe, with no width to fit: lines whole.
    piped = {name: value for name, value in os.environ.items() if name != "COLUMNS"}

    demo = subprocess.run(
        _demo_command(path, "--synthetic", "--seconds", "2"),
        capture_output=True,
        text=True,
        timeout=60,
        env=piped,
    )

    assert demo.returncode == 0, demo.stderr
    records = list(read(path))
    frames = _names(records, "collector/frames")
    assert len(frames) >= 2
    assert frames == sorted(frames)
    assert frames[-1] > frames[0]
    assert _names(records, "collector/frames_per_second")
    assert all(rate > 0 for rate in _names(records, "collector/frames_per_second"))
    (capacity,) = set(_names(records, "buffer/capacity"))
    assert all(size <= capacity for size in _names(records, "buffer/size"))
    # Final snapshots: taken after the pipeline stopped, so both watches agree.
    assert _names(records, "buffer/write_count")[-1] == frames[-1]
    assert f"See it again with: rlpulse show {path}" in demo.stdout

    show = subprocess.run(
        [str(RLPULSE_SCRIPT), "show", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=piped,
    )

    assert show.returncode == 0, show.stderr
    assert show.stdout.startswith("run ")
    assert f"{len(records)} records over " in show.stdout.splitlines()[0]
    rows = table_rows(show.stdout)
    assert rows["collector/frames"][0] == table_rows(demo.stdout)["collector/frames"][0]
    assert len(rows["collector/frames"]) == 4  # last, min, max and the mean rate


@pytest.mark.timeout(120)
def test_the_demos_chart_notes_read_as_rlpulse_plots_do(tmp_path: Path) -> None:
    pytest.importorskip("torchrl")
    pytest.importorskip("matplotlib")
    path = tmp_path / "demo.sqlite"

    demo = subprocess.run(
        _demo_command(path, "--seconds", "4"),
        capture_output=True,
        text=True,
        timeout=110,
    )

    assert demo.returncode == 0, demo.stderr
    notes = [line for line in demo.stderr.splitlines() if "left out" in line]
    # What the chart leaves out (the lines of a Tally's many statistics past
    # a panel's bounds), if anything, is said as rlpulse plot says it.
    assert all(note.startswith("rlpulse: note: left out ") for note in notes)
    assert "PlotWarning" not in demo.stderr


@pytest.mark.timeout(60)
def test_demo_says_where_a_prometheus_sink_on_a_free_port_serves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("prometheus_client")
    argv = ["demo", "--synthetic", "--seconds", "0.3", "--out", str(tmp_path / "d.db")]

    assert main([*argv, "--sink", "prometheus:"]) == 0

    opening = capsys.readouterr().out.splitlines()[0]
    assert re.search(
        r"prometheus: \(serving http://127\.0\.0\.1:\d+/metrics\)", opening
    )


@pytest.mark.timeout(60)
def test_demo_says_where_an_otlp_sink_of_the_environment_posts(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("opentelemetry.proto")
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    argv = ["demo", "--synthetic", "--seconds", "0.3", "--out", str(tmp_path / "d.db")]

    assert main([*argv, "--sink", "otlp:"]) == 0

    opening = capsys.readouterr().out.splitlines()[0]
    assert "otlp: (posting to http://127.0.0.1:9/v1/metrics)" in opening


def _interrupt_demo(
    command: list[str],
    path: Path,
    first_line: str,
    wait_until: Callable[..., bool],
    timeout: float,
) -> tuple[int, str]:
    """Run the demo ``command``, Ctrl-C it once ``path`` holds a collector record; return its exit code and output."""
    demo = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        preexec_fn=restore_default_sigint,
    )
    try:
        assert demo.stdout is not None
        assert demo.stdout.readline().startswith(first_line)
        assert wait_until(
            lambda: any(r.name == "collector/frames" for r in read(path)), timeout
        )
        demo.send_signal(signal.SIGINT)
        out, _ = demo.communicate(timeout=timeout)
    finally:
        demo.kill()
        demo.wait()
    return demo.returncode, out


@pytest.mark.timeout(90)
def test_ctrl_c_ends_the_demo_early_with_final_snapshots_and_summary(
    tmp_path: Path, wait_until: Callable[..., bool]
) -> None:
    path = tmp_path / "demo.sqlite"
    command = _demo_command(path, "--synthetic", "--seconds", "60")

    returncode, out = _interrupt_demo(
        command, path, "rlpulse demo: ", wait_until, timeout=30
    )

    assert returncode == 0
    assert "Stopped early after " in out
    assert "collector/frames " in out
    assert out.splitlines()[-1] == f"See it again with: rlpulse show {path}"
    records = list(read(path))
    # Neither 10,000 frames nor 5 s passed: only the forced final snapshot,
    # logged with rates, carries the collector's frame rate.
    assert _names(records, "collector/frames_per_second")
    assert (
        _names(records, "buffer/write_count")[-1]
        == _names(records, "collector/frames")[-1]
    )


@pytest.mark.timeout(180)
def test_ctrl_c_ends_the_torchrl_demo_early_with_final_snapshots_and_summary(
    tmp_path: Path, wait_until: Callable[..., bool]
) -> None:
    pytest.importorskip("torchrl")
    path = tmp_path / "demo.sqlite"
    command = _demo_command(path, "--seconds", "120")

    returncode, out = _interrupt_demo(
        command, path, "rlpulse demo: TorchRL ", wait_until, timeout=60
    )

    assert returncode == 0
    assert "Stopped early after " in out
    assert "replay_buffer/write_count " in out
    assert out.splitlines()[-1] == f"See it again with: rlpulse show {path}"
    records = list(read(path))
    assert (
        _names(records, "replay_buffer/write_count")[-1]
        == _names(records, "collector/frames")[-1]
    )


@pytest.mark.timeout(90)
def test_sigterm_ends_the_demo_by_the_signal_with_its_final_snapshots(
    tmp_path: Path, wait_until: Callable[..., bool]
) -> None:
    path = tmp_path / "demo.sqlite"
    demo = subprocess.Popen(
        _demo_command(path, "--synthetic", "--seconds", "60"),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert demo.stdout is not None
        assert demo.stdout.readline().startswith("rlpulse demo: ")
        assert wait_until(
            lambda: any(r.name == "collector/frames" for r in read(path)), 30
        )
        demo.send_signal(signal.SIGTERM)
        demo.communicate(timeout=30)
    finally:
        demo.kill()
        demo.wait()

    assert demo.returncode == -signal.SIGTERM
    # Neither 10,000 frames nor 5 s passed: only the forced final snapshot,
    # logged with rates, carries the collector's frame rate.
    assert _names(list(read(path)), "collector/frames_per_second")


def _without_credentials(home: Path) -> dict[str, str]:
    """The environment of a new user: no W&B key or mode, no MLflow settings, an empty home."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("WANDB_", "MLFLOW_"))
    }
    home.mkdir()
    env["HOME"] = str(home)
    return env


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("spec", "advice"),
    [
        ("wandb:myproj", "wandb login"),
        ("mlflow:runs/mlruns", "mlflow:sqlite:///runs/mlflow.db"),
    ],
)
def test_demo_with_a_sink_its_backend_refuses_is_a_one_line_error(
    tmp_path: Path, spec: str, advice: str
) -> None:
    pytest.importorskip(spec.partition(":")[0])
    demo = subprocess.run(
        _demo_command(tmp_path / "d.sqlite", "--synthetic", "--sink", spec),
        capture_output=True,
        text=True,
        timeout=150,
        cwd=tmp_path,
        env=_without_credentials(tmp_path / "home"),
    )

    assert demo.returncode == 2, demo.stderr
    assert demo.stderr.startswith(f"rlpulse: error: cannot open sink {spec!r}: ")
    assert len(demo.stderr.splitlines()) == 1
    assert advice in demo.stderr
    assert not (tmp_path / "d.sqlite").exists()
