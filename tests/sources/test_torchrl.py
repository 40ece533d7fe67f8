"""SharedCountersTransform inside the workers of real TorchRL multiprocess collectors.

Two CartPole workers of a ``MultiSyncCollector`` (and of a
``MultiAsyncCollector``) each run their environment behind a
``SharedCountersTransform``; a background ``LoggerMonitor`` in the parent
watches the ``SharedCounters`` into a SQLite store while a thread iterates
the collector. Then one worker is killed with SIGKILL. Every assertion reads
the store back with ``rlpulse.read``.

Each collector runs once for the whole module (starting spawned workers
costs seconds); the tests read what that run recorded.
"""

from __future__ import annotations

import contextlib
import functools
import math
import multiprocessing
import os
import pickle
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytest.importorskip("gymnasium")
torch = pytest.importorskip("torch")
pytest.importorskip("torchrl")

from tensordict import TensorDict  # noqa: E402
from torchrl.collectors import (  # noqa: E402
    Collector,
    MultiAsyncCollector,
    MultiSyncCollector,
)
from torchrl.envs import GymEnv, TransformedEnv  # noqa: E402
from torchrl.envs.utils import RandomPolicy  # noqa: E402

from rlpulse import LoggerMonitor, SharedCounters, SQLiteLogger, Tally, read  # noqa: E402
from rlpulse.sources.torchrl import (  # noqa: E402
    WORKER_COUNTERS,
    EpisodeTally,
    SharedCountersTransform,
)
from rlpulse.testing import InMemorySink  # noqa: E402

pytestmark = pytest.mark.timeout(240)

WORKERS = 2
KILLED = 0
STOPPED = 0
SURVIVOR = 1
LIVENESS = 2.0
FRAMES_PER_BATCH = 64
POLL_INTERVAL = 0.1
# Workers must have collected this many frames each before the kill.
FRAMES_BEFORE_KILL = 4 * FRAMES_PER_BATCH
COLLECTORS = {"sync": MultiSyncCollector, "async": MultiAsyncCollector}


def make_env(counters: SharedCounters, worker: int) -> TransformedEnv:
    """The environment factory every worker process calls, with its own index."""
    return TransformedEnv(
        GymEnv("CartPole-v1"), SharedCountersTransform(counters, worker)
    )


Payload = dict[str, float]


@dataclass
class WorkerRun:
    """The payloads a background monitor logged around a disturbed worker.

    ``workers`` are the ``SharedCounters`` payloads and ``collector`` the
    collector's aggregate view, each ``(wall time, {metric: value})`` with the
    watch name stripped. ``disturbed_at`` is when the worker was killed or
    stopped, ``resumed_at`` when a stopped worker was continued.
    """

    workers: list[tuple[float, Payload]]
    collector: list[tuple[float, Payload]]
    disturbed_at: float
    resumed_at: float = math.inf
    episodes: dict[str, float] = field(default_factory=dict)
    finished_lengths: list[int] = field(default_factory=list)

    def before(self) -> list[Payload]:
        """The workers' payloads logged before the disturbance."""
        return [payload for when, payload in self.workers if when < self.disturbed_at]

    def after(
        self, seconds: float, watch: str = "workers", until: float = math.inf
    ) -> list[Payload]:
        """Payloads logged from ``seconds`` after the disturbance, up to ``until``."""
        return [
            payload
            for when, payload in getattr(self, watch)
            if self.disturbed_at + seconds <= when < until
        ]


def payloads_of(store: Path, watch: str) -> list[tuple[float, Payload]]:
    """One watch's payloads in the store, as ``(wall time, {metric: value})``, in order."""
    prefix = f"{watch}/"
    grouped: dict[float, Payload] = defaultdict(dict)
    for record in read(store):
        if record.name.startswith(prefix):
            grouped[record.wall_time][record.name.removeprefix(prefix)] = record.value
    return sorted(grouped.items())


