"""Sinks in a process of their own: storing and printing off the training loop's interpreter lock.

A sink's Python work (building SQLite rows, formatting console lines) holds
the GIL while it runs; beside a CPU-bound main thread that is time the loop
waits. :class:`SinkProcess` runs rlpulse's sinks, opened from specs
(``"sqlite:runs/a.sqlite"``, ``"console:"``; see
:func:`rlpulse.open_sink`), in a child Python process. In this process a
monitor's round of payloads costs one encoding and one pipe write, on the
polling thread at the end of the round (:meth:`SinkProcess.try_log_payloads`;
the monitor's sender thread takes over only while the pipe is full),
however many sinks the child feeds.

The pipe protocol is ours, not a library's: frames of a 4-byte length and a
``marshal`` body, between two processes of the same interpreter (``marshal``
is the standard library's fastest encoder of the lists, strings and bytes a
frame is made of, and its format is stable within one Python version).
``multiprocessing``'s connections would not serve: their ``send`` writes a
message whole, waiting while the pipe is full, where the polling thread
must hand over without waiting, sending the rest of a frame the pipe took
in part with the next write; and their child start-up (``spawn``) runs the
parent's main module again in the child, a training script's included,
where ``subprocess`` starts a bare interpreter on this module.

Parent to child: ``("open", specs, queue_size, close_timeout)`` once, then
``("batch", payloads)``, ``("payloads", new layouts, new kinds, layout
numbers, values, steps, wall times, kinds numbers, histograms, watches)``
(a monitor's payloads, column by column: each payload's metric names by the
number of its layout, a layout's names sent once with its number; every
value in one array of doubles; each payload's kinds mapping by number, sent
once; each payload's watch only where one is empty), ``("event", fields)`` and ``("flush",)``; end of file means close. A
third pipe, apart from the payloads so that a child behind on them hears it
at once, carries one byte when the parent begins to close the child: its
deadline counts from then, as the parent's kill does.
Child to parent: ``("ready", descriptions)`` or ``("refused", message)``,
then ``("failing", index, message)`` when a hosted sink starts failing,
``("recovered", index)`` when it writes again, and ``("flushed",)`` for each
flush. What each hosted sink did with the payloads (delivered, rejected,
dropped) is not said on the pipe but counted in a ledger both processes map
(:class:`_Ledger`): the parent reads it when it wants, and what it reads
outlives the child, so that the parent knows, the child killed, how many
payloads it had sent that no sink there had done with.
"""

from __future__ import annotations

import array
import contextlib
import functools
import itertools
import logging
import marshal
import mmap
import operator
import os
import select
import signal
import site
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from rlpulse.distributions import Histogram
from rlpulse.naming import Kind, Payload, inferred_kinds
from rlpulse.runtime.deadline import check_timeout
from rlpulse.runtime.events import Event
from rlpulse.runtime.queues import Item, QueueListener, SinkQueue
from rlpulse.runtime.retry import TransientSinkError
from rlpulse.runtime.sinks import Losses, Sink
from rlpulse.runtime.threads import MonitorThread
from rlpulse.sinks.base import BatchSink
from rlpulse.sinks.registry import SinkSpecError, open_sinks
from rlpulse.text import plural

__all__ = ["SinkProcess", "SinkProcessError"]

_HEADER = struct.Struct(">I")
# The pipe to the child holds this many bytes (Linux: F_SETPIPE_SZ, at most
# /proc/sys/fs/pipe-max-size, 1 MiB unless raised): dozens of rounds, so that
# a round's payloads go in without waiting while the child is busy.
_PIPE_BYTES = 1 << 20
# Not "-m rlpulse.sinks.process": that module is imported by rlpulse's
# __init__ first, and running it again as __main__ makes runpy warn.
_CHILD_MAIN = "from rlpulse.sinks.process import _main; _main()"
# What the parent writes on the third pipe when it begins to close the child.
_CLOSING = b"c"
# The share of close_timeout the child has to close its sinks, and to say
# what they did not take, before the parent kills it.
_DRAIN_SHARE = 0.8

_log = logging.getLogger("rlpulse")


class SinkProcessError(RuntimeError):
    """A sink in a :class:`SinkProcess` failed, or the process itself is gone.

    >>> str(SinkProcessError("SQLiteLogger('a.sqlite') in the sink process: disk full"))
    "SQLiteLogger('a.sqlite') in the sink process: disk full"
    """

    payloads_taken = False
    """Whether the call that raised it had sent its payloads to the sink process: it reports a sink there failing, not their loss (:func:`rlpulse.runtime.retry.payloads_lost`)."""


