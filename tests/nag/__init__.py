"""Tests of the CompiledTrainingChecks rule pack."""