def wait_for(
    condition: Callable[[], bool], timeout: float, what: str, poll: float = 0.05
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(poll)


def shut_down(
    collector: MultiSyncCollector, consumer: threading.Thread | None = None
) -> None:
    """Shut the collector down under a deadline, whatever state a dead worker left it in."""
    closer = threading.Thread(
        target=collector.shutdown,
        kwargs={"timeout": 10, "raise_on_error": False},
        daemon=True,
    )
    closer.start()
    closer.join(20)
    for process in getattr(collector, "procs", ()):
        try:
            alive = process.is_alive()
        except ValueError:  # joined and closed by the collector
            continue
        if alive:
            process.kill()
            process.join(10)
    if consumer is not None:
        consumer.join(10)


@contextlib.contextmanager
def monitored_collector(
    collector_class: type,
    store: Path,
    on_batch: Callable[[TensorDict], None] = lambda batch: None,
) -> Iterator[tuple[MultiSyncCollector, SharedCounters]]:
    """Run a two-worker collector, iterated by a thread, under a background monitor.

    The monitor watches the workers' shared counters as ``workers`` and the
    collector's aggregate view as ``collector``; the thread hands every batch
    to ``on_batch``. Yields once both workers
    have collected ``FRAMES_BEFORE_KILL`` frames; on exit the monitor stops,
    then the collector is shut down under a deadline.
    """
    counters = SharedCounters(WORKERS, counters=WORKER_COUNTERS, liveness=LIVENESS)
    sink = SQLiteLogger(store)
    monitor = LoggerMonitor(sink, poll_interval=POLL_INTERVAL)
    monitor.watch(counters, name="workers")
    collector = collector_class(
        [functools.partial(make_env, counters, worker) for worker in range(WORKERS)],
        policy=None,
        frames_per_batch=FRAMES_PER_BATCH,
        total_frames=-1,
    )
    monitor.watch(collector, name="collector")

    def consume() -> None:
        # A dead worker ends the iteration with TorchRL's RuntimeError.
        with contextlib.suppress(Exception):
            for batch in collector:
                on_batch(batch)

    consumer = threading.Thread(target=consume, daemon=True)
    try:
        with monitor:
            consumer.start()

            def both_collected() -> bool:
                stats = counters.stats()
                return all(
                    stats[f"worker_{worker}/frames"] >= FRAMES_BEFORE_KILL
                    for worker in range(WORKERS)
                )

            wait_for(both_collected, 120, "both workers to collect")
            # A few more polls with both workers stepping.
            time.sleep(5 * POLL_INTERVAL)
            yield collector, counters
    finally:
        shut_down(collector, consumer)
        sink.close()
        counters.close()


def run_and_kill(collector_class: type, directory: Path) -> WorkerRun:
    store = directory / "workers.sqlite"
    tally = Tally(window=1_000_000)
    episode_tally = EpisodeTally(tally)
    flags: list[tuple[torch.Tensor, torch.Tensor]] = []

    def on_batch(batch: TensorDict) -> None:
        episode_tally(batch)  # in the loop: the way for multiprocess collectors
        flags.append(
            (
                batch["collector", "traj_ids"].reshape(-1),
                batch["next", "done"].reshape(-1),
            )
        )

    with monitored_collector(collector_class, store, on_batch) as (
        collector,
        counters,
    ):
        pid = collector.procs[KILLED].pid
        killed_at = time.time()
        os.kill(pid, signal.SIGKILL)
        wait_for(
            lambda: (
                counters.stats()["workers_alive"] < WORKERS
                and time.time() > killed_at + LIVENESS + 5 * POLL_INTERVAL
            ),
            60,
            "the killed worker to drop out",
        )
    # The consumer thread has ended: the tally and the flags are complete.
    return WorkerRun(
        payloads_of(store, "workers"),
        payloads_of(store, "collector"),
        killed_at,
        episodes=tally.stats(),
        finished_lengths=finished_trajectory_lengths(flags),
    )


def finished_trajectory_lengths(
    flags: list[tuple[torch.Tensor, torch.Tensor]],
) -> list[int]:
    """Frames of every trajectory that ended (done) in the collected batches.

    Collectors number trajectories across all workers, and a trajectory ends
    at its done step: its length is how many frames carry its id.
    """
    if not flags:
        return []
    trajectory_ids = torch.cat([ids for ids, _ in flags])
    dones = torch.cat([done for _, done in flags])
    finished = trajectory_ids[dones].unique()
    return [int((trajectory_ids == trajectory).sum()) for trajectory in finished]


def run_stop_and_continue(collector_class: type, directory: Path) -> WorkerRun:
    store = directory / "workers.sqlite"
    with monitored_collector(collector_class, store) as (collector, counters):
        pid = collector.procs[STOPPED].pid
        stopped_at = time.time()
        os.kill(pid, signal.SIGSTOP)
        try:
            wait_for(
                lambda: (
                    counters.stats()["workers_alive"] < WORKERS
                    and time.time() > stopped_at + LIVENESS + 5 * POLL_INTERVAL
                ),
                60,
                "the stopped worker to drop out",
            )
            frames_while_stopped = counters.stats()[f"worker_{STOPPED}/frames"]
        finally:
            resumed_at = time.time()
            os.kill(pid, signal.SIGCONT)
        wait_for(
            lambda: (
                counters.stats()["workers_alive"] == WORKERS
                and counters.stats()[f"worker_{STOPPED}/frames"] > frames_while_stopped
            ),
            60,
            "the continued worker to step again",
        )
        # A few polls with both workers stepping again.
        time.sleep(5 * POLL_INTERVAL)
    return WorkerRun(
        payloads_of(store, "workers"),
        payloads_of(store, "collector"),
        stopped_at,
        resumed_at,
    )


@pytest.fixture(scope="module")
def killed_runs(
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[str], WorkerRun]:
    """Return ``get(kind)``: the run of that collector kind, made on first use."""
    runs: dict[str, WorkerRun] = {}

    def get(kind: str) -> WorkerRun:
        if kind not in runs:
            runs[kind] = run_and_kill(COLLECTORS[kind], tmp_path_factory.mktemp(kind))
        return runs[kind]

    return get


@pytest.fixture(params=sorted(COLLECTORS))
def killed_run(
    request: pytest.FixtureRequest, killed_runs: Callable[[str], WorkerRun]
) -> WorkerRun:
    return killed_runs(request.param)


def test_each_workers_frames_grow_while_the_collector_runs(
    killed_run: WorkerRun,
) -> None:
    payloads = killed_run.before()
    for worker in range(WORKERS):
        frames = [payload[f"worker_{worker}/frames"] for payload in payloads]
        assert frames == sorted(frames)
        assert frames[-1] >= FRAMES_BEFORE_KILL
        assert len(set(frames)) >= 3, frames


def test_the_frames_of_all_workers_add_up_in_every_payload(
    killed_run: WorkerRun,
) -> None:
    for _, payload in killed_run.workers:
        assert payload["frames"] == sum(
            payload[f"worker_{worker}/frames"] for worker in range(WORKERS)
        )
        assert payload["episodes"] == sum(
            payload[f"worker_{worker}/episodes"] for worker in range(WORKERS)
        )


def test_both_workers_are_alive_while_the_collector_runs(
    killed_run: WorkerRun,
) -> None:
    last = killed_run.before()[-1]
    assert last["workers_alive"] == WORKERS
    for worker in range(WORKERS):
        assert last[f"worker_{worker}/heartbeat_age_s"] < LIVENESS


def test_the_monitor_derives_a_frame_rate_over_all_workers(
    killed_run: WorkerRun,
) -> None:
    rates = [payload["frames_per_second"] for payload in killed_run.before()[1:]]
    assert max(rates) > 0
    assert min(rates) >= 0


def test_finished_episodes_are_counted_per_worker(killed_run: WorkerRun) -> None:
    last = killed_run.before()[-1]
    for worker in range(WORKERS):
        # A random CartPole policy ends an episode every few dozen steps.
        assert last[f"worker_{worker}/episodes"] >= 1


def test_a_killed_worker_drops_out_of_workers_alive_within_the_liveness_window(
    killed_run: WorkerRun,
) -> None:
    # Past the liveness window (and a poll), every payload counts it out,
    # whatever the collector did with the other worker.
    late = killed_run.after(LIVENESS + 2 * POLL_INTERVAL)
    assert late
    for payload in late:
        assert payload[f"worker_{KILLED}/heartbeat_age_s"] >= LIVENESS
        assert payload["workers_alive"] <= WORKERS - 1


def test_a_killed_workers_counters_stay_readable_and_stop_growing(
    killed_run: WorkerRun,
) -> None:
    # A poll that started before the kill may be stamped just after it.
    after = killed_run.after(2 * POLL_INTERVAL)
    frames = {payload[f"worker_{KILLED}/frames"] for payload in after}
    assert len(frames) == 1
    assert frames.pop() >= FRAMES_BEFORE_KILL


def test_the_killed_workers_heartbeat_age_keeps_growing(killed_run: WorkerRun) -> None:
    ages = [
        payload[f"worker_{KILLED}/heartbeat_age_s"]
        for payload in killed_run.after(2 * POLL_INTERVAL)
    ]
    assert ages == sorted(ages)
    assert ages[-1] - ages[0] >= LIVENESS - 2 * POLL_INTERVAL


def test_episode_tally_called_in_the_loop_records_every_finished_trajectory(
    killed_run: WorkerRun,
) -> None:
    lengths = killed_run.finished_lengths
    assert lengths
    episodes = killed_run.episodes
    assert episodes["episode_length_count"] == len(lengths)
    assert episodes["episode_length_mean"] == pytest.approx(sum(lengths) / len(lengths))
    assert (episodes["episode_length_min"], episodes["episode_length_max"]) == (
        min(lengths),
        max(lengths),
    )
    # CartPole pays 1 per step: an episode's return is its length.
    assert episodes["episode_return_mean"] == episodes["episode_length_mean"]


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory: pytest.TempPathFactory) -> WorkerRun:
    """A MultiSyncCollector whose worker is stopped (SIGSTOP), then continued."""
    return run_stop_and_continue(MultiSyncCollector, tmp_path_factory.mktemp("stop"))


