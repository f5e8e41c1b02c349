"""No compiler: eager execution."""

from __future__ import annotations

from compiled_training.compilers.base import (
    Choice,
    CompilerKind,
    CompilerModule,
    Finding,
    Job,
    trainium,
)


class NoCompiler(CompilerModule):
    """Eager execution: the baseline, and refused on Trainium, which runs compiled graphs only."""

    name = CompilerKind.NONE
    title = "no compiler"
    enabled = False

    def describe(self, choice: Choice) -> str:
        return "none"

    def checks(self, job: Job) -> tuple[list[Finding], list[Finding]]:
        if not trainium(job.instance_type):
            return [], []
        return [("TrainiumCompiler", f"{job.instance_type} runs compiled graphs only: use "
                                     f"Compiler.neuron_xla() (trn1, trn1n, trn2) or "
                                     f"Compiler.torch_compile() (native TorchNeuron, trn2)")], []
