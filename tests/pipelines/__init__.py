"""Tests of TrainingPipeline, CompilerBenchmark and ModelRegistration."""
