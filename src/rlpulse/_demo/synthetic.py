"""The monitored pipelines of ``rlpulse demo``: the synthetic one, and what every demo shares.

``rlpulse demo`` runs a TorchRL pipeline when TorchRL is installed (see
:mod:`rlpulse._demo.torchrl_pipeline`) and this module's synthetic one otherwise, or
with ``--synthetic``. Both record through :class:`DemoSinks` and end with
:func:`finish`, which prints the summary of the run and its chart
(:func:`report`) and returns the :class:`DemoResult`.

The synthetic pipeline is three standard-library stand-ins for the parts of a reinforcement-learning
data pipeline, each with a TorchRL-style ``stats()`` snapshot:

- :class:`Producer` plays a data collector: a thread writing frames in
  batches, at a steady rate, into
- :class:`RingBuffer`, a bounded replay buffer, from which
- :class:`Consumer` plays a learner: a thread sampling batches.

:func:`run_demo` wires them to a background :class:`~rlpulse.LoggerMonitor`
writing to an :class:`~rlpulse.sinks.SQLiteLogger`, a
:class:`~rlpulse.sinks.ConsoleLogger` and any extra sinks, runs them for a
while and prints the summary of the recorded run.
"""

from __future__ import annotations

import abc
import contextlib
import os
import random
import shlex
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TextIO, TypeVar

from rlpulse.monitor import LoggerMonitor
from rlpulse.read.plot import INSTALL_HINT, plot_file
from rlpulse.read.summary import (
    format_duration,
    format_number,
    format_summary,
    summarize_file,
)
from rlpulse.schedules import Every
from rlpulse.sinks import ConsoleLogger, SQLiteLogger
from rlpulse.sinks.registry import MetricSink, SinkSpecError, open_sink

__all__ = [
    "DEFAULT_OUT",
    "Consumer",
    "DemoResult",
    "DemoSinks",
    "Producer",
    "RingBuffer",
    "chart_path",
    "finish",
    "report",
    "run_demo",
]

DEFAULT_OUT = Path("runs") / "demo.sqlite"
"""Where ``rlpulse demo`` writes its runs unless told otherwise."""

Item = TypeVar("Item")

_BUFFER_CAPACITY = 20_000
_COLLECTOR_SCHEDULE = Every.counter("frames", 10_000) | Every.seconds(5)
_BUFFER_SCHEDULE = Every.seconds(1)
_LEARNER_SCHEDULE = Every.seconds(2)


