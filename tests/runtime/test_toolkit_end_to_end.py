"""End to end: the reference teams' synthesized training steps, launched as the PyTorch DLCs
launch them: the real sagemaker-training toolkit with the DLCs' framework module
(``sagemaker_pytorch_container.training:main``, which picks the runner from the
hyperparameters), on a tiny BERT with random weights.

Replaced, because it cannot exist here: the GPUs (a stand-in ``nvidia-smi`` gives the count
the toolkit reads) and AWS's ``torch_xla.distributed.xla_spawn`` (only in the Training
Compiler DLCs; a stand-in does what it does, see ``compiled_training/local/stand_ins/xla_spawn/xla_spawn.py``). On
Trainium: the NeuronCore count (``neuron-ls``), ``neuron_parallel_compile`` (runs the command
it is given) and the XLA collectives (gloo, since torch-xla's CPU client is one process per
rank), see ``neuron_shim/``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from compiled_training_runtime import contract
from tests.environments import NEWEST_NEURON_IMAGE, XLA_WITH_GRAD_SCALER, require
from tests.helpers import definitions, substitute_expressions
from tests.runtime.harness import TINY_TOOLKIT, run_summary, run_with_toolkit, toolkit_job


def _team_step(assembly: Any, team: str, name: str = "Train") -> dict[str, Any]:
    """One of the team's training steps (by default the production pipeline's ``Train``),
    its expressions evaluated as at run time."""
    for definition in definitions(assembly.get_stack_by_name(team).template):
        defaults = {p["Name"]: p["DefaultValue"] for p in definition["Parameters"]}
        for step in definition["Steps"]:
            if step["Name"] == name:
                return dict(substitute_expressions(step["Arguments"], defaults))
    raise AssertionError(f"{team} has no step named {name}")


def test_document_classification_starts_under_the_pytorchxla_launcher(reference_assembly,
                                                                      tmp_path):
    # The team trains in fp16: its loss scaler is torch_xla.amp.GradScaler, which the Training
    # Compiler images have and torch-xla 2.9 removed, so this runs on torch-xla 2.8.
    python = str(require(XLA_WITH_GRAD_SCALER).executable)
    step = _team_step(reference_assembly, "DocumentClassification")
    assert step["HyperParameters"]["sagemaker_pytorch_xla_multi_worker_enabled"] == "true"
    assert step["HyperParameters"]["precision"] == '"fp16"'
    base = toolkit_job(tmp_path, step, max_steps=4, log_every=2, model_family="bert")
    launches = tmp_path / "launches.jsonl"

    result = run_with_toolkit(base, gpus=1, launches=launches, python=python)

    logs = result.stdout + result.stderr
    assert result.returncode == 0, logs[-6000:]
    # The toolkit chose PyTorchXLARunner, which runs AWS's launcher on the entry point ...
    assert re.search(r"-m torch_xla\.distributed\.xla_spawn --num_gpus 1 train\.py ", logs)
    # ... which imported train.py as the module 'train' and called its _mp_fn.
    (launch,) = [json.loads(line) for line in launches.read_text().splitlines()]
    assert launch["module"] == "train" and launch["argv"][0] == "train.py"
    assert "--max_steps" in launch["argv"]
    summary = run_summary(base, logs)
    assert summary["compiler"] == "training-compiler" and summary["steps"] == 4
    assert summary["precision"] == "fp16" and summary["loss_scale"] > 0
    assert (base / "model" / "model.pt").exists()
    assert (base / "checkpoints" / "checkpoint.pt").exists()
    assert (base / "output" / "success").exists()
    # SageMaker reads metrics with the regexes the construct declared in the template.
    declared = step["AlgorithmSpecification"]["MetricDefinitions"]
    for metric in declared:
        assert re.search(metric["Regex"], logs), metric["Name"]
    assert declared == contract.metric_definitions()


def test_creative_starts_under_torchrun_with_one_worker_per_gpu(reference_assembly, tmp_path):
    step = _team_step(reference_assembly, "Creative")
    assert step["HyperParameters"]["sagemaker_torch_distributed_enabled"] == "true"
    # The team's own model comes from its model_factory; the launch is what is tested here.
    base = toolkit_job(tmp_path, step, max_steps=2, model_family="bert", model_factory="")

    result = run_with_toolkit(base, gpus=2)

    logs = result.stdout + result.stderr
    assert result.returncode == 0, logs[-6000:]
    assert re.search(r"torchrun --nnodes 1 --nproc_per_node 2 train\.py ", logs)
    summary = run_summary(base, logs)
    assert summary["compiler"] == "none" and summary["world_size"] == 2
    assert summary["steps"] == 2 and summary["samples"] == 2 * 2 * TINY_TOOLKIT["batch_size"]


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_the_trainium_arm_precompiles_trains_on_two_ranks_and_resumes(reference_assembly,
                                                                      tmp_path):
    """DocumentClassification's Trainium arm (Neuron PyTorch/XLA on trn1.32xlarge), launched
    as the Neuron DLC launches it: the toolkit's TorchDistributedRunner starts one torchrun
    process per NeuronCore (two here, from the stand-in ``neuron-ls``); each joins the
    ``xla`` process group and trains on the XLA device (the CPU, ``PJRT_DEVICE=CPU``, for the
    NeuronCores), its gradients all-reduced by ``xm.optimizer_step`` (gloo standing in for
    the XLA collectives, which torch-xla's single-process CPU client cannot run), on the Neuron
    image's Python and torch-xla."""
    python = str(require(NEWEST_NEURON_IMAGE).executable)
    precompile = _team_step(reference_assembly, "DocumentClassification", "PrecompileTrainium")
    train = _team_step(reference_assembly, "DocumentClassification", "TrainTrainium")
    assert train["HyperParameters"]["sagemaker_torch_distributed_enabled"] == "true"
    assert train["HyperParameters"]["precision"] == '"bf16"'  # the arm's own, over fp16

    # The pre-compilation step: the toolkit prefixes torchrun with neuron_parallel_compile.
    record = tmp_path / "precompile.jsonl"
    base = toolkit_job(tmp_path / "precompile", precompile, log_every=1, model_family="bert")
    assert json.loads(precompile["HyperParameters"]["max_steps"]) == 10
    result = run_with_toolkit(base, neuron=record, environment=precompile["Environment"],
                              python=python)
    logs = result.stdout + result.stderr
    assert result.returncode == 0, logs[-6000:]
    assert re.search(r"\nneuron_parallel_compile torchrun --nnodes 1 --nproc_per_node 2 "
                     r"train\.py ", logs)
    (launcher,) = [r for r in _records(record) if r["call"] == "neuron_parallel_compile"]
    assert launcher["argv"].startswith("torchrun --nnodes 1 --nproc_per_node 2 train.py ")

    # The training step, 2 steps, then resumed to 6: each rank joined the xla group (the
    # runtime asked for "xla" at "xla://"), trained on half of each global batch.
    # Logged at the last step only: a log line reads the loss, one transfer per log.
    base = toolkit_job(tmp_path / "train", train, max_steps=2, log_every=100, model_family="bert")
    runs = []
    for max_steps in (2, 6):
        record = tmp_path / f"train-{max_steps}.jsonl"
        hyperparameters = base / "input" / "config" / "hyperparameters.json"
        values = json.loads(hyperparameters.read_text())
        hyperparameters.write_text(json.dumps({**values, "max_steps": str(max_steps)}))
        result = run_with_toolkit(base, neuron=record, environment=train["Environment"],
                                  python=python)
        logs = result.stdout + result.stderr
        assert result.returncode == 0, logs[-6000:]
        assert re.search(r"\ntorchrun --nnodes 1 --nproc_per_node 2 train\.py ", logs)
        runs.append((run_summary(base, logs), _records(record), logs))

    (first, first_calls, _), (resumed, resumed_calls, resumed_logs) = runs
    for summary, calls in ((first, first_calls), (resumed, resumed_calls)):
        assert summary["compiler"] == "neuron-xla" and summary["world_size"] == 2
        assert summary["global_batch_size"] == 2 * TINY_TOOLKIT["batch_size"]
        assert summary["precision"] == "bf16"
        joins = [c for c in calls if c["call"] == "init_process_group"]
        assert sorted(c["rank"] for c in joins) == ["0", "1"]
        assert {(c["backend"], c["init_method"]) for c in joins} == {("xla", "xla://")}
        # Checkpoints are written once, by rank 0 (to a partial file, then renamed).
        assert {c["rank"] for c in calls
                if c["call"] == "save" and c["path"] == "checkpoint.partial"} == {"0"}
    assert resumed_logs.count("resumed from ") == 2 and "at step 2" in resumed_logs
    assert (first["steps"], resumed["steps"]) == (2, 6)

    # Counts, as on the GPU path: the resumed run's 4 steps compiled no more graphs than the
    # first run's 2 (which also compiled the first step's, where AdamW creates its state),
    # and the runtime's own device-to-host transfers do not grow with steps (the stand-in's
    # gradient copies, one per tensor per step, are not the runtime's).
    def own_transfers(summary: dict[str, Any], calls: list[dict[str, Any]]) -> int:
        standing_in = sum(c["tensors"] for c in calls
                          if c["call"] == "all_reduce" and c["rank"] == "0")
        return int(summary["counters"]["device_to_host_transfers"]) - standing_in

    assert 0 < resumed["counters"]["compiles"] <= first["counters"]["compiles"]
    assert own_transfers(resumed, resumed_calls) == own_transfers(first, first_calls)
    assert sum(c["call"] == "all_reduce" for c in resumed_calls) == 2 * 4  # a step, a rank
