"""The contract between the constructs (deploy time) and the runtime (train time).

Torch-free and CDK-free: the constructs import it to declare hyperparameters, metric regexes
and the benchmark's steps; the runtime imports it to read them, to print metrics that match
and to write the run summary and the comparison the pipeline reads. The runtime never imports
the constructs.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

# --- The compiler: one vocabulary for the API (`CompilerKind`, cdk.json), the runtime, the
# CLI and the documents they write. Training Compiler runs the graph through XLA; that is its
# mechanism, not another name for it.
COMPILER_TRAINING_COMPILER = "training-compiler"
COMPILER_TORCH_COMPILE = "torch-compile"
COMPILER_NEURON_XLA = "neuron-xla"
"""The Neuron SDK's legacy PyTorch/XLA path on Trainium (torch-neuronx, neuronx-cc)."""
COMPILER_NONE = "none"
COMPILERS = (COMPILER_TRAINING_COMPILER, COMPILER_TORCH_COMPILE, COMPILER_NEURON_XLA,
             COMPILER_NONE)
BACKENDS_ENTRY_POINT_GROUP = "compiled_training_runtime.backends"
"""The entry-point group through which a package adds a runtime backend (a `backends.Backend`
subclass named for its compiler), beside its compiler's ``compiled_training.compilers``."""


def entry_points_of(group: str) -> list[Any]:
    """The installed packages' entry points of ``group`` (Python 3.8 and 3.9, on Training
    Compiler's images, have no ``entry_points(group=...)``)."""
    from importlib.metadata import entry_points

    found = entry_points()
    if hasattr(found, "select"):
        return list(found.select(group=group))
    return list(found.get(group, ()))  # type: ignore[attr-defined]


def backend_names() -> tuple[str, ...]:
    """Every compiler the runtime has a backend for, the built-in ones first (read from the
    installed packages' metadata: nothing is imported)."""
    added = sorted(entry.name for entry in entry_points_of(BACKENDS_ENTRY_POINT_GROUP))
    return (*COMPILERS, *(name for name in added if name not in COMPILERS))


