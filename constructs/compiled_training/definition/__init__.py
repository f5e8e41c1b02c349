"""Pure builders: from a `TrainingJob` to the SageMaker pipeline definition, and its checks.

The training step and its retries (`training`), the A/B benchmark's steps (`benchmark`), the
quality gate and the model registration's steps (`registration`), every rule SageMaker and its
training toolkit would enforce at run time (`rules`, `validation`, `entry_point`), and the
deterministic code archive (`sourcedir`). Functions of their inputs: no CDK objects, tokens
passed through.

May import: the values, the advisor, the compilers and the catalog (and the runtime's
`contract`); no CDK.
"""
