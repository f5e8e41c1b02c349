"""Every PyTorch and Hugging Face PyTorch training image a SageMaker SDK v3 (``sagemaker-core``)
resolves, as its own ``image_uris.retrieve`` composes it: run by the Python of an environment that
has that SDK (``python sdk_v3_images.py``), it prints one JSON object.

It also names every ``pytorch*`` and ``huggingface*`` configuration file the SDK has. Each row is
a framework as the library spells it (``pytorch`` or ``huggingface``, the version, the
Hugging Face PyTorch version, the Python), a processor, a region and the URI, or the SDK's error.
The SDK's framework for PyTorch 2.11 and later is ``pytorch-amzn2023``.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
from pathlib import Path

from sagemaker.core import common_utils, image_uris
from sagemaker.core.image_uris import config_for_framework

INSTANCES = {"gpu": "ml.g5.xlarge", "cpu": "ml.m5.xlarge"}
PYTORCH_CONFIGS = ("pytorch", "pytorch-amzn2023")


def _retrieve(**kwargs: str | None) -> str:
    try:
        return image_uris.retrieve(image_scope="training", **kwargs)
    except ValueError as error:
        return f"error: {error}"


def _processors(config: dict, entry: dict) -> list[str]:
    return [p for p in config.get("processors") or entry.get("processors") or []
            if p in INSTANCES]


def pytorch_rows() -> list[dict]:
    rows = []
    for name in PYTORCH_CONFIGS:
        config = config_for_framework(name)["training"]
        for version, entry in config["versions"].items():
            for py_version in entry.get("py_versions") or [None]:
                for processor in _processors(config, entry):
                    for region in sorted(entry["registries"]):
                        rows.append({
                            "config": name, "framework": "pytorch", "version": version,
                            "pytorch_version": None, "py_version": py_version,
                            "processor": processor, "region": region,
                            "uri": _retrieve(framework=name, region=region, version=version,
                                             py_version=py_version,
                                             instance_type=INSTANCES[processor])})
    return rows


def huggingface_rows() -> list[dict]:
    rows = []
    config = config_for_framework("huggingface")["training"]
    for version, bases in config["versions"].items():
        for base, entry in bases.items():
            if not base.startswith("pytorch") or not isinstance(entry, dict) \
                    or "registries" not in entry:
                continue  # TensorFlow bases, and the version's own aliases
            for py_version in entry.get("py_versions") or [None]:
                for processor in _processors(config, entry):
                    for region in sorted(entry["registries"]):
                        rows.append({
                            "config": "huggingface", "framework": "huggingface",
                            "version": version, "pytorch_version": base.removeprefix("pytorch"),
                            "py_version": py_version, "processor": processor, "region": region,
                            "uri": _retrieve(framework="huggingface", region=region,
                                             version=version, py_version=py_version,
                                             base_framework_version=base,
                                             instance_type=INSTANCES[processor])})
    return rows


def main() -> int:
    logging.disable(logging.CRITICAL)  # the SDK logs each default it picks
    # Each call reloads botocore's endpoint file (70 ms); loaded once, every answer is the same.
    common_utils._botocore_resolver = functools.cache(common_utils._botocore_resolver)
    from importlib.metadata import version

    folder = Path(image_uris.__file__).parent / "image_uri_config"
    files = sorted(p.stem for pattern in ("pytorch*.json", "huggingface*.json")
                   for p in folder.glob(pattern))
    json.dump({"sagemaker-core": version("sagemaker-core"), "files": files,
               "rows": pytorch_rows() + huggingface_rows()}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