class SinkProcess(BatchSink):
    """A sink that hands its payloads to sinks running in a child process.

    Use it beside a CPU-bound training loop: storing and printing then run
    on another core under the child's own interpreter lock, and this
    process pays one encoding and one pipe write per batch (see "Loop
    slowdown" in ``docs/benchmarks.md``). ``specs`` are sink specs as
    :func:`rlpulse.open_sink` takes them; each is opened in the child, which
    feeds them in turn. The constructor waits until they are open (up to
    ``start_timeout`` seconds) and raises :class:`rlpulse.SinkSpecError` for a
    spec the child cannot open, the sinks opened before it taken back (a
    SQLite run they started: see :func:`rlpulse.sinks.registry.open_sinks`);
    ``descriptions`` then says what each sink is (a new SQLite run's name
    among it).

    ``log_metrics`` and ``log_batch`` return once the payloads are in the
    pipe (a full pipe, when the child falls behind, blocks them: a monitor's
    queue in front then drops, counted, as for any slow sink); ``flush()``
    returns once the child has written and flushed everything sent before
    (``flush(timeout=...)`` raises :class:`SinkProcessError` when it has not
    by then).
    A hosted sink that fails (a full disk) makes the next call raise
    :class:`SinkProcessError` naming it, until it writes again; the others
    are fed all along. Each hosted sink is fed from a queue of its own in
    the child, as a monitor feeds its sinks: a call that fails with
    :class:`~rlpulse.TransientSinkError` (a full disk) keeps its payloads
    there, tried again after a back-off, up to ``queue_size`` payloads, the
    oldest dropped past it (counted in :attr:`dropped`); a slow sink is
    waited for once its queue is full. What the sinks there lose is in
    :meth:`losses`, which a monitor counts in its ``dropped`` and
    ``rejected``: what a sink refused for good, what its queue dropped, and
    what a child that died (killed, say; it is not started again, and every
    later call raises) had been sent and not delivered.
    ``close()`` lets the child write what is pending and
    close its sinks, killing it after ``close_timeout`` seconds (the child
    says first, on standard error, what a sink did not take; a kill is
    warned about). If this
    process dies, even by ``kill -9``, the child still writes everything it
    was sent, then exits. Console specs print to this process's standard
    output and error, which the child shares.

    >>> import tempfile, pathlib
    >>> from rlpulse import read
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "metrics.sqlite"
    ...     with SinkProcess(f"sqlite:{path}") as sink:
    ...         sink.log_metrics({"collector/frames": 96.0}, step=3, timestamp=1.5)
    ...     print(list(read(path)))
    [Record(wall_time=1.5, step=3, name='collector/frames', value=96.0, kind=<Kind.COUNTER: 'counter'>)]
    """

    def __init__(
        self,
        *specs: str,
        start_timeout: float = 30.0,
        close_timeout: float = 10.0,
        queue_size: int = 1000,
    ) -> None:
        _check_arguments(
            specs,
            start_timeout=start_timeout,
            close_timeout=close_timeout,
            queue_size=queue_size,
        )
        self.specs = specs
        self.close_timeout = float(close_timeout)
        self.queue_size = queue_size
        """The most payloads each sink in the child keeps while it cannot take them."""
        self._lock = threading.Lock()
        self._closed = False
        self._pid = os.getpid()
        self._failing: dict[int, str] = {}
        self._flushes_sent = self._flushes_answered = 0
        # What the child knows by number: each layout of metric names sent,
        # each kinds mapping sent (by identity, kept alive).
        self._layouts = _Numbering()
        self._kinds = _Numbering()
        self._kinds_kept: dict[int, Mapping[str, Kind]] = {}
        # The payloads written into the pipe, against which the ledger's
        # counts tell, once the child has ended, what it had not done with.
        self._payloads_sent = 0
        self._child_ended = False
        self._ledger = _Ledger.create(len(specs))
        self._losses_read = (self._ledger.losses_bytes(), Losses(0, 0))
        try:
            spawned = _spawn(self._ledger.fd)
        finally:
            self._ledger.forget_fd()
        self._process, outbox, inbox, self._closing_notice = spawned
        self._pipes = _Pipes(outbox, inbox)
        self._ends = _Ends(outbox, inbox, self._closing_notice)
        # Collected without close(): the child sees the pipe's end and exits.
        weakref.finalize(self, self._ends.close_all)
        self.pid = self._process.pid
        """The child's process id."""
        _LIVE.add(self)
        try:
            self.descriptions: list[str] = self._open_sinks(start_timeout)
            """What each sink in the child is, as its ``repr`` says, in the order of ``specs``."""
        except BaseException:
            self._kill()
            self._ends.close_all()
            raise

    def _open_sinks(self, start_timeout: float) -> list[str]:
        self._send(("open", list(self.specs), self.queue_size, self.close_timeout))
        reply = self._receive(time.monotonic() + start_timeout)
        if reply is not None and reply[0] == "ready":
            return list(reply[1])
        if reply is not None:
            raise SinkSpecError(reply[1])
        self._kill()
        code = self._process.returncode
        how = (
            f"exited with code {code}"
            if code is not None and code >= 0
            else f"did not start within {start_timeout:g} s"
        )
        raise SinkSpecError(
            f"the sink process for {', '.join(map(repr, self.specs))} {how}; "
            "see its standard error above"
        )

    def log_batch(
        self,
        payloads: Iterable[tuple[Mapping[str, float], int | None, float | None]],
    ) -> None:
        """Send several ``(metrics, step, timestamp)`` payloads in one pipe write; a ``timestamp`` of ``None`` means now."""
        batch = list(payloads)
        if not _marshals_as_is(batch):
            now = time.time()
            batch = [
                _plain(metrics, step, now if timestamp is None else timestamp)
                for metrics, step, timestamp in batch
            ]
        self._hand_over(("batch", batch) if batch else None, len(batch))

    def log_payloads(self, payloads: Iterable[Payload]) -> None:
        """Send payloads whose metrics' kinds are known (a monitor's) in one pipe write; each kinds mapping goes once."""
        batch = list(payloads)
        if not batch:
            return
        self._check_process()
        with self._lock:
            self._check_open()
            frame, new_layouts, new_kinds = self._encode_payloads(batch)
            self._send_frame(frame)
            self._sent(batch, new_layouts, new_kinds)
            self._read_news(time.monotonic())
            self._raise_failures()

    def try_log_payloads(self, payloads: Sequence[Payload]) -> bool:
        """Send payloads as :meth:`log_payloads` does if that takes no waiting; return whether they were sent.

        A monitor's polling thread hands its round's payloads over so, at
        the end of the round, in one pipe write, and queues them for
        :meth:`log_payloads` on its sender thread when this returns
        ``False``: another call is under way, the pipe is full, or this
        sink is closed. A failing hosted sink raises
        :class:`SinkProcessError` after the payloads were sent, as
        :meth:`log_payloads` does.

        >>> import tempfile, pathlib
        >>> from rlpulse import read
        >>> from rlpulse.naming import Kind
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = pathlib.Path(tmp) / "metrics.sqlite"
        ...     with SinkProcess(f"sqlite:{path}") as sink:
        ...         payload = Payload({"collector/frames": 96.0}, 3, 1.5, {"collector/frames": Kind.COUNTER})
        ...         sink.try_log_payloads([payload])
        ...     [record.value for record in read(path)]
        True
        [96.0]
        """
        if self._pid != os.getpid() or not self._lock.acquire(blocking=False):
            return False
        try:
            if self._closed or not payloads:
                return not payloads
            frame, new_layouts, new_kinds = self._encode_payloads(payloads)
            try:
                if not self._pipes.try_send(frame):
                    return False
            except BrokenPipeError:
                raise self._gone() from None
            self._sent(payloads, new_layouts, new_kinds)
            # The child's news without waiting; its end is its exit.
            self._read_news(time.monotonic())
            if self._pipes.ended:
                raise self._gone(taken=True)
            self._raise_failures(check_process=False)
            return True
        finally:
            self._lock.release()

    @property
    def unfinished(self) -> bool:
        """Whether the pipe took only part of the last round :meth:`try_log_payloads` handed over: :meth:`finish_sending` writes the rest."""
        return self._pipes.unfinished

    def finish_sending(self) -> None:
        """Write the rest of a round the pipe took only part of, waiting for room (at most ``close_timeout`` seconds): the child then has it whole.

        What a monitor's sender thread calls after a round handed over on
        the polling thread went only partly into the pipe, so that the round
        does not wait for the next write to reach the child.
        """
        with self._lock:
            if self._pid == os.getpid() and not self._closed:
                self._pipes.finish(time.monotonic() + self.close_timeout)

    def _encode_payloads(
        self, batch: Sequence[Payload]
    ) -> tuple[bytes, dict[Any, int], dict[Any, int]]:
        """One ``"payloads"`` frame of ``batch``, and the layouts and kinds mappings it numbers for the first time.

        Column by column, each in one pass in C: the names of a payload's
        metrics go once per layout (a watch's names, in order), then by
        the layout's number; the values of every payload go as one array
        of doubles (which makes each of them a float); each kinds mapping
        goes once (a watch's mapping is replaced, never changed, when it
        meets a new metric), then by its number.
        """
        metrics = list(map(_metrics_of, batch))
        layouts = list(map(tuple, metrics))
        layout_numbers, new_layouts = self._layouts.number(layouts)
        kinds = list(map(_kinds_of, batch))
        kinds_numbers, new_kinds = self._kinds.number(list(map(id, kinds)))
        mappings = {id(mapping): mapping for mapping in kinds} if new_kinds else {}
        steps = list(map(_step_of, batch))
        if not _PLAIN_STEPS.issuperset(map(type, steps)):
            steps = [None if step is None else int(step) for step in steps]
        histograms = (
            [_histograms_sent(payload.distributions) for payload in batch]
            if any(map(_distributions_of, batch))
            else None
        )
        # The watch of an empty snapshot is in none of its names: it goes
        # along, for a console to name (the others' go unsaid).
        watches = [payload.watch for payload in batch] if not all(metrics) else None
        message = (
            "payloads",
            [(number, list(map(str, names))) for names, number in new_layouts.items()],
            [
                (number, {str(name): str(kind) for name, kind in mappings[key].items()})
                for key, number in new_kinds.items()
            ],
            layout_numbers,
            _doubles(list(itertools.chain.from_iterable(map(_values_of, metrics)))),
            steps,
            _doubles(list(map(_wall_time_of, batch))),
            kinds_numbers,
            histograms,
            watches,
        )
        return _frame(message), new_layouts, new_kinds

    def _sent(
        self,
        batch: Sequence[Payload],
        new_layouts: dict[Any, int],
        new_kinds: dict[Any, int],
    ) -> None:
        self._payloads_sent += len(batch)
        # What the child now knows by number; a kinds mapping is kept, so
        # that no other mapping takes its id.
        self._layouts.numbers.update(new_layouts)
        if new_kinds:
            self._kinds.numbers.update(new_kinds)
            for payload in batch:
                self._kinds_kept[id(payload.kinds)] = payload.kinds

    def log_event(self, event: Event) -> None:
        """Send ``event`` to the hosted sinks that store events (``log_event``), after what was sent before.

        >>> import tempfile, pathlib
        >>> from rlpulse import Event, read_events
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = pathlib.Path(tmp) / "metrics.sqlite"
        ...     with SinkProcess(f"sqlite:{path}", "csv:" + str(pathlib.Path(tmp) / "m.csv")) as sink:
        ...         sink.log_event(Event(1.5, "collector", "stalled", "no progress", 30.0))
        ...     [event.kind for event in read_events(path)]
        ['stalled']
        """
        fields = (
            float(event.wall_time),
            str(event.watch),
            str(event.kind),
            str(event.message),
            float(event.value),
        )
        self._hand_over(("event", fields))

    def _hand_over(self, message: Any, payloads: int = 0) -> None:
        # Send ``message`` (if any) of ``payloads`` payloads, then hear what
        # the child says: a hosted sink failing is raised here.
        self._check_process()
        with self._lock:
            self._check_open()
            if message is not None:
                self._send_frame(_frame(message))
                self._payloads_sent += payloads
            self._read_news(time.monotonic())
            self._raise_failures()

    def flush(self, timeout: float | None = None) -> None:
        """Return once the child has written and flushed everything sent before.

        ``timeout``: the most seconds to wait (``None``: as long as the
        sinks take). Past it :class:`SinkProcessError` is raised, saying the
        child has not flushed yet; the child goes on, and a later ``flush``
        or ``close`` waits for it again.
        """
        check_timeout("timeout", timeout)
        self._check_process()
        deadline = None if timeout is None else time.monotonic() + timeout
        # Another call may hold the lock, blocked on a full pipe.
        if not self._lock.acquire(timeout=-1 if timeout is None else timeout):
            raise self._not_flushed(timeout)
        try:
            self._check_open()
            if not self._send(("flush",), deadline):
                raise self._not_flushed(timeout)
            self._flushes_sent += 1
            while self._flushes_answered < self._flushes_sent:
                if self._receive(deadline) is None:
                    if self._pipes.ended:
                        raise self._gone()
                    raise self._not_flushed(timeout)
            self._raise_failures()
        finally:
            self._lock.release()

    def close(self) -> None:
        """Let the child write what is pending and close its sinks, then reap it, within ``close_timeout`` seconds; closing again does nothing.

        The child is told at once, apart from the payloads it may still be
        reading: by 80 % of ``close_timeout`` it stops feeding its sinks and
        says on standard error, in one line a sink, how many payloads a sink
        did not take. A child that has not ended by ``close_timeout`` (or
        that has read nothing for that long while another call waits on a
        full pipe; that call then raises :class:`SinkProcessError`) is
        killed, with a warning on the ``rlpulse`` logger: what it still held
        is lost.
        """
        if self._pid != os.getpid():
            return  # the parent's sink process, not this forked child's
        deadline = time.monotonic() + self.close_timeout
        self._ends.close(self._closing_notice, last_words=_CLOSING)
        if not self._lock.acquire(timeout=self.close_timeout):
            # Another call holds the lock, blocked on a full pipe: the child
            # has read nothing for close_timeout. Killed, it fails that call
            # (SinkProcessError), which lets go of the lock.
            self._kill_at_close(
                f"it had read nothing for {self.close_timeout:g} s while "
                "another call waited on a full pipe"
            )
            if not self._lock.acquire(timeout=self.close_timeout):
                return  # pragma: no cover - that call never returned
        try:
            if self._closed:
                return
            self._closed = True
            self._pipes.finish(deadline)
            self._ends.close(self._pipes.outbox)
            try:
                self._process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._kill_at_close(
                    f"it had not ended {self.close_timeout:g} s after close() began"
                )
            self._child_ended = True
            self._ends.close_all()
        finally:
            self._lock.release()

    def __enter__(self) -> SinkProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SinkProcess({', '.join(map(repr, self.specs))})"

    def _check_process(self) -> None:
        # Before taking the lock: a fork may have copied it held.
        if self._pid != os.getpid():
            raise RuntimeError(
                f"{self!r} belongs to process {self._pid}, not to this child of "
                "it; create a new SinkProcess here"
            )

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(
                f"{self!r} is closed; create a new SinkProcess to keep logging"
            )

    def _send(self, message: Any, deadline: float | None = None) -> bool:
        """Write ``message`` to the child (see :meth:`_Pipes.send`); False when ``deadline`` came first."""
        return self._send_frame(_frame(message), deadline)

    def _send_frame(self, frame: bytes, deadline: float | None = None) -> bool:
        try:
            return self._pipes.send(frame, deadline)
        except BrokenPipeError:
            raise self._gone() from None

    def _receive(self, deadline: float | None) -> Any:
        """Return the next message from the child, or ``None`` at its end (or at ``deadline``)."""
        message = self._pipes.receive(deadline)
        if message is None:
            return None
        if message[0] == "failing":
            self._failing[message[1]] = message[2]
        elif message[0] == "recovered":
            self._failing.pop(message[1], None)
        elif message[0] == "flushed":
            self._flushes_answered += 1
        return message

    def _read_news(self, deadline: float) -> None:
        # What the child said since the last call, without waiting for more.
        while self._receive(deadline) is not None:
            pass

    def _raise_failures(self, *, check_process: bool = True) -> None:
        if self._failing:
            # Said after the call's payloads were sent: they are the child's.
            failing = SinkProcessError(
                "; ".join(
                    f"{self.descriptions[index]} in the sink process: {message}"
                    for index, message in sorted(self._failing.items())
                )
            )
            failing.payloads_taken = True
            raise failing
        if check_process and self._process.poll() is not None:
            # After the call's payloads went into the pipe: they are among
            # those the child had not done with (losses()).
            raise self._gone(taken=True)

    def _gone(self, *, taken: bool = False) -> SinkProcessError:
        """The error that says the child has ended; ``taken``: the call raising it had sent its payloads, counted in :meth:`losses`."""
        code = self._process.poll()
        how = "is exiting" if code is None else f"exited with code {code}"
        # Its end of the pipe closed: it writes nothing more in the ledger.
        self._child_ended = True
        undelivered = self._undelivered()
        gone = SinkProcessError(
            f"the sink process of {self!r} {how}; its sinks had not delivered "
            f"{plural(undelivered, 'payload')} it was sent, lost with it (in its "
            "losses(), which a monitor counts in dropped); see its standard error "
            "above, and create a new SinkProcess to keep logging"
        )
        gone.payloads_taken = taken
        return gone

    def losses(self) -> Losses:
        """What the sinks in the child lost of the payloads this process handed them: each payload once a sink that lost it.

        ``rejected``: payloads a sink there refused for good (an error not
        worth trying again; :class:`~rlpulse.TransientSinkError` payloads
        are kept and tried again). ``dropped``: payloads a full queue there
        dropped, and, once the child has ended (killed, say, or closed
        before its sinks took everything), those it had been sent that a
        sink there had not done with. A monitor's queue reads this after
        each hand-over and at ``stop()``, and counts what grew in its
        ``dropped`` and ``rejected`` (see :class:`rlpulse.runtime.sinks.Losses`).

        >>> with SinkProcess("console:") as sink:
        ...     sink.losses()
        Losses(dropped=0, rejected=0)
        """
        # Read after every hand-over: unchanged, as a rule, and then
        # answered from the bytes of the counts of losses alone.
        ledger = self._ledger
        read = ledger.losses_bytes()
        last_read, losses = self._losses_read
        if read == last_read and not self._child_ended:
            return losses
        counts = ledger.counts.tolist()
        dropped = sum(ledger.field(counts, _DROPPED))
        if self._child_ended:
            dropped += self._undelivered(counts)
        losses = Losses(dropped, sum(ledger.field(counts, _REJECTED)))
        # One assignment: another thread may read it meanwhile.
        self._losses_read = (read, losses)
        return losses

    @property
    def dropped(self) -> int:
        """Payloads the child's sinks' queues dropped, oldest first, being full; with, once the child has ended, those it had not done with (see :meth:`losses`)."""
        return self.losses().dropped

    def _undelivered(self, counts: list[int] | None = None) -> int:
        # What the pipe took that a sink in the child had not delivered,
        # rejected or dropped: once the child has ended, lost with it.
        if counts is None:
            counts = self._ledger.counts.tolist()
        sent = self._payloads_sent
        fields = [self._ledger.field(counts, field) for field in _FIELDS]
        settled = zip(*fields, strict=True)
        return sum(max(0, sent - sum(done)) for done in settled)

    def _not_flushed(self, timeout: float | None) -> SinkProcessError:
        return SinkProcessError(
            f"the sink process of {self!r} has not flushed within {timeout:g} s: "
            "its sinks are slow or stuck (a full or hung disk?); it goes on "
            "writing, and a later flush() or close() waits for it again"
        )

    def _kill(self) -> None:
        with contextlib.suppress(OSError):
            self._process.kill()
        self._process.wait()

    def _kill_at_close(self, why: str) -> None:
        """Kill the child, which ``close()`` cannot wait for any longer, and say so in one warning."""
        _log.warning(
            "%r killed its sink process (pid %d): %s; the payloads it still "
            "held may be lost (what each sink did not take is on its standard "
            "error above, if it could say it in time).",
            self,
            self.pid,
            why,
        )
        self._kill()


