"""The registry of compilers: each built-in found by its name and recognized from the switches a
step carries (the library's own, a 0.2.0 template's, an image's), options checked by the
compiler they belong to, and a package's compiler refused where its name is taken."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

import compiled_training.compilers as compilers
from compiled_training import Compiler, CompilerKind
from compiled_training.compilers import (
    BUILT_IN,
    CompilerModule,
    compiler_module,
    recognize,
    recognized,
)
from compiled_training_runtime import contract


@pytest.mark.parametrize("compiler", [Compiler.none(), Compiler.training_compiler(),
                                      Compiler.torch_compile(mode="max-autotune"),
                                      Compiler.neuron_xla()], ids=str)
def test_a_step_is_recognized_from_the_switches_its_compiler_sets(compiler):
    hyperparameters = {k: contract.plain(v) for k, v in compiler.hyperparameters().items()}
    found = recognize(hyperparameters, compiler.environment())
    assert found is compiler.module
    carried = recognized(hyperparameters, compiler.environment())
    assert carried == ([compiler.module] if compiler.is_enabled else [])
    assert found.name == compiler.kind and Compiler.named(found.name).kind == compiler.kind


def test_a_step_of_another_template_is_recognized_from_its_hyperparameter_or_image():
    old = {"compiled_training_torch_compile": '"true"'}  # a 0.2.0 template, JSON-quoted
    assert recognize(old, {}).name == CompilerKind.TORCH_COMPILE
    image = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training-neuronx:2.9.0"
    assert recognize({}, {}, image).name == CompilerKind.NEURON_XLA
    assert recognize({"epochs": "3"}, {"OTHER": "true"}, "pytorch-training:2.9").enabled is False


def test_an_option_of_another_compiler_is_refused_naming_the_options_taken():
    with pytest.raises(TypeError, match="'torch-compile' takes the options mode, got level"):
        Compiler.named("torch-compile", level=2)
    with pytest.raises(TypeError, match="'none' takes the options none, got mode"):
        Compiler.named("none", mode="default")
    assert Compiler.named("torch-compile", mode="reduce-overhead") == Compiler.torch_compile(
        mode="reduce-overhead")


def test_an_unknown_name_is_refused_with_the_names_known():
    with pytest.raises(ValueError, match=r"compiler must be one of .*torch-compile.*, got "
                                         r"'torch_compile' \(did you mean 'torch-compile'\?\)"):
        compiler_module("torch_compile")


class _Taken(CompilerModule):
    name = "torch-compile"


class _Badly(CompilerModule):
    name = "Toy_JIT"


class _Fine(CompilerModule):
    name = "fine-jit"


def _registry_with(monkeypatch: pytest.MonkeyPatch, target: str) -> object:
    entry = EntryPoint(name="toy", value=f"{__name__}:{target}",
                       group=compilers.ENTRY_POINT_GROUP)
    monkeypatch.setattr(compilers, "entry_points", lambda group: [entry])
    return compilers._registry.__wrapped__()


@pytest.mark.parametrize("target", ["_Taken", "_Badly"])
def test_a_package_compiler_whose_name_is_taken_or_malformed_is_refused(monkeypatch, target):
    with pytest.raises(ValueError, match="must be new and written like 'torch-compile'"):
        _registry_with(monkeypatch, target)


def test_a_package_compiler_that_is_no_compiler_module_is_refused(monkeypatch):
    with pytest.raises(TypeError, match="must name a CompilerModule subclass, got"):
        _registry_with(monkeypatch, "pytest.MonkeyPatch")


def test_a_package_compiler_comes_after_the_built_in_ones(monkeypatch):
    registry = _registry_with(monkeypatch, "_Fine")
    assert list(registry) == [*(m.name for m in BUILT_IN), "fine-jit"]  # type: ignore[call-overload]


def test_the_rule_pack_sees_each_compiler_a_step_of_another_template_carries():
    from compiled_training.nag.rule_pack import TrainingStep

    both = TrainingStep({"HyperParameters": {contract.HP_TRAINING_COMPILER_ENABLED: "true"},
                         "Environment": {contract.ENV_TORCH_COMPILE: "true"}}, {})
    assert [m.name for m in both.compilers] == [CompilerKind.TRAINING_COMPILER,
                                                CompilerKind.TORCH_COMPILE]
    assert both.compiler.name == CompilerKind.TRAINING_COMPILER  # the first, in registry order
    native = TrainingStep({"ResourceConfig": {"InstanceType": "ml.trn2.48xlarge"},
                           "AlgorithmSpecification": {"TrainingImage": "x/pytorch-training-"
                                                                        "neuronx:2.9.0"},
                           "Environment": {contract.ENV_TORCH_COMPILE: "true"}}, {})
    assert [m.name for m in native.compilers] == [CompilerKind.TORCH_COMPILE,
                                                  CompilerKind.NEURON_XLA]
    eager = TrainingStep({"ResourceConfig": {"InstanceType": "ml.trn2.48xlarge"}}, {})
    assert eager.compilers == [] and eager.compiler.name == CompilerKind.NONE


def test_options_are_type_checked_as_the_factories_check_them():
    with pytest.raises(TypeError, match="compiler option debug must be bool, got 'no'"):
        Compiler.named("training-compiler", debug="no")
    with pytest.raises(TypeError, match="compiler option precompile_steps must be int, got 2.5"):
        Compiler.named("neuron-xla", precompile=True, precompile_steps=2.5)


def test_a_bench_trial_of_a_misspelt_compiler_suggests_its_plain_name():
    from compiled_training.tools.bench_ab import check_compiler

    with pytest.raises(ValueError, match=r"got 'torch-compil' \(did you mean 'torch-compile'\?\)"):
        check_compiler("torch-compil")
    with pytest.raises(ValueError, match="must be one of training-compiler, torch-compile, got"):
        check_compiler("neuron-xla")


class _Broken(CompilerModule):
    name = "broken-jit"

    def __init__(self) -> None:
        raise ImportError("no module named broken_backend")


def test_a_package_compiler_that_fails_to_load_is_named_in_the_error(monkeypatch):
    with pytest.raises(RuntimeError, match=r"entry point 'toy' \(.*:_Broken\) of group "
                                           r"'compiled_training.compilers' could not be loaded: "
                                           r"no module named broken_backend"):
        _registry_with(monkeypatch, "_Broken")


def test_the_local_runner_needs_torch_xla_for_a_neuron_step_of_another_template():
    from compiled_training.local.training import compiles_through_xla

    neuronx = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training-neuronx:2.9.0"
    assert compiles_through_xla({"Environment": {contract.ENV_NEURON_CC_FLAGS: "-O1"}})
    assert compiles_through_xla({"AlgorithmSpecification": {"TrainingImage": neuronx}})
    assert compiles_through_xla({"HyperParameters": {contract.HP_PYTORCH_XLA_MULTI_WORKER:
                                                     "true"}})
    assert not compiles_through_xla({"Environment": {contract.ENV_TORCH_COMPILE: "true"}})


class _Levelled(CompilerModule):
    name = "levelled-jit"
    settings = ("level", "fast")


def test_a_registered_compilers_options_are_kept_as_given_and_read_back():
    fields = _Levelled().options(level=3, fast=True)
    choice = Compiler(**fields)
    assert choice.options == (("fast", True), ("level", 3))
    assert (choice.option("level"), choice.option("warmup", 0)) == (3, 0)
    with pytest.raises(TypeError, match=r"^compiler option level must be a str, int, float or "
                                        r"bool, got \[3\]$"):
        _Levelled().options(level=[3])
    with pytest.raises(TypeError, match="takes the options level, fast, got depth"):
        _Levelled().options(depth=2)
    # The built-in compilers keep theirs in fields: Compiler.options stays empty.
    assert Compiler.named("torch-compile", mode="max-autotune").options == ()
    assert Compiler.torch_compile() == Compiler.named("torch-compile")


def test_a_step_rule_of_an_unknown_level_or_a_taken_id_is_refused(monkeypatch):
    from compiled_training.compilers import StepRule
    from compiled_training.nag import rules

    with pytest.raises(ValueError, match=r"^StepRule TOY1: level must be one of error, warning, "
                                         r"info, got 'warn'$"):
        StepRule("TOY1", "warn", "what", "why", lambda step: True)

    class _Clashing(CompilerModule):
        name = "clashing-jit"
        step_rules = (StepRule("CT4", "warning", "what", "why", lambda step: True),)

    monkeypatch.setattr(rules, "all_compilers", lambda: (*BUILT_IN, _Clashing()))
    with pytest.raises(ValueError, match=r"^compiler 'clashing-jit': rule id CT4 is taken by "
                                         r"compiler 'training-compiler'; give its StepRule"):
        rules.all_rules()
    monkeypatch.setattr(rules, "all_compilers", lambda: BUILT_IN)
    assert [rule.id for rule in rules.all_rules()] == [f"CT{i}" for i in range(1, 16)]
