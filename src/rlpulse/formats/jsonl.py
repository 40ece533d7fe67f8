"""The JSON lines format: one ``{"wall_time", "step", "metrics"}`` object per payload, one ``{"event", ...}`` per event.

A payload's line looks like ``{"wall_time": 1.5, "step": 3, "metrics":
{"c/frames": 96.0}, "kinds": {"c/frames": "counter"}}``: ``step`` is
``null`` for a payload without one, NaN and infinities are written as
``NaN`` / ``Infinity`` (as Python's ``json`` module reads them), and
``"kinds"`` holds the :class:`~rlpulse.naming.Kind` of each metric the
file had not named before (a line that names none leaves it out). A file
of rlpulse 0.1.0 has no ``"kinds"``: its kinds are guessed from the names,
as are those of any metric a file never declares. Blank lines are
skipped, and a payload without ``"step"`` has none.

This module writes lines (:func:`format_payloads`, :func:`format_event`),
checks an existing file's first line (:func:`is_first_line`), reads
files (:func:`read_jsonl`, :func:`read_jsonl_events`) and follows one
while it is written (:class:`JSONLFollower`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
from collections.abc import Generator, Iterator, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

from rlpulse.formats import lines
from rlpulse.formats.lines import LineReader, left_out, with_kinds
from rlpulse.formats.records import Followed, Record, RunFileError, kind_named
from rlpulse.naming import Kind, Payload
from rlpulse.runtime.events import Event

__all__ = [
    "JSONLFollower",
    "format_event",
    "format_payloads",
    "is_first_line",
    "read_jsonl",
    "read_jsonl_events",
]

_STARTS = (b'{"wall_time": ', b'{"event": ')
"""How every line rlpulse writes starts: a payload's, an event's."""


# Writing


def is_first_line(first_line: bytes) -> bool:
    """Whether ``first_line`` can start an rlpulse JSON lines file: a payload or an event, or the start of one torn by a crash.

    ``first_line`` ends with its newline, unless it is the whole file.

    >>> is_first_line(b'{"wall_time": 1.5, "step": 3, "metrics": {}}\\n'), is_first_line(b'{"wall'), is_first_line(b"name,value\\n")
    (True, True, False)
    """
    if first_line.endswith(b"\n"):
        try:
            payload = json.loads(first_line)
        except ValueError:
            return False
        return isinstance(payload, dict) and (
            "metrics" in payload or "event" in payload
        )
    return any(
        first_line.startswith(start) or start.startswith(first_line)
        for start in _STARTS
    )


def format_payloads(
    payloads: Sequence[Payload], declared: AbstractSet[str]
) -> tuple[str, set[str]]:
    """The lines of ``payloads``, and the metrics they declare the kind of: those not in ``declared`` (the file's so far).

    >>> from rlpulse.naming import Kind
    >>> text, new = format_payloads([Payload({"c/frames": 96.0}, 3, 1.5, {"c/frames": Kind.COUNTER})], set())
    >>> print(text, end=""); new
    {"wall_time": 1.5, "step": 3, "metrics": {"c/frames": 96.0}, "kinds": {"c/frames": "counter"}}
    {'c/frames'}
    >>> print(format_payloads([Payload({"c/frames": 192.0}, None, 2.5, {})], new)[0], end="")
    {"wall_time": 2.5, "step": null, "metrics": {"c/frames": 192.0}}
    """
    declaring: set[str] = set()
    lines = []
    for payload in payloads:
        metrics, step, wall_time, *_ = payload
        line: dict[str, object] = {
            "wall_time": wall_time,
            "step": None if step is None else int(step),
            "metrics": {name: float(value) for name, value in metrics.items()},
        }
        if not metrics.keys() <= declared and (
            new := metrics.keys() - declared - declaring
        ):
            line["kinds"] = {
                name: payload.kind(name).value for name in metrics if name in new
            }
            declaring |= new
        lines.append(json.dumps(line) + "\n")
    return "".join(lines), declaring


def format_event(event: Event) -> str:
    """The line of ``event``: ``{"event": kind, "wall_time", "watch", "message", "value"}``.

    >>> print(format_event(Event(1.5, "collector", "stalled", "no progress", 30.0)), end="")
    {"event": "stalled", "wall_time": 1.5, "watch": "collector", "message": "no progress", "value": 30.0}
    """
    line = {
        "event": str(event.kind),
        "wall_time": float(event.wall_time),
        "watch": str(event.watch),
        "message": str(event.message),
        "value": float(event.value),
    }
    return json.dumps(line) + "\n"


# Reading


def read_jsonl(path: Path) -> Iterator[Record]:
    # The first payload is checked now, as a CSV file's header is.
    with contextlib.closing(_jsonl_records(path)) as records:
        next(records, None)
    return with_kinds(functools.partial(_jsonl_records, path))


def _jsonl_records(path: Path) -> Generator[Record, None, None]:
    kinds: dict[str, Kind] = {}  # as the lines so far declared them
    with open(path, "rb") as file:
        lines = LineReader(path, file)
        for line in lines:
            if not line.strip():
                continue
            if lines.last_complete:
                yield from _jsonl_payload(path, line, lines.number, kinds)
            else:
                left_out(path, lines.number, "no newline at its end", line)


def read_jsonl_events(path: Path) -> Iterator[Event]:
    """The events of a JSON lines file, in order; its first line is checked before this returns."""
    events = _events(path)
    with contextlib.closing(_events(path)) as first:
        next(first, None)
    return events


def _events(path: Path) -> Generator[Event, None, None]:
    with open(path, "rb") as file:
        lines = LineReader(path, file)
        for line in lines:
            if not (lines.last_complete and line.strip()):
                continue
            try:
                entry = json.loads(line)
            except ValueError as error:
                raise _not_an_event(path, lines.number, error) from error
            if isinstance(entry, dict) and "event" in entry:
                yield _jsonl_event(path, entry, lines.number)


def _jsonl_event(path: Path, entry: dict[str, Any], line_number: int) -> Event:
    try:
        return Event(
            float(entry["wall_time"]),
            str(entry["watch"]),
            str(entry["event"]),
            str(entry["message"]),
            float(entry["value"]),
        )
    except (ValueError, TypeError, KeyError) as error:
        raise _not_an_event(path, line_number, error) from error


def _not_an_event(path: Path, line_number: int, error: Exception) -> RunFileError:
    return RunFileError(
        f"{path} line {line_number} is not an rlpulse payload or event: {error!r}"
    )


def _jsonl_payload(
    path: Path, line: str, line_number: int, kinds: dict[str, Kind]
) -> list[Record]:
    """The records of one payload line; the kinds it declares are added to ``kinds``."""
    try:
        payload = json.loads(line)
    except ValueError as error:
        raise _not_a_payload(path, line_number, f"not JSON ({error})") from None
    if not isinstance(payload, dict):
        raise _not_a_payload(path, line_number, f"not a JSON object: {line.strip()!r}")
    if "event" in payload:
        return []  # read_events() reads those
    return _payload_records(path, payload, line_number, kinds)


def _payload_records(
    path: Path, payload: dict[str, Any], line_number: int, kinds: dict[str, Kind]
) -> list[Record]:
    """The records of one payload's object; the kinds it declares are added to ``kinds``."""
    for key in ("wall_time", "metrics"):
        if key not in payload:
            raise _not_a_payload(path, line_number, f'it has no "{key}"')
    wall_time, step, metrics = (
        payload["wall_time"],
        payload.get("step"),
        payload["metrics"],
    )
    if isinstance(step, float) and step.is_integer():
        step = int(step)
    if not _is_number(wall_time):
        raise _not_a_payload(
            path, line_number, f"wall_time {wall_time!r} is not a number"
        )
    if step is not None and (isinstance(step, bool) or not isinstance(step, int)):
        raise _not_a_payload(path, line_number, f"step {step!r} is not an integer")
    if not isinstance(metrics, dict):
        raise _not_a_payload(
            path, line_number, f"metrics {metrics!r} is not an object of name: value"
        )
    declared = payload.get("kinds", {})
    if not isinstance(declared, dict):
        raise _not_a_payload(
            path, line_number, f"kinds {declared!r} is not an object of name: kind"
        )
    for name, text in declared.items():
        kind = kind_named(text)
        if kind is not None:
            kinds[name] = kind
    records = []
    for name, value in metrics.items():
        if not (_is_number(value) or value is None):
            raise _not_a_payload(
                path, line_number, f"metric {name!r}: {value!r} is not a number"
            )
        number = math.nan if value is None else float(value)
        records.append(
            Record(float(wall_time), step, str(name), number, kinds.get(name))
        )
    return records


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _not_a_payload(path: Path, line_number: int, problem: str) -> RunFileError:
    return RunFileError(
        f"{path} line {line_number} is not an rlpulse payload "
        f'{{"wall_time", "step", "metrics"}}: {problem}'
    )


# Following


class JSONLFollower(lines.LineFollower):
    """A JSON lines file followed while another process writes it: each look reads on from the byte offset the last one stopped at.

    Only whole lines are read: a last line without its newline (still being
    written) is left for a later look. At most ``batch_bytes`` are read per
    look (:attr:`Followed.more` says when more is waiting), but a longer
    line is read whole, over as many looks as it takes. A file deleted
    and written anew, or that shrank, was replaced: it is read again from
    its start, the first look at it saying it holds a new run
    (:attr:`Followed.new_run`).

    >>> import tempfile, pathlib
    >>> directory = tempfile.TemporaryDirectory()
    >>> path = pathlib.Path(directory.name) / "run.jsonl"
    >>> line = '{"wall_time": 2.0, "step": 2, "metrics": {"c/frames": 2.0}}\\n'
    >>> _ = path.write_text(line.replace("2", "1") + line[:20])  # the last being written
    >>> follower = JSONLFollower(path)
    >>> [record.value for record in follower.read_new().records]
    [1.0]
    >>> _ = path.open("a").write(line[20:])
    >>> [record.value for record in follower.read_new().records]
    [2.0]
    >>> directory.cleanup()
    """

    def __init__(self, path: Path, *, batch_bytes: int = 8 << 20) -> None:
        super().__init__(path, batch_bytes=batch_bytes)
        self._kinds: dict[str, Kind] = {}

    def _restart(self) -> None:
        self._kinds = {}  # a replaced file declares its own

    def read_new(self) -> Followed:
        """The records and events of the lines completed since the last look (all of them at the first)."""
        chunk, new_run = self._next_bytes()
        complete = chunk[: chunk.rfind(b"\n") + 1]
        more = self._moved_on(len(complete), chunk)
        records: list[Record] = []
        events: list[Event] = []
        for raw_line in complete.splitlines():
            self._line_number += 1
            if not raw_line.strip():
                continue
            number = self._line_number
            try:
                entry = json.loads(raw_line)
            except ValueError as error:
                raise _not_a_payload(self.path, number, f"not JSON ({error})") from None
            if not isinstance(entry, dict):
                raise _not_a_payload(
                    self.path, number, f"not a JSON object: {raw_line.strip()!r}"
                )
            if "event" in entry:
                events.append(_jsonl_event(self.path, entry, number))
            else:
                records += _payload_records(self.path, entry, number, self._kinds)
        return Followed(records, events, more, new_run)
