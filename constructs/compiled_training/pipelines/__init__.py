"""The pipeline constructs: `TrainingPipeline`, `CompilerBenchmark`, `ModelRegistration`, the
image a job runs (`TrainingImage`), their props defined once (`options`), the shared output
bucket, and what they share (`base`, `named_pipeline`).

May import: `image`, `wiring` and everything below them.
"""
