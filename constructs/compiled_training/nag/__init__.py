"""CompiledTrainingChecks (the cdk-nag rule pack) and the library's acknowledgements."""
