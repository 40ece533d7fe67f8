"""SharedCounters: per-worker slots in one shared-memory segment, written by real processes."""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import pickle
import shutil
import signal
import subprocess
import sys
import sysconfig
import textwrap
import time
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import rlpulse
from rlpulse import JSONLLogger, LoggerMonitor, SharedCounters
from rlpulse.sources import WorkerCounters
from rlpulse.sources import shared as shared_module
from rlpulse.testing import InMemorySink

linux_only = pytest.mark.skipif(
    not Path("/dev/shm").is_dir(), reason="segments are visible under /dev/shm on Linux"
)

START_METHODS = [
    method
    for method in ("spawn", "fork", "forkserver")
    if method in multiprocessing.get_all_start_methods()
]

try:
    import rlpulse._counters

    COMPILED = True
except ImportError:  # built without a C compiler
    COMPILED = False


@pytest.fixture(autouse=True, params=["compiled", "python"])
def implementation(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> str:
    """Run every test with each writer: the compiled one and the pure-Python one.

    Processes this test starts (spawned or run as programs) select theirs at
    import, from the environment; forked ones inherit the module's choice.
    """
    if request.param == "compiled":
        if not COMPILED:
            pytest.skip("rlpulse was built without its compiled writer")
        monkeypatch.delenv("RLPULSE_PURE_PYTHON", raising=False)
        monkeypatch.setattr(shared_module, "_WRITER", shared_module._writer_class())
    else:
        monkeypatch.setenv("RLPULSE_PURE_PYTHON", "1")
        monkeypatch.setattr(shared_module, "_WRITER", shared_module._writer_class())
    return str(request.param)


# Run as its own program, so that its resource tracker ends with it and any
# warning it prints at shutdown lands in the captured stderr.
WORKERS_PROGRAM = textwrap.dedent(
    """
    import json
    import multiprocessing
    import sys

    from rlpulse import SharedCounters


    def work(counters, index):
        writer = counters.worker(index)
        writer.inc("frames", 100 * (index + 1))
        writer.inc("frames", 1)
        writer.set("queue", index + 0.5)
        writer.heartbeat()


    if __name__ == "__main__":
        method, close = sys.argv[1], sys.argv[2] == "close"
        context = multiprocessing.get_context(method)
        counters = SharedCounters(2, counters=("frames",), gauges=("queue",))
        # A writer alive at exit: it must not keep the segment from closing.
        parents_writer = counters.worker(0)
        processes = [
            context.Process(target=work, args=(counters, index)) for index in range(2)
        ]
        for process in processes:
            process.start()
        for process in processes:
            process.join(30)
        print(json.dumps({
            "name": counters.name,
            "exitcodes": [process.exitcode for process in processes],
            "stats": counters.stats(),
            "compiled": parents_writer.compiled,
        }))
        if close:
            counters.close()
    """
)


def _run_workers_program(tmp_path: Path, method: str, close: bool) -> dict[str, object]:
    program = tmp_path / "workers.py"
    program.write_text(WORKERS_PROGRAM)
    completed = subprocess.run(
        [sys.executable, str(program), method, "close" if close else "keep"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stderr == ""
    result: dict[str, object] = json.loads(completed.stdout)
    return result


def _write_until_killed(counters: SharedCounters, index: int) -> None:
    writer = counters.worker(index)
    while True:
        writer.inc("frames")
        writer.heartbeat()
        time.sleep(0.001)


def test_stats_sum_each_key_over_workers_and_list_every_workers_slots() -> None:
    with SharedCounters(
        3, counters=("frames", "episodes"), gauges=("queue",)
    ) as counters:
        for index in range(3):
            writer = counters.worker(index)
            writer.inc("frames", 10 * (index + 1))
            writer.inc("episodes")
            writer.set("queue", index)
        stats = counters.stats()
    assert stats["frames"] == 60.0
    assert stats["episodes"] == 3.0
    assert stats["queue"] == 3.0
    assert [stats[f"worker_{index}/frames"] for index in range(3)] == [10.0, 20.0, 30.0]
    assert [stats[f"worker_{index}/queue"] for index in range(3)] == [0.0, 1.0, 2.0]


def test_a_gauge_keeps_the_last_value_set() -> None:
    with SharedCounters(1, gauges=("queue",)) as counters:
        writer = counters.worker(0)
        writer.set("queue", 5)
        writer.set("queue", 2.5)
        assert counters.stats()["worker_0/queue"] == 2.5


def test_a_worker_has_no_heartbeat_age_and_is_not_alive_before_its_first_heartbeat() -> (
    None
):
    with SharedCounters(2, counters=("frames",)) as counters:
        counters.worker(0).heartbeat()
        stats = counters.stats()
    assert stats["workers_alive"] == 1
    assert 0.0 <= stats["worker_0/heartbeat_age_s"] < 60.0
    assert "worker_1/heartbeat_age_s" not in stats


def test_a_worker_drops_out_of_workers_alive_once_its_heartbeat_is_older_than_liveness(
    wait_until: Callable[..., bool],
) -> None:
    with SharedCounters(2, liveness=0.2) as counters:
        counters.worker(0).heartbeat()
        counters.worker(1).heartbeat()
        assert counters.stats()["workers_alive"] == 2
        assert wait_until(lambda: counters.stats()["workers_alive"] == 0)
        assert counters.stats()["worker_0/heartbeat_age_s"] >= 0.2
        counters.worker(1).heartbeat()
        assert counters.stats()["workers_alive"] == 1


def test_a_worker_that_finishes_leaves_workers_alive_counted_as_finished_until_it_beats_again() -> (
    None
):
    with SharedCounters(2, counters=("frames",)) as counters:
        writer = counters.worker(1)
        writer.inc("frames", 3)
        writer.heartbeat()
        writer.finish()
        finished = counters.stats()
        writer.heartbeat()
        again = counters.stats()
    assert (finished["workers_alive"], finished["workers_finished"]) == (0, 1)
    assert "worker_1/heartbeat_age_s" not in finished
    assert finished["worker_1/frames"] == 3.0
    assert (again["workers_alive"], again["workers_finished"]) == (1, 0)


def test_finish_after_close_says_the_counters_were_closed() -> None:
    counters = SharedCounters(1)
    writer = counters.worker(0)
    counters.close()
    with pytest.raises(ValueError, match="closed"):
        writer.finish()


def test_the_monitor_watches_shared_counters_directly_with_frame_rates(
    tmp_path: Path,
) -> None:
    path = tmp_path / "metrics.jsonl"
    with SharedCounters(2, counters=("frames",)) as counters, JSONLLogger(path) as sink:
        writer = counters.worker(1)
        monitor = LoggerMonitor(sink, background=False)
        monitor.watch(counters, name="workers")
        writer.inc("frames", 100)
        writer.heartbeat()
        monitor.step()
        time.sleep(0.01)
        writer.inc("frames", 100)
        monitor.step()
    last = {record.name: record.value for record in rlpulse.read(path)}
    assert last["workers/frames"] == 200.0
    assert last["workers/worker_1/frames"] == 200.0
    assert last["workers/workers_alive"] == 1.0
    assert last["workers/frames_per_second"] > 0


@pytest.mark.timeout(120)
@pytest.mark.parametrize("method", START_METHODS)
def test_workers_started_by_each_start_method_write_their_own_slots_without_warnings(
    tmp_path: Path, method: str, implementation: str
) -> None:
    result = _run_workers_program(tmp_path, method, close=True)
    assert result["exitcodes"] == [0, 0]
    stats = result["stats"]
    assert isinstance(stats, dict)
    assert stats["worker_0/frames"] == 101.0
    assert stats["worker_1/frames"] == 201.0
    assert stats["queue"] == 2.0
    assert stats["workers_alive"] == 2
    assert result["compiled"] == (implementation == "compiled")
    assert not Path("/dev/shm", str(result["name"])).exists()


@linux_only
@pytest.mark.timeout(120)
def test_the_segment_is_unlinked_when_the_creating_process_exits_without_close(
    tmp_path: Path, implementation: str
) -> None:
    result = _run_workers_program(tmp_path, "spawn", close=False)
    assert result["exitcodes"] == [0, 0]
    assert result["compiled"] == (implementation == "compiled")
    assert not Path("/dev/shm", str(result["name"])).exists()


@pytest.mark.timeout(60)
def test_a_sigkilled_worker_leaves_readable_slots_and_drops_out_of_workers_alive(
    wait_until: Callable[..., bool],
) -> None:
    context = multiprocessing.get_context("spawn")
    with SharedCounters(2, counters=("frames",), liveness=0.5) as counters:
        worker = context.Process(target=_write_until_killed, args=(counters, 1))
        worker.start()
        try:
            assert wait_until(
                lambda: counters.stats()["workers_alive"] == 1, timeout=30
            )
            assert wait_until(lambda: counters.stats()["worker_1/frames"] >= 10)
        finally:
            os.kill(worker.pid, signal.SIGKILL)  # type: ignore[arg-type]
            worker.join(10)
        assert worker.exitcode == -signal.SIGKILL
        frames_at_death = counters.stats()["worker_1/frames"]
        assert frames_at_death >= 10
        assert wait_until(lambda: counters.stats()["workers_alive"] == 0, timeout=5)
        stats = counters.stats()
        assert stats["worker_1/frames"] == frames_at_death
        assert stats["frames"] == frames_at_death
        assert stats["worker_1/heartbeat_age_s"] >= 0.5


def test_an_unknown_counter_is_refused_with_the_valid_counters() -> None:
    with SharedCounters(
        1, counters=("frames", "episodes"), gauges=("queue",)
    ) as counters:
        writer = counters.worker(0)
        with pytest.raises(
            KeyError, match=r"unknown counter 'frame'.*\['frames', 'episodes'\]"
        ):
            writer.inc("frame")


def test_incrementing_a_gauge_says_to_set_it() -> None:
    counters = SharedCounters(1, counters=("frames",), gauges=("queue",))
    with counters, pytest.raises(KeyError, match=r"'queue' is a gauge: use set\(\)"):
        counters.worker(0).inc("queue")


def test_setting_a_counter_says_to_increment_it() -> None:
    counters = SharedCounters(1, counters=("frames",), gauges=("queue",))
    message = r"unknown gauge 'frames'.*\['queue'\].*use inc\(\)"
    with counters, pytest.raises(KeyError, match=message):
        counters.worker(0).set("frames", 3)


def test_an_unknown_worker_index_is_refused_with_the_valid_range() -> None:
    with SharedCounters(2) as counters:
        with pytest.raises(IndexError, match=r"valid indices are 0\.\.1"):
            counters.worker(2)
        with pytest.raises(IndexError, match=r"0\.\.1"):
            counters.worker(-1)


@pytest.mark.parametrize("index", ["0", 1.0, True])
def test_a_worker_index_that_is_not_an_int_is_refused(index: object) -> None:
    with (
        SharedCounters(2) as counters,
        pytest.raises(TypeError, match=r"an int in 0\.\.1"),
    ):
        counters.worker(index)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("method", "value"), [("inc", "many"), ("set", None)], ids=["inc", "set"]
)
def test_a_value_that_is_not_a_number_is_refused(method: str, value: object) -> None:
    with SharedCounters(1, counters=("frames",), gauges=("queue",)) as counters:
        writer = counters.worker(0)
        key = "frames" if method == "inc" else "queue"
        with pytest.raises(TypeError, match="must be a real number"):
            getattr(writer, method)(key, value)
        assert counters.stats()[key] == 0.0


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"workers": 0}, ValueError, "workers must be an int >= 1"),
        ({"workers": 2.0}, ValueError, "workers must be an int >= 1"),
        ({"workers": 1, "counters": "frames"}, TypeError, r"counters=\('frames',\)"),
        ({"workers": 1, "gauges": ("",)}, TypeError, "non-empty string"),
        ({"workers": 1, "counters": ("a", "a")}, ValueError, "must be unique"),
        (
            {"workers": 1, "counters": ("a",), "gauges": ("a",)},
            ValueError,
            "both counters and gauges",
        ),
        ({"workers": 1, "gauges": ("workers_alive",)}, ValueError, "reserved"),
        ({"workers": 1, "counters": ("workers",)}, ValueError, "reserved"),
        ({"workers": 1, "gauges": ("workers_finished",)}, ValueError, "reserved"),
        ({"workers": 1, "counters": ("worker_frames",)}, ValueError, "reserved"),
        ({"workers": 1, "liveness": 0}, ValueError, "strictly positive"),
        ({"workers": 1, "liveness": "5"}, TypeError, "number of seconds"),
    ],
)
def test_invalid_construction_is_refused_with_what_to_do(
    arguments: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        SharedCounters(**arguments)  # type: ignore[arg-type]


def test_the_layout_is_readable_back() -> None:
    with SharedCounters(
        3, counters=["frames"], gauges=["queue"], liveness=2
    ) as counters:
        assert counters.workers == 3
        assert counters.counters == ("frames",)
        assert counters.gauges == ("queue",)
        assert counters.liveness == 2.0
        assert counters.worker(2).index == 2
        assert repr(counters).startswith(
            "SharedCounters(workers=3, counters=('frames',)"
        )
        assert "WorkerCounters(index=2" in repr(counters.worker(2))


@linux_only
def test_close_unlinks_the_segment_and_is_idempotent() -> None:
    counters = SharedCounters(2, counters=("frames",))
    writer = counters.worker(1)
    writer.inc("frames")
    segment = Path("/dev/shm", counters.name)
    assert segment.exists()
    counters.close()
    counters.close()
    assert counters.closed
    assert not segment.exists()
    assert "closed" in repr(counters)
    assert "closed" in repr(writer)


def test_a_closed_segment_refuses_reads_writes_and_pickling() -> None:
    counters = SharedCounters(1, counters=("frames",), gauges=("queue",))
    writer = counters.worker(0)
    counters.close()
    with pytest.raises(ValueError, match="closed"):
        counters.stats()
    with pytest.raises(ValueError, match="closed"):
        writer.inc("frames")
    with pytest.raises(ValueError, match="closed"):
        writer.set("queue", 1)
    with pytest.raises(ValueError, match="closed"):
        writer.heartbeat()
    with pytest.raises(ValueError, match="closed"):
        counters.worker(0)
    with pytest.raises(ValueError, match="closed"):
        pickle.dumps(counters)


@linux_only
def test_a_copy_shares_the_slots_and_closing_it_keeps_the_segment() -> None:
    with SharedCounters(2, counters=("frames",)) as counters:
        copy = pickle.loads(pickle.dumps(counters))
        copy.worker(1).inc("frames", 7)
        assert counters.stats()["worker_1/frames"] == 7.0
        copy.close()
        assert Path("/dev/shm", counters.name).exists()
        counters.worker(1).inc("frames")
        assert counters.stats()["frames"] == 8.0


def test_a_pickled_writer_writes_the_same_workers_slots() -> None:
    with SharedCounters(2, counters=("frames",)) as counters:
        writer = pickle.loads(pickle.dumps(counters.worker(1)))
        assert isinstance(writer, WorkerCounters)
        writer.inc("frames", 3)
        assert counters.stats()["worker_1/frames"] == 3.0


def test_each_writer_says_whether_it_is_compiled(implementation: str) -> None:
    with SharedCounters(1) as counters:
        writer = counters.worker(0)
        assert writer.compiled == (implementation == "compiled")
        assert isinstance(writer, WorkerCounters)


def test_the_writers_take_their_arguments_by_keyword_too() -> None:
    with SharedCounters(1, counters=("frames",), gauges=("queue",)) as counters:
        writer = counters.worker(0)
        writer.inc(key="frames", n=4)
        writer.inc("frames", n=0.5)
        writer.set(key="queue", value=2)
        stats = counters.stats()
    assert stats["frames"] == 4.5
    assert stats["queue"] == 2.0


@pytest.mark.parametrize(
    ("method", "arguments", "keywords"),
    [
        ("inc", (), {}),
        ("inc", ("frames", 1, 2), {}),
        ("inc", ("frames",), {"m": 2}),
        ("inc", ("frames", 1), {"n": 2}),
        ("set", ("queue",), {}),
        ("set", (), {"value": 1}),
    ],
)
def test_a_call_with_the_wrong_arguments_is_refused_like_a_python_call(
    method: str, arguments: tuple[object, ...], keywords: dict[str, object]
) -> None:
    with SharedCounters(1, counters=("frames",), gauges=("queue",)) as counters:
        with pytest.raises(TypeError, match=rf"{method}\(\)"):
            getattr(counters.worker(0), method)(*arguments, **keywords)
        assert counters.stats()["frames"] == 0.0


def test_an_unhashable_key_is_refused_as_a_bad_call() -> None:
    with (
        SharedCounters(1, counters=("frames",)) as counters,
        pytest.raises(TypeError, match=r"inc\(\[1\], 1\.0\)"),
    ):
        counters.worker(0).inc([1])  # type: ignore[arg-type]


def test_writers_released_by_close_while_still_referenced_write_nothing() -> None:
    counters = SharedCounters(2, counters=("frames",))
    writers = [counters.worker(0), counters.worker(1), counters.worker(1)]
    counters.close()
    for writer in writers:
        with pytest.raises(ValueError, match="closed"):
            writer.inc("frames")


def _can_compile() -> bool:
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    headers = Path(sysconfig.get_paths()["include"], "Python.h")
    return shutil.which(compiler) is not None and headers.is_file()


@pytest.mark.skipif(not _can_compile(), reason="no C compiler or Python headers")
def test_an_install_with_a_c_compiler_builds_the_compiled_writer(
    implementation: str,
) -> None:
    # The extension is optional at build time, so a broken one would only
    # show as a slower writer; where it can be built, it must have been.
    assert COMPILED, "rlpulse._counters failed to build; see the install's output"
    assert shared_module._writer_class().compiled == (implementation == "compiled")


def test_without_the_compiled_writer_the_python_one_is_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RLPULSE_PURE_PYTHON", raising=False)
    # A None entry makes the import fail, as for an install without a compiler.
    monkeypatch.setitem(sys.modules, "rlpulse._counters", None)
    monkeypatch.setattr(shared_module, "_WRITER", shared_module._writer_class())
    with SharedCounters(1, counters=("frames",)) as counters:
        writer = counters.worker(0)
        writer.inc("frames", 2)
        assert not writer.compiled
        assert counters.stats()["frames"] == 2.0


class _Boom(Exception):
    pass


class _RaisingFloat:
    def __float__(self) -> float:
        raise _Boom


class _RaisingHash(str):
    def __hash__(self) -> int:
        raise _Boom


class _IndexOnly:
    def __index__(self) -> int:
        return 3


@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, 1.0), (Fraction(1, 4), 0.25), (2, 2.0), (0.5, 0.5)],
    ids=["bool", "fraction", "int", "float"],
)
def test_inc_adds_whatever_a_float_adds(value: object, expected: float) -> None:
    with SharedCounters(1, counters=("frames",)) as counters:
        counters.worker(0).inc("frames", value)  # type: ignore[arg-type]
        assert counters.stats()["frames"] == expected


