"""DLC images come from the SageMaker SDK's image-URI configuration, for every region: resolved
as SDK v2 resolves them wherever it knows the image, and the newer ones SDK v3 lists."""

from __future__ import annotations

import re

import pytest

from compiled_training import Compiler, Framework
from compiled_training.catalog.dlc import image_config, resolve_dlc, training_compiler_releases
from tests.helpers import sdk_image_uris, sdk_v2_config


def _sdk_registries(name: str, version: str) -> dict[str, str]:
    return sdk_v2_config(name)["versions"][version]["registries"]


@pytest.mark.parametrize("version", ["1.12.0", "1.13.1"])
def test_registries_are_the_sdks_for_every_region_it_lists(version):
    dlc = resolve_dlc(Framework.pytorch(version), True, "ml.g5.48xlarge")
    assert dict(dlc.registries) == _sdk_registries("pytorch-training-compiler", version)
    assert dlc.repository == "pytorch-trcomp-training"


@pytest.mark.parametrize(("region", "account"), [
    ("us-east-1", "763104351884"), ("af-south-1", "626614931356"), ("me-south-1", "217643126080"),
])
def test_regional_registry_accounts(region, account):
    dlc = resolve_dlc(Framework.pytorch("1.13.1"), True, "ml.g5.48xlarge")
    assert dlc.account(region) == account


def test_every_listed_region_gives_the_uri_the_sdk_retrieves():
    from sagemaker.pytorch import TrainingCompilerConfig

    dlc = resolve_dlc(Framework.pytorch("1.13.1"), True, "ml.p3.2xlarge")
    for region in dlc.regions:
        expected = sdk_image_uris().retrieve(
            "pytorch", region, version="1.13.1", py_version="py39", instance_type="ml.p3.2xlarge",
            image_scope="training", training_compiler_config=TrainingCompilerConfig())
        domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
        assert expected == f"{dlc.account(region)}.dkr.ecr.{region}.{domain}/{dlc.path}"


def test_hugging_face_compiler_image():
    dlc = resolve_dlc(Framework.huggingface("4.21.1", pytorch_version="1.11.0"), True,
                      "ml.p3.2xlarge")
    assert dlc.path == "huggingface-pytorch-trcomp-training:1.11.0-transformers4.21.1-gpu-py38-cu113-ubuntu20.04"


def test_releases_name_every_frozen_version():
    releases = training_compiler_releases()
    assert "PyTorch 1.12.0" in releases and "PyTorch 1.13.1" in releases
    assert "Hugging Face Transformers 4.21.1 with PyTorch 1.11.0" in releases


def test_fails_for_a_version_without_image():
    with pytest.raises(ValueError, match=r"PyTorch 0.9.9 has no SageMaker training image; supported pytorch versions: .*1.13.1"):
        resolve_dlc(Framework.pytorch("0.9.9"), False, "ml.g5.xlarge")


def test_fails_for_a_region_without_image():
    dlc = resolve_dlc(Framework.pytorch("1.13.1"), True, "ml.g5.xlarge")
    with pytest.raises(ValueError, match=r"^PyTorch 1.13.1's Training Compiler image \(pytorch-trcomp-training:1.13.1-gpu-py39\) is not published in mars-north-1; the regions that have it: af-south-1, "):
        dlc.account("mars-north-1")


def test_compiler_kinds_are_distinct():
    assert Compiler.none() != Compiler.training_compiler()
    assert Compiler.training_compiler(debug=True).hyperparameters()[
        "sagemaker_training_compiler_debug_mode"] is True


def _sdk_retrieve(framework: Framework, compiled: bool, instance_type: str) -> str:
    from sagemaker.huggingface import TrainingCompilerConfig as HuggingFaceCompilerConfig
    from sagemaker.pytorch import TrainingCompilerConfig as PyTorchCompilerConfig

    kwargs = {"version": framework.version, "instance_type": instance_type,
              "image_scope": "training"}
    if framework.py_version:
        kwargs["py_version"] = framework.py_version
    if framework.name == "huggingface":
        kwargs["base_framework_version"] = f"pytorch{framework.pytorch_version}"
    if compiled:
        kwargs["training_compiler_config"] = (
            HuggingFaceCompilerConfig() if framework.name == "huggingface"
            else PyTorchCompilerConfig())
    return sdk_image_uris().retrieve(framework.name, "us-east-1", **kwargs)


