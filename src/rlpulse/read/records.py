"""The records of run files, as :mod:`rlpulse.formats` reads them: kept here for the code that imports them from here.

Each format lives in :mod:`rlpulse.formats` (its schema, writer, reader and
repair together); this module re-exports what it always offered.
"""

from __future__ import annotations

from rlpulse.formats import (
    CSV_FIELDS,
    CSV_FIELDS_0_1,
    SQLITE_FORMAT_VERSION,
    SQLITE_MAGIC,
    SQLITE_SCHEMA,
    DistributionRecord,
    Record,
    RunFileError,
    RunFileWarning,
    RunInfo,
    list_runs,
    merge_distributions,
    prepare_record_file,
    read,
    read_distributions,
    read_events,
    run_infos,
)
from rlpulse.formats.lines import open_line_file

__all__ = [
    "CSV_FIELDS",
    "CSV_FIELDS_0_1",
    "SQLITE_FORMAT_VERSION",
    "SQLITE_MAGIC",
    "SQLITE_SCHEMA",
    "DistributionRecord",
    "Record",
    "RunFileError",
    "RunFileWarning",
    "RunInfo",
    "list_runs",
    "merge_distributions",
    "open_line_file",
    "prepare_record_file",
    "read",
    "read_distributions",
    "read_events",
    "run_infos",
]
