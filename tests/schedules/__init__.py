"""Tests of RetrainingSchedule, its expressions, and the delivery of its alerts."""
