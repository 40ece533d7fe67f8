"""The demo pipelines behind ``rlpulse demo``: examples, not API.

- :mod:`rlpulse._demo.common`: what every pipeline shares, its sinks and how
  a demo is recorded and reported;
- :mod:`rlpulse._demo.synthetic`: the standard-library pipeline;
- :mod:`rlpulse._demo.torchrl_pipeline`: the TorchRL pipeline (needs
  ``rlpulse[torchrl]``, imported only when it runs).
"""