class RingBuffer(Generic[Item]):
    """A bounded, thread-safe replay buffer: the newest ``capacity`` items, sampled uniformly.

    Writing past the capacity overwrites the oldest items. Its ``stats()``
    has the keys of a TorchRL replay buffer's: ``size``, ``write_count``
    (items ever written), ``capacity``, ``utilization`` (``size / capacity``)
    and ``sample_calls``. ``seed`` makes the sampling reproducible.

    >>> buffer = RingBuffer(capacity=3, seed=0)
    >>> buffer.extend([1, 2, 3, 4])
    >>> sorted(set(buffer.sample(10)))
    [2, 3, 4]
    >>> buffer.stats()
    {'size': 3, 'write_count': 4, 'capacity': 3, 'utilization': 1.0, 'sample_calls': 1}
    """

    def __init__(self, capacity: int, *, seed: int | None = None) -> None:
        if not isinstance(capacity, int) or capacity < 1:
            raise ValueError(
                f"capacity must be a positive whole number of items, got {capacity!r}"
            )
        self._capacity = capacity
        self._items: list[Item] = []
        self._next_slot = 0
        self._write_count = 0
        self._sample_calls = 0
        self._random = random.Random(seed)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def extend(self, items: Sequence[Item]) -> None:
        """Write ``items`` in order, overwriting the oldest once the buffer is full.

        >>> buffer = RingBuffer(capacity=2)
        >>> buffer.extend(["a", "b", "c"])
        >>> len(buffer), buffer.stats()["write_count"]
        (2, 3)
        """
        with self._lock:
            for item in items:
                if len(self._items) < self._capacity:
                    self._items.append(item)
                else:
                    self._items[self._next_slot] = item
                self._next_slot = (self._next_slot + 1) % self._capacity
            self._write_count += len(items)

    def sample(self, batch_size: int) -> list[Item]:
        """Return ``batch_size`` items drawn uniformly, with replacement.

        >>> RingBuffer(capacity=4).sample(1)
        Traceback (most recent call last):
        ...
        ValueError: cannot sample from an empty RingBuffer: extend() it first
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size!r}")
        with self._lock:
            if not self._items:
                raise ValueError(
                    "cannot sample from an empty RingBuffer: extend() it first"
                )
            self._sample_calls += 1
            return self._random.choices(self._items, k=batch_size)

    def stats(self) -> dict[str, float]:
        """Return the buffer's snapshot: size, writes, capacity, utilization, samples.

        >>> RingBuffer(capacity=10).stats()["utilization"]
        0.0
        """
        with self._lock:
            size = len(self._items)
            return {
                "size": size,
                "write_count": self._write_count,
                "capacity": self._capacity,
                "utilization": size / self._capacity,
                "sample_calls": self._sample_calls,
            }


class _PacedThread(abc.ABC):
    """A daemon thread calling ``_work()`` at a steady rate until stopped."""

    def __init__(self, interval: float, thread_name: str) -> None:
        self._interval = interval
        self._thread_name = thread_name
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None

    @abc.abstractmethod
    def _work(self) -> None:
        """One unit of work; subclasses say what."""

    @property
    def running(self) -> bool:
        """Whether the thread has been started and not yet stopped.

        >>> Producer(RingBuffer(capacity=10)).running
        False
        """
        return self._thread is not None

    def start(self) -> None:
        """Start the thread; the first step runs at once, the next ones at the set pace.

        >>> producer = Producer(RingBuffer(capacity=1000))
        >>> producer.start()
        >>> producer.running
        True
        >>> producer.stop()
        >>> producer.running
        False
        """
        if self._thread is not None:
            raise RuntimeError(
                f"{type(self).__name__} is already running: stop() it first"
            )
        self._stop_event.clear()
        self._thread = threading.Thread(
            target=self._run, name=self._thread_name, daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread and wait up to ``timeout`` seconds for it; stopping again does nothing.

        >>> consumer = Consumer(RingBuffer(capacity=10))
        >>> consumer.start()
        >>> consumer.stop()
        >>> consumer.stop()
        >>> consumer.running
        False
        """
        thread = self._thread
        if thread is None:
            return
        self._stop_event.set()
        thread.join(timeout)
        self._thread = None

    def _run(self) -> None:
        next_due = time.monotonic()
        while not self._stop_event.is_set():
            self._work()
            next_due += self._interval
            delay = next_due - time.monotonic()
            if delay > 0:
                self._stop_event.wait(delay)
            elif delay < -self._interval:
                # Fallen behind (a busy machine): keep the pace from now on
                # rather than catching up in a burst.
                next_due = time.monotonic()


class Producer(_PacedThread):
    """A stand-in for a data collector: a thread writing frames in batches into a buffer.

    Each :meth:`collect` writes one batch of ``batch_size`` frames (numbered
    from 0) into ``buffer``; :meth:`start` does so from a thread, paced to
    ``frames_per_second``, until :meth:`stop`. Its ``stats()`` has a TorchRL
    collector's cumulative counters ``frames`` and ``batches``.

    >>> buffer = RingBuffer(capacity=1000)
    >>> producer = Producer(buffer, frames_per_second=4000, batch_size=100)
    >>> producer.collect()
    100
    >>> producer.stats(), buffer.stats()["write_count"]
    ({'frames': 100, 'batches': 1}, 100)
    """

    def __init__(
        self,
        buffer: RingBuffer[int],
        *,
        frames_per_second: float = 4000.0,
        batch_size: int = 100,
    ) -> None:
        if not frames_per_second > 0:
            raise ValueError(
                f"frames_per_second must be positive, got {frames_per_second!r}"
            )
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size!r}")
        super().__init__(batch_size / frames_per_second, "rlpulse-demo-producer")
        self.buffer = buffer
        self.batch_size = batch_size
        self._frames = 0
        self._batches = 0

    def collect(self) -> int:
        """Write one batch of frames into the buffer and return how many.

        >>> producer = Producer(RingBuffer(capacity=10), batch_size=4)
        >>> producer.collect(), producer.collect(), producer.buffer.sample(1)[0] < 8
        (4, 4, True)
        """
        first = self._frames
        self.buffer.extend(range(first, first + self.batch_size))
        self._frames += self.batch_size
        self._batches += 1
        return self.batch_size

    def _work(self) -> None:
        self.collect()

    def stats(self) -> dict[str, float]:
        """Return the frames and batches written so far.

        >>> Producer(RingBuffer(capacity=10)).stats()
        {'frames': 0, 'batches': 0}
        """
        return {"frames": self._frames, "batches": self._batches}


