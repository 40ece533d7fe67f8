"""OTLPExporter (SPEC 8): payloads pushed as OTLP/HTTP protobuf, decoded by a real receiver on 127.0.0.1.

The receiver is an HTTP server in this process that parses each request
body with opentelemetry-proto's ``ExportMetricsServiceRequest``, as a
collector does, and answers with an ``ExportMetricsServiceResponse``.
"""

from __future__ import annotations

import http.server
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from rlpulse import LoggerMonitor, open_sink

metrics_service_pb2 = pytest.importorskip(
    "opentelemetry.proto.collector.metrics.v1.metrics_service_pb2"
)
from opentelemetry.proto.metrics.v1 import metrics_pb2  # noqa: E402

from rlpulse.sinks.otlp import OTLPExporter  # noqa: E402
from test_reliability import wait_until  # noqa: E402

pytestmark = pytest.mark.timeout(60)


class Receiver:
    """An OTLP/HTTP metrics receiver on 127.0.0.1: the requests it decoded, and the status it answers with."""

    def __init__(self) -> None:
        self.requests: list[Any] = []
        self.paths: list[str] = []
        self.content_types: list[str] = []
        self.status = 200
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.paths.append(self.path)
                receiver.content_types.append(self.headers["Content-Type"])
                if receiver.status != 200:
                    self.send_response(receiver.status)
                    if 300 <= receiver.status < 400:
                        self.send_header("Location", "/elsewhere")
                    self.end_headers()
                    self.wfile.write(b"collector overloaded")
                    return
                receiver.requests.append(
                    metrics_service_pb2.ExportMetricsServiceRequest.FromString(body)
                )
                answer = metrics_service_pb2.ExportMetricsServiceResponse()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()
                self.wfile.write(answer.SerializeToString())

            def do_GET(self) -> None:  # a redirected POST would arrive as this
                receiver.paths.append(f"GET {self.path}")
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def points(self) -> list[tuple[str, str, str, float, int, int]]:
        """Every data point received: (metric, kind, watch, value, time ns, start ns)."""
        found = []
        for request in self.requests:
            for resource in request.resource_metrics:
                for scope in resource.scope_metrics:
                    for metric in scope.metrics:
                        kind = metric.WhichOneof("data")
                        for point in getattr(metric, kind).data_points:
                            watch = {
                                a.key: a.value.string_value for a in point.attributes
                            }
                            found.append(
                                (
                                    metric.name,
                                    kind,
                                    watch["watch"],
                                    point.as_double,
                                    point.time_unix_nano,
                                    point.start_time_unix_nano,
                                )
                            )
        return found

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    running = Receiver()
    yield running
    running.close()


def test_each_batch_is_one_request_of_gauges_and_monotonic_sums_with_the_polls_time(
    receiver: Receiver,
) -> None:
    with OTLPExporter(receiver.endpoint, service_name="learner-7") as exporter:
        exporter.log_batch(
            [
                ({"collector/frames": 100.0, "buffer/size": 5.0}, 1, 1700000000.25),
                (
                    {"collector/frames": 300.0, "collector/frames_per_second": 200.0},
                    2,
                    1700000001.25,
                ),
            ]
        )
    assert receiver.paths == ["/v1/metrics"]
    assert receiver.content_types == ["application/x-protobuf"]
    [request] = receiver.requests
    resource = request.resource_metrics[0]
    assert [(a.key, a.value.string_value) for a in resource.resource.attributes] == [
        ("service.name", "learner-7")
    ]
    assert resource.scope_metrics[0].scope.name == "rlpulse"
    frames = next(
        m for m in resource.scope_metrics[0].metrics if m.name == "rlpulse.frames"
    )
    assert frames.sum.is_monotonic
    assert (
        frames.sum.aggregation_temporality
        == metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE
    )
    points = receiver.points()
    assert [
        (name, kind, watch, value) for name, kind, watch, value, _, _ in points
    ] == [
        ("rlpulse.frames", "sum", "collector", 100.0),
        ("rlpulse.frames", "sum", "collector", 300.0),
        ("rlpulse.size", "gauge", "buffer", 5.0),
        ("rlpulse.frames_per_second", "gauge", "collector", 200.0),
    ]
    assert points[0][4] == 1_700_000_000_250_000_000
    assert points[1][4] == 1_700_000_001_250_000_000
    assert points[0][5] == points[1][5] == points[0][4]  # counted from its first point


