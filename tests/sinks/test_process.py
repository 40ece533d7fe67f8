"""SinkProcess: rlpulse's sinks fed from a child process, read back with their own readers."""

from __future__ import annotations

import collections
import contextlib
import gc
import io
import logging
import marshal
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import types
from collections.abc import Callable
from pathlib import Path

import pytest

from rlpulse import Event, LoggerMonitor, Record, SinkProcess, SinkProcessError, read
from rlpulse.naming import Kind, Payload
from rlpulse.sinks import process
from rlpulse.sinks.registry import SinkSpecError
from tests.support import wait_until

pytestmark = pytest.mark.timeout(60)


class Counter:
    def __init__(self) -> None:
        self.frames = 0

    def stats(self) -> dict[str, float]:
        self.frames += 10
        return {"frames": float(self.frames)}


def test_payloads_reach_every_sink_in_the_child_with_their_steps_and_timestamps(
    tmp_path: Path,
) -> None:
    store, lines = tmp_path / "metrics.sqlite", tmp_path / "metrics.jsonl"
    with SinkProcess(f"sqlite:{store}", f"jsonl:{lines}") as sinks:
        sinks.log_batch(
            [
                ({"rb/size": 1.0}, 1, 100.5),
                ({"rb/size": 2.0, "rb/writes": 4.0}, 2, 101.5),
            ]
        )
        sinks.log_metrics({"rb/size": 3.0}, step=None, timestamp=102.5)
        sinks.flush()
        # Flushed: both are readable while the child still runs.
        stored = [(r.wall_time, r.step, r.name, r.value) for r in read(store)]
        written = [(r.step, r.name, r.value) for r in read(lines)]
    assert stored == [
        (100.5, 1, "rb/size", 1.0),
        (101.5, 2, "rb/size", 2.0),
        (101.5, 2, "rb/writes", 4.0),
        (102.5, None, "rb/size", 3.0),
    ]
    assert written == [(step, name, value) for _, step, name, value in stored]


def test_descriptions_name_the_new_sqlite_run(tmp_path: Path) -> None:
    store = tmp_path / "metrics.sqlite"
    with SinkProcess(f"sqlite:{store}") as sinks:
        (description,) = sinks.descriptions
        sinks.log_metrics({"loss": 0.5}, step=1)
    run = description.split("run='")[1].rstrip("')")
    assert [record.value for record in read(store, run=run)] == [0.5]


def test_a_background_monitor_delivers_every_poll_and_its_stop_flushes(
    tmp_path: Path, wait_until: Callable[..., bool]
) -> None:
    store = tmp_path / "metrics.sqlite"
    with SinkProcess(f"sqlite:{store}") as sinks:
        monitor = LoggerMonitor(sinks, poll_interval=0.01)
        monitor.watch(Counter(), name="collector")
        monitor.start()
        assert wait_until(lambda: monitor.stats()["logged"] >= 3)
        monitor.stop()
        logged = monitor.stats()["logged"]
        # stop() flushed the sinks: everything logged is stored already.
        frames = [r.value for r in read(store) if r.name == "collector/frames"]
    assert logged >= 3
    assert len(frames) == logged
    assert frames == sorted(frames)


def test_a_console_spec_prints_on_this_process_standard_error(
    capfd: pytest.CaptureFixture[str],
) -> None:
    with SinkProcess("console:") as sinks:
        sinks.log_metrics({"collector/frames": 96.0}, step=3)
    assert "step=3" in capfd.readouterr().err


def test_numpy_values_are_sent_as_floats(tmp_path: Path) -> None:
    numpy = pytest.importorskip("numpy")
    store = tmp_path / "metrics.sqlite"
    with SinkProcess(f"sqlite:{store}") as sinks:
        sinks.log_metrics({"loss": numpy.float32(0.5)}, step=numpy.int64(2))
    assert [(r.step, r.value) for r in read(store)] == [(2, 0.5)]


def test_numpy_names_and_other_mappings_are_stored_as_in_this_process(
    tmp_path: Path,
) -> None:
    numpy = pytest.importorskip("numpy")
    store, lines = tmp_path / "metrics.sqlite", tmp_path / "metrics.jsonl"
    (name,) = numpy.array(["learner/loss"])  # a NumPy string, as a str
    with SinkProcess(f"sqlite:{store}", f"jsonl:{lines}") as sinks:
        sinks.log_metrics({name: 0.5}, step=1, timestamp=1.5)
        sinks.log_metrics(collections.OrderedDict(entropy=0.25), step=2, timestamp=2.5)
        sinks.log_metrics(types.MappingProxyType({"kl": 0.125}), step=3, timestamp=3.5)
        sinks.flush()
    expected = [
        Record(1.5, 1, "learner/loss", 0.5, Kind.GAUGE),
        Record(2.5, 2, "entropy", 0.25, Kind.GAUGE),
        Record(3.5, 3, "kl", 0.125, Kind.GAUGE),
    ]
    assert list(read(store)) == expected
    assert list(read(lines)) == expected
    assert all(type(record.name) is str for record in read(store))


