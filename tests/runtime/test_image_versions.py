"""The runtime on the training images' own versions, with each image's Python: the Training
Compiler images' torch 1.13.1 on Python 3.9 (``pytorch-trcomp-training:1.13.1``) and torch 1.11
with Transformers 4.21.1 on Python 3.8 (``huggingface-pytorch-trcomp-training``), and the newest
PyTorch DLC's torch 2.14 on Python 3.12 (``pytorch:2.14-cu133-amzn2023-sagemaker``, Amazon Linux
2023), and the newest PyTorch NeuronX DLC's torch 2.9 and torch-xla 2.9 on
Python 3.12 (``pytorch-training-neuronx:2.9.0``, the image ``neuron_xla()`` resolves), each with
the runtime wheel installed as the Dockerfile installs it (no dependencies)
(tests/environments.py). The Training Compiler images' torch_xla exists only inside them: there
the runtime runs eager, which exercises every torch and Transformers API it calls.
"""

from __future__ import annotations

import pytest
import torch

from compiled_training_runtime import contract
from tests.environments import ENVS, NEWEST_GPU_IMAGE, NEWEST_NEURON_IMAGE, Environment, require
from tests.helpers import TINY_BERT
from tests.runtime.harness import (
    TORCH_COMPILE,
    metrics,
    opt_ml,
    run_direct,
    run_torchrun,
    run_until_step_then_sigterm,
)

IMAGE_ENVS = [env for env in ENVS if env.runtime and not env.torch_xla]


@pytest.fixture(params=IMAGE_ENVS, ids=lambda env: env.name)
def image(request: pytest.FixtureRequest) -> Environment:
    return require(request.param.name)


@pytest.fixture
def python(image: Environment) -> str:
    return str(image.executable)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_trains_validates_and_saves(tmp_path, python, precision):
    hps = {**TINY_BERT, "precision": precision, "log_every": 2}
    base = opt_ml(tmp_path / precision, hps, validation=8)
    result = run_direct(base, hps, python=python)
    assert result.returncode == 0, result.stderr[-4000:]
    summary = metrics(base)
    assert summary["steps"] == 8 and summary["precision"] == precision
    assert 0 <= summary["validation_accuracy"] <= 1
    assert (base / "model" / "model.pt").exists()


def test_sigterm_then_restart_resumes_bit_exact(tmp_path, python):
    hps = {**TINY_BERT, "log_every": 1, "checkpoint_every": 1}
    whole = opt_ml(tmp_path / "whole", hps)
    assert run_direct(whole, hps, python=python).returncode == 0
    interrupted = opt_ml(tmp_path / "interrupted", hps)
    assert run_until_step_then_sigterm(interrupted, hps, step=3, python=python) == 143
    resumed = run_direct(interrupted, hps, python=python)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from" in resumed.stdout
    expected = torch.load(whole / "model" / "model.pt")
    actual = torch.load(interrupted / "model" / "model.pt")
    assert all(torch.equal(actual[name], tensor) for name, tensor in expected.items())


def test_torchrun_with_two_workers(tmp_path, python):
    hps = {**TINY_BERT, "log_every": 1}
    base = opt_ml(tmp_path / "ddp", hps, train=32)
    result = run_torchrun(base, hps, workers=2, python=python)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    summary = metrics(base)
    assert summary["world_size"] == 2 and summary["steps"] == 4 and summary["samples"] == 32


def test_fp16_on_a_cpu_trains_with_a_loss_scale_where_torch_can_autocast_it(tmp_path, image):
    """torch 2.x autocasts fp16 on the CPU (and scales the loss); torch 1.x cannot, and says so."""
    hps = {**TINY_BERT, "precision": "fp16"}
    base = opt_ml(tmp_path / "fp16", hps)
    result = run_direct(base, hps, python=str(image.executable))
    if image.torch >= (2,):
        assert result.returncode == 0, result.stderr[-4000:]
        summary = metrics(base)
        assert summary["precision"] == "fp16" and summary["loss_scale"] > 0
        return
    assert result.returncode == 2, result.stderr[-3000:]
    failure = (base / "output" / "failure").read_text()
    assert failure.startswith("InputError: precision fp16 is not supported on cpu by torch 1.1")
    assert failure.endswith("use bf16 or fp32")


def test_torch_compile_has_no_graph_breaks_and_no_recompiles_on_the_newest_image(tmp_path):
    """The newest GPU DLC's torch and Python: dynamo on Python 3.12, inductor on the CPU."""
    python = str(require(NEWEST_GPU_IMAGE).executable)
    hps = {**TINY_BERT, "max_steps": 4}
    base = opt_ml(tmp_path / "compile", hps)
    result = run_direct(base, hps, python=python, environment=TORCH_COMPILE)
    assert result.returncode == 0, result.stderr[-4000:]
    assert metrics(base)["counters"] == {"graph_breaks": 0, "graphs": 1, "recompiles": 0}


def test_the_neuron_image_trains_on_the_neuron_xla_path(tmp_path):
    """The runtime as the Neuron image holds it: its Python (3.12), torch 2.9 and torch-xla
    2.9 (PyPI's build standing in for the Neuron SDK's), the XLA device the CPU standing in
    for a NeuronCore, bf16 as Trainium trains."""
    python = str(require(NEWEST_NEURON_IMAGE).executable)
    hps = {**TINY_BERT, contract.HP_NEURON_XLA: True, "precision": "bf16", "log_every": 2}
    base = opt_ml(tmp_path, hps, validation=8)
    result = run_direct(base, hps, python=python)
    assert result.returncode == 0, result.stderr[-4000:]
    summary = metrics(base)
    assert summary["compiler"] == contract.COMPILER_NEURON_XLA
    assert summary["steps"] == 8 and summary["precision"] == "bf16"
    assert summary["counters"]["compiles"] > 0
    assert (base / "model" / "model.pt").exists()
