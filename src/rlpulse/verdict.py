"""The bottleneck verdict: which side of a pipeline holds it back, by how much, and in words.

A pipeline has a producer (a collector) and a consumer (a learner),
perhaps a buffer or queue between them. Over one window the figures
(:class:`Window`: each side's busy and waiting shares, the replay ratio
against its target, the buffer's fill) give a :class:`Verdict` by the rules
of :func:`judge`; :class:`Hysteresis` says when a new verdict has held long
enough to announce; :func:`describe` says a verdict in one sentence, and
:func:`describe_metrics` says it again from the metrics a bottleneck watch
logged, so that the console, ``rlpulse show``, ``rlpulse top`` and
``rlpulse compare`` print the same words. Read back from those metrics,
:func:`window_verdict` gives one window's verdict (what ``rlpulse plot``
shades), :func:`split_of` and :func:`run_verdict` a run's, and
:func:`is_verdict_code` the metrics that are codes, not quantities (no
ratio in ``compare``, no line in ``plot``).
docs/finding-the-bottleneck.md explains each rule and where it comes from.

Pure and deterministic: no clock, no thread, the standard library only.

>>> window = Window(30.0, consumer_busy=0.37, consumer_wait=0.63)
>>> print(describe(judge(window, "collector", "learner")))
collector-bound: the learner waited 63% of the last 30 s for data; a faster learner gains nothing, a faster collector up to 2.7x before the learner limits
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

__all__ = [
    "BALANCE_MARGIN",
    "SPEEDUP_SHARE_MIN",
    "VERDICT_METRICS",
    "Bound",
    "Hysteresis",
    "Reading",
    "Verdict",
    "Window",
    "describe",
    "describe_metrics",
    "drawn_rank",
    "format_split",
    "holds_verdict",
    "is_drawn",
    "is_verdict_code",
    "is_verdict_metric",
    "judge",
    "label_of",
    "label_of_sentence",
    "measure",
    "run_verdict",
    "speedup_labels",
    "split_of",
    "window_verdict",
]

BALANCE_MARGIN = 0.15
"""How far apart two sides may be and still be balanced: their busy shares, or the replay ratio and its target, within 15 %."""

SPEEDUP_SHARE_MIN = 0.01
"""The least busy share of the other side that bounds the speed-up: below it (a side barely started in the window) the bound, over 100x, says nothing."""

QUEUE_FULL = 0.95
"""A queue this full (of its capacity) holds the producer back."""

QUEUE_EMPTY = 0.05
"""A queue this empty leaves the consumer without data."""

BUSY_KEY = "busy_s"
"""The counter of seconds a side spent working (``Tally.busy()``)."""

WAIT_KEY = "wait_s"
"""The counter of seconds a side spent waiting for the other (``Tally.waiting()``)."""

_SAMPLES_KEYS = ("samples", "samples_returned")
_FRAMES_KEYS = ("frames",)
_WRITTEN_KEY = "write_count"
_VERSION_KEY = "policy_version"
_SIDE_PREFIX = "side/"


class Bound(enum.IntEnum):
    """Which side a window says holds the pipeline back: the ``bound`` metric's value."""

    PRODUCER = -1
    BALANCED = 0
    CONSUMER = 1


class Window(NamedTuple):
    """One window's figures, each ``None`` where the pipeline does not report it."""

    seconds: float
    """How long the window lasted."""
    producer_busy: float | None = None
    """The share of the window the producer (the collector) spent working (0 to 1)."""
    producer_wait: float | None = None
    """The share it spent waiting: for room in the buffer, for weights."""
    consumer_busy: float | None = None
    """The share of the window the consumer (the learner) spent working."""
    consumer_wait: float | None = None
    """The share it spent waiting for data."""
    replay_ratio: float | None = None
    """Samples drawn per frame produced over the window (none when no frame arrived)."""
    replay_ratio_target: float | None = None
    """The replay ratio the pipeline is meant to keep."""
    fill: float | None = None
    """The buffer's or queue's fill at the window's end (0 to 1)."""
    fill_trend: float | None = None
    """The fill's change over the window."""
    dropped: float | None = None
    """What the buffer or queue dropped over the window."""
    policy_lag: float | None = None
    """How many policy versions the producer's acting policy is behind the consumer's."""
    samples: float | None = None
    """The samples the consumer drew over the window."""
    frames: float | None = None
    """The frames the producer produced over the window."""

    def metrics(self) -> dict[str, float]:
        """The figures present, as a bottleneck watch logs them (``<side>_busy_share``, ``replay_ratio``, …).

        >>> Window(30.0, consumer_busy=0.37, consumer_wait=0.63).metrics()
        {'window_s': 30.0, 'consumer_busy_share': 0.37, 'consumer_wait_share': 0.63}
        """
        metrics = {"window_s": self.seconds}
        for field, name in _METRIC_NAMES.items():
            value = getattr(self, field)
            if value is not None:
                metrics[name] = float(value)
        return metrics

    @classmethod
    def from_metrics(cls, metrics: Mapping[str, float]) -> Window:
        """The window a bottleneck watch's logged ``metrics`` (without the watch's name) describe.

        >>> Window.from_metrics({"window_s": 30.0, "consumer_wait_share": 0.63})
        Window(seconds=30.0, producer_busy=None, producer_wait=None, consumer_busy=None, consumer_wait=0.63, replay_ratio=None, replay_ratio_target=None, fill=None, fill_trend=None, dropped=None, policy_lag=None, samples=None, frames=None)
        """
        return cls(
            metrics.get("window_s", 0.0),
            **{field: metrics.get(name) for field, name in _METRIC_NAMES.items()},
        )