def test_a_stopped_worker_drops_out_of_workers_alive_while_its_process_lives(
    stopped_run: WorkerRun,
) -> None:
    window = (LIVENESS + 2 * POLL_INTERVAL, stopped_run.resumed_at)
    stuck = stopped_run.after(window[0], until=window[1])
    assert stuck
    for payload in stuck:
        assert payload[f"worker_{STOPPED}/heartbeat_age_s"] >= LIVENESS
        assert payload["workers_alive"] <= WORKERS - 1
    # TorchRL's own view counts processes: the stopped one still exists.
    collector = stopped_run.after(window[0], watch="collector", until=window[1])
    assert collector
    assert {payload["workers_alive"] for payload in collector} == {WORKERS}


def test_a_continued_worker_counts_as_alive_again(stopped_run: WorkerRun) -> None:
    stuck_frames = stopped_run.after(
        LIVENESS + 2 * POLL_INTERVAL, until=stopped_run.resumed_at
    )[-1][f"worker_{STOPPED}/frames"]
    last = stopped_run.workers[-1][1]
    assert last["workers_alive"] == WORKERS
    assert last[f"worker_{STOPPED}/heartbeat_age_s"] < LIVENESS
    assert last[f"worker_{STOPPED}/frames"] > stuck_frames


@pytest.mark.timeout(120)
def test_workers_a_collector_shuts_down_finish_and_are_not_lost() -> None:
    # Each worker closes its environment at shutdown: the transform says
    # the worker finished, so its heartbeat ageing past liveness is no loss.
    events: list[str] = []
    with SharedCounters(2, counters=WORKER_COUNTERS, liveness=0.5) as counters:
        monitor = LoggerMonitor(
            InMemorySink(),
            poll_interval=0.1,
            on_event=lambda event: events.append(event.kind),
        )
        monitor.watch(counters, name="workers")
        collector = MultiSyncCollector(
            [functools.partial(make_env, counters, worker) for worker in range(2)],
            policy=None,
            frames_per_batch=FRAMES_PER_BATCH,
            total_frames=4 * FRAMES_PER_BATCH,
        )
        try:
            with monitor:
                for _ in collector:
                    pass
                assert counters.stats()["workers_alive"] == 2
                collector.shutdown()
                finished = counters.stats()
                time.sleep(1.0)  # past liveness, polled
        finally:
            shut_down(collector)
    assert (finished["workers_alive"], finished["workers_finished"]) == (0, 2)
    assert "worker_lost" not in events


