"""The contract between constructs and runtime, checked from both sides: metric lines read back
through the regexes the construct declares, the compiler's names, learning-rate scaling, and
the benchmark's decision."""

from __future__ import annotations

import re

import pytest

from compiled_training.advice.advisor import assess_workload
from compiled_training.definition.registration import metadata_value
from compiled_training.handlers import decision as decision_handler
from compiled_training.handlers import model_metrics as metrics_handler
from compiled_training.tools.cli import load_workloads
from compiled_training.values.compiler import Compiler, CompilerKind
from compiled_training_runtime import contract
from compiled_training_runtime.compare import ArmRun, Thresholds, compare
from compiled_training_runtime.env import parse_hyperparameters
from tests.helpers import ROOT, SCHEMA_PATH, SHARED_SCHEMA_PATH, definitions

WORKLOADS = {p.name: p for p in load_workloads(ROOT / "workloads.yaml")}


def test_every_metric_line_field_is_extracted_by_its_regex():
    line = contract.format_metric_line(
        120, {"train_loss": 0.4310, "samples_per_second": 812.5, "validation_accuracy": 0.9125,
              "validation_loss": 1.5e-3})
    extracted = {d["Name"]: float(re.search(d["Regex"], line).group(1))
                 for d in contract.metric_definitions()}
    assert extracted == {"train_loss": 0.431, "samples_per_second": 812.5,
                         "validation_accuracy": 0.9125, "validation_loss": 0.0015}


def test_a_metric_absent_from_a_line_is_not_matched():
    line = contract.format_metric_line(3, {"train_loss": 2.0})
    validation = next(d for d in contract.metric_definitions() if d["Name"] == "validation_loss")
    assert re.search(validation["Regex"], line) is None


def test_construct_declares_the_contract_regexes(reference_assembly):
    template = reference_assembly.get_stack_by_name("DocumentClassification").template
    definition, _ = definitions(template)  # the pipeline, then its benchmark
    declared = definition["Steps"][0]["Arguments"]["AlgorithmSpecification"]["MetricDefinitions"]
    assert declared == contract.metric_definitions()


def test_fails_on_an_unknown_metric_name():
    with pytest.raises(ValueError, match=r"unknown metric names \['accuracy'\]"):
        contract.format_metric_line(1, {"accuracy": 1.0})


# --- one compiler vocabulary -------------------------------------------------------------

@pytest.mark.parametrize("compiler", [Compiler.training_compiler(), Compiler.torch_compile(),
                                      Compiler.none()], ids=lambda c: c.kind.value)
def test_the_runtime_names_the_compiler_the_api_switched_on_as_the_api_does(compiler):
    # The hyperparameters and environment as the construct writes them, read back as the
    # runtime reads them.
    config = parse_hyperparameters(compiler.hyperparameters(), compiler.environment())
    assert config.compiler == compiler.kind.value
    assert [kind.value for kind in CompilerKind] == list(contract.COMPILERS)


@pytest.mark.parametrize("compiler", [Compiler.torch_compile(mode="max-autotune"),
                                      Compiler.neuron_xla()], ids=lambda c: c.kind.value)
def test_the_librarys_switches_reach_the_job_as_variables_and_no_script_argument(compiler):
    switches = set(contract.SWITCHES.values()) & set(compiler.environment())
    assert switches and not any(name.startswith("compiled_training")
                                for name in compiler.hyperparameters())
    config = parse_hyperparameters({}, compiler.environment())
    assert config.compiler == compiler.kind.value
    assert parse_hyperparameters({}, {}).compiler == "none"  # the twin: nothing set, no compiler


@pytest.mark.parametrize("value", ["true", True, '"true"'])
def test_a_template_made_by_0_2_0_still_switches_torch_compile_on(value):
    old = {contract.HP_TORCH_COMPILE: value, contract.HP_TORCH_COMPILE_MODE: "reduce-overhead"}
    config = parse_hyperparameters({k: contract.plain(v) for k, v in old.items()}, {})
    assert (config.compiler, config.torch_compile_mode) == ("torch-compile", "reduce-overhead")
    assert contract.switch(contract.ENV_TORCH_COMPILE, {}, old) == "true"
    assert contract.switch(contract.ENV_TORCH_COMPILE, {contract.ENV_TORCH_COMPILE: "false"},
                           old) == "false"  # the environment wins


