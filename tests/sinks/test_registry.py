"""open_sink: sinks from SCHEME:TARGET specs, and optional backends imported only when used."""

from __future__ import annotations

import io
import os
import re
import socket
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

import pytest

import rlpulse
from rlpulse import CSVLogger, JSONLLogger, SQLiteLogger, open_sink, read
from rlpulse.naming import Kind
from rlpulse.sinks.console import ConsoleLogger
from rlpulse.sinks.registry import SCHEMES, SinkSpecError

BACKENDS = ("tensorboardX", "wandb", "mlflow", "prometheus_client", "opentelemetry")


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("scheme", "sink_class", "file_name"),
    [
        ("sqlite", SQLiteLogger, "metrics.sqlite"),
        ("csv", CSVLogger, "metrics.csv"),
        ("jsonl", JSONLLogger, "metrics.jsonl"),
    ],
)
def test_a_file_scheme_opens_its_sink_on_the_path(
    tmp_path: Path, scheme: str, sink_class: type, file_name: str
) -> None:
    path = tmp_path / file_name
    with open_sink(f"{scheme}:{path}") as sink:
        assert isinstance(sink, sink_class)
        sink.log_metrics({"collector/frames": 96.0}, step=3, timestamp=1.5)
    assert list(read(path)) == [
        rlpulse.Record(1.5, 3, "collector/frames", 96.0, Kind.COUNTER)
    ]


@pytest.mark.parametrize(
    ("spec", "stream_name"),
    [
        ("console:", "stderr"),
        ("console:stderr", "stderr"),
        ("console:stdout", "stdout"),
    ],
)
def test_a_console_spec_writes_to_the_named_stream(
    spec: str, stream_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = io.StringIO()
    monkeypatch.setattr(sys, stream_name, stream)
    with open_sink(spec) as sink:
        assert isinstance(sink, ConsoleLogger)
        sink.log_metrics({"collector/frames": 96.0}, step=3)
    assert "frames=96" in stream.getvalue()


def test_a_tensorboard_spec_opens_a_tensorboard_logger_on_the_directory(
    tmp_path: Path,
) -> None:
    from rlpulse.sinks.tensorboard import TensorBoardLogger

    with open_sink(f"tensorboard:{tmp_path / 'tb'}") as sink:
        assert isinstance(sink, TensorBoardLogger)
        assert sink.log_dir == tmp_path / "tb"


def test_an_mlflow_spec_opens_an_mlflow_logger_on_the_tracking_uri(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rlpulse.sinks.mlflow import MLflowLogger

    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with open_sink(f"mlflow:{uri}") as sink:
        assert isinstance(sink, MLflowLogger)
        assert sink.tracking_uri == uri


def test_a_wandb_spec_opens_a_wandb_logger_on_a_new_run_of_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rlpulse.sinks.wandb import WandbLogger

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_CONSOLE", "off")
    monkeypatch.setenv("WANDB_ERROR_REPORTING", "false")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("WANDB_DATA_DIR", str(tmp_path / "data"))
    with open_sink("wandb:rlpulse-tests") as sink:
        assert isinstance(sink, WandbLogger)
        assert sink.run.project == "rlpulse-tests"
    with open_sink("wandb:") as sink:
        assert isinstance(sink, WandbLogger)


def test_a_wandb_spec_without_an_api_key_says_once_how_to_log_in(
    tmp_path: Path,
) -> None:
    pytest.importorskip("wandb")
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("WANDB_")
    }
    environment.update(HOME=str(tmp_path), WANDB_DIR=str(tmp_path))
    code = """
        import rlpulse
        try:
            rlpulse.open_sink("wandb:rlpulse-tests")
        except rlpulse.SinkSpecError as error:
            print(error)
    """
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        env=environment,
    )

    message = result.stdout.strip()
    assert "no API key is configured" in message
    assert message.count("wandb login") == 1
    assert "WANDB_MODE=offline" in message


@pytest.mark.parametrize(
    ("spec", "url_start"),
    [
        ("prometheus:0", "http://127.0.0.1:"),
        ("prometheus:", "http://127.0.0.1:"),
        ("prometheus:127.0.0.1:0", "http://127.0.0.1:"),
        ("prometheus:[127.0.0.1]:0", "http://127.0.0.1:"),
    ],
)
def test_a_prometheus_spec_serves_on_the_port_and_address(
    spec: str, url_start: str
) -> None:
    from rlpulse.sinks.prometheus import PrometheusExporter

    with open_sink(spec) as sink:
        assert isinstance(sink, PrometheusExporter)
        assert sink.url is not None
        assert sink.url.startswith(url_start)
        sink.log_metrics({"collector/frames": 96.0})
        page = urllib.request.urlopen(sink.url, timeout=10).read().decode()
    assert 'rlpulse_frames_total{watch="collector"} 96.0' in page


def test_a_prometheus_spec_without_a_port_number_is_refused() -> None:
    with pytest.raises(ValueError, match="has no port number at its end"):
        open_sink("prometheus:localhost")


