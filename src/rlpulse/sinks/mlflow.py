"""MLflow: every payload one ``log_batch`` call into an MLflow run.

Needs the ``mlflow`` extra (``pip install 'rlpulse[mlflow]'``: the
``mlflow-skinny`` client with what a local SQLite tracking store needs);
MLflow is imported when an :class:`MLflowLogger` is created, never by
``import rlpulse``.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import re
import socket
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from rlpulse.runtime.retry import TransientSinkError
from rlpulse.sinks.base import BaseSink, Payload

__all__ = ["MLflowLogger"]

# MLflow's own limit on metrics per log_batch request, for when its module
# that defines it cannot be imported.
_DEFAULT_METRICS_PER_BATCH = 1000
# MLflow's own limit on the length of a metric name.
_MAX_KEY_LENGTH = 250
# Characters MLflow accepts in a metric name on every platform.
_INVALID_KEY_CHARACTERS = re.compile(r"[^/\w.\- ]")
# How long a tracking server is given to accept a connection.
_CONNECT_TIMEOUT_S = 10.0
# The answers of a tracking server that is busy or away for a while.
_RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})


class MLflowLogger(BaseSink):
    """A sink that logs every payload into an MLflow run, one ``log_batch`` per payload.

    Which run: ``run_id`` names an existing run; otherwise, when neither
    ``experiment`` nor ``tracking_uri`` is given and an MLflow run is active
    in the calling thread (``mlflow.start_run()``), that run; otherwise a new
    run in ``experiment`` (an experiment name, created when missing; MLflow's
    default experiment when ``None``), which the logger owns and ends as
    ``FINISHED`` on ``close()``. A run it was given is left running.
    ``tracking_uri`` is where MLflow stores runs (``sqlite:///mlflow.db``, a
    tracking server's ``http://host:5000``, ...; MLflow's default when
    ``None``). A server's URI where nothing accepts connections raises
    ``ConnectionError`` at once, rather than after the minutes MLflow's
    own retries would take (a server reached through a proxy is left to
    MLflow).

    Each metric keeps its key as the MLflow metric name (characters MLflow
    rejects become ``_``), at the payload's step (``0`` when it has none) and
    with the poll's wall-clock time as its timestamp, in milliseconds.
    Payloads larger than MLflow's batch limit are split into several
    ``log_batch`` calls. A tracking store that fails raises from
    ``log_metrics``, so the monitor's ``on_error`` decides what happens.

    >>> import tempfile, pathlib
    >>> from rlpulse.sinks.mlflow import MLflowLogger
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     uri = f"sqlite:///{pathlib.Path(tmp) / 'mlflow.db'}"
    ...     with MLflowLogger(experiment="demo", tracking_uri=uri) as sink:
    ...         sink.log_metrics({"collector/frames": 96.0}, step=3, timestamp=1.5)
    ...     history = sink.client.get_metric_history(sink.run_id, "collector/frames")
    ...     [(metric.value, metric.step, metric.timestamp) for metric in history]
    [(96.0, 3, 1500)]
    """

    def __init__(
        self,
        run_id: str | None = None,
        experiment: str | None = None,
        tracking_uri: str | None = None,
    ) -> None:
        if run_id is not None and experiment is not None:
            raise ValueError(
                f"MLflowLogger got both run_id={run_id!r} and experiment="
                f"{experiment!r}; an existing run already belongs to an experiment: "
                "give run_id to log into that run, or experiment to start a new one"
            )
        super().__init__()
        backend = _import_backend()
        self._metric_class: Any = backend.Metric
        self._metrics_per_batch: int = backend.metrics_per_batch
        try:
            self.client: Any = backend.MlflowClient(tracking_uri=tracking_uri)
            """The ``MlflowClient`` the logger writes through."""
        except backend.MlflowException as error:
            uri = backend.get_tracking_uri() if tracking_uri is None else tracking_uri
            unknown = _unknown_scheme(
                uri,
                getattr(error, "supported_uri_schemes", None),
                "tracking_uri" if tracking_uri is not None else "MLFLOW_TRACKING_URI",
            )
            if unknown is None:
                raise
            raise ValueError(unknown) from error
        self.tracking_uri: str = (
            backend.get_tracking_uri() if tracking_uri is None else tracking_uri
        )
        """Where the run is stored: the ``tracking_uri`` given, else MLflow's default."""
        _check_server_answers(self.tracking_uri)
        self.run_id: str
        self.run_id, self._owns_run = self._find_run(
            run_id, experiment, tracking_uri, backend
        )
        self._destination = f"run {self.run_id}"
        # The metric values of a call that failed while the server was away
        # that were stored before it went: not sent again when the call is.
        self._stored_of_failed_call: list[Any] = []

    def _find_run(
        self,
        run_id: str | None,
        experiment: str | None,
        tracking_uri: str | None,
        backend: _Backend,
    ) -> tuple[str, bool]:
        # The run to log into, and whether the logger started it.
        if run_id is not None:
            self._check_run_exists(run_id, backend.MlflowException)
            return run_id, False
        active_run = backend.active_run()
        if experiment is None and tracking_uri is None and active_run is not None:
            return str(active_run.info.run_id), False
        experiment_id = (
            "0" if experiment is None else self._experiment_id(experiment, backend)
        )
        return str(self.client.create_run(experiment_id).info.run_id), True

    def _check_run_exists(self, run_id: str, mlflow_exception: Any) -> None:
        try:
            self.client.get_run(run_id)
        except mlflow_exception as error:
            if getattr(error, "error_code", None) != "RESOURCE_DOES_NOT_EXIST":
                raise
            raise ValueError(
                f"MLflow has no run {run_id!r} at {self.tracking_uri}; give the id "
                "of an existing run there, or run_id=None to start a new run"
            ) from error

    def _experiment_id(self, name: str, backend: _Backend) -> str:
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            return str(found.experiment_id)
        try:
            return str(self.client.create_experiment(name))
        except backend.MlflowException as error:
            # Another process may have created it between the two calls.
            found = self.client.get_experiment_by_name(name)
            if found is None:
                raise error from None
            return str(found.experiment_id)

    def _write_batch(self, payloads: Sequence[Payload]) -> None:
        """Log the payloads with ``log_batch``: every metric at its payload's step (``0`` when ``None``).

        A payload's ``timestamp`` (the wall-clock time of the poll that
        produced it) is stored in milliseconds. A run the logger started is
        ended as ``FINISHED`` by ``close()``; a run it was given (``run_id``,
        or the active run) keeps running.

        >>> import tempfile, pathlib
        >>> from rlpulse.sinks.mlflow import MLflowLogger
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     uri = f"sqlite:///{pathlib.Path(tmp) / 'mlflow.db'}"
        ...     with MLflowLogger(tracking_uri=uri) as sink:
        ...         sink.log_metrics({"buffer/size": 10.0, "buffer/writes": 4.0})
        ...         sorted(sink.client.get_run(sink.run_id).data.metrics.items())
        ...     sink.client.get_run(sink.run_id).info.status
        [('buffer/size', 10.0), ('buffer/writes', 4.0)]
        'FINISHED'
        """
        entries = [
            self._metric_class(
                _mlflow_key(name),
                float(value),
                round(wall_time * 1000),
                0 if step is None else int(step),
            )
            for metrics, step, wall_time, *_ in payloads
            for name, value in metrics.items()
        ]
        # A monitor's queue hands a call that failed while the server was
        # away over again, first: what of it was stored is skipped.
        stored = self._stored_of_failed_call
        self._stored_of_failed_call = []
        if stored and entries[: len(stored)] == stored:
            entries = entries[len(stored) :]
        else:
            stored = []
        for start in range(0, len(entries), self._metrics_per_batch):
            try:
                self.client.log_batch(
                    self.run_id,
                    metrics=entries[start : start + self._metrics_per_batch],
                    synchronous=True,
                )
            except Exception as error:
                if not _server_away(error):
                    raise
                self._stored_of_failed_call = stored + entries[:start]
                raise TransientSinkError(
                    f"the MLflow tracking server at {self.tracking_uri} did not "
                    f"take {len(entries) - start} metric values, after MLflow's "
                    f"own tries: {error}"
                ) from error

    def _close(self) -> None:
        if self._owns_run:
            self.client.set_terminated(self.run_id, "FINISHED")

    def __repr__(self) -> str:
        return f"MLflowLogger(run_id={self.run_id!r})"