@pytest.mark.parametrize(
    "value", [Decimal("1.5"), _IndexOnly(), 1j], ids=["decimal", "index", "complex"]
)
def test_inc_refuses_what_a_float_cannot_add(value: object) -> None:
    with SharedCounters(1, counters=("frames",)) as counters:
        with pytest.raises(TypeError, match="must be a real number"):
            counters.worker(0).inc("frames", value)  # type: ignore[arg-type]
        assert counters.stats()["frames"] == 0.0


def test_a_refused_increment_names_the_value_passed_not_the_sum() -> None:
    with SharedCounters(1, counters=("frames",)) as counters:
        writer = counters.worker(0)
        writer.inc("frames", 2)
        with pytest.raises(TypeError, match=r"inc\('frames', 1j\)"):
            writer.inc("frames", 1j)  # type: ignore[arg-type]
        assert counters.stats()["frames"] == 2.0


def test_inc_of_an_int_too_large_for_a_float_raises_overflow() -> None:
    with SharedCounters(1, counters=("frames",)) as counters:
        with pytest.raises(OverflowError):
            counters.worker(0).inc("frames", 10**400)
        assert counters.stats()["frames"] == 0.0


@pytest.mark.parametrize(
    ("value", "expected"),
    [(_IndexOnly(), 3.0), (Fraction(3, 2), 1.5), (False, 0.0)],
    ids=["index", "fraction", "bool"],
)
def test_set_stores_whatever_converts_to_a_float(
    value: object, expected: float
) -> None:
    with SharedCounters(1, gauges=("queue",)) as counters:
        counters.worker(0).set("queue", value)  # type: ignore[arg-type]
        assert counters.stats()["queue"] == expected