class _Pipes:
    """The parent's ends of the pipes to a child: framed messages out, framed messages in."""

    def __init__(self, outbox: int, inbox: int) -> None:
        self.outbox, self.inbox = outbox, inbox
        self.ended = False  # the child closed its end of the inbox
        self._received = b""
        # The rest of a frame the pipe took only part of (try_send()).
        self._unsent = memoryview(b"")
        _widen(outbox)
        # Written without blocking: a full pipe is waited on in send(), so
        # that a flush() can give up at its timeout.
        os.set_blocking(outbox, False)
        # poll(), not select(): a training process may hold over
        # FD_SETSIZE (1,024) files, and select() refuses descriptors past it.
        self._inbox_ready = select.poll()
        self._inbox_ready.register(inbox, select.POLLIN)
        # While the pipe to the child is full, what the child says is read
        # too: it may be waiting for room in the other pipe to say it.
        self._outbox_ready = select.poll()
        self._outbox_ready.register(outbox, select.POLLOUT)
        self._outbox_ready.register(inbox, select.POLLIN)

    def send(self, frame: bytes, deadline: float | None = None) -> bool:
        """Write ``frame`` after what is left of an earlier one, waiting while the pipe is full; False when ``deadline`` came first.

        With a deadline, only a frame shorter than ``select.PIPE_BUF``
        bytes: a pipe takes one whole or not at all, so none is left half
        written. A child gone raises ``BrokenPipeError``.
        """
        if not self._write_unsent(deadline):
            return False
        data = memoryview(frame)
        try:
            while data:
                try:
                    data = data[os.write(self.outbox, data) :]
                except BlockingIOError:
                    if not self._wait_for_room(deadline):
                        return False
        except BaseException:
            # Interrupted (Ctrl-C while the pipe was full) after part of the
            # frame went out: its rest goes first at the next write, so the
            # child never reads a frame cut short.
            if data and len(data) < len(frame):
                self._unsent = data
            raise
        return True

    @property
    def unfinished(self) -> bool:
        """Whether the pipe took only part of the last frame: its rest waits for the next write (:meth:`finish`)."""
        return bool(self._unsent)

    def try_send(self, frame: bytes) -> bool:
        """Write ``frame`` without waiting: False when the pipe takes none of it now (or is still taking an earlier frame's rest).

        A frame the pipe takes only part of is sent all the same: its rest
        goes first at the next write (:meth:`send`, or this once the pipe
        has room), so the child never reads a frame cut short.
        """
        if self._unsent and not self._write_unsent(time.monotonic()):
            return False
        try:
            written = os.write(self.outbox, frame)
        except BlockingIOError:
            return False
        if written < len(frame):
            self._unsent = memoryview(frame)[written:]
        return True

    def finish(self, deadline: float) -> None:
        """Write the rest of a frame the pipe took only part of, by ``deadline``: the child then reads it whole before the end."""
        with contextlib.suppress(OSError):
            self._write_unsent(deadline)

    def _write_unsent(self, deadline: float | None) -> bool:
        # What the pipe did not take of the last frame, waiting for room
        # until ``deadline``; whether all of it is written now.
        data = self._unsent
        while data:
            try:
                data = self._unsent = data[os.write(self.outbox, data) :]
            except BlockingIOError:
                if not self._wait_for_room(deadline):
                    return False
        return True

    def _wait_for_room(self, deadline: float | None) -> bool:
        """Wait until the pipe to the child takes more, reading its news meanwhile; False at ``deadline``.

        A child whose sink keeps failing and recovering writes news
        between batches; with that pipe full it would stop reading ours.
        """
        while True:
            ready = self._outbox_ready.poll(_milliseconds_until(deadline))
            if not ready:
                return False
            for fd, _ in ready:
                if fd == self.inbox:
                    self._read_chunk()
            if any(fd == self.outbox for fd, _ in ready):
                return True

    def receive(self, deadline: float | None) -> Any:
        """Return the next message from the child, or ``None`` at its end (or at ``deadline``)."""
        while True:
            message = self._take_message()
            if message is not None:
                return message
            if not self._inbox_ready.poll(_milliseconds_until(deadline)):
                return None
            if not self._read_chunk():
                return None

    def _read_chunk(self) -> bool:
        """Add what the child wrote to what is received; False at its end."""
        chunk = os.read(self.inbox, 65536)
        if not chunk:
            if not self.ended:
                self.ended = True
                # At its end the inbox is always ready: no longer waited on.
                self._outbox_ready.unregister(self.inbox)
            return False
        self._received += chunk
        return True

    def _take_message(self) -> Any:
        received = self._received
        if len(received) < _HEADER.size:
            return None
        (size,) = _HEADER.unpack_from(received)
        end = _HEADER.size + size
        if len(received) < end:
            return None
        self._received = received[end:]
        return marshal.loads(received[_HEADER.size : end])