class Consumer(_PacedThread):
    """A stand-in for a learner: a thread sampling batches from a buffer.

    Each :meth:`update` samples one batch of ``batch_size`` frames, once the
    buffer holds that many; :meth:`start` does so from a thread, paced to
    ``updates_per_second``, until :meth:`stop`. Its ``stats()`` counts
    ``updates`` and ``frames_sampled``.

    >>> buffer = RingBuffer(capacity=1000, seed=0)
    >>> consumer = Consumer(buffer, batch_size=32)
    >>> consumer.update()  # nothing to learn from yet
    False
    >>> buffer.extend(range(64))
    >>> consumer.update()
    True
    >>> consumer.stats()
    {'updates': 1, 'frames_sampled': 32}
    """

    def __init__(
        self,
        buffer: RingBuffer[int],
        *,
        batch_size: int = 256,
        updates_per_second: float = 50.0,
    ) -> None:
        if not updates_per_second > 0:
            raise ValueError(
                f"updates_per_second must be positive, got {updates_per_second!r}"
            )
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size!r}")
        super().__init__(1 / updates_per_second, "rlpulse-demo-consumer")
        self.buffer = buffer
        self.batch_size = batch_size
        self._updates = 0
        self._frames_sampled = 0

    def update(self) -> bool:
        """Sample one batch when the buffer holds enough frames; return whether it did.

        >>> Consumer(RingBuffer(capacity=10), batch_size=4).update()
        False
        """
        if len(self.buffer) < self.batch_size:
            return False
        batch = self.buffer.sample(self.batch_size)
        self._updates += 1
        self._frames_sampled += len(batch)
        return True

    def _work(self) -> None:
        self.update()

    def stats(self) -> dict[str, float]:
        """Return the updates made and frames sampled so far.

        >>> Consumer(RingBuffer(capacity=10)).stats()
        {'updates': 0, 'frames_sampled': 0}
        """
        return {"updates": self._updates, "frames_sampled": self._frames_sampled}


@dataclass(frozen=True)
class DemoResult:
    """What one demo run did: where it wrote, under which run name, for how long.

    ``frames`` is the number of frames the collector wrote in all,
    ``interrupted`` tells whether Ctrl-C ended the run early, and ``chart`` is
    the image drawn of the run (``None`` when matplotlib is not installed).

    >>> DemoResult(Path("runs/demo.sqlite"), "baseline", 2.0, 8000, False).run
    'baseline'
    """

    path: Path
    run: str
    seconds: float
    frames: int
    interrupted: bool
    chart: Path | None = None


class DemoSinks:
    """The sinks of one demo run: a new run of the SQLite store, the console, and extra sinks from specs.

    Extra sinks are built with :func:`rlpulse.open_sink` from ``SCHEME:TARGET``
    specs (``csv:runs/demo.csv``, ``tensorboard:runs/tb``, …). Everything is
    opened here and closed by :meth:`close`; when one cannot be opened, the
    ones already open are closed before the error propagates: a
    :class:`SinkSpecError` for a bad spec or a backend that is not installed,
    an ``OSError`` for an unwritable path.

    >>> import io, tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     sinks = DemoSinks(pathlib.Path(tmp) / "demo.sqlite",
    ...                       [f"csv:{pathlib.Path(tmp) / 'demo.csv'}"], io.StringIO())
    ...     [type(sink).__name__ for sink in sinks.all]
    ...     sinks.close()
    ['SQLiteLogger', 'ConsoleLogger', 'CSVLogger']
    """

    def __init__(
        self,
        out: str | os.PathLike[str],
        specs: Sequence[str] = (),
        console: TextIO | None = None,
    ) -> None:
        self.out = out
        self.specs = tuple(specs)
        self.extra: list[MetricSink] = []
        try:
            for spec in specs:
                try:
                    self.extra.append(open_sink(spec))
                except (ValueError, ImportError) as error:
                    raise SinkSpecError(str(error)) from error
            self.store = SQLiteLogger(out)
        except BaseException:
            self._close_all(self.extra)
            raise
        self.console = ConsoleLogger(console)

    @property
    def all(self) -> list[MetricSink]:
        """The store, the console and the extra sinks, in that order.

        >>> import io, tempfile, pathlib
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     sinks = DemoSinks(pathlib.Path(tmp) / "demo.sqlite", console=io.StringIO())
        ...     len(sinks.all)
        ...     sinks.close()
        2
        """
        return [self.store, self.console, *self.extra]

    def describe(self) -> str:
        """Where the run is recorded, as a demo's opening line names it: the store and its run, the extra sinks' specs, the console.

        >>> import io, tempfile, pathlib
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     sinks = DemoSinks(pathlib.Path(tmp) / "demo.sqlite",
        ...                       [f"csv:{pathlib.Path(tmp) / 'demo.csv'}"], io.StringIO())
        ...     description = sinks.describe().replace(tmp, "TMP").replace(sinks.store.run, "RUN")
        ...     sinks.close()
        >>> description
        'TMP/demo.sqlite (run RUN), csv:TMP/demo.csv and the console'
        """
        extra = "".join(f", {spec}" for spec in self.specs)
        return f"{self.out} (run {self.store.run}){extra} and the console"

    def close(self) -> None:
        """Close every sink, even when closing one of them fails; closing again does nothing.

        >>> import io, tempfile, pathlib
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     sinks = DemoSinks(pathlib.Path(tmp) / "demo.sqlite", console=io.StringIO())
        ...     sinks.close()
        ...     sinks.close()
        """
        self._close_all(self.all)

    @staticmethod
    def _close_all(sinks: Sequence[MetricSink]) -> None:
        # An exit stack runs every callback even when one raises, then
        # re-raises; callbacks run last in, first out.
        with contextlib.ExitStack() as stack:
            for sink in reversed(sinks):
                stack.callback(sink.close)