_METRIC_NAMES = {
    "producer_busy": "producer_busy_share",
    "producer_wait": "producer_wait_share",
    "consumer_busy": "consumer_busy_share",
    "consumer_wait": "consumer_wait_share",
    "replay_ratio": "replay_ratio",
    "replay_ratio_target": "replay_ratio_target",
    "fill": "fill",
    "fill_trend": "fill_trend",
    "dropped": "dropped",
    "policy_lag": "policy_lag",
    "samples": "samples_drawn",
    "frames": "frames_produced",
}


class Verdict(NamedTuple):
    """What one window says: the side that holds the pipeline back (``None``: unknown), why, and the gain of fixing it.

    ``rule`` is the rule that decided (``"stage timing"``, ``"replay
    ratio"``, ``"queue"``), or for an unknown verdict why none did.
    ``speedup`` bounds what the pipeline gains if the bottleneck took no
    time (Amdahl): one over the busy share of the other side, unknown
    where that share is below :data:`SPEEDUP_SHARE_MIN`; for the replay
    ratio, how far the ratio is from its target.
    """

    bound: Bound | None
    rule: str
    speedup: float | None
    window: Window
    producer: str = "producer"
    consumer: str = "consumer"

    def metrics(self) -> dict[str, float]:
        """The window's figures and the verdict, as a bottleneck watch logs them.

        ``bound`` (-1, 0, +1) and ``speedup`` only when the verdict is
        known; ``bound_known`` always; ``side/<name>`` says which watch is
        the producer (-1) and which the consumer (+1).

        >>> verdict = judge(Window(30.0, consumer_busy=0.37, consumer_wait=0.63), "collector", "learner")
        >>> {name: round(value, 2) for name, value in verdict.metrics().items()}
        {'window_s': 30.0, 'consumer_busy_share': 0.37, 'consumer_wait_share': 0.63, 'bound_known': 1.0, 'bound': -1.0, 'speedup': 2.7, 'side/collector': -1.0, 'side/learner': 1.0}
        """
        metrics = self.window.metrics()
        metrics["bound_known"] = float(self.bound is not None)
        if self.bound is not None:
            metrics["bound"] = float(self.bound)
        if self.speedup is not None:
            metrics["speedup"] = self.speedup
        metrics[_SIDE_PREFIX + self.producer] = float(Bound.PRODUCER)
        metrics[_SIDE_PREFIX + self.consumer] = float(Bound.CONSUMER)
        return metrics


class _Vote(NamedTuple):
    rule: str
    bound: Bound
    speedup: float | None


