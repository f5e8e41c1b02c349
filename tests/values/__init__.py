"""Tests of the spec: the values users write and the boundary type check."""
