"""``python -m rlpulse``: the ``rlpulse`` command line (see :mod:`rlpulse.cli`)."""

from rlpulse.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
