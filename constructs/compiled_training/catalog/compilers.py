"""The compilers this library knows, by the names every part uses (cdk.json, the runtime's run
summary, the CLI, the advisor)."""

from __future__ import annotations

from enum import Enum

from compiled_training_runtime import contract


class CompilerKind(str, Enum):
    """The compiler's name: the same in cdk.json, the runtime's run summary and the CLI."""

    TRAINING_COMPILER = contract.COMPILER_TRAINING_COMPILER
    TORCH_COMPILE = contract.COMPILER_TORCH_COMPILE
    NEURON_XLA = contract.COMPILER_NEURON_XLA
    NONE = contract.COMPILER_NONE


def compiler_name(kind: CompilerKind) -> str:
    return {CompilerKind.TRAINING_COMPILER: "Training Compiler",
            CompilerKind.TORCH_COMPILE: "torch.compile",
            CompilerKind.NEURON_XLA: "Neuron PyTorch/XLA",
            CompilerKind.NONE: "no compiler"}[kind]
