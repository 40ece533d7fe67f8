"""TorchRL's monitor contract, checked against TorchRL and rlpulse alike.

Each test takes ``impl``: ``Every`` and ``LoggerMonitor`` from one import
line, TorchRL's or rlpulse's, and nothing else differs. Every test passing
on both is what makes rlpulse a drop-in replacement for TorchRL 0.14's
``torchrl.record.loggers.monitoring``.
"""

from __future__ import annotations

import inspect
import logging
import math
import tempfile
import time
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch
from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.envs import GymEnv
from torchrl.envs.utils import RandomPolicy
from torchrl.record import CSVLogger
from torchrl.record.loggers import Logger


def _torchrl_monitoring() -> types.SimpleNamespace:
    from torchrl.record.loggers.monitoring import Every, LoggerMonitor

    return types.SimpleNamespace(Every=Every, LoggerMonitor=LoggerMonitor)


def _rlpulse_monitoring() -> types.SimpleNamespace:
    from rlpulse import Every, LoggerMonitor

    return types.SimpleNamespace(Every=Every, LoggerMonitor=LoggerMonitor)


@pytest.fixture(params=["torchrl", "rlpulse"])
def impl(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> types.SimpleNamespace:
    """``Every`` and ``LoggerMonitor`` from TorchRL's or from rlpulse's import line."""
    if request.param == "torchrl":
        # TorchRL's logger does not propagate; the tests read warnings at the
        # root level, where rlpulse's standard logger sends them anyway.
        monkeypatch.setattr(logging.getLogger("torchrl"), "propagate", True)
        return _torchrl_monitoring()
    return _rlpulse_monitoring()


class RecordingLogger(Logger):
    """A TorchRL logger keeping every ``log_scalar`` call and every payload."""

    def __init__(self) -> None:
        self.scalars: list[tuple[str, float, int | None]] = []
        self.payloads: list[tuple[dict[str, float], int | None]] = []
        self.fail_with: Exception | None = None
        super().__init__(exp_name="recording", log_dir=None)

    def _create_experiment(self) -> None:
        return None

    def log_scalar(self, name: str, value: float, step: int | None = None) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        self.scalars.append((name, value, step))

    def log_metrics(
        self, metrics: Any, step: int | None = None, *, keys_sep: str = "/"
    ) -> dict[str, Any]:
        converted = super().log_metrics(metrics, step=step, keys_sep=keys_sep)
        self.payloads.append((dict(metrics), step))
        return converted

    def log_video(
        self, name: str, video: Any, step: int | None = None, **_: Any
    ) -> None:
        raise NotImplementedError

    def log_hparams(self, cfg: Any) -> None:
        raise NotImplementedError

    def log_histogram(self, name: str, data: Any, **_: Any) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"RecordingLogger({len(self.payloads)} payloads)"

    def payloads_of(self, watch: str) -> list[tuple[dict[str, float], int | None]]:
        return [
            (payload, step)
            for payload, step in list(self.payloads)
            if any(key.startswith(f"{watch}/") for key in payload)
        ]


class Pipeline:
    """A source whose ``stats()`` snapshot is whatever the test sets."""

    def __init__(self, **values: Any) -> None:
        self.values: dict[str, Any] = dict(values)
        self.error: Exception | None = None
        self.calls = 0
        self.kwargs_seen: list[dict[str, Any]] = []

    def stats(self, **kwargs: Any) -> dict[str, Any]:
        self.calls += 1
        self.kwargs_seen.append(kwargs)
        if self.error is not None:
            raise self.error
        return dict(self.values)


@dataclass
class Window:
    """The monotonic time span around one monitor call."""

    began: float
    ended: float


@dataclass
class Poll:
    """What one ``step()`` call logged, and when it ran."""

    logged: dict[str, dict[str, float]]
    window: Window


def poll(monitor: Any, *, pause: float = 0.0) -> Poll:
    time.sleep(pause)
    began = time.monotonic()
    logged = monitor.step()
    return Poll(logged, Window(began, time.monotonic()))


def assert_rate(rate: float, delta: float, baseline: Window, current: Window) -> None:
    """Check ``rate`` is ``delta`` over some time between the two calls' windows."""
    lowest = delta / (current.ended - baseline.began)
    highest = delta / (current.began - baseline.ended)
    assert lowest * (1 - 1e-9) <= rate <= highest * (1 + 1e-9)


def polls_logged(
    monitor: Any, source: Pipeline, key: str, values: list[float]
) -> list[bool]:
    """Poll once per value of ``source.values[key]``; say which polls logged."""
    decisions = []
    for value in values:
        source.values[key] = value
        decisions.append(bool(monitor.step()))
    return decisions


def csv_scalars(logger: CSVLogger, name: str) -> list[tuple[int, float]]:
    """Read back the ``(step, value)`` rows TorchRL's CSV logger wrote for ``name``."""
    path = Path(logger.experiment.log_dir) / "scalars" / f"{name}.csv"
    if not path.exists():
        return []
    rows = [line.split(",") for line in path.read_text().splitlines()]
    return [(int(step), float(value)) for step, value in rows]


@pytest.fixture
def sink() -> RecordingLogger:
    return RecordingLogger()


@pytest.fixture
def replay_buffer() -> ReplayBuffer:
    return ReplayBuffer(storage=LazyTensorStorage(1000))


@pytest.fixture
def csv_logger(tmp_path: Path) -> CSVLogger:
    return CSVLogger(exp_name="monitored", log_dir=str(tmp_path))


# -- TorchRL's own docstring examples -------------------------------------


def test_every_docstring_example(impl: Any) -> None:
    logger = CSVLogger(exp_name="every_demo", log_dir=tempfile.mkdtemp())
    rb = ReplayBuffer(storage=LazyTensorStorage(100))
    monitor = impl.LoggerMonitor(logger, background=False)
    monitor.watch(
        rb,
        name="rb",
        schedule=impl.Every.counter("write_count", 50),
        log_on_start=False,
    )
    assert monitor.step() == {}
    rb.extend(torch.arange(60))
    logged = monitor.step()
    assert logged["rb"]["rb/write_count"] == 60.0


def test_logger_monitor_docstring_example(impl: Any) -> None:
    logger = CSVLogger(exp_name="monitor_demo", log_dir=tempfile.mkdtemp())
    rb = ReplayBuffer(storage=LazyTensorStorage(100))
    monitor = impl.LoggerMonitor(logger, background=False)
    monitor.watch(rb, name="replay_buffer", step="write_count")
    rb.extend(torch.arange(10))
    logged = monitor.step()
    assert logged["replay_buffer"]["replay_buffer/size"] == 10.0


@pytest.mark.timeout(30)
def test_background_collector_and_replay_buffer_example(
    impl: Any, csv_logger: CSVLogger
) -> None:
    env = GymEnv("Pendulum-v1")
    collector = Collector(
        env, RandomPolicy(env.action_spec), frames_per_batch=10, total_frames=60
    )
    rb = ReplayBuffer(storage=LazyTensorStorage(100))
    every = impl.Every
    try:
        with impl.LoggerMonitor(csv_logger, poll_interval=0.02) as monitor:
            monitor.watch(
                collector, name="collector", schedule=every.counter("frames", 20)
            )
            monitor.watch(
                rb, name="replay_buffer", schedule=every.seconds(5), step="write_count"
            )
            for batch in collector:
                rb.extend(batch)
    finally:
        collector.shutdown()
    assert csv_scalars(csv_logger, "collector/frames")[-1] == (60, 60.0)
    assert csv_scalars(csv_logger, "replay_buffer/write_count")[-1] == (60, 60.0)


# -- Every ----------------------------------------------------------------


def test_every_rejects_an_unknown_kind(impl: Any) -> None:
    with pytest.raises(ValueError, match="kind"):
        impl.Every("minutes", 5)


@pytest.mark.parametrize("interval", [0, 0.0, -1, -0.5, None])
def test_every_rejects_an_interval_that_is_not_strictly_positive(
    impl: Any, interval: Any
) -> None:
    with pytest.raises(ValueError, match="strictly positive"):
        impl.Every("seconds", interval)
    with pytest.raises(ValueError, match="strictly positive"):
        impl.Every("counter", interval, key="frames")


@pytest.mark.parametrize("interval", [0, -3])
def test_every_factories_reject_an_interval_that_is_not_strictly_positive(
    impl: Any, interval: int
) -> None:
    with pytest.raises(ValueError, match="strictly positive"):
        impl.Every.seconds(interval)
    with pytest.raises(ValueError, match="strictly positive"):
        impl.Every.counter("frames", interval)


@pytest.mark.parametrize("key", [None, ""])
def test_every_counter_requires_a_counter_key(impl: Any, key: str | None) -> None:
    with pytest.raises(ValueError, match="counter key"):
        impl.Every("counter", 10, key=key)


def test_every_counter_factory_requires_a_counter_key(impl: Any) -> None:
    with pytest.raises(ValueError, match="counter key"):
        impl.Every.counter("", 10)


def test_every_seconds_factory_builds_a_float_seconds_schedule(impl: Any) -> None:
    schedule = impl.Every.seconds(5)
    assert (schedule.kind, schedule.interval, schedule.key) == ("seconds", 5.0, None)
    assert isinstance(schedule.interval, float)
    assert schedule == impl.Every("seconds", 5.0)


def test_every_counter_factory_builds_a_counter_schedule(impl: Any) -> None:
    schedule = impl.Every.counter("frames", 100)
    assert (schedule.kind, schedule.interval, schedule.key) == (
        "counter",
        100,
        "frames",
    )
    assert schedule == impl.Every("counter", 100, "frames")


def test_every_cannot_be_modified(impl: Any) -> None:
    schedule = impl.Every.counter("frames", 100)
    with pytest.raises(AttributeError):
        schedule.interval = 5
    with pytest.raises(AttributeError):
        schedule.key = "batches"
    assert schedule == impl.Every.counter("frames", 100)


def test_every_is_hashable_and_equal_by_value(impl: Any) -> None:
    every = impl.Every
    schedules = {every.seconds(1), every.seconds(1.0), every.counter("frames", 10)}
    assert schedules == {every("seconds", 1.0), every("counter", 10, "frames")}
    assert hash(every.seconds(2)) == hash(every("seconds", 2.0))
    assert every.counter("frames", 10) != every.counter("batches", 10)
    assert every.seconds(1) != every.seconds(2)


# -- signatures -----------------------------------------------------------

REQUIRED = inspect.Parameter.empty
POSITIONAL = inspect.Parameter.POSITIONAL_OR_KEYWORD
KEYWORD = inspect.Parameter.KEYWORD_ONLY

TORCHRL_SIGNATURES = {
    "Every": [
        ("kind", POSITIONAL, REQUIRED),
        ("interval", POSITIONAL, REQUIRED),
        ("key", POSITIONAL, None),
    ],
    "Every.seconds": [("interval", POSITIONAL, REQUIRED)],
    "Every.counter": [
        ("key", POSITIONAL, REQUIRED),
        ("interval", POSITIONAL, REQUIRED),
    ],
    "LoggerMonitor": [
        ("logger", POSITIONAL, REQUIRED),
        ("poll_interval", KEYWORD, 1.0),
        ("background", KEYWORD, True),
        ("on_error", KEYWORD, "warn"),
    ],
    "LoggerMonitor.watch": [
        ("self", POSITIONAL, REQUIRED),
        ("target", POSITIONAL, REQUIRED),
        ("name", KEYWORD, None),
        ("schedule", KEYWORD, None),
        ("step", KEYWORD, None),
        ("stats_fn", KEYWORD, None),
        ("stats_kwargs", KEYWORD, None),
        ("rate_keys", KEYWORD, None),
        ("log_on_start", KEYWORD, True),
        ("log_on_close", KEYWORD, True),
    ],
    "LoggerMonitor.unwatch": [
        ("self", POSITIONAL, REQUIRED),
        ("name", POSITIONAL, REQUIRED),
    ],
    "LoggerMonitor.step": [("self", POSITIONAL, REQUIRED)],
    "LoggerMonitor.start": [("self", POSITIONAL, REQUIRED)],
    "LoggerMonitor.stop": [
        ("self", POSITIONAL, REQUIRED),
        ("log_final", KEYWORD, None),
    ],
}


@pytest.mark.parametrize("qualname", sorted(TORCHRL_SIGNATURES))
def test_signature_accepts_every_call_torchrl_accepts(impl: Any, qualname: str) -> None:
    owner, _, method = qualname.partition(".")
    function = getattr(getattr(impl, owner), method) if method else getattr(impl, owner)
    parameters = inspect.signature(function).parameters
    expected = TORCHRL_SIGNATURES[qualname]
    positional = [
        name
        for name, parameter in parameters.items()
        if parameter.kind in (inspect.Parameter.POSITIONAL_ONLY, POSITIONAL)
    ]
    assert positional[: sum(kind == POSITIONAL for _, kind, _ in expected)] == [
        name for name, kind, _ in expected if kind == POSITIONAL
    ]
    for name, kind, default in expected:
        assert parameters[name].kind == kind, name
        if default is not REQUIRED:
            assert parameters[name].default == default, name
    known = {name for name, _, _ in expected}
    for name, parameter in parameters.items():
        if name not in known and parameter.kind not in (
            inspect.Parameter.VAR_POSITIONAL,
            inspect.Parameter.VAR_KEYWORD,
        ):
            assert parameter.default is not REQUIRED, f"extra required parameter {name}"


# -- LoggerMonitor construction -------------------------------------------


def test_monitor_rejects_an_unknown_on_error_mode(
    impl: Any, sink: RecordingLogger
) -> None:
    with pytest.raises(ValueError, match="on_error"):
        impl.LoggerMonitor(sink, on_error="explode")


@pytest.mark.parametrize("poll_interval", [0, 0.0, -1.0])
def test_monitor_rejects_a_poll_interval_that_is_not_positive(
    impl: Any, sink: RecordingLogger, poll_interval: float
) -> None:
    with pytest.raises(ValueError, match="poll_interval"):
        impl.LoggerMonitor(sink, poll_interval=poll_interval)


@pytest.mark.parametrize("on_error", ["warn", "raise", "ignore"])
def test_monitor_accepts_each_on_error_mode(
    impl: Any, sink: RecordingLogger, on_error: str
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False, on_error=on_error)
    monitor.watch(Pipeline(frames=1), name="collector")
    assert monitor.step() == {"collector": {"collector/frames": 1.0}}


# -- watch ------------------------------------------------------------------


class NoStats:
    pass


class StatsIsNotCallable:
    stats: ClassVar[dict[str, int]] = {"frames": 1}


@pytest.mark.parametrize("target", [NoStats(), StatsIsNotCallable()])
def test_watch_rejects_a_target_without_callable_stats(
    impl: Any, sink: RecordingLogger, target: object
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    with pytest.raises(TypeError, match="stats") as raised:
        monitor.watch(target)
    assert type(target).__name__ in str(raised.value)


def test_watch_takes_stats_fn_for_a_target_without_stats(
    impl: Any, sink: RecordingLogger
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    name = monitor.watch(NoStats(), stats_fn=lambda: {"episodes": 3})
    assert name == "nostats"
    assert monitor.step() == {"nostats": {"nostats/episodes": 3.0}}


def test_stats_fn_replaces_the_targets_own_stats(
    impl: Any, sink: RecordingLogger, replay_buffer: ReplayBuffer
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(replay_buffer, name="rb", stats_fn=lambda: {"custom": 1.5})
    assert monitor.step() == {"rb": {"rb/custom": 1.5}}


def test_watch_returns_the_explicit_name(impl: Any, sink: RecordingLogger) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    assert monitor.watch(Pipeline(), name="learner") == "learner"


def test_watch_rejects_an_explicit_name_already_registered(
    impl: Any, sink: RecordingLogger
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(Pipeline(), name="learner")
    with pytest.raises(ValueError, match="already registered"):
        monitor.watch(Pipeline(), name="learner")


def test_default_names_are_the_lowercase_class_name_with_numbered_suffixes(
    impl: Any, sink: RecordingLogger
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    buffers = [ReplayBuffer(storage=LazyTensorStorage(10)) for _ in range(3)]
    names = [monitor.watch(buffer) for buffer in buffers]
    assert names == ["replaybuffer", "replaybuffer_1", "replaybuffer_2"]


def test_default_name_takes_the_first_free_suffix(
    impl: Any, sink: RecordingLogger
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(Pipeline(), name="pipeline_1")
    assert monitor.watch(Pipeline()) == "pipeline"
    assert monitor.watch(Pipeline()) == "pipeline_2"


def test_counter_schedule_logs_at_its_counter_as_step(
    impl: Any, sink: RecordingLogger, replay_buffer: ReplayBuffer
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(
        replay_buffer, name="rb", schedule=impl.Every.counter("write_count", 50)
    )
    replay_buffer.extend(torch.arange(70))
    monitor.step()
    assert sink.payloads[-1][1] == 70


def test_explicit_step_key_wins_over_the_counter_key(
    impl: Any, sink: RecordingLogger
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(
        Pipeline(frames=120, batches=6),
        name="collector",
        schedule=impl.Every.counter("frames", 100),
        step="batches",
    )
    monitor.step()
    assert sink.payloads[-1][1] == 6


def test_step_is_the_step_entry_truncated_to_int(
    impl: Any, sink: RecordingLogger
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(Pipeline(progress=7.9), name="learner", step="progress")
    monitor.step()
    assert sink.payloads[-1] == ({"learner/progress": 7.9}, 7)
    step = sink.payloads[-1][1]
    assert isinstance(step, int)


def test_step_is_none_when_the_step_entry_is_missing(
    impl: Any, sink: RecordingLogger
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(Pipeline(loss=0.5), name="learner", step="updates")
    monitor.step()
    assert sink.payloads[-1] == ({"learner/loss": 0.5}, None)


def test_step_is_none_without_a_step_key(impl: Any, sink: RecordingLogger) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(Pipeline(loss=0.5), name="learner", schedule=impl.Every.seconds(60))
    monitor.step()
    assert sink.payloads[-1] == ({"learner/loss": 0.5}, None)


def test_stats_kwargs_reach_the_provider_on_every_poll(
    impl: Any, sink: RecordingLogger
) -> None:
    source = Pipeline(frames=1)
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(source, name="collector", stats_kwargs={"workers": "aggregate"})
    monitor.step()
    monitor.step()
    monitor.stop()
    assert source.kwargs_seen == [{"workers": "aggregate"}] * 3


def test_stats_kwargs_reach_a_stats_fn(impl: Any, sink: RecordingLogger) -> None:
    seen = []

    def snapshot(**kwargs: Any) -> dict[str, float]:
        seen.append(kwargs)
        return {"frames": 1}

    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(NoStats(), name="x", stats_fn=snapshot, stats_kwargs={"depth": 2})
    monitor.step()
    assert seen == [{"depth": 2}]


# -- unwatch ----------------------------------------------------------------


def test_unwatch_an_unknown_name_raises_key_error(
    impl: Any, sink: RecordingLogger
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    with pytest.raises(KeyError):
        monitor.unwatch("nobody")


def test_unwatch_stops_logging_and_leaves_the_target_working(
    impl: Any, sink: RecordingLogger, replay_buffer: ReplayBuffer
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(replay_buffer, name="rb")
    replay_buffer.extend(torch.arange(5))
    monitor.step()
    monitor.unwatch("rb")
    logged_before = len(sink.payloads)
    assert monitor.step() == {}
    monitor.stop()
    assert len(sink.payloads) == logged_before
    replay_buffer.extend(torch.arange(5))
    assert len(replay_buffer) == 10
    assert replay_buffer.sample(4).shape == (4,)


def test_unwatched_name_can_be_registered_again(
    impl: Any, sink: RecordingLogger
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(Pipeline(frames=1), name="collector")
    monitor.unwatch("collector")
    assert monitor.watch(Pipeline(frames=2), name="collector") == "collector"
    assert monitor.step() == {"collector": {"collector/frames": 2.0}}


# -- step -------------------------------------------------------------------


def test_step_returns_an_empty_dict_when_nothing_is_due(
    impl: Any, sink: RecordingLogger
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(Pipeline(frames=0), name="collector", log_on_start=False)
    assert monitor.step() == {}
    assert sink.payloads == []


def test_step_returns_only_the_watches_logged_during_this_call(
    impl: Any, sink: RecordingLogger
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(Pipeline(loss=1.0), name="learner")
    monitor.watch(Pipeline(size=3), name="rb", schedule=impl.Every.seconds(3600))
    monitor.step()
    assert monitor.step() == {"learner": {"learner/loss": 1.0}}


def test_step_polls_watches_in_registration_order(
    impl: Any, sink: RecordingLogger
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    for name in ["zeta", "alpha", "mid"]:
        monitor.watch(Pipeline(value=1), name=name)
    logged = monitor.step()
    assert list(logged) == ["zeta", "alpha", "mid"]
    assert [list(payload) for payload, _ in sink.payloads] == [
        ["zeta/value"],
        ["alpha/value"],
        ["mid/value"],
    ]


def test_step_returns_what_the_logger_received(
    impl: Any, sink: RecordingLogger, replay_buffer: ReplayBuffer
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(replay_buffer, name="rb")
    replay_buffer.extend(torch.arange(8))
    logged = monitor.step()
    assert logged == {"rb": sink.payloads[-1][0]}
    assert {name: value for name, value, _ in sink.scalars} == logged["rb"]


def test_payload_keys_are_prefixed_with_the_watch_name(
    impl: Any, sink: RecordingLogger, replay_buffer: ReplayBuffer
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(replay_buffer, name="buffer")
    logged = monitor.step()
    assert set(logged["buffer"]) == {f"buffer/{key}" for key in replay_buffer.stats()}


# -- snapshots --------------------------------------------------------------


def test_snapshot_keeps_finite_numbers_as_floats_and_drops_the_rest(
    impl: Any, sink: RecordingLogger
) -> None:
    source = Pipeline(
        frames=10,
        loss=0.25,
        ready=True,
        done=False,
        nan=math.nan,
        up=math.inf,
        down=-math.inf,
        label="warming up",
        missing=None,
        handle=object(),
    )
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(source, name="w")
    payload = monitor.step()["w"]
    assert payload == {"w/frames": 10.0, "w/loss": 0.25, "w/ready": 1.0, "w/done": 0.0}
    assert all(type(value) is float for value in payload.values())


def test_replay_buffer_snapshot_is_logged_as_floats(
    impl: Any, sink: RecordingLogger, replay_buffer: ReplayBuffer
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(replay_buffer, name="rb")
    replay_buffer.extend(torch.arange(250))
    payload = monitor.step()["rb"]
    assert payload["rb/size"] == 250.0
    assert payload["rb/capacity"] == 1000.0
    assert payload["rb/utilization"] == 0.25
    assert payload["rb/initialized"] == 1.0


# -- first poll -------------------------------------------------------------


def test_first_poll_logs_without_rates_by_default(
    impl: Any, sink: RecordingLogger
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(Pipeline(frames=100), name="collector")
    assert monitor.step() == {"collector": {"collector/frames": 100.0}}


def test_without_log_on_start_the_first_poll_only_sets_the_baseline(
    impl: Any, sink: RecordingLogger
) -> None:
    source = Pipeline(frames=100)
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(source, name="collector", log_on_start=False)
    first = poll(monitor)
    source.values["frames"] = 160
    second = poll(monitor, pause=0.02)
    assert first.logged == {}
    payload = second.logged["collector"]
    assert payload["collector/frames"] == 160.0
    assert_rate(payload["collector/frames_per_second"], 60, first.window, second.window)


def test_log_on_start_primes_a_counter_schedule_above_the_first_value(
    impl: Any, sink: RecordingLogger
) -> None:
    source = Pipeline(frames=10)
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(source, name="collector", schedule=impl.Every.counter("frames", 10))
    assert polls_logged(monitor, source, "frames", [10, 15, 19, 20]) == [
        True,
        False,
        False,
        True,
    ]


def test_without_log_on_start_a_counter_schedule_is_primed_by_the_first_poll(
    impl: Any, sink: RecordingLogger
) -> None:
    source = Pipeline(frames=50)
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(
        source,
        name="collector",
        schedule=impl.Every.counter("frames", 50),
        log_on_start=False,
    )
    assert polls_logged(monitor, source, "frames", [50, 99, 100]) == [
        False,
        False,
        True,
    ]


def test_log_on_start_logs_the_first_poll_of_a_seconds_schedule(
    impl: Any, sink: RecordingLogger
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(Pipeline(size=4), name="rb", schedule=impl.Every.seconds(60))
    assert monitor.step() == {"rb": {"rb/size": 4.0}}
    assert monitor.step() == {}


def test_without_log_on_start_a_seconds_schedule_waits_for_its_interval(
    impl: Any, sink: RecordingLogger
) -> None:
    source = Pipeline(write_count=0)
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(
        source, name="rb", schedule=impl.Every.seconds(0.2), log_on_start=False
    )
    first = poll(monitor)
    source.values["write_count"] = 30
    second = poll(monitor, pause=0.3)
    assert first.logged == {}
    payload = second.logged["rb"]
    assert payload["rb/write_count"] == 30.0
    assert_rate(payload["rb/writes_per_second"], 30, first.window, second.window)


# -- seconds schedules ------------------------------------------------------


def test_seconds_schedule_is_not_due_again_right_after_logging(
    impl: Any, sink: RecordingLogger
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(Pipeline(size=1), name="rb", schedule=impl.Every.seconds(3600))
    assert [bool(monitor.step()) for _ in range(3)] == [True, False, False]


def test_seconds_schedule_counts_from_the_last_logged_snapshot(
    impl: Any, sink: RecordingLogger
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(Pipeline(size=1), name="rb", schedule=impl.Every.seconds(0.5))
    assert monitor.step()
    time.sleep(0.6)
    assert monitor.step()
    assert monitor.step() == {}


# -- counter schedules ------------------------------------------------------


def counter_monitor(
    impl: Any, sink: RecordingLogger, interval: int
) -> tuple[Any, Pipeline]:
    source = Pipeline()
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(
        source,
        name="collector",
        schedule=impl.Every.counter("frames", interval),
        log_on_start=False,
    )
    return monitor, source


def test_counter_schedule_logs_when_the_counter_reaches_each_multiple(
    impl: Any, sink: RecordingLogger
) -> None:
    monitor, source = counter_monitor(impl, sink, 10)
    values = [0, 5, 10, 15, 19, 21, 29, 30]
    assert polls_logged(monitor, source, "frames", values) == [
        False,
        False,
        True,
        False,
        False,
        True,
        False,
        True,
    ]


def test_counter_jump_across_several_thresholds_logs_once(
    impl: Any, sink: RecordingLogger
) -> None:
    monitor, source = counter_monitor(impl, sink, 10)
    assert polls_logged(monitor, source, "frames", [0, 35, 39, 40]) == [
        False,
        True,
        False,
        True,
    ]
    assert [step for _, step in sink.payloads] == [35, 40]


def test_counter_schedule_is_not_due_while_its_counter_is_absent(
    impl: Any, sink: RecordingLogger
) -> None:
    source = Pipeline(size=1)
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(source, name="collector", schedule=impl.Every.counter("frames", 10))
    assert bool(monitor.step())  # the first poll logs, with nothing to prime
    assert monitor.step() == {}
    assert polls_logged(monitor, source, "frames", [25, 29, 30]) == [False, False, True]


def test_counter_schedule_primes_on_the_first_sighting_of_its_counter(
    impl: Any, sink: RecordingLogger
) -> None:
    monitor, source = counter_monitor(impl, sink, 10)
    assert monitor.step() == {}
    assert polls_logged(monitor, source, "frames", [40, 49, 50]) == [False, False, True]


def test_counter_reset_logs_nothing_and_recomputes_the_threshold(
    impl: Any, sink: RecordingLogger
) -> None:
    monitor, source = counter_monitor(impl, sink, 10)
    assert polls_logged(monitor, source, "frames", [0, 25, 20, 29, 30]) == [
        False,
        True,
        False,
        False,
        True,
    ]


def test_counter_reset_below_the_old_threshold_restarts_from_the_new_value(
    impl: Any, sink: RecordingLogger
) -> None:
    monitor, source = counter_monitor(impl, sink, 10)
    assert polls_logged(monitor, source, "frames", [0, 25, 3, 9, 10]) == [
        False,
        True,
        False,
        False,
        True,
    ]


def test_counter_reset_restarts_the_rate_baseline(
    impl: Any, sink: RecordingLogger
) -> None:
    monitor, source = counter_monitor(impl, sink, 10)
    polls_logged(monitor, source, "frames", [0, 25])
    source.values["frames"] = 3
    reset = poll(monitor, pause=0.02)
    source.values["frames"] = 10
    after = poll(monitor, pause=0.02)
    assert reset.logged == {}
    payload = after.logged["collector"]
    assert_rate(payload["collector/frames_per_second"], 7, reset.window, after.window)


def test_emptied_replay_buffer_re_baselines_its_write_count_schedule(
    impl: Any, sink: RecordingLogger, replay_buffer: ReplayBuffer
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(
        replay_buffer,
        name="rb",
        schedule=impl.Every.counter("write_count", 50),
        log_on_start=False,
    )
    monitor.step()
    replay_buffer.extend(torch.arange(60))
    assert monitor.step()["rb"]["rb/write_count"] == 60.0
    replay_buffer.empty()
    assert monitor.step() == {}
    replay_buffer.extend(torch.arange(50))
    logged = monitor.step()
    assert logged["rb"]["rb/write_count"] == 50.0
    assert logged["rb"]["rb/writes_per_second"] > 0
    assert [step for _, step in sink.payloads] == [60, 50]


def test_collector_frames_schedule_logs_at_each_multiple(
    impl: Any, sink: RecordingLogger
) -> None:
    env = GymEnv("Pendulum-v1")
    collector = Collector(
        env, RandomPolicy(env.action_spec), frames_per_batch=10, total_frames=60
    )
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(
        collector,
        name="collector",
        schedule=impl.Every.counter("frames", 20),
        log_on_start=False,
    )
    try:
        monitor.step()
        for _ in collector:
            monitor.step()
    finally:
        collector.shutdown()
    assert [step for _, step in sink.payloads] == [20, 40, 60]
    for payload, _ in sink.payloads:
        assert payload["collector/frames_per_second"] > 0
        assert payload["collector/batches_per_second"] > 0


# -- rates ------------------------------------------------------------------


def test_known_counters_get_their_rate_names(impl: Any, sink: RecordingLogger) -> None:
    counters = {
        "frames": "frames_per_second",
        "batches": "batches_per_second",
        "write_count": "writes_per_second",
        "worker_frames": "worker_frames_per_second",
        "sample_calls": "samples_per_second",
        "samples_returned": "samples_returned_per_second",
    }
    source = Pipeline(**dict.fromkeys(counters, 0), size=0, episodes=0)
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(source, name="w")
    first = poll(monitor)
    source.values = {**dict.fromkeys(counters, 20), "size": 20, "episodes": 20}
    second = poll(monitor, pause=0.02)
    payload = second.logged["w"]
    rates = {key for key in payload if key.endswith("_per_second")}
    assert rates == {f"w/{rate}" for rate in counters.values()}
    for rate in counters.values():
        assert_rate(payload[f"w/{rate}"], 20, first.window, second.window)


def test_rate_keys_choose_the_counters_and_name_others_per_second(
    impl: Any, sink: RecordingLogger
) -> None:
    source = Pipeline(episodes=0, frames=0, write_count=0)
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(source, name="w", rate_keys=("episodes", "frames"))
    first = poll(monitor)
    source.values = {"episodes": 4, "frames": 80, "write_count": 80}
    second = poll(monitor, pause=0.02)
    payload = second.logged["w"]
    assert {key for key in payload if key.endswith("_per_second")} == {
        "w/episodes_per_second",
        "w/frames_per_second",
    }
    assert_rate(payload["w/episodes_per_second"], 4, first.window, second.window)
    assert_rate(payload["w/frames_per_second"], 80, first.window, second.window)


def test_rate_key_missing_from_either_snapshot_gives_no_rate(
    impl: Any, sink: RecordingLogger
) -> None:
    source = Pipeline(frames=0)
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(source, name="w", rate_keys=("frames", "batches", "ghost"))
    poll(monitor)
    source.values = {"batches": 3}
    missing_now = poll(monitor, pause=0.01).logged["w"]
    source.values = {"frames": 5, "batches": 4}
    missing_before = poll(monitor, pause=0.01).logged["w"]
    assert missing_now == {"w/batches": 3.0}
    assert set(missing_before) == {"w/frames", "w/batches", "w/batches_per_second"}


def test_a_counter_that_went_down_gives_no_rate(
    impl: Any, sink: RecordingLogger
) -> None:
    source = Pipeline(frames=100, batches=5)
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(source, name="w")
    poll(monitor)
    source.values = {"frames": 40, "batches": 6}
    payload = poll(monitor, pause=0.01).logged["w"]
    assert "w/frames_per_second" not in payload
    assert payload["w/batches_per_second"] > 0


def test_an_unchanged_counter_has_a_zero_rate(impl: Any, sink: RecordingLogger) -> None:
    source = Pipeline(frames=100)
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(source, name="w")
    poll(monitor)
    assert poll(monitor, pause=0.01).logged["w"]["w/frames_per_second"] == 0.0


def test_rates_cover_the_time_since_the_last_logged_snapshot(
    impl: Any, sink: RecordingLogger
) -> None:
    monitor, source = counter_monitor(impl, sink, 10)
    source.values["frames"] = 0
    baseline = poll(monitor)
    source.values["frames"] = 9
    skipped = poll(monitor, pause=0.02)
    source.values["frames"] = 10
    logged = poll(monitor, pause=0.02)
    assert skipped.logged == {}
    rate = logged.logged["collector"]["collector/frames_per_second"]
    assert_rate(rate, 10, baseline.window, logged.window)


# -- errors -----------------------------------------------------------------


def test_warn_mode_warns_once_per_failure_streak_of_a_failing_stats(
    impl: Any, sink: RecordingLogger, warning_messages: Any
) -> None:
    source = Pipeline(frames=1)
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(source, name="flaky_collector")
    source.error = RuntimeError("stats exploded")
    assert [monitor.step() for _ in range(3)] == [{}, {}, {}]
    assert len(warning_messages("flaky_collector")) == 1
    source.error = None
    assert monitor.step() == {"flaky_collector": {"flaky_collector/frames": 1.0}}
    source.error = RuntimeError("stats exploded")
    monitor.step()
    monitor.step()
    messages = warning_messages("flaky_collector")
    assert len(messages) == 2
    assert all("stats exploded" in message for message in messages)


def test_warn_mode_warns_once_per_failure_streak_of_a_failing_logger(
    impl: Any, sink: RecordingLogger, warning_messages: Any
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(Pipeline(frames=1), name="collector_a")
    sink.fail_with = OSError("disk full")
    assert [monitor.step() for _ in range(3)] == [{}, {}, {}]
    messages = warning_messages("collector_a")
    assert len(messages) == 1
    assert "disk full" in messages[0]
    sink.fail_with = None
    assert monitor.step() == {"collector_a": {"collector_a/frames": 1.0}}


def test_a_failing_watch_does_not_stop_the_others(
    impl: Any, sink: RecordingLogger, warning_messages: Any
) -> None:
    broken = Pipeline()
    broken.error = RuntimeError("stats exploded")
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(broken, name="broken")
    monitor.watch(Pipeline(frames=2), name="healthy")
    assert monitor.step() == {"healthy": {"healthy/frames": 2.0}}
    assert warning_messages("broken")
    assert warning_messages("healthy") == []


def test_raise_mode_propagates_a_failing_stats(
    impl: Any, sink: RecordingLogger
) -> None:
    source = Pipeline()
    source.error = RuntimeError("stats exploded")
    monitor = impl.LoggerMonitor(sink, background=False, on_error="raise")
    monitor.watch(source, name="collector")
    with pytest.raises(RuntimeError, match="stats exploded"):
        monitor.step()


def test_raise_mode_propagates_a_failing_logger(
    impl: Any, sink: RecordingLogger
) -> None:
    sink.fail_with = OSError("disk full")
    monitor = impl.LoggerMonitor(sink, background=False, on_error="raise")
    monitor.watch(Pipeline(frames=1), name="collector")
    with pytest.raises(OSError, match="disk full"):
        monitor.step()


def test_ignore_mode_skips_failures_silently(
    impl: Any, sink: RecordingLogger, warning_messages: Any
) -> None:
    broken = Pipeline()
    broken.error = RuntimeError("stats exploded")
    monitor = impl.LoggerMonitor(sink, background=False, on_error="ignore")
    monitor.watch(broken, name="broken")
    monitor.watch(Pipeline(frames=2), name="healthy")
    assert monitor.step() == {"healthy": {"healthy/frames": 2.0}}
    sink.fail_with = OSError("disk full")
    assert monitor.step() == {}
    assert warning_messages() == []


def test_a_stats_that_returns_no_mapping_is_a_poll_error(
    impl: Any, sink: RecordingLogger, warning_messages: Any
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(NoStats(), name="odd", stats_fn=lambda: 42)
    assert monitor.step() == {}
    assert len(warning_messages("odd")) == 1


# -- lifecycle --------------------------------------------------------------


@pytest.mark.timeout(30)
def test_background_monitor_polls_on_its_own(
    impl: Any, sink: RecordingLogger, wait_until: Any
) -> None:
    source = Pipeline(frames=0)
    monitor = impl.LoggerMonitor(sink, poll_interval=0.02)
    monitor.watch(source, name="collector")
    assert monitor.start() is monitor
    try:
        assert wait_until(lambda: len(sink.payloads_of("collector")) >= 3)
    finally:
        monitor.stop()


@pytest.mark.timeout(30)
def test_background_monitor_logs_a_real_replay_buffer_to_csv(
    impl: Any, csv_logger: CSVLogger, replay_buffer: ReplayBuffer, wait_until: Any
) -> None:
    with impl.LoggerMonitor(csv_logger, poll_interval=0.02) as monitor:
        monitor.watch(replay_buffer, name="rb", step="write_count")
        replay_buffer.extend(torch.arange(30))
        assert wait_until(
            lambda: (30, 30.0) in csv_scalars(csv_logger, "rb/write_count")
        )
    assert csv_scalars(csv_logger, "rb/size")[-1] == (30, 30.0)


@pytest.mark.timeout(30)
def test_first_background_poll_waits_one_interval(
    impl: Any, sink: RecordingLogger
) -> None:
    source = Pipeline(frames=0)
    monitor = impl.LoggerMonitor(sink, poll_interval=5.0)
    monitor.watch(source, name="collector")
    monitor.start()
    assert source.calls == 0
    monitor.stop()
    assert source.calls == 1


@pytest.mark.timeout(30)
def test_start_in_manual_mode_polls_nothing(impl: Any, sink: RecordingLogger) -> None:
    source = Pipeline(frames=0)
    monitor = impl.LoggerMonitor(sink, poll_interval=0.01, background=False)
    monitor.watch(source, name="collector")
    assert monitor.start() is monitor
    time.sleep(0.2)
    assert source.calls == 0


def test_stop_logs_a_forced_final_snapshot_with_rates(
    impl: Any, sink: RecordingLogger
) -> None:
    source = Pipeline(frames=0)
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(source, name="collector", schedule=impl.Every.counter("frames", 1000))
    first = poll(monitor)
    source.values["frames"] = 40
    time.sleep(0.02)
    began = time.monotonic()
    monitor.stop()
    final = Window(began, time.monotonic())
    payload, step = sink.payloads[-1]
    assert step == 40
    assert payload["collector/frames"] == 40.0
    assert_rate(payload["collector/frames_per_second"], 40, first.window, final)


def test_stop_forces_a_final_snapshot_of_a_seconds_schedule(
    impl: Any, sink: RecordingLogger
) -> None:
    source = Pipeline(size=1)
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(source, name="rb", schedule=impl.Every.seconds(3600))
    monitor.step()
    source.values["size"] = 9
    monitor.stop()
    assert [payload for payload, _ in sink.payloads] == [
        {"rb/size": 1.0},
        {"rb/size": 9.0},
    ]


def test_stop_skips_watches_without_log_on_close(
    impl: Any, sink: RecordingLogger
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(Pipeline(frames=1), name="kept")
    monitor.watch(Pipeline(frames=2), name="quiet", log_on_close=False)
    monitor.stop()
    assert [payload for payload, _ in sink.payloads] == [{"kept/frames": 1.0}]


def test_log_final_true_overrides_log_on_close(
    impl: Any, sink: RecordingLogger
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(Pipeline(frames=1), name="kept")
    monitor.watch(Pipeline(frames=2), name="quiet", log_on_close=False)
    monitor.stop(log_final=True)
    assert [payload for payload, _ in sink.payloads] == [
        {"kept/frames": 1.0},
        {"quiet/frames": 2.0},
    ]


def test_log_final_false_logs_no_final_snapshot(
    impl: Any, sink: RecordingLogger
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(Pipeline(frames=1), name="collector")
    monitor.stop(log_final=False)
    assert sink.payloads == []


def test_never_started_manual_monitor_logs_finals_on_first_stop(
    impl: Any, sink: RecordingLogger
) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(Pipeline(frames=5), name="collector", log_on_start=False)
    monitor.stop()
    assert sink.payloads == [({"collector/frames": 5.0}, None)]


def test_second_stop_does_nothing(impl: Any, sink: RecordingLogger) -> None:
    monitor = impl.LoggerMonitor(sink, background=False)
    monitor.watch(Pipeline(frames=5), name="collector")
    monitor.stop()
    monitor.stop()
    monitor.stop(log_final=True)
    assert len(sink.payloads) == 1


@pytest.mark.timeout(30)
def test_with_block_starts_polling_and_logs_finals_on_exit(
    impl: Any, sink: RecordingLogger, wait_until: Any
) -> None:
    source = Pipeline(episodes=0)
    with impl.LoggerMonitor(sink, poll_interval=0.02) as monitor:
        assert isinstance(monitor, impl.LoggerMonitor)
        monitor.watch(
            source, name="collector", schedule=impl.Every.counter("episodes", 10**9)
        )
        assert wait_until(lambda: source.calls >= 2)
        source.values["episodes"] = 7
    assert [payload for payload, _ in sink.payloads] == [
        {"collector/episodes": 0.0},
        {"collector/episodes": 7.0},
    ]


@pytest.mark.timeout(30)
def test_leaving_a_with_block_after_an_explicit_stop_logs_no_second_final(
    impl: Any, sink: RecordingLogger
) -> None:
    with impl.LoggerMonitor(sink, poll_interval=5.0) as monitor:
        monitor.watch(Pipeline(episodes=3), name="collector")
        monitor.stop()
        assert len(sink.payloads) == 1
    assert len(sink.payloads) == 1


@pytest.mark.timeout(30)
def test_stopped_monitor_can_be_started_again(
    impl: Any, sink: RecordingLogger, wait_until: Any
) -> None:
    source = Pipeline(episodes=0)
    monitor = impl.LoggerMonitor(sink, poll_interval=0.02)
    monitor.watch(
        source, name="collector", schedule=impl.Every.counter("episodes", 10**9)
    )
    monitor.start()
    assert wait_until(lambda: source.calls >= 2)
    monitor.stop()
    assert len(sink.payloads) == 2
    calls_when_stopped = source.calls
    monitor.start()
    assert wait_until(lambda: source.calls >= calls_when_stopped + 2)
    source.values["episodes"] = 7
    monitor.stop()
    assert [payload for payload, _ in sink.payloads][-1] == {"collector/episodes": 7.0}
    assert len(sink.payloads) == 3


@pytest.mark.timeout(30)
def test_stop_leaves_the_logger_and_the_target_usable(
    impl: Any, csv_logger: CSVLogger, replay_buffer: ReplayBuffer
) -> None:
    monitor = impl.LoggerMonitor(csv_logger, poll_interval=0.02)
    monitor.watch(replay_buffer, name="rb", step="write_count")
    monitor.start()
    replay_buffer.extend(torch.arange(5))
    monitor.stop()
    assert csv_logger.is_alive
    csv_logger.log_scalar("after_stop", 1.0, step=3)
    assert csv_scalars(csv_logger, "after_stop") == [(3, 1.0)]
    replay_buffer.extend(torch.arange(5))
    assert len(replay_buffer) == 10


@pytest.mark.timeout(30)
def test_background_failures_warn_once_per_streak(
    impl: Any, sink: RecordingLogger, warning_messages: Any, wait_until: Any
) -> None:
    source = Pipeline()
    source.error = RuntimeError("stats exploded")
    monitor = impl.LoggerMonitor(sink, poll_interval=0.02)
    monitor.watch(source, name="flaky_buffer")
    monitor.start()
    try:
        assert wait_until(lambda: source.calls >= 5)
    finally:
        monitor.stop(log_final=False)
    assert len(warning_messages("flaky_buffer")) == 1


@pytest.mark.timeout(30)
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_raise_mode_ends_background_polling_at_the_first_error(
    impl: Any, sink: RecordingLogger, wait_until: Any
) -> None:
    source = Pipeline()
    source.error = RuntimeError("stats exploded")
    monitor = impl.LoggerMonitor(sink, poll_interval=0.02, on_error="raise")
    monitor.watch(source, name="collector")
    monitor.start()
    try:
        assert wait_until(lambda: source.calls >= 1)
        # Twenty-five poll intervals: a thread still alive would poll again.
        time.sleep(0.5)
        assert source.calls == 1
    finally:
        monitor.stop(log_final=False)
