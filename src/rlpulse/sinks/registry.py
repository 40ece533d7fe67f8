"""Sinks from a string: ``open_sink("sqlite:runs/a.sqlite")`` for scripts and the command line.

A spec is ``SCHEME:TARGET``. Each scheme is one :class:`Scheme` entry in
:data:`SCHEMES` (its opener and its set-up hint); the opener imports its
sink's module only when used, so opening a file sink never
imports an optional backend:

- ``sqlite:PATH``: ``SQLiteLogger(PATH)``, a new run in that file, named
  after the time; ``sqlite:PATH?run=NAME``: a new run of that name;
  ``sqlite:PATH?run=NAME&resume``: ``resume=True``, appending to that run;
- ``csv:PATH``: ``CSVLogger(PATH)``; ``jsonl:PATH``: ``JSONLLogger(PATH)``;
  ``csv:PATH?resume`` and ``jsonl:PATH?resume``: ``resume=True``, appending
  to the run the file holds;
- ``console:`` (or ``console:stderr``), ``console:stdout``: ``ConsoleLogger``
  on standard error or output;
- ``tensorboard:DIR``: ``TensorBoardLogger(DIR)``;
- ``mlflow:URI``: ``MLflowLogger(tracking_uri=URI)`` (``mlflow:`` for
  MLflow's default tracking URI or the active run; without
  ``MLFLOW_TRACKING_URI`` MLflow 3 creates ``mlflow.db`` in the working
  directory);
- ``wandb:PROJECT``: ``WandbLogger(project=PROJECT)`` (``wandb:`` for the
  current run, else a new one);
- ``prometheus:PORT``: ``PrometheusExporter(port=PORT)`` on the loopback
  interface (``prometheus:`` for a free port); ``prometheus:ADDR:PORT``
  serves on ``ADDR``;
- ``otlp:URL``: ``OTLPExporter(URL)``, pushing to the OpenTelemetry
  receiver at ``URL`` (as in ``otlp:http://127.0.0.1:4318``); ``otlp:``
  for the endpoint OpenTelemetry's ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
  ``..._METRICS_ENDPOINT``) names.

A file sink's options follow the path's last ``?``, separated by ``&``
(values are percent-decoded): a path holding a ``?`` ends with one, as in
``csv:what?.csv?``. Without ``resume``, a run already stored there is
refused, the file left as it is (:class:`~rlpulse.sinks.base.RunExistsError`,
its message giving the specs to choose from).

File sinks create missing parent directories, as TensorBoard's and
TorchRL's loggers create their log directories. Whatever keeps a sink from
being set up — a bad target, a backend not installed, a path that cannot be
written, a backend refusing (W&B without credentials, a port in use) —
raises :class:`SinkSpecError`, one line that names the spec and says what
to do, with the original error as its cause.
"""

from __future__ import annotations

import difflib
import sys
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import NamedTuple, Protocol, TypeVar

from rlpulse.sinks.base import BaseSink, RunExistsError

__all__ = [
    "SCHEMES",
    "MetricSink",
    "Scheme",
    "SinkSpecError",
    "open_sink",
    "open_sinks",
    "register_scheme",
]

_SinkT = TypeVar("_SinkT", bound="MetricSink")


class SinkSpecError(ValueError):
    """A sink spec that cannot be opened: unknown scheme, bad target, backend not installed or refusing.

    Its message is one line that names the spec (or the path) and says what
    to do; ``__cause__`` is the error that kept the sink from being set up.

    >>> try:
    ...     open_sink("postgres:db")
    ... except SinkSpecError as error:
    ...     print(str(error).split(";")[0])
    unknown sink scheme 'postgres' in 'postgres:db'
    """


