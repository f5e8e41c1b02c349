"""The training framework a job runs: it selects the Deep Learning Container."""

from __future__ import annotations

import re
from dataclasses import dataclass

from compiled_training.typecheck import check_arguments, known_keywords

_VERSION = re.compile(r"^\d+(\.\d+){0,2}(-\d+)?$")
_PY_VERSION = re.compile(r"^py3\d{0,2}$")
_NAMES = ("huggingface", "pytorch", "xgboost")  # the frameworks whose images the library knows


@dataclass(frozen=True)
class Framework:
    """A framework and version, as the SageMaker SDK v2 names them. Use the static methods."""

    name: str
    version: str
    pytorch_version: str | None = None
    py_version: str | None = None

    def __post_init__(self) -> None:
        if self.name not in _NAMES:
            raise ValueError(
                f"Framework.name: must be one of {', '.join(_NAMES)} (build one with "
                f"{', '.join(f'Framework.{n}()' for n in _NAMES)}), got {self.name!r}")

    @staticmethod
    @known_keywords
    def pytorch(version: str, *, py_version: str | None = None) -> Framework:
        """The PyTorch estimator's images. When ``py_version`` is omitted, the newest Python
        the SDK lists for that version is used."""
        check_arguments(Framework.pytorch, locals())
        return Framework("pytorch", _checked("Framework.pytorch version", version),
                         pytorch_version=version, py_version=_checked_py(py_version))

    @staticmethod
    @known_keywords
    def huggingface(
        transformers_version: str, *, pytorch_version: str, py_version: str | None = None
    ) -> Framework:
        """The Hugging Face estimator's images: a Transformers and a PyTorch version, both
        short (``"4.21"``, ``"1.11"``) or both full (``"4.21.1"``, ``"1.11.0"``)."""
        check_arguments(Framework.huggingface, locals())
        transformers = _checked("Framework.huggingface transformers_version", transformers_version)
        pytorch = _checked("Framework.huggingface pytorch_version", pytorch_version)
        if transformers.count(".") != pytorch.count("."):
            # Image tags carry both versions in one form; the SDK refuses a mix as well.
            raise ValueError(
                "Framework.huggingface transformers_version and pytorch_version must be both "
                "short ('4.21', '1.11') or both full ('4.21.1', '1.11.0'): no image is tagged "
                f"with a mix, got {transformers!r} and {pytorch!r}"
            )
        return Framework("huggingface", transformers, pytorch_version=pytorch,
                         py_version=_checked_py(py_version))

    @staticmethod
    @known_keywords
    def xgboost(version: str) -> Framework:
        """SageMaker's built-in XGBoost algorithm image (for example ``1.7-1``); CPU."""
        check_arguments(Framework.xgboost, locals())
        return Framework("xgboost", _checked("Framework.xgboost version", version))

    @property
    def is_deep_learning(self) -> bool:
        """Whether a deep-learning compiler can apply at all."""
        return self.pytorch_version is not None

    @property
    def runs_script(self) -> bool:
        """Framework images run the user's entry point; built-in algorithms run their own."""
        return self.name != "xgboost"

    def describe(self) -> str:
        if self.name == "huggingface":
            return f"Hugging Face {self.version} (PyTorch {self.pytorch_version})"
        return {"pytorch": "PyTorch", "xgboost": "XGBoost"}[self.name] + f" {self.version}"


def _checked(field: str, version: str) -> str:
    if not isinstance(version, str) or not _VERSION.match(version):
        raise ValueError(
            f"{field} must be a version such as '1.13.1' or '1.7-1', got {version!r}"
        )
    return version


def _checked_py(py_version: str | None) -> str | None:
    if py_version is not None and not _PY_VERSION.match(str(py_version)):
        raise ValueError(f"py_version must look like 'py39' or 'py310', got {py_version!r}")
    return py_version