def test_set_refuses_an_int_too_large_for_a_float() -> None:
    with (
        SharedCounters(1, gauges=("queue",)) as counters,
        pytest.raises(TypeError, match="must be a real number"),
    ):
        counters.worker(0).set("queue", 10**400)


def test_an_error_of_the_value_or_key_itself_propagates_unchanged() -> None:
    with SharedCounters(1, counters=("frames",), gauges=("queue",)) as counters:
        writer = counters.worker(0)
        with pytest.raises(_Boom):
            writer.set("queue", _RaisingFloat())  # type: ignore[arg-type]
        with pytest.raises(_Boom):
            writer.inc(_RaisingHash("frames"))


def test_a_value_that_closes_the_segment_while_converted_writes_nothing() -> None:
    counters = SharedCounters(1, gauges=("queue",))
    writer = counters.worker(0)

    class Closing:
        def __float__(self) -> float:
            counters.close()
            return 1.0

    with pytest.raises(ValueError, match="closed"):
        writer.set("queue", Closing())  # type: ignore[arg-type]


def _observe_latencies(counters: SharedCounters, index: int) -> None:
    writer = counters.worker(index)
    for step in range(1, 501):
        writer.observe("step_s", (index * 500 + step) / 1000)
    writer.observe("step_s", 0.0)


