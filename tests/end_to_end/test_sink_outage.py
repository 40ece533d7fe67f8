"""A sink's far end away for 20 s: every payload of those 20 s arrives once it is back, in order, none twice.

The far end is a real OTLP/HTTP receiver on 127.0.0.1 (the one of
``tests/test_sink_otlp.py``, decoding each request with opentelemetry-proto),
shut down for 20 s while the monitor polls, then started again at the same
address.
"""

from __future__ import annotations

import logging
import time

import pytest

pytest.importorskip("opentelemetry.proto.collector.metrics.v1.metrics_service_pb2")

from rlpulse import LoggerMonitor
from rlpulse.sinks.otlp import OTLPExporter
from rlpulse.testing import InMemorySink
from tests.otlp_receiver import Receiver, frames_received
from tests.support import Source, wait_until

pytestmark = pytest.mark.timeout(120)

OUTAGE_S = 20.0


def test_a_receiver_down_for_20_s_gets_every_payload_of_the_outage_once_it_is_up(
    caplog: pytest.LogCaptureFixture,
) -> None:
    first = Receiver()
    port = first.server.server_address[1]
    exporter = OTLPExporter(first.endpoint, timeout=0.5)
    kept = InMemorySink()
    monitor = LoggerMonitor([exporter, kept], poll_interval=0.05)
    monitor.watch(Source(), name="collector")
    receivers = [first]
    try:
        with caplog.at_level(logging.WARNING, logger="rlpulse"), monitor:
            assert wait_until(lambda: len(frames_received(first)) >= 3)
            first.close()
            down_at = time.monotonic()
            time.sleep(OUTAGE_S)
            during_outage = len(kept.payloads) - len(frames_received(first))
            assert monitor.stats()["queued"] > 0
            receivers.append(Receiver(port))
            # The back-off reaches 16 s by then: the next try comes within it.
            assert wait_until(
                lambda: len(frames_received(*receivers)) >= len(kept.payloads),
                timeout=45,
            )
            assert time.monotonic() - down_at < OUTAGE_S + 45
        stats = monitor.stats()
    finally:
        exporter.close()
        for receiver in receivers:
            receiver.close()
    assert during_outage >= OUTAGE_S / 0.05 * 0.5  # the polls went on
    assert frames_received(*receivers) == kept.values("collector/frames")
    assert stats["dropped"] == 0
    warnings = [r.getMessage() for r in caplog.records if r.name == "rlpulse"]
    assert len(warnings) == 1
    assert "tried again" in warnings[0]