def test_a_spec_the_child_cannot_open_raises_the_open_sink_error(
    tmp_path: Path,
) -> None:
    with pytest.raises(SinkSpecError, match="unknown sink scheme 'postgres'"):
        SinkProcess(f"sqlite:{tmp_path / 'a.sqlite'}", "postgres:db")


def test_a_refused_spec_leaves_no_run_behind_so_the_specs_open_once_it_is_fixed(
    tmp_path: Path,
) -> None:
    store = tmp_path / "a.sqlite"
    with pytest.raises(SinkSpecError, match="unknown sink scheme 'consol'"):
        SinkProcess(f"sqlite:{store}?run=exp1", "consol:")
    assert not store.exists()

    with SinkProcess(f"sqlite:{store}?run=exp1", "console:") as sinks:
        sinks.log_metrics({"loss": 1.0}, step=1, timestamp=1.0)
    assert [record.value for record in read(store, run="exp1")] == [1.0]


def test_a_file_holding_a_run_is_refused_in_the_child_unless_resumed(
    tmp_path: Path,
) -> None:
    lines = tmp_path / "metrics.jsonl"
    with SinkProcess(f"jsonl:{lines}") as sinks:
        sinks.log_metrics({"loss": 1.0}, step=1, timestamp=1.0)

    with pytest.raises(SinkSpecError, match=r"already holds a run.*\?resume'"):
        SinkProcess(f"jsonl:{lines}")

    with SinkProcess(f"jsonl:{lines}?resume") as sinks:
        sinks.log_metrics({"loss": 0.5}, step=2, timestamp=2.0)
    assert [record.value for record in read(lines)] == [1.0, 0.5]


@pytest.mark.parametrize(
    ("arguments", "options", "error", "message"),
    [
        ((), {}, ValueError, "at least one sink spec"),
        ((42,), {}, TypeError, "sink specs 'SCHEME:TARGET'"),
        ((["sqlite:a.sqlite"],), {}, TypeError, r"SinkProcess\(\*specs\)"),
        ((("sqlite:a", "console:"),), {}, TypeError, r"SinkProcess\(\*specs\)"),
        (("console:",), {"start_timeout": 0}, ValueError, "start_timeout must be"),
        (("console:",), {"close_timeout": True}, TypeError, "close_timeout must be"),
    ],
)
def test_bad_arguments_are_refused_before_a_process_starts(
    arguments: tuple[object, ...],
    options: dict[str, object],
    error: type[Exception],
    message: str,
) -> None:
    with pytest.raises(error, match=message):
        SinkProcess(*arguments, **options)  # type: ignore[arg-type]


def test_logging_after_close_raises_and_closing_again_does_nothing(
    tmp_path: Path,
) -> None:
    sinks = SinkProcess(f"sqlite:{tmp_path / 'a.sqlite'}")
    sinks.close()
    sinks.close()
    assert sinks._process.returncode == 0
    with pytest.raises(RuntimeError, match="is closed"):
        sinks.log_metrics({"loss": 1.0})


def test_a_dead_child_is_reported_by_the_next_call(tmp_path: Path) -> None:
    with SinkProcess(f"sqlite:{tmp_path / 'a.sqlite'}") as sinks:
        os.kill(sinks.pid, signal.SIGKILL)
        sinks._process.wait(10)
        with pytest.raises(SinkProcessError, match="exited with code -9"):
            sinks.flush()


def test_the_child_ignores_the_terminal_interrupt_and_keeps_writing(
    tmp_path: Path,
) -> None:
    store = tmp_path / "metrics.sqlite"
    with SinkProcess(f"sqlite:{store}") as sinks:
        # Open: the child ignored SIGINT before it answered.
        os.kill(sinks.pid, signal.SIGINT)
        sinks.log_metrics({"loss": 1.0}, step=1)
        sinks.flush()
    assert [r.step for r in read(store)] == [1]


def test_a_flush_gives_up_at_its_timeout_while_the_child_is_stopped(
    tmp_path: Path,
) -> None:
    store = tmp_path / "metrics.sqlite"
    with SinkProcess(f"sqlite:{store}") as sinks:
        os.kill(sinks.pid, signal.SIGSTOP)  # a sink stuck on a hung disk
        try:
            sinks.log_metrics({"loss": 1.0}, step=1)
            started = time.monotonic()
            with pytest.raises(
                SinkProcessError, match=r"has not flushed within 0\.3 s"
            ):
                sinks.flush(timeout=0.3)
            assert time.monotonic() - started < 10
        finally:
            os.kill(sinks.pid, signal.SIGCONT)
        sinks.log_metrics({"loss": 2.0}, step=2)
        # The late answer to the first flush does not end this one early.
        sinks.flush()
        assert [r.step for r in read(store)] == [1, 2]