def test_workers_histograms_are_merged_into_quantiles_within_one_percent() -> None:
    context = multiprocessing.get_context("spawn")
    with SharedCounters(3, counters=("frames",), histograms=("step_s",)) as counters:
        workers = [
            context.Process(target=_observe_latencies, args=(counters, index))
            for index in range(3)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(60)
        assert [worker.exitcode for worker in workers] == [0, 0, 0]
        values = sorted(
            [
                (index * 500 + step) / 1000
                for index in range(3)
                for step in range(1, 501)
            ]
            + [0.0] * 3
        )
        merged = counters.histograms()["step_s"]
        stats = counters.stats()
    assert merged.count == len(values) == stats["step_s_count"]
    assert stats["step_s_sum"] == pytest.approx(sum(values))
    assert stats["worker_2/step_s_count"] == 501
    for q in (0.0, 0.5, 0.9, 0.99, 1.0):
        truth = values[max(math.ceil(round(q * len(values), 9)) - 1, 0)]
        assert merged.quantile(q) == pytest.approx(truth, rel=0.01, abs=1e-12)
    # The buckets stay out of stats(): its entries are the keys' and the workers'.
    assert set(stats) == {
        "frames",
        "step_s_count",
        "step_s_sum",
        "workers",
        "workers_alive",
        "workers_finished",
        *(
            f"worker_{i}/{key}"
            for i in range(3)
            for key in ("frames", "step_s_count", "step_s_sum")
        ),
    }


def test_a_watch_logs_the_quantiles_of_what_the_workers_observed_since_its_last_log() -> (
    None
):
    sink = InMemorySink()
    with SharedCounters(2, histograms=("batch_s",)) as counters:
        monitor = LoggerMonitor(sink, background=False)
        monitor.watch(counters, name="workers")
        for value in (0.010, 0.020, 0.030):
            counters.worker(0).observe("batch_s", value)
        monitor.step()
        counters.worker(1).observe("batch_s", 4.0)
        monitor.step()
        monitor.step()
    payloads = [metrics for metrics, _ in sink.calls]
    assert payloads[0]["workers/batch_s_p50"] == pytest.approx(0.020, rel=0.01)
    assert payloads[1]["workers/batch_s_p99"] == pytest.approx(4.0, rel=0.01)
    assert "workers/batch_s_p50" not in payloads[2]
    assert payloads[2]["workers/batch_s_count"] == 4


def test_observe_refuses_what_a_histogram_cannot_count() -> None:
    with SharedCounters(1, counters=("frames",), histograms=("step_s",)) as counters:
        writer = counters.worker(0)
        for bad in (-0.5, float("nan"), float("inf")):
            with pytest.raises(ValueError, match="at least zero"):
                writer.observe("step_s", bad)
        with pytest.raises(KeyError, match=r"declared histograms: \['step_s'\]"):
            writer.observe("frames", 1.0)
        with pytest.raises(TypeError, match="real number"):
            writer.observe("step_s", "fast")  # type: ignore[arg-type]
        # Beyond a billion counts as a billion, within 1 %.
        writer.observe("step_s", 1e12)
        assert counters.histograms()["step_s"].quantile(1.0) == pytest.approx(
            1e9, rel=0.01
        )
        assert counters.stats()["step_s_count"] == 1
        assert counters.histogram_names == ("step_s",)
    with pytest.raises(ValueError, match="closed"):
        writer.observe("step_s", 1.0)


def test_a_histogram_whose_entries_are_taken_is_refused() -> None:
    with pytest.raises(ValueError, match=r"\['step_s_count'\]"):
        SharedCounters(1, counters=("step_s_count",), histograms=("step_s",))
    with pytest.raises(ValueError, match="reserved"):
        SharedCounters(1, histograms=("worker_s",))
    with pytest.raises(TypeError, match="sequence of names"):
        SharedCounters(1, histograms="step_s")  # type: ignore[arg-type]


def test_a_pickled_copy_carries_the_histograms() -> None:
    with SharedCounters(1, histograms=("step_s",)) as counters:
        copy = pickle.loads(pickle.dumps(counters))
        copy.worker(0).observe("step_s", 0.5)
        assert counters.histograms()["step_s"].count == 1
        assert "histograms=('step_s',)" in repr(copy)
        copy.close()


@pytest.mark.parametrize("value", [float("nan"), float("inf")], ids=["nan", "inf"])
def test_inc_refuses_an_increment_that_would_make_the_counter_non_finite(
    value: float,
) -> None:
    with SharedCounters(1, counters=("frames",)) as counters:
        writer = counters.worker(0)
        writer.inc("frames", 5)
        with pytest.raises(ValueError, match="NaN or infinite for good"):
            writer.inc("frames", value)
        writer.inc("frames", 1e308)
        with pytest.raises(ValueError, match=r"inc\('frames', 1e\+308\)"):
            writer.inc("frames", 1e308)  # the sum overflows
        writer.inc("frames")
        assert counters.stats()["frames"] == 1e308 + 6


@pytest.mark.parametrize(
    "value",
    [-1, -0.5, -float("inf"), np.float64(-2.0), np.int64(-3), Fraction(-1, 2)],
    ids=["int", "float", "-inf", "numpy-float", "numpy-int", "fraction"],
)
def test_inc_refuses_a_negative_increment_and_keeps_the_count(value: object) -> None:
    with SharedCounters(1, counters=("frames",), gauges=("depth",)) as counters:
        writer = counters.worker(0)
        writer.inc("frames", 5)
        with pytest.raises(ValueError, match="a counter only goes up") as raised:
            writer.inc("frames", value)  # type: ignore[arg-type]
        assert f"inc('frames', {value!r})" in str(raised.value)
        assert "set()" in str(raised.value)
        writer.inc("frames", 0)
        writer.inc("frames", -0.0)
        writer.inc("frames", Fraction(1, 2))
        assert counters.stats()["frames"] == 5.5


def leak_a_segment() -> Path:
    """A segment left by a creator killed with ``kill -9`` together with its resource tracker."""
    code = """
        import sys, time
        from rlpulse import SharedCounters
        counters = SharedCounters(2, counters=("frames",))
        counters.worker(0).inc("frames", 5)
        print(counters.name, flush=True)
        time.sleep(60)
    """
    creator = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its resource tracker joins its group
    )
    assert creator.stdout is not None
    name = creator.stdout.readline().strip()
    os.killpg(creator.pid, signal.SIGKILL)
    creator.wait(timeout=30)
    creator.stdout.close()
    return Path("/dev/shm", name)


