"""The demo pipelines behind ``rlpulse demo``: examples, not API."""
