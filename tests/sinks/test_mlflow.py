"""MLflowLogger: runs in a local SQLite tracking store, read back with MlflowClient."""

from __future__ import annotations

import http.server
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import mlflow
import pytest
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from rlpulse import LoggerMonitor, TransientSinkError, open_sink
from rlpulse.sinks.mlflow import MLflowLogger
from rlpulse.sinks.registry import SinkSpecError
from rlpulse.testing import InMemorySink
from tests.support import wait_until


@pytest.fixture(scope="module", autouse=True)
def no_usage_reports() -> Iterator[None]:
    # MLflow reports usage over the network unless told not to; tests run offline.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
        yield


@pytest.fixture(scope="module")
def tracking_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    # Creating a SQLite tracking store runs MLflow's migrations, which takes
    # seconds: the tests of this module share one store, each with its own runs.
    path = tmp_path_factory.mktemp("mlflow") / "mlflow.db"
    return f"sqlite:///{path}"


@pytest.fixture(scope="module")
def client(tracking_uri: str) -> MlflowClient:
    return MlflowClient(tracking_uri=tracking_uri)


def history(
    client: MlflowClient, run_id: str, key: str
) -> list[tuple[float, int, int]]:
    return [
        (metric.value, metric.step, metric.timestamp)
        for metric in client.get_metric_history(run_id, key)
    ]


class Buffer:
    def __init__(self) -> None:
        self.write_count = 0

    def stats(self) -> dict[str, float]:
        return {"write_count": self.write_count, "size": min(self.write_count, 100)}


def test_each_metric_is_stored_at_its_step_with_the_poll_time_in_milliseconds(
    tracking_uri: str, client: MlflowClient
) -> None:
    with MLflowLogger(experiment="history", tracking_uri=tracking_uri) as sink:
        sink.log_metrics(
            {"collector/frames": 96.0, "collector/workers": 4.0},
            step=96,
            timestamp=1000.25,
        )
        sink.log_metrics(
            {"collector/frames": 192.0, "collector/workers": 3.0},
            step=192,
            timestamp=1001.5,
        )

    assert history(client, sink.run_id, "collector/frames") == [
        (96.0, 96, 1000250),
        (192.0, 192, 1001500),
    ]
    assert history(client, sink.run_id, "collector/workers") == [
        (4.0, 96, 1000250),
        (3.0, 192, 1001500),
    ]


def test_a_payload_without_a_step_is_stored_at_step_zero(
    tracking_uri: str, client: MlflowClient
) -> None:
    with MLflowLogger(tracking_uri=tracking_uri) as sink:
        sink.log_metrics({"buffer/size": 7.0}, timestamp=2.0)
    assert history(client, sink.run_id, "buffer/size") == [(7.0, 0, 2000)]


def test_a_monitor_polling_a_buffer_logs_its_counters_and_rates(
    tracking_uri: str, client: MlflowClient
) -> None:
    buffer = Buffer()
    with MLflowLogger(experiment="monitored", tracking_uri=tracking_uri) as sink:
        monitor = LoggerMonitor(sink, background=False)
        monitor.watch(buffer, step=None)
        monitor.step()
        buffer.write_count = 40
        monitor.step()

    metrics = client.get_run(sink.run_id).data.metrics
    assert metrics["buffer/write_count"] == 40.0
    assert metrics["buffer/size"] == 40.0
    assert metrics["buffer/writes_per_second"] > 0
    assert [
        value for value, _, _ in history(client, sink.run_id, "buffer/write_count")
    ] == [0.0, 40.0]


def test_a_payload_beyond_mlflows_batch_limit_is_stored_whole(
    tracking_uri: str, client: MlflowClient
) -> None:
    payload = {f"workers/worker_{index}_frames": float(index) for index in range(1500)}
    with MLflowLogger(tracking_uri=tracking_uri) as sink:
        sink.log_metrics(payload, step=1, timestamp=3.0)
    assert client.get_run(sink.run_id).data.metrics == payload


def test_a_new_run_is_started_in_the_named_experiment_and_finished_on_close(
    tracking_uri: str, client: MlflowClient
) -> None:
    first = MLflowLogger(experiment="lifecycle", tracking_uri=tracking_uri)
    second = MLflowLogger(experiment="lifecycle", tracking_uri=tracking_uri)
    assert client.get_run(first.run_id).info.status == "RUNNING"
    first.close()
    second.close()
    experiment = client.get_experiment_by_name("lifecycle")
    assert experiment is not None
    for sink in (first, second):
        run = client.get_run(sink.run_id)
        assert run.info.experiment_id == experiment.experiment_id
        assert run.info.status == "FINISHED"
    assert first.run_id != second.run_id


def test_a_given_run_is_logged_into_and_left_running(
    tracking_uri: str, client: MlflowClient
) -> None:
    run_id = client.create_run("0").info.run_id
    with MLflowLogger(run_id=run_id, tracking_uri=tracking_uri) as sink:
        sink.log_metrics({"learner/loss": 0.5}, step=1, timestamp=4.0)
    assert repr(sink) == f"MLflowLogger(run_id={run_id!r})"
    assert history(client, run_id, "learner/loss") == [(0.5, 1, 4000)]
    assert client.get_run(run_id).info.status == "RUNNING"


