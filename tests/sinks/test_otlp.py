"""OTLPExporter (SPEC 8): payloads pushed as OTLP/HTTP protobuf, decoded by a real receiver on 127.0.0.1.

The receiver is an HTTP server in this process that parses each request
body with opentelemetry-proto's ``ExportMetricsServiceRequest``, as a
collector does, and answers with an ``ExportMetricsServiceResponse`` — or
with the answers a test scripts (a 503 with ``Retry-After``), or not at all
(a receiver that hangs).
"""

from __future__ import annotations

import http.server
import logging
import math
import re
import socket
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from rlpulse import LoggerMonitor, Tally, TransientSinkError, open_sink
from rlpulse.distributions import Histogram
from rlpulse.naming import Kind, Payload
from rlpulse.sources import SharedCounters

metrics_service_pb2 = pytest.importorskip(
    "opentelemetry.proto.collector.metrics.v1.metrics_service_pb2"
)
from opentelemetry.proto.metrics.v1 import metrics_pb2  # noqa: E402

from rlpulse.sinks.otlp import OTLPExporter  # noqa: E402
from tests.otlp_receiver import Receiver, frames_received  # noqa: E402
from tests.support import Source, not_delivered, wait_until  # noqa: E402

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def no_otel_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenTelemetry's variables of the machine running the tests are not the tests'."""
    import os

    for name in list(os.environ):
        if name.startswith("OTEL_EXPORTER_OTLP_") or name in (
            "OTEL_SERVICE_NAME",
            "OTEL_RESOURCE_ATTRIBUTES",
        ):
            monkeypatch.delenv(name)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    running = Receiver()
    yield running
    running.close()


def logging_in_background(
    exporter: OTLPExporter,
) -> tuple[threading.Thread, list[BaseException]]:
    """A thread logging one payload to ``exporter``, and the errors it met."""
    failures: list[BaseException] = []

    def log() -> None:
        try:
            exporter.log_metrics({"c/frames": 1.0})
        except OSError as error:
            failures.append(error)

    logging_thread = threading.Thread(target=log, daemon=True)
    logging_thread.start()
    return logging_thread, failures


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
    attributes = {a.key: a.value.string_value for a in resource.resource.attributes}
    assert attributes.keys() == {"service.name", "host.name", "service.instance.id"}
    assert attributes["service.name"] == "learner-7"
    assert attributes["host.name"] == socket.gethostname()
    assert uuid.UUID(attributes["service.instance.id"])
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
    # The reset counts from the last point before it, which comes before it.
    assert starts[2] == 11_000_000_000
    # A counter of one's own is a gauge in every request, its rate beside it.
    episodes = [p[1] for p in receiver.points() if p[0] == "episodes"]
    assert episodes == ["gauge", "gauge"]


def test_a_sum_of_observations_is_an_up_down_sum_whose_fall_is_no_reset(
    receiver: Receiver,
) -> None:
    tally = Tally()
    with OTLPExporter(receiver.endpoint, prefix="") as exporter:
        monitor = LoggerMonitor(exporter, background=False)
        monitor.watch(tally, name="episodes")
        for episode_return in (10.0, 20.0, -50.0, -60.0, 5.0):
            tally.observe("return", episode_return)
            monitor.step()
        monitor.stop()

    sums = {m.name: m.sum for m in receiver.metrics() if m.WhichOneof("data") == "sum"}
    assert not sums["return_sum"].is_monotonic
    assert sums["return_count"].is_monotonic
    points = [p for p in receiver.points() if p[0] == "return_sum"]
    values = [value for *_, value, _, _ in points]
    assert values[:5] == [10.0, 30.0, -20.0, -80.0, -75.0]  # then stop()'s final one
    assert len({start for *_, start in points}) == 1  # one series, never restarted


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

    # A 503 is retried for as long as timeout allows: here, not once.
    sink = OTLPExporter(receiver.endpoint, timeout=0.3)
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
    exporter = OTLPExporter(f"http://127.0.0.1:{port}", timeout=1.5)
    with exporter, pytest.raises(OSError, match="cannot reach the OTLP receiver"):
        exporter.log_metrics({"c/frames": 1.0})


def test_a_web_server_that_is_no_receiver_is_refused_in_one_line_saying_to_check_the_endpoint() -> (
    None
):
    # Python's own web server answers a POST with 501 and an HTML page.
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    exporter = OTLPExporter(f"http://127.0.0.1:{server.server_address[1]}")
    try:
        with exporter, pytest.raises(OSError, match="HTTP 501") as refused:
            exporter.log_metrics({"c/frames": 1.0})
    finally:
        server.shutdown()
        server.server_close()

    message = str(refused.value)
    assert "\n" not in message
    assert "refused 1 point: HTTP 501 Unsupported method ('POST'): <!DOCTYPE" in message
    assert "is the endpoint an OTLP/HTTP receiver's" in message


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
    # The observations of loss are a distribution: a histogram of its own.
    [loss] = receiver.histogram_points("rlpulse.loss")
    assert (loss.count, loss.sum, loss.min, loss.max) == (1, 0.5, 0.5, 0.5)


def test_distributions_are_delta_exponential_histograms_whose_quantiles_match_numpy(
    receiver: Receiver,
) -> None:
    numpy = pytest.importorskip("numpy")
    rng = numpy.random.default_rng(7)
    intervals = [
        numpy.concatenate(
            [
                rng.lognormal(-3.0, 1.5, 5000),
                -rng.lognormal(0.0, 1.0, 300),
                numpy.zeros(50),
            ]
        ),
        rng.lognormal(2.0, 0.5, 2000),
    ]
    before = time.time_ns()
    with OTLPExporter(receiver.endpoint) as exporter:
        after = time.time_ns()
        for step, values in enumerate(intervals):
            histogram = Histogram()
            for value in values:
                histogram.add(float(value))
            exporter.log_payloads(
                [
                    Payload(
                        {"learner/loss_count": float(len(values))},
                        step,
                        time.time(),
                        {"learner/loss_count": Kind.COUNTER},
                        {"learner/loss": histogram},
                    )
                ]
            )
    [loss, _] = [m for m in receiver.metrics() if m.name == "rlpulse.loss"]
    assert (
        loss.exponential_histogram.aggregation_temporality
        == metrics_pb2.AGGREGATION_TEMPORALITY_DELTA
    )
    first, second = receiver.histogram_points("rlpulse.loss")
    # Each point is one interval: the first from the exporter's start,
    # the next from where the first ended.
    assert before <= first.start_time_unix_nano <= after <= first.time_unix_nano
    assert second.start_time_unix_nano == first.time_unix_nano
    for point, values in zip((first, second), intervals, strict=True):
        assert [(a.key, a.value.string_value) for a in point.attributes] == [
            ("watch", "learner")
        ]
        assert point.scale == 6
        assert point.count == len(values)
        assert point.zero_count == numpy.count_nonzero(values == 0)
        assert point.sum == pytest.approx(values.sum())
        assert (point.min, point.max) == (values.min(), values.max())
        for q in (0.01, 0.06, 0.1, 0.5, 0.9, 0.99, 0.999):
            expected = numpy.quantile(values, q, method="inverted_cdf")
            assert abs(quantile_of(point, q) - expected) <= 0.0055 * abs(expected)


def quantile_of(point: Any, q: float) -> float:
    """Quantile ``q`` of an ExponentialHistogramDataPoint, read from its buckets alone (nearest rank)."""
    base = 2.0**2.0**-point.scale

    def middle(index: int) -> float:  # within the relative error of the bucket
        lower, upper = base**index, base ** (index + 1)
        return 2 * lower * upper / (lower + upper)

    negative, positive = point.negative, point.positive
    ascending = [
        (-middle(negative.offset + k), count)
        for k, count in reversed(list(enumerate(negative.bucket_counts)))
    ]
    ascending.append((0.0, point.zero_count))
    ascending += [
        (middle(positive.offset + k), count)
        for k, count in enumerate(positive.bucket_counts)
    ]
    rank = max(math.ceil(round(q * point.count, 9)) - 1, 0)
    seen = 0
    for value, count in ascending:
        seen += count
        if seen > rank:
            return value
    raise AssertionError("fewer observations in the buckets than counted")


def test_names_are_made_valid_instrument_names_each_metric_its_own(
    receiver: Receiver,
) -> None:
    long_name = "x" * 300
    with OTLPExporter(receiver.endpoint) as exporter:
        exporter.log_metrics(
            {
                "c/episode return": 1.0,
                "c/episode_return": 2.0,
                "c/überlauf": 3.0,
                f"c/{long_name}": 4.0,
            },
            timestamp=1.0,
        )
        exporter.log_metrics({"c/episode return": 5.0}, timestamp=2.0)
    values: dict[str, list[float]] = {}
    for name, _, _, value, _, _ in receiver.points():
        values.setdefault(name, []).append(value)
    assert values == {
        "rlpulse.episode_return": [1.0, 5.0],
        "rlpulse.episode_return_2": [2.0],
        "rlpulse.uberlauf": [3.0],
        ("rlpulse." + long_name)[:255]: [4.0],
    }
    valid = re.compile(r"[A-Za-z][A-Za-z0-9_./-]{0,254}")
    assert all(valid.fullmatch(name) for name in values)


def test_an_invalid_prefix_is_refused() -> None:
    with pytest.raises(ValueError, match="instrument name"):
        OTLPExporter("http://127.0.0.1:4318", prefix="2nd run")


def test_an_endpoint_ending_in_v1_metrics_is_posted_to_as_given(
    receiver: Receiver,
) -> None:
    with OTLPExporter(f"{receiver.endpoint}/v1/metrics") as exporter:
        exporter.log_metrics({"c/frames": 1.0})
    assert receiver.paths == ["/v1/metrics"]


def test_a_general_endpoint_variable_ending_in_v1_metrics_is_posted_to_as_given(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"{receiver.endpoint}/v1/metrics")
    with OTLPExporter() as exporter:
        exporter.log_metrics({"c/frames": 1.0})
    assert receiver.paths == ["/v1/metrics"]


def test_opentelemetrys_variables_say_where_and_how_batches_are_posted(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"{receiver.endpoint}/otlp/")
    monkeypatch.setenv(
        "OTEL_EXPORTER_OTLP_HEADERS", "api-key=abc%3D%3D, team = rl%20,%20x-run=7"
    )
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2500")
    with OTLPExporter() as exporter:
        exporter.log_metrics({"c/frames": 1.0})
    assert exporter.timeout == 2.5  # milliseconds, as OpenTelemetry's spec says
    assert receiver.paths == ["/otlp/v1/metrics"]
    [headers] = receiver.headers
    # Each part decoded, then stripped, as OpenTelemetry reads the variable.
    assert (headers["api-key"], headers["team"], headers["x-run"]) == (
        "abc==",
        "rl",
        "7",
    )
    assert headers["Content-Encoding"] == "gzip"
    assert [point[:4] for point in receiver.points()] == [
        ("rlpulse.frames", "sum", "c", 1.0)
    ]


def test_the_resource_names_the_service_and_deployment_of_opentelemetrys_variables_and_each_exporter_apart(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two nodes exporting as one resource would mix their cumulative counters.
    monkeypatch.setenv(
        "OTEL_RESOURCE_ATTRIBUTES",
        "service.name=ignored,deployment.environment=prod,team=r%20l",
    )
    monkeypatch.setenv("OTEL_SERVICE_NAME", "learner")
    for _ in range(2):
        with OTLPExporter(receiver.endpoint) as exporter:
            exporter.log_metrics({"c/frames": 1.0})
    resources = [
        {
            a.key: a.value.string_value
            for a in request.resource_metrics[0].resource.attributes
        }
        for request in receiver.requests
    ]
    assert [
        (r["service.name"], r["deployment.environment"], r["team"]) for r in resources
    ] == [("learner", "prod", "r l")] * 2
    assert resources[0]["service.instance.id"] != resources[1]["service.instance.id"]
    monkeypatch.setenv(
        "OTEL_RESOURCE_ATTRIBUTES", "host.name=node-7,service.instance.id=x"
    )
    with OTLPExporter(receiver.endpoint, service_name="actor") as exporter:
        assert (
            exporter.resource["service.name"],
            exporter.resource["host.name"],
            exporter.resource["service.instance.id"],
        ) == ("actor", "node-7", "x")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "team")
    with pytest.raises(ValueError, match="OTEL_RESOURCE_ATTRIBUTES='team'"):
        OTLPExporter(receiver.endpoint)


def test_metrics_variables_come_before_general_ones_and_arguments_before_both(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv(
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", f"{receiver.endpoint}/ingest/metrics"
    )
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "general=1")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_HEADERS", "metrics=1")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1000")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "4000")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    with OTLPExporter() as exporter:  # the metrics endpoint is used as given
        exporter.log_metrics({"c/frames": 1.0})
    assert exporter.timeout == 4.0
    with OTLPExporter(
        receiver.endpoint, headers={"given": "1"}, timeout=7, compression="none"
    ) as given:
        given.log_metrics({"c/frames": 2.0})
    assert given.timeout == 7.0
    assert receiver.paths == ["/ingest/metrics", "/v1/metrics"]
    from_variables, from_arguments = receiver.headers
    assert "metrics" in from_variables
    assert "general" not in from_variables
    assert from_variables["Content-Encoding"] == "gzip"
    assert "given" in from_arguments
    assert "metrics" not in from_arguments
    assert "Content-Encoding" not in from_arguments


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "ten", "milliseconds"),
        ("OTEL_EXPORTER_OTLP_METRICS_HEADERS", "token", "key1=value1"),
        ("OTEL_EXPORTER_OTLP_COMPRESSION", "zstd", "'gzip' or 'none'"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318", "http or https"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "'http/protobuf'"),
        ("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "http/json", "'http/protobuf'"),
    ],
)
def test_a_variable_that_makes_no_sense_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, says: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError, match=re.escape(says)) as refused:
        OTLPExporter()
    assert variable in str(refused.value)


@pytest.mark.parametrize("value", ["2.5", "10", "99"])
def test_a_timeout_variable_that_reads_as_seconds_is_warned_about(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", value)
    with pytest.warns(UserWarning, match="counts it in milliseconds") as warned:
        exporter = OTLPExporter("http://127.0.0.1:9")
    exporter.close()
    assert exporter.timeout == float(value) / 1000  # as OpenTelemetry reads it
    assert f"for {value} s write {float(value) * 1000:g}" in str(warned[0].message)
    assert warned[0].filename == __file__  # said where the exporter is made

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2500")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        OTLPExporter("http://127.0.0.1:9").close()


@pytest.mark.parametrize(
    ("status", "headers", "earliest", "latest"),
    [
        (503, {"Retry-After": "1"}, 0.95, 1.6),  # as the receiver asks
        (429, {"Retry-After": "0"}, 0.75, 1.6),  # the back-off, not at once
        (503, {"Retry-After": "Thu, 01 Jan 1970 00:00:00 GMT"}, 0.75, 1.6),
        (429, {}, 0.75, 1.6),  # the first back-off: 1 s, give or take 20 %
        (502, {}, 0.75, 1.6),
        (504, {}, 0.75, 1.6),
    ],
)
def test_a_retryable_answer_is_tried_again_after_a_wait(
    receiver: Receiver,
    status: int,
    headers: dict[str, str],
    earliest: float,
    latest: float,
) -> None:
    receiver.answers = [(status, headers)]
    with OTLPExporter(receiver.endpoint) as exporter:
        exporter.log_metrics({"c/frames": 1.0})
    assert len(receiver.arrivals) == 2
    assert earliest <= receiver.arrivals[1] - receiver.arrivals[0] <= latest
    assert [point[:4] for point in receiver.points()] == [
        ("rlpulse.frames", "sum", "c", 1.0)
    ]


def test_the_protocol_of_the_environment_binds_only_its_own_endpoint(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Set for every exporter of a process (traces over gRPC, say), it does
    # not stop an exporter given its endpoint.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    with OTLPExporter(receiver.endpoint) as exporter:
        exporter.log_metrics({"c/frames": 1.0})
    assert [point[:4] for point in receiver.points()] == [
        ("rlpulse.frames", "sum", "c", 1.0)
    ]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    assert OTLPExporter().url == f"{receiver.endpoint}/v1/metrics"


def test_a_batch_sent_again_after_a_transient_failure_counts_from_where_it_did(
    receiver: Receiver,
) -> None:
    # Given up at once (the receiver asks for more than the timeout), the
    # batch is handed over again, as the monitor's queue does: its counter
    # has not gone down, whatever its points were when first tried.
    receiver.answers = [(503, {"Retry-After": "5"})]
    created = time.time()
    exporter = OTLPExporter(receiver.endpoint, prefix="", timeout=1)
    payloads = [
        Payload(
            {"c/frames": frames}, None, created + 1 + at, {"c/frames": Kind.COUNTER}
        )
        for at, frames in enumerate((3.0, 5.0, 8.0))
    ]
    with exporter:
        with pytest.raises(TransientSinkError):
            exporter.log_payloads(payloads[:2])
        exporter.log_payloads(payloads[:2])
        exporter.log_payloads(payloads[2:])
    frames = [p for p in receiver.points() if p[0] == "frames"]
    assert [value for _, _, _, value, _, _ in frames] == [3.0, 5.0, 8.0]
    # Counted from the exporter's creation, before the first point.
    starts = {start for *_, start in frames}
    assert len(starts) == 1
    assert starts.pop() < frames[0][4]


def test_a_400_is_final_and_not_retried(receiver: Receiver) -> None:
    receiver.answers = [(400, {"Retry-After": "1"})]
    started = time.monotonic()
    refused = r"HTTP 400 .*\(1 try in .*; not retried\)"
    with (
        OTLPExporter(receiver.endpoint) as exporter,
        pytest.raises(OSError, match=refused),
    ):
        exporter.log_metrics({"c/frames": 1.0})
    assert len(receiver.arrivals) == 1
    assert time.monotonic() - started < 0.9


def test_a_receiver_that_keeps_failing_is_given_up_within_timeout(
    receiver: Receiver,
) -> None:
    receiver.status = 503
    started = time.monotonic()
    with (
        OTLPExporter(receiver.endpoint, timeout=2.5) as exporter,
        pytest.raises(OSError, match=r"HTTP 503 .*gave up after [23] tries"),
    ):
        exporter.log_metrics({"c/frames": 1.0})
    assert time.monotonic() - started < 2.6
    assert len(receiver.arrivals) in (2, 3)


def test_a_retry_after_beyond_the_timeout_gives_the_batch_up_at_once(
    receiver: Receiver,
) -> None:
    receiver.answers = [(429, {"Retry-After": "30"})]
    started = time.monotonic()
    with (
        OTLPExporter(receiver.endpoint, timeout=5) as exporter,
        pytest.raises(OSError, match=r"30\.0 s later, as the receiver asked"),
    ):
        exporter.log_metrics({"c/frames": 1.0})
    assert time.monotonic() - started < 1.0


def test_a_receiver_that_refuses_connections_gets_the_batch_once_it_is_up() -> None:
    with socket.socket() as reserved:
        reserved.bind(("127.0.0.1", 0))
        port = reserved.getsockname()[1]
    late: list[Receiver] = []
    starting = threading.Timer(0.5, lambda: late.append(Receiver(port)))
    starting.start()
    try:
        with OTLPExporter(f"http://127.0.0.1:{port}") as exporter:
            exporter.log_metrics({"c/frames": 1.0})
        starting.join()
        assert [point[:4] for point in late[0].points()] == [
            ("rlpulse.frames", "sum", "c", 1.0)
        ]
    finally:
        starting.join()
        for receiver in late:
            receiver.close()


def test_a_receiver_that_takes_the_request_and_never_answers_is_said_to_be_silent(
    receiver: Receiver,
) -> None:
    # It was reached: "cannot reach ... is it running?" sent people to the
    # wrong place.
    receiver.hang = True
    with (
        OTLPExporter(receiver.endpoint, timeout=0.5, close_timeout=0.1) as exporter,
        pytest.raises(TransientSinkError) as raised,
    ):
        exporter.log_metrics({"c/frames": 1.0})
    message = str(raised.value)
    assert message.startswith(
        f"no answer from the OTLP receiver at {exporter.url} (1 point not delivered)"
    )
    assert "is it overloaded or hung?" in message
    assert "cannot reach" not in message


def test_closing_abandons_a_request_in_flight_after_close_timeout(
    receiver: Receiver,
) -> None:
    receiver.hang = True
    exporter = OTLPExporter(receiver.endpoint, timeout=60, close_timeout=0.5)
    logging_thread, failures = logging_in_background(exporter)
    assert wait_until(lambda: len(receiver.arrivals) == 1)
    started = time.monotonic()
    exporter.close()
    assert 0.4 <= time.monotonic() - started < 2.0
    logging_thread.join(5)
    [failure] = failures
    assert "abandoned the request in flight" in str(failure)
    assert "1 point not delivered" in str(failure)


def test_leaving_the_documented_with_block_takes_no_longer_than_its_timeouts(
    receiver: Receiver,
) -> None:
    class Collector:
        frames = 0

        def stats(self) -> dict[str, float]:
            self.frames += 10
            return {"frames": self.frames}

    receiver.hang = True
    with (
        OTLPExporter(receiver.endpoint, timeout=60, close_timeout=0.5) as exporter,
        LoggerMonitor(exporter, poll_interval=0.05, stop_timeout=1.0) as monitor,
    ):
        monitor.watch(Collector(), name="collector")
        assert wait_until(lambda: len(receiver.arrivals) >= 1)
        leaving = time.monotonic()
    assert time.monotonic() - leaving < 1.0 + 0.5 + 1.0


def test_closing_retries_nothing(receiver: Receiver) -> None:
    receiver.status = 503
    exporter = OTLPExporter(receiver.endpoint, timeout=30)
    logging_thread, failures = logging_in_background(exporter)
    assert wait_until(lambda: len(receiver.arrivals) == 1)
    time.sleep(0.1)  # the answer came: the batch waits for its next try
    started = time.monotonic()
    exporter.close()
    assert time.monotonic() - started < 0.5
    logging_thread.join(5)
    [failure] = failures
    assert "HTTP 503" in str(failure)
    assert "not retried: the exporter is closing" in str(failure)
    assert len(receiver.arrivals) == 1


def test_each_metric_carries_the_unit_its_name_says(receiver: Receiver) -> None:
    histogram = Histogram()
    histogram.add(0.25)
    with OTLPExporter(receiver.endpoint) as exporter:
        exporter.log_payloads(
            [
                Payload(
                    {
                        "learner/update_s_count": 1.0,
                        "system/rss_bytes": 2e9,
                        "collector/frames_per_second": 900.0,
                        "collector/frames": 9000.0,
                        "buffer/utilization": 0.25,
                    },
                    None,
                    time.time(),
                    {
                        "learner/update_s_count": Kind.COUNTER,
                        "collector/frames": Kind.COUNTER,
                    },
                    {"learner/update_s": histogram},
                )
            ]
        )
    units = {metric.name: metric.unit for metric in receiver.metrics()}
    assert units == {
        "rlpulse.update_s_count": "",  # a count of observations
        "rlpulse.rss_bytes": "By",
        "rlpulse.frames_per_second": "1/s",
        "rlpulse.frames": "",
        "rlpulse.utilization": "1",
        "rlpulse.update_s": "s",
    }


def test_a_receiver_down_for_a_while_gets_every_payload_of_the_outage_in_order_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from rlpulse.testing import InMemorySink

    first = Receiver()
    port = first.server.server_address[1]
    # The exporter gives a batch up quickly: its monitor's queue keeps it.
    exporter = OTLPExporter(first.endpoint, timeout=0.3)
    kept = InMemorySink()
    monitor = LoggerMonitor([exporter, kept], poll_interval=0.02)
    monitor.watch(Source(), name="collector")
    receivers = [first]
    try:
        with caplog.at_level(logging.WARNING, logger="rlpulse"), monitor:
            assert wait_until(lambda: len(frames_received(first)) >= 3)
            first.close()  # down: connections refused
            time.sleep(2.5)
            assert monitor.stats()["errors"] >= 1
            receivers.append(Receiver(port))  # up again, at the same address
            assert wait_until(
                lambda: len(frames_received(*receivers)) >= len(kept.payloads) > 100
            )
        stats = monitor.stats()
    finally:
        exporter.close()
        for receiver in receivers:
            receiver.close()
    # Every payload, the outage's included, in order, none twice.
    assert frames_received(*receivers) == kept.values("collector/frames")
    assert stats["dropped"] == 0
    warnings = [r.getMessage() for r in caplog.records if r.name == "rlpulse"]
    assert len(warnings) == 1
    assert "cannot reach the OTLP receiver" in warnings[0]
    assert "tried again" in warnings[0]


def test_a_receiver_answering_503_with_retry_after_gets_the_batch_when_it_asked(
    receiver: Receiver,
) -> None:
    from rlpulse.testing import InMemorySink

    # Beyond the exporter's own timeout: the monitor's queue waits it out.
    receiver.answers = [(503, {"Retry-After": "2"})]
    exporter = OTLPExporter(receiver.endpoint, timeout=1)
    kept = InMemorySink()
    monitor = LoggerMonitor([exporter, kept], poll_interval=0.05)
    monitor.watch(Source(), name="collector")
    with exporter, monitor:
        assert wait_until(lambda: len(receiver.arrivals) >= 2)
        assert wait_until(lambda: len(frames_received(receiver)) >= 5)
    assert 1.9 <= receiver.arrivals[1] - receiver.arrivals[0] <= 2.9
    assert frames_received(receiver) == kept.values("collector/frames")
    assert monitor.stats()["errors"] == 1


def test_a_400_is_counted_and_its_batch_not_sent_again_by_the_monitor(
    receiver: Receiver,
) -> None:
    receiver.answers = [(400, {})]
    exporter = OTLPExporter(receiver.endpoint)
    monitor = LoggerMonitor(exporter, poll_interval=0.05)
    monitor.watch(Source(), name="collector")
    with exporter, monitor:
        assert wait_until(lambda: len(frames_received(receiver)) >= 3)
    frames = frames_received(receiver)
    assert frames[0] >= 2.0  # the first batch was refused for good
    assert 1.0 not in frames
    assert len(frames) == len(set(frames))
    assert len(receiver.arrivals) == 1 + len(receiver.requests)
    assert monitor.stats()["errors"] == 1


def test_stop_while_nothing_listens_says_why_once_the_exporter_closes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The exporter's own tries (within its timeout) outlast stop_timeout:
    # the stop says the sink did not return, and closing the exporter then
    # ends the call left behind, which says why.
    with socket.socket() as reserved:
        reserved.bind(("127.0.0.1", 0))
        port = reserved.getsockname()[1]
    exporter = OTLPExporter(f"http://127.0.0.1:{port}", timeout=10)
    monitor = LoggerMonitor(exporter, poll_interval=0.02, stop_timeout=0.5)
    monitor.watch(Source(), name="collector")
    with caplog.at_level(logging.WARNING, logger="rlpulse"):
        with exporter, monitor:
            time.sleep(0.2)
        assert wait_until(
            lambda: any("left behind failed" in m for m in caplog.messages)
        )
    [drained] = [m for m in caplog.messages if "without draining" in m]
    assert "it did not return" in drained
    [why] = [m for m in caplog.messages if "left behind failed" in m]
    assert why.startswith("the call to sink OTLPExporter that stop() left behind")
    assert "Connection refused" in why


def test_stop_with_a_receiver_that_hangs_is_bounded_and_says_what_was_not_delivered(
    receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    receiver.hang = True
    exporter = OTLPExporter(receiver.endpoint, timeout=0.5, close_timeout=0.5)
    monitor = LoggerMonitor(exporter, poll_interval=0.02, stop_timeout=1.0)
    monitor.watch(Source(), name="collector")
    with caplog.at_level(logging.WARNING, logger="rlpulse"):
        monitor.start()
        assert wait_until(lambda: len(receiver.arrivals) >= 2)
        started = time.monotonic()
        monitor.stop()
        took = time.monotonic() - started
    exporter.close()
    assert took < 1.6
    [drained] = [
        r.getMessage() for r in caplog.records if "without draining" in r.getMessage()
    ]
    dropped = monitor.stats()["dropped"]
    # What was not delivered is said: queued (dropped) or in the call the
    # exporter was still trying (on a busy machine it may hold them all).
    assert (not_delivered(dropped) in drained) == (dropped > 0)
    assert dropped > 0 or "still being written by it" in drained


def test_each_worker_of_shared_counters_is_an_attribute_of_one_metric(
    receiver: Receiver,
) -> None:
    with SharedCounters(2, counters=("frames",)) as counters:
        counters.worker(0).inc("frames", 30)
        counters.worker(1).inc("frames", 12)
        with (
            OTLPExporter(receiver.endpoint) as exporter,
            LoggerMonitor(exporter, poll_interval=3600) as monitor,
        ):
            monitor.watch(counters, name="workers")
            monitor.step()

    frames = {
        tuple(sorted(attributes.items())): value
        for attributes, value, _ in receiver.attributed("rlpulse.frames")
    }
    assert frames == {
        (("watch", "workers"),): 42.0,
        (("watch", "workers"), ("worker", "0")): 30.0,
        (("watch", "workers"), ("worker", "1")): 12.0,
    }
    assert not [m.name for m in receiver.metrics() if "worker_" in m.name]


def test_each_instance_s_counter_counts_from_its_own_start(receiver: Receiver) -> None:
    with OTLPExporter(receiver.endpoint, prefix="") as exporter:
        exporter.log_metrics({"w/worker_0/frames": 5.0}, timestamp=10.0)
        exporter.log_metrics(
            {"w/worker_0/frames": 6.0, "w/worker_1/frames": 7.0}, timestamp=11.0
        )
        # Worker 1 restarted; worker 0 goes on.
        exporter.log_metrics(
            {"w/worker_0/frames": 8.0, "w/worker_1/frames": 1.0}, timestamp=12.0
        )
    starts = {
        (attributes["worker"], value): start
        for attributes, value, start in receiver.attributed("frames")
    }
    assert starts == {
        ("0", 5.0): 10_000_000_000,
        ("0", 6.0): 10_000_000_000,
        ("0", 8.0): 10_000_000_000,
        ("1", 7.0): 11_000_000_000,
        ("1", 1.0): 11_000_000_000,
    }


def test_a_child_process_s_distribution_carries_its_pid(receiver: Receiver) -> None:
    histogram = Histogram()
    histogram.add(0.5)
    with OTLPExporter(receiver.endpoint) as exporter:
        exporter.log_payloads(
            [Payload({}, None, 1.0, {}, {"system/child_4242/wait_s": histogram})]
        )
    [point] = receiver.histogram_points("rlpulse.wait_s")
    assert [(a.key, a.value.string_value) for a in point.attributes] == [
        ("watch", "system"),
        ("pid", "4242"),
    ]
