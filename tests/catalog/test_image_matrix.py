"""The image matrix the library ships (``compiled_training/catalog/image-uri-config``) is the
maintained SageMaker SDK's (v3, ``sagemaker-core``) image configuration, byte for byte, and
agrees with the SDK v2's wherever both list an image; every PyTorch and Hugging Face PyTorch
training image resolves to the URI that SDK v3's own ``retrieve`` composes, in every region.

The ``sagemaker-core`` files are read from their own environment (tests/environments.py): SDK v2,
the oracle in this one, pins ``sagemaker-core<2``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from compiled_training import Framework
from compiled_training.catalog.dlc import (
    IMAGES,
    image_config,
    launches_torchrun,
    resolve_dlc,
    sdk_torch_distributed_versions,
    torch_distributed_versions,
)
from scripts.image_matrix import CONFIGS, RULES
from scripts.image_matrix import torch_distributed_versions as read_rules
from tests.catalog.sdk_v3 import differences, sdk_v3_images, summary, unknown_files
from tests.environments import IMAGE_CONFIG, SAGEMAKER_CORE, require, site_packages
from tests.helpers import sdk_v2_config


@pytest.fixture(scope="module")
def sdk_v3_core():
    return site_packages(require(IMAGE_CONFIG)) / "sagemaker" / "core"


@pytest.mark.parametrize("name", CONFIGS)
def test_shipped_file_is_the_sdk_v3_configuration_byte_for_byte(sdk_v3_core, name):
    shipped = (IMAGES / f"{name}.json").read_bytes()
    assert shipped == (sdk_v3_core / "image_uri_config" / f"{name}.json").read_bytes()
    source = json.loads((IMAGES / "SOURCE.json").read_text())
    assert source["requirement"] == SAGEMAKER_CORE
    assert source["files"][f"{name}.json"]["sha256"] == hashlib.sha256(shipped).hexdigest()


def test_the_sdks_torch_distributed_list_is_the_sdk_v3s(sdk_v3_core):
    assert list(sdk_torch_distributed_versions()) == read_rules(sdk_v3_core / "fw_utils.py")
    assert json.loads((IMAGES / RULES).read_text())["torch_distributed_gpu_versions"]


def test_every_training_image_is_the_uri_sdk_v3_retrieves_in_every_region():
    """The pinned SDK v3's own ``image_uris.retrieve``, run in its environment, is the oracle:
    PyTorch to 2.10.0 (``pytorch``), 2.11 to 2.14 (``pytorch-amzn2023``), Hugging Face; GPU
    and CPU; every region each lists, in every partition."""
    pinned = sdk_v3_images(str(require(IMAGE_CONFIG).executable))
    assert pinned["sagemaker-core"] == SAGEMAKER_CORE.split("==")[1]
    # Every PyTorch and Hugging Face file is read here or known not to hold what is checked;
    # one the SDK adds is not (the currency test's first check).
    assert unknown_files(pinned["files"]) == []
    assert unknown_files([*pinned["files"], "pytorch-amzn2027"]) == ["pytorch-amzn2027"]
    assert not differences(pinned["rows"]), summary(differences(pinned["rows"]))
    amazon_linux = [row for row in pinned["rows"] if row["config"] == "pytorch-amzn2023"]
    assert {row["version"] for row in amazon_linux} == {"2.11", "2.12", "2.13", "2.14"}
    assert {row["region"].split("-")[0] for row in amazon_linux} >= {"cn", "us", "eu", "eusc"}


def test_torchrun_runs_on_every_gpu_training_image_from_1_13_1_and_on_the_sdks_list():
    # The images' toolkit launches torchrun from 1.13.1 on (catalog/dlc.py cites it): every
    # GPU image since, 2.9.0 to 2.14 past the SDKs' list included, and nothing older.
    images = [*image_config("pytorch")["versions"], *image_config("pytorch-amzn2023")["versions"]]
    assert list(torch_distributed_versions()) == [
        v for v in images if tuple(map(int, v.split("."))) >= (1, 13, 1)]
    assert {"2.9.0", "2.10.0", "2.11", "2.14"} <= set(torch_distributed_versions())
    assert all(launches_torchrun(v) for v in sdk_torch_distributed_versions())
    assert not any(launches_torchrun(v) for v in ("1.12.1", "1.12", "1.11.0", "1.8.1"))
    assert launches_torchrun("2.9") and launches_torchrun("1.13")  # short spellings


def test_nothing_unlisted_ships():
    listed = set(json.loads((IMAGES / "SOURCE.json").read_text())["files"])
    assert {p.name for p in IMAGES.iterdir()} == listed | {"SOURCE.json"}


# Scopes the library does not read: huggingface-neuronx.json gives only the Hugging Face
# NeuronX training registries (its tags come from AWS's tables); its inference entries, where
# v3 dropped v2's PyTorch 2.7.1 images, are not read.
_UNREAD = {("huggingface-neuronx", "inference")}
# Files SDK v2 never had: the Amazon Linux 2023 PyTorch images came after it froze.
_V3_ONLY = {"pytorch-amzn2023"}


def _scopes(name: str) -> list[str]:
    raw = json.loads((IMAGES / f"{name}.json").read_text())
    return [scope for scope in ("training", "inference")
            if scope in raw and (name, scope) not in _UNREAD] or ["training"]


def _entries(config: dict[str, Any]) -> dict[tuple[str, ...], Any]:
    """Every leaf of a configuration's ``versions``, keyed by its path (version, ..., region)."""
    leaves: dict[tuple[str, ...], Any] = {}

    def walk(node: Any, path: tuple[str, ...]) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, (*path, key))
        else:
            leaves[path] = node

    walk(config["versions"], ())
    return leaves


@pytest.mark.parametrize("name,scope", [(n, s) for n in CONFIGS if n not in _V3_ONLY
                                        for s in _scopes(n)])
def test_every_entry_both_sdks_list_agrees(name, scope):
    """Same repository, tag parts, Pythons, processors and registry account for every (version,
    region) that SDK v2 and v3 both have; v3 only adds (newer versions, new regions)."""
    v2, v3 = _entries(sdk_v2_config(name, scope)), _entries(image_config(name, scope))
    both = v2.keys() & v3.keys()
    assert len(both) > 0.9 * len(v2), f"{name} {scope}: v3 dropped {sorted(v2.keys() - v3.keys())}"
    assert {path: v2[path] for path in both} == {path: v3[path] for path in both}


@pytest.mark.parametrize("version,py_version", [("2.9.0", "py312"), ("2.10.0", "py313")])
def test_newest_pytorch_images_resolve(version, py_version):
    """The DLCs SDK v2 never listed, tagged as ``image_uris.retrieve`` tags them (the DLC release
    also carries the long form, e.g. ``2.10.0-gpu-py313-cu130-ubuntu22.04-sagemaker``)."""
    for instance_type, processor in (("ml.g5.48xlarge", "gpu"), ("ml.m5.xlarge", "cpu")):
        image = resolve_dlc(Framework.pytorch(version), False, instance_type)
        assert image.path == f"pytorch-training:{version}-{processor}-{py_version}"
