"""rlpulse: pull-based operational monitoring for reinforcement-learning pipelines."""

__version__ = "0.1.0"

__all__ = ["__version__"]
