"""The command line: advise, bench, bench --ab, and the synth summary."""