def chart_path(out: str | os.PathLike[str]) -> Path:
    """Where a demo writing to ``out`` draws its chart: the same name with ``.png``.

    >>> chart_path("runs/demo.sqlite"), chart_path("runs/demo.png")
    (PosixPath('runs/demo.png'), PosixPath('runs/demo.png.png'))
    """
    out = Path(out)
    chart = out.with_suffix(".png")
    return chart if chart != out else out.with_name(out.name + ".png")


def report(
    sinks: DemoSinks,
    out: str | os.PathLike[str],
    *,
    elapsed: float,
    interrupted: bool,
    stdout: TextIO,
    chart: bool = True,
) -> Path | None:
    """Print how a demo run ended: its summary, its chart, how to see it again; return the chart's path.

    The chart is drawn next to ``out`` (see :func:`chart_path`) with
    :func:`rlpulse.read.plot.plot_file`; without matplotlib, or with
    ``chart=False``, it is skipped (with a one-line note in the first case)
    and ``None`` is returned. The last line printed is always the
    ``rlpulse show`` command that prints the summary again.

    >>> import io, tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     out = pathlib.Path(tmp) / "demo.sqlite"
    ...     sinks = DemoSinks(out, console=io.StringIO())
    ...     sinks.store.log_metrics({"collector/frames": 96.0}, step=3)
    ...     sinks.close()
    ...     output = io.StringIO()
    ...     report(sinks, out, elapsed=1.0, interrupted=True, stdout=output, chart=False)
    ...     print(output.getvalue().splitlines()[0])
    Stopped early after 1.0 s.
    """
    if interrupted:
        print(f"Stopped early after {format_duration(elapsed)}.", file=stdout)
    store = sinks.store
    print(file=stdout)
    print(format_summary(summarize_file(store.path, store.run)), file=stdout)
    print(file=stdout)
    quoted_out = shlex.quote(os.fspath(out))
    drawn: Path | None = None
    if chart:
        target = chart_path(out)
        try:
            drawn = plot_file(store.path, target, run=store.run)
        except ImportError:
            print(
                f"No chart: matplotlib is not installed ({INSTALL_HINT}).",
                file=stdout,
            )
        else:
            print(
                f"Chart of the run: {target} (redraw it with: rlpulse plot "
                f"{quoted_out} -o {shlex.quote(os.fspath(target))})",
                file=stdout,
            )
    print(f"See it again with: rlpulse show {quoted_out}", file=stdout, flush=True)
    return drawn