def test_closing_the_environment_after_the_counters_is_quiet() -> None:
    counters = SharedCounters(1, counters=WORKER_COUNTERS)
    env = TransformedEnv(GymEnv("CartPole-v1"), SharedCountersTransform(counters, 0))
    env.reset()
    counters.close()
    env.close()


# The transform alone, on one environment in this process.


def test_the_transform_counts_frames_episodes_and_beats_on_every_step() -> None:
    with SharedCounters(2, counters=WORKER_COUNTERS) as counters:
        env = TransformedEnv(
            GymEnv("CartPole-v1"), SharedCountersTransform(counters, SURVIVOR)
        )
        rollout = env.rollout(200, break_when_any_done=False)
        stats = counters.stats()
        assert stats[f"worker_{SURVIVOR}/frames"] == 200
        assert stats[f"worker_{SURVIVOR}/episodes"] == rollout["next", "done"].sum()
        assert stats["workers_alive"] == 1
        assert f"worker_{KILLED}/heartbeat_age_s" not in stats
        env.close()


def test_a_reset_alone_beats_the_heartbeat() -> None:
    with SharedCounters(1, counters=WORKER_COUNTERS) as counters:
        env = TransformedEnv(
            GymEnv("CartPole-v1"), SharedCountersTransform(counters, 0)
        )
        env.reset()
        stats = counters.stats()
        assert stats["workers_alive"] == 1
        assert stats["frames"] == 0
        env.close()


