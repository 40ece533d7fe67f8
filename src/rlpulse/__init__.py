"""rlpulse: pull-based operational monitoring for reinforcement-learning pipelines.

Sources expose a cheap ``stats()`` snapshot; :class:`LoggerMonitor` pulls
them on per-target schedules (:class:`Every`) from its own thread, derives
rates, and hands the metrics to sinks.
"""

from rlpulse.monitor import LoggerMonitor
from rlpulse.schedules import AnyOf, Every

__version__ = "0.1.0"

__all__ = [
    "AnyOf",
    "Every",
    "LoggerMonitor",
    "__version__",
]
