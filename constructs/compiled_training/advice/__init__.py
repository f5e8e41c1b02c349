"""The workload advisor: WorkloadProfile, assess_workload (Compiler.auto uses it at synth)."""