def test_a_known_counter_is_a_sum_a_reset_starts_it_again_and_kinds_never_change(
    receiver: Receiver,
) -> None:
    with OTLPExporter(receiver.endpoint, prefix="") as exporter:
        exporter.log_metrics({"c/frames": 3.0, "c/episodes": 1.0}, timestamp=10.0)
        exporter.log_metrics(
            {"c/frames": 5.0, "c/episodes": 2.0, "c/episodes_per_second": 1.0},
            timestamp=11.0,
        )
        exporter.log_metrics({"c/frames": 1.0}, timestamp=12.0)  # the run restarted
    frames = [p for p in receiver.points() if p[0] == "frames"]
    assert [(kind, value) for _, kind, _, value, _, _ in frames] == [
        ("sum", 3.0),
        ("sum", 5.0),
        ("sum", 1.0),
    ]
    starts = [start for *_, start in frames]
    assert (
        starts[0] == starts[1] == 10_000_000_000
    )  # logged before the exporter existed
    assert starts[2] == 12_000_000_000
    # A counter of one's own is a gauge in every request, its rate beside it.
    episodes = [p[1] for p in receiver.points() if p[0] == "episodes"]
    assert episodes == ["gauge", "gauge"]


@pytest.mark.parametrize(
    ("metrics", "counted"),
    [({"c/frames": 1.0}, "1 point:"), ({"c/frames": 1.0, "c/size": 2.0}, "2 points:")],
)
def test_a_refusal_counts_the_points_refused(
    receiver: Receiver, metrics: dict[str, float], counted: str
) -> None:
    receiver.status = 400
    exporter = OTLPExporter(receiver.endpoint)
    with exporter, pytest.raises(OSError, match=f"refused {counted} HTTP 400"):
        exporter.log_metrics(metrics)


def test_a_redirect_is_a_refusal_not_a_batch_sent(receiver: Receiver) -> None:
    receiver.status = 301
    exporter = OTLPExporter(receiver.endpoint)
    with exporter, pytest.raises(OSError, match="HTTP 301"):
        exporter.log_metrics({"c/frames": 1.0})
    assert receiver.paths == ["/v1/metrics"]  # no GET followed


def test_a_monitor_pushes_its_watches_and_warns_once_while_the_receiver_refuses(
    receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    class Collector:
        frames = 0

        def stats(self) -> dict[str, float]:
            self.frames += 10
            return {"frames": self.frames}

    sink = open_sink(f"otlp:{receiver.endpoint}")
    monitor = LoggerMonitor(sink, poll_interval=0.02)
    monitor.watch(Collector(), name="collector")
    with caplog.at_level(logging.WARNING, logger="rlpulse"), monitor:
        assert wait_until(lambda: len(receiver.requests) >= 3)
        receiver.status = 503
        assert wait_until(lambda: monitor.stats()["errors"] >= 3)
        receiver.status = 200
        received = len(receiver.requests)
        assert wait_until(lambda: len(receiver.requests) > received)
    sink.close()
    warnings = [r.getMessage() for r in caplog.records if r.name == "rlpulse"]
    assert len(warnings) == 1
    assert "HTTP 503" in warnings[0]
    assert "collector overloaded" in warnings[0]
    frames = [
        value
        for name, _, _, value, _, _ in receiver.points()
        if name == "rlpulse.frames"
    ]
    assert frames == sorted(frames)
    assert frames[-1] >= frames[0] + 20


def test_an_endpoint_that_is_no_url_or_no_receiver_says_so() -> None:
    with pytest.raises(ValueError, match="base URL"):
        OTLPExporter("127.0.0.1:4318")
    with pytest.raises(ValueError, match="positive number"):
        OTLPExporter("http://127.0.0.1:4318", timeout=0)
    closed = http.server.HTTPServer(
        ("127.0.0.1", 0), http.server.BaseHTTPRequestHandler
    )
    port = closed.server_address[1]
    closed.server_close()
    exporter = OTLPExporter(f"http://127.0.0.1:{port}", timeout=5)
    with exporter, pytest.raises(OSError, match="cannot reach the OTLP receiver"):
        exporter.log_metrics({"c/frames": 1.0})


@pytest.mark.parametrize("hosted", [False, True], ids=["in-process", "sink-process"])
def test_a_monitor_exports_each_metric_as_the_kind_its_watch_gave_it(
    receiver: Receiver, hosted: bool
) -> None:
    # episodes is no known counter: its watch rates it, so it is a sum; a
    # tally's observation count is a sum too, its mean a gauge; the rate
    # a gauge. Through a SinkProcess the kinds cross to the child.
    from rlpulse import SinkProcess, Tally

    tally = Tally()
    tally.inc("episodes", 3)
    tally.observe("loss", 0.5)
    spec = f"otlp:{receiver.endpoint}"
    sink = SinkProcess(spec) if hosted else open_sink(spec)
    with sink:
        monitor = LoggerMonitor(sink, background=False)
        monitor.watch(tally, name="learner", rate_keys=("episodes",))
        monitor.step()
        tally.inc("episodes", 2)
        monitor.step()
        monitor.stop()
        if hosted:
            sink.flush(timeout=30)
    kinds = {name: kind for name, kind, *_ in receiver.points()}
    assert kinds["rlpulse.episodes"] == "sum"
    assert kinds["rlpulse.loss_count"] == "sum"
    assert kinds["rlpulse.loss_mean"] == "gauge"
    assert kinds["rlpulse.episodes_per_second"] == "gauge"
