"""Parity with the SageMaker SDK v2, the oracle: accept exactly when it accepts.

The SDK runs fully offline here (see tests/sdk_oracle.py). For accepted cases the training
step's hyperparameters, AlgorithmSpecification and Debugger/Profiler settings must equal
what the SDK generates. Deliberate differences, excluded from the matrix and tested on their
own below:
- an image URI with Training Compiler: the SDK forbids it, the API path (ours) allows an
  image extended from a Training Compiler DLC;
- ``smdistributed`` without a compiler: this library does not offer SageMaker's
  data-parallel library (it rejects it and points to ``torch_distributed``).
"""

from __future__ import annotations

import itertools

import pytest

from compiled_training import Compiler, Distribution, Framework, Parameter
from compiled_training.definition import build_definition
from compiled_training.dlc import resolve_dlc
from compiled_training.job import TrainingJob
from compiled_training.rules import check
from compiled_training_runtime import contract
from tests.sdk_oracle import SDK_OUTPUT, SdkCase, sdk_training_arguments

ROLE = "arn:aws:iam::123456789012:role/training"
SOURCE = "s3://code-bucket/team/sourcedir.tar.gz"
REGION = "us-east-1"

# (estimator, framework version, Hugging Face PyTorch version, py_version)
FRAMEWORKS = [
    ("pytorch", "1.11.0", None, "py38"),
    ("pytorch", "1.12.0", None, "py38"),
    ("pytorch", "1.13.1", None, "py39"),
    ("pytorch", "2.1.0", None, "py310"),
    ("huggingface", "4.17.0", "1.10.2", "py38"),
    ("huggingface", "4.21.1", "1.11.0", "py38"),
    ("huggingface", "4.26.0", "1.13.1", "py39"),
]
INSTANCES = ["ml.p3.2xlarge", "ml.g5.48xlarge", "ml.p4de.24xlarge", "ml.m5.xlarge"]
DISTRIBUTIONS = [Distribution.NONE, Distribution.PYTORCHXLA, Distribution.TORCH_DISTRIBUTED,
                 Distribution.SMDISTRIBUTED_DATA_PARALLEL]


def _matrix() -> list[SdkCase]:
    cases = []
    for (estimator, version, pt, py), instance, distribution, count, compiled in itertools.product(
        FRAMEWORKS, INSTANCES, DISTRIBUTIONS, (1, 2), (True, False)
    ):
        if distribution is Distribution.SMDISTRIBUTED_DATA_PARALLEL and not compiled:
            continue  # deliberate difference, see the module docstring
        cases.append(SdkCase(estimator, version, pt, py, instance, count, distribution, compiled))
    return cases


MATRIX = _matrix()


def _framework(case: SdkCase) -> Framework:
    if case.estimator == "huggingface":
        return Framework.huggingface(case.version, pytorch_version=str(case.pytorch_version),
                                     py_version=case.py_version)
    return Framework.pytorch(case.version, py_version=case.py_version)


def _our_job(case: SdkCase) -> TrainingJob:
    framework = _framework(case)
    compiler = Compiler.training_compiler() if case.compiled else Compiler.none()
    try:
        image = resolve_dlc(framework, case.compiled, case.instance_type)
        image_uri = f"{image.account(REGION)}.dkr.ecr.{REGION}.amazonaws.com/{image.path}"
    except ValueError:
        image_uri = ""  # the rules report why
    return TrainingJob(
        pipeline_name="parity",
        framework=framework,
        compiler=compiler,
        distribution=case.distribution,
        instance_type=case.instance_type,
        instance_count=case.instance_count,
        volume_size_gib=30,
        max_runtime_seconds=86400,
        image_uri=image_uri,
        role_arn=ROLE,
        region=REGION,
        output_s3_uri=SDK_OUTPUT,
        entry_point="train.py",
        source_s3_uri=SOURCE,
        hyperparameters={"epochs": Parameter.integer("Epochs", 3), "learning_rate": 5e-5,
                         "model_family": "bert"},
        metric_definitions=contract.metric_definitions(),
        debugger=case.debugger,
        profiler=case.profiler,
    )


def test_matrix_is_large_and_covers_every_axis():
    assert len(MATRIX) >= 50
    assert {c.instance_type for c in MATRIX} == set(INSTANCES)
    assert {c.distribution for c in MATRIX} == set(DISTRIBUTIONS)
    assert {(c.estimator, c.version) for c in MATRIX} == {(f[0], f[1]) for f in FRAMEWORKS}
    assert {c.compiled for c in MATRIX} == {True, False}
    assert {c.instance_count for c in MATRIX} == {1, 2}


def test_matrix_has_both_verdicts():
    verdicts = {sdk_training_arguments(case, SOURCE) is not None for case in MATRIX}
    assert verdicts == {True, False}


@pytest.mark.parametrize("case", MATRIX, ids=str)
def test_accepts_exactly_when_the_sdk_accepts_and_builds_the_same_step(case: SdkCase):
    sdk = sdk_training_arguments(case, SOURCE)
    job = _our_job(case)
    errors = check(job).errors
    assert (not errors) == (sdk is not None), (
        f"SDK {'accepts' if sdk is not None else 'rejects'}, we say {errors}"
    )
    if sdk is None:
        return
    ours = build_definition(job)["Steps"][0]["Arguments"]
    assert ours["HyperParameters"] == sdk["HyperParameters"]
    assert ours["AlgorithmSpecification"] == sdk["AlgorithmSpecification"]
    assert ours.get("DebugHookConfig") == sdk.get("DebugHookConfig")
    assert ours.get("ProfilerConfig") == sdk.get("ProfilerConfig")


@pytest.mark.parametrize(("debugger", "profiler"), [(True, True), (True, False), (False, True)])
def test_debugger_and_profiler_settings_match_the_sdk(debugger, profiler):
    case = SdkCase("pytorch", "1.13.1", None, "py39", "ml.g5.48xlarge", 1,
                   Distribution.PYTORCHXLA, True, debugger=debugger, profiler=profiler)
    sdk = sdk_training_arguments(case, SOURCE)
    assert sdk is not None
    ours = build_definition(_our_job(case))["Steps"][0]["Arguments"]
    assert ours.get("DebugHookConfig") == sdk.get("DebugHookConfig")
    assert ours.get("ProfilerConfig") == sdk.get("ProfilerConfig")


def test_image_override_with_training_compiler_is_the_deliberate_difference():
    case = SdkCase("pytorch", "1.13.1", None, "py39", "ml.g5.48xlarge", 1,
                   Distribution.PYTORCHXLA, True)
    custom = "111122223333.dkr.ecr.us-east-1.amazonaws.com/team/bert-trcomp:abc123"
    assert sdk_training_arguments(case, SOURCE, image_uri=custom) is None
    job = _our_job(case)
    job = TrainingJob(**{**job.__dict__, "image_uri": custom})
    assert check(job).errors == []
    args = build_definition(job)["Steps"][0]["Arguments"]
    assert args["AlgorithmSpecification"]["TrainingImage"] == custom
    assert args["HyperParameters"]["sagemaker_training_compiler_enabled"] == "true"
