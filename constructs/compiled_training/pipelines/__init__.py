"""TrainingPipeline, CompilerBenchmark, ModelRegistration, and the choices they share:
the compiler, the framework, a training job's channels, parameters and distribution."""
