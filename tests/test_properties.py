"""Property: any props either synthesize a template that passes the validators, or raise one
clear ValueError, never a jsii stack trace and never a broken template."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk.assertions import Template
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from compiled_training import Compiler, Distribution, Framework, InputChannel, TrainingPipeline
from tests.helpers import definitions, validate_envelope, validate_job_arguments

frameworks = st.sampled_from([
    Framework.pytorch("1.12.0"), Framework.pytorch("1.13.1"), Framework.pytorch("2.1.0"),
    Framework.pytorch("2.3.0"), Framework.huggingface("4.21.1", pytorch_version="1.11.0"),
    Framework.xgboost("1.7-1"),
])
compilers = st.sampled_from([Compiler.none(), Compiler.training_compiler(),
                             Compiler.training_compiler(debug=True), Compiler.torch_compile()])
instance_types = st.one_of(
    st.sampled_from(["ml.g5.48xlarge", "ml.g5.xlarge", "ml.p3.2xlarge"]),
    st.sampled_from(["ml.p4de.24xlarge", "ml.m6i.12xlarge", "ml.c5.xlarge", "ml.g5.mega", "local"]),
)
hyperparameter_names = st.one_of(st.text(alphabet="abcdefghij_", min_size=1, max_size=12),
                                 st.sampled_from(["sagemaker_program", "x" * 257]))
hyperparameter_values = st.one_of(st.integers(-10, 10**6), st.floats(allow_nan=False, width=32),
                                  st.booleans(), st.text(max_size=30))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(
    framework=frameworks,
    compiler=compilers,
    instance_type=instance_types,
    instance_count=st.one_of(st.integers(1, 4), st.integers(-1, 9)),
    distribution=st.one_of(st.none(), st.sampled_from(list(Distribution))),
    hyperparameters=st.dictionaries(hyperparameter_names, hyperparameter_values, max_size=4),
    channel_names=st.one_of(st.lists(st.sampled_from(["train", "validation"]), max_size=2,
                                    unique=True),
                           st.lists(st.sampled_from(["train", "bad name"]), max_size=3)),
    spot=st.booleans(),
)
def test_props_give_a_valid_template_or_one_clear_value_error(
    source_dir, framework, compiler, instance_type, instance_count, distribution,
    hyperparameters, channel_names, spot,
):
    stack = cdk.Stack(cdk.App(), "Prop", env=cdk.Environment(region="us-east-1"))
    script = framework.runs_script
    try:
        TrainingPipeline(
            stack, "Job", framework=framework, compiler=compiler, instance_type=instance_type,
            instance_count=instance_count, distribution=distribution,
            hyperparameters=hyperparameters,
            channels=[InputChannel(n, f"s3://prop-data/{i}/") for i, n in enumerate(channel_names)],
            source_dir=source_dir if script else None, entry_point="train.py" if script else None,
            spot=spot,
        )
    except ValueError as error:
        assert str(error).startswith("TrainingPipeline Prop/Job")
        event("rejected")
        return
    event("accepted")
    (definition,) = definitions(Template.from_stack(stack).to_json())
    validate_envelope(definition)
    validate_job_arguments(definition)