def test_the_active_run_is_logged_into_when_no_run_is_named(
    tracking_uri: str, client: MlflowClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking_uri)
    with mlflow.start_run() as active:
        with MLflowLogger() as sink:
            sink.log_metrics({"env/fps": 30.0}, timestamp=5.0)
        assert sink.run_id == active.info.run_id
        assert sink.tracking_uri == tracking_uri
        assert client.get_run(active.info.run_id).info.status == "RUNNING"
    assert history(client, active.info.run_id, "env/fps") == [(30.0, 0, 5000)]


def test_an_unknown_run_id_is_refused_at_construction(tracking_uri: str) -> None:
    with pytest.raises(ValueError, match="MLflow has no run 'f00' at sqlite:///"):
        MLflowLogger(run_id="f00", tracking_uri=tracking_uri)


@pytest.mark.parametrize(
    ("uri", "meant"),
    [("sqllite:///mlflow.db", " (did you mean 'sqlite'?)"), ("zzz:store", "")],
)
def test_a_tracking_uri_of_a_scheme_mlflow_does_not_know_is_refused_saying_so(
    uri: str, meant: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    scheme = uri.partition(":")[0]
    said = f"MLflow knows no scheme {scheme!r}{meant}; give one such as 'sqlite:///"
    with pytest.raises(ValueError, match=re.escape(said)):
        MLflowLogger(experiment="pipeline", tracking_uri=uri)
    with pytest.raises(SinkSpecError, match=re.escape(said)):
        open_sink(f"mlflow:{uri}")
    assert list(tmp_path.iterdir()) == []


def test_mlflows_tracking_uri_variable_of_an_unknown_scheme_is_named_as_such(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "SQLLITE:///mlflow.db")
    said = "MLFLOW_TRACKING_URI='SQLLITE:///mlflow.db': MLflow knows no scheme"
    with pytest.raises(ValueError, match=re.escape(said) + ".*did you mean 'sqlite'"):
        MLflowLogger(experiment="pipeline")


def test_a_run_id_together_with_an_experiment_is_refused(tracking_uri: str) -> None:
    with pytest.raises(
        ValueError, match="give run_id to log into that run, or experiment"
    ):
        MLflowLogger(run_id="f00", experiment="other", tracking_uri=tracking_uri)


def test_names_mlflow_would_reject_are_stored_under_valid_names(
    tracking_uri: str, client: MlflowClient
) -> None:
    with MLflowLogger(tracking_uri=tracking_uri) as sink:
        sink.log_metrics(
            {"env/return:mean": 1.0, "env//frames": 2.0, "env/./x": 3.0, "env/..": 4.0},
            step=1,
        )
    assert client.get_run(sink.run_id).data.metrics == {
        "env/return_mean": 1.0,
        "env/_/frames": 2.0,
        "env/_/x": 3.0,
        "env/__": 4.0,
    }


def test_a_failing_tracking_store_warns_through_the_monitor(
    tracking_uri: str,
    client: MlflowClient,
    warning_messages: Callable[..., list[str]],
) -> None:
    sink = MLflowLogger(tracking_uri=tracking_uri)
    # A deleted run is refused by the store itself: every later write fails.
    client.delete_run(sink.run_id)
    monitor = LoggerMonitor(sink, background=False, on_error="warn")
    monitor.watch(Buffer())
    assert monitor.step() == {}
    assert any("MLflowLogger" in message for message in warning_messages())


def test_a_failing_tracking_store_raises_through_the_monitor_when_asked(
    tracking_uri: str, client: MlflowClient
) -> None:
    sink = MLflowLogger(tracking_uri=tracking_uri)
    client.delete_run(sink.run_id)
    monitor = LoggerMonitor(sink, background=False, on_error="raise")
    monitor.watch(Buffer())
    with pytest.raises(MlflowException):
        monitor.step()


def test_closing_twice_is_allowed_and_logging_after_close_raises(
    tracking_uri: str,
) -> None:
    sink = MLflowLogger(tracking_uri=tracking_uri)
    sink.close()
    sink.close()
    with pytest.raises(RuntimeError, match="is closed"):
        sink.log_metrics({"buffer/size": 1.0})
    with pytest.raises(RuntimeError, match="is closed"):
        sink.flush()


def test_a_malformed_run_id_is_refused_with_mlflows_own_error(
    tracking_uri: str,
) -> None:
    with pytest.raises(MlflowException, match="Invalid value"):
        MLflowLogger(run_id="../x", tracking_uri=tracking_uri)


def test_an_experiment_name_mlflow_refuses_raises_mlflows_own_error(
    tracking_uri: str,
) -> None:
    with pytest.raises(MlflowException, match="Invalid experiment name"):
        MLflowLogger(experiment="", tracking_uri=tracking_uri)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_a_tracking_server_that_refuses_connections_is_said_at_once() -> None:
    # MLflow itself retries such a server for minutes before it fails.
    port = _free_port()
    started = time.monotonic()
    with pytest.raises(ConnectionError, match="no MLflow tracking server answers at"):
        MLflowLogger(tracking_uri=f"http://127.0.0.1:{port}")
    with pytest.raises(
        SinkSpecError, match=f"mlflow server --host 127.0.0.1 --port {port}"
    ):
        open_sink(f"mlflow:http://127.0.0.1:{port}")
    assert time.monotonic() - started < 30


def test_a_tracking_server_host_that_is_not_known_is_said_at_once() -> None:
    with pytest.raises(
        ConnectionError, match=r"its host 'no-such-host\.invalid' is not known"
    ):
        MLflowLogger(tracking_uri="http://no-such-host.invalid:5000")


def test_a_server_that_accepts_connections_is_left_to_mlflow() -> None:
    class NotMLflow(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_error(404)

        do_GET = do_POST

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotMLflow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(MlflowException, match="404"):
            MLflowLogger(tracking_uri=f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
        server.server_close()


class TrackingServer:
    """A tracking server on 127.0.0.1 speaking the part of MLflow's REST API a logger given a run uses, whose ``log-batch`` answers 503 while ``away``.

    ``away_after`` requests taken, it is away until told otherwise.
    """

    def __init__(self) -> None:
        self.away = threading.Event()
        self.away_after: int | None = None
        self.refused = 0
        self.steps: list[int] = []
        self.stored: list[tuple[str, int]] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # runs/get
                run = {"info": {"run_id": "r1", "experiment_id": "0"}, "data": {}}
                self.answer(200, {"run": run})

            def do_POST(self) -> None:  # runs/log-batch
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if server.away_after is not None:
                    server.away_after -= 1
                    if server.away_after < 0:
                        server.away.set()
                        server.away_after = None
                if server.away.is_set():
                    server.refused += 1
                    self.answer(503, {"error_code": "TEMPORARILY_UNAVAILABLE"})
                    return
                server.steps += [int(metric["step"]) for metric in body["metrics"]]
                server.stored += [
                    (metric["key"], int(metric["step"])) for metric in body["metrics"]
                ]
                self.answer(200, {})

            def answer(self, status: int, document: object) -> None:
                data = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.uri = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


def test_a_tracking_server_away_for_a_while_gets_every_payload_once_it_is_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # MLflow's own tries would take minutes: none here, the monitor's queue retries.
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    server = TrackingServer()
    try:
        sink = MLflowLogger(run_id="r1", tracking_uri=server.uri)
        server.away.set()
        with pytest.raises(TransientSinkError, match="did not take 1 metric values"):
            sink.log_metrics({"c/frames": 1.0}, step=1)
        kept = InMemorySink()
        monitor = LoggerMonitor([sink, kept], poll_interval=0.02)
        buffer = Buffer()
        monitor.watch(buffer, name="buffer", step="write_count")
        with monitor:
            for step in range(1, 30):
                buffer.write_count = step
                time.sleep(0.02)
            server.away.clear()
            assert wait_until(lambda: 29 in server.steps)
        assert server.refused >= 2
        # Every payload of the outage, in order, each once.
        assert server.steps == [p.step for p in kept.payloads for _ in p.metrics]
        assert monitor.stats()["dropped"] == 0
    finally:
        server.close()


def test_a_batch_the_server_went_away_during_is_stored_whole_and_once_when_sent_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    server = TrackingServer()
    try:
        sink = MLflowLogger(run_id="r1", tracking_uri=server.uri)
        # More metric values than one log_batch request takes: two requests,
        # the server away from the second on.
        batch = [
            ({f"workers/frames_{index}": 1.0 for index in range(600)}, step, 1.5)
            for step in (1, 2)
        ]
        server.away_after = 1
        with pytest.raises(TransientSinkError, match="did not take 200 metric values"):
            sink.log_batch(batch)
        assert len(server.stored) == 1000
        server.away.clear()
        # What a monitor's queue does: the same payloads again, then newer ones.
        sink.log_batch([*batch, ({"workers/frames_0": 2.0}, 3, 2.5)])
        assert sorted(server.stored) == sorted(
            [(name, step) for metrics, step, _ in batch for name in metrics]
            + [("workers/frames_0", 3)]
        )
    finally:
        server.close()


def test_a_name_longer_than_mlflow_takes_is_stored_shortened_beside_the_others(
    tracking_uri: str, client: MlflowClient
) -> None:
    long_names = [f"env/{'x' * 300}_{index}_per_second" for index in (1, 2)]
    with MLflowLogger(tracking_uri=tracking_uri) as sink:
        sink.log_metrics({long_names[0]: 1.0, long_names[1]: 2.0, "env/fps": 3.0})
    stored = client.get_run(sink.run_id).data.metrics
    assert stored["env/fps"] == 3.0
    shortened = sorted(name for name in stored if name != "env/fps")
    assert [len(name) for name in shortened] == [250, 250]
    assert all(name.startswith("env/xxx") for name in shortened)
    assert sorted(stored[name] for name in shortened) == [1.0, 2.0]
