"""Ray actors as monitor targets, on a real local Ray started once for this module."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import ray

from rlpulse import LoggerMonitor, SQLiteLogger, read
from rlpulse.sources.ray import ActorTimeoutError, ActorUnreachableError, RayTarget
from tests.support import REPO

pytestmark = pytest.mark.timeout(120)

# A new actor's first call waits for its worker process to start, which on a
# loaded machine can take seconds: manual monitors here allow for that.
ACTOR_START = 60.0

EXAMPLE = REPO / "examples" / "ray_pipeline.py"


@pytest.fixture(scope="module", autouse=True)
def ray_address() -> Iterator[str]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


@ray.remote
class Collector:
    """Counts its stats() calls; each call adds ten frames."""

    def __init__(self) -> None:
        self.calls = 0

    def stats(self, extra: str | None = None) -> dict[str, float]:
        self.calls += 1
        snapshot = {"frames": 10.0 * self.calls}
        if extra is not None:
            snapshot[extra] = 1.0
        return snapshot

    def metrics(self) -> dict[str, float]:
        return {"loss": 0.5}

    def stats_calls(self) -> int:
        return self.calls


@ray.remote(max_concurrency=8)
class SlowActor:
    """A stats() that sleeps; other threads answer stats_calls() (and repeated stats()) meanwhile."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.calls = 0
        self.lock = threading.Lock()

    def stats(self) -> dict[str, float]:
        with self.lock:
            self.calls += 1
        time.sleep(self.delay)
        return {"answered": 1.0}

    def stats_calls(self) -> int:
        with self.lock:
            return self.calls


@ray.remote
class Broken:
    def stats(self) -> dict[str, float]:
        raise ValueError("stats failed inside the actor")


@ray.remote
class Worker:
    def ping(self) -> str:
        return "pong"


class Discard:
    """A sink for tests that read what step() returns."""

    def log_metrics(self, metrics: Any, step: int | None = None) -> None:
        pass


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "metrics.db"


@pytest.fixture
def slow_actor() -> Iterator[Any]:
    actor = SlowActor.remote(delay=300.0)
    ray.get(actor.stats_calls.remote(), timeout=60)  # started
    yield actor
    ray.kill(actor)


def _values(db: Path, name: str) -> list[float]:
    return [record.value for record in read(db) if record.name == name]


def _stats_calls(actor: Any, wait_until: Callable[..., bool]) -> int:
    """How many stats() calls the actor has begun, once it has begun one."""
    assert wait_until(
        lambda: ray.get(actor.stats_calls.remote(), timeout=30) >= 1, timeout=60.0
    )
    return int(ray.get(actor.stats_calls.remote(), timeout=30))