def judge(
    window: Window,
    producer: str = "producer",
    consumer: str = "consumer",
    *,
    minimum_s: float = 0.0,
) -> Verdict:
    """The verdict of one window, by the rules below; unknown rather than a guess.

    - **replay ratio** (Reverb's rate limiter): with a target, samples per
      frame more than 15 % below it: consumer-bound; above it:
      producer-bound; else balanced, unless the stage timing names a side:
      a ratio on its target is what a rate limiter holds it to, and the
      side it blocks, the one that waits, is not the bottleneck.
    - **stage timing** (veRL's idle ratios, Sample Factory): a side that
      waits is not the bottleneck. The busier side holds the other back,
      unless their busy shares are within 15 %: balanced. A side that
      records only one of ``busy_s`` and ``wait_s`` is busy the rest of
      the time; a producer that records neither (a synchronous loop) is
      busy while the consumer waits. Both busy at least 85 % of the time
      beside a sampled buffer (a replay ratio) say nothing: neither holds
      the other back, each gains by itself.
    - **queue** (RLlib's bounded queue), for a buffer that is not sampled
      (no replay ratio): full or dropping: consumer-bound; empty while the
      consumer waits: producer-bound.

    The first rule that can say something decides, in that order; rules
    that name opposite sides make the verdict unknown, as do no figures
    at all, or a window shorter than ``minimum_s``.

    >>> judge(Window(30.0, consumer_busy=0.52, consumer_wait=0.48)).bound
    <Bound.BALANCED: 0>
    >>> judge(Window(30.0, replay_ratio=2.0, replay_ratio_target=8.0, fill=1.0)).bound
    <Bound.CONSUMER: 1>
    >>> judge(Window(30.0)).rule
    'no figures'
    >>> held = Window(30.0, consumer_busy=0.1, consumer_wait=0.9, replay_ratio=8.0, replay_ratio_target=8.0)
    >>> judge(held).bound, judge(held).rule
    (<Bound.PRODUCER: -1>, 'stage timing')
    >>> disagree = Window(30.0, consumer_busy=0.2, consumer_wait=0.8, replay_ratio=1.0, replay_ratio_target=8.0)
    >>> judge(disagree).bound is None, judge(disagree).rule
    (True, 'replay ratio and stage timing disagree')
    """
    if window.seconds <= 0 or window.seconds < minimum_s:
        return Verdict(None, "window too short", None, window, producer, consumer)
    votes = _votes(window)
    if not votes:
        return Verdict(None, _silence(window), None, window, producer, consumer)
    sides = {vote.bound for vote in votes} - {Bound.BALANCED}
    if len(sides) > 1:
        rules = " and ".join(vote.rule for vote in votes if vote.bound in sides)
        return Verdict(None, f"{rules} disagree", None, window, producer, consumer)
    decisive = votes[0]
    if decisive.rule == "replay ratio" and decisive.bound is Bound.BALANCED:
        # Reverb: samples blocked to hold the ratio on target mean the
        # actors are the bottleneck, blocked inserts the learner.
        decisive = next((vote for vote in votes if vote.bound in sides), decisive)
    return Verdict(
        decisive.bound, decisive.rule, decisive.speedup, window, producer, consumer
    )


def _silence(window: Window) -> str:
    # Why no rule said anything: the rule of an unknown verdict.
    if window.samples == 0 and window.frames == 0:
        return "nothing moved"
    if window.samples == 0 and window.frames is not None:
        return "no samples drawn"
    if _sampled(window) and window.replay_ratio_target is None:
        return "no target ratio"
    return "no figures"


def _votes(window: Window) -> list[_Vote]:
    return [
        vote
        for vote in (_ratio_vote(window), _stage_vote(window), _queue_vote(window))
        if vote is not None
    ]


def _ratio_vote(window: Window) -> _Vote | None:
    ratio, target = window.replay_ratio, window.replay_ratio_target
    if target is None or target <= 0:
        return None
    if _starved(window):
        # Samples drawn and no frame: a ratio past any target, by an
        # unbounded factor.
        return _Vote("replay ratio", Bound.PRODUCER, None)
    if ratio is None or ratio <= 0:
        return None
    if ratio < target * (1 - BALANCE_MARGIN):
        return _Vote("replay ratio", Bound.CONSUMER, target / ratio)
    if ratio > target * (1 + BALANCE_MARGIN):
        return _Vote("replay ratio", Bound.PRODUCER, ratio / target)
    return _Vote("replay ratio", Bound.BALANCED, max(ratio / target, target / ratio))


def _starved(window: Window) -> bool:
    # The consumer drew samples and no frame arrived.
    return window.frames == 0 and (window.samples or 0) > 0


def _sampled(window: Window) -> bool:
    # The buffer is sampled: a replay ratio, or samples and frames that
    # would give one but for no frame arriving.
    return window.replay_ratio is not None or (
        window.frames == 0 and window.samples is not None
    )


def busy_shares(window: Window) -> tuple[float | None, float | None]:
    """Each side's busy share as the stage-timing rule reads it (see :func:`judge`).

    >>> busy_shares(Window(30.0, consumer_busy=0.37, consumer_wait=0.63))
    (0.63, 0.37)
    """
    producer = _busy(window.producer_busy, window.producer_wait)
    consumer = _busy(window.consumer_busy, window.consumer_wait)
    if (
        producer is None
        and window.producer_busy is None
        and window.producer_wait is None
    ):
        producer = window.consumer_wait
    return producer, consumer


def _busy(busy: float | None, wait: float | None) -> float | None:
    if busy is not None:
        return busy
    return None if wait is None else max(0.0, 1.0 - wait)


