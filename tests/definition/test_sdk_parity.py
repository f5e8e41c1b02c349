"""Parity with the SageMaker SDK v2, the oracle: accept exactly when it accepts.

The SDK runs fully offline here (see tests/internal/sdk_oracle.py). For accepted cases the training
step's hyperparameters, AlgorithmSpecification (the image included) and Debugger/Profiler
settings must equal what the SDK generates.

The matrix: every framework and version spelling (short and full aliases) x every Training
Compiler GPU family (one- and multi-GPU sizes) x instance count x distribution (omitted,
none, pytorchxla, torch_distributed, smdistributed), compiled; the same spellings eager on a
GPU and a CPU instance; and the instances Training Compiler does not take (p4de, g6, CPU,
Trainium, AMD g4ad) for each release, compiled and eager.

Where this library deliberately differs from the SDK, the case is not skipped: it is named in
`DIFFERENCES` and held to what the library does instead. Also deliberate, tested on their own
below: an image URI with Training Compiler (the SDK forbids it, the API path allows an image
extended from a Training Compiler DLC).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

import pytest

from compiled_training import Compiler, Distribution, Framework, Parameter
from compiled_training.catalog.dlc import (
    launches_torchrun,
    resolve_dlc,
    sdk_torch_distributed_versions,
)
from compiled_training.catalog.instances import accelerator, gpus_per_instance
from compiled_training.definition.launchers import default_distribution
from compiled_training.definition.training import build_definition
from compiled_training.definition.validation import check, known_instance_type
from compiled_training.values.job import TrainingJob
from compiled_training_runtime import contract
from tests.definition.sdk_oracle import SDK_OUTPUT, SdkCase, sdk_training_arguments
from tests.helpers import sdk_v2_config

ROLE = "arn:aws:iam::123456789012:role/training"
SOURCE = "s3://code-bucket/team/sourcedir.tar.gz"
REGION = "us-east-1"
XLA = "sagemaker_pytorch_xla_multi_worker_enabled"

# (estimator, framework version, Hugging Face PyTorch version, py_version): each release in
# its short and its full spelling.
FRAMEWORKS = [
    ("pytorch", "1.11", None, "py38"), ("pytorch", "1.11.0", None, "py38"),
    ("pytorch", "1.12", None, "py38"), ("pytorch", "1.12.0", None, "py38"),
    ("pytorch", "1.13", None, "py39"), ("pytorch", "1.13.1", None, "py39"),
    ("pytorch", "2.1", None, "py310"), ("pytorch", "2.1.0", None, "py310"),
    # An image the SDK's torch_distributed list leaves out (it names 2.4.1, which has none).
    ("pytorch", "2.4", None, "py311"), ("pytorch", "2.4.0", None, "py311"),
    ("huggingface", "4.11", "1.9", "py38"), ("huggingface", "4.11.0", "1.9.0", "py38"),
    ("huggingface", "4.17", "1.10", "py38"), ("huggingface", "4.17.0", "1.10.2", "py38"),
    ("huggingface", "4.21", "1.11", "py38"), ("huggingface", "4.21.1", "1.11.0", "py38"),
    ("huggingface", "4.26", "1.13", "py39"), ("huggingface", "4.26.0", "1.13.1", "py39"),
    # A short and a full version mixed: the SDK refuses it (no such image is published).
    ("huggingface", "4.11.0", "1.9", "py38"), ("huggingface", "4.21", "1.11.0", "py38"),
]
FULL_SPELLINGS = [f for f in FRAMEWORKS if f[1].count(".") == 2 and (f[2] or "0.0.0").count(".") == 2]
# Every Training Compiler family, with a one-GPU and a multi-GPU size where both exist.
COMPILER_INSTANCES = ["ml.p3.2xlarge", "ml.p3.16xlarge", "ml.p3dn.24xlarge", "ml.g4dn.xlarge",
                      "ml.g4dn.12xlarge", "ml.p4d.24xlarge", "ml.g5.xlarge", "ml.g5.48xlarge"]
EAGER_INSTANCES = ["ml.g5.48xlarge", "ml.m5.xlarge"]
# GPU families Training Compiler never supported, a CPU, Trainium, AMD's GPU (not a
# SageMaker training instance at all).
OTHER_INSTANCES = ["ml.p4de.24xlarge", "ml.g6.xlarge", "ml.m5.xlarge", "ml.trn1.32xlarge",
                   "ml.g4ad.4xlarge"]
DISTRIBUTIONS: list[Distribution | None] = [None, *Distribution]  # None: omitted
COUNTS = (1, 2)


def _cases(frameworks: list[tuple[str, str, str | None, str]], instances: list[str],
           compiled: tuple[bool, ...]) -> list[SdkCase]:
    return [SdkCase(estimator, version, pt, py, instance, count, distribution, is_compiled)
            for (estimator, version, pt, py), instance, count, distribution, is_compiled
            in itertools.product(frameworks, instances, COUNTS, DISTRIBUTIONS, compiled)]


MATRIX = list(dict.fromkeys(
    _cases(FRAMEWORKS, COMPILER_INSTANCES, (True,))
    + _cases(FRAMEWORKS, EAGER_INSTANCES, (False,))
    + _cases(FULL_SPELLINGS, OTHER_INSTANCES, (True, False))))


def _framework(case: SdkCase) -> Framework:
    if case.estimator == "huggingface":
        return Framework.huggingface(case.version, pytorch_version=str(case.pytorch_version),
                                     py_version=case.py_version)
    return Framework.pytorch(case.version, py_version=case.py_version)


def _compiler(case: SdkCase) -> Compiler:
    return Compiler.training_compiler() if case.compiled else Compiler.none()


def _our_distribution(case: SdkCase) -> Distribution:
    """What `TrainingPipeline` runs when ``distribution`` is omitted, else the case's."""
    if case.distribution is not None:
        return case.distribution
    return default_distribution(_compiler(case), _framework(case), case.instance_type,
                                case.instance_count)


