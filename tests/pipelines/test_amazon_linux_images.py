"""PyTorch 2.11 to 2.14, AWS's Amazon Linux 2023 training images, in synthesized pipelines: each
version in the SDK's short spelling (``2.14``) and the library's full one (``2.14.0``), on a GPU
and a CPU instance, in two regions, trains on the image SDK v3's own ``retrieve`` names (run in
its environment, the oracle); a wrong ``py_version`` and a region without the image are refused
before CloudFormation sees them."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from compiled_training import Compiler, Framework, TrainingPipeline
from compiled_training.catalog.dlc import AMAZON_LINUX_PYTHONS, image_config, resolve_dlc
from tests.catalog.sdk_v3 import sdk_v3_images
from tests.environments import IMAGE_CONFIG, require
from tests.helpers import ACCOUNT, definitions, new_stack

VERSIONS = ("2.11", "2.12", "2.13", "2.14")
# GPU with torch.compile, CPU without a compiler (torch.compile targets GPUs).
INSTANCES = {"gpu": ("ml.g5.xlarge", Compiler.torch_compile()),
             "cpu": ("ml.m5.xlarge", Compiler.none())}


@pytest.fixture(scope="module")
def sdk_v3_uris() -> dict[tuple[str, str, str], str]:
    rows = sdk_v3_images(str(require(IMAGE_CONFIG).executable))["rows"]
    return {(row["version"], row["processor"], row["region"]): row["uri"] for row in rows
            if row["config"] == "pytorch-amzn2023"}


@pytest.mark.parametrize("region", ["us-east-1", "eu-central-1"])
def test_each_version_and_spelling_trains_on_the_image_sdk_v3_retrieves(
        source_dir, sdk_v3_uris, region):
    stack = new_stack(env=cdk.Environment(account=ACCOUNT, region=region))
    expected = {}
    for version in VERSIONS:
        for spelling in (version, f"{version}.0"):
            for processor, (instance_type, compiler) in INSTANCES.items():
                name = f"v{spelling.replace('.', '-')}-{processor}"
                TrainingPipeline(stack, name, pipeline_name=name, source_dir=str(source_dir),
                                 entry_point="train.py", framework=Framework.pytorch(spelling),
                                 compiler=compiler, instance_type=instance_type)
                expected[name] = sdk_v3_uris[(version, processor, region)]
    images = [d["Steps"][0]["Arguments"]["AlgorithmSpecification"]["TrainingImage"]
              for d in definitions(Template.from_stack(stack).to_json())]
    assert len(images) == 16  # each image twice: its short and its full spelling
    assert sorted(images) == sorted(expected.values())
    assert f"763104351884.dkr.ecr.{region}.amazonaws.com/pytorch:2.14-cu133-amzn2023-sagemaker" \
        in images


def test_py_version_is_the_images_own_or_refused(source_dir):
    stack = new_stack()
    TrainingPipeline(stack, "Given", source_dir=str(source_dir), entry_point="train.py",
                     framework=Framework.pytorch("2.14", py_version="py312"),
                     compiler=Compiler.torch_compile(), instance_type="ml.g5.xlarge")
    with pytest.raises(ValueError, match=r"^TrainingPipeline Team/Wrong: PyTorch 2.14.s training image \(Amazon Linux 2023\) "
                                         r"has py312, not py313: omit py_version or give py312$"):
        TrainingPipeline(stack, "Wrong", source_dir=str(source_dir), entry_point="train.py",
                         framework=Framework.pytorch("2.14", py_version="py313"),
                         compiler=Compiler.torch_compile(), instance_type="ml.g5.xlarge")


def test_every_amazon_linux_version_has_its_python_established():
    """The configuration names no Python: a version `make image-matrix` brings fails here until
    its image's Python is read from AWS's changelog into AMAZON_LINUX_PYTHONS."""
    assert set(image_config("pytorch-amzn2023")["versions"]) == set(AMAZON_LINUX_PYTHONS)


def test_a_patch_release_is_no_alias_of_the_minor_versions_image():
    """The 2.12 image carries PyTorch 2.12.1 today and may carry 2.12.2 tomorrow: a patch
    spelling is refused, told to give the minor version, where "2.12.0" is taken."""
    with pytest.raises(ValueError, match=r"^PyTorch 2.12.1 has no SageMaker training image: "
                                         r"from 2.11 on AWS publishes one image a minor "
                                         r"version, which it moves to each patch release it "
                                         r"adopts; give '2.12'$"):
        resolve_dlc(Framework.pytorch("2.12.1"), False, "ml.g5.xlarge")
    # A version no minor image has still gets the list.
    with pytest.raises(ValueError, match=r"PyTorch 2.99.1 has no SageMaker training image; "
                                         r"supported pytorch versions: .*, 2.13, 2.14$"):
        resolve_dlc(Framework.pytorch("2.99.1"), False, "ml.g5.xlarge")
    assert resolve_dlc(Framework.pytorch("2.12.0"), False, "ml.g5.xlarge").tag == \
        "2.12-cu130-amzn2023-sagemaker"
