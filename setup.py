"""The library's version and dependencies, which pyproject.toml leaves to this file.

One version for the library and its runtime, written once: the runtime's ``__version__``
(``runtime/compiled_training_runtime/__init__.py``), read here as text (the runtime is not
imported at build time), and the runtime pinned to it exactly, so that the constructs always
ship the runtime they were tested with. The sdist carries that file (MANIFEST.in).
"""

from __future__ import annotations

import ast
from pathlib import Path

from setuptools import setup

RUNTIME_INIT = Path(__file__).parent / "runtime" / "compiled_training_runtime" / "__init__.py"


def version() -> str:
    for node in ast.parse(RUNTIME_INIT.read_text()).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "__version__"):
            return str(ast.literal_eval(node.value))
    raise SystemExit(f"{RUNTIME_INIT} has no __version__")


VERSION = version()

setup(
    version=VERSION,
    # What the constructs need at deploy time; plotting and the local benchmarks are extras.
    install_requires=[
        "aws-cdk-lib>=2.200.0,<3",
        "constructs>=10.3.0,<11",
        "cdk-nag>=3.0.0,<4",
        # The SageMaker API's shapes (the request checks). No SageMaker SDK: the image matrix
        # ships as package data (catalog/image-uri-config, from SDK v3's configuration).
        "botocore>=1.35",
        f"compiled-training-runtime=={VERSION}",
        # `compiled-training advise` reads a workloads YAML file.
        "pyyaml>=6",
        # Required, Unpack and TypedDict's keys as Python 3.11 reads them, on 3.10 too.
        "typing-extensions>=4.6",
    ],
)