class _Numbering:
    """Numbers for what goes to the child once and is then named by number: a layout of names, a kinds mapping.

    >>> numbering = _Numbering()
    >>> numbering.number([("a", "b"), ("c",), ("a", "b")])
    ([0, 1, 0], {('a', 'b'): 0, ('c',): 1})
    >>> numbering.numbers.update({("a", "b"): 0, ("c",): 1})
    >>> numbering.number([("c",), ("d",)])
    ([1, 2], {('d',): 2})
    """

    def __init__(self) -> None:
        self.numbers: dict[Any, int] = {}

    def number(self, keys: Sequence[Any]) -> tuple[list[int], dict[Any, int]]:
        """Each key's number, and the keys not numbered yet with the numbers they are to have (not kept: see :attr:`numbers`)."""
        numbers = self.numbers
        found: list[int | None] = list(map(numbers.get, keys))
        if None not in found:
            return found, {}  # type: ignore[return-value]
        new: dict[Any, int] = {}
        for key, number in zip(keys, found, strict=True):
            if number is None and key not in new:
                new[key] = len(numbers) + len(new)
        return list(map({**numbers, **new}.__getitem__, keys)), new


class _Ends:
    """The pipe ends a :class:`SinkProcess` holds, each closed once, whoever closes it first."""

    def __init__(self, *fds: int) -> None:
        self._open = set(fds)

    def close(self, fd: int, last_words: bytes = b"") -> None:
        """Close ``fd`` unless it is closed already, writing ``last_words`` to it first."""
        try:
            self._open.remove(fd)  # one caller only, even on two threads
        except KeyError:
            return
        if last_words:
            # Fewer than PIPE_BUF bytes into a pipe that holds nothing else:
            # they go in at once, or the child is gone.
            with contextlib.suppress(OSError):
                os.write(fd, last_words)
        os.close(fd)

    def close_all(self) -> None:
        for fd in sorted(self._open):
            self.close(fd)


