"""AWS Deep Learning Container images, from the SageMaker SDK's image-URI configuration.

Never hand-copied: the SDK's JSON configuration is the support matrix (repositories, tags,
per-region registry accounts). The library ships the maintained SDK's (v3's) files as package
data (``catalog/image-uri-config/``, written by ``make image-matrix``, whose ``SOURCE.json``
names the release) and imports no SageMaker SDK: a team's app may use either SDK, or none.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any, Protocol

from compiled_training.catalog import neuron
from compiled_training.catalog.aws_names import url_suffix
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
    release: str = ""
    """Whose image it is, as errors name it (``PyTorch 2.14's training image``)."""

    @property
    def regions(self) -> list[str]:
        return [region for region, _ in self.registries]

    def account(self, region: str) -> str:
        accounts = dict(self.registries)
        if region not in accounts:
            raise ValueError(
                f"{self.release or 'The image'} ({self.path}) is not published in {region}; "
                f"the regions that have it: {', '.join(self.regions)}"
            )
        return accounts[region]

    def uri(self, region: str) -> str:
        """The image's URI in a region, as ``image_uris.retrieve`` composes it."""
        return f"{self.account(region)}.dkr.ecr.{region}.{url_suffix(region)}/{self.path}"

    @property
    def path(self) -> str:
        """``repository:tag``, the part of the URI after the registry host."""
        return f"{self.repository}:{self.tag}"


IMAGES = resources.files(__package__) / "image-uri-config"


@functools.lru_cache(maxsize=64)
def image_config(name: str, scope: str = "training") -> dict[str, Any]:
    """One of the SDK's ``image_uri_config/<name>.json`` files, as shipped with the library.
    ``scope``: ``training`` or ``inference``."""
    config: dict[str, Any] = json.loads((IMAGES / f"{name}.json").read_text())
    return config.get(scope, config)


# torchrun is the toolkit's, not the SDK's: every SageMaker PyTorch training DLC from 1.13.1 on
# installs sagemaker-training (its TorchDistributedRunner) and sagemaker-pytorch-training, which
# starts that runner whenever `sagemaker_torch_distributed_enabled` is true, whatever the torch
# version; the Amazon Linux 2023 images (2.11 on) too, with the same training module
# (docs/guides/your-own-app.md cites their Dockerfiles). The SDKs' own list (sdk-rules.json) is a
# validation of theirs that stops at 2.8.0 and that they skip when an image is given.
TORCHRUN_SINCE = "1.13.1"
"""The first PyTorch whose SageMaker training DLC launches torchrun."""


@functools.cache
def sdk_torch_distributed_versions() -> tuple[str, ...]:
    """The PyTorch versions the SageMaker SDK launches with ``torch_distributed`` on GPUs
    without a given image (SDK v3's list, identical to v2's; frozen at 2.8.0)."""
    rules = json.loads((IMAGES / "sdk-rules.json").read_text())
    return tuple(rules["torch_distributed_gpu_versions"])


def pytorch_release(version: str) -> str:
    """A PyTorch version as the image matrix names its release (``2.9`` -> ``2.9.0``)."""
    config = image_config("pytorch")
    return str(config.get("version_aliases", {}).get(version, version))


def launches_torchrun(pytorch_version: str) -> bool:
    """Whether a PyTorch version's training image runs ``torch_distributed`` (torchrun)."""
    return (release_key(pytorch_release(pytorch_version)) >= release_key(TORCHRUN_SINCE)
            or pytorch_version in sdk_torch_distributed_versions())


def torch_distributed_versions() -> tuple[str, ...]:
    """The PyTorch releases with a GPU training DLC that launches torchrun, oldest first."""
    return tuple(version for config in (image_config("pytorch"), image_config(AMAZON_LINUX))
                 for version, entry in config["versions"].items()
                 if launches_torchrun(version) and "gpu" in _entry_processors(config, entry))


def _entry_processors(config: dict[str, Any], entry: dict[str, Any]) -> list[str]:
    return list(config.get("processors") or entry.get("processors") or [])


def release_key(version: str) -> tuple[int, ...]:
    """A version as numbers, to sort releases (``2.10.0`` after ``2.9.0``)."""
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def training_compiler_releases() -> list[str]:
    """Every Training Compiler DLC release the SDK knows, e.g. ``PyTorch 1.13.1``."""
    releases = [f"PyTorch {v}" for v in image_config("pytorch-training-compiler")["versions"]]
    for transformers, entry in image_config("huggingface-training-compiler")["versions"].items():
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
    naming what the SDK supports when no such image exists. On Trainium, the PyTorch NeuronX
    training images (`neuron`), which neither SDK resolves.
    """
    if scope == "training" and neuron.is_trainium(instance_type):
        return _neuron_dlc(framework, training_compiler, instance_type)
    amazon_linux = (amazon_linux_version(framework.version) if scope == "training"
                    and not training_compiler and framework.name == "pytorch" else None)
    if amazon_linux:
        entry, py_version = _amazon_linux_entry(framework, amazon_linux)
        config = image_config(AMAZON_LINUX)
    else:
        config = image_config(_config_name(framework, training_compiler), scope)
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
    # The Amazon Linux tags carry the processor in their container version (cu133, cpu).
    shown = processor if entry.get("processor_in_tag", True) else None
    tag = "-".join(x for x in (tag_prefix, shown, py_version, container) if x)
    kind = "Training Compiler" if training_compiler else scope
    return DlcImage(repository=entry["repository"], tag=tag,
                    registries=tuple(sorted(entry["registries"].items())),
                    release=f"{framework.describe()}'s {kind} image")


def _neuron_dlc(framework: FrameworkRelease, training_compiler: bool,
                instance_type: str) -> DlcImage:
    if training_compiler or framework.name not in (neuron.PYTORCH, neuron.HUGGINGFACE):
        what = "Training Compiler" if training_compiler else framework.describe()
        raise ValueError(f"{what} has no Trainium training image; Trainium trains "
                         f"Framework.pytorch(...) or Framework.huggingface(...) on the Neuron "
                         f"SDK's PyTorch images")
    legacy = _legacy_neuron_dlc(framework, instance_type)
    if legacy is not None:
        return legacy
    if framework.name == neuron.HUGGINGFACE:
        image = neuron.neuron_image(framework.pytorch_version or "", instance_type,
                                    transformers=framework.version)
    else:
        image = neuron.neuron_image(framework.version, instance_type)
    if framework.py_version and framework.py_version != image.python:
        raise ValueError(f"{framework.describe()}'s Neuron training image {image.tag} has "
                         f"{image.python}, not {framework.py_version}")
    return DlcImage(repository=neuron.repository(framework.name), tag=image.tag,
                    registries=neuron.registries(
                        image_config(neuron.registries_source(framework.name)), framework.name,
                        image.transformers),
                    release=f"{framework.describe()}'s Neuron training image")


def _legacy_neuron_dlc(framework: FrameworkRelease, instance_type: str) -> DlcImage | None:
    """PyTorch 1.11.0's ``pytorch-training-neuron`` image, built as both SDKs build it from
    their ``pytorch-neuron`` configuration (its version as spelled, then ``neuron``, the
    Python, the Neuron SDK and the OS); None for any other framework or version."""
    config = image_config(neuron.legacy()["config"])
    version = config.get("version_aliases", {}).get(framework.version, framework.version)
    if framework.name != neuron.PYTORCH or version not in config["versions"]:
        return None
    if problem := neuron.legacy_problem(instance_type):
        raise ValueError(problem)
    entry = config["versions"][version]
    py_version = framework.py_version or entry["py_versions"][-1]
    if py_version not in entry["py_versions"]:
        raise ValueError(f"{framework.describe()}'s Neuron training image has "
                         f"{', '.join(entry['py_versions'])}, not {py_version}")
    sdk = max(entry["sdk_versions"], key=release_key)
    tag = "-".join((framework.version, "neuron", py_version, sdk,
                    entry["container_version"]["trn"]))
    return DlcImage(repository=entry["repository"], tag=tag,
                    registries=tuple(sorted(entry["registries"].items())),
                    release=f"{framework.describe()}'s Neuron training image")


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
        minor = ".".join(framework.version.split(".")[:2])
        if scope == "training" and framework.name == "pytorch" and amazon_linux_version(minor):
            raise ValueError(f"{framework.describe()} has no SageMaker training image: from "
                             f"2.11 on AWS publishes one image a minor version, which it moves "
                             f"to each patch release it adopts; give {minor!r}")
        raise ValueError(
            f"{framework.describe()} has no SageMaker {scope} image; supported "
            f"{framework.name} versions: {', '.join(_versions(framework.name, scope))}"
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


# --- the Amazon Linux 2023 PyTorch images (2.11 on) ---------------------------------------------

AMAZON_LINUX = "pytorch-amzn2023"
"""SDK v3's configuration of the PyTorch training images from 2.11 on: repository ``pytorch``,
one image a minor version (``2.14-cu133-amzn2023-sagemaker``), no Python in the tag."""

# The configuration names no Python: each image's comes from AWS's PyTorch DLC changelog and
# image configs (docs/guides/your-own-app.md cites them). A version without one here fails a test.
AMAZON_LINUX_PYTHONS = {"2.11": "py312", "2.12": "py312", "2.13": "py312", "2.14": "py312"}


def amazon_linux_version(version: str) -> str | None:
    """The Amazon Linux 2023 image a PyTorch version trains on, by its configuration key:
    ``2.14`` for ``2.14`` (the SDK's spelling) and for ``2.14.0`` (the library's own alias, the
    full spelling the older images take). A patch release is no alias: the image is the minor
    version's, which AWS moves to each patch release it adopts."""
    config = image_config(AMAZON_LINUX)
    short = version.removesuffix(".0") if version.count(".") == 2 else version
    short = config.get("version_aliases", {}).get(short, short)
    return short if short in config["versions"] else None


def _amazon_linux_entry(framework: FrameworkRelease, version: str
                        ) -> tuple[dict[str, Any], None]:
    """The version's entry; no Python, which its tag does not name and the SDK ignores, but a
    ``py_version`` other than the image's is refused."""
    python = AMAZON_LINUX_PYTHONS.get(version)
    if framework.py_version and framework.py_version != python:
        having = f"has {python}" if python else "has a Python this library has not established"
        raise ValueError(f"{framework.describe()}'s training image (Amazon Linux 2023) {having}, "
                         f"not {framework.py_version}: omit py_version"
                         + (f" or give {python}" if python else ""))
    return image_config(AMAZON_LINUX)["versions"][version], None


_HUGGING_FACE_CONFIGS = ("huggingface", "huggingface-training-compiler")


@functools.cache
def pytorch_versions(framework: str) -> tuple[str, ...]:
    """Every PyTorch version some region has a training image for, as the images name them:
    ``pytorch`` (GPU, CPU, Trainium) or the PyTorch under ``huggingface``'s Transformers."""
    if framework == neuron.HUGGINGFACE:
        found = {base.removeprefix("pytorch") for name in _HUGGING_FACE_CONFIGS
                 for entry in image_config(name)["versions"].values()
                 for base in entry if base.startswith("pytorch")}
        found |= {image.pytorch for image in neuron.neuron_images(neuron.HUGGINGFACE)}
    else:
        found = {*image_config("pytorch")["versions"], *image_config(AMAZON_LINUX)["versions"],
                 *(image.pytorch for image in neuron.neuron_images())}
    return tuple(sorted(found, key=release_key))


@dataclass(frozen=True)
class PyTorchRelease:
    """A PyTorch version as the image matrix reads a framework (`FrameworkRelease`), for
    callers that hold no ``Framework`` (the advisor)."""

    version: str
    name: str = "pytorch"
    py_version: str | None = None

    @property
    def pytorch_version(self) -> str:
        return self.version

    def describe(self) -> str:
        return f"PyTorch {self.version}"


def all_regions() -> tuple[str, ...]:
    """Every region some PyTorch training image is published in."""
    return tuple(sorted({region for name in ("pytorch", AMAZON_LINUX)
                         for entry in image_config(name)["versions"].values()
                         for region in entry.get("registries", {})}))


def has_training_image(framework: str, pytorch_version: str) -> bool:
    """Whether some region has a training image of this PyTorch version, in any spelling the
    constructs take (``2.9``, ``2.9.0``, ``2.14``, ``2.14.0``)."""
    versions = pytorch_versions(framework)
    if pytorch_version in versions or (framework != neuron.HUGGINGFACE
                                       and amazon_linux_version(pytorch_version)):
        return True
    aliases = image_config("pytorch")["version_aliases"] if framework != neuron.HUGGINGFACE \
        else {alias.removeprefix("pytorch"): full.removeprefix("pytorch")
              for name in _HUGGING_FACE_CONFIGS for entry in image_config(name)["versions"].values()
              for alias, full in entry.get("version_aliases", {}).items()}
    return aliases.get(pytorch_version) in versions


def _versions(framework: str, scope: str) -> list[str]:
    """The versions a framework has images for, as the refusal lists them."""
    versions = list(image_config(framework, scope)["versions"])
    if framework == "pytorch" and scope == "training":
        versions += image_config(AMAZON_LINUX)["versions"]
    return versions


def _no_training_compiler_message(framework: FrameworkRelease) -> str:
    return (
        f"Training Compiler does not support {framework.describe()}: AWS froze it and "
        f"publishes no new releases. Supported: {'; '.join(training_compiler_releases())}. "
        "For PyTorch 2.x use Compiler.torch_compile() instead."
    )
