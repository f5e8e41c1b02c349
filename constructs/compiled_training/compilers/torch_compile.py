"""``torch.compile``: Inductor on a current PyTorch 2.x Deep Learning Container, and on
Trainium the native TorchNeuron backend (``backend="neuron"``, trn2).

TorchNeuron is this compiler keyed on the accelerator, not a compiler of its own: the script
and its switch are the same, and what differs (the backend's variable, the image, the mode and
family rules) follows from the instance type, which every rule here is handed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from compiled_training.catalog import neuron
from compiled_training.catalog.instances import instance_family
from compiled_training.compilers.base import (
    Choice,
    CompilerKind,
    CompilerModule,
    Finding,
    Job,
    minor,
    switched_on,
    trainium,
)
from compiled_training_runtime import contract


class TorchCompile(CompilerModule):
    name = CompilerKind.TORCH_COMPILE
    title = "torch.compile"
    inductor = True
    settings = ("mode",)

    def options(self, **given: Any) -> dict[str, Any]:
        fields = super().options(**given)
        mode = given.get("mode", "default")
        if mode not in contract.TORCH_COMPILE_MODES:
            raise ValueError(contract.not_one_of("Compiler.torch_compile mode", mode,
                                                 contract.TORCH_COMPILE_MODES))
        return {**fields, "mode": mode}

    def switches(self, choice: Choice) -> dict[str, str]:
        return {contract.ENV_TORCH_COMPILE: "true",
                contract.ENV_TORCH_COMPILE_MODE: str(choice.mode)}

    def environment(self, job: Job) -> dict[str, str]:
        environment = self.switches(job.compiler)
        if trainium(job.instance_type):
            environment[contract.ENV_TORCH_COMPILE_BACKEND] = contract.TORCH_COMPILE_NEURON_BACKEND
        return environment

    def describe(self, choice: Choice) -> str:
        return f"torch.compile (mode={choice.mode})"

    def compiles_with_inductor(self, instance_type: str | None) -> bool:
        return not trainium(instance_type)  # TorchNeuron compiles with neuronx-cc instead

    def image_problem(self, instance_type: str) -> str | None:
        if not trainium(instance_type):
            return None
        return (f"the native TorchNeuron backend has no SageMaker training image to resolve: "
                f"{neuron.native_image_status()}; pass your TorchNeuron image as "
                f"image=TrainingImage.from_ecr_repository(...), or use Compiler.neuron_xla() on "
                f"the PyTorch NeuronX images")

    def recognizes(self, hyperparameters: Mapping[str, Any], environment: Mapping[str, Any],
                   image: str = "") -> bool:
        return switched_on(contract.ENV_TORCH_COMPILE, hyperparameters, environment)

    def checks(self, job: Job) -> tuple[list[Finding], list[Finding]]:
        errors: list[Finding] = []
        version = job.framework.pytorch_version
        if version and minor(version)[0] < 2:
            errors.append(("TorchCompileVersion", f"torch.compile needs PyTorch 2.0 or newer, "
                                                  f"got {job.framework.describe()}"))
        if not job.image_uri and (problem := self.image_problem(job.instance_type)):
            errors.append(("Image", problem))
        if not trainium(job.instance_type):
            return errors, []
        family, native = instance_family(job.instance_type), neuron.native_families()
        if family not in native:
            errors.append(("TrainiumCompiler", f"Compiler.torch_compile() on Trainium is the "
                                               f"native TorchNeuron backend, which runs on "
                                               f"{', '.join(native)} only, got "
                                               f"{job.instance_type!r}; on {family} use "
                                               f"Compiler.neuron_xla()"))
        elif job.compiler.mode != "default":
            errors.append(("TrainiumCompiler", f"torch.compile mode {job.compiler.mode!r} tunes "
                                               f"CUDA (CUDA graphs, Triton autotuning) and "
                                               f"means nothing to the neuron backend; use mode "
                                               f"'default' on {job.instance_type}"))
        return errors, []