_LIVE: weakref.WeakSet[SinkProcess] = weakref.WeakSet()
"""The sink processes of this process, for :func:`_forget_in_child`."""


def _forget_in_child() -> None:
    # A forked child holding the pipe's write end would keep the sink
    # process from seeing its end when the parent closes it.
    for sink in list(_LIVE):
        sink._closed = True
        sink._ends.close_all()
    _LIVE.clear()


os.register_at_fork(after_in_child=_forget_in_child)


def _check_arguments(
    specs: tuple[str, ...],
    *,
    start_timeout: float,
    close_timeout: float,
    queue_size: int,
) -> None:
    if not specs:
        raise ValueError(
            "SinkProcess needs at least one sink spec, as in "
            "SinkProcess('sqlite:runs/metrics.sqlite', 'console:')"
        )
    for spec in specs:
        if isinstance(spec, (list, tuple)) and all(
            isinstance(item, str) for item in spec
        ):
            raise TypeError(
                f"SinkProcess takes each sink spec as an argument of its own, got a "
                f"{type(spec).__name__} of them; write SinkProcess(*specs), as in "
                "SinkProcess('sqlite:runs/metrics.sqlite', 'console:')"
            )
        if not isinstance(spec, str):
            raise TypeError(
                f"SinkProcess takes sink specs 'SCHEME:TARGET' (strings), got "
                f"{type(spec).__name__}; a sink built here cannot move to "
                "another process"
            )
    check_timeout("start_timeout", start_timeout, optional=False)
    check_timeout("close_timeout", close_timeout, optional=False)
    if (
        isinstance(queue_size, bool)
        or not isinstance(queue_size, int)
        or queue_size < 1
    ):
        raise ValueError(
            f"SinkProcess(queue_size={queue_size!r}) must be a whole number of "
            "payloads, at least 1"
        )


