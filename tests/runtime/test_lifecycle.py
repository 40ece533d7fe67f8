"""Process lifecycle: a dropped monitor is collected, running ones log at exit and on SIGTERM, forks start inert (SPEC 2.6).

Some tests run real processes, each under a hard deadline.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import rlpulse
from rlpulse import Every, LoggerMonitor
from rlpulse.testing import InMemorySink
from tests.support import Source, frames_logged, wait_until

pytestmark = pytest.mark.timeout(60)


def test_a_dropped_monitor_is_collected() -> None:
    import gc
    import weakref

    monitor = LoggerMonitor(InMemorySink(), background=False)
    monitor.watch(Source())
    reference = weakref.ref(monitor)
    del monitor
    gc.collect()
    assert reference() is None


def test_a_script_that_exits_without_stop_still_logs_its_final_snapshot(
    tmp_path: Path,
) -> None:
    store = tmp_path / "run.sqlite"
    script = textwrap.dedent(
        f"""
        from rlpulse import Every, LoggerMonitor, SQLiteLogger

        class Source:
            frames = 0
            def stats(self):
                self.frames += 7
                return {{"frames": self.frames}}

        monitor = LoggerMonitor(SQLiteLogger({str(store)!r}), poll_interval=3600)
        monitor.watch(Source(), name="src", schedule=Every.seconds(3600))
        monitor.start()
        print("started", flush=True)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    records = list(rlpulse.read(store))
    frames = [r.value for r in records if r.name == "src/frames"]
    assert frames == [7.0]  # never polled while running: only the exit hook's final one


