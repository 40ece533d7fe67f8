"""What stored runs say: summaries, comparisons, charts and the live view.

The run files are read by :mod:`rlpulse.formats` (SQLite, CSV, JSON lines,
whatever sink wrote them); :mod:`rlpulse.read.records` re-exports what it
always offered. :mod:`rlpulse.read.summary` condenses a run into what
``rlpulse show`` prints, :mod:`rlpulse.read.compare` puts runs side by
side, :mod:`rlpulse.read.plot` draws what ``rlpulse plot`` saves (needs
``rlpulse[plot]``), :mod:`rlpulse.read.live` keeps what ``rlpulse top``
shows of a run it follows and :mod:`rlpulse.read.top` draws it;
:mod:`rlpulse.read.match` is the ``--match`` of every command.
``rlpulse.read`` (the function) and :class:`rlpulse.Record` are the public
entry points.
"""