def _spawn(ledger: int) -> tuple[subprocess.Popen[bytes], int, int, int]:
    """Start the child, sharing the ``ledger`` file with it; return it, the pipe end to write to it, the one to read from it and the one to tell it that closing began."""
    to_child, outbox = os.pipe()
    inbox, from_child = os.pipe()
    closing_heard, closing_notice = os.pipe()
    child_ends = (to_child, from_child, closing_heard)
    try:
        process = subprocess.Popen(
            [sys.executable, "-c", _CHILD_MAIN, *map(str, (*child_ends, ledger))],
            stdin=subprocess.DEVNULL,
            pass_fds=(*child_ends, ledger),
            env=_child_environment(),
        )
    except BaseException:
        for fd in (outbox, inbox, closing_notice):
            os.close(fd)
        raise
    finally:
        for fd in child_ends:
            os.close(fd)
    return process, outbox, inbox, closing_notice


def _child_environment() -> dict[str, str]:
    """This environment, with what makes the child import this rlpulse wherever it was imported from."""
    package_root = str(Path(__file__).resolve().parents[2])
    environment = dict(os.environ)
    # Installed: the child finds it where this process did. Put on the path
    # otherwise (a source tree), and only then: a site-packages directory
    # in PYTHONPATH would come before the standard library.
    if package_root in {*site.getsitepackages(), site.getusersitepackages()}:
        return environment
    path = environment.get("PYTHONPATH")
    environment["PYTHONPATH"] = package_root + (os.pathsep + path if path else "")
    return environment


_DICTS = frozenset((dict,))
_NAMES = frozenset((str,))
_PLAIN_NUMBERS = frozenset((float, int))
_PLAIN_STEPS = frozenset((int, type(None)))
_TIMESTAMPS = frozenset((float,))
_metrics_of = operator.itemgetter(0)
_step_of = operator.itemgetter(1)
_timestamp_of = operator.itemgetter(2)
_values_of = operator.methodcaller("values")
_kinds_of = operator.attrgetter("kinds")
_wall_time_of = operator.attrgetter("wall_time")
_distributions_of = operator.attrgetter("distributions")


def _doubles(values: Sequence[float]) -> bytes:
    """``values`` as the bytes of an array of doubles: each a float, whatever number type it was.

    >>> array.array("d", _doubles([1, 2.5, True])).tolist()
    [1.0, 2.5, 1.0]
    """
    return struct.pack(f"{len(values)}d", *values)


def _marshals_as_is(
    batch: Sequence[tuple[Mapping[str, float], int | None, float | None]],
) -> bool:
    """Whether a batch holds only what ``marshal`` writes as it is, and every timestamp.

    That is ``dict`` payloads of ``str`` names and ``float``/``int`` values,
    ``int`` steps and ``float`` timestamps: what a monitor's payloads hold.
    ``marshal`` would write a NumPy scalar, or a NumPy string as a name, as
    the bytes of its buffer, and refuses other mappings. One pass per kind,
    in C, rather than a Python loop over the payloads: this runs beside the
    training loop.

    >>> _marshals_as_is([({"loss": 0.5}, 3, 1.5)])
    True
    >>> import collections, fractions
    >>> _marshals_as_is([({"loss": fractions.Fraction(1, 2)}, 3, 1.5)])
    False
    >>> _marshals_as_is([({"loss": 0.5}, 3, None)])
    False
    >>> _marshals_as_is([(collections.OrderedDict(loss=0.5), 3, 1.5)])
    False
    """
    return (
        _TIMESTAMPS.issuperset(map(type, map(_timestamp_of, batch)))
        and _PLAIN_STEPS.issuperset(map(type, map(_step_of, batch)))
        and _DICTS.issuperset(map(type, map(_metrics_of, batch)))
        and _NAMES.issuperset(
            map(type, itertools.chain.from_iterable(map(_metrics_of, batch)))
        )
        and _PLAIN_NUMBERS.issuperset(
            map(
                type,
                itertools.chain.from_iterable(map(_values_of, map(_metrics_of, batch))),
            )
        )
    )


def _plain(
    metrics: Mapping[str, float], step: int | None, timestamp: float
) -> tuple[dict[str, float], int | None, float]:
    """A payload converted to a ``dict`` of ``str`` names and ``float`` values, which ``marshal`` writes as they are."""
    return (
        {str(name): float(value) for name, value in metrics.items()},
        None if step is None else int(step),
        float(timestamp),
    )


def _widen(pipe: int) -> None:
    """Let ``pipe`` hold :data:`_PIPE_BYTES` where the system allows (Linux), keeping its size elsewhere."""
    try:
        import fcntl  # Unix only, as the pipes are
    except ImportError:  # pragma: no cover - not Unix
        return
    with contextlib.suppress(OSError):
        fcntl.fcntl(pipe, getattr(fcntl, "F_SETPIPE_SZ", 1031), _PIPE_BYTES)


def _milliseconds_until(deadline: float | None) -> float | None:
    """What ``poll()`` waits until ``deadline`` (``time.monotonic()``): ``None`` for ever.

    >>> _milliseconds_until(None) is None, _milliseconds_until(0.0)
    (True, 0.0)
    """
    if deadline is None:
        return None
    return max(0.0, deadline - time.monotonic()) * 1000.0


def _frame(message: Any) -> bytes:
    """One message as it goes through a pipe: its length, then its ``marshal`` body."""
    body = marshal.dumps(message)
    return _HEADER.pack(len(body)) + body


def _read_message(inbox: BinaryIO) -> Any:
    header = inbox.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    body = inbox.read(size)
    if len(body) < size:
        return None
    return marshal.loads(body)


# What crosses the pipe of each histogram: its buckets, zeros, sum and extremes.
_HISTOGRAM_FIELDS = ("positive", "negative", "zero_count", "sum", "min", "max")


def _histograms_sent(histograms: Mapping[str, Histogram]) -> dict[str, tuple[Any, ...]]:
    """A payload's distributions as ``marshal`` writes them: each histogram's :data:`_HISTOGRAM_FIELDS`."""
    return {
        str(name): tuple(getattr(histogram, field) for field in _HISTOGRAM_FIELDS)
        for name, histogram in histograms.items()
    }


def _histograms_received(sent: Mapping[str, tuple[Any, ...]]) -> dict[str, Histogram]:
    """The distributions :func:`_histograms_sent` wrote, as histograms again.

    >>> histogram = Histogram()
    >>> for value in (0.5, 2.0, 2.0):
    ...     histogram.add(value)
    >>> back = _histograms_received(marshal.loads(marshal.dumps(_histograms_sent({"w/x": histogram}))))["w/x"]
    >>> back.count, back.sum, back.min, back.max, back.buckets() == histogram.buckets()
    (3, 4.5, 0.5, 2.0, True)
    """
    return {
        name: Histogram(**dict(zip(_HISTOGRAM_FIELDS, fields, strict=True)))
        for name, fields in sent.items()
    }