@pytest.mark.parametrize(
    ("sink", "counters_made"),
    [("SinkProcess('csv:{store}')", "before"), ("CSVLogger({store!r})", "after")],
)
def test_the_final_snapshot_at_exit_reaches_a_sink_process_from_shared_counters(
    tmp_path: Path, sink: str, counters_made: str
) -> None:
    # Both close themselves at exit (weakref.finalize), as late as ever:
    # made before the monitor starts, or after it (the first such object
    # of the process).
    store = str(tmp_path / "run.csv")
    make = "counters = SharedCounters(2, counters=('frames',))"
    script = textwrap.dedent(
        f"""
        from rlpulse import CSVLogger, LoggerMonitor, SharedCounters, SinkProcess

        {make if counters_made == "before" else ""}
        monitor = LoggerMonitor({sink.format(store=store)}, poll_interval=3600)
        monitor.start()
        {make if counters_made == "after" else ""}
        monitor.watch(counters, name="workers", log_on_start=False)
        counters.worker(1).inc("frames", 99)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    frames = [r.value for r in rlpulse.read(store) if r.name == "workers/frames"]
    assert frames == [99.0]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_inherits_an_inert_monitor_that_can_start_again() -> None:
    sink = InMemorySink()
    monitor = LoggerMonitor(sink, poll_interval=0.001)
    monitor.watch(Source(), name="s")
    monitor.start()
    assert wait_until(lambda: frames_logged(sink, "s") > 5)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            child_sink = InMemorySink()
            inert = repr(monitor).endswith("idle)")
            monitor._sinks[0].target.clear()
            time.sleep(0.05)
            quiet = frames_logged(sink, "s") == 0
            monitor.stop()  # nothing to stop: inert
            monitor._engine.delivery.sinks = (rlpulse.runtime.sinks.Sink(child_sink),)
            monitor.start()
            started = wait_until(lambda: frames_logged(child_sink, "s") > 2, timeout=10)
            monitor.stop()
            code = 0 if (inert and quiet and started) else 3
            os.write(write_end, f"{inert} {quiet} {started}".encode())
        finally:
            os._exit(code)
    os.close(write_end)
    _, status = os.waitpid(pid, 0)
    report = os.read(read_end, 100).decode()
    os.close(read_end)
    monitor.stop()
    assert os.waitstatus_to_exitcode(status) == 0, report


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_a_polling_thread_ends_a_round_polls_on_its_own() -> None:
    # Every polling thread ends its timed rounds the same way; a child forked
    # while one of them (of any monitor) was doing so must inherit nothing
    # held. Taken here as that thread would hold it, then forked.
    from rlpulse.runtime import poller

    held = poller._UNAWAITED._cond
    held.acquire()
    pid = os.fork()
    if pid:
        held.release()  # the child's copy stays held
    else:  # pragma: no cover - runs in the child
        child_sink = InMemorySink()
        child = LoggerMonitor(child_sink, poll_interval=0.001)
        child.watch(Source(), name="c")
        child.start()
        polled = wait_until(lambda: frames_logged(child_sink, "c") > 5, timeout=5)
        os._exit(0 if polled else 3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def _sigterm_script(store: Path, before: str, opt_in: str = "stop_on_sigterm()") -> str:
    """A script whose background monitor logs nothing until its final snapshot; it prints ``ready``, then waits."""
    return textwrap.dedent(
        f"""
        import signal, sys, time
        from rlpulse import Every, LoggerMonitor, SQLiteLogger, stop_on_sigterm

        class Source:
            frames = 0
            def stats(self):
                self.frames += 7
                return {{"frames": self.frames}}

        {before}
        {opt_in}
        monitor = LoggerMonitor(SQLiteLogger({str(store)!r}), poll_interval=3600)
        monitor.watch(Source(), name="src", schedule=Every.seconds(3600))
        monitor.start()
        print("ready", flush=True)
        time.sleep(60)
        print("not terminated", flush=True)
        """
    )


def _terminate(script: str) -> tuple[int, str]:
    """Run ``script``, send it SIGTERM once it is ready; return its exit status and output."""
    process = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "ready\n"
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    finally:
        process.kill()
        process.wait()
    return process.returncode, out + err


def _final_frames(store: Path) -> list[float]:
    return [r.value for r in rlpulse.read(store) if r.name == "src/frames"]


def test_sigterm_without_the_opt_in_loses_the_final_snapshot(tmp_path: Path) -> None:
    store = tmp_path / "run.sqlite"
    returncode, _ = _terminate(_sigterm_script(store, "", opt_in=""))
    assert returncode == -signal.SIGTERM
    assert _final_frames(store) == []


def test_sigterm_after_stop_on_sigterm_logs_the_final_snapshot_and_terminates(
    tmp_path: Path,
) -> None:
    store = tmp_path / "run.sqlite"
    returncode, output = _terminate(_sigterm_script(store, ""))
    assert returncode == -signal.SIGTERM, output
    assert "not terminated" not in output
    assert _final_frames(store) == [7.0]  # the final snapshot, and only it


def test_sigterm_reaches_the_handler_installed_before_once(tmp_path: Path) -> None:
    store = tmp_path / "run.sqlite"
    before = textwrap.dedent(
        """
        def previous(signum, frame):
            print("previous handler", signum, flush=True)
            sys.exit(3)
        signal.signal(signal.SIGTERM, previous)
        stop_on_sigterm()  # a second call below changes nothing
        """
    ).replace("\n", "\n        ")
    returncode, output = _terminate(_sigterm_script(store, before))
    assert returncode == 3, output
    assert output.count("previous handler") == 1
    assert _final_frames(store) == [7.0]


def test_an_ignored_sigterm_stays_ignored_and_stops_nothing() -> None:
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sink = InMemorySink()
    monitor = LoggerMonitor(sink, poll_interval=3600)
    monitor.watch(Source(), name="s", schedule=Every.seconds(3600))
    try:
        rlpulse.stop_on_sigterm()
        monitor.start()
        signal.raise_signal(signal.SIGTERM)
        assert frames_logged(sink, "s") == 0
        assert repr(monitor).endswith("running)")
    finally:
        signal.signal(signal.SIGTERM, previous)
        monitor.stop()
    assert frames_logged(sink, "s") == 1


def test_sigterm_in_process_stops_running_monitors_before_the_previous_handler() -> (
    None
):
    class Terminated(Exception):
        pass

    seen: list[int] = []
    sink = InMemorySink()

    def earlier(signum: int, frame: object) -> None:
        seen.append(frames_logged(sink, "s"))
        raise Terminated

    previous = signal.signal(signal.SIGTERM, earlier)
    monitor = LoggerMonitor(sink, poll_interval=3600)
    monitor.watch(Source(), name="s", schedule=Every.seconds(3600))
    try:
        rlpulse.stop_on_sigterm()
        installed = signal.getsignal(signal.SIGTERM)
        rlpulse.stop_on_sigterm()  # changes nothing
        assert signal.getsignal(signal.SIGTERM) is installed
        monitor.start()
        with pytest.raises(Terminated):
            signal.raise_signal(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, previous)
        monitor.stop()
    assert seen == [1]  # the final snapshot was logged before it was called
    assert frames_logged(sink, "s") == 1  # and the monitor was stopped


def test_sigterm_while_the_main_thread_holds_a_monitor_lock_still_ends_in_time() -> (
    None
):
    # The handler runs between two bytecodes of the main thread: here inside
    # a section holding the lock stats() takes, which stop() needs too. The
    # stop waits at most the monitors' stop timeouts, then the signal goes on.
    script = textwrap.dedent(
        """
        import os, signal, sys, time
        import rlpulse
        from rlpulse import LoggerMonitor

        class Null:
            def log_metrics(self, metrics, step=None):
                pass

        class Printed:
            def log_metrics(self, metrics, step=None):
                print("other monitor:", sorted(metrics), flush=True)

        def previous(signum, frame):
            print("previous handler", flush=True)
            sys.exit(0)

        signal.signal(signal.SIGTERM, previous)
        rlpulse.stop_on_sigterm()
        monitor = LoggerMonitor(Null(), poll_interval=0.05, stop_timeout=1.0)
        monitor.watch(None, name="a", stats_fn=lambda: {"x": 1})
        monitor.start()
        other = LoggerMonitor(Printed(), poll_interval=3600, stop_timeout=1.0)
        other.watch(None, name="b", stats_fn=lambda: {"x": 1}, log_on_start=False)
        other.start()
        time.sleep(0.2)
        with monitor._engine.reporter._lock:  # as inside monitor.stats()
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)
        print("not terminated", flush=True)
        """
    )
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    # The other monitor still stopped, with its final snapshot.
    assert result.stdout == "other monitor: ['b/x']\nprevious handler\n"
    assert time.monotonic() - started < 20


def test_stop_on_sigterm_from_another_thread_says_to_call_it_in_the_main_thread() -> (
    None
):
    errors: list[BaseException] = []

    def install() -> None:
        try:
            rlpulse.stop_on_sigterm()
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=install)
    thread.start()
    thread.join()
    assert len(errors) == 1
    assert isinstance(errors[0], RuntimeError)
    assert "main thread" in str(errors[0])


def test_a_previous_handler_that_returns_lets_the_process_go_on() -> None:
    calls: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: calls.append(signum))
    sink = InMemorySink()
    monitor = LoggerMonitor(sink, poll_interval=3600)
    monitor.watch(Source(), name="s", schedule=Every.seconds(3600))
    try:
        rlpulse.stop_on_sigterm()
        monitor.start()
        signal.raise_signal(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert calls == [signal.SIGTERM]
    assert frames_logged(sink, "s") == 1  # the final snapshot
    assert repr(monitor).endswith("idle)")  # stopped; the caller goes on
    monitor.stop()
    assert frames_logged(sink, "s") == 1


class FirstCallHangs:
    """A sink (log_metrics alone, no lock of its own) whose first call hangs until released; it counts the calls in it at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.released = threading.Event()
        self.calls = 0
        self.in_call = 0
        self.most_in_call = 0

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        with self.lock:
            self.calls += 1
            self.in_call += 1
            self.most_in_call = max(self.most_in_call, self.in_call)
            first = self.calls == 1
        try:
            if first:
                self.released.wait(20)
        finally:
            with self.lock:
                self.in_call -= 1


