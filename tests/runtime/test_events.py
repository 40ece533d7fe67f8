"""Events (SPEC 6.2): each streak's start and end, to ``on_event`` callbacks off the polling thread and to sinks with ``log_event``.

Real background monitors, real threads; sources that stall, hang and fail
as a pipeline's would.
"""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from multiprocessing.process import BaseProcess

import pytest

from rlpulse import Event, LoggerMonitor, SharedCounters, TransientSinkError
from tests.support import REPO, Blocking, Progress, wait_until

pytestmark = pytest.mark.timeout(60)


class Collected:
    """An on_event callback that keeps each event and the thread it was called on."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.threads: set[str] = set()

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        self.threads.add(threading.current_thread().name)

    def kinds(self, watch: str | None = None) -> list[str]:
        return [e.kind for e in self.events if watch is None or e.watch == watch]


class EventSink:
    """A sink with log_event: payloads and events, in the order it got them."""

    def __init__(self) -> None:
        self.calls: list[object] = []

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        self.calls.append(dict(metrics))

    def log_event(self, event: Event) -> None:
        self.calls.append(event)

    def events(self) -> list[Event]:
        return [call for call in self.calls if isinstance(call, Event)]


class Flaky:
    """A sink that fails while ``failing`` is set."""

    def __init__(self) -> None:
        self.failing = threading.Event()
        self.count = 0

    def log_metrics(
        self, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        if self.failing.is_set():
            raise OSError("disk unplugged")
        self.count += 1


def test_a_stall_and_its_end_are_events_called_back_off_the_polling_thread() -> None:
    collected = Collected()
    source = Progress()
    sink = EventSink()
    monitor = LoggerMonitor(sink, poll_interval=0.02, on_event=collected)
    monitor.watch(source, name="collector", stall_after=0.2, progress_key="frames")
    with monitor:
        assert wait_until(lambda: source.frames > 3)
        source.moving.clear()
        assert wait_until(lambda: "stalled" in collected.kinds())
        source.moving.set()
        assert wait_until(lambda: "recovered" in collected.kinds())
    assert collected.kinds() == ["stalled", "recovered", "stopped"]
    stalled, recovered, _ = collected.events
    assert stalled.value >= 0.2
    assert "frames" in stalled.message
    assert recovered.value >= stalled.value
    assert stalled.wall_time <= recovered.wall_time <= time.time()
    assert collected.threads == {"rlpulse-events"}
    # The sink got the same events, among the payloads.
    assert [e.kind for e in sink.events()] == ["stalled", "recovered", "stopped"]


def test_a_hung_call_and_its_return_are_events() -> None:
    collected = Collected()
    hanging = Blocking(block_after=1)
    monitor = LoggerMonitor(
        EventSink(), poll_interval=0.02, poll_timeout=0.3, on_event=collected
    )
    monitor.watch(hanging, name="remote")
    with monitor:
        assert wait_until(lambda: "hung" in collected.kinds())
        hanging.release.set()
        assert wait_until(lambda: "resumed" in collected.kinds())
    assert collected.kinds("remote") == ["hung", "resumed"]
    assert collected.events[0].value == 0.3


def test_a_failing_sink_and_its_recovery_are_events_once_per_streak(
    caplog: pytest.LogCaptureFixture,
) -> None:
    collected = Collected()
    flaky = Flaky()
    recorder = EventSink()
    monitor = LoggerMonitor([flaky, recorder], poll_interval=0.02, on_event=collected)
    monitor.watch(Progress(), name="collector")
    with monitor:
        assert wait_until(lambda: flaky.count > 2)
        flaky.failing.set()
        assert wait_until(lambda: "sink_failing" in collected.kinds())
        time.sleep(0.2)  # more failures: the same streak
        flaky.failing.clear()
        assert wait_until(lambda: "sink_recovered" in collected.kinds())
    assert collected.kinds() == ["sink_failing", "sink_recovered", "stopped"]
    assert "Flaky" in collected.events[0].message
    assert "disk unplugged" in collected.events[0].message
    assert [e.kind for e in recorder.events()] == collected.kinds()


class Gone:
    """A target whose stats() raises while ``gone`` is set: a Ray actor that died, a server down."""

    def __init__(self) -> None:
        self.gone = threading.Event()
        self.frames = 0

    def stats(self) -> dict[str, float]:
        if self.gone.is_set():
            raise ConnectionError("actor died")
        self.frames += 1
        return {"frames": self.frames}


def test_a_watch_whose_polls_fail_and_recover_is_an_event_once_per_streak(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Its errors were counted and warned about once, and nothing else said
    # so: no event for show, top or an alert to follow.
    collected = Collected()
    target = Gone()
    recorder = EventSink()
    monitor = LoggerMonitor(recorder, poll_interval=0.02, on_event=collected)
    monitor.watch(target, name="collector")
    with monitor:
        assert wait_until(lambda: target.frames > 2)
        target.gone.set()
        assert wait_until(lambda: "poll_failing" in collected.kinds())
        time.sleep(0.2)  # more failures: the same streak
        target.gone.clear()
        assert wait_until(lambda: "poll_recovered" in collected.kinds())
        target.gone.set()
        assert wait_until(lambda: collected.kinds().count("poll_failing") == 2)
        monitor.unwatch("collector")
    assert collected.kinds() == [
        "poll_failing",
        "poll_recovered",
        "poll_failing",
        "poll_recovered",  # its end, at unwatch()
        "unwatched",
        "stopped",
    ]
    assert "ConnectionError('actor died')" in collected.events[0].message
    assert {e.watch for e in collected.events[:-1]} == {"collector"}
    assert [e.kind for e in recorder.events()] == collected.kinds()


def test_drops_are_an_event_at_each_streaks_start() -> None:
    collected = Collected()
    release = threading.Event()

    class Slow:
        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            release.wait(5)

    monitor = LoggerMonitor(
        Slow(), poll_interval=0.01, queue_size=2, on_event=collected
    )
    for index in range(3):
        monitor.watch(Progress(), name=f"c{index}")
    with monitor:
        assert wait_until(lambda: "dropping" in collected.kinds())
        time.sleep(0.1)
        release.set()
    dropping = [e for e in collected.events if e.kind == "dropping"]
    assert len(dropping) == 1
    assert dropping[0].watch == ""
    assert dropping[0].value >= 1
    assert "Slow" in dropping[0].message


def test_a_callback_that_raises_is_warned_about_once_and_one_that_hangs_delays_no_poll(
    caplog: pytest.LogCaptureFixture,
) -> None:
    raised: list[Event] = []
    stuck = threading.Event()

    def failing(event: Event) -> None:
        raised.append(event)
        raise RuntimeError("callback bug")

    def hanging(event: Event) -> None:
        stuck.wait(10)

    sink = EventSink()
    source = Progress()
    monitor = LoggerMonitor(sink, poll_interval=0.02, on_event=[failing, hanging])
    monitor.watch(source, name="collector", stall_after=0.1, progress_key="frames")
    with caplog.at_level(logging.WARNING, logger="rlpulse"), monitor:
        source.moving.clear()
        assert wait_until(lambda: len(raised) == 1)
        # The second callback hangs on that event; polling goes on.
        logged = len(sink.calls)
        assert wait_until(lambda: len(sink.calls) > logged + 10)
        source.moving.set()
        assert wait_until(lambda: "recovered" in [e.kind for e in sink.events()])
        stuck.set()
        assert wait_until(lambda: len(raised) == 2)
    warnings = [r.getMessage() for r in caplog.records if "on_event" in r.getMessage()]
    assert len(warnings) == 1
    assert "callback bug" in warnings[0]


def watched_for_hangs(
    sink: EventSink, *, block_after: int = 1, stop_timeout: float | None = None
) -> tuple[LoggerMonitor, Blocking, Collected]:
    """A background monitor polling a ``Blocking`` as ``remote`` every 0.02 s, its calls from the ``block_after``-th on hung past a ``poll_timeout`` of 0.1 s, its events collected."""
    collected = Collected()
    hanging = Blocking(block_after=block_after)
    monitor = LoggerMonitor(
        sink,
        poll_interval=0.02,
        poll_timeout=0.1,
        stop_timeout=stop_timeout,
        on_event=collected,
    )
    monitor.watch(hanging, name="remote")
    return monitor, hanging, collected


def watched_for_stalls() -> tuple[EventSink, Progress, LoggerMonitor]:
    """A manual monitor watching a moving ``Progress`` as ``c`` for stalls of 0.05 s, its baseline polled."""
    sink, source = EventSink(), Progress()
    monitor = LoggerMonitor(sink, background=False)
    monitor.watch(source, name="c", stall_after=0.05, progress_key="frames")
    monitor.step()
    return sink, source, monitor


def stall(monitor: LoggerMonitor, source: Progress) -> None:
    """Stop ``source`` and poll it until its stall is noticed (0.1 s without progress)."""
    source.moving.clear()
    monitor.step()
    time.sleep(0.1)
    monitor.step()


def test_in_manual_mode_events_reach_the_sinks_before_step_returns() -> None:
    sink, source, monitor = watched_for_stalls()
    stall(monitor, source)
    assert [e.kind for e in sink.events()] == ["stalled"]
    # The event came before the payload that says stalled = 1.0.
    assert isinstance(sink.calls[-2], Event)
    assert sink.calls[-1]["c/stalled"] == 1.0


def test_a_stall_goes_on_across_stop_and_start_until_progress_sends_recovered() -> None:
    sink, source, monitor = watched_for_stalls()
    stall(monitor, source)
    monitor.stop()
    monitor.start()
    # The target did not move because the monitor restarted: still stalled,
    # and no second stalled event for the same stall.
    monitor.step()
    assert sink.calls[-1]["c/stalled"] == 1.0
    source.moving.set()
    monitor.step()
    # The stall went on across the stop.
    assert [e.kind for e in sink.events()] == ["stalled", "stopped", "recovered"]
    assert sink.calls[-1]["c/stalled"] == 0.0
    monitor.stop()


def test_on_event_takes_callables_only() -> None:
    with pytest.raises(TypeError, match="on_event takes a callable"):
        LoggerMonitor(EventSink(), on_event=["print"])


def test_a_stall_of_several_progress_counters_needs_none_of_them_to_move() -> None:
    class Learner:
        def __init__(self) -> None:
            self.updates = 0
            self.samples = 0
            self.phase = "both"

        def stats(self) -> dict[str, float]:
            if self.phase in ("both", "updates"):
                self.updates += 1
            if self.phase == "both":
                self.samples += 1
            return {"updates": self.updates, "samples": self.samples}

    learner = Learner()
    sink = EventSink()  # manual mode: events reach it before step() returns
    monitor = LoggerMonitor(sink, background=False)
    monitor.watch(
        learner, name="learner", stall_after=0.05, progress_key=("updates", "samples")
    )
    monitor.step()
    learner.phase = "updates"  # samples stop, updates move: no stall
    time.sleep(0.1)
    monitor.step()
    assert sink.events() == []
    learner.phase = "none"
    monitor.step()
    time.sleep(0.1)
    monitor.step()
    [stalled] = sink.events()
    assert stalled.kind == "stalled"
    assert "updates, samples" in stalled.message


def test_a_progress_key_tuple_must_name_entries() -> None:
    monitor = LoggerMonitor(EventSink(), background=False)
    with pytest.raises(ValueError, match="at least one"):
        monitor.watch(Progress(), stall_after=1.0, progress_key=())
    with pytest.raises(TypeError, match="names"):
        monitor.watch(Progress(), stall_after=1.0, progress_key=("frames", 3))  # type: ignore[arg-type]


def _beat_until_killed(counters: SharedCounters, index: int) -> None:
    writer = counters.worker(index)
    while True:
        writer.inc("frames")
        writer.heartbeat()
        time.sleep(0.01)


@contextlib.contextmanager
def running(*workers: BaseProcess) -> Iterator[None]:
    """The worker processes started, then killed and joined at the end."""
    for worker in workers:
        worker.start()
    try:
        yield
    finally:
        for worker in workers:
            worker.kill()
            worker.join(10)


def watching(counters: SharedCounters, collected: Collected) -> LoggerMonitor:
    """A background monitor of ``counters``, its events to ``collected``."""
    monitor = LoggerMonitor(EventSink(), poll_interval=0.05, on_event=collected)
    monitor.watch(counters, name="workers")
    return monitor


def test_a_worker_that_dies_is_a_worker_lost_event() -> None:
    collected = Collected()
    context = multiprocessing.get_context("spawn")
    with SharedCounters(2, counters=("frames",), liveness=0.3) as counters:
        workers = [
            context.Process(target=_beat_until_killed, args=(counters, index))
            for index in range(2)
        ]
        with running(*workers), watching(counters, collected):
            assert wait_until(lambda: counters.stats()["workers_alive"] == 2)
            time.sleep(0.2)  # a snapshot with both alive
            os.kill(workers[1].pid or 0, signal.SIGKILL)
            assert wait_until(lambda: "worker_lost" in collected.kinds())
    [lost] = [e for e in collected.events if e.kind == "worker_lost"]
    assert lost.watch == "workers"
    assert lost.value == 1.0
    assert lost.message == "1 worker lost: 1 of 2 alive"


def _beat_then_finish(counters: SharedCounters, index: int) -> None:
    writer = counters.worker(index)
    for _ in range(20):
        writer.inc("frames")
        writer.heartbeat()
        time.sleep(0.01)
    writer.finish()


def test_a_worker_that_finishes_is_not_lost_and_one_that_dies_after_is() -> None:
    collected = Collected()
    context = multiprocessing.get_context("spawn")
    with SharedCounters(2, counters=("frames",), liveness=0.3) as counters:
        finishing = context.Process(target=_beat_then_finish, args=(counters, 0))
        dying = context.Process(target=_beat_until_killed, args=(counters, 1))
        with running(finishing, dying), watching(counters, collected):
            assert wait_until(lambda: counters.stats()["workers_finished"] == 1)
            finishing.join(30)
            time.sleep(0.6)  # past liveness: a finished worker would be lost by now
            assert "worker_lost" not in collected.kinds()
            os.kill(dying.pid or 0, signal.SIGKILL)
            assert wait_until(lambda: "worker_lost" in collected.kinds())
    [lost] = [e for e in collected.events if e.kind == "worker_lost"]
    assert lost.message == "1 worker lost: 0 of 1 alive"


def test_an_event_after_stop_reaches_no_sink_and_starts_no_thread() -> None:
    # A call left hung returns after stop(): its "resumed" goes nowhere.
    sink = EventSink()
    monitor, hanging, collected = watched_for_hangs(sink, block_after=2, stop_timeout=1)
    with monitor:
        assert wait_until(lambda: "hung" in collected.kinds())
    stored = list(sink.events())
    hanging.release.set()
    assert wait_until(lambda: hanging.returned == hanging.calls)
    time.sleep(0.2)
    assert sink.events() == stored
    assert collected.kinds() == ["hung", "stopped"]
    assert not [t.name for t in threading.enumerate() if t.name == "rlpulse-events"]


def test_an_entry_of_a_progress_tuple_that_comes_and_goes_is_no_progress() -> None:
    class Flickering:
        calls = 0

        def stats(self) -> dict[str, float]:
            self.calls += 1
            # "samples" only every other poll; nothing moves.
            return {"updates": 5.0, **({"samples": 9.0} if self.calls % 2 else {})}

    sink = EventSink()
    monitor = LoggerMonitor(sink, background=False)
    monitor.watch(
        Flickering(), name="l", stall_after=0.05, progress_key=("updates", "samples")
    )
    for _ in range(4):
        monitor.step()
        time.sleep(0.03)
    assert [e.kind for e in sink.events()] == ["stalled"]


def test_the_docs_list_every_event_kind_with_when_it_comes() -> None:
    # Adding an event kind is one EventKind entry, and its row in the docs.

    from rlpulse.runtime.events import EventKind

    docs = REPO / "docs" / "failure-behaviour.md"
    rows = [line for line in docs.read_text().splitlines() if line.startswith("| `")]
    for kind in EventKind:
        assert any(f"`{kind.value}`" in row.split("|")[1] for row in rows), kind


# -- Each streak's start has its end, whatever the lifecycle ----------------


def test_a_hung_call_that_returns_while_stopped_is_resumed_at_the_next_start() -> None:
    sink = EventSink()
    monitor, hanging, collected = watched_for_hangs(sink, stop_timeout=1)
    with monitor:
        assert wait_until(lambda: "hung" in collected.kinds())
    hanging.release.set()
    assert wait_until(lambda: hanging.returned == hanging.calls)
    assert collected.kinds() == ["hung", "stopped"]  # resumed: at the next start
    with monitor:
        assert wait_until(lambda: "resumed" in collected.kinds())
    assert collected.kinds("remote") == ["hung", "resumed"]
    assert [e.kind for e in sink.events()] == ["hung", "stopped", "resumed", "stopped"]


def test_a_final_call_that_hangs_at_stop_is_resumed_when_it_returns() -> None:
    collected = Collected()
    hanging = Blocking(block_after=1)
    monitor = LoggerMonitor(
        EventSink(),
        poll_interval=3600,
        poll_timeout=0.2,
        stop_timeout=1,
        on_event=collected,
    )
    monitor.watch(hanging, name="remote")
    with monitor:
        monitor.step()  # the first call returns
    assert collected.kinds() == ["hung", "stopped"]  # its final call hangs
    with monitor:
        hanging.release.set()
        assert wait_until(lambda: "resumed" in collected.kinds())
    assert collected.kinds("remote") == ["hung", "resumed"]


def test_unwatch_ends_the_stall_of_its_watch() -> None:
    sink, source, monitor = watched_for_stalls()
    stall(monitor, source)
    monitor.unwatch("c")
    stalled, ended, gone = sink.events()
    assert (stalled.kind, ended.kind, gone.kind) == (
        "stalled",
        "recovered",
        "unwatched",
    )
    assert "unwatch" in ended.message
    # Watched again under the same name: a stall of its own, and its end.
    monitor.watch(source, name="c", stall_after=0.05, progress_key="frames")
    stall(monitor, source)
    source.moving.set()
    monitor.step()
    kinds = [e.kind for e in sink.events()]
    assert kinds == ["stalled", "recovered", "unwatched", "stalled", "recovered"]
    monitor.stop()


def test_a_stall_unwatch_ends_after_a_stop_lasted_the_time_it_was_polled() -> None:
    # Its end counted the time the monitor was stopped too.
    sink, source, monitor = watched_for_stalls()
    stall(monitor, source)  # 0.1 s without progress, polled
    monitor.stop()
    time.sleep(1.0)  # stopped
    monitor.unwatch("c")

    stalled, stopped, ended, _ = sink.events()
    kinds = (stalled.kind, stopped.kind, ended.kind)
    assert kinds == ("stalled", "stopped", "recovered")
    assert 0.05 <= ended.value < 0.5


def test_a_call_that_fails_after_its_watch_was_unwatched_starts_no_streak() -> None:
    # Its poll_failing came after unwatched, and was never ended: an alert
    # that pairs them would fire for ever.
    started, release = threading.Event(), threading.Event()

    def failing_late() -> dict[str, float]:
        started.set()
        release.wait(10)
        raise ConnectionError("gone")

    collected = Collected()
    monitor = LoggerMonitor(
        EventSink(), poll_interval=0.02, poll_timeout=5.0, on_event=collected
    )
    monitor.watch(None, name="t", stats_fn=failing_late)
    with monitor:
        assert started.wait(10)
        monitor.unwatch("t")
        release.set()
        time.sleep(0.3)
    assert collected.kinds() == ["unwatched", "stopped"]
    assert monitor.stats()["errors"] >= 1


def test_unwatch_ends_a_hung_streak_and_the_call_returning_later_says_nothing() -> None:
    monitor, hanging, collected = watched_for_hangs(EventSink())
    with monitor:
        assert wait_until(lambda: "hung" in collected.kinds())
        monitor.unwatch("remote")
        assert wait_until(lambda: "resumed" in collected.kinds())
        assert "unwatch" in collected.events[-1].message
        # Watched again, hung again: the first call's return ends nothing.
        again = Blocking(block_after=0)
        monitor.watch(again, name="remote")
        assert wait_until(lambda: collected.kinds().count("hung") == 2)
        hanging.release.set()
        assert wait_until(lambda: hanging.returned == hanging.calls)
        time.sleep(0.1)
        assert collected.kinds() == ["hung", "resumed", "unwatched", "hung"]
        again.release.set()
        assert wait_until(lambda: collected.kinds().count("resumed") == 2)
    assert collected.kinds() == [
        "hung",
        "resumed",
        "unwatched",
        "hung",
        "resumed",
        "stopped",
    ]


def test_a_stall_that_ends_in_a_step_after_stop_is_recovered_with_its_payload() -> None:
    sink, source, monitor = watched_for_stalls()
    stall(monitor, source)
    monitor.stop()
    source.moving.set()
    monitor.step()  # after stop(): it moves, and says so
    recovered, payload = sink.calls[-2:]
    assert isinstance(recovered, Event)
    assert recovered.kind == "recovered"
    assert payload["c/stalled"] == 0.0
    monitor.start()  # nothing more to tell
    assert [e.kind for e in sink.events()] == ["stalled", "stopped", "recovered"]
    monitor.stop()


def test_a_stall_that_starts_in_a_step_after_stop_is_told_with_its_payload() -> None:
    sink, source, monitor = watched_for_stalls()
    monitor.stop()
    stall(monitor, source)
    stalled, payload = sink.calls[-2:]
    assert isinstance(stalled, Event)
    assert stalled.kind == "stalled"
    assert payload["c/stalled"] == 1.0
    monitor.start()
    source.moving.set()
    monitor.step()
    assert [e.kind for e in sink.events()] == ["stopped", "stalled", "recovered"]
    monitor.stop()


def test_a_stall_that_starts_and_ends_while_stopped_is_told_by_its_steps() -> None:
    sink, source, monitor = watched_for_stalls()
    monitor.stop()
    stall(monitor, source)
    source.moving.set()
    monitor.step()
    monitor.start()
    monitor.step()
    assert [e.kind for e in sink.events()] == ["stopped", "stalled", "recovered"]
    monitor.stop()


def test_a_step_after_a_background_monitor_stopped_delivers_its_events() -> None:
    collected, sink, source = Collected(), EventSink(), Progress()
    monitor = LoggerMonitor(sink, poll_interval=3600, on_event=collected)
    monitor.watch(source, name="c", stall_after=0.05, progress_key="frames")
    with monitor:
        monitor.step()
    stall(monitor, source)  # after stop(), on this thread
    stalled, payload = sink.calls[-2:]
    assert isinstance(stalled, Event)
    assert stalled.kind == "stalled"
    assert payload["c/stalled"] == 1.0
    # The callbacks too, off this thread, on one that then ends.
    assert wait_until(lambda: collected.kinds() == ["stopped", "stalled"])
    assert collected.threads == {"rlpulse-events"}
    assert wait_until(
        lambda: "rlpulse-events" not in [t.name for t in threading.enumerate()]
    )
    with monitor:  # told once: not again at start()
        source.moving.set()
        monitor.step()
    told = ["stopped", "stalled", "recovered", "stopped"]
    assert collected.kinds() == told
    assert [e.kind for e in sink.events()] == told


def test_a_sink_that_recovers_while_stop_drains_its_queue_says_so_to_every_sink() -> (
    None
):
    class Away:
        """A receiver that is down until ``back`` is set."""

        def __init__(self) -> None:
            self.back = threading.Event()

        def log_metrics(
            self, metrics: Mapping[str, float], step: int | None = None
        ) -> None:
            if not self.back.is_set():
                raise TransientSinkError("receiver down")

    away, store, collected = Away(), EventSink(), Collected()
    monitor = LoggerMonitor(
        [away, store], poll_interval=0.02, stop_timeout=5, on_event=collected
    )
    monitor.watch(Progress(), name="c")
    monitor.start()
    assert wait_until(lambda: "sink_failing" in [e.kind for e in store.events()])
    back = threading.Timer(0.3, away.back.set)
    back.start()
    monitor.stop()  # its queue drains once the receiver is back
    back.join()
    # It recovered while the stop drained the queues, after the stop was told.
    told = ["sink_failing", "stopped", "sink_recovered"]
    assert collected.kinds() == told
    assert [e.kind for e in store.events()] == told


# -- A forked child's streaks are its own -----------------------------------

fork_only = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def in_a_forked_child(body: Callable[[], object]) -> object:
    """What ``body`` returns (a JSON value) when run in a child made by ``os.fork()``."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        answer: object
        try:
            answer = body()
        except BaseException as err:
            answer = f"the child raised {err!r}"
        os.write(write_end, json.dumps(answer).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        told = reader.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return json.loads(told)


@fork_only
def test_a_forked_child_does_not_go_on_with_its_parents_stall_nor_end_it() -> None:
    sink, source, monitor = watched_for_stalls()
    stall(monitor, source)  # the parent's stall, open when it forks

    def child() -> object:
        inherited = len(sink.calls)
        monitor.step()  # the child's own stall clock starts
        first = sink.calls[-1]["c/stalled"]
        time.sleep(0.1)
        monitor.step()
        source.moving.set()
        monitor.step()
        kinds = [e.kind for e in sink.calls[inherited:] if isinstance(e, Event)]
        return [first, kinds]

    # A stall the child notices itself, and its end; not the parent's end.
    assert in_a_forked_child(child) == [0.0, ["stalled", "recovered"]]
    assert [e.kind for e in sink.events()] == ["stalled"]
    monitor.stop()


@fork_only
def test_a_forked_child_tells_its_own_failing_sink_not_its_parents() -> None:
    flaky, recorder = Flaky(), EventSink()
    monitor = LoggerMonitor([flaky, recorder], background=False)
    monitor.watch(Progress(), name="c")
    flaky.failing.set()
    monitor.step()  # the parent's sink_failing, open when it forks

    def child() -> object:
        inherited = len(recorder.calls)
        monitor.step()  # still failing, now in the child
        flaky.failing.clear()
        monitor.step()
        return [e.kind for e in recorder.calls[inherited:] if isinstance(e, Event)]

    assert in_a_forked_child(child) == ["sink_failing", "sink_recovered"]
    assert [e.kind for e in recorder.events()] == ["sink_failing"]
    monitor.stop()