def _serve(inbox: BinaryIO, outbox: BinaryIO, closing_heard: int, ledger: int) -> int:
    """The child's side: open the sinks, feed them every batch until end of file, close them.

    ``closing_heard``: the pipe end on which the parent says that it
    began to close this process (:class:`_CloseDeadline`); ``ledger``: the
    file of the :class:`_Ledger` where the sinks count what they did.
    """
    telling = threading.Lock()

    def tell(message: Any) -> None:
        # A parent gone (killed, or closed) hears nothing: write on regardless.
        with telling, contextlib.suppress(OSError):
            outbox.write(_frame(message))

    request = _read_message(inbox)
    if request is None:
        os.close(closing_heard)
        return 1
    specs: list[str] = request[1]
    queue_size: int = request[2]
    close_timeout: float = request[3]
    try:
        sinks = open_sinks(specs)
    except SinkSpecError as error:
        tell(("refused", str(error)))
        os.close(closing_heard)
        return 1
    tell(("ready", [repr(sink) for sink in sinks]))
    hosted = _Hosted(sinks, tell, queue_size, _Ledger(ledger))
    deadline = _CloseDeadline(closing_heard, close_timeout, hosted.stop_waiting)
    received = _Received()
    # Payloads read past the deadline: counted, not fed.
    unread = 0
    try:
        while (message := _read_message(inbox)) is not None:
            if deadline.passed():
                unread += _payloads_in(message)
            elif message[0] == "batch":
                hosted.put(
                    [
                        Item(metrics, step, wall_time, "", inferred_kinds(metrics), {})
                        for metrics, step, wall_time in message[1]
                    ]
                )
            elif message[0] == "payloads":
                hosted.put(received.payloads(message))
            elif message[0] == "event":
                hosted.put_event(Event(*message[1]))
            else:
                hosted.flush(lambda: tell(("flushed",)))
    finally:
        hosted.close(deadline.when_ended(), deadline.seconds, unread)
        deadline.met()
    return 0


def _payloads_in(message: Sequence[Any]) -> int:
    """How many payloads a message from the parent holds.

    >>> _payloads_in(("batch", [({"loss": 1.0}, 1, 1.5)])), _payloads_in(("flush",))
    (1, 0)
    """
    if message[0] == "batch":
        return len(message[1])
    if message[0] == "payloads":
        return len(message[3])
    return 0


class _CloseDeadline:
    """When the child must be done with its sinks: :data:`_DRAIN_SHARE` of ``close_timeout`` after its parent began to close it.

    The parent says so on a pipe of its own (``closing_heard``), which a
    thread here waits on: the child hears it at once, however far behind
    it is on the payloads still in the other pipe, and its deadline comes
    before the parent's kill (``close_timeout`` after the same moment).
    At the deadline, ``on_passed()`` stops the sinks being waited for,
    so that the child reads the rest of the payloads (counting them), says
    what its sinks did not take and exits in time. A pipe that ends with
    nothing said: the parent is gone (killed, or it dropped its
    ``SinkProcess``), nobody kills the child, and its deadline counts from
    the end of the payloads.
    """

    def __init__(
        self, closing_heard: int, close_timeout: float, on_passed: Callable[[], None]
    ) -> None:
        self.seconds = _DRAIN_SHARE * close_timeout
        """How long the child has to deliver what it holds and close its sinks."""
        self._at: float | None = None
        self._heard = threading.Event()
        self._met = threading.Event()
        self._on_passed = on_passed
        MonitorThread("rlpulse-close-deadline", self._watch, (closing_heard,)).start()

    def _watch(self, closing_heard: int) -> None:
        try:
            said = os.read(closing_heard, len(_CLOSING))
        finally:
            os.close(closing_heard)
        if said:
            self._at = time.monotonic() + self.seconds
        self._heard.set()
        if self._at is not None and not self._met.wait(self._at - time.monotonic()):
            self._on_passed()

    def passed(self) -> bool:
        """Whether the parent began to close the child more than :attr:`seconds` ago."""
        return self._at is not None and time.monotonic() >= self._at

    def when_ended(self) -> float:
        """The deadline (``time.monotonic()``), once the payloads have ended: the parent closes the other pipe after this one, or dies with both."""
        self._heard.wait(self.seconds)
        return self._at if self._at is not None else time.monotonic() + self.seconds

    def met(self) -> None:
        """Say that the child is done with its sinks: nothing is to stop at the deadline."""
        self._met.set()


class _Received:
    """What the child knows by number (layouts of names, kinds mappings), and the payloads of a ``"payloads"`` message."""

    def __init__(self) -> None:
        self._layouts: dict[int, list[str]] = {}
        self._kinds: dict[int, dict[str, Kind]] = {}

    def payloads(self, message: Sequence[Any]) -> list[Item]:
        """The queue items of a message :meth:`SinkProcess._encode_payloads` wrote."""
        (
            _,
            layouts,
            kinds,
            layout_numbers,
            values,
            steps,
            wall_times,
            kinds_numbers,
            histograms,
            watches,
        ) = message
        self._layouts.update(layouts)
        for number, plain in kinds:
            self._kinds[number] = {name: Kind(kind) for name, kind in plain.items()}
        flat = array.array("d", values).tolist()
        times = array.array("d", wall_times).tolist()
        items: list[Item] = []
        at = 0
        for index, number in enumerate(layout_numbers):
            names = self._layouts[number]
            end = at + len(names)
            items.append(
                Item(
                    dict(zip(names, flat[at:end], strict=True)),
                    steps[index],
                    times[index],
                    "" if watches is None else watches[index],
                    self._kinds[kinds_numbers[index]],
                    {}
                    if histograms is None
                    else _histograms_received(histograms[index]),
                )
            )
            at = end
        return items