def test_the_transform_writes_counters_under_the_names_it_is_given() -> None:
    with SharedCounters(1, counters=("steps", "resets", "other")) as counters:
        env = TransformedEnv(
            GymEnv("CartPole-v1"),
            SharedCountersTransform(
                counters, 0, frames_key="steps", episodes_key="resets"
            ),
        )
        rollout = env.rollout(50, break_when_any_done=False)
        stats = counters.stats()
        assert stats["steps"] == 50
        assert stats["resets"] == rollout["next", "done"].sum()
        assert stats["other"] == 0
        env.close()


def test_the_transform_counts_every_environment_of_a_batched_step() -> None:
    with SharedCounters(1, counters=WORKER_COUNTERS) as counters:
        transform = SharedCountersTransform(counters, 0)
        step = TensorDict({"done": torch.tensor([[True], [False], [True]])}, [3])
        transform._step(TensorDict({}, [3]), step)
        stats = counters.stats()
        assert (stats["frames"], stats["episodes"]) == (3, 2)


def test_the_transform_refuses_counters_that_are_not_shared_counters() -> None:
    with pytest.raises(TypeError, match=r"SharedCounters\(workers"):
        SharedCountersTransform({"frames": 0}, 0)  # type: ignore[arg-type]


def test_the_transform_refuses_counters_without_its_keys() -> None:
    with (
        SharedCounters(1, counters=("frames",)) as counters,
        pytest.raises(KeyError, match=r"missing \['episodes'\]"),
    ):
        SharedCountersTransform(counters, 0)


def test_the_transform_refuses_a_worker_index_out_of_range() -> None:
    with (
        SharedCounters(2, counters=WORKER_COUNTERS) as counters,
        pytest.raises(IndexError, match=r"valid indices are 0\.\.1"),
    ):
        SharedCountersTransform(counters, 2)


def test_the_transforms_repr_names_its_worker_and_counters() -> None:
    with SharedCounters(2, counters=WORKER_COUNTERS) as counters:
        assert repr(SharedCountersTransform(counters, 1)) == (
            "SharedCountersTransform(worker=1, frames_key='frames', "
            "episodes_key='episodes')"
        )


# EpisodeTally on real collected batches, and the batches it refuses.


def seeded_cartpole_batches(**collector_kwargs: object) -> list[TensorDict]:
    torch.manual_seed(0)
    env = GymEnv("CartPole-v1")
    env.set_seed(0)
    collector = Collector(
        env,
        RandomPolicy(env.action_spec),
        frames_per_batch=50,
        total_frames=300,
        **collector_kwargs,
    )
    batches = [batch.clone() for batch in collector]
    collector.shutdown()
    return batches


def test_split_trajectories_give_the_episodes_of_the_flat_collection() -> None:
    flat = seeded_cartpole_batches()
    dones = torch.cat([batch["next", "done"] for batch in flat]).reshape(-1)
    ends = dones.nonzero().reshape(-1).tolist()
    lengths = [end - start for start, end in zip([-1, *ends], ends, strict=False)]
    tally = Tally()
    record = EpisodeTally(tally)
    with pytest.warns(UserWarning, match="split_trajs"):
        split = seeded_cartpole_batches(split_trajs=True)
    assert any(batch.batch_dims == 2 for batch in split)
    for batch in split:
        record(batch)
    stats = tally.stats()
    assert stats["episode_length_count"] == len(lengths)
    assert stats["episode_length_mean"] == pytest.approx(sum(lengths) / len(lengths))
    assert stats["episode_length_last"] == lengths[-1]
    assert stats["episode_return_max"] == max(lengths)


def flat_batch(rewards: list[float], dones: list[bool], **extra: object) -> TensorDict:
    return TensorDict(
        {
            "next": {
                "reward": torch.tensor(rewards).unsqueeze(-1),
                "done": torch.tensor(dones).unsqueeze(-1),
            },
            **extra,
        },
        batch_size=[len(rewards)],
    )


