"""AWS's PyTorch NeuronX training images for SageMaker (Trainium), and the instances they run on.

The SageMaker SDKs resolve none of them for a Trainium estimator (for ``ml.trn*`` both give
``pytorch-training-neuron:1.11.0``; their only PyTorch NeuronX URI is 2.1.2's, for HyperPod
recipes), so the library keeps its own table, each row citing AWS's Deep Learning Container
tables (``neuron-training-images.json``); the registries per region are the SDK v3's own for
this repository.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from compiled_training.catalog.instances import accelerator, instance_family

TABLE = resources.files(__package__) / "neuron-training-images.json"
# NeuronCores a SageMaker training instance exposes: torchrun starts one process per core
# (the toolkit's default; it counts trn2.48xlarge at 64, logical cores at LNC=2).
NEURON_CORES = {"ml.trn1.2xlarge": 2, "ml.trn1.32xlarge": 32, "ml.trn1n.32xlarge": 32,
                "ml.trn2.48xlarge": 64}
# Multi-node Neuron training needs EFA, which trn1.2xlarge lacks (Neuron's multi-node setup
# guide runs trn1.32xlarge, trn1n.32xlarge and trn2.48xlarge).
SINGLE_NODE_ONLY = ("ml.trn1.2xlarge",)
# What Neuron's multi-node guide exports for EFA; the toolkit sets them on ml.trn1.32xlarge
# only (its SM_EFA_*_INSTANCES lists), not on trn1n or trn2.
EFA_ENVIRONMENT = {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1"}


@dataclass(frozen=True)
class NeuronImage:
    """One ``pytorch-training-neuronx`` release, as AWS's tables list it."""

    pytorch: str
    neuron_sdk: str
    python: str
    os: str
    families: tuple[str, ...]
    source: str

    @property
    def tag(self) -> str:
        return f"{self.pytorch}-neuronx-{self.python}-sdk{self.neuron_sdk}-{self.os}"


@functools.cache
def _table() -> dict[str, Any]:
    table: dict[str, Any] = json.loads(TABLE.read_text())
    return table


@functools.cache
def neuron_images() -> tuple[NeuronImage, ...]:
    """Every release in the table, newest PyTorch and Neuron SDK first."""
    images = (NeuronImage(row["pytorch"], row["neuron_sdk"], row["python"], row["os"],
                          tuple(row["families"]), row["source"])
              for row in _table()["images"])
    return tuple(sorted(images, key=lambda image: (_version_key(image.pytorch),
                                                   _version_key(image.neuron_sdk)),
                        reverse=True))


def repository() -> str:
    return str(_table()["repository"])


def native_families() -> tuple[str, ...]:
    """The families the native TorchNeuron backend (``torch.compile(backend="neuron")``)
    runs on: trn2 (and trn3, which SageMaker does not train on)."""
    return tuple(_table()["native"]["families"])


def native_image_status() -> str:
    return f"{_table()['native']['status']} ({_table()['native']['source']})"


def is_trainium(instance_type: str) -> bool:
    return accelerator(instance_type) == "trainium"


def neuron_image(pytorch_version: str, instance_type: str) -> NeuronImage:
    """The newest release of ``pytorch_version`` that serves ``instance_type``'s family;
    a ValueError lists what exists."""
    family = instance_family(instance_type)
    versions = [image for image in neuron_images() if image.pytorch == pytorch_version]
    for image in versions:
        if family in image.families:
            return image
    offered = sorted({image.pytorch for image in neuron_images() if family in image.families},
                     key=_version_key)
    if versions:
        served = sorted({served for image in versions for served in image.families})
        raise ValueError(
            f"PyTorch {pytorch_version}'s Neuron training images serve {', '.join(served)}, "
            f"not {instance_type!r}; for {family}: PyTorch {', '.join(offered)}")
    raise ValueError(
        f"PyTorch {pytorch_version} has no Neuron training image ({repository()}); for "
        f"{instance_type}: PyTorch {', '.join(offered)} (AWS publishes none after Neuron SDK "
        f"2.30, PyTorch 2.9)")


def registries_source() -> str:
    """The SDK v3 image configuration file whose entries for `repository` list its
    registries (``dlc.image_config`` reads it: this module imports nothing of ``dlc``)."""
    return str(_table()["registries_from"]).removesuffix(".json")


def registries(config: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """(region, registry account) of the repository, from that configuration."""
    entries = [entry for entry in config["versions"].values()
               if entry["repository"] == repository()]
    return tuple(sorted(entries[0]["registries"].items()))


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))