def _stage_vote(window: Window) -> _Vote | None:
    producer, consumer = busy_shares(window)
    if producer is None or consumer is None or max(producer, consumer) <= 0:
        return None
    busier = max(producer, consumer)
    other = min(producer, consumer)
    if _sampled(window) and other >= 1 - BALANCE_MARGIN:
        # Neither side waits for the other beside a sampled buffer: they run
        # apart (a learner drawing samples as fast as it can from what the
        # collector adds), and a faster one gains by itself. Which one is
        # too slow is what the replay ratio's target says.
        return None
    speedup = 1 / other if other >= SPEEDUP_SHARE_MIN else None
    if other >= busier * (1 - BALANCE_MARGIN):
        return _Vote("stage timing", Bound.BALANCED, speedup)
    bound = Bound.PRODUCER if producer > consumer else Bound.CONSUMER
    return _Vote("stage timing", bound, speedup)


def _queue_vote(window: Window) -> _Vote | None:
    if _sampled(window):
        return None  # a sampled buffer stays full: its fill says nothing here
    if (window.dropped or 0) > 0 or (
        window.fill is not None and window.fill >= QUEUE_FULL
    ):
        return _Vote("queue", Bound.CONSUMER, None)
    waiting = window.consumer_wait
    if (
        window.fill is not None
        and window.fill <= QUEUE_EMPTY
        and waiting is not None
        and waiting > BALANCE_MARGIN
    ):
        return _Vote("queue", Bound.PRODUCER, None)
    return None


class Hysteresis:
    """When a new verdict has held long enough to announce: ``hold`` windows in a row.

    A window with an unknown verdict announces nothing and starts the count
    afresh; the first verdict to hold is announced too.

    >>> held = Hysteresis(hold=2)
    >>> [held.update(bound) for bound in (Bound.CONSUMER, Bound.CONSUMER, Bound.BALANCED, Bound.CONSUMER)]
    [False, True, False, False]
    >>> held.current
    <Bound.CONSUMER: 1>
    """

    def __init__(self, hold: int = 2) -> None:
        if type(hold) is not int or hold < 1:
            raise ValueError(
                f"hold must be a whole number of windows, at least 1, got {hold!r}."
            )
        self.hold = hold
        self.current: Bound | None = None
        self._candidate: Bound | None = None
        self._count = 0

    def update(self, bound: Bound | None) -> bool:
        """Take one window's verdict; whether the announced verdict changes with it."""
        if bound is None or bound == self.current:
            self._candidate, self._count = None, 0
            return False
        if bound == self._candidate:
            self._count += 1
        else:
            self._candidate, self._count = bound, 1
        if self._count < self.hold:
            return False
        self.current, self._candidate, self._count = bound, None, 0
        return True


class Reading(NamedTuple):
    """What a bottleneck watch reads at one moment: the monotonic time and each side's flattened snapshot."""

    time: float
    producer: Mapping[str, float]
    consumer: Mapping[str, float]
    buffer: Mapping[str, float] | None = None


def measure(
    before: Reading, after: Reading, target_ratio: float | None = None
) -> Window:
    """The window between two readings: the counters' growth over its seconds.

    A side's shares are of the window, or of all its recorded time when it
    records more (several workers summed, as ``SharedCounters`` sums
    them). The replay ratio counts samples where the consumer or the buffer
    reports them (``samples``, ``samples_returned``) and frames where the
    producer reports them (``frames``), else the buffer's ``write_count``.

    >>> before = Reading(0.0, {}, {"busy_s": 1.0, "wait_s": 0.0})
    >>> after = Reading(10.0, {}, {"busy_s": 4.7, "wait_s": 6.3})
    >>> window = measure(before, after)
    >>> window.seconds, round(window.consumer_busy, 2), round(window.consumer_wait, 2)
    (10.0, 0.37, 0.63)
    """
    seconds = after.time - before.time
    producer_busy, producer_wait = _shares(before.producer, after.producer, seconds)
    consumer_busy, consumer_wait = _shares(before.consumer, after.consumer, seconds)
    buffer_before = before.buffer or {}
    buffer_after = after.buffer or {}
    samples = _growth(before.consumer, after.consumer, _SAMPLES_KEYS)
    if samples is None:
        samples = _growth(buffer_before, buffer_after, _SAMPLES_KEYS)
    frames = _growth(before.producer, after.producer, _FRAMES_KEYS)
    if frames is None:
        frames = _growth(buffer_before, buffer_after, (_WRITTEN_KEY,))
    # No frame in the window: no ratio (samples drawn with none is the
    # replay-ratio rule's, from the counts).
    ratio = samples / frames if samples is not None and frames else None
    fill_before, fill = _fill(buffer_before), _fill(buffer_after)
    versions = (
        after.producer.get(_VERSION_KEY),
        after.consumer.get(_VERSION_KEY),
    )
    return Window(
        seconds,
        producer_busy,
        producer_wait,
        consumer_busy,
        consumer_wait,
        replay_ratio=ratio,
        replay_ratio_target=target_ratio,
        fill=fill,
        fill_trend=None if fill is None or fill_before is None else fill - fill_before,
        dropped=_growth(buffer_before, buffer_after, ("dropped",)),
        policy_lag=(
            None if None in versions else versions[1] - versions[0]  # type: ignore[operator]
        ),
        samples=samples if frames is not None else None,
        frames=frames if samples is not None else None,
    )


