"""The catalog is current: every PyTorch and Hugging Face PyTorch training image that the newest
SageMaker SDK v3 on the package index lists, the library resolves to the URI that SDK's own
``retrieve`` composes, in every region.

This test reads the index, not the pinned copy (``SAGEMAKER_CORE``; the byte-for-byte tests in
test_image_matrix.py stay on that): it goes red on main when AWS publishes images, on purpose.
The fix is to raise ``SAGEMAKER_CORE`` in tests/environments.py to the release it names, run
``make image-matrix`` and teach the catalog what the new files need.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.catalog.sdk_v3 import differences, sdk_v3_images, summary, unknown_files


@pytest.fixture(scope="module")
def newest_sdk_v3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Python with the newest ``sagemaker-core`` the index has, installed by uv as the side
    environments are (its wheels shared through uv's cache)."""
    work = tmp_path_factory.mktemp("newest-sagemaker-core")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    install = subprocess.run([sys.executable, "-m", "uv", "pip", "install", "--quiet", "--python",
                              python, "--upgrade", "sagemaker-core"],
                             capture_output=True, text=True, check=False)
    assert install.returncode == 0, f"could not install the newest sagemaker-core: " \
                                    f"{install.stderr[-2000:]}"
    yield python
    shutil.rmtree(work, ignore_errors=True)


def test_the_catalog_resolves_every_training_image_the_newest_sdk_v3_lists(newest_sdk_v3):
    newest = sdk_v3_images(newest_sdk_v3)
    new_files = unknown_files(newest["files"])
    assert not new_files, (
        f"sagemaker-core {newest['sagemaker-core']} has PyTorch or Hugging Face image files the "
        f"catalog does not know: {', '.join(new_files)}. Read them: if they hold training images "
        "(as pytorch-amzn2023 did for 2.11), ship and resolve them (scripts/image_matrix.py, "
        "catalog/dlc.py); otherwise name them in tests/catalog/sdk_v3.py's NOT_READ.")
    found = differences(newest["rows"])
    assert not found, (
        f"sagemaker-core {newest['sagemaker-core']} (the newest on the index) lists training "
        f"images the catalog does not resolve as it does:\n{summary(found)}\nRaise "
        f"SAGEMAKER_CORE in tests/environments.py to sagemaker-core=={newest['sagemaker-core']}, "
        "run `make image-matrix`, and teach catalog/dlc.py what the new files need.")
    assert len(newest["rows"]) > 1000  # PyTorch from 0.4 and Hugging Face, GPU and CPU, by region