def _check_server_answers(tracking_uri: str) -> None:
    """Raise ``ConnectionError`` at once when nothing accepts connections at an ``http(s)`` tracking URI.

    MLflow retries a request to a server it cannot reach for minutes before
    it fails; a tracking URI with a typo, or a server not started, is said
    here instead. A URI reached through a proxy is left to MLflow.

    >>> _check_server_answers("sqlite:///mlflow.db")  # no server to reach
    """
    parts = urllib.parse.urlsplit(tracking_uri)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return
    host = parts.hostname
    if parts.scheme in urllib.request.getproxies() and not urllib.request.proxy_bypass(
        host
    ):
        return
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=_CONNECT_TIMEOUT_S).close()
    except socket.gaierror as error:
        raise ConnectionError(
            f"cannot reach an MLflow tracking server at {tracking_uri}: its host "
            f"{host!r} is not known ({error.strerror}); check the tracking URI"
        ) from error
    except OSError as error:
        reason = error.strerror or str(error) or type(error).__name__
        raise ConnectionError(
            f"no MLflow tracking server answers at {tracking_uri} ({reason}); "
            f"start one there (mlflow server --host {host} --port {port}) or "
            "give the tracking URI of a running one"
        ) from error


@functools.lru_cache(maxsize=4096)
def _mlflow_key(name: str) -> str:
    """``name`` as a metric name MLflow takes: its characters, its segments and its length.

    >>> _mlflow_key("env/return:mean"), _mlflow_key("env//frames")
    ('env/return_mean', 'env/_/frames')
    >>> key = _mlflow_key("env/" + "x" * 300 + "_per_second")
    >>> len(key), key[:8], key[-12:]
    (250, 'env/xxxx', 'x_per_second')
    """
    # MLflow also refuses names that a path normalisation would change
    # ("a//b", "a/./b", "/a"), so empty and dot-only segments are replaced.
    segments = _INVALID_KEY_CHARACTERS.sub("_", name).split("/")
    key = "/".join(
        segment if segment.strip(".") else "_" * max(len(segment), 1)
        for segment in segments
    )
    if len(key) <= _MAX_KEY_LENGTH:
        return key
    # Both ends kept around a digest of the whole name: two long names
    # that differ only in their middle stay two metrics.
    digest = hashlib.blake2b(name.encode(errors="replace"), digest_size=4).hexdigest()
    room = _MAX_KEY_LENGTH - len(digest) - 2
    end = room // 2
    return f"{key[: room - end]}_{digest}_{key[-end:]}"


