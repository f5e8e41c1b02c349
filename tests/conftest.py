"""Shared fixtures: offline SDK settings, a synthesized reference app, sample sources."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # app.py and benchmarks/ live at the repository root

# No AWS account here: the SDK must never reach for credentials or instance metadata.
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
os.environ["SAGEMAKER_SUPPRESS_V2_WARNING"] = "1"
os.environ["JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"] = "20"


@pytest.fixture(scope="session")
def source_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.helpers import SAMPLE_ENTRY_POINT

    folder = tmp_path_factory.mktemp("source")
    (folder / "train.py").write_text(SAMPLE_ENTRY_POINT)
    (folder / "lib").mkdir()
    (folder / "lib" / "model.py").write_text("LAYERS = 2\n")
    return folder


@pytest.fixture(scope="session")
def reference_assembly(tmp_path_factory: pytest.TempPathFactory):
    """The reference platform (app.py + cdk.json), synthesized once with cdk-nag on."""
    from tests.helpers import synth_reference_app

    return synth_reference_app(tmp_path_factory.mktemp("cdk.out"))
