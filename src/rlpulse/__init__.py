"""rlpulse: pull-based operational monitoring for reinforcement-learning pipelines.

Sources expose a cheap ``stats()`` snapshot; :class:`LoggerMonitor` pulls
them on per-target schedules (:class:`Every`) from its own thread, derives
rates, and hands the metrics to sinks.
"""

from rlpulse.formats.records import RunFileWarning
from rlpulse.formats.sqlite import RunFileLockedError, RunFileLockedWarning
from rlpulse.monitor import LoggerMonitor
from rlpulse.read.records import (
    DistributionRecord,
    Record,
    RunFileError,
    list_runs,
    merge_distributions,
    read,
    read_distributions,
    read_events,
)
from rlpulse.runtime.events import Event
from rlpulse.runtime.lifecycle import stop_on_sigterm
from rlpulse.runtime.retry import TransientSinkError
from rlpulse.schedules import AnyOf, Every
from rlpulse.sinks import (
    ConsoleLogger,
    CSVLogger,
    JSONLLogger,
    RunExistsError,
    SQLiteLogger,
)
from rlpulse.sinks.process import SinkProcess, SinkProcessError
from rlpulse.sinks.registry import SinkSpecError, open_sink
from rlpulse.sources import SharedCounters, Tally

__version__ = "0.2.0"

__all__ = [
    "AnyOf",
    "CSVLogger",
    "ConsoleLogger",
    "DistributionRecord",
    "Event",
    "Every",
    "JSONLLogger",
    "LoggerMonitor",
    "Record",
    "RunExistsError",
    "RunFileError",
    "RunFileLockedError",
    "RunFileLockedWarning",
    "RunFileWarning",
    "SQLiteLogger",
    "SharedCounters",
    "SinkProcess",
    "SinkProcessError",
    "SinkSpecError",
    "Tally",
    "TransientSinkError",
    "__version__",
    "list_runs",
    "merge_distributions",
    "open_sink",
    "read",
    "read_distributions",
    "read_events",
    "stop_on_sigterm",
]
