"""The workload advisor: which compiler pays for a training workload, how much, and what to do.

`WorkloadProfile` and its vocabulary (`workload`), the published figures it expects of each
compiler (`priors`), the cost model (`cost`) and the verdict with its reasons (`advisor`:
`assess_workload`).

May import: the compilers and the catalog (and the runtime's `contract`); no CDK. It sits below
the values because
`Compiler.auto(profile)` asks it; the CLI and the rule pack ask it too.
"""