def _every_image():
    """Every training image this library resolves: (framework, compiled, instance type)."""
    cases = []
    for name, compiled in (("pytorch", False), ("pytorch-training-compiler", True)):
        config = image_config(name)
        for version, entry in config["versions"].items():
            if tuple(int(p) for p in version.split(".")[:2]) < (1, 8):
                continue  # older than any DLC still in use; the SDK pins CUDA suffixes there
            for py in entry.get("py_versions", []):
                for instance in ("ml.g5.xlarge", "ml.m5.xlarge"):
                    cases.append((Framework.pytorch(version, py_version=py), compiled, instance))
    for name, compiled in (("huggingface", False), ("huggingface-training-compiler", True)):
        for version, entry in image_config(name)["versions"].items():
            for base, sub in entry.items():
                if base.startswith("pytorch") and "py_versions" in sub:
                    framework = Framework.huggingface(
                        version, pytorch_version=base[len("pytorch"):],
                        py_version=sub["py_versions"][-1])
                    cases.append((framework, compiled, "ml.p3.2xlarge"))
    for version in image_config("xgboost")["versions"]:
        if "-" in version:
            cases.append((Framework.xgboost(version), False, "ml.m6i.12xlarge"))
    return cases


def _sdk_v2_knows(framework: Framework, compiled: bool) -> bool:
    name = f"{framework.name}-training-compiler" if compiled and framework.runs_script \
        else framework.name
    config = sdk_v2_config(name)
    version = config.get("version_aliases", {}).get(framework.version, framework.version)
    return version in config["versions"]


def test_every_image_matches_what_the_sdk_retrieves():
    """Every image both SDKs list resolves as SDK v2 resolves it (the images SDK v3 alone lists,
    PyTorch 2.9 and later, are held to its configuration in test_image_matrix)."""
    cases = [case for case in _every_image() if _sdk_v2_knows(case[0], case[1])]
    assert len(cases) > 60
    checked = 0
    for framework, compiled, instance in cases:
        try:
            expected = _sdk_retrieve(framework, compiled, instance)
        except ValueError:
            with pytest.raises(ValueError):
                resolve_dlc(framework, compiled, instance)
            continue
        dlc = resolve_dlc(framework, compiled, instance)
        assert expected == f"{dlc.account('us-east-1')}.dkr.ecr.us-east-1.amazonaws.com/{dlc.path}"
        checked += 1
    assert checked > 50


@pytest.mark.parametrize(("transformers", "pytorch", "py", "compiled"), [
    ("4.11", "1.9", "py38", True), ("4.11.0", "1.9.0", "py38", True),
    ("4.17", "1.10", "py38", True), ("4.21", "1.11", "py38", True),
    ("4.11", "1.9", "py38", False), ("4.26", "1.13", "py39", False),
])
def test_hugging_face_versions_are_tagged_as_spelled_like_the_sdk_does(transformers, pytorch,
                                                                        py, compiled):
    from sagemaker.huggingface import TrainingCompilerConfig

    framework = Framework.huggingface(transformers, pytorch_version=pytorch, py_version=py)
    try:
        dlc = resolve_dlc(framework, compiled, "ml.p3.2xlarge")
    except ValueError:
        dlc = None
    try:
        expected = sdk_image_uris().retrieve(
            "huggingface", "us-east-1", version=transformers, py_version=py,
            base_framework_version=f"pytorch{pytorch}", instance_type="ml.p3.2xlarge",
            image_scope="training",
            training_compiler_config=TrainingCompilerConfig() if compiled else None)
    except ValueError:
        expected = None
    assert (dlc and f"{dlc.account('us-east-1')}.dkr.ecr.us-east-1.amazonaws.com/{dlc.path}") \
        == expected


