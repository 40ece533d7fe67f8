"""Snapshot rules (SPEC 1.3 step 1 and 2.2): what becomes a metric, and how."""

from __future__ import annotations

import decimal
import fractions
import math
from collections import OrderedDict
from typing import Any

import numpy as np
import pytest
import torch

from rlpulse.metrics import as_metric, counter_value, snapshot_of


class FloatRaises:
    def __float__(self) -> float:
        raise RuntimeError("no float for you")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (3, 3.0),
        (2.5, 2.5),
        (True, 1.0),
        (False, 0.0),
        (np.float32(1.5), 1.5),
        (np.int64(7), 7.0),
        (np.bool_(True), 1.0),
        (np.array(4.0), 4.0),
        (torch.tensor(2.0), 2.0),
        (torch.tensor(5), 5.0),
        (fractions.Fraction(1, 4), 0.25),
        (decimal.Decimal("1.5"), 1.5),
    ],
)
def test_real_numbers_of_any_type_become_floats(value: Any, expected: float) -> None:
    result = as_metric(value)
    assert type(result) is float
    assert result == expected


@pytest.mark.parametrize(
    "value",
    [
        None,
        "12",
        b"12",
        float("nan"),
        float("inf"),
        -math.inf,
        10**400,
        1j,
        np.array([1.0, 2.0]),
        np.array([1.0]),
        torch.tensor([1.0]),
        torch.tensor(float("nan")),
        np.float64("inf"),
        FloatRaises(),
        object(),
        [1],
    ],
)
def test_values_that_are_not_finite_real_scalars_are_dropped(value: Any) -> None:
    assert as_metric(value) is None


def test_nested_mappings_are_flattened_with_slashes() -> None:
    raw = {"worker_0": {"frames": 5, "alive": True}, "worker_1": {"frames": 7}}
    assert snapshot_of(raw) == {
        "worker_0/frames": 5.0,
        "worker_0/alive": 1.0,
        "worker_1/frames": 7.0,
    }


def test_deeply_nested_mappings_keep_every_level() -> None:
    assert snapshot_of({"a": {"b": {"c": 1}}}) == {"a/b/c": 1.0}


def test_keys_become_strings() -> None:
    assert snapshot_of({0: 1.0, ("x",): 2}) == {"0": 1.0, "('x',)": 2.0}


def test_mapping_types_other_than_dict_are_accepted() -> None:
    raw = OrderedDict(frames=3, inner=OrderedDict(size=2))
    assert snapshot_of(raw) == {"frames": 3.0, "inner/size": 2.0}


def test_a_provider_result_that_is_not_a_mapping_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="mapping"):
        snapshot_of([("frames", 1)])


def test_odd_values_are_dropped_next_to_good_ones() -> None:
    raw = {"ok": 1, "huge": 10**400, "bad": FloatRaises(), "nan": float("nan")}
    assert snapshot_of(raw) == {"ok": 1.0}


def test_counter_value_reads_one_entry_without_the_rest() -> None:
    assert counter_value({"frames": 10, "bad": FloatRaises()}, "frames") == 10.0
    assert counter_value({"frames": 10**400}, "frames") is None
    assert counter_value({"frames": np.int64(3)}, "frames") == 3.0
    assert counter_value({}, "frames") is None


def test_counter_value_finds_nested_counters() -> None:
    assert counter_value({"worker_0": {"frames": 4}}, "worker_0/frames") == 4.0


def test_counter_value_of_a_non_mapping_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="mapping"):
        counter_value(3, "frames")