@linux_only
def test_a_segment_left_by_a_killed_creator_is_removed_by_the_next_one() -> None:
    leaked = leak_a_segment()
    assert leaked.exists()

    with SharedCounters(1, counters=("frames",)) as counters:
        assert not leaked.exists()
        assert Path("/dev/shm", counters.name).exists()


@linux_only
def test_remove_leaked_segments_names_what_it_removed_and_keeps_live_ones() -> None:
    leaked = leak_a_segment()

    assert shared_module.remove_leaked_segments() == [leaked.name]
    assert not leaked.exists()
    with SharedCounters(1) as alive:
        assert shared_module.remove_leaked_segments() == []
        assert Path("/dev/shm", alive.name).exists()


@linux_only
def test_a_segment_is_named_after_rlpulse_and_its_creator() -> None:
    with SharedCounters(1) as counters:
        prefix, namespace, pid, token = counters.name.split("_")
    assert prefix == "rlpulse"
    assert int(namespace) == os.stat("/proc/self/ns/pid").st_ino
    assert int(pid) == os.getpid()
    assert len(token) == 8


_KILLED_WORKER = """
import os, pickle, signal, sys
from rlpulse import SharedCounters
state = sys.stdin.buffer.read()
if {own_first}:  # a segment of its own first: a tracker of its own already
    SharedCounters(1, counters=("x",))
counters = pickle.loads(state)
if {twice}:  # as a Ray actor unpickles its arguments at each call
    pickle.loads(state).worker(0).inc("frames", 0)
counters.worker(0).inc("frames", 5)
print("attached", flush=True)
os.kill(os.getpid(), signal.{signal})
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("how", "own_first", "twice"),
    [
        ("SIGKILL", False, False),
        ("SIGTERM", False, False),
        ("SIGKILL", False, True),
        ("SIGKILL", True, False),
    ],
)
def test_a_worker_multiprocessing_did_not_start_dies_without_taking_the_segment(
    how: str, own_first: bool, twice: bool
) -> None:
    # A Ray actor, or any process started otherwise than by multiprocessing,
    # has a resource tracker of its own: attaching registered the segment
    # with it, and when the process died it unlinked the segment under
    # every other one (a new worker could not attach, close() raised).
    counters = SharedCounters(2, counters=("frames",))
    try:
        worker = subprocess.run(
            [
                sys.executable,
                "-c",
                _KILLED_WORKER.format(signal=how, own_first=own_first, twice=twice),
            ],
            input=pickle.dumps(counters),
            capture_output=True,
            timeout=50,
            check=False,
        )
        assert worker.stdout.strip() == b"attached"
        time.sleep(0.5)  # the worker's tracker, if any, has seen it die

        assert Path("/dev/shm", counters.name).exists()
        replacement = pickle.loads(pickle.dumps(counters))
        replacement.worker(1).inc("frames", 2)
        assert counters.stats()["frames"] == 7
        replacement.close()
    finally:
        counters.close()
    assert not Path("/dev/shm", counters.name).exists()


def test_stats_say_how_many_workers_there_are_beside_how_many_are_alive() -> None:
    # What a live view fills workers_alive's bar to, as a collector's own.
    from rlpulse.naming import capacities_of

    with SharedCounters(3, counters=("frames",)) as counters:
        counters.worker(1).heartbeat()
        stats = counters.stats()

    assert (stats["workers"], stats["workers_alive"]) == (3, 1)
    assert "workers" in capacities_of("workers_alive")


def test_a_gauge_one_worker_set_to_nan_leaves_that_worker_out_of_the_sum() -> None:
    # The sum was NaN, and the gauge vanished from every payload.
    with SharedCounters(3, gauges=("queue",)) as counters:
        counters.worker(0).set("queue", math.nan)
        counters.worker(1).set("queue", 3)
        counters.worker(2).set("queue", 4)
        assert counters.stats()["queue"] == 7.0
        counters.worker(1).set("queue", math.nan)
        counters.worker(2).set("queue", math.nan)
        assert math.isnan(counters.stats()["queue"])