class _Backend(NamedTuple):
    """What the logger uses from MLflow, imported together by :func:`_import_backend`."""

    Metric: Any
    MlflowException: type[Exception]
    MlflowClient: Any
    active_run: Callable[[], Any]
    get_tracking_uri: Callable[[], str]
    metrics_per_batch: int


def _server_away(error: BaseException) -> bool:
    """Whether MLflow's ``error`` says its tracking server is away or busy for a while.

    MLflow raises ``MlflowException`` from the ``requests`` error it met:
    a connection refused or reset, a timeout, or retries exhausted on a
    retryable answer; or with the server's retryable status.

    >>> _server_away(ValueError("bad metric"))
    False
    """
    import requests

    passing = (
        requests.exceptions.ConnectionError,
        requests.exceptions.Timeout,
        requests.exceptions.RetryError,
        ConnectionError,
        TimeoutError,
    )
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, passing):
            return True
        status = getattr(cause, "get_http_status_code", None)
        if callable(status) and status() in _RETRYABLE_STATUSES:
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _unknown_scheme(
    tracking_uri: str, supported: object, given_as: str = "tracking_uri"
) -> str | None:
    """What to say of ``tracking_uri`` (``given_as``: the argument, or MLflow's environment variable) when MLflow refused it as of a scheme it does not know, ``supported`` the schemes it knows (``None`` otherwise).

    MLflow says so as a model registry's failure, which a logger of
    metrics does not use.

    >>> print(_unknown_scheme("sqllite:///mlflow.db", ["", "file", "http", "sqlite"]))
    MLflowLogger cannot store in tracking_uri='sqllite:///mlflow.db': MLflow knows no scheme 'sqllite' (did you mean 'sqlite'?); give one such as 'sqlite:///runs/mlflow.db' (a file in the working directory) or 'http://HOST:5000'
    """
    if not isinstance(supported, (list, tuple, set, frozenset)):
        return None
    known = [str(name) for name in supported]
    # As MLflow reads it: lowercased, with what follows a database's "+".
    scheme = urllib.parse.urlparse(tracking_uri).scheme
    if scheme.partition("+")[0] in known:
        return None
    close = difflib.get_close_matches(scheme, [name for name in known if name], n=1)
    meant = f" (did you mean {close[0]!r}?)" if close else ""
    return (
        f"MLflowLogger cannot store in {given_as}={tracking_uri!r}: MLflow knows "
        f"no scheme {scheme!r}{meant}; give one such as 'sqlite:///runs/mlflow.db' "
        "(a file in the working directory) or 'http://HOST:5000'"
    )


def _import_backend() -> _Backend:
    try:
        from mlflow.entities import Metric
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient, get_tracking_uri
        from mlflow.tracking.fluent import active_run
    except ImportError as error:
        raise ImportError(
            "MLflowLogger needs MLflow, which is not installed: "
            "pip install 'rlpulse[mlflow]'"
        ) from error
    try:
        from mlflow.utils.validation import MAX_METRICS_PER_BATCH
    except ImportError:  # pragma: no cover - present in every MLflow 2 and 3
        MAX_METRICS_PER_BATCH = _DEFAULT_METRICS_PER_BATCH
    return _Backend(
        Metric,
        MlflowException,
        MlflowClient,
        active_run,
        get_tracking_uri,
        int(MAX_METRICS_PER_BATCH),
    )
