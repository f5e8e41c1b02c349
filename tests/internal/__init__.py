"""Tests of the constructs' internals: request shapes, DLC resolution, SDK parity, entry points."""
