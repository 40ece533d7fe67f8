"""How rlpulse writes for people: counts with their noun, numbers, durations, names and tables.

The one place where the command line, the console sink and the monitor's
``repr`` decide how a number or a count reads, and how a name too long for
its column is shortened. Pure functions, standard
library only.

Numbers (:func:`format_number`) are written to be read at a glance and to
never claim more than they hold:

- below a thousand, four significant digits: ``0.3333``, ``12.35``, ``999.9``
  (rounded, but for a value just short of a power of ten, which is cut:
  a utilization of 0.99997 is ``0.9999``, not ``1``);
- from a thousand to a million, the whole number, with thousands separators
  from ten thousand on: ``4096``, ``19,999``, ``999,999``;
- from a million on, four significant digits with a suffix, M (million), G
  (billion) or T (trillion): ``1.5M``, ``7.25G``; from 10^15 on, four
  significant digits in scientific notation: ``4.611e+18``.

From a thousand on, digits are cut, never rounded up, so a count short of a
round number never reads as reaching it: 19,999 frames are ``19,999``,
1,999,999 are ``1.999M``, not ``2M``. :func:`format_exact` writes a value
in full (``--exact`` on the command line).
"""

from __future__ import annotations

import math
import os
import re
import textwrap
from collections.abc import Sequence
from typing import Any, TextIO

__all__ = [
    "format_duration",
    "format_exact",
    "format_name",
    "format_number",
    "format_table",
    "natural_order",
    "noun_for",
    "plural",
    "shortened",
    "wrap_words",
    "wrapped",
]

_FOUR_DIGITS = "%.4g"
_TWELVE_DIGITS = "%.12g"
_WHOLE_FROM = 1000.0
_SEPARATORS_FROM_EXPONENT = 4  # 10,000
_SUFFIX_FROM_EXPONENT = 6
_SCIENTIFIC_FROM_EXPONENT = 15
_SUFFIXES = {2: "M", 3: "G", 4: "T"}  # powers of a thousand -> suffix
_SIGNIFICANT = 4
_SIBILANT_ENDINGS = ("s", "x", "z", "ch", "sh")


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """Return ``count`` and ``noun``, the noun in the plural unless the count is one.

    The plural adds ``es`` after s, x, z, ch and sh, else ``s``;
    ``plural_form`` gives any other. Counts get thousands separators.

    >>> plural(1, "record"), plural(2, "record"), plural(0, "watch")
    ('1 record', '2 records', '0 watches')
    >>> plural(12_345, "line"), plural(3, "entry", "entries")
    ('12,345 lines', '3 entries')
    """
    return f"{count:,} {noun_for(count, noun, plural_form)}"


def noun_for(count: int, noun: str, plural_form: str | None = None) -> str:
    """Return ``noun`` as it follows ``count``: as is for one, else in the plural (see :func:`plural`).

    >>> f"2 of {plural(1, 'watch')}", f"1 of 3 {noun_for(3, 'watch')}"
    ('2 of 1 watch', '1 of 3 watches')
    """
    if count == 1:
        return noun
    if plural_form is not None:
        return plural_form
    return noun + ("es" if noun.endswith(_SIBILANT_ENDINGS) else "s")


