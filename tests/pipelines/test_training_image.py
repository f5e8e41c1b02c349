"""TrainingImage: one choice of image, whose bind gives the URI and grants the pull."""

from __future__ import annotations

import json

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ecr as ecr
from aws_cdk.assertions import Annotations, Match, Template

from compiled_training import Compiler, Framework, TrainingImage
from tests.helpers import new_stack
from tests.pipelines.test_training_pipeline import _arguments, _pipeline, _statements

PULL = "ecr:BatchGetImage"


def _pulls(stack: cdk.Stack) -> list:
    """The repositories the pipeline's execution role may pull from."""
    statements = _statements(Template.from_stack(stack), "BertExecutionRole")
    return [s["Resource"] for s in statements if PULL in s["Action"]]


def test_the_default_is_the_dlc_for_the_compiler_and_only_its_repository_is_pulled(source_dir):
    stack = new_stack()
    pipeline = _pipeline(stack, source_dir)
    assert _arguments(stack)["AlgorithmSpecification"]["TrainingImage"] == (
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-trcomp-training:1.13.1-gpu-py39")
    (pulls,) = _pulls(stack)
    assert json.dumps(pulls).endswith(
        ':ecr:us-east-1:763104351884:repository/pytorch-trcomp-training"]]}')
    assert pipeline.summary()["image"] == "pytorch-trcomp-training:1.13.1-gpu-py39"


@pytest.mark.parametrize("version,tag", [("2.9.0", "2.9.0-gpu-py312"),
                                         ("2.10.0", "2.10.0-gpu-py313")])
def test_the_newest_pytorch_runs_torch_compile_on_its_dlc(source_dir, version, tag):
    """Images the SDK v2 never listed; the library ships the SDK v3's matrix."""
    stack = new_stack()
    _pipeline(stack, source_dir, framework=Framework.pytorch(version),
              compiler=Compiler.torch_compile())
    assert _arguments(stack)["AlgorithmSpecification"]["TrainingImage"] == (
        f"763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:{tag}")
    Annotations.from_stack(stack).has_no_error("*", Match.any_value())


def test_an_ecr_repository_image_is_run_by_tag_and_pulled_from_that_repository_only(source_dir):
    # GIVEN an image extended from the Training Compiler DLC, in the team's repository
    stack = new_stack()
    repository = ecr.Repository.from_repository_name(stack, "Team", "nlp/bert-trcomp")
    # WHEN
    _pipeline(stack, source_dir,
              image=TrainingImage.from_ecr_repository(repository, "2026-11-01"))
    # THEN
    image = json.dumps(_arguments(stack)["AlgorithmSpecification"]["TrainingImage"])
    assert "nlp/bert-trcomp:2026-11-01" in image
    (pulls,) = _pulls(stack)
    assert len(pulls) == 1 and "repository/nlp/bert-trcomp" in json.dumps(pulls)
    assert "pytorch-trcomp-training" not in json.dumps(_pulls(stack))
    Annotations.from_stack(stack).has_no_warning("*", Match.string_like_regexp("pull"))


def test_a_registry_uri_is_run_as_given_grants_nothing_and_says_so(source_dir):
    stack = new_stack()
    uri = "123456789012.dkr.ecr.us-east-1.amazonaws.com/nlp/bert:1"
    _pipeline(stack, source_dir, image=TrainingImage.from_registry(uri))
    assert _arguments(stack)["AlgorithmSpecification"]["TrainingImage"] == uri
    assert _pulls(stack) == []
    statements = json.dumps(_statements(Template.from_stack(stack), "BertExecutionRole"))
    assert "ecr:GetAuthorizationToken" not in statements
    Annotations.from_stack(stack).has_warning("/Team/Bert", Match.string_like_regexp(
        rf"image {uri} \(TrainingImage.from_registry\) gets no pull grant"))


def test_fails_on_a_training_compiler_version_that_has_no_dlc_to_extend(source_dir):
    # An extended image must extend a Training Compiler DLC: PyTorch 2.1 has none.
    stack = new_stack()
    repository = ecr.Repository(stack, "Repo")
    with pytest.raises(ValueError, match=r"^TrainingPipeline Team/Bert: .*Training Compiler "
                                         r"does not support PyTorch 2.1.0"):
        _pipeline(stack, source_dir, framework=Framework.pytorch("2.1.0"),
                  compiler=Compiler.training_compiler(),
                  image=TrainingImage.from_ecr_repository(repository))


@pytest.mark.parametrize(("build", "message"), [
    (lambda: TrainingImage.from_registry(None),
     r"^TrainingImage.from_registry: image_uri must be a str, got NoneType None$"),
    (lambda: TrainingImage.from_ecr_repository("nlp/bert"),
     r"^TrainingImage.from_ecr_repository: repository must be aws_ecr.IRepository, got str "
     r"'nlp/bert'$"),
    (lambda: TrainingImage.from_runtime_image("nlp/bert:1"),
     r"^TrainingImage.from_runtime_image: runtime_image must be RuntimeImage, got str "
     r"'nlp/bert:1'$"),
])
def test_fails_on_a_wrong_type_for_a_factory(build, message):
    with pytest.raises(TypeError, match=message):
        build()


def test_fails_on_an_image_uri_string_where_a_training_image_goes(source_dir):
    with pytest.raises(TypeError, match=r"^TrainingPipeline Team/Bert: image must be "
                                        r"TrainingImage or None, got str 'nlp/bert:1'$"):
        _pipeline(new_stack(), source_dir, image="nlp/bert:1")
