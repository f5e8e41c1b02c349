"""The command line (``advise``, ``bench``, ``bench --ab``) and the synth summary.

May import: anything below the rule pack and tools; not `reference`, and not the rule pack.
"""