class MetricSink(Protocol):
    """What every rlpulse sink offers: ``log_metrics`` with a timestamp, ``flush``, ``close``, ``with``.

    >>> import io
    >>> from rlpulse import ConsoleLogger
    >>> sink: MetricSink = ConsoleLogger(io.StringIO())
    >>> sink.close()
    """

    def log_metrics(
        self,
        metrics: Mapping[str, float],
        step: int | None = None,
        *,
        timestamp: float | None = None,
    ) -> None:
        """Consume one payload, produced by a poll at wall-clock time ``timestamp``."""

    def flush(self) -> None:
        """Make what was logged visible to the sink's readers."""

    def close(self) -> None:
        """Release the sink's resources; closing again does nothing."""

    def __enter__(self: _SinkT) -> _SinkT:
        """Return the sink itself."""

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Close the sink."""


def _needs_target(scheme: str, target: str, example: str) -> str:
    if not target:
        raise ValueError(
            f"sink spec '{scheme}:' needs a target after the colon, as in {example!r}"
        )
    return target


def _needs_path(scheme: str, target: str, example: str, options: str = "") -> str:
    """A file sink's path: what follows the colon, refused when written as a URL's ``//``.

    ``sqlite:///runs/a.sqlite`` is SQLAlchemy's and MLflow's spelling of a
    relative path; here it would be the absolute ``/runs/a.sqlite``, and
    ``sqlite://a.sqlite`` the root's ``//a.sqlite``.

    >>> _needs_path("sqlite", "/data/a.sqlite", "sqlite:runs/metrics.sqlite")
    '/data/a.sqlite'
    >>> _needs_path("sqlite", "///runs/a.sqlite", "sqlite:runs/metrics.sqlite")
    Traceback (most recent call last):
    ...
    ValueError: sink spec 'sqlite:///runs/a.sqlite' is written as a URL; a sqlite spec takes the path itself after the colon: 'sqlite:runs/a.sqlite' in the working directory, 'sqlite:/runs/a.sqlite' from the root
    """
    path = _needs_target(scheme, target, example)
    if path.startswith("//"):
        # Said with the options that followed the path (``options``).
        rest = path.lstrip("/") + options
        raise ValueError(
            f"sink spec '{scheme}:{target}{options}' is written as a URL; a "
            f"{scheme} spec takes the path itself after the colon: "
            f"'{scheme}:{rest}' in the working directory, '{scheme}:/{rest}' from "
            "the root"
        )
    return path


_TRUE = frozenset(("", "1", "true", "yes"))
_FALSE = frozenset(("0", "false", "no"))
"""How a file sink spec may write ``resume`` on, and off."""


class _FileTarget(NamedTuple):
    """A file sink's target: its path and its options."""

    path: str
    run: str | None
    resume: bool


def _file_target(scheme: str, target: str, options: tuple[str, ...]) -> _FileTarget:
    """Split a file sink's target into its path and the ``options`` it may have.

    >>> _file_target("sqlite", "runs/a.sqlite?run=loop&resume", ("run", "resume"))
    _FileTarget(path='runs/a.sqlite', run='loop', resume=True)
    >>> _file_target("csv", "runs/what?.csv?", ("resume",))
    _FileTarget(path='runs/what?.csv', run=None, resume=False)
    >>> _file_target("csv", "runs/a.csv?rezume", ("resume",))
    Traceback (most recent call last):
    ...
    ValueError: sink spec 'csv:runs/a.csv?rezume' has an unknown option 'rezume'; a csv spec takes 'resume' after the path's last '?', as in 'csv:runs/a.csv?resume' (end a path that holds a '?' with one)
    """
    example = {
        "sqlite": "sqlite:runs/metrics.sqlite",
        "csv": "csv:runs/metrics.csv",
        "jsonl": "jsonl:runs/metrics.jsonl",
    }[scheme]
    path, separator, query = target.rpartition("?")
    if not separator:
        path, query = target, ""
    _needs_path(scheme, path, example, target[len(path) :])
    found: dict[str, str] = {}
    for option in filter(None, query.split("&")):
        name, _, value = option.partition("=")
        if name not in options:
            known = " and ".join(repr(known) for known in options)
            raise ValueError(
                f"sink spec '{scheme}:{target}' has an unknown option {name!r}; a "
                f"{scheme} spec takes {known} after the path's last '?', as in "
                f"'{scheme}:{path}?{'run=NAME&' if 'run' in options else ''}resume' "
                "(end a path that holds a '?' with one)"
            )
        found[name] = urllib.parse.unquote(value)
    resume = found.get("resume", "false")
    if resume.lower() not in _TRUE | _FALSE:
        raise ValueError(
            f"sink spec '{scheme}:{target}' has resume={resume!r}; write '?resume' "
            "to append to the run stored there, or leave it out"
        )
    run = found.get("run")
    if run == "":
        raise ValueError(
            f"sink spec '{scheme}:{target}' names no run; write "
            f"'{scheme}:{path}?run=NAME', or leave 'run=' out for a new run "
            "named after the time"
        )
    return _FileTarget(path, run, resume.lower() in _TRUE)


