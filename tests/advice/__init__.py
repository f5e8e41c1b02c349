"""Tests of the workload advisor."""
