"""The records of run files, as :mod:`rlpulse.formats` reads them: kept here for the code that imports them from here.

Each format lives in :mod:`rlpulse.formats` (its schema, writer, reader and
repair together); this module re-exports what it always offered.
"""

from __future__ import annotations

from rlpulse import formats
from rlpulse.formats import *  # noqa: F403  (the names it always offered)
from rlpulse.formats import detect_format
from rlpulse.formats.lines import open_line_file

__all__ = [*formats.__all__, "detect_format", "open_line_file"]
