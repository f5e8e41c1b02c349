"""Tests of the pure definition builders and their checks: SDK parity, entry points, code archive."""
