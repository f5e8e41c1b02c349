"""The SageMaker training contract, read from the environment the toolkit prepares.

Torch-free: bad input is reported before any framework is imported.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import contract

PRECISIONS = ("fp32", "fp16", "bf16")


class InputError(ValueError):
    """Bad input from the job's configuration: reported in /opt/ml/output/failure."""


@dataclass(frozen=True)
class TrainingConfig:
    """Hyperparameters of the runtime, typed and checked."""

    model_family: str = "bert"
    model_factory: str | None = None
    epochs: int = 1
    max_steps: int | None = None
    batch_size: int = 8
    base_batch_size: int | None = None
    learning_rate: float = 5e-5
    lr_scaling: str = "linear"
    gradient_accumulation_steps: int = 1
    max_grad_norm: float | None = None
    """Clip the gradients' global norm to this (after unscaling); omitted: no clipping."""
    max_seq_length: int = 128
    precision: str = "fp32"
    seed: int = 0
    log_every: int = 10
    checkpoint_every: int = 50
    num_labels: int = 2
    num_features: int | None = None
    """Inputs per example for the built-in ``mlp`` family."""
    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    static_shapes: bool = True
    torch_compile: bool = False
    torch_compile_mode: str = "default"
    torch_compile_backend: str = "inductor"
    """Written into the job by the constructs (``neuron`` on Trainium), never guessed."""
    neuron_xla: bool = False
    training_compiler: bool = False
    xla_multi_worker: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def compiler(self) -> str:
        """The compiler the hyperparameters switch on, one of `contract.COMPILERS`."""
        if self.training_compiler:
            return contract.COMPILER_TRAINING_COMPILER
        if self.neuron_xla:
            return contract.COMPILER_NEURON_XLA
        return contract.COMPILER_TORCH_COMPILE if self.torch_compile else contract.COMPILER_NONE

    @property
    def scaled_learning_rate(self) -> float:
        """The learning rate for ``batch_size``, scaled from ``base_batch_size``."""
        if not self.base_batch_size:
            return self.learning_rate
        return contract.scaled_learning_rate(self.learning_rate, self.base_batch_size,
                                             self.batch_size, self.lr_scaling)


_FIELDS = {
    "model_family": str, "model_factory": str, "epochs": int, "max_steps": int,
    "batch_size": int, "base_batch_size": int, "learning_rate": float, "lr_scaling": str,
    "gradient_accumulation_steps": int, "max_grad_norm": float, "max_seq_length": int,
    "precision": str, "seed": int,
    "log_every": int, "checkpoint_every": int, "num_labels": int, "num_features": int,
    "vocab_size": int,
    "hidden_size": int, "num_hidden_layers": int, "num_attention_heads": int,
    "intermediate_size": int, "static_shapes": bool,
}
_FLAGS = {
    contract.HP_TRAINING_COMPILER_ENABLED: "training_compiler",
    contract.HP_PYTORCH_XLA_MULTI_WORKER: "xla_multi_worker",
    contract.HP_TORCH_COMPILE: "torch_compile",
    contract.HP_NEURON_XLA: "neuron_xla",
}