def test_an_unknown_scheme_is_a_one_line_error_listing_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown sink scheme") as error:
        open_sink("postgres:metrics")
    message = str(error.value)
    assert "\n" not in message
    assert "unknown sink scheme 'postgres'" in message
    assert message.endswith("known schemes: " + ", ".join(sorted(SCHEMES)))


def test_a_spec_without_a_scheme_is_refused_with_the_form_to_use() -> None:
    with pytest.raises(ValueError, match="has no scheme; write SCHEME:TARGET"):
        open_sink("runs/metrics.sqlite")


@pytest.mark.parametrize(
    ("spec", "meant"),
    [
        ("sqllite:runs/a.sqlite", "'sqlite'"),
        ("consol:", "'console'"),
        ("console", "'console:'"),
    ],
)
def test_a_misspelt_scheme_or_a_scheme_without_its_colon_is_answered_with_the_spec_meant(
    spec: str, meant: str
) -> None:
    with pytest.raises(SinkSpecError, match=re.escape(f"did you mean {meant}?")):
        open_sink(spec)


def test_a_spec_that_is_not_a_string_is_refused() -> None:
    with pytest.raises(TypeError, match="a sink spec is a string"):
        open_sink(Path("runs/metrics.sqlite"))  # type: ignore[arg-type]


def test_the_scheme_is_read_case_insensitively(tmp_path: Path) -> None:
    with open_sink(f"CSV:{tmp_path / 'metrics.csv'}") as sink:
        assert isinstance(sink, CSVLogger)


@pytest.mark.parametrize("scheme", ["sqlite", "csv", "jsonl", "tensorboard"])
def test_a_scheme_that_needs_a_path_refuses_an_empty_target(scheme: str) -> None:
    with pytest.raises(ValueError, match=f"'{scheme}:' needs a target"):
        open_sink(f"{scheme}:")


@pytest.mark.parametrize("scheme", ["sqlite", "csv", "jsonl", "tensorboard"])
@pytest.mark.parametrize("slashes", ["//", "///", "////"])
def test_a_file_spec_written_as_a_url_is_refused_with_both_paths_it_may_mean(
    scheme: str, slashes: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SinkSpecError, match="is written as a URL") as refused:
        open_sink(f"{scheme}:{slashes}runs/metrics")
    said = str(refused.value)
    assert f"'{scheme}:runs/metrics' in the working directory" in said
    assert f"'{scheme}:/runs/metrics' from the root" in said
    assert list(tmp_path.iterdir()) == []  # nothing made, here or elsewhere
    assert not Path("/runs/metrics").exists()


def test_a_file_spec_written_as_a_url_keeps_its_options_in_the_specs_it_suggests() -> (
    None
):
    with pytest.raises(SinkSpecError) as refused:
        open_sink("sqlite:///runs/a.sqlite?run=base&resume")

    said = str(refused.value)
    assert "sink spec 'sqlite:///runs/a.sqlite?run=base&resume' is written" in said
    assert "'sqlite:runs/a.sqlite?run=base&resume' in the working directory" in said


def test_a_file_spec_with_one_slash_is_an_absolute_path(tmp_path: Path) -> None:
    with open_sink(f"sqlite:{tmp_path / 'metrics.sqlite'}?run=loop") as sink:
        assert isinstance(sink, SQLiteLogger)
        assert sink.path == tmp_path / "metrics.sqlite"


def test_an_otlp_spec_without_a_url_takes_opentelemetrys_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4999")
    with open_sink("otlp:") as sink:
        assert sink.url == "http://127.0.0.1:4999/v1/metrics"  # type: ignore[attr-defined]


def test_a_console_spec_naming_no_stream_is_refused() -> None:
    with pytest.raises(ValueError, match="names no stream"):
        open_sink("console:stdlog")


@pytest.mark.timeout(60)
def test_importing_rlpulse_and_its_sinks_imports_no_optional_backend() -> None:
    completed = run_python(
        f"""
        import sys
        import rlpulse, rlpulse.sinks, rlpulse.sinks.registry
        import rlpulse.sinks.tensorboard, rlpulse.sinks.wandb
        import rlpulse.sinks.mlflow, rlpulse.sinks.prometheus, rlpulse.sinks.otlp
        print(sorted(name for name in {BACKENDS!r} if name in sys.modules))
        """
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "[]"


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("backend", "module", "construct", "extra"),
    [
        ("tensorboardX", "tensorboard", "TensorBoardLogger('tb')", "tensorboard"),
        ("wandb", "wandb", "WandbLogger(mode='offline')", "wandb"),
        ("mlflow", "mlflow", "MLflowLogger(tracking_uri='sqlite:///m.db')", "mlflow"),
        ("prometheus_client", "prometheus", "PrometheusExporter()", "prometheus"),
        ("opentelemetry", "otlp", "OTLPExporter('http://127.0.0.1:4318')", "otlp"),
    ],
)
def test_without_its_backend_a_sink_raises_import_error_naming_the_extra(
    tmp_path: Path, backend: str, module: str, construct: str, extra: str
) -> None:
    class_name = construct.partition("(")[0]
    completed = run_python(
        f"""
        import os, sys
        os.chdir({str(tmp_path)!r})
        sys.modules[{backend!r}] = None  # as if it were not installed
        from rlpulse.sinks.{module} import {class_name}
        try:
            {construct}
        except ImportError as error:
            print(error)
        """
    )
    assert completed.returncode == 0, completed.stderr
    assert f"pip install 'rlpulse[{extra}]'" in completed.stdout
    assert class_name in completed.stdout
    assert list(tmp_path.iterdir()) == []


