"""The values a user writes, and their checks: `Framework`, `Compiler`, `Distribution`,
`Parameter`, `InputChannel` and `TrainingJob` (everything a training step needs, as plain data).

``compiled_training.typecheck`` checks every public constructor's and factory's arguments
against its annotations (the constructs' too), before anything reaches jsii.

May import: the advisor, the compilers and the catalog (and the runtime's `contract`); no CDK.
Values that hold CDK objects (the props, `TrainingImage`, `ModelRegistration`) belong to the
constructs.
"""
