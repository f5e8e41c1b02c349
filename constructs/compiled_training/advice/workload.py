"""A training workload as the advisor reads it: what a user writes about a job, and the words
it may use (model families, precisions, bottlenecks)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from compiled_training.catalog.dlc import (
    PyTorchRelease,
    all_regions,
    has_training_image,
    pytorch_versions,
    resolve_dlc,
)
from compiled_training.catalog.instances import instance_type_problem
from compiled_training.catalog.neuron import is_trainium
from compiled_training.typecheck import check_arguments
from compiled_training_runtime import contract

# Specific names, as a user writes them (lower case; '_' and ' ' read as '-'), by category.
# ViT counts as vision (TIMM's suite holds it); U-Net as diffusion, the denoiser that Stable
# Diffusion fine-tunes train.
_NAMES = {
    "transformer": ("bert", "roberta", "distilbert", "albert", "electra", "deberta", "xlnet",
                    "xlm-roberta", "gpt2", "gpt-neo", "gpt-j", "opt", "bloom", "llama", "mistral",
                    "t5", "bart", "pegasus", "marian", "llm"),
    "vision": ("vit", "deit", "swin", "convnext", "resnet", "resnext", "efficientnet",
               "mobilenet", "densenet", "vgg", "inception", "regnet", "yolo", "detr", "cnn"),
    "diffusion": ("unet", "stable-diffusion", "sdxl", "ddpm", "latent-diffusion", "controlnet"),
    "tabular": ("gradient-boosted-trees", "xgboost", "lightgbm", "catboost", "gbdt",
                "random-forest"),
    "custom": (),
}
CATEGORIES = tuple(_NAMES)
MODEL_CATEGORIES: Mapping[str, str] = {
    name: category for category, names in _NAMES.items() for name in (category, *names)}

PYTORCH_FRAMEWORKS = ("pytorch", "huggingface")
FRAMEWORKS = (*PYTORCH_FRAMEWORKS, "tensorflow", "mxnet", "chainer", "sklearn", "xgboost",
              "autogluon")
"""The training frameworks the advisor judges: the SageMaker SDK v2's names for them."""
PRECISIONS = ("fp32", "fp16", "bf16")
BOTTLENECKS = ("compute", "data-loading", "communication")
_VERSION = re.compile(r"\d+(\.\d+){0,2}")


class Verdict(str, Enum):
    """Worst to best: a factor's verdict is the best it allows, the workload's the lowest."""

    SKIP = "SKIP"
    BENCHMARK = "BENCHMARK"
    ENABLE = "ENABLE"

    @property
    def rank(self) -> int:
        return list(Verdict).index(self)


@dataclass(frozen=True)
class WorkloadProfile:
    """What decides whether a compiler pays for a training workload."""

    name: str
    framework: str
    """``pytorch``, ``huggingface``, ``tensorflow``, ``xgboost``, ...: the SageMaker SDK's names."""
    model_family: str
    """A category (transformer, vision, diffusion, tabular, custom) or a name such as bert,
    gpt2, vit, resnet or unet; an unknown word is treated as custom."""
    instance_type: str
    instance_count: int
    hours_per_run: float
    runs_per_week: float
    static_shapes: bool
    precision: str
    batch_size: int | None = None
    learning_rate: float | None = None
    bottleneck: str | None = None
    region: str = "us-east-1"
    framework_version: str | None = None
    """The job's PyTorch version (for ``huggingface``, the PyTorch under Transformers): 2.x
    means torch.compile, a Training Compiler release means Training Compiler. When omitted,
    Training Compiler where it fits and has published gains, otherwise torch.compile."""

    def __post_init__(self) -> None:
        check_arguments(WorkloadProfile, vars(self))
        problems = self._name_problems()
        if unknown_instance := instance_type_problem(self.instance_type):
            problems.append(unknown_instance)
        if self.instance_count < 1:
            problems.append(f"instance_count must be at least 1, got {self.instance_count}")
        if not self.hours_per_run > 0:
            problems.append(f"hours_per_run must be positive, got {self.hours_per_run}")
        if self.runs_per_week < 0:
            problems.append(f"runs_per_week must not be negative, got {self.runs_per_week}")
        if self.precision not in PRECISIONS:
            problems.append(contract.not_one_of("precision", self.precision, PRECISIONS))
        if self.bottleneck is not None and self.bottleneck not in BOTTLENECKS:
            problems.append(contract.not_one_of("bottleneck", self.bottleneck, BOTTLENECKS))
        if self.batch_size is not None and self.batch_size < 1:
            problems.append(f"batch_size must be at least 1, got {self.batch_size}")
        if self.framework_version is not None and not _VERSION.fullmatch(self.framework_version):
            problems.append(f"framework_version must be a version such as '2.3' or '1.13.1', "
                            f"got {self.framework_version!r}")
        elif unknown_version := self._unknown_version():
            problems.append(unknown_version)
        if problems:
            raise ValueError(f"workload {self.name!r}: " + "; ".join(problems))

    def _name_problems(self) -> list[str]:
        """The framework and the region, each a word of a closed set."""
        problems = []
        if self.framework not in FRAMEWORKS:
            problems.append(contract.not_one_of("framework", self.framework, FRAMEWORKS))
        if self.region not in all_regions():
            problems.append(f"region {self.region!r} has no SageMaker training image"
                            f"{contract.did_you_mean(self.region, all_regions())}; regions "
                            f"with one: {', '.join(all_regions())}")
        return problems

    def _unknown_version(self) -> str | None:
        """Why the job's image does not exist, as a pipeline would refuse it (a PyTorch version
        on a GPU or CPU instance type, in its region); None where it exists. On Trainium, and
        for Hugging Face (whose Transformers version the workload does not give), a version
        some image has is advised (on Trainium: which version to move to)."""
        version = self.framework_version
        if version is None or self.framework not in PYTORCH_FRAMEWORKS:
            return None
        if self.framework == "pytorch" and not is_trainium(self.instance_type):
            try:
                image = resolve_dlc(PyTorchRelease(version), False, self.instance_type)
                if self.region in all_regions():
                    image.account(self.region)
            except ValueError as error:
                return str(error)
            return None
        if has_training_image(self.framework, version):
            return None
        versions = pytorch_versions(self.framework)
        close = difflib.get_close_matches(version, versions, n=1)
        guess = f"did you mean {close[0]}? " if close else ""
        return (f"framework_version {version!r} has no SageMaker training image for "
                f"{self.framework} in any region; {guess}PyTorch versions with one: "
                f"{', '.join(versions)}")


def model_category(model_family: str) -> tuple[str, bool]:
    """The category of a model family, and whether the word was known (unknown: custom)."""
    word = re.sub(r"[\s_]+", "-", model_family.strip().lower())
    return MODEL_CATEGORIES.get(word, "custom"), word in MODEL_CATEGORIES