def test_a_padding_row_without_valid_steps_records_nothing() -> None:
    tally = Tally()
    batch = TensorDict(
        {
            "next": {
                "reward": torch.ones(2, 3, 1),
                "done": torch.tensor([[0, 0, 1], [0, 0, 0]]).bool().unsqueeze(-1),
            },
            "collector": {"mask": torch.tensor([[1, 1, 1], [0, 0, 0]]).bool()},
        },
        batch_size=[2, 3],
    )
    EpisodeTally(tally)(batch)
    assert tally.stats()["episode_length_count"] == 1


def test_an_unfinished_episode_behind_ten_thousand_newer_ones_is_forgotten() -> None:
    tally = Tally()
    record = EpisodeTally(tally)
    rows = 10_001
    record(
        TensorDict(
            {
                "next": {
                    "reward": torch.ones(rows, 1, 1),
                    "done": torch.zeros(rows, 1, 1, dtype=torch.bool),
                },
                "collector": {"traj_ids": torch.arange(rows).unsqueeze(-1)},
            },
            batch_size=[rows, 1],
        )
    )
    for trajectory in (0, rows - 1):
        record(
            flat_batch(
                [1.0], [True], collector={"traj_ids": torch.tensor([trajectory])}
            )
        )
    lengths = tally.stats()
    # The oldest trajectory's first step was dropped, the newest one's kept.
    assert lengths["episode_length_min"] == 1
    assert lengths["episode_length_max"] == 2


def test_episode_tally_refuses_a_tally_that_is_not_a_tally() -> None:
    with pytest.raises(TypeError, match=r"rlpulse\.Tally\(\)"):
        EpisodeTally({})  # type: ignore[arg-type]


def test_episode_tally_refuses_to_be_pickled_for_a_worker() -> None:
    with pytest.raises(TypeError, match=r"episode_tally\(batch\) in the training loop"):
        pickle.dumps(EpisodeTally(Tally()))


def record_in_a_forked_child(
    record: EpisodeTally, queue: multiprocessing.Queue
) -> None:
    try:
        record(flat_batch([1.0], [True]))
    except RuntimeError as error:
        queue.put(str(error))
    else:
        queue.put("recorded")


@pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="needs fork"
)
def test_episode_tally_refuses_to_record_in_a_process_it_was_not_created_in() -> None:
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(
        target=record_in_a_forked_child, args=(EpisodeTally(Tally()), queue)
    )
    child.start()
    message = queue.get(timeout=30)
    child.join(30)
    assert "post_collect_hook inside its workers" in message


def test_episode_tally_refuses_a_batch_that_is_not_a_tensordict() -> None:
    with pytest.raises(TypeError, match="got dict"):
        EpisodeTally(Tally())({"next": {}})  # type: ignore[arg-type]


def test_episode_tally_refuses_a_batch_without_dimensions() -> None:
    batch = TensorDict({"next": {"reward": torch.ones(1), "done": torch.ones(1)}}, [])
    with pytest.raises(ValueError, match="last dimension is time"):
        EpisodeTally(Tally())(batch)


def test_episode_tally_names_a_missing_entry_and_the_argument_to_pass() -> None:
    batch = TensorDict({"next": {"done": torch.zeros(3, 1, dtype=torch.bool)}}, [3])
    with pytest.raises(KeyError, match="pass reward_key="):
        EpisodeTally(Tally())(batch)


def test_episode_tally_refuses_an_entry_with_more_than_one_value_per_step() -> None:
    batch = flat_batch([1.0, 1.0], [False, True])
    batch["next", "reward"] = torch.ones(2, 3)
    with pytest.raises(ValueError, match="not one value per step"):
        EpisodeTally(Tally())(batch)


def test_episode_tally_reads_the_keys_it_is_given() -> None:
    tally = Tally()
    record = EpisodeTally(
        tally,
        return_key="score",
        length_key="steps",
        reward_key=("next", "bonus"),
        done_key=("next", "over"),
    )
    batch = TensorDict(
        {"next": {"bonus": torch.tensor([2.0, 3.0]), "over": torch.tensor([0, 1])}},
        [2],
    )
    record(batch)
    stats = tally.stats()
    assert (stats["score_last"], stats["steps_last"]) == (5.0, 2.0)
    assert repr(record) == "EpisodeTally(return_key='score', length_key='steps')"