def _growth(
    before: Mapping[str, float], after: Mapping[str, float], keys: Iterable[str]
) -> float | None:
    # The growth of the first of ``keys`` that ``after`` has (from 0 where
    # ``before`` has not seen it yet: a counter born in the window); None
    # where it has none, or where it went down (a restart: as a rate, no
    # figure for that window).
    for key in keys:
        if key in after:
            base = before.get(key, 0.0)
            return None if after[key] < base else after[key] - base
    return None


def _shares(
    before: Mapping[str, float], after: Mapping[str, float], seconds: float
) -> tuple[float | None, float | None]:
    busy = _growth(before, after, (BUSY_KEY,))
    wait = _growth(before, after, (WAIT_KEY,))
    if seconds <= 0 or not (busy or wait):
        # Nothing recorded in the window (a side inside one long step, or
        # hung): no share to speak of, not 0 % busy.
        return None, None
    recorded = (busy or 0.0) + (wait or 0.0)
    whole = max(seconds, recorded)
    return (
        None if busy is None else min(1.0, busy / whole),
        None if wait is None else min(1.0, wait / whole),
    )


def _fill(buffer: Mapping[str, float]) -> float | None:
    if "utilization" in buffer:
        return buffer["utilization"]
    size, capacity = buffer.get("size"), buffer.get("capacity")
    if size is None or not capacity:
        return None
    return size / capacity


# -- words ------------------------------------------------------------------


def label_of(
    bound: Bound | None, producer: str = "producer", consumer: str = "consumer"
) -> str:
    """A verdict in two words: ``collector-bound``, ``balanced``, ``unknown``.

    >>> label_of(Bound.CONSUMER, "collector", "learner"), label_of(None)
    ('learner-bound', 'unknown')
    """
    if bound is None:
        return "unknown"
    if bound is Bound.BALANCED:
        return "balanced"
    return f"{producer if bound is Bound.PRODUCER else consumer}-bound"


def label_of_sentence(sentence: str) -> str:
    """The label a sentence of :func:`describe` starts with.

    A side's name may hold ``": "`` itself: a label is ``balanced``,
    ``unknown`` or ends in ``-bound``.

    >>> label_of_sentence("collector-bound: the learner waited 63% of the last 30 s for data; ...")
    'collector-bound'
    >>> label_of_sentence("env: cartpole-bound: the learner drew 20 samples per frame ...")
    'env: cartpole-bound'
    """
    for label in (label_of(None), label_of(Bound.BALANCED)):
        if sentence.startswith(f"{label}: "):
            return label
    side, bound, _ = sentence.partition("-bound: ")
    return side + "-bound" if bound else sentence.partition(": ")[0]


def _percent(share: float) -> str:
    return f"{share:.0%}"


def _seconds(seconds: float) -> str:
    return f"{seconds:.3g} s" if seconds < 60 else f"{seconds / 60:.3g} min"


def describe(verdict: Verdict) -> str:
    """The verdict in one sentence: the side, what shows it, and what fixing it gains.

    >>> window = Window(30.0, producer_busy=0.5, producer_wait=0.5, consumer_busy=1.0, consumer_wait=0.0)
    >>> print(describe(judge(window, "collector", "learner")))
    learner-bound: the collector waited 50% of the last 30 s for the learner; a faster collector gains nothing, a faster learner up to 2.0x before the collector limits
    >>> print(describe(judge(Window(30.0), "collector", "learner")))
    unknown: no stage timing, replay ratio or queue figures over the last 30 s (record busy_s and wait_s: docs/finding-the-bottleneck.md)
    """
    window = verdict.window
    producer, consumer = verdict.producer, verdict.consumer
    last = f"the last {_seconds(window.seconds)}"
    bound = verdict.bound
    if bound is None:
        return f"unknown: {_unknown_reason(verdict, last)}"
    label = label_of(bound, producer, consumer)
    speedup = verdict.speedup
    if bound is Bound.BALANCED:
        gain = ""
        if speedup is not None:
            # Within 5 %: "at most 1.0x" is nothing.
            most = "nothing" if speedup < 1.05 else f"at most {speedup:.1f}x"
            gain = f"; speeding up one side alone gains {most}"
        return f"{label}: {_evidence(verdict, last)}{gain}"
    slow, other = (
        (producer, consumer) if bound is Bound.PRODUCER else (consumer, producer)
    )
    gain = (
        f"only a faster {slow} helps"
        if speedup is None
        else f"a faster {slow} up to {speedup:.1f}x before the {other} limits"
    )
    return (
        f"{label}: {_evidence(verdict, last)}; a faster {other} gains nothing, {gain}"
    )


