"""``rlpulse.testing.InMemorySink``: what a test of monitored code reads back."""

from __future__ import annotations

import pytest

from rlpulse import Every, LoggerMonitor, Tally
from rlpulse.naming import Kind
from rlpulse.testing import InMemorySink

pytestmark = pytest.mark.timeout(60)


def test_it_keeps_a_background_monitors_payloads_with_kinds_and_distributions() -> None:
    tally, sink = Tally(), InMemorySink()
    tally.inc("updates")
    tally.observe("loss", 0.5)
    with LoggerMonitor(sink, poll_interval=0.02) as monitor:
        monitor.watch(tally, name="learner", rate_keys=("updates",))
        assert sink.wait_for(lambda s: len(s.values("learner/updates")) >= 2)
    assert sink.kind("learner/updates") is Kind.COUNTER
    assert sink.kind("learner/updates_per_second") is Kind.RATE
    assert sink.kind("learner/loss_mean") is Kind.GAUGE
    assert sink.kind("learner/missing") is None
    first_loss = next(p for p in sink.payloads if p.distributions)
    assert first_loss.distributions["learner/loss"].count == 1
    assert "learner/loss_p50" in sink.names()


def test_it_keeps_the_events_and_says_when_a_wait_ran_out() -> None:
    sink = InMemorySink()
    monitor = LoggerMonitor(sink, background=False)

    class Stuck:
        def stats(self) -> dict[str, float]:
            return {"frames": 1.0}

    monitor.watch(
        Stuck(),
        name="c",
        schedule=Every.counter("frames", 10),
        stall_after=0.01,
    )
    monitor.step()
    assert not sink.wait_for(lambda s: len(s.payloads) > 5, timeout=0.1)
    monitor.step()  # no progress for 0.1 s: a stall
    assert sink.wait_for(lambda s: bool(s.events))
    assert sink.events[0].kind == "stalled"
    sink.clear()
    assert (sink.payloads, sink.events) == ([], [])
    assert repr(sink) == "InMemorySink(0 payloads, 0 events)"
