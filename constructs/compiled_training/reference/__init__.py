"""The reference platform: each team's entry in ``cdk.json`` turned into its stacks
(`platform.TeamStack`), which the repository's ``app.py`` synthesizes. A user of the library
writes its own app instead; this shows one.

May import: every layer of the library but the local runner.
"""
