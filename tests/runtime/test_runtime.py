"""The training runtime, run as SageMaker runs it, on a tiny BERT with random weights.

Counted, not timed: graphs compiled, graphs executed, host transfers, graph breaks.
"""

from __future__ import annotations

import re

import pytest
import torch

from compiled_training_runtime import contract
from tests.helpers import TINY_BERT
from tests.runtime.harness import (
    TORCH_COMPILE,
    metrics,
    opt_ml,
    run_direct,
    run_torchrun,
    run_until_step_then_sigterm,
)

XLA = {"sagemaker_training_compiler_enabled": True}
# The Neuron SDK's PyTorch/XLA path, as the constructs switch it on. XLA:CPU (PJRT_DEVICE=CPU)
# stands in for the NeuronCores and neuronx-cc, which cannot exist here; one process, so no
# process group is joined (the two-rank run through the toolkit is issue 24's runtime step).
NEURON_XLA = {contract.HP_NEURON_XLA: True}  # 0.2.0's form, still read


def _train(tmp_path, name, hyperparameters, **data):
    base = opt_ml(tmp_path / name, hyperparameters, **data)
    result = run_direct(base, hyperparameters)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return base, result


def test_eager_run_writes_model_metrics_and_checkpoint_where_sagemaker_expects(tmp_path):
    base, result = _train(tmp_path, "eager", {**TINY_BERT, "log_every": 2}, validation=8)
    assert (base / "model" / "model.pt").exists()
    assert (base / "checkpoints" / "checkpoint.pt").exists()
    summary = metrics(base)
    assert summary["compiler"] == "none" and summary["steps"] == 8
    assert 0 <= summary["validation_accuracy"] <= 1
    # Every metric the runtime prints is read by the regexes the construct declares.
    declared = {d["Name"]: d["Regex"] for d in contract.metric_definitions()}
    found = {name for name, regex in declared.items() if re.search(regex, result.stdout)}
    assert found == set(contract.METRIC_NAMES)


@pytest.mark.parametrize(("switch", "compiler"), [(XLA, contract.COMPILER_TRAINING_COMPILER),
                                                  (NEURON_XLA, contract.COMPILER_NEURON_XLA)])
def test_xla_compiles_a_fixed_number_of_graphs_and_runs_one_per_step(tmp_path, switch, compiler):
    runs = {}
    for steps in (4, 8):
        base, _ = _train(tmp_path, f"xla{steps}", {**TINY_BERT, **switch, "max_steps": steps})
        assert metrics(base)["compiler"] == compiler
        runs[steps] = metrics(base)["counters"]
    # Two graphs: the training step, and the first step's optimizer-state creation (AdamW's
    # moments do not exist before it). The count must not grow with the number of steps.
    assert runs[4]["compiles"] == runs[8]["compiles"] == 2
    assert runs[8]["executions"] - runs[4]["executions"] == 4  # one graph per step
    # No host sync per step: with logging every 1000 steps, more steps transfer nothing more.
    assert runs[8]["device_to_host_transfers"] == runs[4]["device_to_host_transfers"]


def test_varying_shapes_recompile_and_warn_with_the_count(tmp_path):
    base, result = _train(tmp_path, "dynamic", {**TINY_BERT, **XLA, "static_shapes": False})
    compiles = metrics(base)["counters"]["compiles"]
    assert compiles > 2  # one graph per distinct batch length: what static shapes avoid
    assert f"{compiles} graphs compiled for 8 steps" in result.stderr


@pytest.mark.parametrize("form", ["environment", "0.2.0 hyperparameter"])
def test_torch_compile_has_no_graph_breaks_and_no_recompiles(tmp_path, form):
    """Switched on as the constructs do now, and as a template made by 0.2.0 did."""
    hps = {**TINY_BERT, "max_steps": 4}
    if form == "environment":
        base = opt_ml(tmp_path / "compile", hps)
        result = run_direct(base, hps, environment=TORCH_COMPILE)
    else:
        hps[contract.HP_TORCH_COMPILE] = True
        base = opt_ml(tmp_path / "compile", hps)
        result = run_direct(base, hps)
    assert result.returncode == 0, result.stderr[-4000:]
    summary = metrics(base)
    assert summary["compiler"] == "torch-compile"
    assert summary["counters"] == {"graph_breaks": 0, "graphs": 1, "recompiles": 0}