def parse_hyperparameters(hps: dict[str, Any],
                          environ: Mapping[str, str] | None = None) -> TrainingConfig:
    """Hyperparameters (as the toolkit decodes them) and the library's switches in the
    environment (``environ``, else the process's) to a checked `TrainingConfig`."""
    env = os.environ if environ is None else environ
    switches = {old: env[new] for old, new in contract.SWITCHES.items() if new in env}
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for name, raw in {**hps, **switches}.items():
        if name in _FLAGS:
            label = (f"environment variable {contract.SWITCHES[name]!r}" if name in switches
                     else f"hyperparameter {name!r}")
            values[_FLAGS[name]] = _as(name, raw, bool, label)
        elif name == contract.HP_TORCH_COMPILE_MODE:
            values["torch_compile_mode"] = str(raw)
        elif name == contract.HP_TORCH_COMPILE_BACKEND:
            values["torch_compile_backend"] = str(raw)
        elif name in _FIELDS:
            values[name] = _as(name, raw, _FIELDS[name])
        elif not name.startswith("sagemaker_"):
            extra[name] = raw
    config = TrainingConfig(**values, extra=extra)
    for name, allowed in (("precision", PRECISIONS), (contract.HP_LR_SCALING,
                                                      contract.LR_SCALING_RULES)):
        if getattr(config, name) not in allowed:
            raise InputError(contract.not_one_of(f"hyperparameter {name!r}",
                                                 getattr(config, name), allowed))
    for name in ("epochs", "batch_size", "gradient_accumulation_steps", "max_seq_length",
                 "log_every", "checkpoint_every"):
        if getattr(config, name) < 1:
            raise InputError(f"hyperparameter {name!r} must be at least 1, got "
                             f"{getattr(config, name)}")
    if config.max_grad_norm is not None and not config.max_grad_norm > 0:
        raise InputError(f"hyperparameter 'max_grad_norm' must be greater than 0, got "
                         f"{config.max_grad_norm}")
    return config


def _as(name: str, raw: Any, kind: type, label: str = "") -> Any:
    if kind is bool:
        if isinstance(raw, bool):
            return raw
        if str(raw).lower() in ("true", "false"):
            return str(raw).lower() == "true"
        raise InputError(f"{label or f'hyperparameter {name!r}'} must be true or false, got "
                         f"{raw!r}")
    try:
        if kind is int and isinstance(raw, float) and not raw.is_integer():
            raise ValueError
        return kind(raw)
    except (TypeError, ValueError):
        raise InputError(f"hyperparameter {name!r} must be {kind.__name__}, got {raw!r}") from None


@dataclass(frozen=True)
class SageMakerEnv:
    """Where SageMaker put the inputs and where it collects the outputs."""

    hyperparameters: dict[str, Any]
    channels: dict[str, Path]
    model_dir: Path
    output_dir: Path
    output_data_dir: Path
    checkpoint_dir: Path
    framework_params: dict[str, Any]
    current_host: str
    hosts: list[str]

    @staticmethod
    def from_environ(environ: dict[str, str] | None = None) -> SageMakerEnv:
        env = dict(os.environ if environ is None else environ)
        base = Path(env.get("SAGEMAKER_BASE_DIR", "/opt/ml"))
        channels = {name: Path(env.get(f"SM_CHANNEL_{name.upper()}",
                                       base / "input" / "data" / name))
                    for name in json.loads(env.get("SM_CHANNELS", "[]"))}
        checkpoint = Path(contract.CHECKPOINT_LOCAL_PATH)
        if "SAGEMAKER_BASE_DIR" in env:
            # Local runs map /opt/ml to the base folder, checkpoints included.
            checkpoint = base / checkpoint.relative_to("/opt/ml")
        return SageMakerEnv(
            hyperparameters=json.loads(env.get("SM_HPS", "{}")),
            channels=channels,
            model_dir=Path(env.get("SM_MODEL_DIR", base / "model")),
            output_dir=Path(env.get("SM_OUTPUT_DIR", base / "output")),
            output_data_dir=Path(env.get("SM_OUTPUT_DATA_DIR", base / "output" / "data")),
            checkpoint_dir=Path(env.get("COMPILED_TRAINING_CHECKPOINT_DIR", checkpoint)),
            framework_params=json.loads(env.get("SM_FRAMEWORK_PARAMS", "{}")),
            current_host=env.get("SM_CURRENT_HOST", "algo-1"),
            hosts=json.loads(env.get("SM_HOSTS", '["algo-1"]')),
        )

    def channel(self, name: str) -> Path:
        if name not in self.channels or not self.channels[name].is_dir():
            available = ", ".join(sorted(self.channels)) or "none"
            raise InputError(f"input channel {name!r} is missing (channels given: {available})")
        return self.channels[name]

    def write_failure(self, message: str) -> None:
        """What SageMaker shows as the job's FailureReason."""
        self.output_dir.mkdir(parents=True, exist_ok=True)
        (self.output_dir / "failure").write_text(message)