def _evidence(verdict: Verdict, last: str) -> str:
    window = verdict.window
    producer, consumer = verdict.producer, verdict.consumer
    bound = verdict.bound
    if verdict.rule == "replay ratio" and _starved(window):
        return (
            f"the {consumer} drew {window.samples:.0f} samples and no frame "
            f"arrived over {last}"
        )
    if verdict.rule == "replay ratio":
        return (
            f"the {consumer} drew {window.replay_ratio:.3g} samples per frame over "
            f"{last}, against a target of {window.replay_ratio_target:.3g}"
        )
    if verdict.rule == "queue":
        if bound is Bound.CONSUMER:
            dropped = window.dropped or 0
            if dropped:
                return f"the queue dropped {dropped:.0f} entries over {last}"
            return f"the queue was {_percent(window.fill or 1.0)} full at the end of {last}"
        return (
            f"the queue ran empty while the {consumer} waited "
            f"{_percent(window.consumer_wait or 0.0)} of {last}"
        )
    producer_busy, consumer_busy = busy_shares(window)
    if bound is Bound.PRODUCER and window.consumer_wait is not None:
        return (
            f"the {consumer} waited {_percent(window.consumer_wait)} of {last} for data"
        )
    if bound is Bound.CONSUMER and window.producer_wait is not None:
        return f"the {producer} waited {_percent(window.producer_wait)} of {last} for the {consumer}"
    return (
        f"the {producer} was busy {_percent(producer_busy or 0.0)} and the "
        f"{consumer} {_percent(consumer_busy or 0.0)} of {last}"
    )


def _unknown_reason(verdict: Verdict, last: str) -> str:
    window, consumer = verdict.window, verdict.consumer
    if verdict.rule == "nothing moved":
        return f"no frame arrived and the {consumer} drew no samples over {last}"
    if verdict.rule == "no samples drawn":
        return (
            f"the {consumer} drew no samples while {window.frames:.0f} frames "
            f"arrived over {last} (not started, or in a step longer than the window)"
        )
    if verdict.rule == "no target ratio":
        drew = (
            f"drew {window.samples:.0f} samples and no frame arrived"
            if _starved(window)
            else f"drew {window.replay_ratio:.3g} samples per frame"
        )
        apart = ""
        producer_busy, consumer_busy = busy_shares(window)
        if (
            producer_busy is not None
            and consumer_busy is not None
            and min(producer_busy, consumer_busy) >= 1 - BALANCE_MARGIN
        ):  # what _stage_vote leaves to the ratio
            apart = (
                f" while neither side waited for the other (the {verdict.producer} "
                f"busy {producer_busy:.0%}, the {consumer} {consumer_busy:.0%})"
            )
        return (
            f"the {consumer} {drew} over {last}{apart}, and no target ratio to "
            "judge that by (bottleneck(target_ratio=...))"
        )
    if verdict.rule.endswith(" disagree"):
        said = [
            f"the {vote.rule} says {label_of(vote.bound, verdict.producer, consumer)}"
            for vote in _votes(window)
            if vote.bound is not Bound.BALANCED
        ]
        return f"{' and '.join(said)} over {last}"
    if verdict.rule == "no figures":
        wanted = "record busy_s and wait_s"
        if window.replay_ratio_target is not None:
            # A target with nothing to hold it against: the counters read.
            wanted += (
                f"; for the target ratio, count {' or '.join(_SAMPLES_KEYS)} "
                f"in the {consumer}'s or the buffer's stats and "
                f"{' or '.join(_FRAMES_KEYS)} in the {verdict.producer}'s, or "
                f"{_WRITTEN_KEY} in the buffer's"
            )
        return (
            f"no stage timing, replay ratio or queue figures over {last} "
            f"({wanted}: docs/finding-the-bottleneck.md)"
        )
    if verdict.rule == "window too short":
        return f"a window of {_seconds(verdict.window.seconds)} is too short to judge"
    return f"the {verdict.rule} over {last}"


