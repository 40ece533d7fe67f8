"""The compiled SharedCounters writer: optional, rlpulse works without it.

Everything else about the package is in pyproject.toml. Without a C
compiler the build skips the extension and WorkerCounters runs in Python.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("rlpulse._counters", ["src/rlpulse/_counters.c"], optional=True)
    ]
)
