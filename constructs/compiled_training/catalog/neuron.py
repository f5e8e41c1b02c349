"""AWS's PyTorch NeuronX training images for SageMaker (Trainium), and the instances they run on.

The SageMaker SDKs resolve none of them for a Trainium estimator (for ``ml.trn*`` both give
``pytorch-training-neuron:1.11.0``, whatever the version asked; their only PyTorch NeuronX URI
is 2.1.2's, for HyperPod recipes), so the library keeps its own table, each row citing AWS's
Deep Learning Container tables (``neuron-training-images.json``); the registries per region
are the SDK v3's own for this repository. PyTorch 1.11.0 resolves as both SDKs resolve it, from
their own configuration (``pytorch-neuron``), on the family its image serves.
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


# The table's lines of images, by the framework name they serve: the PyTorch NeuronX images
# (the table's top level) and the Hugging Face ones (its ``huggingface`` entry).
PYTORCH, HUGGINGFACE = "pytorch", "huggingface"


@dataclass(frozen=True)
class NeuronImage:
    """One ``pytorch-training-neuronx`` (or, with ``transformers``, Hugging Face
    ``huggingface-pytorch-training-neuronx``) release, as AWS's tables list it."""

    pytorch: str
    neuron_sdk: str
    python: str
    os: str
    families: tuple[str, ...]
    source: str
    transformers: str | None = None

    @property
    def tag(self) -> str:
        release = (f"{self.pytorch}-transformers{self.transformers}" if self.transformers
                   else self.pytorch)
        return f"{release}-neuronx-{self.python}-sdk{self.neuron_sdk}-{self.os}"

    def describe(self) -> str:
        return _release(self.pytorch, self.transformers)


@functools.cache
def _table() -> dict[str, Any]:
    table: dict[str, Any] = json.loads(TABLE.read_text())
    return table


def _line(framework: str) -> dict[str, Any]:
    line: dict[str, Any] = _table()[HUGGINGFACE] if framework == HUGGINGFACE else _table()
    return line


@functools.cache
def neuron_images(framework: str = PYTORCH) -> tuple[NeuronImage, ...]:
    """Every release of a line in the table, newest PyTorch and Neuron SDK first."""
    images = (NeuronImage(row["pytorch"], row["neuron_sdk"], row["python"], row["os"],
                          tuple(row["families"]), row["source"], row.get("transformers"))
              for row in _line(framework)["images"])
    return tuple(sorted(images, key=lambda image: (_version_key(image.pytorch),
                                                   _version_key(image.neuron_sdk)),
                        reverse=True))


def repository(framework: str = PYTORCH) -> str:
    return str(_line(framework)["repository"])


def native_families() -> tuple[str, ...]:
    """The families the native TorchNeuron backend (``torch.compile(backend="neuron")``)
    runs on: trn2 (and trn3, which SageMaker does not train on)."""
    return tuple(_table()["native"]["families"])


def native_image_status() -> str:
    """What AWS publishes of the native path's training image, as of the table's check."""
    return str(_table()["native"]["status"])


def legacy() -> dict[str, Any]:
    """The ``pytorch-training-neuron`` line (PyTorch 1.11.0): the SDKs' configuration's name,
    the families its image serves, its Neuron SDK and source."""
    line: dict[str, Any] = _table()["legacy"]
    return line


def legacy_problem(instance_type: str) -> str | None:
    """Why the legacy image cannot serve ``instance_type``, or None."""
    line, family = legacy(), instance_family(instance_type)
    if family in line["families"]:
        return None
    return (f"PyTorch 1.11.0's Neuron training image (pytorch-training-neuron, Neuron SDK "
            f"{line['neuron_sdk']}, {line['released']}) serves {', '.join(line['families'])} "
            f"only, not {instance_type!r}: trn1n came with Neuron 2.9.0 and trn2 with 2.21.0 "
            f"(both SageMaker SDKs still hand it to any ml.trn*); on {family} train a PyTorch "
            f"NeuronX release: "
            + ", ".join(sorted({i.describe() for i in neuron_images() if family in i.families},
                               key=lambda text: _version_key(text.split()[-1]))))


def is_trainium(instance_type: str) -> bool:
    return accelerator(instance_type) == "trainium"


def neuron_image(pytorch_version: str, instance_type: str,
                 transformers: str | None = None) -> NeuronImage:
    """The newest release of ``pytorch_version`` (with ``transformers``: the Hugging Face
    image of that Transformers and PyTorch) that serves ``instance_type``'s family; a
    ValueError lists what exists."""
    framework = HUGGINGFACE if transformers else PYTORCH
    family = instance_family(instance_type)
    wanted = _release(pytorch_version, transformers)
    images = neuron_images(framework)
    versions = [image for image in images if image.describe() == wanted]
    for image in versions:
        if family in image.families:
            return image
    offered = sorted({image.describe() for image in images if family in image.families},
                     key=lambda text: [_version_key(part) for part in text.split()
                                       if part[0].isdigit()])
    if versions:
        served = sorted({served for image in versions for served in image.families})
        raise ValueError(
            f"{wanted}'s Neuron training images serve {', '.join(served)}, not "
            f"{instance_type!r}; for {family}: {', '.join(offered) or 'none'}")
    last = (" (AWS publishes none after Neuron SDK 2.30, PyTorch 2.9)"
            if framework == PYTORCH else "")
    raise ValueError(
        f"{wanted} has no Neuron training image ({repository(framework)}); for "
        f"{instance_type}: {', '.join(offered) or 'none'}{last}")


def registries_source(framework: str = PYTORCH) -> str:
    """The SDK v3 image configuration file whose entries for the line's repository list its
    registries (``dlc.image_config`` reads it: this module imports nothing of ``dlc``)."""
    return str(_line(framework)["registries_from"]).removesuffix(".json")


def registries(config: Mapping[str, Any], framework: str = PYTORCH,
               release: str | None = None) -> tuple[tuple[str, str], ...]:
    """(region, registry account) of the line's repository, from that configuration: the
    entry of ``release`` where it lists one (the Hugging Face file lists its regions per
    Transformers release, a level down under a PyTorch version), else its first entry."""
    wanted = repository(framework)

    def entries(node: Any) -> list[Mapping[str, Any]]:
        if not isinstance(node, Mapping):
            return []
        if node.get("repository") == wanted:
            return [node]
        return [found for value in node.values() for found in entries(value)]

    versions = config["versions"]
    return tuple(sorted(entries(versions.get(release, versions))[0]["registries"].items()))


def _release(pytorch: str, transformers: str | None) -> str:
    return f"Transformers {transformers} with PyTorch {pytorch}" if transformers else (
        f"PyTorch {pytorch}")


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))