def _open_sqlite(target: str) -> MetricSink:
    from rlpulse.sinks.sqlite import SQLiteLogger

    path, run, resume = _file_target("sqlite", target, ("run", "resume"))
    if resume and run is None:
        raise ValueError(
            f"sink spec 'sqlite:{target}' appends to no run; name it, as in "
            f"'sqlite:{path}?run=NAME&resume'"
        )
    try:
        return SQLiteLogger(path, run, resume=resume)
    except RunExistsError as error:
        assert run is not None  # only a named run can exist already
        spec = f"sqlite:{path}?run="
        raise RunExistsError(
            error.path,
            error.existing,
            run=error.run,
            free_run=error.free_run,
            advice=(
                f"name a new run ('{spec}{_quoted(error.free_run or '')}'; "
                f"'sqlite:{path}' names one after the time), or append to this "
                f"run on purpose with '{spec}{_quoted(run)}&resume'"
            ),
        ) from None


def _quoted(run: str) -> str:
    return urllib.parse.quote(run, safe="")


def _open_line_file(
    scheme: str, target: str, sink: Callable[..., MetricSink]
) -> MetricSink:
    path, _, resume = _file_target(scheme, target, ("resume",))
    try:
        return sink(path, resume=resume)
    except RunExistsError as error:
        raise RunExistsError(
            error.path,
            error.existing,
            advice=(
                f"log to a new path, or append to this run on purpose with "
                f"'{scheme}:{path}?resume'"
            ),
        ) from None


def _open_csv(target: str) -> MetricSink:
    from rlpulse.sinks.csv import CSVLogger

    return _open_line_file("csv", target, CSVLogger)


def _open_jsonl(target: str) -> MetricSink:
    from rlpulse.sinks.jsonl import JSONLLogger

    return _open_line_file("jsonl", target, JSONLLogger)


def _open_console(target: str) -> MetricSink:
    from rlpulse.sinks.console import ConsoleLogger

    if target in ("", "stderr"):
        return ConsoleLogger()
    if target == "stdout":
        return ConsoleLogger(sys.stdout)
    raise ValueError(
        f"sink spec 'console:{target}' names no stream; use 'console:' or "
        "'console:stderr' for standard error, 'console:stdout' for standard output"
    )


def _open_tensorboard(target: str) -> MetricSink:
    from rlpulse.sinks.tensorboard import TensorBoardLogger

    return TensorBoardLogger(
        _needs_path("tensorboard", target, "tensorboard:runs/tensorboard")
    )


def _open_mlflow(target: str) -> MetricSink:
    from rlpulse.sinks.mlflow import MLflowLogger

    return MLflowLogger(tracking_uri=target or None)


def _open_wandb(target: str) -> MetricSink:
    from rlpulse.sinks.wandb import WandbLogger

    return WandbLogger(project=target) if target else WandbLogger()


