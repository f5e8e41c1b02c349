"""Tests of RuntimeImage."""