def test_a_flush_gives_up_at_its_timeout_behind_a_call_blocked_on_a_full_pipe(
    tmp_path: Path,
) -> None:
    store = tmp_path / "metrics.sqlite"
    batch = [
        ({f"w/metric_{index}": float(step) for index in range(2000)}, step, 1.5)
        for step in range(60)
    ]
    with SinkProcess(f"sqlite:{store}") as sinks:
        os.kill(sinks.pid, signal.SIGSTOP)
        try:
            # Well over the pipe's 1 MiB: the call blocks until the child reads.
            sender = threading.Thread(target=sinks.log_batch, args=(batch,))
            sender.start()
            sender.join(0.3)
            assert sender.is_alive()
            with pytest.raises(SinkProcessError, match="has not flushed within"):
                sinks.flush(timeout=0.3)
        finally:
            os.kill(sinks.pid, signal.SIGCONT)
        sender.join(30)
        assert not sender.is_alive()
        sinks.flush(timeout=30)
        assert sum(1 for _ in read(store)) == 60 * 2000


def test_close_kills_a_child_that_reads_nothing_behind_a_call_blocked_on_a_full_pipe(
    tmp_path: Path,
) -> None:
    big = {f"w/metric_{index}": float(index) for index in range(2000)}
    sinks = SinkProcess(f"jsonl:{tmp_path / 'm.jsonl'}", close_timeout=0.5)
    os.kill(sinks.pid, signal.SIGSTOP)  # a child stuck, reading nothing
    failures: list[BaseException] = []

    def keep_sending() -> None:
        try:
            while True:
                sinks.log_batch([(big, 1, 1.5)])
        except BaseException as error:  # what ended it is asserted
            failures.append(error)

    sender = threading.Thread(target=keep_sending, daemon=True)
    sender.start()
    time.sleep(0.5)  # the pipe is full: the sender waits, holding the sink
    assert sender.is_alive()
    closer = threading.Thread(target=sinks.close, daemon=True)
    closer.start()
    closer.join(20)

    assert not closer.is_alive()
    sender.join(20)
    assert [type(error) for error in failures] == [SinkProcessError]
    assert sinks._process.poll() is not None  # reaped


# A sink the child opens from "flaky:": its first batch takes a second, then
# every other batch fails, so the child writes news after nearly every batch.
_FLAKY_SINK = """
import time
from rlpulse.sinks import registry

class Flaky:
    def __init__(self):
        self.calls = 0

    def log_metrics(self, metrics, step=None):
        self.log_batch([(metrics, step, None)])

    def log_batch(self, payloads):
        self.calls += 1
        if self.calls == 1:
            time.sleep(1.0)
        if self.calls % 2 == 0:
            raise OSError("flaky " + "x" * 1000)

    def flush(self):
        pass

    def close(self):
        pass

registry.register_scheme("flaky", lambda target: Flaky())
"""


def test_a_call_blocked_on_a_full_pipe_reads_the_news_the_child_waits_to_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "sitecustomize.py").write_text(_FLAKY_SINK)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    store = tmp_path / "m.jsonl"
    big = {f"w/metric_{index}": float(index) for index in range(20_000)}
    sinks = SinkProcess("flaky:", f"jsonl:{store}", close_timeout=5)
    outcome: list[BaseException | None] = []

    def send() -> None:
        # Small batches fill the pipe while the child sleeps; after it, it
        # writes about 1 KiB of news for every other one (well over the
        # 64 KiB the pipe back holds) while this call waits for room.
        try:
            for step in range(300):
                sinks.log_batch([({"loss": 1.0}, step, 1.5)])
            sinks.log_batch([(big, 300, 1.5)])
        except SinkProcessError as error:
            outcome.append(error)
        else:
            outcome.append(None)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    sender.join(30)
    try:
        assert not sender.is_alive(), "the call and the child waited on each other"
        assert len(outcome) == 1
        # Whichever of the flaky sink's calls came last may have failed.
        with contextlib.suppress(SinkProcessError):
            sinks.flush(timeout=30)
    finally:
        sinks.close()
    lines = store.read_text().splitlines()
    assert len(lines) == 301


