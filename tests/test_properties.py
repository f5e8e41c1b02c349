"""Property: any props either synthesize a template that passes the validators, or raise one
clear ValueError or TypeError, never another exception, never a jsii trace, never a broken
template or kernel.

Generated: valid and invalid prop sets for `TrainingPipeline`, `CompilerBenchmark` and
`RetrainingSchedule` (derandomized, so the counts in the README are reproducible). A valid
outcome's template goes through the pipeline-definition schema (envelope) and botocore's job
shapes (every step); every 50th also through cfn-lint, which is too slow for each.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from compiled_training import (
    Compiler,
    CompilerBenchmark,
    Distribution,
    Framework,
    InputChannel,
    Parameter,
    RetrainingSchedule,
    TrainingPipeline,
)
from compiled_training.values.job import ParameterType
from tests.helpers import (
    cfn_lint,
    definitions,
    new_stack,
    validate_envelope,
    validate_job_arguments,
)

CFN_LINT_EVERY = 50
# Where an error may come from: a construct (its path) or a factory the props build.
CLEAR_ERROR = re.compile(
    r"^((TrainingPipeline|CompilerBenchmark|RetrainingSchedule) Prop/\w+( \([\w-]+ arm\))?"
    r"|Parameter '.*'|InputChannel|Framework\.\w+|Compiler\.\w+)(: | has \d+ problems:\n  - )")
JSII_TRACES = ("@jsii", "at Kernel", "jsii.errors", "JavaScript", "Error: ")

FRAMEWORKS: dict[str, Callable[[], Framework]] = {
    "pytorch-1.12": lambda: Framework.pytorch("1.12.0"),
    "pytorch-1.13": lambda: Framework.pytorch("1.13.1"),
    "pytorch-2.1": lambda: Framework.pytorch("2.1.0"),
    "pytorch-2.3": lambda: Framework.pytorch("2.3.0"),
    "pytorch-2.9": lambda: Framework.pytorch("2.9.0"),
    "huggingface": lambda: Framework.huggingface("4.21.1", pytorch_version="1.11.0"),
    "xgboost": lambda: Framework.xgboost("1.7-1"),
}
COMPILERS: dict[str, Callable[[], Any]] = {
    "none": Compiler.none, "training-compiler": Compiler.training_compiler,
    "debug": lambda: Compiler.training_compiler(debug=True), "torch-compile": Compiler.torch_compile,
    "neuron-xla": lambda: Compiler.neuron_xla(precompile=True),
    "wrong-type": lambda: "training-compiler",
}
# Combinations that can be valid, drawn most of the time; any combination otherwise.
COHERENT = [("pytorch-1.13", "training-compiler", "ml.g5.48xlarge"),
            ("pytorch-1.12", "debug", "ml.p3.2xlarge"),
            ("huggingface", "training-compiler", "ml.g4dn.12xlarge"),
            ("pytorch-2.3", "torch-compile", "ml.g5.xlarge"),
            ("pytorch-2.1", "none", "ml.p4d.24xlarge"),
            ("xgboost", "none", "ml.m5.xlarge"),
            ("pytorch-2.9", "neuron-xla", "ml.trn1.32xlarge")]
INSTANCE_TYPES = ["ml.g5.48xlarge", "ml.g5.xlarge", "ml.p3.2xlarge", "ml.p4de.24xlarge",
                  "ml.m6i.12xlarge", "ml.trn1.32xlarge", "ml.trn1.2xlarge",
                  "ml.trn2.48xlarge", "ml.g5.mega", "local", "", 5, None]


def valid_or(valid: st.SearchStrategy[Any], *invalid: Any) -> st.SearchStrategy[Any]:
    """A valid value, or one time in 20 one of the invalid ones (a prop set has about 15
    fields: about half of the sets come out valid)."""
    return st.integers(0, 19).flatmap(
        lambda draw: valid if draw < 19 else st.sampled_from(invalid))


# --- pieces ---------------------------------------------------------------------------------

text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)
durations = valid_or(st.one_of(st.none(), st.integers(1, 48).map(cdk.Duration.hours),
                               st.just(cdk.Duration.days(28))),
                     cdk.Duration.days(29), cdk.Duration.millis(1500), cdk.Duration.seconds(0),
                     3600)
# A parameter spec (name, type, default): consistent, or one of the ways it goes wrong.
parameter_specs = valid_or(
    st.one_of(
        st.tuples(st.just("Epochs"), st.just(ParameterType.INTEGER), st.integers(-5, 10**6)),
        st.tuples(st.just("Lr"), st.just(ParameterType.FLOAT), st.floats(-1e9, 1e9)),
        st.tuples(st.just("Debug"), st.just(ParameterType.BOOLEAN), st.booleans()),
        st.tuples(st.just("Note"), st.just(ParameterType.STRING), text)),
    ("Bad Name!", ParameterType.INTEGER, "three"), ("Lr", ParameterType.FLOAT, float("nan")),
    ("Lr", "Float", 0.1), ("", ParameterType.STRING, "x"), ("Big", ParameterType.INTEGER, 2**60),
    ("Epochs", ParameterType.INTEGER, True), ("Note", ParameterType.STRING, "x" * 2600))
hyperparameter_values = st.one_of(st.integers(-10, 10**6), st.floats(width=32, allow_nan=False,
                                                                     allow_infinity=False),
                                  st.booleans(), text, parameter_specs)
hyperparameters = valid_or(
    st.one_of(st.none(), st.dictionaries(st.text(alphabet="abcdefghij_", min_size=1,
                                                 max_size=12),
                                         hyperparameter_values, max_size=4)),
    {f"h{i}": i for i in range(98)}, "lr=0.1", {"text": "é" * 500}, {"notes": "x" * 2499},
    {"lr": float("nan")}, {"seed": 10**3000}, {"layers": [1, 2]}, {"none": None},
    {"sagemaker_program": "x.py"}, {"k" * 257: 1}, {3: 1})
channel_specs = valid_or(
    st.lists(st.tuples(st.sampled_from(["train", "validation", "test"]),
                       st.sampled_from(["s3://prop-data/train/", "s3://prop-data/v/"]),
                       st.booleans()), max_size=3, unique_by=lambda spec: spec[0]),
    [("train", "s3://prop-data/a/", False), ("train", "s3://prop-data/b/", False)],
    [("bad name", "s3://prop-data/t/", False)], [("x" * 65, "s3://prop-data/t/", False)],
    [("train", "/data/train", False)], [("train", "s3://prop-data/" + "a" * 1010, True)],
    [("train", "s3://x", False)], [("train", 42, False)], [(3, "s3://prop-data/t/", False)],
    [(f"c{i}", "s3://prop-data/c/", False) for i in range(21)], "s3://prop-data/train/")


def build_channels(specs: Any) -> Any:
    """Channels from (name, uri, as a parameter) specs; a wrong spec stays as drawn."""
    if not isinstance(specs, list):
        return specs
    return [InputChannel(name, Parameter.string(f"Uri{i}", uri) if as_parameter else uri)
            for i, (name, uri, as_parameter) in enumerate(specs)]


def build_hyperparameters(values: Any) -> Any:
    """Hyperparameters with each (name, type, default) spec made a `Parameter`."""
    if not isinstance(values, dict):
        return values
    return {k: Parameter(*v) if isinstance(v, tuple) else v for k, v in values.items()}


pipeline_props = st.fixed_dictionaries({
    "coherent": st.integers(0, 5).flatmap(lambda draw: st.sampled_from(COHERENT) if draw else (
        st.tuples(st.sampled_from(list(FRAMEWORKS)), st.sampled_from(list(COMPILERS)),
                  st.sampled_from(INSTANCE_TYPES)))),
    "instance_count": valid_or(st.one_of(st.none(), st.integers(1, 4)),
                               0, -1, 2**31, 10**10, 2.0, True, "2"),
    "volume_size_gib": valid_or(st.one_of(st.none(), st.integers(1, 500)),
                                0, 2**31, 10**10, 1.5),
    "max_runtime": durations,
    "hyperparameters": hyperparameters,
    "channels": channel_specs,
    "description": valid_or(st.one_of(st.none(), text),
                            "x" * 3072, "x" * 3073, "two\nlines", 5),
    "pipeline_name": valid_or(st.one_of(st.none(), st.sampled_from(["bert", "Bert-2"])),
                              "bert_training", "a" * 257, ""),
    "distribution": valid_or(st.none(), *Distribution, "pytorchxla"),
    "spot": valid_or(st.one_of(st.none(), st.booleans()), "no", 1),
    "max_wait": valid_or(st.none(), cdk.Duration.hours(1), cdk.Duration.days(60)),
    "debugger": valid_or(st.one_of(st.none(), st.booleans()), "no", "false", 0),
    "profiler": valid_or(st.one_of(st.none(), st.booleans()), "yes"),
    "max_attempts": valid_or(st.one_of(st.none(), st.integers(1, 20)), 0, 21, 3.0),
    "network_isolation": valid_or(st.one_of(st.none(), st.booleans()), "true"),
    "compile_cache": valid_or(st.one_of(st.none(), st.booleans()), "off", 1),
})


def training_pipeline(stack: cdk.Stack, construct_id: str, source_dir: Any,
                      props: dict[str, Any]) -> TrainingPipeline:
    framework, compiler, instance_type = props["coherent"]
    framework = FRAMEWORKS[framework]()
    script = framework.runs_script
    rest = {k: v for k, v in props.items() if k != "coherent"}
    rest["hyperparameters"] = build_hyperparameters(rest["hyperparameters"])
    rest["channels"] = build_channels(rest["channels"])
    if not script and isinstance(rest["channels"], list):
        rest["channels"] = [InputChannel(c.name, c.s3_uri, content_type="text/csv")
                            for c in rest["channels"]]
    return TrainingPipeline(
        stack, construct_id, framework=framework, compiler=COMPILERS[compiler](),
        instance_type=instance_type, source_dir=source_dir if script else None,
        entry_point="train.py" if script else None, **rest)


benchmark_props = st.fixed_dictionaries({
    "coherent": valid_or(st.sampled_from([("pytorch-1.13", "training-compiler", "ml.g5.48xlarge"),
                                          ("pytorch-1.12", "debug", "ml.p3.16xlarge"),
                                          ("pytorch-2.3", "torch-compile", "ml.g5.12xlarge")]),
                         # No Hugging Face image without the compiler for the baseline arm.
                         ("huggingface", "training-compiler", "ml.p3.2xlarge"),
                         ("pytorch-1.13", "none", "ml.g5.xlarge"),
                         ("xgboost", "none", "ml.m5.xlarge"),
                         ("pytorch-2.3", "wrong-type", "ml.g5.xlarge")),
    "instance_count": valid_or(st.one_of(st.none(), st.integers(1, 2)), 0, 2**31, "1"),
    "batch_size": valid_or(st.sampled_from([8, 32]), 0.5, None),
    "large_batch_size": valid_or(st.one_of(st.none(), st.sampled_from([48, 64])), 16, 48.0),
    "speedup_threshold": valid_or(st.one_of(st.none(), st.floats(0, 10)),
                                  float("nan"), -1.0, 11.0, "20%"),
    "quality_tolerance": valid_or(st.one_of(st.none(), st.floats(0, 100)), float("inf"), 101),
    "quality_metric": valid_or(st.sampled_from([None, "validation_accuracy", "validation_loss"]),
                               "accuracy", 1),
    "validation_channel": valid_or(st.just(True), False),
    "comparison_instance_type": valid_or(st.sampled_from([None, "ml.m5.large", "ml.c5.xlarge"]),
                                         "ml.g5.mega", "local"),
    "decision_parameter_name": valid_or(st.sampled_from([None, "/team/bench/decision"]),
                                        "bad name!", "/" + "a" * 2100, 3),
    "max_runtime": durations,
    "description": valid_or(st.one_of(st.none(), text), "x" * 3073, "a\rb"),
    "spot": valid_or(st.one_of(st.none(), st.booleans()), "false"),
})


def compiler_benchmark(stack: cdk.Stack, construct_id: str, source_dir: Any,
                       props: dict[str, Any]) -> CompilerBenchmark:
    framework, compiler, instance_type = props["coherent"]
    channels = [InputChannel("train", "s3://prop-data/train/")]
    if props["validation_channel"]:
        channels.append(InputChannel("validation", "s3://prop-data/validation/"))
    rest = {k: v for k, v in props.items()
            if k not in ("coherent", "batch_size", "validation_channel")}
    return CompilerBenchmark(
        stack, construct_id, framework=FRAMEWORKS[framework](),
        compiler=COMPILERS[compiler](), instance_type=instance_type, source_dir=source_dir,
        entry_point="train.py", channels=channels,
        hyperparameters={"batch_size": props["batch_size"], "lr": Parameter.float("Lr", 0.01)},
        **rest)


NOW = datetime(2030, 1, 1, tzinfo=timezone.utc)
schedule_props = st.fixed_dictionaries({
    "team": valid_or(st.sampled_from(["nlp", "team-2_a"]), "", "bad team", "x" * 41, 5),
    "expression": valid_or(st.sampled_from(["rate(7 days)", "cron(0 2 ? * MON *)",
                                            "at(2030-06-01T02:00:00)"]),
                           "cron(0 2 * * * *)", "rate(0 days)", "daily", "rate(1 day) ", None),
    "time_zone": valid_or(st.sampled_from([None, cdk.TimeZone.EUROPE_BERLIN]), "Europe/Berlin"),
    "flexible_window": valid_or(st.sampled_from([None, cdk.Duration.minutes(15)]),
                                cdk.Duration.seconds(90), cdk.Duration.hours(25),
                                cdk.Duration.minutes(0), 15),
    "start_date": valid_or(st.sampled_from([None, NOW]), datetime(2030, 1, 1), "2030-01-01"),
    "end_date": valid_or(st.sampled_from([None, NOW + timedelta(days=30)]),
                         NOW - timedelta(days=1), datetime(2031, 1, 1)),
    "enabled": valid_or(st.one_of(st.none(), st.booleans()), "false", 0),
    "parameters": valid_or(
        st.one_of(st.none(), st.fixed_dictionaries({"Epochs": st.integers(1, 100)}),
                  st.fixed_dictionaries({"Lr": st.floats(1e-6, 1.0)})),
        {"Epochs": "three"}, {"Epochs": True}, {"Lr": float("nan")}, {"Unknown": 1},
        {"Epochs": 2.5}, {f"P{i}": 1 for i in range(201)}, ["Epochs", 3]),
    "retry_attempts": valid_or(st.one_of(st.none(), st.integers(0, 185)), -1, 186, 1.0),
    "max_event_age": valid_or(st.sampled_from([None, cdk.Duration.hours(6)]),
                              cdk.Duration.millis(61500), 3600),
    "notify_on_success": valid_or(st.one_of(st.none(), st.booleans()), "yes"),
})


def retraining_schedule(stack: cdk.Stack, construct_id: str, source_dir: Any,
                        props: dict[str, Any]) -> RetrainingSchedule:
    pipeline = TrainingPipeline(
        stack, f"{construct_id}Pipeline", framework=Framework.pytorch("1.13.1"),
        compiler=Compiler.training_compiler(), instance_type="ml.g5.48xlarge",
        source_dir=source_dir, entry_point="train.py",
        hyperparameters={"epochs": Parameter.integer("Epochs", 3),
                         "lr": Parameter.float("Lr", 0.001)},
        channels=[InputChannel("train", "s3://prop-data/train/")])
    return RetrainingSchedule(stack, construct_id, pipeline=pipeline, **props)


# --- the property ----------------------------------------------------------------------------

def outcome(build: Callable[..., Any], source_dir: Any, props: dict[str, Any],
            valid_count: int) -> str:
    """Builds one construct in a new app: 'valid' once its template passes the validators,
    else the exception type, which must be a clear ValueError or TypeError."""
    stack = new_stack("Prop")
    try:
        build(stack, "Job", source_dir, props)
    except (ValueError, TypeError) as error:
        message = str(error)
        assert type(error) in (ValueError, TypeError), repr(error)
        assert CLEAR_ERROR.match(message), message
        assert not any(trace in message for trace in JSII_TRACES), message
        return type(error).__name__
    template = Template.from_stack(stack).to_json()
    for definition in definitions(template):
        validate_envelope(definition)
        validate_job_arguments(definition)
    if valid_count % CFN_LINT_EVERY == 0:
        path = stack.node.root.synth().get_stack_by_name("Prop").template_full_path
        assert cfn_lint(path) == [], props
    return "valid"


def run_property(strategy: st.SearchStrategy[dict[str, Any]], build: Callable[..., Any],
                 source_dir: Any, examples: int) -> Counter[str]:
    outcomes: Counter[str] = Counter()

    @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(props=strategy)
    def check(props: dict[str, Any]) -> None:
        outcomes[outcome(build, source_dir, props, outcomes["valid"])] += 1

    check()
    print(f"{build.__name__}: {dict(outcomes)}")  # the README's counts (pytest -s)
    return outcomes


def assert_a_normal_synth_still_works(source_dir: Any) -> None:
    stack = new_stack("After")
    TrainingPipeline(stack, "Bert", framework=Framework.pytorch("1.13.1"),
                     compiler=Compiler.training_compiler(), instance_type="ml.g5.48xlarge",
                     source_dir=source_dir, entry_point="train.py")
    (definition,) = definitions(Template.from_stack(stack).to_json())
    validate_job_arguments(definition)


@pytest.mark.parametrize(("strategy", "build", "examples", "least_valid"), [
    (pipeline_props, training_pipeline, 600, 150),
    (benchmark_props, compiler_benchmark, 250, 50),
    (schedule_props, retraining_schedule, 350, 100),
])
def test_props_give_a_valid_template_or_one_clear_error(source_dir, strategy, build, examples,
                                                        least_valid):
    outcomes = run_property(strategy, build, source_dir, examples)
    assert sum(outcomes.values()) >= examples
    assert outcomes["valid"] >= least_valid and outcomes["valid"] < examples, outcomes
    assert_a_normal_synth_still_works(source_dir)