def test_a_switch_added_after_0_2_0_is_read_from_the_environment_alone():
    # A registered compiler's own variable has no 0.2.0 hyperparameter behind it.
    new = "COMPILED_TRAINING_TOY_JIT"
    assert contract.switch(new, {new: "true"}, {}) == "true"
    assert contract.switch(new, {}, {"toy_jit": "true"}) is None


def test_a_switch_that_is_not_a_boolean_names_its_variable():
    with pytest.raises(ValueError, match="environment variable 'COMPILED_TRAINING_TORCH_COMPILE' "
                                         "must be true or false, got 'yes'"):
        parse_hyperparameters({}, {contract.ENV_TORCH_COMPILE: "yes"})


@pytest.mark.parametrize(("name", "nearest"), [
    ("xla", ""), ("eager", ""), ("torch.compile", " (did you mean 'torch-compile'?)"),
    ("Training-Compiler", " (did you mean 'training-compiler'?)"),
    ("torch_compile", " (did you mean 'torch-compile'?)"),
])
def test_fails_on_a_compiler_name_outside_the_vocabulary_listing_the_allowed_ones(name, nearest):
    with pytest.raises(ValueError, match=rf"^--compiler must be one of training-compiler, "
                                         rf"torch-compile, neuron-xla, none, got "
                                         rf"'{re.escape(name)}'{re.escape(nearest)}$"):
        contract.check_compiler(name, "--compiler")


# --- learning-rate scaling: one rule for the advisor and the runtime ---------------------

@pytest.mark.parametrize(("rule", "expected"), [
    ("linear", 7.5e-5), ("sqrt", 5e-5 * 1.5 ** 0.5), ("none", 5e-5)])
def test_learning_rate_scaling(rule, expected):
    assert contract.scaled_learning_rate(5e-5, 32, 48, rule) == pytest.approx(expected)


def test_fails_on_an_unknown_scaling_rule():
    with pytest.raises(ValueError, match=r"^lr_scaling must be one of linear, sqrt, none, "
                                         r"got 'cubic'$"):
        contract.scaled_learning_rate(5e-5, 32, 48, "cubic")


def test_a_run_set_up_as_the_advisor_recommends_trains_at_the_rate_it_recommends():
    # The use case: batch 32 -> 48 with the learning rate scaled.
    assessment = assess_workload(WORKLOADS["document-classification"])
    profile = assessment.profile
    config = parse_hyperparameters({
        contract.HP_BATCH_SIZE: assessment.recommended_batch_size,
        contract.HP_BASE_BATCH_SIZE: profile.batch_size,
        "learning_rate": profile.learning_rate})
    assert (profile.batch_size, config.batch_size) == (32, 48)
    assert config.scaled_learning_rate == assessment.recommended_learning_rate


# --- the benchmark's decision: written by the comparison, read by the pipeline ------------

def test_the_comparison_writes_the_decision_fields_the_pipeline_reads():
    def run(name: str, seconds: float) -> ArmRun:
        return ArmRun(name, contract.COMPILER_NONE, 32, 5e-5, 1000 / seconds, 0.9, seconds,
                      seconds)

    comparison = compare([run(contract.ARM_BASELINE, 100), run(contract.ARM_COMPILER, 70)],
                         Thresholds())
    assert tuple(comparison["decision"]) == contract.DECISION_FIELDS
    assert comparison["decision"]["verdict"] == contract.VERDICT_SHIP
    # The decision function's asset holds its module alone; its copy must match.
    assert decision_handler.FIELDS[:len(contract.DECISION_FIELDS)] == contract.DECISION_FIELDS
    assert decision_handler.VERDICTS == (contract.VERDICT_SHIP, contract.VERDICT_HOLD)


@pytest.mark.parametrize("text", ["plain", "a\nb\tc", 'quoted "x" & <y>', "ünïcödé ✓", "x" * 300,
                                  "speedup 1.42 quality_drop -0.1 s3://b/k=v+w@z"])
def test_the_metrics_functions_copies_match_what_the_constructs_write(text):
    # The model-metrics function's asset holds its module alone: its copies of the decision
    # fields it reports (the recorded decision's) and of the metadata value rule must match.
    assert set(metrics_handler.BENCHMARK_FIELDS) <= set(decision_handler.FIELDS)
    assert metrics_handler.metadata_text(text) == metadata_value(text)


@pytest.mark.skipif(not SHARED_SCHEMA_PATH.exists(),
                    reason="no ../shared/schemas beside this clone to compare the copy with")
def test_the_schema_copy_is_the_published_one():
    assert SCHEMA_PATH.read_bytes() == SHARED_SCHEMA_PATH.read_bytes()