def test_fails_on_hugging_face_versions_mixing_short_and_full():
    with pytest.raises(ValueError, match=r"transformers_version and pytorch_version must be "
                                         r"both short .* or both full .*: no image is tagged "
                                         r"with a mix, got '4.11.0' and '1.9'$"):
        Framework.huggingface("4.11.0", pytorch_version="1.9")


def test_fails_rather_than_giving_a_cpu_image_to_an_accelerator():
    with pytest.raises(ValueError, match=r"PyTorch 1.11.0 has no INF training image for "
                                         r"instance type 'ml.inf2.xlarge'; it has CPU, GPU"):
        resolve_dlc(Framework.pytorch("1.11.0"), False, "ml.inf2.xlarge")


def test_trainium_resolves_the_pytorch_neuronx_images_and_lists_what_exists():
    image = resolve_dlc(Framework.pytorch("2.9.0"), False, "ml.trn2.48xlarge")
    assert image.path == "pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.30.0-ubuntu24.04"
    assert image.account("us-east-1") == "763104351884"
    assert image.account("af-south-1") == "626614931356"
    assert resolve_dlc(Framework.pytorch("2.1.2"), False, "ml.trn1n.32xlarge").tag == \
        "2.1.2-neuronx-py310-sdk2.20.2-ubuntu20.04"
    # Published by AWS, missing from the catalog until Neuron 2.33's check (2026-11-26).
    assert resolve_dlc(Framework.pytorch("2.5.1"), False, "ml.trn1.32xlarge").path == \
        "pytorch-training-neuronx:2.5.1-neuronx-py310-sdk2.22.0-ubuntu22.04"
    assert resolve_dlc(Framework.pytorch("1.13.1"), False, "ml.trn1.2xlarge").tag == \
        "1.13.1-neuronx-py310-sdk2.20.2-ubuntu20.04"
    with pytest.raises(ValueError, match=r"PyTorch 1.12.1 has no Neuron training image "
                                         r"\(pytorch-training-neuronx\); for ml.trn1.32xlarge: "
                                         r"PyTorch 1.13.1, PyTorch 2.1.2, PyTorch 2.5.1, "
                                         r"PyTorch 2.6.0, PyTorch 2.7.0, PyTorch 2.8.0, "
                                         r"PyTorch 2.9.0 \(AWS publishes none after"):
        resolve_dlc(Framework.pytorch("1.12.1"), False, "ml.trn1.32xlarge")
    with pytest.raises(ValueError, match=r"image 2.9.0-neuronx-py312-sdk2.30.0-ubuntu24.04 has "
                                         r"py312, not py311"):
        resolve_dlc(Framework.pytorch("2.9.0", py_version="py311"), False, "ml.trn1.32xlarge")


def test_the_neuron_row_the_sdk_knows_is_the_uri_it_builds_in_every_region():
    """The SDK builds one PyTorch NeuronX training URI (for its HyperPod recipes): ours for the
    same release equals it in every region it lists."""
    from tests.helpers import sdk_image_uris

    sdk = sdk_image_uris()
    image = resolve_dlc(Framework.pytorch("2.1.2"), False, "ml.trn1.32xlarge")
    assert len(image.regions) > 20
    for region in image.regions:
        expected = sdk.retrieve("hyperpod-recipes-neuron", region=region, version="2.1.2",
                                image_scope="training")
        assert expected.startswith(f"{image.account(region)}.dkr.ecr.{region}.")
        assert expected.endswith(f"/{image.path}")


