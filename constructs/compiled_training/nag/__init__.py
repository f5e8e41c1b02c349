"""`CompiledTrainingChecks`: the cdk-nag rule pack for compiler misuse, reading any
``AWS::SageMaker::Pipeline`` in an app. (The library's own acknowledgements are made in
``compiled_training.wiring``.)

May import: anything below the rule pack and tools; not `reference`.
"""
