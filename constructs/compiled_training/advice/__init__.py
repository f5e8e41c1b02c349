"""The workload advisor: which compiler pays for a training workload, how much, and what to do.

`WorkloadProfile` and its vocabulary (`workload`), the published figures it expects of each
compiler (`priors`), the cost model (`cost`), the answer (`assessment`), and one pipeline
(`advisor`: `assess_workload`) that asks each accelerator's judge (`judge`, `gpu`, `trainium`)
about every factor.

May import: the compilers and the catalog (and the runtime's `contract`); no CDK. It sits below
the values because
`Compiler.auto(profile)` asks it; the CLI and the rule pack ask it too.
"""