@pytest.mark.parametrize("version", ["1.11.0", "1.11"])
def test_pytorch_1_11_on_trn1_is_the_legacy_image_both_sdks_resolve_in_every_region(version):
    """Both SDKs hand ``pytorch-training-neuron:1.11.0`` to ``ml.trn*`` (SDK v2 is the oracle
    here; the shipped ``pytorch-neuron.json`` is SDK v3's byte for byte: test_image_matrix)."""
    from tests.helpers import sdk_image_uris

    sdk = sdk_image_uris()
    for instance_type in ("ml.trn1.2xlarge", "ml.trn1.32xlarge"):
        image = resolve_dlc(Framework.pytorch(version), False, instance_type)
        assert image.path == f"pytorch-training-neuron:{version}-neuron-py38-sdk2.4.0-ubuntu20.04"
        assert len(image.regions) > 10
        for region in image.regions:
            expected = sdk.retrieve("pytorch", region=region, version=version,
                                    instance_type=instance_type, image_scope="training")
            assert expected.startswith(f"{image.account(region)}.dkr.ecr.{region}.")
            assert expected.endswith(f"/{image.path}")


@pytest.mark.parametrize("instance_type", ["ml.trn1n.32xlarge", "ml.trn2.48xlarge"])
def test_pytorch_1_11_where_its_image_predates_the_family_is_refused_with_the_reason(
        instance_type):
    """The SDKs resolve it here too; AWS's table lists it for trn1, before trn1n (Neuron 2.9.0)
    and trn2 (2.21.0) existed."""
    with pytest.raises(ValueError, match=(
            rf"PyTorch 1.11.0's Neuron training image \(pytorch-training-neuron, Neuron SDK "
            rf"2.4.0, 2022-10-27\) serves trn1 only, not '{instance_type}': trn1n came with "
            rf"Neuron 2.9.0 and trn2 with 2.21.0 .* train a PyTorch NeuronX release: .*"
            rf"PyTorch 2.9.0$")):
        resolve_dlc(Framework.pytorch("1.11.0"), False, instance_type)
    with pytest.raises(ValueError, match=r"has py38, not py310"):
        resolve_dlc(Framework.pytorch("1.11.0", py_version="py310"), False, "ml.trn1.2xlarge")


def test_every_neuron_row_cites_its_source_and_is_tagged_as_aws_tags_them():
    from compiled_training.catalog import neuron

    images = neuron.neuron_images()
    assert len(images) == 12 and len({image.tag for image in images}) == 12
    for image in images:
        assert image.source
        assert re.fullmatch(r"\d+\.\d+\.\d+-neuronx-py3\d+-sdk2\.\d+\.\d+-ubuntu\d\d\.04",
                            image.tag)
        assert set(image.families) <= {"trn1", "trn1n", "trn2"}


def test_hugging_face_neuronx_rows_cite_aws_and_take_the_sdks_registries():
    """Tags from AWS's tables (the SDK v3's huggingface-neuronx.json pairs Transformers 4.55.4
    with PyTorch 2.7.0, where AWS publishes 2.8.0; SDK v2 resolves no Hugging Face image on
    Trainium at all); the registries per region are the SDK v3's for the same Transformers
    release."""
    from compiled_training.catalog import neuron
    from compiled_training.catalog.dlc import image_config

    config = image_config("huggingface-neuronx")
    images = neuron.neuron_images(neuron.HUGGINGFACE)
    assert [image.describe() for image in images] == [
        "Transformers 4.55.4 with PyTorch 2.8.0", "Transformers 4.51.0 with PyTorch 2.7.0",
        "Transformers 4.48.1 with PyTorch 2.1.2", "Transformers 4.36.2 with PyTorch 1.13.1"]
    for image in images:
        assert image.source and image.families == ("trn1",)
        assert re.fullmatch(r"\d+\.\d+\.\d+-transformers4\.\d+\.\d+-neuronx-py310-"
                            r"sdk2\.\d+\.\d+-ubuntu\d\d\.04", image.tag)
        framework = Framework.huggingface(image.transformers, pytorch_version=image.pytorch)
        resolved = resolve_dlc(framework, False, "ml.trn1.32xlarge")
        assert resolved.path == f"huggingface-pytorch-training-neuronx:{image.tag}"
        listed = config["versions"][image.transformers]
        (entry,) = [v for k, v in listed.items() if k.startswith("pytorch")]
        assert dict(resolved.registries) == entry["registries"]
