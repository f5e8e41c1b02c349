"""The image a job names, as a local run stands in for it: which ``--python`` runs the job and
which launcher the image would start, or why the image's own program cannot run here.

Images are told apart by their repository: AWS's framework images (PyTorch, Hugging Face
PyTorch, scikit-learn, XGBoost) run their script mode; a repository of none of AWS's images is
the team's own (``RuntimeImage``, ``TrainingImage.from_ecr_repository``), which runs its script
as the PyTorch images do, since the library's images extend them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# What the PyTorch and Hugging Face PyTorch images set: the toolkit hands the job to the
# PyTorch container's launcher logic, which picks the runner (pytorchxla, torchrun, one process).
PYTORCH_LAUNCHER = "sagemaker_pytorch_container.training:main"

PYTORCH, SKLEARN, XGBOOST, CUSTOM = "pytorch", "sklearn", "xgboost", "custom"
KINDS = (PYTORCH, SKLEARN, XGBOOST, CUSTOM)
"""The image kinds ``--python KIND=PYTHON`` names."""

_PYTORCH_REPOSITORIES = re.compile(
    r"(huggingface-)?pytorch(-trcomp)?(-training)?(-neuronx?)?")
_SCRIPT_MODE = {"sagemaker-scikit-learn": SKLEARN, "sagemaker-xgboost": XGBOOST}
_OTHER_FRAMEWORKS = {"tensorflow": "TensorFlow", "mxnet": "MXNet", "chainer": "Chainer",
                     "spark": "Spark", "rl-": "reinforcement learning"}
# SageMaker's built-in algorithms and AWS's own processing containers (the SDK's
# image_uri_config files): their program is the image's, which does not exist here.
_AWS_PROGRAMS = ("xgboost", "linear-learner", "factorization-machines", "kmeans", "pca", "lda",
                 "ntm", "randomcutforest", "knn", "object2vec", "ipinsights", "blazingtext",
                 "image-classification", "object-detection", "semantic-segmentation",
                 "seq2seq", "forecasting-deepar", "sagemaker-clarify-processing",
                 "sagemaker-model-monitor-analyzer", "sagemaker-data-wrangler-container",
                 "sagemaker-debugger-rules", "autogluon-training", "djl-inference")


@dataclass(frozen=True)
class Image:
    """An image as the run stands in for it."""

    uri: str
    kind: str
    """One of `KINDS`, or ``""`` when the image's own program would have to run."""
    refusal: str = ""
    """Why it cannot run here (a kind of image whose launcher is not emulated)."""


    @property
    def launcher(self) -> str | None:
        """The training module the image's toolkit starts; None: the script itself."""
        return PYTORCH_LAUNCHER if self.kind in (PYTORCH, CUSTOM) else None


def shown(uri: str) -> str:
    """An image as the report names it: its repository and tag, without the registry."""
    return uri.rpartition("/")[2] or uri


def repository(uri: str) -> str:
    """An image URI's repository name, without registry, tag or digest."""
    return re.split(r"[:@]", uri.rpartition("/")[2])[0]


def classify(uri: str, *, script_mode: bool) -> Image:
    """The image ``uri`` names, for a job that names its own script or command (``script_mode``)
    or leaves the image's own program to run."""
    name, named = repository(uri), shown(uri)
    for word, framework in _OTHER_FRAMEWORKS.items():
        if word in name:
            return Image(uri, "", f"a {framework} image ({named}), whose launcher is not "
                                  f"emulated here")
    if _PYTORCH_REPOSITORIES.fullmatch(name):
        return Image(uri, PYTORCH)
    if name in _SCRIPT_MODE and script_mode:
        return Image(uri, _SCRIPT_MODE[name])
    if name in _SCRIPT_MODE or name in _AWS_PROGRAMS:
        return Image(uri, "", f"a built-in algorithm ({named}), whose container does not exist "
                              f"here")
    if not script_mode:
        return Image(uri, "", f"an image of your own ({named}) with no script or entry point "
                              f"named: its own program does not exist here")
    return Image(uri, CUSTOM)
