"""AWS Deep Learning Container images, read from the SageMaker SDK v2's image-URI configuration.

Never hand-copied: the SDK's JSON configuration is the support matrix (repositories, tags,
per-region registry accounts). The SDK is imported lazily, here only: importing it costs
about a second and prints a migration banner that a user's ``cdk synth`` must not show.
"""

from __future__ import annotations

import functools
import logging
import os
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from .framework import Framework

_REFERENCE_REGION = "us-east-1"


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
    """``sagemaker.image_uris``, imported quietly and offline."""
    os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    for name in ("sagemaker.config", "sagemaker.image_uris", "sagemaker"):
        logging.getLogger(name).setLevel(logging.WARNING)
    from sagemaker import image_uris

    return image_uris


def training_compiler_releases() -> list[str]:
    """Every Training Compiler DLC release the SDK knows, e.g. ``PyTorch 1.13.1``."""
    image_uris = sdk_image_uris()
    releases = [
        f"PyTorch {version}"
        for version in _scope(image_uris.config_for_framework("pytorch-training-compiler"))[
            "versions"
        ]
    ]
    hf = _scope(image_uris.config_for_framework("huggingface-training-compiler"))["versions"]
    for transformers, entry in hf.items():
        for base in entry:
            if base.startswith("pytorch"):
                releases.append(
                    f"Hugging Face Transformers {transformers} with PyTorch {base[len('pytorch'):]}"
                )
    return releases


@functools.lru_cache(maxsize=256)
def resolve_dlc(framework: Framework, training_compiler: bool, instance_type: str) -> DlcImage:
    """The DLC for a framework, with or without Training Compiler, on an instance type.

    Raises ``ValueError`` naming what the SDK supports when no such image exists.
    """
    image_uris = sdk_image_uris()
    config_name = _config_name(framework, training_compiler)
    version_config, py_version = _version_config(image_uris, config_name, framework,
                                                 training_compiler)
    registries = tuple(sorted(version_config["registries"].items()))
    region = _REFERENCE_REGION if _REFERENCE_REGION in dict(registries) else registries[0][0]
    kwargs: dict[str, Any] = {
        "region": region,
        "version": framework.version,
        "instance_type": instance_type,
        "image_scope": "training",
    }
    if py_version:
        kwargs["py_version"] = py_version
    if framework.name == "huggingface":
        kwargs["base_framework_version"] = f"pytorch{framework.pytorch_version}"
    if training_compiler:
        kwargs["training_compiler_config"] = _sdk_compiler_config(framework)
    try:
        uri = image_uris.retrieve(framework.name, **kwargs)
    except ValueError as error:
        raise ValueError(
            f"no {framework.describe()} training image for instance type {instance_type!r}: "
            f"{error}"
        ) from None
    repository, tag = uri.split("/", 1)[1].split(":", 1)
    return DlcImage(repository=repository, tag=tag, registries=registries)


def _sdk_compiler_config(framework: Framework) -> Any:
    if framework.name == "huggingface":
        from sagemaker.huggingface import TrainingCompilerConfig as HuggingFaceCompilerConfig

        return HuggingFaceCompilerConfig()
    from sagemaker.pytorch import TrainingCompilerConfig as PyTorchCompilerConfig

    return PyTorchCompilerConfig()


def _config_name(framework: Framework, training_compiler: bool) -> str:
    if training_compiler and framework.name in ("pytorch", "huggingface"):
        return f"{framework.name}-training-compiler"
    return framework.name


def _scope(config: dict[str, Any]) -> dict[str, Any]:
    return config.get("training", config)


def _version_config(
    image_uris: ModuleType, config_name: str, framework: Framework, training_compiler: bool
) -> tuple[dict[str, Any], str | None]:
    config = _scope(image_uris.config_for_framework(config_name))
    version = config.get("version_aliases", {}).get(framework.version, framework.version)
    if version not in config["versions"]:
        if training_compiler:
            raise ValueError(_no_training_compiler_message(framework))
        raise ValueError(
            f"{framework.describe()} has no SageMaker training image; supported "
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


def _no_training_compiler_message(framework: Framework) -> str:
    return (
        f"Training Compiler does not support {framework.describe()}: AWS froze it and "
        f"publishes no new releases. Supported: {'; '.join(training_compiler_releases())}. "
        "For PyTorch 2.x use Compiler.torch_compile() instead."
    )
