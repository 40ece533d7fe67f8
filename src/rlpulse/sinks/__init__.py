"""Sinks: where the monitor's payloads go.

The standard-library sinks are importable from here and from ``rlpulse``:
``SQLiteLogger`` (the embedded default store), ``CSVLogger``, ``JSONLLogger``
and ``ConsoleLogger``. A sink for an optional backend lives in its own module,
``rlpulse.sinks.<backend>``, and imports that backend only there.

Every sink has ``log_metrics(metrics, step=None, *, timestamp=None)``,
``log_batch(payloads)`` for several ``(metrics, step, timestamp)`` payloads
at once, ``flush()``, an idempotent ``close()``, and is a context manager.
They share that machinery through ``rlpulse.sinks.base.BaseSink``: a sink
for a new backend subclasses it and writes a batch of payloads in
``_write_batch``. A file sink refuses to start a run where one is stored
already (:class:`RunExistsError`) unless told ``resume=True``.

>>> import io
>>> from rlpulse.sinks import ConsoleLogger
>>> with ConsoleLogger(io.StringIO()) as sink:
...     sink.log_metrics({"collector/frames": 96.0}, step=3)
"""

from rlpulse.sinks.base import RunExistsError
from rlpulse.sinks.console import ConsoleLogger
from rlpulse.sinks.csv import CSVLogger
from rlpulse.sinks.jsonl import JSONLLogger
from rlpulse.sinks.sqlite import SQLiteLogger

__all__ = [
    "CSVLogger",
    "ConsoleLogger",
    "JSONLLogger",
    "RunExistsError",
    "SQLiteLogger",
]