def _open_prometheus(target: str) -> MetricSink:
    from rlpulse.sinks.prometheus import PrometheusExporter

    address, _, port_text = target.rpartition(":")
    address = address.removeprefix("[").removesuffix("]")
    try:
        port = int(port_text) if port_text else 0
    except ValueError:
        raise ValueError(
            f"sink spec 'prometheus:{target}' has no port number at its end; write "
            "'prometheus:PORT' (as in 'prometheus:9464', 0 for a free port) or "
            "'prometheus:ADDR:PORT'"
        ) from None
    if address:
        return PrometheusExporter(port=port, addr=address)
    return PrometheusExporter(port=port)


def _open_otlp(target: str) -> MetricSink:
    from rlpulse.sinks.otlp import OTLPExporter

    # "otlp:" takes the endpoint from OTEL_EXPORTER_OTLP_[METRICS_]ENDPOINT.
    return OTLPExporter(target.strip() or None)


class Scheme(NamedTuple):
    """One sink scheme: how to open a sink from a spec's target, and what to do when its backend refuses."""

    open: Callable[[str], MetricSink]
    """Builds the sink from the target (what follows ``SCHEME:``)."""
    hint: str
    """What to do when the backend refuses to set the sink up."""


_WRITABLE_FILE = "give the path of a file in a directory you can write to"

SCHEMES: dict[str, Scheme] = {
    "sqlite": Scheme(_open_sqlite, _WRITABLE_FILE),
    "csv": Scheme(_open_csv, _WRITABLE_FILE),
    "jsonl": Scheme(_open_jsonl, _WRITABLE_FILE),
    "console": Scheme(_open_console, "use 'console:stderr' or 'console:stdout'"),
    "tensorboard": Scheme(_open_tensorboard, "give a directory you can write to"),
    "mlflow": Scheme(
        _open_mlflow,
        "give a tracking URI MLflow can store runs in, as in "
        "'mlflow:sqlite:///runs/mlflow.db' or 'mlflow:http://HOST:5000'",
    ),
    "wandb": Scheme(
        _open_wandb,
        "log in with 'wandb login' (or set WANDB_API_KEY), or log without an "
        "account with WANDB_MODE=offline",
    ),
    "prometheus": Scheme(
        _open_prometheus,
        "choose a port that is free ('prometheus:0' picks one) on an address "
        "of this machine",
    ),
    "otlp": Scheme(
        _open_otlp, "install the otlp extra, and give the receiver's base URL"
    ),
}
"""Scheme name → :class:`Scheme`: the one entry a sink backend adds (see :func:`register_scheme`)."""


def register_scheme(
    name: str, opener: Callable[[str], MetricSink], hint: str = "check the sink spec"
) -> None:
    """Make ``open_sink("NAME:TARGET")`` return ``opener(TARGET)``; ``hint`` says what to do when it fails.

    For a sink of your own, in specs (``SinkProcess``, ``rlpulse demo --sink``).

    >>> class Null:
    ...     def log_metrics(self, metrics, step=None):
    ...         pass
    >>> register_scheme("null", lambda target: Null())
    >>> type(open_sink("null:")).__name__
    'Null'
    >>> del SCHEMES["null"]
    """
    SCHEMES[name.strip().lower()] = Scheme(opener, hint)


