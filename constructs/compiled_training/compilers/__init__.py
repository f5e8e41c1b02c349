"""The compilers, one module each, and the registry that finds them by name.

A compiler is a `CompilerModule` in a module of its own. The built-in ones are listed in
`BUILT_IN`; a package adds one by naming its module's class in the ``compiled_training.
compilers`` entry-point group, read once. The registry is keyed on the compiler's name, the one
cdk.json, the run summary and the CLI write; `CompilerKind` is the closed enum of the
built-in names, and a `Compiler` of a registered compiler has its plain name as ``kind``.

May import: the catalog and the runtime's contract (no CDK, below the advice and the values).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from compiled_training.compilers.base import (
    FIRST_COMPILE_MINUTES,
    Choice,
    CompileOverhead,
    CompilerKind,
    CompilerModule,
    Finding,
    Framework,
    Job,
    Notice,
    Pick,
    Prior,
    Step,
    StepRule,
    TrainiumClaim,
    Workload,
    value_of,
)
from compiled_training.compilers.neuron_xla import NeuronXla
from compiled_training.compilers.no_compiler import NoCompiler
from compiled_training.compilers.torch_compile import TorchCompile
from compiled_training.compilers.training_compiler import TrainingCompiler
from compiled_training_runtime import contract

__all__ = ["BUILT_IN", "ENTRY_POINT_GROUP", "FIRST_COMPILE_MINUTES", "Choice", "CompileOverhead",
           "CompilerKind", "CompilerModule", "Finding", "Framework", "Job", "Notice", "Pick",
           "Prior", "Step", "StepRule", "TrainiumClaim", "Workload", "all_compilers",
           "compiler_module", "compiler_names", "gpu_compilers", "no_compiler", "recognize",
           "recognized", "trainium_compiler"]

BUILT_IN: tuple[CompilerModule, ...] = (TrainingCompiler(), TorchCompile(), NeuronXla(),
                                        NoCompiler())
"""The built-in compilers, in the order a step's switches are matched and names are listed."""
ENTRY_POINT_GROUP = "compiled_training.compilers"
"""The entry-point group through which a package adds a compiler (a `CompilerModule` class)."""
_NAME = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")


@cache
def _registry() -> Mapping[str, CompilerModule]:
    modules = {value_of(module.name): module for module in BUILT_IN}
    for entry in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        where = f"entry point {entry.name!r} ({entry.value})"
        try:
            module = entry.load()()
        except Exception as error:
            raise RuntimeError(f"{where} of group {ENTRY_POINT_GROUP!r} could not be loaded: "
                               f"{error}; fix or uninstall the package that declares it") from error
        if not isinstance(module, CompilerModule):
            raise TypeError(f"{where} must name a CompilerModule subclass, got "
                            f"{type(module).__name__}")
        if not _NAME.fullmatch(value_of(module.name)) or value_of(module.name) in modules:
            raise ValueError(f"{where}: compiler name {value_of(module.name)!r} must be new and "
                             f"written like 'torch-compile' (taken: {', '.join(modules)})")
        modules[value_of(module.name)] = module
    return modules


def all_compilers() -> tuple[CompilerModule, ...]:
    """Every compiler, the built-in ones first."""
    return tuple(_registry().values())


def compiler_names() -> tuple[str, ...]:
    """Every compiler's name, the built-in ones first."""
    return tuple(_registry())


def compiler_module(name: str, field: str = "compiler") -> CompilerModule:
    """The compiler of a name; a ValueError naming ``field`` and the names known otherwise."""
    return _registry()[contract.check_compiler(value_of(name), field, compiler_names())]


def no_compiler() -> CompilerModule:
    """Eager execution: the baseline every compiler is compared with."""
    return _registry()[CompilerKind.NONE.value]


def gpu_compilers() -> list[CompilerModule]:
    """The compilers the advisor asks about a GPU job, in their order of preference."""
    return sorted((m for m in _registry().values() if m.enabled),
                  key=lambda m: m.preference)


def trainium_compiler() -> CompilerModule:
    """The path the advisor puts a job already on Trainium on."""
    return next(m for m in _registry().values() if m.trains_on_trainium)


def recognized(hyperparameters: Mapping[str, Any], environment: Mapping[str, Any],
               image: str = "") -> list[CompilerModule]:
    """Every compiler whose switches or image a step of a template carries, in registry order
    (a template not the library's may carry more than one)."""
    return [m for m in _registry().values() if m.recognizes(hyperparameters, environment, image)]


def recognize(hyperparameters: Mapping[str, Any], environment: Mapping[str, Any],
              image: str = "") -> CompilerModule:
    """The compiler a step uses: the first `recognized`, the built-in ones before a package's;
    no compiler if none is."""
    found = recognized(hyperparameters, environment, image)
    return found[0] if found else no_compiler()