# A sink the child opens from "slow:PATH": each call takes 0.2 s, then
# appends the steps it was given to PATH, one a line.
_SLOW_SINK = """
import time
from rlpulse.sinks import registry

class Slow:
    def __init__(self, path):
        self.path = path

    def log_metrics(self, metrics, step=None):
        self.log_batch([(metrics, step, None)])

    def log_batch(self, payloads):
        time.sleep(0.2)
        with open(self.path, "a") as file:
            file.writelines(f"{step}\\n" for _, step, _ in payloads)

    def flush(self):
        pass

    def close(self):
        pass

registry.register_scheme("slow", Slow)
"""


def test_a_child_behind_a_slow_sink_at_close_says_what_it_did_not_deliver_before_the_parent_s_deadline(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    (tmp_path / "sitecustomize.py").write_text(_SLOW_SINK)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    delivered = tmp_path / "delivered.txt"
    sinks = SinkProcess(f"slow:{delivered}", queue_size=2, close_timeout=2.0)
    # Two payloads a 0.2 s call: ten seconds of work for the slow sink, in
    # the pipe and in the child when close() begins.
    for step in range(100):
        sinks.log_batch([({"loss": 1.0}, step, 1.5)])
    started = time.monotonic()
    sinks.close()
    took = time.monotonic() - started

    line = re.search(
        r"stopped without draining <sitecustomize\.Slow .*> within 1\.6 s: .*; "
        r"(\d+) payloads? (?:was|were) not delivered",
        capfd.readouterr().err,
    )
    assert line is not None, "the child said nothing of what it did not deliver"
    not_delivered = int(line.group(1))
    assert 0 < not_delivered <= 100
    assert len(delivered.read_text().splitlines()) + not_delivered >= 100
    # It said so and exited in time: the parent killed nothing.
    assert sinks._process.returncode == 0
    assert took < 2.0
    assert "killed" not in caplog.text


def test_close_says_in_one_warning_that_it_killed_a_child_that_did_not_end_in_time(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sinks = SinkProcess(f"sqlite:{tmp_path / 'm.sqlite'}", close_timeout=0.3)
    sinks.log_metrics({"loss": 1.0}, step=1)
    os.kill(sinks.pid, signal.SIGSTOP)  # a child stuck, on a hung disk say
    with caplog.at_level(logging.WARNING, logger="rlpulse"):
        sinks.close()

    assert sinks._process.returncode == -signal.SIGKILL
    [warning] = [record for record in caplog.records if "killed" in record.message]
    assert warning.levelno == logging.WARNING
    assert re.fullmatch(
        rf"SinkProcess\('sqlite:.*'\) killed its sink process \(pid {sinks.pid}\): "
        r"it had not ended 0\.3 s after close\(\) began; .*may be lost.*",
        warning.message,
    )


@pytest.mark.parametrize(
    ("timeout", "error"),
    [(-1.0, ValueError), (float("nan"), ValueError), (True, TypeError)],
)
def test_a_flush_refuses_a_timeout_that_is_no_number_of_seconds(
    tmp_path: Path, timeout: float, error: type[Exception]
) -> None:
    with (
        SinkProcess(f"sqlite:{tmp_path / 'a.sqlite'}") as sinks,
        pytest.raises(error, match="timeout"),
    ):
        sinks.flush(timeout=timeout)


def test_works_in_a_process_holding_more_files_than_select_can_watch(
    tmp_path: Path,
) -> None:
    # select() refuses descriptors past FD_SETSIZE (1,024); a training
    # process with many files open (one per metric for TorchRL's CSVLogger)
    # hands the sink process such descriptors.
    resource = pytest.importorskip("resource")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"this process may open only {hard} files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        store = tmp_path / "metrics.sqlite"
        with SinkProcess(f"sqlite:{store}") as sinks:
            assert min(sinks._pipes.inbox, sinks._pipes.outbox) > 1024
            sinks.log_metrics({"loss": 1.0}, step=1)
            sinks.flush(timeout=30)
        assert [r.step for r in read(store)] == [1]
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_cannot_log_and_does_not_hold_the_pipe_open(
    tmp_path: Path,
) -> None:
    store = tmp_path / "metrics.sqlite"
    sinks = SinkProcess(f"sqlite:{store}", close_timeout=30)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the forked child
        os.close(read_end)
        try:
            sinks.log_metrics({"loss": 9.0})
            verdict = b"logged"
        except RuntimeError as error:
            verdict = (
                b"refused" if b"belongs to process" in str(error).encode() else b"?"
            )
        sinks.close()
        os.write(write_end, verdict)
        time.sleep(5)  # still alive while the parent closes its sink process
        os._exit(0)
    os.close(write_end)
    try:
        assert os.read(read_end, 16) == b"refused"
        sinks.log_metrics({"loss": 1.0})
        started = time.monotonic()
        sinks.close()
        # The child's copy of the pipe was closed at the fork: the sink
        # process saw the end at once, not at its kill after close_timeout.
        assert time.monotonic() - started < 10
        assert sinks._process.returncode == 0
    finally:
        os.close(read_end)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert [r.value for r in read(store)] == [1.0]


def test_what_was_sent_is_stored_even_when_the_parent_is_killed(
    tmp_path: Path, wait_until: Callable[..., bool]
) -> None:
    store = tmp_path / "metrics.sqlite"
    script = textwrap.dedent(
        f"""
        import sys, time
        from rlpulse import SinkProcess
        sinks = SinkProcess({f"sqlite:{store}"!r})
        for step in range(2000):
            sinks.log_batch([({{"w/frames": float(step)}}, step, None)])
        print(sinks.pid, flush=True)
        time.sleep(60)
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        parent.kill()  # kill -9: no flush, no close, no exit hook
        parent.wait(10)
    finally:
        parent.kill()
        if parent.stdout is not None:
            parent.stdout.close()
    # The child reads to the pipe's end, stores it all and exits.
    assert wait_until(lambda: _exited(child), timeout=30)
    assert [r.step for r in read(store)] == list(range(2000))


def _exited(pid: int) -> bool:
    """Whether a process that is not our child has exited (gone, or a zombie nobody reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def test_a_sink_process_dropped_without_close_lets_its_child_exit(
    tmp_path: Path, wait_until: Callable[..., bool]
) -> None:
    store = tmp_path / "metrics.sqlite"
    sinks = SinkProcess(f"sqlite:{store}")
    sinks.log_metrics({"loss": 1.0}, step=1)
    child = sinks.pid
    del sinks
    gc.collect()
    assert wait_until(lambda: _exited(child), timeout=30)
    assert [r.step for r in read(store)] == [1]


class ChildSide:
    """The child's side (``_serve``) run on a thread of this process, spoken to through real pipes."""

    def __init__(self) -> None:
        to_child, self.outbox = os.pipe()
        self.inbox, from_child = os.pipe()
        closing_heard, self.closing_notice = os.pipe()
        self.ledger = process._Ledger.create(2)
        self.exit_code: int | None = None

        def serve() -> None:
            with (
                os.fdopen(to_child, "rb") as inbox,
                os.fdopen(from_child, "wb", buffering=0) as outbox,
            ):
                self.exit_code = process._serve(
                    inbox, outbox, closing_heard, self.ledger.fd
                )

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()
        self.reader = os.fdopen(self.inbox, "rb")

    def send(self, message: object) -> None:
        body = marshal.dumps(message)
        os.write(self.outbox, process._HEADER.pack(len(body)) + body)

    def receive(self) -> object:
        return process._read_message(self.reader)

    def end(self) -> int | None:
        with contextlib.suppress(BrokenPipeError):  # a child that refused
            os.write(self.closing_notice, process._CLOSING)
        os.close(self.closing_notice)
        os.close(self.outbox)
        self.thread.join(10)
        self.reader.close()
        self.ledger.forget_fd()
        return self.exit_code


def test_the_child_side_reports_a_failing_sink_once_and_its_recovery(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = io.StringIO()
    broken.close()
    monkeypatch.setattr(sys, "stderr", broken)
    store = tmp_path / "metrics.sqlite"
    child = ChildSide()
    child.send(("open", ["console:", f"sqlite:{store}"], 1000, 10.0))
    kind, descriptions = child.receive()  # type: ignore[misc]
    assert kind == "ready"
    assert descriptions[0] == "ConsoleLogger(None)"
    child.send(("batch", [({"loss": 1.0}, 1, 1.5)]))
    child.send(("batch", [({"loss": 2.0}, 2, 2.5)]))
    child.send(("flush",))
    # One message for the streak, however many calls fail in it.
    assert child.receive() == (
        "failing",
        0,
        "ValueError: I/O operation on closed file",
    )
    assert child.receive() == ("flushed",)
    printed = io.StringIO()
    monkeypatch.setattr(sys, "stderr", printed)
    child.send(("flush",))  # a flush with nothing to write ends no streak
    assert child.receive() == ("flushed",)
    child.send(("batch", [({"loss": 3.0}, 3, 3.5)]))
    child.send(("flush",))
    assert child.receive() == ("recovered", 0)
    assert child.receive() == ("flushed",)
    assert child.end() == 0
    assert "loss=3" in printed.getvalue()
    assert [r.step for r in read(store)] == [1, 2, 3]


def test_the_child_side_refuses_a_spec_and_closes_what_it_opened(
    tmp_path: Path,
) -> None:
    child = ChildSide()
    child.send(("open", [f"csv:{tmp_path / 'a.csv'}", "nope:x"], 1000, 10.0))
    kind, message = child.receive()  # type: ignore[misc]
    assert kind == "refused"
    assert "unknown sink scheme 'nope'" in message
    assert child.end() == 1


def test_the_child_side_exits_when_its_parent_ends_before_asking_anything() -> None:
    assert ChildSide().end() == 1


def test_a_child_that_does_not_answer_in_time_is_killed_and_reported() -> None:
    with pytest.raises(SinkSpecError, match=r"did not start within 0\.001 s"):
        SinkProcess("console:", start_timeout=0.001)


def _wide(step: int, width: int = 500) -> Payload:
    return Payload(
        {f"w/metric_{index}": float(step) for index in range(width)},
        step,
        1.5,
        {"w/metric_0": Kind.COUNTER},
    )


def test_payloads_taken_without_waiting_arrive_whole_and_in_order_and_a_full_pipe_refuses_more(
    tmp_path: Path,
) -> None:
    store = tmp_path / "metrics.sqlite"
    taken: list[int] = []
    with SinkProcess(f"sqlite:{store}") as sinks:
        os.kill(sinks.pid, signal.SIGSTOP)  # reading nothing: the pipe fills
        try:
            for step in range(100_000):
                started = time.monotonic()
                took = sinks.try_log_payloads([_wide(step)])
                assert time.monotonic() - started < 1.0  # never waits
                if not took:
                    break
                taken.append(step)
            assert len(taken) > 10
            # The last taken may sit half in the pipe; still nothing more fits.
            assert not sinks.try_log_payloads([_wide(len(taken))])
        finally:
            os.kill(sinks.pid, signal.SIGCONT)
        sinks.log_payloads([_wide(len(taken) + 1)])
        sinks.flush(timeout=30)
    records = list(read(store))
    steps = sorted({record.step for record in records})
    assert steps == [*taken, len(taken) + 1]
    assert len(records) == 500 * len(steps)
    counters = {record.name for record in records if record.kind is Kind.COUNTER}
    assert counters == {"w/metric_0"}


def test_a_monitor_hands_its_rounds_to_the_child_on_the_polling_thread(
    tmp_path: Path,
) -> None:
    store = tmp_path / "metrics.sqlite"
    callers: set[str] = set()
    with SinkProcess(f"sqlite:{store}") as sinks:
        taking = sinks.try_log_payloads

        def try_log_payloads(payloads: list[Payload]) -> bool:
            callers.add(threading.current_thread().name)
            return taking(payloads)

        sinks.try_log_payloads = try_log_payloads  # type: ignore[method-assign]
        monitor = LoggerMonitor(sinks, poll_interval=0.01)
        monitor.watch(Counter(), name="collector")
        monitor.start()
        time.sleep(0.3)
        monitor.stop()
        logged = monitor.stats()["logged"]
    frames = [
        record.value for record in read(store) if record.name == "collector/frames"
    ]
    assert len(frames) == logged > 10
    assert frames == sorted(frames)
    assert callers <= {"rlpulse-poller", threading.current_thread().name}
    assert "rlpulse-poller" in callers


def test_a_child_that_reads_nothing_holds_up_no_round_and_what_its_queue_drops_is_counted(
    tmp_path: Path,
) -> None:
    store = tmp_path / "metrics.sqlite"

    class Wide:
        def __init__(self) -> None:
            self.calls = 0

        def stats(self) -> dict[str, float]:
            self.calls += 1
            return {f"metric_{index}": float(self.calls) for index in range(2000)}

    source = Wide()
    with SinkProcess(f"sqlite:{store}", close_timeout=1.0) as sinks:
        monitor = LoggerMonitor(
            sinks, poll_interval=0.005, queue_size=5, stop_timeout=2.0
        )
        monitor.watch(source, name="w")
        os.kill(sinks.pid, signal.SIGSTOP)
        try:
            monitor.start()
            # Hundreds of rounds, over a MiB: the pipe is full, the sender blocked.
            assert wait_until(lambda: monitor.stats()["dropped"] > 0, timeout=30)
            polls = source.calls
            assert wait_until(lambda: source.calls > polls + 20, timeout=10)
        finally:
            os.kill(sinks.pid, signal.SIGCONT)
        started = time.monotonic()
        monitor.stop()
        assert time.monotonic() - started < 10
        stats = monitor.stats()
        sinks.flush(timeout=30)
    stored = sum(1 for record in read(store) if record.name == "w/metric_0")
    assert stored + stats["dropped"] + sinks.dropped == stats["logged"]


def test_what_a_monitor_sends_a_killed_child_is_counted_and_said_at_stop(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = tmp_path / "metrics.sqlite"

    class Counter:
        frames = 0

        def stats(self) -> dict[str, float]:
            self.frames += 1
            return {"frames": float(self.frames)}

    sinks = SinkProcess(f"sqlite:{store}")
    monitor = LoggerMonitor(sinks, poll_interval=0.01, stop_timeout=3)
    monitor.watch(Counter(), name="c")
    with caplog.at_level(logging.WARNING, logger="rlpulse"):
        monitor.start()
        time.sleep(0.3)
        os.kill(sinks.pid, signal.SIGKILL)
        sinks._process.wait(10)
        assert wait_until(lambda: monitor.stats()["rejected"] >= 10)
        monitor.stop()
    with contextlib.suppress(SinkProcessError):
        sinks.close()
    stats = monitor.stats()
    stored = sum(1 for record in read(store) if record.name == "c/frames")

    # Every payload is stored or counted: what the child had not stored when
    # it was killed in dropped (a batch stored at the very moment of the
    # kill is counted in it too), what was logged after in rejected.
    assert stored + stats["rejected"] + stats["dropped"] >= stats["logged"]
    assert stored + stats["rejected"] <= stats["logged"]
    said = caplog.messages[-1]
    assert said.startswith(
        "LoggerMonitor: since start(), sink SinkProcess did not deliver"
    )
    assert f"{stats['rejected']} lost to its failed calls (counted in rejected)" in said


# Sinks the child opens from "stuck:" (its first call never returns: what
# follows waits in the child's queue and the pipe) and "refusing:" (every
# call raises ValueError, an error not worth trying again).
_STUCK_AND_REFUSING_SINKS = """
import time
from rlpulse.sinks import registry

class Stuck:
    def log_metrics(self, metrics, step=None):
        self.log_batch([(metrics, step, None)])

    def log_batch(self, payloads):
        time.sleep(3600)

    def flush(self):
        pass

    def close(self):
        pass

class Refusing:
    def log_metrics(self, metrics, step=None):
        self.log_batch([(metrics, step, None)])

    def log_batch(self, payloads):
        raise ValueError("refused: no such metric")

    def flush(self):
        pass

    def close(self):
        pass

class Away:
    def log_metrics(self, metrics, step=None):
        self.log_batch([(metrics, step, None)])

    def log_batch(self, payloads):
        from rlpulse import TransientSinkError

        raise TransientSinkError("its far end is away")

    def flush(self):
        pass

    def close(self):
        pass

registry.register_scheme("stuck", lambda target: Stuck())
registry.register_scheme("refusing", lambda target: Refusing())
registry.register_scheme("away", lambda target: Away())
"""


@pytest.fixture
def stuck_and_refusing_sinks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sitecustomize.py").write_text(_STUCK_AND_REFUSING_SINKS)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))


@pytest.mark.usefixtures("stuck_and_refusing_sinks")
def test_what_a_killed_child_had_not_delivered_is_counted_dropped_and_said_at_stop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sinks = SinkProcess("stuck:", queue_size=2, close_timeout=1.0)
    monitor = LoggerMonitor(sinks, poll_interval=0.01, stop_timeout=3)
    monitor.watch(Counter(), name="c")
    with caplog.at_level(logging.WARNING, logger="rlpulse"):
        monitor.start()
        # Payloads in the stuck call, in the child's queue and in the pipe.
        assert wait_until(lambda: monitor.stats()["logged"] >= 20)
        os.kill(sinks.pid, signal.SIGKILL)
        sinks._process.wait(10)
        # What the monitor logs after the kill is refused by the dead child.
        assert wait_until(lambda: monitor.stats()["rejected"] >= 5)
        monitor.stop()
    sinks.close()
    stats = monitor.stats()

    # The stuck sink delivered nothing: every payload is counted, once.
    assert stats["dropped"] + stats["rejected"] == stats["logged"]
    assert stats["dropped"] >= 20
    said = caplog.messages[-1]
    assert said == (
        "LoggerMonitor: since start(), sink SinkProcess did not deliver "
        f"{stats['logged']} payloads: {stats['rejected']} lost to its failed "
        f"calls (counted in rejected) and {stats['dropped']} lost after it took "
        "them (counted in dropped)."
    )
    # The first call after the kill is refused, and says what went with it.
    [failing] = [m for m in caplog.messages if "failed to log watch" in m]
    assert re.search(
        rf"exited with code -9; its sinks had not delivered {stats['dropped']} "
        "payloads it was sent, lost with it",
        failing,
    )


@pytest.mark.usefixtures("stuck_and_refusing_sinks")
def test_what_a_sink_in_the_child_refuses_is_counted_rejected_and_said_at_stop(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = tmp_path / "metrics.sqlite"
    with SinkProcess("refusing:", f"sqlite:{store}") as sinks:
        monitor = LoggerMonitor(sinks, poll_interval=0.01)
        monitor.watch(Counter(), name="c")
        with caplog.at_level(logging.WARNING, logger="rlpulse"):
            monitor.start()
            assert wait_until(lambda: monitor.stats()["logged"] >= 10)
            monitor.stop()
        stats = monitor.stats()
    stored = sum(1 for record in read(store) if record.name == "c/frames")

    # Each sink in the child took or refused every payload.
    assert stored == stats["logged"]
    assert stats["rejected"] == stats["logged"]
    assert stats["dropped"] == 0
    said = caplog.messages[-1]
    assert said == (
        f"LoggerMonitor: since start(), sink SinkProcess did not deliver "
        f"{stats['logged']} payloads: {stats['logged']} refused by the sinks it "
        "feeds (counted in rejected)."
    )


@pytest.mark.usefixtures("stuck_and_refusing_sinks")
def test_what_a_full_queue_in_the_child_drops_is_a_dropping_event_and_a_warning_in_the_parent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events: list[Event] = []
    with (
        SinkProcess("away:", queue_size=3, close_timeout=1.0) as sinks,
        caplog.at_level(logging.WARNING, logger="rlpulse"),
    ):
        monitor = LoggerMonitor(
            sinks, poll_interval=0.01, stop_timeout=2.0, on_event=events.append
        )
        monitor.watch(Counter(), name="c")
        with monitor:
            # The child keeps 3 payloads for its sink to take once back.
            assert wait_until(
                lambda: any(event.kind == "dropping" for event in events), timeout=30
            )
            time.sleep(0.2)  # more drops: said once a minute at most
    (dropping,) = [event for event in events if event.kind == "dropping"]
    assert dropping.watch == ""
    assert dropping.value >= 1
    assert dropping.message.startswith("sink SinkProcess dropped ")
    assert monitor.stats()["dropped"] >= dropping.value
    assert any(
        message.startswith("LoggerMonitor: sink SinkProcess dropped ")
        for message in caplog.messages
    )


@pytest.mark.usefixtures("stuck_and_refusing_sinks")
def test_what_a_sink_process_of_two_monitors_loses_is_counted_once_between_them() -> (
    None
):
    with SinkProcess("refusing:") as sinks:
        first = LoggerMonitor(sinks, background=False, on_error="ignore")
        second = LoggerMonitor(sinks, background=False, on_error="ignore")
        first.watch(Counter(), name="a")
        second.watch(Counter(), name="b")
        for _ in range(3):
            first.step()
            second.step()
        first.stop()
        second.stop()
        lost = sinks.losses()
    counted = first.stats()["rejected"] + second.stats()["rejected"]

    assert lost.rejected == 8  # three steps and a final snapshot each
    assert counted == lost.rejected


@pytest.mark.usefixtures("stuck_and_refusing_sinks")
def test_in_manual_mode_what_a_sink_in_the_child_refuses_is_counted_rejected(
    tmp_path: Path,
) -> None:
    with SinkProcess("refusing:") as sinks:
        monitor = LoggerMonitor(sinks, background=False)
        monitor.watch(Counter(), name="c")
        for _ in range(5):
            monitor.step()
        monitor.stop()  # flushed: the child has answered for all it took
        stats, lost = monitor.stats(), sinks.losses()
    # Everything the child's sink refused is counted by the monitor, once;
    # each payload the child took is logged once (not polled again).
    assert lost.rejected >= 5
    assert stats["rejected"] == lost.rejected == stats["logged"]
    assert stats["dropped"] == lost.dropped == 0


def test_a_sink_in_the_child_whose_events_fail_says_so_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Its failing log_event went unsaid: the parent heard nothing, and the
    # child wrote nothing.
    from rlpulse.runtime.events import Event
    from rlpulse.runtime.queues import Item
    from rlpulse.sinks.process import _Hosted, _Ledger

    class RefusingEvents:
        def log_metrics(
            self, metrics: dict[str, float], step: int | None = None
        ) -> None:
            pass

        def log_event(self, event: Event) -> None:
            raise OSError("disk I/O error")

        def close(self) -> None:
            pass

    told: list[object] = []
    hosted = _Hosted([RefusingEvents()], told.append, 16, _Ledger.create(1))
    for _ in range(3):
        hosted.put_event(Event(time.time(), "w", "stalled", "no progress", 1.0))
        hosted.put([Item({"w/x": 1.0}, None, 0.0, "w", {}, {})])
    time.sleep(0.5)
    hosted.close(time.monotonic() + 2, 2, 0)

    said = [line for line in capsys.readouterr().err.splitlines() if "event" in line]
    assert len(said) == 1
    assert "failed to log a stalled event: OSError: disk I/O error" in said[0]
    assert told == []  # its payloads went through: no failing sink
