"""Writes the Deep Learning Container image matrix the library ships, from the maintained
SageMaker SDK's (v3's) image configuration: ``make image-matrix``.

The library reads no SageMaker SDK at run time: it ships the SDK's own image-URI configuration
files that it resolves images from (repositories, tags, Python versions, processors, per-region
registry accounts), copied byte for byte from ``sagemaker-core``'s
``sagemaker/core/image_uri_config/``, plus the SDK's list of PyTorch versions it runs with
``torch_distributed`` (its ``fw_utils``), and ``SOURCE.json`` saying which release and file
each came from (with its SHA-256). ``sagemaker-core`` is installed in its own environment
(``.venvs/sagemaker-core``, as ``tests/environments.py`` builds it): the SDK v2 that the tests use
as an oracle pins ``sagemaker-core<2``. Tests hold the shipped files equal to that
environment's and the resolved images equal to SDK v2's for every entry both know.
"""

from __future__ import annotations

import ast
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.environments import IMAGE_CONFIG, SAGEMAKER_CORE, build, built, named, site_packages  # noqa: E402

TARGET = ROOT / "constructs" / "compiled_training" / "catalog" / "image-uri-config"
# The configurations the library resolves images from: training and inference (PyTorch from 2.11
# in pytorch-amzn2023, the Amazon Linux 2023 images); for Trainium,
# the registries of the PyTorch NeuronX repository (the SDK's only file naming it) and of the
# Hugging Face NeuronX one (its tags come from AWS's tables: catalog/neuron-training-images.json),
# and the legacy PyTorch Neuron line (1.11.0), which both SDKs resolve on ml.trn*.
CONFIGS = ("pytorch", "pytorch-amzn2023", "pytorch-training-compiler", "huggingface",
           "huggingface-training-compiler", "xgboost", "hyperpod-recipes-neuron",
           "huggingface-neuronx", "pytorch-neuron")
RULES = "sdk-rules.json"


def torch_distributed_versions(fw_utils: Path) -> list[str]:
    """``TORCH_DISTRIBUTED_GPU_SUPPORTED_FRAMEWORK_VERSIONS``, read without importing the SDK."""
    for node in ast.parse(fw_utils.read_text()).body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == \
                "TORCH_DISTRIBUTED_GPU_SUPPORTED_FRAMEWORK_VERSIONS":
            return list(ast.literal_eval(node.value))
    raise SystemExit(f"{fw_utils} no longer lists the torch_distributed versions")


def main() -> int:
    print(build(named(IMAGE_CONFIG), wheel=Path()), flush=True)
    env = built(IMAGE_CONFIG)  # or the one line why not
    core = site_packages(env) / "sagemaker" / "core"
    TARGET.mkdir(exist_ok=True)
    files = {}
    for name in CONFIGS:
        data = (core / "image_uri_config" / f"{name}.json").read_bytes()
        (TARGET / f"{name}.json").write_bytes(data)
        files[f"{name}.json"] = {"from": f"sagemaker/core/image_uri_config/{name}.json",
                                 "sha256": hashlib.sha256(data).hexdigest()}
    rules = {"torch_distributed_gpu_versions": torch_distributed_versions(core / "fw_utils.py")}
    (TARGET / RULES).write_text(json.dumps(rules, indent=2) + "\n")
    files[RULES] = {"from": "sagemaker/core/fw_utils.py: "
                            "TORCH_DISTRIBUTED_GPU_SUPPORTED_FRAMEWORK_VERSIONS"}
    source = {"requirement": SAGEMAKER_CORE, "generated_by": "make image-matrix",
              "files": files}
    (TARGET / "SOURCE.json").write_text(json.dumps(source, indent=2, sort_keys=True) + "\n")
    print(f"wrote {len(files)} files to {TARGET.relative_to(ROOT)} from {SAGEMAKER_CORE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
