"""Where the graph runs, one backend per compiler, found by the compiler's name (`create`):
eager PyTorch for ``none``, ``torch-compile``, XLA for ``training-compiler`` (Training
Compiler's mechanism) and ``neuron-xla``, and a package's through the entry-point group
`contract.BACKENDS_ENTRY_POINT_GROUP`."""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from . import compat, contract, xla
from .env import InputError, TrainingConfig

if TYPE_CHECKING:
    from .warm_start import CompileCache

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


@dataclass(frozen=True)
class MixedPrecision:
    """How a backend runs a precision: the forward pass's autocast, and for fp16 the scaler
    that keeps small gradients from underflowing (None for fp32 and bf16)."""

    autocast: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext
    scaler: Any = None


class Backend:
    """Eager PyTorch: the reference the compiled backends are measured against.

    Under ``torchrun`` (WORLD_SIZE > 1) it joins the process group and wraps the model in
    DistributedDataParallel; each rank trains on its own slice of every step's batch.
    """

    compiler = contract.COMPILER_NONE

    @classmethod
    def from_config(cls, config: TrainingConfig) -> Backend:
        """The backend for a job's checked hyperparameters and switches."""
        return cls()

    @classmethod
    def switched_on(cls, environ: Mapping[str, str]) -> bool:
        """Whether a job's environment switches this compiler on: a package's backend says,
        from its compiler's own variables (the built-in ones are read into the config)."""
        return False

    def compile_cache(self, environ: Mapping[str, str] | None = None) -> CompileCache | None:
        """The compile cache the job carries from run to run under this backend, or None."""
        return None

    def __init__(self) -> None:
        self.device = self._device()
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        if self.world_size > 1 and not torch.distributed.is_initialized():
            backend = {"cuda": "nccl", "cpu": "gloo"}.get(self.device.type)
            if backend is None:  # what the accelerator's PyTorch backend registers (TorchNeuron)
                torch.distributed.init_process_group()
            else:
                torch.distributed.init_process_group(backend)

    def _device(self) -> torch.device:
        if torch.cuda.is_available():
            return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        return torch.device("cpu")

    def prepare(self, model: torch.nn.Module) -> torch.nn.Module:
        return self._replicated(model.to(self.device))

    def _replicated(self, model: torch.nn.Module) -> torch.nn.Module:
        """The model in DistributedDataParallel under torchrun; as it is otherwise."""
        if self.world_size > 1:
            device_ids = [self.device.index] if self.device.type == "cuda" else None
            return torch.nn.parallel.DistributedDataParallel(model, device_ids=device_ids)
        return model

    def to_device(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {k: v.to(self.device) for k, v in batch.items()}

    def loader(self, batches: Iterable[dict[str, torch.Tensor]],
               batches_per_step: int) -> Iterator[dict[str, torch.Tensor]]:
        """The batches, on the device."""
        return (self.to_device(batch) for batch in batches)

    def mixed_precision(self, precision: str) -> MixedPrecision:
        if precision not in DTYPES:
            return MixedPrecision()
        dtype = DTYPES[precision]
        compat.check_autocast(self.device, dtype)
        scaler = compat.grad_scaler(self.device) if precision == "fp16" else None
        return MixedPrecision(lambda: torch.autocast(self.device.type, dtype=dtype), scaler)

    def optimizer(self, parameters: Iterable[torch.nn.Parameter], lr: float,
                  scaled: bool) -> torch.optim.Optimizer:
        return torch.optim.AdamW(parameters, lr=lr)

    def reduce_gradients(self, optimizer: torch.optim.Optimizer) -> None:
        """Averages gradients across replicas (DistributedDataParallel did it in backward)."""

    def optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        """Reduces gradients across replicas and steps: the unscaled, unclipped case."""
        optimizer.step()

    def mark_step(self) -> None:
        """The end of a training step (XLA cuts and runs its graph here)."""

    def after_step(self, closure: Callable[..., None], *args: Any) -> None:
        """Runs ``closure`` once the step's values exist, without a host sync mid-step."""
        closure(*args)

    def save(self, state: dict[str, Any], path: str) -> None:
        torch.save(state, path)

    def rng_state(self) -> Any:
        return torch.get_rng_state()

    def set_rng_state(self, state: Any) -> None:
        torch.set_rng_state(state)

    def counters(self) -> dict[str, int]:
        return {}

    def is_master(self) -> bool:
        return self.rank == 0


class TorchCompileBackend(Backend):
    compiler = contract.COMPILER_TORCH_COMPILE

    def __init__(self, mode: str = "default", backend: str = "inductor") -> None:
        self.mode = mode
        self.backend = backend
        super().__init__()

    @classmethod
    def from_config(cls, config: TrainingConfig) -> Backend:
        return cls(config.torch_compile_mode, config.torch_compile_backend)

    def compile_cache(self, environ: Mapping[str, str] | None = None) -> CompileCache | None:
        from .warm_start import CompileCache

        return CompileCache.from_environ(mode=self.mode, backend=self.backend, environ=environ)

    def _device(self) -> torch.device:
        if self.backend != contract.TORCH_COMPILE_NEURON_BACKEND:
            return super()._device()
        # Native TorchNeuron: Trainium is an ordinary device, the one torch.accelerator reports.
        accelerator = getattr(torch, "accelerator", None)
        current = (accelerator.current_accelerator()
                   if accelerator is not None and accelerator.is_available() else None)
        if current is None or current.type != "neuron":
            raise InputError(
                f"{contract.ENV_TORCH_COMPILE_BACKEND}=neuron needs TorchNeuron's 'neuron' "
                f"device, and torch.accelerator reports {current or 'none'}: run it on a "
                f"TorchNeuron image on ml.trn2")
        return torch.device("neuron", int(os.environ.get("LOCAL_RANK", "0")))

    def prepare(self, model: torch.nn.Module) -> torch.nn.Module:
        model = model.to(self.device)
        # fullgraph: a graph break is an error here, not a silent slowdown. So the model
        # compiles before DistributedDataParallel wraps it: DDP's own forward breaks the graph
        # (its logger is not traceable), and compiling the DDP module instead splits the graph
        # at its buckets on purpose (DDPOptimizer). The price: the reducer all-reduces once
        # the compiled backward returns, without overlapping it bucket by bucket.
        model.forward = torch.compile(model.forward, backend=self.backend,  # type: ignore[method-assign]
                                      mode=self.mode, fullgraph=True)
        return self._replicated(model)

    def counters(self) -> dict[str, int]:
        from torch._dynamo.utils import counters

        return {
            "graphs": int(counters["stats"]["unique_graphs"]),
            "graph_breaks": int(sum(counters["graph_break"].values())),
            "recompiles": int(sum(counters["recompiles"].values())),
        }


class XlaBackend(Backend):
    """Training Compiler's path: lazy tensors cut into one graph per ``mark_step``."""

    compiler = contract.COMPILER_TRAINING_COMPILER

    def __init__(self) -> None:
        # Under the pytorchxla launcher each process is one replica; gradients are
        # all-reduced across them before each optimizer step.
        self.xm, self.met = xla.modules()
        self.device = self.xm.xla_device()
        self.world_size = xla.world_size(self.xm)
        self.rank = xla.ordinal(self.xm)

    def prepare(self, model: torch.nn.Module) -> torch.nn.Module:
        return model.to(self.device)  # replicas reduce in reduce_gradients, not through DDP

    def loader(self, batches: Iterable[dict[str, torch.Tensor]],
               batches_per_step: int) -> Iterator[dict[str, torch.Tensor]]:
        # Host-to-device copies overlap the running step, as AWS's guide feeds XLA.
        return iter(xla.device_loader(batches, self.device, batches_per_step))

    def mixed_precision(self, precision: str) -> MixedPrecision:
        if precision not in DTYPES:
            return MixedPrecision()
        dtype = DTYPES[precision]
        scaler = None
        if precision == "fp16":
            scaler = xla.grad_scaler()
            if scaler is None:
                import torch_xla

                name = {contract.COMPILER_NEURON_XLA: "Neuron PyTorch/XLA"}.get(
                    self.compiler, "Training Compiler")
                raise InputError(
                    f"precision fp16 under {name} needs torch_xla.amp.GradScaler, "
                    f"which torch-xla {torch_xla.__version__} no longer has (the Training "
                    f"Compiler images do); use bf16 or fp32")
        return MixedPrecision(lambda: xla.autocast(self.xm, self.device, dtype), scaler)

    def optimizer(self, parameters: Iterable[torch.nn.Parameter], lr: float,
                  scaled: bool) -> torch.optim.Optimizer:
        if scaled:  # the scaler hands a sync-free optimizer its found_inf on the device
            return xla.syncfree_adamw(parameters, lr)
        return torch.optim.AdamW(parameters, lr=lr)

    def reduce_gradients(self, optimizer: torch.optim.Optimizer) -> None:
        if self.world_size > 1:
            self.xm.reduce_gradients(optimizer)

    def optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        self.xm.optimizer_step(optimizer)  # reduce_gradients + step

    def mark_step(self) -> None:
        self.xm.mark_step()

    def after_step(self, closure: Callable[..., None], *args: Any) -> None:
        self.xm.add_step_closure(closure, args)

    def save(self, state: dict[str, Any], path: str) -> None:
        self.xm.save(state, path)  # moves tensors to the CPU first

    def rng_state(self) -> Any:
        return {"host": torch.get_rng_state(), "device": self.xm.get_rng_state()}

    def set_rng_state(self, state: Any) -> None:
        torch.set_rng_state(state["host"])
        self.xm.set_rng_state(state["device"])

    def counters(self) -> dict[str, int]:
        return {
            "compiles": xla.metric_count(self.met, "CompileTime"),
            "executions": xla.metric_count(self.met, "ExecuteTime"),
            "device_to_host_transfers": xla.metric_count(self.met, "TransferFromDeviceTime"),
        }


class NeuronXlaBackend(XlaBackend):
    """The Neuron SDK's PyTorch/XLA path on Trainium: torchrun starts one process per
    NeuronCore, each joins the ``xla`` process group, and XLA all-reduces the gradients
    (``xm.optimizer_step``) inside the step's graph, which neuronx-cc compiles."""

    compiler = contract.COMPILER_NEURON_XLA

    def __init__(self) -> None:
        xla.join_process_group()
        super().__init__()


@functools.lru_cache(maxsize=None)  # noqa: UP033 (functools.cache: 3.9+; 3.8 runs this)
def registry() -> Mapping[str, type[Backend]]:
    """Every backend by its compiler's name, the built-in ones first."""
    found: dict[str, type[Backend]] = {cls.compiler: cls for cls in (
        XlaBackend, TorchCompileBackend, NeuronXlaBackend, Backend)}
    group = contract.BACKENDS_ENTRY_POINT_GROUP
    for entry in sorted(contract.entry_points_of(group), key=lambda e: e.name):
        backend = entry.load()
        if not (isinstance(backend, type) and issubclass(backend, Backend)) or (
                backend.compiler != entry.name or entry.name in found):
            raise TypeError(f"entry point {entry.name!r} of {group} must name a new Backend "
                            f"subclass whose compiler is {entry.name!r}, got {entry.value}")
        found[entry.name] = backend
    return found


def compiler_of(config: TrainingConfig, environ: Mapping[str, str] | None = None) -> str:
    """The compiler a job switched on: a built-in one's switch, else the first package's
    backend whose switch its environment sets, else none."""
    if config.compiler != contract.COMPILER_NONE:
        return config.compiler
    env = os.environ if environ is None else environ
    return next((name for name, cls in registry().items() if cls.switched_on(env)),
                contract.COMPILER_NONE)


def create(compiler: str, config: TrainingConfig | None = None) -> Backend:
    """The backend that runs ``compiler``'s graph, for the job's ``config``."""
    backends = registry()
    if compiler not in backends:  # a package's compiler whose backend is not installed here
        raise InputError(contract.not_one_of("compiler", compiler, tuple(backends)))
    return backends[compiler].from_config(config or TrainingConfig())


class Stopwatch:
    def __init__(self) -> None:
        self.start = time.perf_counter()

    def seconds(self) -> float:
        return time.perf_counter() - self.start
