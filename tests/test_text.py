"""How rlpulse writes numbers, counts, names and tables for people (rlpulse.text)."""

from __future__ import annotations

import ast
import math

import pytest

from rlpulse.text import (
    format_duration,
    format_exact,
    format_name,
    format_number,
    format_table,
    natural_order,
    plural,
)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0"),
        (-0.0, "0"),
        (3.0, "3"),
        (0.5, "0.5"),
        (2 / 3, "0.6667"),
        (0.000123456, "0.0001235"),
        (999.9, "999.9"),
        (999.97, "999.9"),
        (0.99997, "0.9999"),
        (-9.99995, "-9.999"),
        (0.00099997, "0.0009999"),
        (9.99997e-06, "9.999e-06"),
        (1.5e-07, "1.5e-07"),
        (99.96, "99.96"),
        (4096.0, "4096"),
        (9999.0, "9999"),
        (9999.7, "9999"),
        (10_000.0, "10,000"),
        (123_456.0, "123,456"),
        (999_999.0, "999,999"),
        (1_000_000.0, "1M"),
        (2_500_000.0, "2.5M"),
        (406_400_000.0, "406.4M"),
        (29_999.999999999996, "30,000"),
        (19_999.6, "19,999"),
        (2e13, "20T"),
        (7.25e9, "7.25G"),
        (1.5e12, "1.5T"),
        (-42_000.0, "-42,000"),
        (math.nan, "nan"),
        (math.inf, "inf"),
        (-math.inf, "-inf"),
    ],
)
def test_format_number_is_short_and_readable(value: float, text: str) -> None:
    assert format_number(value) == text


@pytest.mark.parametrize(
    ("below", "round_number"),
    [
        (0.99997, 1.0),
        (999.97, 1000.0),
        (19_999.0, 20_000.0),
        (999_999.0, 1_000_000.0),
        (1_999_999.0, 2_000_000.0),
        (999_999_999_999.0, 1e12),
        (9.9999e15, 1e16),
    ],
)
def test_format_number_never_shows_a_count_short_of_a_round_number_as_reaching_it(
    below: float, round_number: float
) -> None:
    assert format_number(below) != format_number(round_number)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1e15, "1e+15"),
        (1e20, "1e+20"),
        (2.0**62, "4.611e+18"),
        (-3.5e300, "-3.5e+300"),
        (1e23, "1e+23"),
        (1.7976931348623157e308, "1.797e+308"),
    ],
)
def test_format_number_writes_numbers_past_trillions_in_scientific_notation(
    value: float, text: str
) -> None:
    assert format_number(value) == text


@pytest.mark.parametrize(
    "value", [0.1, 1 / 3, 19_999.0, 1e15, 1e20, 2.0**62, -7.25e-9, 1.5e300]
)
def test_format_exact_reads_back_as_the_same_value(value: float) -> None:
    assert float(format_exact(value)) == value


def test_format_exact_writes_whole_numbers_without_a_fraction() -> None:
    assert format_exact(2.0**62) == "4611686018427387904"
    assert format_exact(19_999.0) == "19999"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0, "0.0 s"),
        (2.46, "2.5 s"),
        (59.9, "59.9 s"),
        (59.97, "1 min 00 s"),
        (185.0, "3 min 05 s"),
        (3599.4, "59 min 59 s"),
        (3600.0, "1 h 00 min"),
        (7625.0, "2 h 07 min"),
    ],
)
def test_format_duration_reads_like_speech(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    ("count", "noun", "text"),
    [
        (0, "record", "0 records"),
        (1, "record", "1 record"),
        (2, "record", "2 records"),
        (1, "watch", "1 watch"),
        (3, "watch", "3 watches"),
        (12_345, "line", "12,345 lines"),
    ],
)
def test_plural_puts_the_noun_in_the_plural_unless_the_count_is_one(
    count: int, noun: str, text: str
) -> None:
    assert plural(count, noun) == text


@pytest.mark.parametrize("name", ["a\nb", "tab\there", "\x1b[2Jclear", "bell\x07"])
def test_format_name_escapes_control_characters_onto_one_line(name: str) -> None:
    shown = format_name(name)

    assert shown.isprintable()
    assert ast.literal_eval(shown) == name


def test_format_table_keeps_each_row_on_one_line_whatever_the_names() -> None:
    table = format_table([("metric", "last"), ("c/a\nb", "1"), ("c/d", "19,999")])

    assert table.splitlines() == [
        "metric      last",
        "'c/a\\nb'       1",
        "c/d       19,999",
    ]


def test_natural_order_counts_the_numbers_in_names() -> None:
    names = ["w/worker_10/frames", "w/worker_2/frames", "w/frames", "w/worker_1/frames"]

    assert sorted(names, key=natural_order) == [
        "w/frames",
        "w/worker_1/frames",
        "w/worker_2/frames",
        "w/worker_10/frames",
    ]
    assert natural_order("a10b2") < natural_order("a10b10")
