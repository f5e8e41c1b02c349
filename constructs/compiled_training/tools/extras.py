"""Optional dependencies: which extra brings them, and one line naming it when one is missing.

The constructs need none of them; plotting, the local benchmarks and local runs do.
"""

from __future__ import annotations

from importlib.util import find_spec

# The modules each extra in pyproject.toml installs, by import name.
EXTRAS = {
    "plot": ("matplotlib",),
    "bench": ("torch", "transformers", "tqdm", "matplotlib"),
    "local": ("boto3", "moto"),
}


class MissingExtraError(ImportError):
    """An optional dependency is not installed; the message names the extra that brings it."""


def require_extra(extra: str, purpose: str) -> None:
    """Raises `MissingExtraError` unless every module of ``extra`` can be imported.

    Only looks the modules up (no import), so checking torch costs nothing.
    """
    missing = [module for module in EXTRAS[extra] if find_spec(module) is None]
    if missing:
        raise MissingExtraError(f"{purpose} needs {', '.join(missing)} (not installed): "
                                f"pip install 'compiled-training[{extra}]'")
