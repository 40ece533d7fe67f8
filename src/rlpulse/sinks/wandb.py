"""Weights & Biases: every payload one history row of a W&B run, each watch on its own x-axis.

Needs the ``wandb`` extra (``pip install 'rlpulse[wandb]'``); wandb is
imported when a :class:`WandbLogger` is created, never by ``import rlpulse``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rlpulse.distributions import bins
from rlpulse.naming import watch_of
from rlpulse.sinks.base import BaseSink, Payload

__all__ = ["WandbLogger"]


class WandbLogger(BaseSink):
    """A sink that logs every payload as one row of a W&B run's history.

    Which run: ``run`` when given; else the current ``wandb.run``; else a new
    run from ``wandb.init(**init_kwargs)``, which the logger owns and finishes
    on ``close()``. A run it was given, or found current, is left running.
    ``init_kwargs`` only start a run, so they cannot be combined with a given
    or current run.

    Different watches step on different counters (a collector's frames, a
    buffer's writes), and W&B drops rows whose shared ``step`` goes
    backwards; so the logger never passes ``step=`` to ``run.log``. Instead
    each watch (the part of a key before the first ``/``) gets its own x-axis,
    the metric ``<watch>/step``: when a watch's first payload with a step
    arrives, the logger calls ``define_metric("<watch>/*",
    step_metric="<watch>/step")``, and every payload with a step carries it
    as ``<watch>/step``. The poll's wall-clock time becomes the row's
    ``_timestamp``, W&B's wall-time axis.

    Each distribution a watch observed (a :class:`~rlpulse.Tally`'s
    ``observe``, whose quantiles are the metrics ``<key>_p50``, ...) is
    also a ``wandb.Histogram`` under its key (``learner/loss``), shown in
    W&B's histogram panels: the observations since the previous payload,
    its buckets merged into at most 64
    (:func:`rlpulse.distributions.bins`).

    >>> import tempfile
    >>> from rlpulse.sinks.wandb import WandbLogger
    >>> QUIET = {"console": "off", "silent": True}
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     with WandbLogger(project="demo", dir=tmp, mode="offline", settings=QUIET) as sink:
    ...         sink.log_metrics({"collector/frames": 96.0}, step=96, timestamp=1.5)
    ...         sink.run.summary["collector/frames"], sink.run.summary["collector/step"]
    (96, 96)
    """

    def __init__(self, run: Any = None, **init_kwargs: Any) -> None:
        super().__init__()
        wandb = self._wandb = _import_backend()
        self._watches_with_x_axis: set[str] = set()
        self._owns_run = False
        if run is None:
            run = wandb.run
            if run is not None and init_kwargs:
                raise ValueError(
                    f"a W&B run is already active ({run.id}); WandbLogger logs into "
                    "it when given no wandb.init arguments: drop the arguments "
                    f"{sorted(init_kwargs)}, or finish that run first"
                )
        elif init_kwargs:
            raise ValueError(
                f"WandbLogger got a run and wandb.init arguments {sorted(init_kwargs)}; "
                "the arguments only start a new run: give one or the other"
            )
        if run is None:
            try:
                run = wandb.init(**init_kwargs)
            except wandb.errors.UsageError as error:
                if "api key" not in str(error).lower():
                    raise
                # W&B's own advice, then a hint saying it again, read twice.
                raise type(error)(
                    "WandbLogger cannot start a W&B run: no API key is configured; "
                    "log in with 'wandb login' (or set WANDB_API_KEY), or log "
                    "without an account with WANDB_MODE=offline"
                ) from error
            self._owns_run = True
        self.run: Any = run
        """The W&B run the logger writes to."""

    def _write_batch(self, payloads: Sequence[Payload]) -> None:
        """Log each payload as one history row; ``step`` goes to each watch's ``<watch>/step``.

        A payload's ``timestamp`` (the wall-clock time of the poll that
        produced it) is the row's ``_timestamp``.

        >>> import tempfile
        >>> from rlpulse.sinks.wandb import WandbLogger
        >>> QUIET = {"console": "off", "silent": True}
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     with WandbLogger(project="demo", dir=tmp, mode="offline", settings=QUIET) as sink:
        ...         sink.log_metrics({"buffer/size": 10.0, "buffer/writes": 4.0})
        ...         sink.run.summary["buffer/size"]
        10
        """
        for payload in payloads:
            row: dict[str, Any] = {
                name: float(value) for name, value in payload.metrics.items()
            }
            for name, histogram in payload.distributions.items():
                if histogram.count:
                    edges, counts, _ = bins(histogram)
                    row[name] = self._wandb.Histogram(np_histogram=(counts, edges))
            if payload.step is not None:
                for watch in {watch_of(name) for name in row} - {""}:
                    row[self._x_axis_of(watch)] = int(payload.step)
            row["_timestamp"] = payload.wall_time
            self.run.log(row)

    def _x_axis_of(self, watch: str) -> str:
        step_metric = f"{watch}/step"
        if watch not in self._watches_with_x_axis:
            self.run.define_metric(step_metric)
            self.run.define_metric(f"{watch}/*", step_metric=step_metric)
            self._watches_with_x_axis.add(watch)
        return step_metric

    def _close(self) -> None:
        # A run the logger was given, or found current, keeps running.
        if self._owns_run:
            self.run.finish()

    def __repr__(self) -> str:
        return f"WandbLogger(run={getattr(self.run, 'id', None)!r})"


def _import_backend() -> Any:
    try:
        import wandb
    except ImportError as error:
        raise ImportError(
            "WandbLogger needs wandb, which is not installed: "
            "pip install 'rlpulse[wandb]'"
        ) from error
    return wandb
