"""Sinks: where the monitor's payloads go.

The standard-library sinks are importable from here and from ``rlpulse``:
``SQLiteLogger`` (the embedded default store), ``CSVLogger``, ``JSONLLogger``
and ``ConsoleLogger``. A sink for an optional backend lives in its own module,
``rlpulse.sinks.<backend>``, and imports that backend only there.

Every sink has ``log_metrics(metrics, step=None, *, timestamp=None)``,
``flush()``, an idempotent ``close()``, and is a context manager.

>>> import io
>>> from rlpulse.sinks import ConsoleLogger
>>> with ConsoleLogger(io.StringIO()) as sink:
...     sink.log_metrics({"collector/frames": 96.0}, step=3)
"""

from rlpulse.sinks.console import ConsoleLogger
from rlpulse.sinks.csv import CSVLogger
from rlpulse.sinks.jsonl import JSONLLogger
from rlpulse.sinks.sqlite import SQLiteLogger

__all__ = ["CSVLogger", "ConsoleLogger", "JSONLLogger", "SQLiteLogger"]