def describe_metrics(
    metrics: Mapping[str, float], window: float | None = None
) -> str | None:
    """The sentence of a bottleneck watch's logged ``metrics`` (its metric names, without the watch's); ``None`` for other metrics.

    The verdict is judged again from the logged figures, by the same
    rules; ``window`` overrides the logged ``window_s``.

    >>> logged = {"window_s": 30.0, "consumer_busy_share": 0.37, "consumer_wait_share": 0.63,
    ...           "bound_known": 1.0, "bound": -1.0, "side/collector": -1.0, "side/learner": 1.0}
    >>> print(describe_metrics(logged))
    collector-bound: the learner waited 63% of the last 30 s for data; a faster learner gains nothing, a faster collector up to 2.7x before the learner limits
    >>> describe_metrics({"size": 3.0}) is None
    True
    """
    verdict = verdict_of_metrics(metrics, window)
    return None if verdict is None else describe(verdict)


def verdict_of_metrics(
    metrics: Mapping[str, float], window: float | None = None
) -> Verdict | None:
    """The :class:`Verdict` a bottleneck watch's logged ``metrics`` say (see :func:`describe_metrics`)."""
    if not holds_verdict(metrics):
        return None
    figures = Window.from_metrics(metrics)
    if window is not None:
        figures = figures._replace(seconds=window)
    producer, consumer = _sides(metrics)
    verdict = judge(figures, producer, consumer)
    if not metrics["bound_known"] and verdict.bound is not None:
        # Judged unknown when logged with figures that say more: too short.
        return Verdict(None, "window too short", None, figures, producer, consumer)
    return verdict


def _sides(metrics: Mapping[str, float]) -> tuple[str, str]:
    producer, consumer = "producer", "consumer"
    for name, value in metrics.items():
        if name.startswith(_SIDE_PREFIX):
            if value < 0:
                producer = name[len(_SIDE_PREFIX) :]
            elif value > 0:
                consumer = name[len(_SIDE_PREFIX) :]
    return producer, consumer


VERDICT_METRICS = frozenset(
    {"window_s", "bound_known", "bound", "speedup", *_METRIC_NAMES.values()}
)
"""The metrics a bottleneck watch logs, besides its ``side/<watch>`` entries."""


def holds_verdict(metrics: Iterable[str]) -> bool:
    """Whether a watch's metric names (without the watch's name) hold a verdict: a bottleneck watch's.

    >>> holds_verdict(["window_s", "bound_known"]), holds_verdict(["size"])
    (True, False)
    """
    return "bound_known" in metrics


def is_verdict_metric(metric: str) -> bool:
    """Whether ``metric`` (without its watch's name) may be one a bottleneck watch logs.

    >>> is_verdict_metric("consumer_wait_share"), is_verdict_metric("side/learner"), is_verdict_metric("frames")
    (True, True, False)
    """
    return metric in VERDICT_METRICS or metric.startswith(_SIDE_PREFIX)


_CODES = frozenset({"bound", "bound_known"})


def is_verdict_code(metric: str) -> bool:
    """Whether ``metric`` (without its watch's name) of a bottleneck watch is a code that says which, not a quantity: ``bound``, ``bound_known``, ``side/<watch>``.

    A ratio of two codes (-1, 0, +1) means nothing.

    >>> is_verdict_code("bound"), is_verdict_code("side/learner"), is_verdict_code("speedup")
    (True, True, False)
    """
    return metric in _CODES or metric.startswith(_SIDE_PREFIX)


_WINDOW_COUNTS = frozenset({_METRIC_NAMES["samples"], _METRIC_NAMES["frames"]})
"""A window's counts, which its replay ratio (and its sentence) says in one figure."""


_DRAWN_FIRST = (
    "speedup",
    _METRIC_NAMES["consumer_wait"],
    _METRIC_NAMES["producer_wait"],
    _METRIC_NAMES["replay_ratio"],
    _METRIC_NAMES["fill"],
    _METRIC_NAMES["consumer_busy"],
    _METRIC_NAMES["producer_busy"],
)
"""A judged bottleneck watch's figures that say most of its verdict, in the order a chart draws them."""


def drawn_rank(metric: str) -> int:
    """Where a chart puts ``metric`` (without its watch's name) of a judged bottleneck watch among the watch's lines: the gain of fixing the bottleneck first, then who waited, the replay ratio, the fill; the rest after.

    >>> [drawn_rank(metric) for metric in ("speedup", "consumer_wait_share", "window_s", "policy_lag")]
    [0, 1, 7, 7]
    """
    try:
        return _DRAWN_FIRST.index(metric)
    except ValueError:
        return len(_DRAWN_FIRST)