@pytest.fixture
def left_in_call() -> Iterator[tuple[FirstCallHangs, LoggerMonitor]]:
    """A stopped monitor whose sink is still in the call stop() gave up on, released at the end."""
    sink = FirstCallHangs()
    monitor = LoggerMonitor(sink, poll_interval=0.02, stop_timeout=0.3)
    monitor.watch(Source(), name="w")
    monitor.start()
    assert wait_until(lambda: sink.in_call == 1)
    monitor.stop(log_final=False)
    yield sink, monitor
    sink.released.set()
    monitor.stop()


@pytest.mark.timeout(60)
def test_a_restarted_monitor_calls_no_sink_still_in_the_call_stop_left_behind(
    left_in_call: tuple[FirstCallHangs, LoggerMonitor],
) -> None:
    # The new sender called the sink while the one stop() gave up on was
    # still in its call: two calls into one sink at once.
    sink, monitor = left_in_call
    monitor.start()
    time.sleep(0.5)

    assert sink.calls == 1  # waits for the call under way
    sink.released.set()
    assert wait_until(lambda: sink.calls > 2)
    monitor.stop()
    assert sink.most_in_call == 1


@pytest.mark.timeout(60)
def test_a_step_after_stop_calls_no_sink_still_in_the_call_stop_left_behind(
    left_in_call: tuple[FirstCallHangs, LoggerMonitor],
) -> None:
    # Delivered inline, beside the call stop() gave up on: two at once.
    sink, monitor = left_in_call
    dropped = monitor.stats()["dropped"]
    monitor.step()

    assert sink.calls == 1
    assert monitor.stats()["dropped"] == dropped + 1
    sink.released.set()
    assert wait_until(lambda: sink.in_call == 0)
    monitor.step()  # the call returned: the sink takes calls again
    assert sink.calls == 2
    assert sink.most_in_call == 1