def format_number(value: float) -> str:
    """Return ``value`` as people read it at a glance (see the module's docstring for the forms).

    >>> [format_number(v) for v in (0, 7, 0.25, 1 / 3, 0.99997, 999.97, 4096, 19_999, 20_000)]
    ['0', '7', '0.25', '0.3333', '0.9999', '999.9', '4096', '19,999', '20,000']
    >>> [format_number(v) for v in (1_999_999, 2.5e6, -3e9, 1.5e12, 1e15, 2.0**62)]
    ['1.999M', '2.5M', '-3G', '1.5T', '1e+15', '4.611e+18']
    >>> format_number(float("nan")), format_number(float("-inf"))
    ('nan', '-inf')
    """
    # Called for every metric of every console line: the common case is
    # decided first.
    if type(value) is not float:
        value = float(value)
    if -_WHOLE_FROM < value < _WHOLE_FROM:
        if value == 0:
            return "0"
        text = _FOUR_DIGITS % value
        digits = text.strip("-0.")
        # (%.4g writes a number under 1e-4 in scientific notation.)
        a_power = digits == "1" or (-1e-4 < value < 1e-4 and digits[:2] == "1e")
        if a_power and abs(value) < abs(float(text)):
            # Rounded up to a power of ten it is short of (1, 100, 0.001,
            # 1e-05): cut instead, its four digits all nines (0.99997 is
            # 0.9999, 999.97 is 999.9).
            power = abs(float(text))
            return _FOUR_DIGITS % math.copysign(power - power / 10_000, value)
        return text
    if value - value != 0.0:  # inf or nan
        return str(value)
    sign = "-" if value < 0 else ""
    # Twelve significant digits drop float noise (a rate of 29999.999999999996
    # is 30,000); the digits kept are then cut, not rounded.
    mantissa, _, exponent_text = (_TWELVE_DIGITS % abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    exponent = len(whole) - 1 + (int(exponent_text) if exponent_text else 0)
    if exponent < _SUFFIX_FROM_EXPONENT:  # no exponent in the text: whole is it
        return sign + (
            f"{int(whole):,}" if exponent >= _SEPARATORS_FROM_EXPONENT else whole
        )
    kept = (whole + fraction)[:_SIGNIFICANT].ljust(_SIGNIFICANT, "0")
    if exponent >= _SCIENTIFIC_FROM_EXPONENT:
        return f"{sign}{_decimal(kept, 1)}e+{exponent:02d}"
    integer_digits = exponent % 3 + 1
    return f"{sign}{_decimal(kept, integer_digits)}{_SUFFIXES[exponent // 3]}"


def _decimal(digits: str, integer_digits: int) -> str:
    """``digits`` with a decimal point after the first ``integer_digits``, trailing zeros dropped."""
    fraction = digits[integer_digits:].rstrip("0")
    return digits[:integer_digits] + ("." + fraction if fraction else "")


def natural_order(name: str) -> tuple[str | int, ...]:
    """A key that sorts names as people count: ``worker_2`` before ``worker_10``, the rest as text.

    >>> sorted(["w/worker_10/frames", "w/worker_2/frames", "w/workers_alive"], key=natural_order)
    ['w/worker_2/frames', 'w/worker_10/frames', 'w/workers_alive']
    """
    # Text and numbers alternate, text first: like parts compare alike.
    return tuple(
        int(part) if index % 2 else part
        for index, part in enumerate(_DIGITS.split(name))
    )


_DIGITS = re.compile(r"(\d+)")


def format_exact(value: float) -> str:
    """Return ``value`` in full: a whole number with all its digits, any other as Python writes it back exactly.

    What ``--exact`` prints; the text reads back as the same float.

    >>> [format_exact(v) for v in (19_999.0, 1e20, 2.0**62, 0.1, 1 / 3, float("nan"))]
    ['19999', '100000000000000000000', '4611686018427387904', '0.1', '0.3333333333333333', 'nan']
    """
    if type(value) is not float:
        value = float(value)
    if value.is_integer():
        return str(int(value))
    return repr(value)


def format_duration(seconds: float) -> str:
    """Return a duration the way people say it: ``2.5 s``, ``3 min 05 s``, ``2 h 07 min``.

    >>> format_duration(2.46), format_duration(185), format_duration(7625)
    ('2.5 s', '3 min 05 s', '2 h 07 min')
    """
    if seconds < 59.95:
        return f"{seconds:.1f} s"
    whole_seconds = round(seconds)
    if whole_seconds < 3600:
        minutes, rest = divmod(whole_seconds, 60)
        return f"{minutes} min {rest:02d} s"
    hours, rest = divmod(whole_seconds, 3600)
    return f"{hours} h {rest // 60:02d} min"


def format_name(name: str) -> str:
    """Return a metric or run name as it can be printed on one line: as is, or quoted and escaped.

    A name with a newline, a tab or another control character would break
    a table or a terminal; it is written as Python writes the string, quotes
    and all, so it reads back unambiguously.

    >>> print(format_name("collector/frames"), format_name("bad\\nname"), format_name("\\x1b[2J"))
    collector/frames 'bad\\nname' '\\x1b[2J'
    """
    return name if name.isprintable() else repr(name)


def shortened(label: str, width: int) -> str:
    """``label`` in at most ``width`` characters: its start and end around an ellipsis where longer.

    Both ends say something: a metric's watch and key at its start, its
    unit at its end (``worker_0/heartbeat_age_s``).

    >>> shortened("episode_return_mean", 25), shortened("a_very_long_metric_name_of_a_users_own_per_second", 25)
    ('episode_return_mean', 'a_very_long_…n_per_second')
    """
    if len(label) <= width:
        return label
    end = (width - 1) // 2
    return label[: width - 1 - end] + "…" + label[-end:]


def terminal_width(stream: TextIO) -> int | None:
    """The width of the lines written to ``stream``, as :func:`shutil.get_terminal_size` reads it; ``None`` for no terminal.

    The ``COLUMNS`` environment variable when it holds a positive number,
    else the width of the terminal ``stream`` is (read at each call, so a
    resized window is followed), else ``None`` (a pipe, a file).

    >>> import io
    >>> terminal_width(io.StringIO()) == (int(os.environ["COLUMNS"]) if os.environ.get("COLUMNS", "").isdigit() else None)
    True
    """
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        if stream.isatty():
            return os.get_terminal_size(stream.fileno()).columns or None
    except (AttributeError, OSError, ValueError):
        pass
    return None


# The space between a number and its unit ("1.25 s", "49 %"): no line breaks there.
_NUMBER_AND_UNIT = re.compile(r"(?<=\d) (?=(?:ms|µs|min|s|h|[kMG]?B)(?!\w)|%)")
_GLUE = "\xa0"  # a space textwrap does not break at


def wrap_words(text: str, width: int, **options: Any) -> list[str]:
    """``text`` broken between words into lines of at most ``width`` (as :func:`textwrap.wrap` with ``options``), never between a number and its unit.

    >>> wrap_words("the learner waited 49% of the last 1 s for data", 37)
    ['the learner waited 49% of the last', '1 s for data']
    >>> wrap_words("over the last 1.25 s, against 3 windows", 18)
    ['over the last', '1.25 s, against 3', 'windows']
    """
    glued = _NUMBER_AND_UNIT.sub(_GLUE, text)
    return [line.replace(_GLUE, " ") for line in textwrap.wrap(glued, width, **options)]


def wrapped(text: str, width: int | None, indent: str = "    ") -> str:
    """``text`` with each line longer than ``width`` broken between words, its further lines indented by ``indent``; as it is with ``width=None`` (a pipe).

    A terminal breaks a long line wherever it reaches its edge, mid-word
    (a date, a path); a word longer than the width stays whole.

    >>> print(wrapped("bottleneck: learner-bound: the learner drew 1.05 samples per frame", 30))
    bottleneck: learner-bound: the
        learner drew 1.05 samples
        per frame
    >>> wrapped("a line\\nanother", None)
    'a line\\nanother'
    """
    if width is None:
        return text
    return "\n".join(
        "\n".join(
            wrap_words(
                line,
                width,
                subsequent_indent=indent,
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
        if len(line) > width
        else line
        for line in text.split("\n")
    )


_NARROWEST_NAMES = 16
"""The fewest characters a table's first column is shortened to when fitted to a width."""


def format_table(
    rows: Sequence[Sequence[str]], *, left: int = 1, width: int | None = None
) -> str:
    """Return ``rows`` (a header row first) as aligned columns two spaces apart.

    The first ``left`` columns (names) are aligned left, the others
    (numbers) right; each cell goes through :func:`format_name`, so a name
    with a newline keeps its row on one line. Trailing spaces are dropped.
    With a ``width`` (a terminal's), names too long for the lines to fit
    in it are :func:`shortened`, to no fewer than 16 characters.

    >>> rows = [("metric", "last"), ("buffer/size", "3"), ("collector/frames_per_second", "19,999")]
    >>> print(format_table(rows))
    metric                         last
    buffer/size                       3
    collector/frames_per_second  19,999
    >>> print(format_table(rows, width=26))
    metric                last
    buffer/size              3
    collector…r_second  19,999
    """
    cells = [[format_name(cell) for cell in row] for row in rows]
    widths = [max(len(row[column]) for row in cells) for column in range(len(cells[0]))]
    excess = sum(widths) + 2 * (len(widths) - 1) - (width or 0)
    if width is not None and excess > 0 and widths[0] > _NARROWEST_NAMES:
        widths[0] = max(_NARROWEST_NAMES, widths[0] - excess)
        for row in cells:
            row[0] = shortened(row[0], widths[0])
    lines = []
    for row in cells:
        aligned = [
            cell.ljust(width) if column < left else cell.rjust(width)
            for column, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(aligned).rstrip())
    return "\n".join(lines)
