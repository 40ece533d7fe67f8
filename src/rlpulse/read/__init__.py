"""Reading stored runs back: records, summaries and charts.

:mod:`rlpulse.read.records` reads the records of a run file (SQLite, CSV,
JSON lines) whatever sink wrote it; :mod:`rlpulse.read.summary` condenses a
run into what ``rlpulse show`` prints; :mod:`rlpulse.read.plot` draws what
``rlpulse plot`` saves (needs ``rlpulse[plot]``). ``rlpulse.read`` (the
function) and :class:`rlpulse.Record` are the public entry points.
"""
