"""Tests of the command line: advise, bench, bench --ab, the summary."""