class _Hosted:
    """The child's sinks, each fed from a queue of its own, as a monitor feeds its sinks.

    A sink that is slow or fails for a while (a full disk) holds up neither
    the pipe nor the other sinks: its queue keeps what it could not take
    yet, tries it again (:class:`~rlpulse.runtime.queues.SinkQueue`), and
    drops its oldest payloads once full. The parent hears ``("failing",
    index, message)`` when a sink starts failing, ``("recovered", index)``
    when it writes again; what each payload came to (delivered, rejected,
    dropped) is counted in the ``ledger``.
    """

    def __init__(
        self,
        sinks: Sequence[Any],
        tell: Callable[[Any], None],
        queue_size: int,
        ledger: _Ledger,
    ) -> None:
        self._sinks = list(sinks)
        self._tell = tell
        self._queues = [
            SinkQueue(
                Sink(sink),
                size=queue_size,
                listener=QueueListener(
                    on_failure=functools.partial(self._failed, index),
                    on_success=functools.partial(self._recovered, index),
                    on_drop=functools.partial(self._dropped, ledger, index),
                    on_reject=functools.partial(ledger.add, index, _REJECTED),
                    on_delivered=functools.partial(ledger.add, index, _DELIVERED),
                    on_event_failure=self._event_failed,
                    on_event_logged=self._event_logged,
                ),
            )
            for index, sink in enumerate(sinks)
        ]
        for queue in self._queues:
            queue.start()

    def put(self, items: Sequence[Item]) -> None:
        # A slow sink is waited for (the pipe fills, and the parent's calls
        # wait: its monitor's queue drops, counted); one failing for a while
        # is not, its queue keeping what it can.
        for queue in self._queues:
            queue.wait_for_room(len(items))
            queue.put_all(items)
            queue.wake()

    def put_event(self, event: Event) -> None:
        for queue in self._queues:
            queue.put_events((event,))
            queue.wake()

    def stop_waiting(self) -> None:
        """Wait for no sink from now on, one that :meth:`put` waits for included: each queue begins to close."""
        for queue in self._queues:
            queue.begin_close()

    def flush(self, answer: Callable[[], None]) -> None:
        """Flush every sink once it has taken what was sent before (one that is failing: at once), then ``answer()``."""
        left = [len(self._queues)]
        counting = threading.Lock()

        def flushed() -> None:
            with counting:
                left[0] -= 1
                if left[0]:
                    return
            answer()

        for queue in self._queues:
            queue.flush_then(flushed)

    def close(self, deadline: float, seconds: float, unread: int) -> None:
        """Deliver what is queued and close the sinks by ``deadline``, ``seconds`` after the parent began to close; say in one line each what a sink did not take.

        ``unread``: the payloads read too late to be fed (every sink's loss).
        """
        for queue in self._queues:
            queue.begin_close()
        for queue, sink in zip(self._queues, self._sinks, strict=True):
            discarded = queue.close(deadline)
            if discarded is None:
                with contextlib.suppress(Exception):
                    sink.close()
            # else, stuck in a call, it would not let go of its lock: left open.
            if discarded is None and not unread:
                continue
            why = queue.why_undrained()
            if why is None and unread:
                why = (
                    "the sink process was still behind on what it was sent "
                    "(its slowest sink holds up the others)"
                )
            elif why is None:
                why = "it was still busy"
            # The call given up on (in_flight) ends with this process, next.
            print(
                f"rlpulse: the sink process stopped without draining {sink!r} "
                f"within {seconds:g} s: {why}; "
                f"{(discarded or 0) + queue.in_flight + unread} "
                "payloads were not delivered",
                file=sys.stderr,
                flush=True,
            )

    def _failed(
        self, index: int, sink: Sink, watch_name: str, error: Exception
    ) -> None:
        if not sink.failing:
            sink.failing = True
            kept = (
                "; its payloads are kept and tried again in the sink process"
                if isinstance(error, TransientSinkError)
                else ""
            )
            self._tell(("failing", index, f"{type(error).__name__}: {error}{kept}"))

    def _recovered(self, index: int, sink: Sink) -> None:
        sink.failing = False
        self._tell(("recovered", index))

    def _event_failed(self, sink: Sink, event: Event, error: Exception) -> None:
        # A streak of its own, as in a monitor: said once, on the standard
        # error this process shares with its parent.
        if sink.events_failing:
            return
        sink.events_failing = True
        again = (
            "; it is tried again"
            if isinstance(error, TransientSinkError)
            else "; that event is not sent again"
        )
        print(
            f"rlpulse: {sink.target!r} in the sink process failed to log a "
            f"{event.kind} event: {type(error).__name__}: {error}{again}. Further "
            "event errors of this sink will be silent until it logs an event again.",
            file=sys.stderr,
            flush=True,
        )

    def _event_logged(self, sink: Sink) -> None:
        sink.events_failing = False

    def _dropped(
        self, ledger: _Ledger, index: int, queue: SinkQueue, count: int
    ) -> None:
        ledger.add(index, _DROPPED, count)


# What the ledger counts of each sink, each field for every sink in turn.
_FIELDS = _DELIVERED, _REJECTED, _DROPPED = range(3)


class _Ledger:
    """What each sink in the child did with the payloads it was sent: counts in memory that both processes map.

    The payloads each sink delivered, rejected and dropped (every sink's
    delivered, then every sink's rejected, then dropped), each count
    written by one thread of the child only (the sink's sender; the pipe's
    reader for drops), so that no lock is needed across the processes, and
    read by the parent whenever it wants, at no cost to the pipe: after a
    hand-over, and once the child has ended (killed, say), when what it
    counted tells what was lost with it. A file in memory (``memfd``; a
    temporary file off Linux), passed to the child by descriptor.

    >>> ledger = _Ledger.create(2)
    >>> ledger.add(1, _REJECTED, 3)
    >>> ledger.counts.tolist(), ledger.field(ledger.counts.tolist(), _REJECTED)
    ([0, 0, 0, 3, 0, 0], [0, 3])
    >>> ledger.forget_fd()
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._map = mmap.mmap(fd, 0)
        self.counts = memoryview(self._map).cast("Q")
        """Every sink's delivered, then rejected, then dropped."""
        self.sinks = len(self.counts) // len(_FIELDS)
        self._losses = memoryview(self._map)[self.sinks * 8 :]

    def field(self, counts: list[int], field: int) -> list[int]:
        """Each sink's ``field`` (:data:`_DELIVERED`, ...) of ``counts`` (:attr:`counts` read)."""
        return counts[field * self.sinks : (field + 1) * self.sinks]

    def losses_bytes(self) -> bytes:
        """The counts of rejected and dropped payloads, as bytes: what tells at once whether they changed."""
        return self._losses.tobytes()

    @classmethod
    def create(cls, sinks: int) -> _Ledger:
        """A ledger of zeros for ``sinks`` sinks."""
        create = getattr(os, "memfd_create", None)
        if create is not None:
            fd = create("rlpulse-sink-process-ledger")
        else:  # pragma: no cover - not Linux
            with tempfile.TemporaryFile() as file:
                fd = os.dup(file.fileno())
        try:
            os.ftruncate(fd, sinks * len(_FIELDS) * 8)
            return cls(fd)
        except BaseException:
            os.close(fd)
            raise

    def add(self, sink: int, field: int, count: int) -> None:
        """Count ``count`` more payloads in ``sink``'s ``field`` (:data:`_DELIVERED`, ...), from the one thread that writes it."""
        self.counts[field * self.sinks + sink] += count

    def forget_fd(self) -> None:
        """Close the descriptor, once the child has its own: the mapping stays."""
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _main() -> None:
    """The child's entry point: ``python -c`` with its pipe ends and its ledger's file as arguments."""
    # The terminal's Ctrl-C and a SIGTERM to the process group reach the
    # child too: it keeps writing until its parent closes the pipe or dies.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with (
        os.fdopen(int(sys.argv[1]), "rb") as inbox,
        os.fdopen(int(sys.argv[2]), "wb", buffering=0) as outbox,
    ):
        sys.exit(_serve(inbox, outbox, int(sys.argv[3]), int(sys.argv[4])))
