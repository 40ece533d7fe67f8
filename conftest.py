"""Collects the examples of README.md and docs/ as tests: see scripts/docs_examples.py.

Each document is one test module whose examples run in order in a directory
of their own (``example_dir``).
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from scripts import docs_examples
from sybil import Sybil

# The receiver the OTLP page's example sends to.
OTLP_ADDRESS = ("127.0.0.1", 4318)
OTLP_PAGE = "docs/sinks/otlp.md"


@pytest.fixture(scope="module")
def example_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The working directory of one document's examples."""
    return tmp_path_factory.mktemp("docs")


@pytest.fixture(scope="module")
def otlp_receiver() -> Iterator[list[bytes]]:
    """An OTLP/HTTP receiver where the OTLP page's example sends: the request bodies it took."""
    bodies: list[bytes] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(200)  # an empty ExportMetricsServiceResponse
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    try:
        server = http.server.ThreadingHTTPServer(OTLP_ADDRESS, Handler)
    except OSError as error:
        pytest.fail(f"{OTLP_PAGE} sends to {OTLP_ADDRESS}, which is taken: {error}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield bodies
    server.shutdown()
    server.server_close()
    if not bodies:
        pytest.fail(f"the example of {OTLP_PAGE} sent nothing to {OTLP_ADDRESS}")


pytest_collect_file = (
    Sybil(
        docs_examples.PARSERS,
        patterns=docs_examples.DOCUMENTS,
        excludes=[OTLP_PAGE],
        fixtures=["example_dir"],
    )
    + Sybil(
        docs_examples.PARSERS,
        patterns=[OTLP_PAGE],
        fixtures=["example_dir", "otlp_receiver"],
    )
).pytest()