def test_a_port_in_use_is_a_sink_spec_error_saying_what_to_do() -> None:
    pytest.importorskip("prometheus_client")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(SinkSpecError, match="'prometheus:0' picks one") as error:
            open_sink(f"prometheus:127.0.0.1:{port}")
    message = str(error.value)
    assert message.startswith(f"cannot open sink 'prometheus:127.0.0.1:{port}': ")
    assert "\n" not in message
    assert isinstance(error.value.__cause__, OSError)


def test_an_unwritable_path_is_a_sink_spec_error_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SinkSpecError, match="cannot write metrics to") as error:
        open_sink(f"csv:{blocker / 'metrics.csv'}")
    assert isinstance(error.value.__cause__, OSError)
    assert str(blocker) in str(error.value)


def test_a_backend_refusing_a_path_is_a_sink_spec_error_naming_it(
    tmp_path: Path,
) -> None:
    pytest.importorskip("tensorboardX")
    blocker = tmp_path / "file"
    blocker.write_text("")
    spec = f"tensorboard:{blocker / 'tb'}"
    with pytest.raises(
        SinkSpecError, match="give a directory you can write to"
    ) as error:
        open_sink(spec)
    assert str(error.value).startswith(f"cannot open sink {spec!r}: ")
    assert f"{blocker / 'tb'}: " in str(error.value)


def test_a_sqlite_spec_names_its_run(tmp_path: Path) -> None:
    path = tmp_path / "metrics.sqlite"
    with open_sink(f"sqlite:{path}?run=loop") as sink:
        sink.log_metrics({"x/v": 1.0}, timestamp=1.0)

    assert rlpulse.list_runs(path) == ["loop"]


def test_a_sqlite_spec_of_a_stored_run_is_refused_with_the_specs_to_choose_from(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.sqlite"
    open_sink(f"sqlite:{path}?run=loop").close()

    with pytest.raises(SinkSpecError) as refused:
        open_sink(f"sqlite:{path}?run=loop")

    message = str(refused.value)
    assert f"run 'loop' already exists in {path}" in message
    assert f"'sqlite:{path}?run=loop-2'" in message
    assert f"'sqlite:{path}?run=loop&resume'" in message
    assert "resume=True" not in message
    assert isinstance(refused.value.__cause__, rlpulse.RunExistsError)


def test_a_sqlite_spec_with_resume_appends_to_the_run(tmp_path: Path) -> None:
    path = tmp_path / "metrics.sqlite"
    for value in (1.0, 2.0):
        with open_sink(f"sqlite:{path}?run=loop&resume") as sink:
            sink.log_metrics({"x/v": value}, timestamp=value)

    assert rlpulse.list_runs(path) == ["loop"]
    assert [record.value for record in read(path, run="loop")] == [1.0, 2.0]


def test_a_sqlite_spec_resuming_no_named_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SinkSpecError, match=r"\?run=NAME&resume"):
        open_sink(f"sqlite:{tmp_path / 'metrics.sqlite'}?resume")


@pytest.mark.parametrize("scheme", ["csv", "jsonl"])
def test_a_line_file_spec_of_a_file_holding_a_run_is_refused_unless_resumed(
    tmp_path: Path, scheme: str
) -> None:
    path = tmp_path / f"metrics.{scheme}"
    with open_sink(f"{scheme}:{path}") as sink:
        sink.log_metrics({"x/v": 1.0}, timestamp=1.0)

    with pytest.raises(SinkSpecError) as refused:
        open_sink(f"{scheme}:{path}")
    assert f"'{scheme}:{path}?resume'" in str(refused.value)

    with open_sink(f"{scheme}:{path}?resume") as sink:
        sink.log_metrics({"x/v": 2.0}, timestamp=2.0)
    assert [record.value for record in read(path)] == [1.0, 2.0]


def test_a_path_holding_a_question_mark_ends_with_one(tmp_path: Path) -> None:
    path = tmp_path / "what?.csv"
    with open_sink(f"csv:{path}?") as sink:
        sink.log_metrics({"x/v": 1.0}, timestamp=1.0)

    assert [record.value for record in read(path)] == [1.0]


def test_an_unknown_file_spec_option_is_refused_naming_the_known_ones(
    tmp_path: Path,
) -> None:
    with pytest.raises(SinkSpecError, match=r"unknown option 'append'.*'resume'"):
        open_sink(f"csv:{tmp_path / 'metrics.csv'}?append")
    assert not (tmp_path / "metrics.csv").exists()
