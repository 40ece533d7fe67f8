"""A real OTLP/HTTP receiver on 127.0.0.1 for the tests: it decodes each request's protobuf as a collector does.

The receiver is an HTTP server in the test's process that parses each
request body with opentelemetry-proto's ``ExportMetricsServiceRequest`` and
answers with an ``ExportMetricsServiceResponse`` — or with the answers a test
scripts (a 503 with ``Retry-After``), or not at all (a receiver that hangs).
"""

from __future__ import annotations

import gzip
import http.server
import threading
import time
from typing import Any

from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2


class Receiver:
    """An OTLP/HTTP metrics receiver on 127.0.0.1: the requests it decoded, and how it answers.

    ``answers`` are ``(status, headers)`` to give, one per request, before
    answering ``status``; ``hang`` makes it keep each request unanswered
    until the receiver closes.
    """

    def __init__(self, port: int = 0) -> None:
        self.requests: list[Any] = []
        self.paths: list[str] = []
        self.content_types: list[str] = []
        # Each request's headers (their names are case-insensitive).
        self.headers: list[Any] = []
        self.arrivals: list[float] = []
        self.status = 200
        self.answers: list[tuple[int, dict[str, str]]] = []
        self.hang = False
        self.released = threading.Event()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.arrivals.append(time.monotonic())
                receiver.paths.append(self.path)
                receiver.content_types.append(self.headers["Content-Type"])
                receiver.headers.append(self.headers)
                if receiver.hang:
                    receiver.released.wait(60)
                    return
                status, headers = (
                    receiver.answers.pop(0)
                    if receiver.answers
                    else (receiver.status, {})
                )
                if status != 200:
                    self.send_response(status)
                    if 300 <= status < 400:
                        self.send_header("Location", "/elsewhere")
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(b"collector overloaded")
                    return
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
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

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def metrics(self) -> list[Any]:
        """Every Metric received, in order."""
        return [
            metric
            for request in self.requests
            for resource in request.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
        ]

    def points(self) -> list[tuple[str, str, str, float, int, int]]:
        """Every number received: (metric, kind, watch, value, time ns, start ns)."""
        found = []
        for metric in self.metrics():
            kind = metric.WhichOneof("data")
            if kind not in ("sum", "gauge"):
                continue
            for point in getattr(metric, kind).data_points:
                watch = {a.key: a.value.string_value for a in point.attributes}
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

    def attributed(self, name: str) -> list[tuple[dict[str, str], float, int]]:
        """Every number received of metric ``name``: (its attributes, its value, its start ns)."""
        return [
            (
                {a.key: a.value.string_value for a in point.attributes},
                point.as_double,
                point.start_time_unix_nano,
            )
            for metric in self.metrics()
            if metric.name == name and metric.WhichOneof("data") in ("sum", "gauge")
            for point in getattr(metric, metric.WhichOneof("data")).data_points
        ]

    def histogram_points(self, name: str) -> list[Any]:
        """Every exponential histogram point received of metric ``name``."""
        return [
            point
            for metric in self.metrics()
            if metric.name == name and metric.HasField("exponential_histogram")
            for point in metric.exponential_histogram.data_points
        ]

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


def frames_received(*receivers: Receiver) -> list[float]:
    return [
        value
        for receiver in receivers
        for name, _, _, value, _, _ in receiver.points()
        if name == "rlpulse.frames"
    ]