def did_you_mean(value: object, allowed: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` with the allowed value closest to a misspelled one, or "".
    Equally close values are told apart by the longer shared end (``m6i.12xlarge`` is
    ``ml.m6i.12xlarge``, not ``ml.r6i.12xlarge``), then by their order in ``allowed``."""
    text, choices = str(value), list(allowed)
    close = difflib.get_close_matches(text, choices, n=5, cutoff=0.75)
    if not close:
        return ""

    def closeness(choice: str) -> tuple[float, int, int]:
        ratio = difflib.SequenceMatcher(None, text, choice).ratio()
        shared_end = len(os.path.commonprefix([text[::-1], choice[::-1]]))
        return round(ratio, 9), shared_end, len(os.path.commonprefix([text, choice]))

    best = max(close, key=lambda choice: (closeness(choice), -choices.index(choice)))
    return f" (did you mean {best!r}?)"


def not_one_of(field: str, value: object, allowed: Iterable[str]) -> str:
    """The message for a value outside a closed set: the field, every allowed value, what was
    given and the closest allowed value to it. Every closed set on both sides says it so."""
    allowed = list(allowed)
    return (f"{field} must be one of {', '.join(allowed)}, got {value!r}"
            f"{did_you_mean(value, allowed)}")


def check_compiler(value: str, field: str, allowed: tuple[str, ...] = COMPILERS) -> str:
    """``value`` when it is one of the ``allowed`` compiler names; otherwise a ValueError
    naming ``field``, the value and the names allowed."""
    if value not in allowed:
        raise ValueError(not_one_of(field, value, allowed))
    return value


# Hyperparameters that SageMaker's API path reads (values are the strings "true"/"false").
HP_TRAINING_COMPILER_ENABLED = "sagemaker_training_compiler_enabled"
HP_TRAINING_COMPILER_DEBUG = "sagemaker_training_compiler_debug_mode"
HP_PYTORCH_XLA_MULTI_WORKER = "sagemaker_pytorch_xla_multi_worker_enabled"
HP_TORCH_DISTRIBUTED = "sagemaker_torch_distributed_enabled"
HP_INSTANCE_TYPE = "sagemaker_instance_type"

# The library's own switches, in the job's environment: the toolkit passes every hyperparameter
# to the script as an argument, and a script that knows nothing of them must not trip on them.
ENV_TORCH_COMPILE = "COMPILED_TRAINING_TORCH_COMPILE"
ENV_TORCH_COMPILE_MODE = "COMPILED_TRAINING_TORCH_COMPILE_MODE"
ENV_TORCH_COMPILE_BACKEND = "COMPILED_TRAINING_TORCH_COMPILE_BACKEND"
"""``torch.compile``'s backend where it is not the default (``neuron`` on Trainium)."""
ENV_NEURON_XLA = "COMPILED_TRAINING_NEURON_XLA"
ENV_ENTRY_POINT = "COMPILED_TRAINING_ENTRY_POINT"
"""The team's script, where the warm start's launcher (`launch`) is the job's entry point."""
LAUNCHER = "compiled_training_runtime/launch.py"
"""The launcher, as the code archive holds it: the job's ``sagemaker_program``."""
# The hyperparameters that carried the same switches in templates made by 0.2.0: still read.
HP_TORCH_COMPILE = "compiled_training_torch_compile"
HP_TORCH_COMPILE_MODE = "compiled_training_torch_compile_mode"
HP_TORCH_COMPILE_BACKEND = "compiled_training_torch_compile_backend"
HP_NEURON_XLA = "compiled_training_neuron_xla"
SWITCHES = {HP_TORCH_COMPILE: ENV_TORCH_COMPILE, HP_TORCH_COMPILE_MODE: ENV_TORCH_COMPILE_MODE,
            HP_TORCH_COMPILE_BACKEND: ENV_TORCH_COMPILE_BACKEND, HP_NEURON_XLA: ENV_NEURON_XLA}
"""Each switch's old hyperparameter, and the variable that carries it now."""


def switch(variable: str, environment: Mapping[str, object],
           hyperparameters: Mapping[str, object]) -> str | None:
    """One of the library's switches as a job sets it (``"true"``, a mode, a backend): its
    environment variable, else the hyperparameter a 0.2.0 template gave it (a switch added
    since has none); None if neither."""
    old = next((name for name, new in SWITCHES.items() if new == variable), None)
    value = environment.get(variable, hyperparameters.get(old) if old else None)
    return None if value is None else plain(value)


def plain(value: object) -> str:
    """A setting as a string: booleans as ``true``/``false``, SageMaker's JSON quotes removed."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str) and value.startswith('"'):
        try:
            decoded = json.loads(value)
        except json.JSONDecodeError:
            return value
        return decoded if isinstance(decoded, str) else value
    return str(value)


HP_MAX_STEPS = "max_steps"
"""Stops training after this many optimizer steps (the pre-compilation run's few)."""
HP_BATCH_SIZE = "batch_size"
"""Examples per replica per micro-batch."""
HP_BASE_BATCH_SIZE = "base_batch_size"
"""The batch ``learning_rate`` was tuned for: the runtime scales it to ``batch_size``."""
HP_LR_SCALING = "lr_scaling"

TORCH_COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
TORCH_COMPILE_NEURON_BACKEND = "neuron"
"""The native TorchNeuron backend: ``torch.compile(backend="neuron")`` on device ``neuron``."""

# The environment the Neuron SDK and SageMaker's training toolkit read on Trainium.
ENV_NEURON_CC_FLAGS = "NEURON_CC_FLAGS"
ENV_NEURON_COMPILE_CACHE_URL = "NEURON_COMPILE_CACHE_URL"
ENV_RUN_NEURON_PARALLEL_COMPILE = "RUN_NEURON_PARALLEL_COMPILE"
"""``1``: the toolkit's TorchDistributedRunner runs ``neuron_parallel_compile torchrun ...``."""
# torch.compile's warm start (`warm_start`): where the job keeps Inductor's cache between runs
# (an S3 prefix of the pipeline's own; file:// for a folder), and the KMS key it encrypts with.
ENV_COMPILE_CACHE_URL = "COMPILED_TRAINING_COMPILE_CACHE_URL"
ENV_COMPILE_CACHE_KMS_KEY_ID = "COMPILED_TRAINING_COMPILE_CACHE_KMS_KEY_ID"
COMPILE_CACHE_SINCE = "2.4"
"""The first PyTorch whose Inductor caches FX graphs on disk (PyTorch's caching recipe)."""
NEURON_MODEL_TYPES = ("transformer", "generic")
"""neuronx-cc's ``--model-type`` values for training (transformer: the one Neuron recommends
for transformer models, and torch-neuronx's default since Neuron 2.14)."""

# How a learning rate follows a batch change (`HP_LR_SCALING`): in proportion, by the square
# root of the ratio, or not at all.
LR_SCALING_RULES = ("linear", "sqrt", "none")


def scaled_learning_rate(learning_rate: float, base_batch_size: int, batch_size: int,
                         rule: str = "linear") -> float:
    """The learning rate tuned at ``base_batch_size``, moved to ``batch_size``: what the
    runtime trains with and what the advisor recommends with a larger batch."""
    if rule not in LR_SCALING_RULES:
        raise ValueError(not_one_of(HP_LR_SCALING, rule, LR_SCALING_RULES))
    ratio = batch_size / base_batch_size
    return learning_rate * {"linear": ratio, "sqrt": math.sqrt(ratio), "none": 1.0}[rule]


# Input channels, as SageMaker mounts them under /opt/ml/input/data/<channel>.
CHANNEL_TRAIN = "train"
CHANNEL_VALIDATION = "validation"

# Where the runtime writes checkpoints; SageMaker syncs it with CheckpointConfig.S3Uri,
# which is what lets a spot-interrupted job resume.
CHECKPOINT_LOCAL_PATH = "/opt/ml/checkpoints"

# One metric log line, e.g. "[metrics] step=120 train_loss=0.4310 samples_per_second=812.5".
METRIC_LINE_PREFIX = "[metrics]"
METRIC_NAMES = (
    "train_loss",
    "samples_per_second",
    "validation_loss",
    "validation_accuracy",
)
_NUMBER = r"([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"


def metric_regex(name: str) -> str:
    """The regex SageMaker applies to the job's log to extract one metric."""
    if name not in METRIC_NAMES:
        raise ValueError(not_one_of("metric name", name, METRIC_NAMES))
    return re.escape(METRIC_LINE_PREFIX) + r".*\b" + re.escape(name) + "=" + _NUMBER


def metric_definitions() -> list[dict[str, str]]:
    """`AlgorithmSpecification.MetricDefinitions` for the runtime's metric lines."""
    return [{"Name": name, "Regex": metric_regex(name)} for name in METRIC_NAMES]


def format_metric_line(step: int, metrics: Mapping[str, float]) -> str:
    """The log line the runtime prints; `metric_definitions()` parses it."""
    unknown = sorted(set(metrics) - set(METRIC_NAMES))
    if unknown:
        raise ValueError(f"unknown metric names {unknown}; allowed: {', '.join(METRIC_NAMES)}")
    fields = " ".join(f"{name}={metrics[name]:.6g}" for name in METRIC_NAMES if name in metrics)
    return f"{METRIC_LINE_PREFIX} step={step} {fields}"


# --- CompilerBenchmark: the A/B arms and what the comparison step reads and writes --------

ARM_BASELINE = "baseline"
ARM_COMPILER = "compiler"
ARM_COMPILER_LARGE_BATCH = "compiler-large-batch"

# The runtime's run summary: written to SM_OUTPUT_DATA_DIR, which SageMaker uploads as
# <output path>/<job name>/output/output.tar.gz. It holds the last values of METRIC_NAMES
# and these keys, which the comparison reads:
RUN_SUMMARY_FILE = "metrics.json"
SUMMARY_COMPILER = "compiler"
"""One of COMPILERS: what compiled the run's graph."""
SUMMARY_COMPILE_CACHE = "compile_cache"
"""torch.compile's warm start: state (warm, cold, off), graphs loaded and compiled, seconds."""
COMPILE_CACHE_SUMMARY_FILE = "compile-cache.json"
"""The launcher's summary of the warm start, beside the script's own output data."""
SUMMARY_GLOBAL_BATCH_SIZE = "global_batch_size"
SUMMARY_LEARNING_RATE = "learning_rate"
"""The learning rate trained with, scaled to the batch."""
SUMMARY_EPOCHS = "epochs"
"""Epochs trained: samples seen over the train channel's examples (a global batch that does
not divide them leaves the rest unseen each epoch; fractional under max_steps)."""
COMPARISON_JSON = "comparison.json"
COMPARISON_MARKDOWN = "comparison.md"
# The comparison's decision (``comparison.json``, key ``decision``): the pipeline's condition
# reads gain and quality_drop, its Lambda step records every field. ``gain`` is the wall-clock
# speedup on the baseline's instances, the gain in epochs per dollar on others (``basis``).
DECISION_FIELDS = ("verdict", "arm", "speedup", "gain", "basis", "instance_type",
                   "instance_count", "quality_drop", "global_batch_size", "learning_rate",
                   "reason")
VERDICT_SHIP = "ship"
VERDICT_HOLD = "hold"

# Quality metrics a benchmark can hold an arm to: (higher is better, scale to report units,
# unit). Accuracy is a fraction in the summary; tolerances are in percentage points.
QUALITY_METRICS = {
    "validation_accuracy": (True, 100.0, "points"),
    "validation_loss": (False, 1.0, ""),
}
DEFAULT_QUALITY_METRIC = "validation_accuracy"
DEFAULT_SPEEDUP_THRESHOLD = 0.2
DEFAULT_QUALITY_TOLERANCE = 0.1