@pytest.mark.parametrize(("switch", "tolerance"), [
    ({}, 0.0),     # none (eager): bit-exact
    (XLA, 1e-5),   # training-compiler, XLA on CPU: the resumed run compiles anew; fused
                   # kernels may round apart
], ids=["none", "training-compiler"])
def test_sigterm_then_restart_resumes_and_matches_an_uninterrupted_run(tmp_path, switch,
                                                                      tolerance):
    hps = {**TINY_BERT, **switch, "log_every": 1, "checkpoint_every": 1}
    whole, _ = _train(tmp_path, "whole", hps)
    interrupted = opt_ml(tmp_path / "interrupted", hps)
    assert run_until_step_then_sigterm(interrupted, hps, step=3) == 143
    assert (interrupted / "checkpoints" / "checkpoint.pt").exists()
    assert not (interrupted / "model" / "model.pt").exists()
    resumed = run_direct(interrupted, hps)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from" in resumed.stdout
    expected = torch.load(whole / "model" / "model.pt")
    actual = torch.load(interrupted / "model" / "model.pt")
    for name, tensor in expected.items():
        assert torch.allclose(actual[name], tensor, rtol=0, atol=tolerance), name


@pytest.mark.parametrize(("hyperparameters", "data", "message"), [
    ({}, {"train": None}, "input channel 'train' is missing"),
    ({}, {"train": 0}, "holds no examples"),
    ({"epochs": "three"}, {}, "hyperparameter 'epochs' must be int, got 'three'"),
    ({"precision": "fp8"}, {}, "hyperparameter 'precision' must be one of fp32, fp16, bf16"),
    ({"batch_size": 64}, {}, "fewer than one step"),
])
def test_bad_input_ends_in_a_clear_failure_file_and_a_non_zero_exit(tmp_path, hyperparameters,
                                                                    data, message):
    hps = {**TINY_BERT, **hyperparameters}
    base = opt_ml(tmp_path / "bad", hps, **data)
    result = run_direct(base, hps)
    assert result.returncode == 2
    failure = (base / "output" / "failure").read_text()
    assert failure.startswith("InputError: ") and message in failure
    assert "Traceback" not in result.stderr


def test_torchrun_with_two_workers_shares_each_step_and_writes_once(tmp_path):
    hps = {**TINY_BERT, "log_every": 1}
    base = opt_ml(tmp_path / "ddp", hps, train=32)
    result = run_torchrun(base, hps, workers=2)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    summary = metrics(base)
    # 32 examples, batch 4 per worker, 2 workers: 4 steps of 8 examples.
    assert summary["steps"] == 4 and summary["samples"] == 32
    assert (base / "model" / "model.pt").exists()
    assert result.stdout.count("[metrics] step=1 ") == 1  # only rank 0 reports


def test_the_data_order_is_drawn_once_per_epoch_not_once_per_step(tmp_path, monkeypatch):
    # In process, eager only: a permutation of the whole train set costs O(examples), so
    # drawing one per step made large data sets crawl.
    from compiled_training_runtime import backends, loop
    from compiled_training_runtime.env import SageMakerEnv, parse_hyperparameters
    from compiled_training_runtime.local import job_env

    hyperparameters = {**TINY_BERT, "epochs": 2}
    base = opt_ml(tmp_path, hyperparameters, train=32)
    env = SageMakerEnv.from_environ(job_env(base, hyperparameters))
    drawn = []
    permute = torch.randperm
    monkeypatch.setattr(torch, "randperm", lambda n, **kw: drawn.append(n) or permute(n, **kw))
    summary = loop.run(env, parse_hyperparameters(env.hyperparameters), backends.create("none"))
    assert summary["steps"] == 16  # 2 epochs of 32 examples at batch 4
    assert drawn == [32, 32]


def test_fails_on_a_compiler_the_runtime_does_not_know_listing_those_it_does():
    from compiled_training_runtime import backends

    with pytest.raises(ValueError, match=r"^compiler must be one of training-compiler, "
                                         r"torch-compile, neuron-xla, none, got 'xla'$"):
        backends.create("xla")


def test_the_neuron_backend_refuses_to_run_without_torchneurons_device(tmp_path):
    """The constructs name the native backend in the job on Trainium; without TorchNeuron's
    device (none here: its packages on the index are placeholders) the run fails clearly
    rather than training on the host."""
    hps = dict(TINY_BERT)
    base = opt_ml(tmp_path / "native", hps)
    result = run_direct(base, hps, environment={
        **TORCH_COMPILE, contract.ENV_TORCH_COMPILE_BACKEND: contract.TORCH_COMPILE_NEURON_BACKEND})
    assert result.returncode == 2
    failure = (base / "output" / "failure").read_text()
    assert "COMPILED_TRAINING_TORCH_COMPILE_BACKEND=neuron needs TorchNeuron's 'neuron' " \
           "device, and torch.accelerator reports" in failure