def is_drawn(metric: str) -> bool:
    """Whether a chart draws ``metric`` (without its watch's name) of a judged bottleneck watch as a line.

    Not its codes (the verdict is shaded instead) nor the window's counts
    that its ``replay_ratio`` is made of, so that the figures that say most
    (``speedup``, the shares, the ratio) keep their place in the panel.

    >>> is_drawn("speedup"), is_drawn("bound"), is_drawn("samples_drawn")
    (True, False, False)
    """
    return not is_verdict_code(metric) and metric not in _WINDOW_COUNTS


def run_verdict(windows: Sequence[Mapping[str, float]]) -> tuple[str, str] | None:
    """What a run's bottleneck windows (each its logged metrics, in order) say: the last judged window's sentence, and the split over the run (:func:`format_split`).

    ``None`` when they are no bottleneck watch's.

    >>> windows = [{"window_s": 30.0, "consumer_busy_share": 0.9, "consumer_wait_share": 0.1,
    ...             "bound_known": 1.0, "bound": 1.0, "side/c": -1.0, "side/l": 1.0}] * 3
    >>> last, split = run_verdict(windows)
    >>> print(last)
    l-bound: the c was busy 10% and the l 90% of the last 30 s; a faster c gains nothing, a faster l up to 10.0x before the c limits
    >>> split
    'l-bound 100% of 3 windows'
    """
    windows = [metrics for metrics in windows if "bound_known" in metrics]
    if not windows:
        return None
    known = [metrics for metrics in windows if metrics["bound_known"]]
    last = describe_metrics((known or windows)[-1])
    counts, _, _ = split_of(windows)
    return last or "", format_split(counts)


def speedup_labels(windows: Iterable[Mapping[str, float]]) -> tuple[str, ...]:
    """The labels of the windows (each a bottleneck watch's logged metrics) that logged a ``speedup``, each once, sorted: what a run's mean speed-up is a speed-up of.

    A speed-up of a faster collector is no measure of a faster learner's:
    runs compare their speed-ups only where each has a single label, the same.

    >>> windows = [{"bound_known": 1.0, "bound": -1.0, "speedup": 2.0, "side/c": -1.0, "side/l": 1.0}]
    >>> windows += [{"bound_known": 1.0, "bound": 0.0, "speedup": 1.1, "side/c": -1.0, "side/l": 1.0}]
    >>> speedup_labels(windows), speedup_labels(windows[:1])
    (('balanced', 'c-bound'), ('c-bound',))
    """
    return tuple(
        sorted(
            {window_verdict(metrics)[1] for metrics in windows if "speedup" in metrics}
        )
    )


def split_of(windows: Iterable[Mapping[str, float]]) -> tuple[dict[str, int], str, str]:
    """How the verdict split over a run's windows (each one a bottleneck watch's logged metrics): a count by label, and the producer's and consumer's names.

    >>> windows = [{"bound_known": 1.0, "bound": 1.0, "side/c": -1.0, "side/l": 1.0}] * 4
    >>> windows += [{"bound_known": 0.0, "side/c": -1.0, "side/l": 1.0}]
    >>> split_of(windows)
    ({'l-bound': 4, 'unknown': 1}, 'c', 'l')
    """
    counts: dict[str, int] = {}
    producer, consumer = "producer", "consumer"
    for metrics in windows:
        producer, consumer = _sides(metrics)
        _, label = window_verdict(metrics)
        counts[label] = counts.get(label, 0) + 1
    return counts, producer, consumer


def window_verdict(metrics: Mapping[str, float]) -> tuple[Bound | None, str]:
    """What one window of a bottleneck watch (its logged metrics) says: its bound (``None``: unknown) and its label (:func:`label_of`).

    >>> window_verdict({"bound_known": 1.0, "bound": -1.0, "side/collector": -1.0, "side/learner": 1.0})
    (<Bound.PRODUCER: -1>, 'collector-bound')
    >>> window_verdict({"bound_known": 0.0, "side/collector": -1.0})
    (None, 'unknown')
    """
    known = metrics.get("bound_known", 0.0) and "bound" in metrics
    value = metrics.get("bound", math.nan) if known else math.nan
    bound = Bound(int(value)) if value in (-1.0, 0.0, 1.0) else None
    return bound, label_of(bound, *_sides(metrics))


def format_split(counts: Mapping[str, int]) -> str:
    """A split (:func:`split_of`) in words, the most frequent first: ``learner-bound 80%, unknown 20% of 5 windows``.

    >>> format_split({"l-bound": 4, "unknown": 1})
    'l-bound 80%, unknown 20% of 5 windows'
    """
    total = sum(counts.values())
    if not total:
        return "no windows"
    ranked = sorted(counts.items(), key=lambda item: -item[1])
    parts = ", ".join(f"{label} {count / total:.0%}" for label, count in ranked)
    return f"{parts} of {total} window{'s' if total != 1 else ''}"