def open_sink(spec: str) -> MetricSink:
    """Return a new sink built from a ``SCHEME:TARGET`` spec (see :data:`SCHEMES`).

    The caller owns the sink and closes it.

    >>> import tempfile, pathlib
    >>> from rlpulse import open_sink
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     with open_sink(f"csv:{pathlib.Path(tmp) / 'metrics.csv'}") as sink:
    ...         sink.log_metrics({"collector/frames": 96.0}, step=3, timestamp=1.5)
    ...     print(type(sink).__name__, sink.path.name)
    CSVLogger metrics.csv
    >>> open_sink("postgres:db")
    Traceback (most recent call last):
    ...
    rlpulse.sinks.registry.SinkSpecError: unknown sink scheme 'postgres' in 'postgres:db'; known schemes: console, csv, jsonl, mlflow, otlp, prometheus, sqlite, tensorboard, wandb
    """
    if not isinstance(spec, str):
        raise TypeError(
            f"a sink spec is a string 'SCHEME:TARGET', got {type(spec).__name__}"
        )
    scheme, separator, target = spec.partition(":")
    known = ", ".join(sorted(SCHEMES))
    if not separator:
        meant = (
            f"did you mean '{spec.strip()}:'? "
            if spec.strip().lower() in SCHEMES
            else ""
        )
        raise SinkSpecError(
            f"sink spec {spec!r} has no scheme; {meant}write SCHEME:TARGET "
            f"(as in 'sqlite:runs/metrics.sqlite') with one of: {known}"
        )
    entry = SCHEMES.get(scheme.strip().lower())
    if entry is None:
        close = difflib.get_close_matches(scheme.strip().lower(), SCHEMES, n=1)
        meant = f"did you mean {close[0]!r}? " if close else ""
        raise SinkSpecError(
            f"unknown sink scheme {scheme!r} in {spec!r}; {meant}known schemes: {known}"
        )
    try:
        return entry.open(target)
    except Exception as error:
        raise SinkSpecError(_setup_failure(spec, entry.hint, error)) from error


def open_sinks(specs: Sequence[str]) -> list[MetricSink]:
    """Return a new sink for each spec, in order, or none: a spec that cannot be opened abandons those opened before it.

    Abandoning takes back what opening a sink left behind where it can (a
    SQLite run it started, and nothing was logged to), so that the same
    specs, the refused one corrected, open as they would have at first.
    The refused spec's :class:`SinkSpecError` is raised.

    >>> import tempfile, pathlib
    >>> from rlpulse import list_runs
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = pathlib.Path(tmp) / "metrics.sqlite"
    ...     try:
    ...         open_sinks([f"sqlite:{path}?run=baseline", "consol:"])
    ...     except SinkSpecError as error:
    ...         print(str(error).split(";")[0])
    ...     sinks = open_sinks([f"sqlite:{path}?run=baseline", "console:"])
    ...     for sink in sinks:
    ...         sink.close()
    ...     list_runs(path)
    unknown sink scheme 'consol' in 'consol:'
    ['baseline']
    """
    sinks: list[MetricSink] = []
    try:
        for spec in specs:
            sinks.append(open_sink(spec))
    except BaseException:
        for sink in reversed(sinks):
            if isinstance(sink, BaseSink):
                sink.abandon()
            else:
                sink.close()
        raise
    return sinks


def _setup_failure(spec: str, hint: str, error: Exception) -> str:
    """The one line saying why ``spec``'s sink could not be set up, and what to do.

    An error raised by rlpulse's own code already says what to do, after
    the spec; one raised inside a backend (W&B without credentials, MLflow refusing a
    store, a port in use) gets the scheme's hint.
    """
    reason = str(error) or type(error).__name__
    if isinstance(error, OSError) and error.strerror:
        reason = error.strerror
        if error.filename is not None and str(error.filename) not in reason:
            reason = f"{error.filename}: {reason}"
    reason = " ".join(reason.split())
    if _raised_in_rlpulse(error):
        return f"cannot open sink {spec!r}: {reason}"
    return (
        f"cannot open sink {spec!r}: {type(error).__name__}: {reason.rstrip('.')}; "
        f"{hint}"
    )


def _raised_in_rlpulse(error: BaseException) -> bool:
    trace = error.__traceback__
    while trace is not None and trace.tb_next is not None:
        trace = trace.tb_next
    module = "" if trace is None else trace.tb_frame.f_globals.get("__name__", "")
    return str(module).startswith("rlpulse.")