@pytest.mark.parametrize("kind", list(COLLECTORS))
def test_episode_tally_as_a_multiprocess_collectors_hook_is_refused_before_workers_start(
    kind: str,
) -> None:
    before = set(multiprocessing.active_children())

    with pytest.raises(TypeError) as refused:
        COLLECTORS[kind](
            [cartpole, cartpole],
            policy=None,
            frames_per_batch=FRAMES_PER_BATCH,
            total_frames=4 * FRAMES_PER_BATCH,
            post_collect_hook=EpisodeTally(Tally()),
        )

    message = str(refused.value)
    assert "EpisodeTally cannot run in a collector's worker processes" in message
    assert "MultiSyncCollector or MultiAsyncCollector" in message
    assert "episode_tally(batch) in the training loop" in message
    assert set(multiprocessing.active_children()) <= before


def cartpole() -> GymEnv:
    return GymEnv("CartPole-v1")


def test_sample_counter_counts_calls_samples_and_seconds_and_returns_what_the_buffer_does() -> (
    None
):
    import torch
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage, ReplayBuffer

    from rlpulse.sources.torchrl import SampleCounter

    buffer = ReplayBuffer(storage=LazyTensorStorage(50), batch_size=8)
    buffer.extend(TensorDict({"obs": torch.zeros(20, 3)}, batch_size=[20]))
    counted = SampleCounter(buffer)
    batch, info = buffer.sample(return_info=True)
    assert batch.batch_size == torch.Size([8])
    assert "index" in info
    assert buffer.sample(4)["obs"].shape == (4, 3)
    stats = counted.stats()
    assert (stats["sample_calls"], stats["samples_returned"], stats["write_count"]) == (
        2,
        12,
        20,
    )
    assert stats["sample_s"] > 0
    assert stats["capacity"] == 50
    counted.close()
    buffer.sample()
    assert counted.stats()["sample_calls"] == 2  # the buffer's own sample again


def test_a_monitor_watching_a_sample_counter_logs_its_counters_as_counters() -> None:
    import torch
    from torchrl.data import LazyTensorStorage, ReplayBuffer

    from rlpulse import LoggerMonitor
    from rlpulse.sources.torchrl import SampleCounter
    from rlpulse.testing import InMemorySink

    buffer = ReplayBuffer(storage=LazyTensorStorage(50))
    buffer.extend(torch.arange(10))
    sink = InMemorySink()
    monitor = LoggerMonitor(sink, background=False)
    monitor.watch(SampleCounter(buffer), name="buffer")
    buffer.sample(5)
    monitor.step()
    assert sink.values("buffer/samples_returned") == [5.0]
    assert str(sink.kind("buffer/sample_s")) == "counter"


def test_sample_counter_counts_every_call_of_threads_sampling_one_buffer_at_once() -> (
    None
):
    import sys

    from torchrl.data import LazyTensorStorage, ReplayBuffer

    from rlpulse.sources.torchrl import SampleCounter

    buffer = ReplayBuffer(storage=LazyTensorStorage(50))
    buffer.extend(torch.arange(10))
    counted = SampleCounter(buffer)
    threads, calls_each = 4, 2_000
    start = threading.Barrier(threads)
    seen_calls: list[int] = []
    went_back = threading.Event()

    def learner() -> None:
        start.wait()
        for _ in range(calls_each):
            buffer.sample(2)

    def reader() -> None:
        # What a monitor polling meanwhile reads must never go backwards:
        # its rates would read a drop as the counter's reset.
        last = 0
        while any(thread.is_alive() for thread in learners):
            calls = counted.stats()["sample_calls"]
            if calls < last:
                went_back.set()
            last = calls
            seen_calls.append(calls)

    # Switching threads every microsecond makes a lost update likely within
    # a few thousand calls, where the default 5 ms hides it.
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        learners = [threading.Thread(target=learner) for _ in range(threads)]
        for thread in learners:
            thread.start()
        polling = threading.Thread(target=reader)
        polling.start()
        for thread in learners:
            thread.join()
        polling.join()
    finally:
        sys.setswitchinterval(previous)
    stats = counted.stats()
    assert stats["sample_calls"] == threads * calls_each
    assert stats["samples_returned"] == 2 * threads * calls_each
    assert not went_back.is_set()
    counted.close()
