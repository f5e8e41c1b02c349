"""The contract between the constructs (deploy time) and the runtime (train time).

Torch-free and CDK-free: the constructs import it to declare hyperparameters and metric
regexes; the runtime imports it to read them and to print metrics that match. The runtime
never imports the constructs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

# Hyperparameters that SageMaker's API path reads (values are the strings "true"/"false").
HP_TRAINING_COMPILER_ENABLED = "sagemaker_training_compiler_enabled"
HP_TRAINING_COMPILER_DEBUG = "sagemaker_training_compiler_debug_mode"
HP_PYTORCH_XLA_MULTI_WORKER = "sagemaker_pytorch_xla_multi_worker_enabled"
HP_TORCH_DISTRIBUTED = "sagemaker_torch_distributed_enabled"
HP_INSTANCE_TYPE = "sagemaker_instance_type"

# Hyperparameters of this library.
HP_TORCH_COMPILE = "compiled_training_torch_compile"
HP_TORCH_COMPILE_MODE = "compiled_training_torch_compile_mode"
HP_EPOCHS = "epochs"

TORCH_COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")

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
        raise ValueError(f"metric name must be one of {', '.join(METRIC_NAMES)}, got {name!r}")
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
BENCHMARK_ARMS = (ARM_BASELINE, ARM_COMPILER, ARM_COMPILER_LARGE_BATCH)

# The runtime's run summary: written to SM_OUTPUT_DATA_DIR, which SageMaker uploads as
# <output path>/<job name>/output/output.tar.gz.
RUN_SUMMARY_FILE = "metrics.json"
COMPARISON_JSON = "comparison.json"
COMPARISON_MARKDOWN = "comparison.md"

# Quality metrics a benchmark can hold an arm to: (higher is better, scale to report units,
# unit). Accuracy is a fraction in the summary; tolerances are in percentage points.
QUALITY_METRICS = {
    "validation_accuracy": (True, 100.0, "points"),
    "validation_loss": (False, 1.0, ""),
}
DEFAULT_SPEEDUP_THRESHOLD = 0.2
DEFAULT_QUALITY_TOLERANCE = 0.1
