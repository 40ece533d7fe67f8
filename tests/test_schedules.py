"""The schedule values (rlpulse.schedules): what ``Every`` and ``AnyOf`` refuse and how composites flatten.

When a watch's schedule makes a snapshot due: tests/watch/test_schedule.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from rlpulse import AnyOf, Every


def test_every_any_flattens_nested_composites() -> None:
    a, b, c = Every.seconds(1), Every.seconds(2), Every.counter("frames", 3)
    assert (a | b) | c == Every.any(a, Every.any(b, c))
    assert isinstance(a | b, AnyOf)
    assert len({a | b, Every.any(a, b)}) == 1


def test_every_any_refuses_what_is_not_a_schedule() -> None:
    with pytest.raises(TypeError, match="Every"):
        Every.any(Every.seconds(1), 5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Every"):
        AnyOf((Every.seconds(1), "x"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one"):
        Every.any()


@pytest.mark.parametrize("interval", [float("nan"), float("inf"), -float("inf")])
def test_every_refuses_an_interval_that_is_not_finite(interval: float) -> None:
    with pytest.raises(ValueError, match="strictly positive: a finite number of"):
        Every.seconds(interval)
    with pytest.raises(ValueError, match="strictly positive: a finite number of"):
        Every.counter("frames", interval)  # type: ignore[arg-type]


@pytest.mark.parametrize("interval", ["5", True, b"5"])
def test_every_refuses_an_interval_that_is_not_a_number(interval: Any) -> None:
    with pytest.raises(TypeError, match="a finite number of seconds above zero"):
        Every("seconds", interval)


@pytest.mark.parametrize(
    ("interval", "error"),
    [
        (None, TypeError),
        ([1], TypeError),
        ("soon", ValueError),
        (True, TypeError),  # a second by float(), refused as Every() refuses it
        (False, TypeError),
    ],
)
def test_every_seconds_refuses_what_float_refuses_saying_what_it_takes(
    interval: Any, error: type[Exception]
) -> None:
    # The exception TorchRL's Every.seconds raises (float()'s), with a message.
    with pytest.raises(error, match=r"Every\.seconds\(\) takes a number of seconds"):
        Every.seconds(interval)


@pytest.mark.parametrize("key", [5, ("frames",), b"frames"])
def test_a_counter_key_is_the_name_of_a_snapshot_entry(key: Any) -> None:
    with pytest.raises(TypeError, match="counter key must be the name"):
        Every.counter(key, 10)