def _first_error(
    monitor: LoggerMonitor, error: type[Exception], timeout: float = 60.0
) -> Exception:
    """Step a manual monitor until a poll raises ``error`` (an actor killed asynchronously)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            monitor.step()
        except error as raised:
            return raised
        time.sleep(0.05)
    raise AssertionError(f"no poll raised {error.__name__} within {timeout}s")


def test_an_actors_stats_reach_a_sqlite_store(db: Path) -> None:
    collector = Collector.remote()
    with SQLiteLogger(db) as sink:
        monitor = LoggerMonitor(sink, background=False, poll_timeout=ACTOR_START)
        monitor.watch(collector)
        monitor.step()
        monitor.step()
        monitor.stop()
    assert _values(db, "collector/frames") == [10.0, 20.0, 30.0]


def test_an_actor_watch_is_named_after_the_actors_class_in_lower_case() -> None:
    monitor = LoggerMonitor(Discard(), background=False, poll_timeout=ACTOR_START)
    names = [
        monitor.watch(Collector.remote()),
        monitor.watch(Collector.remote()),
        monitor.watch(RayTarget(Collector.remote())),
    ]
    assert names == ["collector", "collector_1", "collector_2"]


def test_each_poll_is_one_remote_call() -> None:
    collector = Collector.remote()
    monitor = LoggerMonitor(Discard(), background=False, poll_timeout=ACTOR_START)
    monitor.watch(collector)
    for _ in range(5):
        monitor.step()
    assert ray.get(collector.stats_calls.remote(), timeout=30) == 5


def test_stats_kwargs_are_passed_to_the_remote_method() -> None:
    monitor = LoggerMonitor(Discard(), background=False, poll_timeout=ACTOR_START)
    monitor.watch(Collector.remote(), stats_kwargs={"extra": "tagged"})
    assert monitor.step()["collector"]["collector/tagged"] == 1.0


def test_a_ray_target_calls_the_method_it_is_given() -> None:
    monitor = LoggerMonitor(Discard(), background=False, poll_timeout=ACTOR_START)
    monitor.watch(RayTarget(Collector.remote(), method="metrics"))
    assert monitor.step() == {"collector": {"collector/loss": 0.5}}


def test_an_actor_without_stats_is_refused_naming_stats_and_the_handle_type() -> None:
    monitor = LoggerMonitor(Discard(), background=False, poll_timeout=ACTOR_START)
    with pytest.raises(TypeError, match=r"Worker \(ActorHandle\).*stats\(\)"):
        monitor.watch(Worker.remote())


def test_a_ray_target_refuses_a_timeout_that_is_not_positive() -> None:
    with pytest.raises(ValueError, match="timeout"):
        RayTarget(Collector.remote(), timeout=0)


def test_a_watch_bounds_its_ray_target_within_its_poll_timeout() -> None:
    monitor = LoggerMonitor(Discard(), background=False, poll_timeout=8.0)
    bounded = RayTarget(Collector.remote())
    own_timeout = RayTarget(Collector.remote(), timeout=1.0)
    shorter_watch = RayTarget(Collector.remote())
    monitor.watch(bounded)
    monitor.watch(own_timeout)
    monitor.watch(shorter_watch, poll_timeout=2.0)
    timeouts = (bounded.timeout, own_timeout.timeout, shorter_watch.timeout)
    assert timeouts == (7.0, 1.0, 1.5)


def test_a_ray_target_takes_the_tightest_bound_of_its_watches() -> None:
    target = RayTarget(Collector.remote())
    LoggerMonitor(Discard(), poll_timeout=2.0).watch(target)
    LoggerMonitor(Discard(), poll_timeout=8.0).watch(target)
    assert target.timeout == 1.5


def test_a_watch_without_poll_timeout_leaves_a_ray_target_unbounded() -> None:
    target = RayTarget(Collector.remote())
    LoggerMonitor(Discard(), poll_timeout=None).watch(target)
    assert target.timeout is None


def test_a_watch_with_an_invalid_poll_timeout_leaves_its_ray_target_alone() -> None:
    target = RayTarget(Collector.remote())
    with pytest.raises(ValueError, match="poll_timeout"):
        LoggerMonitor(Discard()).watch(target, poll_timeout=-1.0)
    assert target.timeout is None


def test_a_ray_target_describes_its_actor_method_and_timeout() -> None:
    collector = Collector.remote()
    target = RayTarget(collector, method="metrics", timeout=2.0)
    assert (target.handle, target.method) == (collector, "metrics")
    assert repr(target).startswith("RayTarget(Ray actor Collector (id ")
    assert repr(target).endswith("method='metrics', timeout=2.0)")


def test_a_replacement_actor_without_the_method_is_refused() -> None:
    target = RayTarget(Collector.remote())
    with pytest.raises(TypeError, match=r"Worker.*stats\(\)"):
        target.handle = Worker.remote()


def test_pointing_a_ray_target_elsewhere_forgets_the_outstanding_call(
    slow_actor: Any,
) -> None:
    target = RayTarget(slow_actor, timeout=0.2)
    with pytest.raises(ActorTimeoutError):
        target.stats()
    replacement = Collector.remote()
    ray.get(replacement.stats_calls.remote(), timeout=60)  # started
    target.handle = replacement
    assert target.stats() == {"frames": 10.0}


def test_an_exception_inside_stats_reaches_the_monitor_as_its_own_type() -> None:
    monitor = LoggerMonitor(
        Discard(), background=False, poll_timeout=ACTOR_START, on_error="raise"
    )
    monitor.watch(Broken.remote())
    with pytest.raises(ValueError, match="stats failed inside the actor"):
        monitor.step()


def test_a_call_past_its_deadline_raises_a_timeout_error(slow_actor: Any) -> None:
    target = RayTarget(slow_actor, timeout=0.2)
    with pytest.raises(TimeoutError, match=r"SlowActor.*stats\(\) did not answer"):
        target.stats()


def test_a_call_still_outstanding_is_not_issued_again(
    slow_actor: Any, wait_until: Callable[..., bool]
) -> None:
    target = RayTarget(slow_actor, timeout=0.2)
    for _ in range(4):
        with pytest.raises(ActorTimeoutError):
            target.stats()
    assert _stats_calls(slow_actor, wait_until) == 1


def test_a_poll_while_a_call_is_outstanding_does_not_wait_again(
    slow_actor: Any,
) -> None:
    target = RayTarget(slow_actor, timeout=3.0)
    with pytest.raises(ActorTimeoutError):
        target.stats()
    started = time.monotonic()
    with pytest.raises(ActorTimeoutError, match="has not answered for"):
        target.stats()
    assert time.monotonic() - started < 1.5


def test_a_late_answer_is_used_by_the_next_poll(
    wait_until: Callable[..., bool],
) -> None:
    actor = SlowActor.remote(delay=1.0)
    target = RayTarget(actor, timeout=0.1)
    with pytest.raises(ActorTimeoutError):
        target.stats()
    answers: list[Any] = []

    def answered() -> bool:
        try:
            answers.append(target.stats())
        except ActorTimeoutError:
            return False
        return True

    assert wait_until(answered, timeout=60.0, interval=0.05)
    assert answers == [{"answered": 1.0}]
    assert _stats_calls(actor, wait_until) == 1


def test_a_healthy_actor_keeps_logging_beside_a_slow_one(
    db: Path, slow_actor: Any, wait_until: Callable[..., bool]
) -> None:
    with SQLiteLogger(db) as sink:
        monitor = LoggerMonitor(
            sink, poll_interval=0.05, poll_timeout=2.0, on_error="ignore"
        )
        monitor.watch(slow_actor)
        monitor.watch(Collector.remote())
        with monitor:
            # The slow actor's call fails at its deadline, left behind by
            # the round, while the healthy one keeps logging.
            assert wait_until(
                lambda: (
                    monitor.stats()["errors"] >= 1
                    and len(_values(db, "collector/frames")) >= 10
                ),
                timeout=60.0,
                interval=0.05,
            )
            logged_by_then = len(_values(db, "collector/frames"))
            assert wait_until(
                lambda: len(_values(db, "collector/frames")) >= logged_by_then + 10,
                timeout=60.0,
                interval=0.05,
            )
    assert _values(db, "slowactor/answered") == []


def test_a_slow_actors_call_is_not_reissued_by_background_polls(
    slow_actor: Any, wait_until: Callable[..., bool]
) -> None:
    monitor = LoggerMonitor(
        Discard(), poll_interval=0.05, poll_timeout=2.0, on_error="ignore"
    )
    monitor.watch(slow_actor)
    with monitor:
        assert wait_until(
            lambda: monitor.stats()["errors"] >= 5, timeout=60.0, interval=0.05
        )
    assert _stats_calls(slow_actor, wait_until) == 1


def test_a_slow_actor_fails_its_polls_before_poll_timeout_counts_it_hung(
    slow_actor: Any,
    wait_until: Callable[..., bool],
    warning_messages: Callable[..., list[str]],
) -> None:
    monitor = LoggerMonitor(Discard(), poll_interval=0.05, poll_timeout=4.0)
    monitor.watch(slow_actor)
    with monitor:
        assert wait_until(
            lambda: monitor.stats()["errors"] >= 3, timeout=60.0, interval=0.05
        )
        timeouts = monitor.stats()["timeouts"]
    assert timeouts == 0
    assert len(warning_messages("ActorTimeoutError")) == 1
    assert "'slowactor'" in warning_messages("ActorTimeoutError")[0]


def test_a_killed_actor_raises_an_error_naming_the_actor() -> None:
    collector = Collector.remote()
    monitor = LoggerMonitor(
        Discard(), background=False, poll_timeout=ACTOR_START, on_error="raise"
    )
    monitor.watch(collector)
    monitor.step()
    ray.kill(collector)
    error = _first_error(monitor, ActorUnreachableError)
    assert "Ray actor Collector" in str(error)
    assert "died" in str(error)


def test_a_killed_actor_warns_once_naming_the_watch_and_the_actor(
    warning_messages: Callable[..., list[str]], wait_until: Callable[..., bool]
) -> None:
    collector = Collector.remote()
    monitor = LoggerMonitor(Discard(), background=False, poll_timeout=ACTOR_START)
    monitor.watch(collector)
    ray.kill(collector)
    assert wait_until(
        lambda: monitor.step() == {} and bool(warning_messages("ActorUnreachable")),
        timeout=60.0,
        interval=0.05,
    )
    for _ in range(3):
        monitor.step()
    [warning] = warning_messages("ActorUnreachable")
    assert "'collector'" in warning
    assert "Ray actor Collector" in warning


def test_watching_a_replacement_actor_resumes_logging() -> None:
    collector = Collector.remote()
    monitor = LoggerMonitor(
        Discard(), background=False, poll_timeout=ACTOR_START, on_error="raise"
    )
    monitor.watch(collector)
    ray.kill(collector)
    _first_error(monitor, ActorUnreachableError)
    monitor.unwatch("collector")
    monitor.watch(Collector.remote())
    assert monitor.step() == {"collector": {"collector/frames": 10.0}}


def test_pointing_a_ray_target_at_a_replacement_actor_resumes_logging() -> None:
    collector = Collector.remote()
    target = RayTarget(collector)
    monitor = LoggerMonitor(
        Discard(), background=False, poll_timeout=ACTOR_START, on_error="raise"
    )
    monitor.watch(target)
    ray.kill(collector)
    _first_error(monitor, ActorUnreachableError)
    target.handle = Collector.remote()
    assert monitor.step() == {"collector": {"collector/frames": 10.0}}


def test_torchrls_ray_replay_buffer_is_watched_through_its_own_stats(
    db: Path,
) -> None:
    from functools import partial

    import torch
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage
    from torchrl.data.replay_buffers.ray_buffer import RayReplayBuffer

    buffer = RayReplayBuffer(
        storage=partial(LazyTensorStorage, 100),
        batch_size=4,
        remote_config={"num_cpus": 0},
    )
    try:
        buffer.extend(TensorDict({"value": torch.arange(8)}, batch_size=[8]))
        with SQLiteLogger(db) as sink:
            monitor = LoggerMonitor(sink, background=False, poll_timeout=ACTOR_START)
            assert monitor.watch(buffer) == "rayreplaybuffer"
            monitor.step()
    finally:
        buffer.close()
    assert _values(db, "rayreplaybuffer/write_count") == [8.0]
    assert _values(db, "rayreplaybuffer/capacity") == [100.0]


def test_a_torchrl_replay_buffer_actor_is_watched_as_an_actor(db: Path) -> None:
    from functools import partial

    import torch
    from torchrl.data import LazyTensorStorage, ReplayBuffer

    actor = ReplayBuffer.as_remote({"num_cpus": 0}).remote(
        storage=partial(LazyTensorStorage, 100), batch_size=4
    )
    try:
        ray.get(actor.extend.remote(torch.arange(8)), timeout=60)
        with SQLiteLogger(db) as sink:
            monitor = LoggerMonitor(sink, background=False, poll_timeout=ACTOR_START)
            assert monitor.watch(actor) == "replaybuffer"
            monitor.step()
    finally:
        ray.kill(actor)
    assert _values(db, "replaybuffer/write_count") == [8.0]


def test_watching_local_targets_imports_no_ray() -> None:
    code = (
        "import sys\n"
        "from rlpulse import LoggerMonitor, Tally\n"
        "class Discard:\n"
        "    def log_metrics(self, metrics, step=None):\n"
        "        pass\n"
        "monitor = LoggerMonitor(Discard(), background=False)\n"
        "monitor.watch(Tally())\n"
        "monitor.step()\n"
        "print('ray' in sys.modules, 'rlpulse.sources.ray' in sys.modules)\n"
    )
    finished = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert finished.stdout.split() == ["False", "False"], finished.stderr


def test_the_ray_pipeline_example_logs_every_actor(db: Path, ray_address: str) -> None:
    finished = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE),
            "--seconds",
            "3",
            "--db",
            str(db),
            "--address",
            ray_address,
        ],
        timeout=100,
        capture_output=True,
        text=True,
    )
    assert finished.returncode == 0, finished.stderr[-4000:]
    names = {record.name for record in read(db)}
    assert {
        "collector/frames",
        "collector_1/frames",
        "ringbuffer/write_count",
        "learner/updates",
    } <= names
    assert max(_values(db, "ringbuffer/write_count")) > 0