def _image_uri(case: SdkCase) -> str:
    """The DLC this library resolves for the case, or "" where it has none."""
    try:
        image = resolve_dlc(_framework(case), case.compiled, case.instance_type)
    except ValueError:
        return ""  # the rules report why
    return f"{image.account(REGION)}.dkr.ecr.{REGION}.amazonaws.com/{image.path}"


def _our_job(case: SdkCase) -> TrainingJob:
    return TrainingJob(
        pipeline_name="parity",
        framework=_framework(case),
        compiler=_compiler(case),
        distribution=_our_distribution(case),
        instance_type=case.instance_type,
        instance_count=case.instance_count,
        volume_size_gib=30,
        max_runtime_seconds=86400,
        image_uri=_image_uri(case),
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


def _our_errors(case: SdkCase) -> list[str]:
    """Every problem this library reports for the case (a framework it refuses to build
    included), or none."""
    try:
        job = _our_job(case)
    except ValueError as refused:
        return [str(refused)]
    return [e.message for e in check(job).errors]


@cache
def _sdk(case: SdkCase) -> dict[str, Any] | None:
    # An omitted distribution and "none" are the same call to the SDK: ask it once.
    if case.distribution is Distribution.NONE:
        case = replace(case, distribution=None)
    return sdk_training_arguments(case, SOURCE)


def _arguments(case: SdkCase) -> dict[str, Any]:
    return build_definition(_our_job(case))["Steps"][0]["Arguments"]


# --- where this library deliberately differs from the SDK --------------------------------

@dataclass(frozen=True)
class Difference:
    """A deliberate difference: which cases, why, and what this library does instead."""

    name: str
    why: str
    applies: Callable[[SdkCase], bool]
    refused_with: str | None = None
    """The error (a regex) this library gives where the SDK accepts; None: it accepts."""
    oracle: Callable[[SdkCase], dict[str, Any] | None] | None = None
    """Where this library accepts what the SDK refuses: the step the SDK builds when asked
    the way its own rules allow, which this library's must equal."""


def _defaults_to_pytorchxla(case: SdkCase) -> bool:
    if case.distribution is not None:
        return False
    try:
        return _our_distribution(case) is Distribution.PYTORCHXLA
    except ValueError:  # a framework this library refuses to build: no default at all
        return False


def _torchrun_past_the_sdks_list(case: SdkCase) -> bool:
    torch = str(case.pytorch_version or case.version)
    return (case.distribution is Distribution.TORCH_DISTRIBUTED and not case.compiled
            and accelerator(case.instance_type) == "nvidia" and bool(_image_uri(case))
            and launches_torchrun(torch) and torch not in sdk_torch_distributed_versions())


DIFFERENCES = [
    Difference(
        "torchrun on every PyTorch DLC from 1.13.1",
        "The SDK launches torch_distributed only for the versions it lists (full spellings, "
        "to 2.8.0: not '2.1' nor 2.4.0, which have images), and skips that list when an image "
        "is given. What launches torchrun is the images' toolkit (sagemaker-pytorch-training's "
        "TorchDistributedRunner, in every PyTorch training DLC from 1.13.1: catalog/dlc.py "
        "cites it), so this library accepts every such image and sends what the SDK sends "
        "given that image.",
        _torchrun_past_the_sdks_list,
        oracle=lambda case: sdk_training_arguments(case, SOURCE, image_uri=_image_uri(case))),
    Difference(
        "pytorchxla by default",
        "A Training Compiler job on more than one GPU (several instances, or one multi-GPU "
        "instance) with no distribution: the SDK runs one process on one GPU of each "
        "instance; this library starts the compiler's own launcher on every GPU. The step "
        "is the SDK's plus the pytorchxla hyperparameter.",
        _defaults_to_pytorchxla),
    Difference(
        "Trainium",
        "The SDK resolves a Neuron image for any PyTorch version on Trainium (its "
        "pytorch-training-neuron 1.11.0 even for PyTorch 2.1) and runs it eager; on Trainium "
        "this library runs one of the Neuron paths on the PyTorch NeuronX images "
        "(test_a_neuron_xla_job_on_trainium_sends_what_the_sdk_sends_given_the_image).",
        lambda case: accelerator(case.instance_type) == "trainium",
        refused_with=r"runs compiled graphs only: use Compiler.neuron_xla\(\)"),
    Difference(
        "not a training instance type",
        "The SDK does not check instance types; CreateTrainingJob accepts only botocore's "
        "TrainingInstanceType values, so this library refuses the others at synth.",
        lambda case: not known_instance_type(case.instance_type),
        refused_with=r"instance_type must be a SageMaker training instance type"),
    Difference(
        "smdistributed without a compiler",
        "This library does not offer SageMaker's data-parallel library; it points to "
        "torch_distributed instead.",
        lambda case: case.distribution is Distribution.SMDISTRIBUTED_DATA_PARALLEL
        and not case.compiled,
        refused_with=r"'smdistributed' is not supported by compiled-training; use "
                     r"Distribution.TORCH_DISTRIBUTED"),
]


def _difference(case: SdkCase) -> Difference | None:
    return next((d for d in DIFFERENCES if d.applies(case)), None)


# --- the matrix -------------------------------------------------------------------------

def test_matrix_covers_every_axis():
    assert len(MATRIX) >= 1500
    assert {c.instance_type for c in MATRIX} == {
        *COMPILER_INSTANCES, *EAGER_INSTANCES, *OTHER_INSTANCES}
    assert {c.distribution for c in MATRIX} == set(DISTRIBUTIONS)
    assert {(c.estimator, c.version, c.pytorch_version) for c in MATRIX} == {
        f[:3] for f in FRAMEWORKS}
    assert {c.compiled for c in MATRIX} == {True, False}
    assert {c.instance_count for c in MATRIX} == set(COUNTS)
    assert {gpus_per_instance(i) > 1 for i in COMPILER_INSTANCES} == {True, False}


def test_matrix_covers_every_training_compiler_spelling_the_sdk_knows():
    pytorch = sdk_v2_config("pytorch-training-compiler")
    spellings = {("pytorch", v, None) for v in [*pytorch["versions"], *pytorch["version_aliases"]]}
    huggingface = sdk_v2_config("huggingface-training-compiler")
    for transformers, entry in huggingface["versions"].items():
        shorts = [s for s, full in huggingface["version_aliases"].items() if full == transformers]
        for base, full_base in (entry.get("version_aliases") or {}).items():
            if base.startswith("pytorch"):
                spellings.add(("huggingface", transformers, full_base[len("pytorch"):]))
                spellings.update(("huggingface", s, base[len("pytorch"):]) for s in shorts)
    assert spellings <= {f[:3] for f in FRAMEWORKS}


def test_matrix_has_both_verdicts_and_every_difference_is_real():
    assert {_sdk(case) is not None for case in MATRIX} == {True, False}
    for difference in DIFFERENCES:
        # Each named difference changes the outcome of at least one case: the list is not
        # stale (the SDK accepts what this library refuses or builds otherwise, or refuses
        # what the oracle shows it builds when asked its own way).
        assert any(difference.applies(c) and (_sdk(c) is None) == (difference.oracle is not None)
                   for c in MATRIX), difference.name


@pytest.mark.parametrize("case", MATRIX, ids=str)
def test_accepts_exactly_when_the_sdk_accepts_and_builds_the_same_step(case: SdkCase):
    errors = _our_errors(case)
    difference = _difference(case)
    sdk = difference.oracle(case) if difference and difference.oracle else _sdk(case)
    if difference is not None and difference.refused_with and sdk is not None:
        assert any(re.search(difference.refused_with, e) for e in errors), (
            f"{difference.name}: expected a refusal matching {difference.refused_with!r}, "
            f"got {errors}")
        return
    assert (not errors) == (sdk is not None), (
        f"SDK {'accepts' if sdk is not None else 'rejects'}, we say {errors}"
    )
    if sdk is None:
        return
    ours = _arguments(case)
    expected_hyperparameters = dict(sdk["HyperParameters"])
    if difference is not None and difference.oracle is None:
        # pytorchxla by default: the SDK's step plus the launcher
        assert XLA not in expected_hyperparameters
        expected_hyperparameters[XLA] = "true"
    assert ours["HyperParameters"] == expected_hyperparameters
    assert ours["AlgorithmSpecification"] == sdk["AlgorithmSpecification"]
    assert ours.get("DebugHookConfig") == sdk.get("DebugHookConfig")
    assert ours.get("ProfilerConfig") == sdk.get("ProfilerConfig")


# --- single cases ------------------------------------------------------------------------

@pytest.mark.parametrize(("debugger", "profiler"), [(True, True), (True, False), (False, True)])
def test_debugger_and_profiler_settings_match_the_sdk(debugger, profiler):
    case = SdkCase("pytorch", "1.13.1", None, "py39", "ml.g5.48xlarge", 1,
                   Distribution.PYTORCHXLA, True, debugger=debugger, profiler=profiler)
    sdk = sdk_training_arguments(case, SOURCE)
    assert sdk is not None
    ours = _arguments(case)
    assert ours.get("DebugHookConfig") == sdk.get("DebugHookConfig")
    assert ours.get("ProfilerConfig") == sdk.get("ProfilerConfig")


def test_image_override_with_training_compiler_is_the_deliberate_difference():
    case = SdkCase("pytorch", "1.13.1", None, "py39", "ml.g5.48xlarge", 1,
                   Distribution.PYTORCHXLA, True)
    custom = "111122223333.dkr.ecr.us-east-1.amazonaws.com/team/bert-trcomp:abc123"
    assert sdk_training_arguments(case, SOURCE, image_uri=custom) is None
    job = replace(_our_job(case), image_uri=custom)
    assert check(job).errors == []
    args = build_definition(job)["Steps"][0]["Arguments"]
    assert args["AlgorithmSpecification"]["TrainingImage"] == custom
    assert args["HyperParameters"]["sagemaker_training_compiler_enabled"] == "true"


def test_a_neuron_xla_job_on_trainium_sends_what_the_sdk_sends_given_the_image():
    """Neither SDK resolves a PyTorch NeuronX image (v2 refuses torch_distributed on 2.x
    Trainium without one), so users give it as image_uri: with it, the SDK's request carries
    the same launcher, instance type, program, submit directory and environment as ours."""
    case = SdkCase("pytorch", "2.9.0", None, "py312", "ml.trn1.32xlarge", 2,
                   Distribution.TORCH_DISTRIBUTED, False)
    job = replace(_our_job(case), compiler=Compiler.neuron_xla(),
                  compile_cache_s3_uri="s3://output-bucket/parity/neuron-compile-cache/")
    assert check(job).errors == []
    ours = build_definition(job)["Steps"][0]["Arguments"]
    image = ours["AlgorithmSpecification"]["TrainingImage"]
    assert "/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.30.0-ubuntu24.04" in image
    assert sdk_training_arguments(case, SOURCE) is None  # no image of its own
    sdk = sdk_training_arguments(case, SOURCE, image_uri=image,
                                 environment=ours["Environment"],
                                 hyperparameters=Compiler.neuron_xla().hyperparameters())
    assert sdk is not None
    assert ours["HyperParameters"] == sdk["HyperParameters"]
    assert {k for k in sdk["HyperParameters"] if k.startswith("sagemaker_")} >= {
        "sagemaker_torch_distributed_enabled", "sagemaker_instance_type", "sagemaker_program",
        "sagemaker_submit_directory"}
    assert ours["Environment"] == sdk["Environment"]
    # What Neuron's documents prescribe, written out here (the SDK only carries it): the
    # compiler flag for transformers, the S3 cache, and EFA for the two nodes.
    assert ours["Environment"] == {
        "COMPILED_TRAINING_NEURON_XLA": "true",  # the library's own switch, no argument
        "FI_EFA_USE_DEVICE_RDMA": "1", "FI_PROVIDER": "efa",
        "NEURON_CC_FLAGS": "--model-type=transformer",
        "NEURON_COMPILE_CACHE_URL": "s3://output-bucket/parity/neuron-compile-cache/"}
    assert ours["AlgorithmSpecification"] == sdk["AlgorithmSpecification"]
    assert ours["ResourceConfig"]["InstanceType"] == sdk["ResourceConfig"]["InstanceType"]


@pytest.mark.parametrize(("version", "py_version"), [("2.9.0", "py312"), ("2.10.0", "py313")])
def test_torchrun_past_the_sdks_list_sends_what_the_sdk_sends_given_the_image(version, py_version):
    """PyTorch 2.9 and 2.10: images neither SDK v2 (frozen at 2.8.0) resolves nor lists for
    torch_distributed; given the image, as its own rule allows, it builds the same step."""
    case = SdkCase("pytorch", version, None, py_version, "ml.g5.12xlarge", 2,
                   Distribution.TORCH_DISTRIBUTED, False)
    assert _our_errors(case) == []
    assert sdk_training_arguments(case, SOURCE) is None  # no image of its own
    sdk = sdk_training_arguments(case, SOURCE, image_uri=_image_uri(case))
    assert sdk is not None
    ours = _arguments(case)
    assert ours["HyperParameters"] == sdk["HyperParameters"]
    assert ours["HyperParameters"]["sagemaker_torch_distributed_enabled"] == "true"
    assert ours["AlgorithmSpecification"] == sdk["AlgorithmSpecification"]


@pytest.mark.parametrize("distribution", [Distribution.NONE, Distribution.TORCH_DISTRIBUTED])
def test_a_torch_compile_job_sends_the_sdks_arguments_and_its_switches_in_the_environment(
        distribution):
    """An SDK estimator given the job's environment sends the same hyperparameters: the
    library's switches are variables, so the script gets no argument the SDK would not pass.
    (The job's code here is an S3 URI, so no launcher goes in front of ``train.py``.)"""
    case = SdkCase("pytorch", "2.8.0", None, "py312", "ml.g5.12xlarge", 1, distribution, False)
    job = replace(_our_job(case), compiler=Compiler.torch_compile(mode="reduce-overhead"))
    assert check(job).errors == []
    ours = build_definition(job)["Steps"][0]["Arguments"]
    sdk = sdk_training_arguments(case, SOURCE, environment=ours["Environment"])
    assert sdk is not None
    assert ours["HyperParameters"] == sdk["HyperParameters"]
    assert not [name for name in ours["HyperParameters"] if name.startswith("compiled_training")]
    assert ours["Environment"] == sdk["Environment"]
    assert {contract.ENV_TORCH_COMPILE: "true", contract.ENV_TORCH_COMPILE_MODE:
            "reduce-overhead"}.items() <= ours["Environment"].items()
    assert ours["AlgorithmSpecification"]["TrainingImage"] == \
        sdk["AlgorithmSpecification"]["TrainingImage"]