def finish(
    sinks: DemoSinks,
    *,
    started: float,
    frames: int,
    interrupted: bool,
    stdout: TextIO,
    chart: bool = True,
) -> DemoResult:
    """End a demo run once its pipeline stopped and its ``sinks`` are closed: print its :func:`report`, return its :class:`DemoResult`.

    ``started`` is when the run began, on ``time.monotonic()``'s clock, and
    ``frames`` the number of frames its collector wrote in all; ``chart``
    and ``stdout`` are those of :func:`report`.

    >>> import io, tempfile, pathlib, time
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     started = time.monotonic()
    ...     sinks = DemoSinks(pathlib.Path(tmp) / "demo.sqlite", console=io.StringIO())
    ...     sinks.store.log_metrics({"collector/frames": 96.0}, step=3)
    ...     sinks.close()
    ...     result = finish(sinks, started=started, frames=96, interrupted=False,
    ...                     stdout=io.StringIO(), chart=False)
    ...     result.run == sinks.store.run, result.frames, result.seconds >= 0, result.chart
    (True, 96, True, None)
    """
    elapsed = time.monotonic() - started
    drawn = report(
        sinks,
        sinks.out,
        elapsed=elapsed,
        interrupted=interrupted,
        stdout=stdout,
        chart=chart,
    )
    return DemoResult(
        path=sinks.store.path,
        run=sinks.store.run,
        seconds=elapsed,
        frames=frames,
        interrupted=interrupted,
        chart=drawn,
    )


def run_demo(
    seconds: float = 30.0,
    out: str | os.PathLike[str] = DEFAULT_OUT,
    *,
    sinks: Sequence[str] = (),
    poll_interval: float = 0.25,
    frames_per_second: float = 4000.0,
    chart: bool = True,
    stdout: TextIO | None = None,
    console: TextIO | None = None,
) -> DemoResult:
    """Run the synthetic demo pipeline (standard library only) for ``seconds``, then print the summary of its run.

    A :class:`Producer` fills a :class:`RingBuffer` that a :class:`Consumer`
    samples from, while a background :class:`~rlpulse.LoggerMonitor`
    (polling every ``poll_interval`` seconds) logs them as ``collector``
    (every 10,000 frames, and at least every 5 s), ``buffer`` (every second,
    at step ``write_count``) and ``learner`` (every 2 s) into a new run of the
    SQLite file ``out``, onto ``console`` (standard error by default) and into
    every extra sink opened from the ``sinks`` specs (see :class:`DemoSinks`).
    A progress line, the run's summary, the chart (``chart=True``, drawn
    next to ``out`` when matplotlib is installed, see :func:`report`) and how
    to show the run again go to ``stdout`` (standard output by default).
    Ctrl-C ends the run early; the threads and the monitor are stopped and
    every sink the demo opened is closed either way, so every watch's final
    snapshot is recorded.

    >>> import io, tempfile, pathlib
    >>> from rlpulse.read.records import read
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     output = io.StringIO()
    ...     result = run_demo(0.3, pathlib.Path(tmp) / "demo.sqlite", chart=False,
    ...                       stdout=output, console=io.StringIO())
    ...     final_frames = [r.value for r in read(result.path) if r.name == "collector/frames"][-1]
    >>> final_frames == result.frames > 0
    True
    >>> "rlpulse show" in output.getvalue()
    True
    """
    if not seconds > 0:
        raise ValueError(f"seconds must be positive, got {seconds!r}")
    stdout = sys.stdout if stdout is None else stdout
    demo_sinks = DemoSinks(out, sinks, console)
    buffer: RingBuffer[int] = RingBuffer(_BUFFER_CAPACITY)
    producer = Producer(buffer, frames_per_second=frames_per_second)
    consumer = Consumer(buffer)
    monitor = LoggerMonitor(demo_sinks.all, poll_interval=poll_interval)
    monitor.watch(producer, name="collector", schedule=_COLLECTOR_SCHEDULE)
    monitor.watch(buffer, name="buffer", schedule=_BUFFER_SCHEDULE, step="write_count")
    monitor.watch(
        consumer,
        name="learner",
        schedule=_LEARNER_SCHEDULE,
        step="updates",
        rate_keys=("updates", "frames_sampled"),
    )
    interrupted = False
    started = time.monotonic()
    try:
        producer.start()
        consumer.start()
        monitor.start()
        print(
            f"rlpulse demo: collector -> ring buffer -> learner "
            f"(~{format_number(frames_per_second)} frames/s) for "
            f"{format_duration(seconds)}, monitored into {demo_sinks.describe()}; "
            "Ctrl-C stops early",
            file=stdout,
            flush=True,
        )
        time.sleep(seconds)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        # The pipeline stops first, so the final snapshots show where it ended.
        producer.stop()
        consumer.stop()
        monitor.stop()
        demo_sinks.close()
    return finish(
        demo_sinks,
        started=started,
        frames=int(producer.stats()["frames"]),
        interrupted=interrupted,
        stdout=stdout,
        chart=chart,
    )
