"""Tests of the CDK wiring the constructs share: stack reads, token tests, suppression names."""
