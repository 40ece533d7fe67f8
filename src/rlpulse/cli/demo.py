"""``rlpulse demo``: a monitored pipeline, recorded, summarised and drawn."""

from __future__ import annotations

import argparse
import contextlib
import math
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from rlpulse import stop_on_sigterm
from rlpulse._demo.common import DEFAULT_OUT, DemoOutput, say
from rlpulse._demo.synthetic import run_demo
from rlpulse.cli import common
from rlpulse.sinks.registry import SCHEMES

SUMMARY = "run a monitored demo pipeline and record it"
"""What ``rlpulse --help`` says of the command."""

DESCRIPTION = f"""\
Run a monitored reinforcement-learning data pipeline and record it.

With TorchRL installed (pip install 'rlpulse[torchrl]'): a TorchRL Collector
steps gymnasium's CartPole-v1 from its own thread into a ReplayBuffer,
acting epsilon-greedily with the Q-network of a small DQN learner that
trains on batches sampled from the buffer and hands the collector its
weights after each batch collected; an EpisodeTally records episode
returns, which rise from about 20 to 150 or more within the first 15 s or
so (what it learns depends on its updates: on a slower machine, give it
longer and end it at an update count, --seconds 300 --updates 1000).
Without TorchRL, or with --synthetic, a standard-library stand-in runs
instead: a collector thread, a ring buffer and a learner thread.

--env-cost and --learner-cost make one side expensive on purpose (a sleep
per environment step or per update), so that the pipeline is held back by
its collector or by its learner: frames per second fall with the first,
updates per second with the second.

A background LoggerMonitor polls their stats() into a new run of a SQLite
file (--out), prints each payload on standard error and feeds any extra
sinks (--sink), and judges which side holds the pipeline back (the
bottleneck verdict, every sixth of --seconds, from 1 s to 5 s). At the end
(or on Ctrl-C) it logs final snapshots; the summary of the run is printed,
ending with the verdict (collector-bound with --env-cost, learner-bound
with --learner-cost), and its chart drawn next to the SQLite file (with
matplotlib: pip install 'rlpulse[plot]'). On SIGTERM (what a job
scheduler sends) it logs the final snapshots and flushes every sink, then
ends by the signal, without the summary.

Sink specs are SCHEME:TARGET, with SCHEME one of:
  {", ".join(sorted(SCHEMES))}

examples:
  rlpulse demo --seconds 5 --out {DEFAULT_OUT}
  rlpulse demo --sink csv:runs/demo.csv --sink tensorboard:runs/tensorboard
  rlpulse demo --synthetic --seconds 10
  rlpulse demo --seconds 300 --updates 1000  # ends at the 1,000th update
  rlpulse demo --env-cost 0.005      # the collector holds the learner back
  rlpulse demo --learner-cost 0.05   # the learner falls behind the collector
"""


def _seconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of seconds, got {text!r}"
        ) from None


def _positive_seconds(text: str) -> float:
    seconds = _seconds(text)
    if not (seconds > 0 and math.isfinite(seconds)):
        raise argparse.ArgumentTypeError(
            f"the demo needs a positive, finite number of seconds, got {text!r}"
        )
    return seconds


def _updates(text: str) -> int:
    try:
        updates = int(text)
    except ValueError:
        updates = 0
    if updates < 1:
        raise argparse.ArgumentTypeError(
            f"expected a whole number of updates, 1 or more, got {text!r}"
        )
    return updates


def _cost_seconds(text: str) -> float:
    seconds = _seconds(text)
    if not (seconds >= 0 and math.isfinite(seconds)):
        raise argparse.ArgumentTypeError(
            f"a cost is a finite number of seconds, 0 or more, got {text!r}"
        )
    return seconds


def add(commands: common.Commands) -> None:
    demo = common.add_command(commands, "demo", SUMMARY, DESCRIPTION, run)
    demo.add_argument(
        "--seconds",
        type=_positive_seconds,
        default=30.0,
        help="how long to run (default: %(default)g)",
    )
    demo.add_argument(
        "--updates",
        type=_updates,
        default=None,
        metavar="N",
        help="end at the learner's N-th update if that comes before --seconds: "
        "what the policy has learned then depends on its updates, not on how "
        "fast this machine is (default: no limit)",
    )
    demo.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        metavar="FILE",
        help="SQLite file to record the run in; the chart goes next to it, "
        "with .png (default: %(default)s)",
    )
    demo.add_argument(
        "--sink",
        action="append",
        default=[],
        dest="sinks",
        metavar="SPEC",
        help="also log to the sink SCHEME:TARGET (as in csv:runs/demo.csv); "
        "repeat for more",
    )
    demo.add_argument(
        "--synthetic",
        action="store_true",
        help="run the standard-library pipeline even when TorchRL is installed",
    )
    demo.add_argument(
        "--env-cost",
        type=_cost_seconds,
        default=0.0,
        metavar="SECONDS",
        help="make every environment step SECONDS slower (a sleep), as an "
        "expensive simulator would: the collector becomes the bottleneck "
        "(default: %(default)g)",
    )
    demo.add_argument(
        "--learner-cost",
        type=_cost_seconds,
        default=0.0,
        metavar="SECONDS",
        help="make every learner update SECONDS slower (a sleep), as a bigger "
        "network would: the learner becomes the bottleneck (default: %(default)g)",
    )


_TORCHRL_MODULES = frozenset({"torch", "torchrl", "tensordict", "gymnasium"})


def run(args: argparse.Namespace) -> int:
    with _stopping_on_sigterm():
        return _run_demo(args)


@contextlib.contextmanager
def _stopping_on_sigterm() -> Iterator[None]:
    """While the demo runs, ``SIGTERM`` keeps its final snapshots (:func:`rlpulse.stop_on_sigterm`)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may handle signals
        return
    previous = signal.getsignal(signal.SIGTERM)
    stop_on_sigterm()
    try:
        yield
    finally:
        # None: a handler from outside Python, which cannot be put back.
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def _run_demo(args: argparse.Namespace) -> int:
    line_format = {".csv": "csv", ".jsonl": "jsonl"}.get(Path(args.out).suffix.lower())
    if line_format is not None:
        return common.fail(
            f"--out {args.out} names a {line_format.upper()} file, but the demo "
            f"records its run in a SQLite file: give --out a .sqlite path, and "
            f"add --sink {line_format}:{args.out} for a {line_format.upper()} copy"
        )
    output = DemoOutput(sinks=args.sinks)
    if not args.synthetic:
        try:
            from rlpulse._demo.torchrl_pipeline import (
                TorchRLSettings,
                run_torchrl_demo,
            )
        except ModuleNotFoundError as error:
            missing = (error.name or "").partition(".")[0]
            if missing not in _TORCHRL_MODULES:
                raise
            say(
                f"rlpulse demo: TorchRL is not installed ({missing} is "
                "missing; pip install 'rlpulse[torchrl]'), so this is the "
                "synthetic pipeline",
                sys.stdout,
            )
        else:
            settings = TorchRLSettings(
                env_cost=args.env_cost,
                learner_cost=args.learner_cost,
                updates=args.updates,
            )
            run_torchrl_demo(args.seconds, args.out, settings=settings, output=output)
            return 0
    run_demo(
        args.seconds,
        args.out,
        env_cost=args.env_cost,
        learner_cost=args.learner_cost,
        output=output,
        updates=args.updates,
    )
    return 0
