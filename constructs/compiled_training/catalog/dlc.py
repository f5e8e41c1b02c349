"""AWS Deep Learning Container images, read from the SageMaker SDK v2's image-URI configuration.

Never hand-copied: the SDK's JSON configuration is the support matrix (repositories, tags,
per-region registry accounts). It is read as data, without importing the SDK: the import
costs seconds and prints a migration banner that a user's ``cdk synth`` must not show.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from compiled_training.catalog.instances import accelerator, instance_family

# The SDK's processor for each accelerator (it reads g4ad as a GPU too).
_PROCESSORS = {"nvidia": "gpu", "amd": "gpu", "trainium": "trn", "inferentia": "inf", "cpu": "cpu"}


class FrameworkRelease(Protocol):
    """What the image matrix reads of a framework (``compiled_training.Framework`` is one): the
    SageMaker SDK's names and versions."""

    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def pytorch_version(self) -> str | None: ...
    @property
    def py_version(self) -> str | None: ...
    def describe(self) -> str: ...


@dataclass(frozen=True)
class DlcImage:
    """One DLC image: the same repository and tag in every region's registry account."""

    repository: str
    tag: str
    registries: tuple[tuple[str, str], ...]
    """(region, registry account) pairs, sorted by region."""

    @property
    def regions(self) -> list[str]:
        return [region for region, _ in self.registries]

    def account(self, region: str) -> str:
        accounts = dict(self.registries)
        if region not in accounts:
            raise ValueError(
                f"region {region!r} has no {self.repository}:{self.tag} image; "
                f"supported regions: {', '.join(self.regions)}"
            )
        return accounts[region]

    @property
    def path(self) -> str:
        """``repository:tag``, the part of the URI after the registry host."""
        return f"{self.repository}:{self.tag}"


def sdk_image_uris() -> ModuleType:
    """``sagemaker.image_uris``, imported quietly and offline (tests use it as the oracle)."""
    os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    for name in ("sagemaker.config", "sagemaker.image_uris", "sagemaker"):
        logging.getLogger(name).setLevel(logging.WARNING)
    from sagemaker import image_uris

    return image_uris


@functools.lru_cache(maxsize=64)
def sdk_config(name: str, scope: str = "training") -> dict[str, Any]:
    """One of the SDK's ``image_uri_config/<name>.json`` files, read without importing the SDK.

    Importing ``sagemaker`` costs seconds (pydantic models, sagemaker-core); the JSON files
    are the same data ``image_uris.retrieve`` reads. ``scope``: ``training`` or ``inference``.
    """
    spec = importlib.util.find_spec("sagemaker")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the SageMaker SDK v2 (package 'sagemaker<3') is not installed")
    folder = Path(next(iter(spec.submodule_search_locations))) / "image_uri_config"
    config: dict[str, Any] = json.loads((folder / f"{name}.json").read_text())
    return config.get(scope, config)


def training_compiler_releases() -> list[str]:
    """Every Training Compiler DLC release the SDK knows, e.g. ``PyTorch 1.13.1``."""
    releases = [f"PyTorch {v}" for v in sdk_config("pytorch-training-compiler")["versions"]]
    for transformers, entry in sdk_config("huggingface-training-compiler")["versions"].items():
        for base in entry:
            if base.startswith("pytorch"):
                releases.append(
                    f"Hugging Face Transformers {transformers} with PyTorch {base[len('pytorch'):]}"
                )
    return releases


@functools.lru_cache(maxsize=256)
def resolve_dlc(framework: FrameworkRelease, training_compiler: bool, instance_type: str,
                scope: str = "training") -> DlcImage:
    """The DLC for a framework, with or without Training Compiler, on an instance type.

    Follows ``sagemaker.image_uris.retrieve`` for training images, and for inference images
    with ``scope="inference"`` (tests hold it to the SDK's answer). Raises ``ValueError``
    naming what the SDK supports when no such image exists.
    """
    config = sdk_config(_config_name(framework, training_compiler), scope)
    entry, py_version = _version_config(config, framework, training_compiler, scope)
    processor = _processor(framework, instance_type, config.get("processors")
                           or entry.get("processors"), scope)
    # Versions as spelled: a short version names the image's short tag (as the SDK's does);
    # Framework refuses a short and a full version mixed, which no tag has.
    if framework.name == "huggingface":
        tag_prefix = f"{framework.pytorch_version}-transformers{framework.version}"
    else:
        tag_prefix = entry.get("tag_prefix", framework.version)
    container = (entry.get("container_version") or {}).get(processor)
    tag = "-".join(x for x in (tag_prefix, processor, py_version, container) if x)
    return DlcImage(repository=entry["repository"], tag=tag,
                    registries=tuple(sorted(entry["registries"].items())))


def _processor(framework: FrameworkRelease, instance_type: str, available: list[str] | None,
               scope: str) -> str | None:
    if not available:
        return None
    family = instance_family(instance_type)
    processor = family if family in available else _PROCESSORS[accelerator(instance_type)]
    if processor not in available:
        raise ValueError(
            f"{framework.describe()} has no {processor.upper()} {scope} image for instance "
            f"type {instance_type!r}; it has {', '.join(p.upper() for p in available)} images"
        )
    return processor


def _config_name(framework: FrameworkRelease, training_compiler: bool) -> str:
    if training_compiler and framework.name in ("pytorch", "huggingface"):
        return f"{framework.name}-training-compiler"
    return framework.name


def _version_config(
    config: dict[str, Any], framework: FrameworkRelease, training_compiler: bool, scope: str
) -> tuple[dict[str, Any], str | None]:
    """The version's entry (for the Python version) and the Python version."""
    version = config.get("version_aliases", {}).get(framework.version, framework.version)
    if version not in config["versions"]:
        if training_compiler:
            raise ValueError(_no_training_compiler_message(framework))
        raise ValueError(
            f"{framework.describe()} has no SageMaker {scope} image; supported "
            f"{framework.name} versions: {', '.join(config['versions'])}"
        )
    entry = config["versions"][version]
    if framework.name == "huggingface":
        base = f"pytorch{framework.pytorch_version}"
        base = entry.get("version_aliases", {}).get(base, base)
        if base not in entry:
            if training_compiler:
                raise ValueError(_no_training_compiler_message(framework))
            offered = [key for key in entry if key.startswith("pytorch")]
            raise ValueError(
                f"Transformers {version} has no image with PyTorch {framework.pytorch_version}; "
                f"it comes with {', '.join(offered) or 'no PyTorch'}"
            )
        entry = entry[base]
    py_versions = entry.get("py_versions") or []
    py_version = framework.py_version or (py_versions[-1] if py_versions else None)
    if framework.py_version and py_versions and framework.py_version not in py_versions:
        raise ValueError(
            f"{framework.describe()} has no image for {framework.py_version}; "
            f"available: {', '.join(py_versions)}"
        )
    return entry.get(py_version or "", entry), py_version


def _no_training_compiler_message(framework: FrameworkRelease) -> str:
    return (
        f"Training Compiler does not support {framework.describe()}: AWS froze it and "
        f"publishes no new releases. Supported: {'; '.join(training_compiler_releases())}. "
        "For PyTorch 2.x use Compiler.torch_compile() instead."
    )
