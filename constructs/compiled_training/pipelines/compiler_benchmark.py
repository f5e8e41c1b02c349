"""`CompilerBenchmark`: the same training job with and without the compiler, compared and
decided in one SageMaker pipeline."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import Annotations, Duration, Stack, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_ssm as ssm

from compiled_training._internal import validation
from compiled_training._internal.api_shapes import shown
from compiled_training._internal.benchmark_definition import (
    ComparisonJob,
    arm_step_name,
    benchmark_parameters,
    build_benchmark_definition,
)
from compiled_training._internal.dlc import DlcImage, resolve_dlc
from compiled_training._internal.dlc_uri import dlc_image_uri
from compiled_training._internal.handlers import step_function
from compiled_training._internal.instances import gpus_per_instance
from compiled_training._internal.policy import InlinePolicy
from compiled_training._internal.typecheck import check_arguments
from compiled_training.image.runtime_wheel import PACKAGE_DIR as RUNTIME_PACKAGE_DIR
from compiled_training.pipelines.base import (
    PipelineBase,
    execution_scoped,
    shared_archive_asset,
    try_resolve_dlc,
)
from compiled_training.pipelines.compiler import Compiler, CompilerKind
from compiled_training.pipelines.framework import Framework
from compiled_training.pipelines.job import (
    Distribution,
    HyperparameterValue,
    InputChannel,
    Parameter,
    ParameterValue,
    TrainingJob,
)
from compiled_training_runtime import contract
from constructs import Construct

SPEEDUP_THRESHOLD_PARAMETER = "SpeedupThreshold"
QUALITY_TOLERANCE_PARAMETER = "QualityTolerance"
# Each threshold parameter's field in the recorded verdict, and the values the props allow.
VERDICT_FIELDS = {SPEEDUP_THRESHOLD_PARAMETER: "speedup_threshold",
                  QUALITY_TOLERANCE_PARAMETER: "quality_tolerance"}
SPEEDUP_THRESHOLD_LIMITS = (0.0, 10.0)
QUALITY_TOLERANCE_LIMITS = (0.0, 100.0)
UNDECIDED = {"verdict": "undecided", "reason": "no benchmark execution has finished yet"}


@jsii.implements(sagemaker.IPipeline)
class CompilerBenchmark(PipelineBase):
    """One pipeline that proves a compiler before it ships.

    Parallel training arms on the same data and hyperparameters: ``baseline`` (no
    compiler), ``compiler``, and optionally ``compiler-large-batch`` (the compiler with a
    larger batch and the learning rate scaled to it). A comparison step reads each arm's
    run summary and SageMaker's timings and writes ``comparison.json`` and
    ``comparison.md`` to S3; the verdict ("ship" or "hold", with the arm, its batch size
    and learning rate) goes to the SSM parameter ``decision_parameter``; a hold then fails
    the execution with the reason. Implements ``aws_sagemaker.IPipeline``, so a
    `RetrainingSchedule` can run it again after a framework or model change.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        framework: Framework,
        instance_type: str,
        source_dir: str | Path,
        entry_point: str,
        channels: Sequence[InputChannel],
        compiler: Compiler | None = None,
        instance_count: int | None = None,
        hyperparameters: Mapping[str, HyperparameterValue] | None = None,
        large_batch_size: int | None = None,
        quality_metric: str | None = None,
        speedup_threshold: float | None = None,
        quality_tolerance: float | None = None,
        distribution: Distribution | None = None,
        baseline_distribution: Distribution | None = None,
        comparison_instance_type: str | None = None,
        decision_parameter_name: str | None = None,
        pipeline_name: str | None = None,
        description: str | None = None,
        output_bucket: s3.IBucket | None = None,
        volume_size_gib: int | None = None,
        max_runtime: Duration | None = None,
        spot: bool | None = None,
        max_wait: Duration | None = None,
        max_attempts: int | None = None,
        kms_key: kms.IKey | None = None,
        vpc: ec2.IVpc | None = None,
        vpc_subnets: ec2.SubnetSelection | None = None,
        security_groups: Sequence[ec2.ISecurityGroup] | None = None,
        network_isolation: bool | None = None,
        inter_container_encryption: bool | None = None,
    ) -> None:
        """
        :param framework: the framework and version, e.g. ``Framework.pytorch("1.13.1")``.
        :param instance_type: the GPU instance type every arm trains on.
        :param source_dir: the training code, uploaded as a deterministic ``sourcedir.tar.gz``.
        :param entry_point: the script in ``source_dir``; it must write the compiled-training
            runtime's run summary (the runtime's ``train.py`` does).
        :param channels: input channels, the same for every arm; a ``validation`` channel is
            required (quality is compared on it).
        :param compiler: the compiler on trial; when omitted, Training Compiler.
        :param instance_count: when omitted, one instance per arm.
        :param hyperparameters: the same for every arm (the large-batch arm overrides
            ``batch_size``).
        :param large_batch_size: when given, a third arm trains with the compiler at this
            batch size, the learning rate scaled linearly from ``hyperparameters
            ["batch_size"]``; when omitted, two arms.
        :param quality_metric: ``validation_accuracy`` (the default; tolerance in
            percentage points) or ``validation_loss``.
        :param speedup_threshold: least wall-clock speedup to ship, as a fraction; when
            omitted, 0.2 (20 % faster). A pipeline parameter, ``SpeedupThreshold``, that an
            execution may raise (up to 10), never lower: the decision function refuses to
            record a verdict judged by a lower one, and a schedule's override is checked at
            synth.
        :param quality_tolerance: most quality lost to ship; when omitted, 0.1 points. A
            pipeline parameter, ``QualityTolerance``, that an execution may tighten (down to
            0), never loosen, enforced the same way.
        :param distribution: the compiler arms' distribution; when omitted, ``pytorchxla``
            for Training Compiler on more than one GPU, ``torch_distributed`` for
            torch.compile on more than one GPU, none otherwise.
        :param baseline_distribution: when omitted, ``torch_distributed`` on more than one
            GPU (so that both sides use every GPU), none otherwise.
        :param comparison_instance_type: when omitted, ``ml.m5.large``.
        :param decision_parameter_name: when omitted,
            ``/compiled-training/<pipeline name>/decision`` (with a derived pipeline name, a
            rename of the construct replaces it and deletes the verdict: a warning says so).
        :param spot: when omitted, on-demand. Spot interruptions distort a wall-clock
            comparison, so spot arms draw a warning.
        Other props as in `TrainingPipeline`.
        """
        check_arguments(CompilerBenchmark.__init__, locals())
        super().__init__(scope, construct_id, pipeline_name=pipeline_name)
        compiler = compiler or Compiler.training_compiler()
        self.framework = framework
        self.compiler = compiler
        self.instance_type = instance_type
        self.instance_count = 1 if instance_count is None else instance_count
        self.quality_metric = quality_metric or "validation_accuracy"
        self._validate(compiler, channels, hyperparameters or {}, large_batch_size,
                       speedup_threshold, quality_tolerance)
        speedup = (contract.DEFAULT_SPEEDUP_THRESHOLD if speedup_threshold is None
                   else float(speedup_threshold))
        tolerance = (contract.DEFAULT_QUALITY_TOLERANCE if quality_tolerance is None
                     else float(quality_tolerance))
        self.speedup_threshold = Parameter.float(SPEEDUP_THRESHOLD_PARAMETER, speedup)
        self.quality_tolerance = Parameter.float(QUALITY_TOLERANCE_PARAMETER, tolerance)
        self.threshold_ranges = {
            SPEEDUP_THRESHOLD_PARAMETER: (speedup, SPEEDUP_THRESHOLD_LIMITS[1]),
            QUALITY_TOLERANCE_PARAMETER: (QUALITY_TOLERANCE_LIMITS[0], tolerance)}
        """What an execution may set each threshold parameter to: the bar set here or a
        stricter one."""
        if spot:
            Annotations.of(self).add_warning_v2(
                "compiled-training:CompilerBenchmark:Spot",
                "spot arms can be interrupted and resumed, which adds to their wall-clock "
                "time and distorts the comparison; benchmark on demand")

        common = self._common_job(
            framework=framework, instance_type=instance_type, instance_count=instance_count,
            source_dir=source_dir, entry_point=entry_point, hyperparameters=hyperparameters,
            channels=channels, output_bucket=output_bucket, volume_size_gib=volume_size_gib,
            max_runtime=max_runtime, spot=spot, max_wait=max_wait, max_attempts=max_attempts,
            debugger=False, profiler=False, kms_key=kms_key, vpc=vpc, vpc_subnets=vpc_subnets,
            security_groups=security_groups, network_isolation=network_isolation,
            inter_container_encryption=inter_container_encryption)
        self.arms: dict[str, TrainingJob] = {}
        """Each arm's training job, by arm name (``baseline``, ``compiler``...)."""
        self.images: dict[str, DlcImage] = {}
        repositories = self._add_arms(common, distribution, baseline_distribution,
                                      large_batch_size)

        comparison_type = comparison_instance_type or "ml.m5.large"
        self.comparison_image = self._comparison_image(comparison_type)
        comparison_uri, comparison_account = dlc_image_uri(self, self.comparison_image)
        repositories.append(self._dlc_repository_arn(self.comparison_image, comparison_account))
        comparison_code = shared_archive_asset(self, RUNTIME_PACKAGE_DIR)
        self.comparison_s3_prefix = f"{self.prefix}/comparison"
        """Where each execution writes its comparison (``<prefix>/<execution id>/``)."""

        policy = self._execution_policy(list(self.arms.values()),
                                        [c for c in (self.code, comparison_code) if c],
                                        repositories)
        self._allow_logs_and_metrics(policy, "ProcessingJobs")
        self.role = self._execution_role(policy)
        self.arms = {name: replace(job, role_arn=self.role.role_arn)
                     for name, job in self.arms.items()}

        self.decision_parameter_name = (decision_parameter_name
                                        or f"/compiled-training/{self.pipeline_name}/decision")
        """Where the verdict goes: a JSON object with ``verdict`` ("ship", "hold" or
        "undecided"), ``arm``, ``speedup``, ``quality_drop``, ``global_batch_size``,
        ``learning_rate``, ``reason``, the thresholds it was judged by
        (``speedup_threshold``, ``quality_tolerance``), ``comparison`` (S3) and
        ``execution``."""
        if not re.fullmatch(r"[A-Za-z0-9_.\-/]{1,2048}", self.decision_parameter_name):
            raise ValueError(f"{self._subject}: decision_parameter_name must be 1-2048 letters, "
                             f"digits and . _ - / (SSM's rule), got "
                             f"{shown(self.decision_parameter_name)}")
        self.decision_parameter = ssm.StringParameter(
            self, "DecisionParameter",
            parameter_name=self.decision_parameter_name,
            description=f"Verdict of compiler benchmark {self.pipeline_name}: ship or hold, "
                        "written by its RecordDecision step",
            string_value=Stack.of(self).to_json_string(UNDECIDED),
        )
        self.decision_function = self._decision_function()

        comparison = ComparisonJob(
            image_uri=comparison_uri,
            instance_type=comparison_type,
            role_arn=self.role.role_arn,
            code_s3_uri=comparison_code.s3_object_url,
            output_s3_uri=execution_scoped(self.comparison_s3_prefix),
            quality_metric=self.quality_metric,
            speedup_threshold=self.speedup_threshold,
            quality_tolerance=self.quality_tolerance,
            decision_function_arn=self.decision_function.function_arn,
            kms_key_id=kms_key.key_arn if kms_key else None,
            max_attempts=common.max_attempts,
            tags=common.tags,
        )
        self.parameters = {p.name: p for p in benchmark_parameters(self.arms, comparison)}
        pipeline_policy = self._pipeline_policy(self.role, ("training-job", "processing-job"))
        pipeline_policy.allow(["lambda:InvokeFunction"], [self.decision_function.function_arn])
        self._create_pipeline(
            definition=build_benchmark_definition(self.arms, comparison),
            description=description or (
                f"Benchmarks {compiler.describe()} against no compiler on "
                f"{framework.describe()}; ships at {self.speedup_threshold.default:.0%} "
                f"faster within {self.quality_tolerance.default:g} of {self.quality_metric}"),
            pipeline_policy=pipeline_policy,
            summary=self.summary())
        moves = [self._prefix_moves("its checkpoints and comparisons")]
        if decision_parameter_name is None:
            moves.append(f"replaces its verdict parameter {self.decision_parameter_name}, "
                         "deleting the recorded verdict")
        self._warn_if_named_by_path(*moves)

    def override_problem(self, name: str, value: ParameterValue) -> str | None:
        if name in self.threshold_ranges:
            low, high = self.threshold_ranges[name]
            if not low <= float(value) <= high:
                return (f"parameter {name!r} must be within {low:g}-{high:g}, the bar set at "
                        f"synth or a stricter one (the decision function refuses to record a "
                        f"verdict judged by another), got {value!r}")
        return super().override_problem(name, value)

    def grant_read_decision(self, grantee: iam.IGrantable) -> iam.Grant:
        """Lets ``grantee`` (the production side: a deploy role, a pipeline's role) read the
        verdict, and nothing else."""
        return self.decision_parameter.grant_read(grantee)

    def summary(self) -> dict[str, Any]:
        """What the synth summary shows; also written as the pipeline's template metadata."""
        return {
            "pipelineName": self.pipeline_name,
            "framework": self.framework.describe(),
            "frameworkName": self.framework.name,
            "frameworkVersion": self.framework.version,
            "pytorchVersion": self.framework.pytorch_version,
            "compiler": f"A/B: {self.compiler.describe()} vs none",
            "distribution": " / ".join(sorted({j.distribution.value
                                               for j in self.arms.values()})),
            "instances": f"{self.instance_count} x {self.instance_type} per arm",
            "image": ", ".join(f"{name}: {dlc.path}" for name, dlc in self.images.items()),
            "benchmark": {"arms": list(self.arms), "qualityMetric": self.quality_metric,
                          "speedupThreshold": self.speedup_threshold.default,
                          "qualityTolerance": self.quality_tolerance.default},
        }

    # --- wiring --------------------------------------------------------------------------

    def _add_arms(self, common: TrainingJob, distribution: Distribution | None,
                  baseline_distribution: Distribution | None,
                  large_batch_size: int | None) -> list[str]:
        """Fills ``arms`` (and ``images``); returns the image repositories they pull."""
        compiler, instance_type = self.compiler, self.instance_type
        multi_gpu = self.instance_count > 1 or (
            validation.known_instance_type(instance_type) and gpus_per_instance(instance_type) > 1)
        # Both sides use every GPU: torchrun without a compiler, the compiler's own launcher.
        spread = Distribution.TORCH_DISTRIBUTED if multi_gpu else Distribution.NONE
        compiled_distribution = distribution or (
            validation.default_distribution(compiler.kind, self.framework, instance_type,
                                       self.instance_count)
            if compiler.is_training_compiler else spread)
        # (arm, compiler, distribution, hyperparameter overrides)
        settings: list[tuple[str, Compiler, Distribution, dict[str, HyperparameterValue]]] = [
            (contract.ARM_BASELINE, Compiler.none(), baseline_distribution or spread, {}),
            (contract.ARM_COMPILER, compiler, compiled_distribution, {})]
        if large_batch_size is not None:
            settings.append((contract.ARM_COMPILER_LARGE_BATCH, compiler, compiled_distribution,
                             {"batch_size": large_batch_size,
                              "base_batch_size": common.hyperparameters["batch_size"]}))
        repositories = []
        for name, arm_compiler, arm_distribution, overrides in settings:
            dlc = try_resolve_dlc(self.framework, arm_compiler, instance_type)
            image_uri, account = dlc_image_uri(self, dlc) if dlc else ("", "")
            job = replace(common, compiler=arm_compiler, distribution=arm_distribution,
                          image_uri=image_uri, step_name=arm_step_name(name),
                          hyperparameters={**common.hyperparameters, **overrides},
                          # Arms run at once: each resumes from its own checkpoints only.
                          checkpoint_s3_uri=execution_scoped(f"{self.prefix}/checkpoints/{name}"))
            if dlc is not None:
                self.images[name] = dlc
                repositories.append(self._dlc_repository_arn(dlc, account))
            self.arms[name] = job
        self._check(self.arms)
        return repositories

    def _validate(self, compiler: Compiler, channels: Sequence[InputChannel],
                  hyperparameters: Mapping[str, HyperparameterValue],
                  large_batch_size: int | None, speedup_threshold: float | None,
                  quality_tolerance: float | None) -> None:
        problems = []
        if compiler.kind is CompilerKind.NONE:
            problems.append("compiler must be Compiler.training_compiler() or "
                            "Compiler.torch_compile(): the benchmark compares it with no "
                            "compiler, got Compiler.none()")
        if not self.framework.runs_script:
            problems.append(f"framework must be a deep-learning framework that runs the "
                            f"compiled-training runtime, got {self.framework.describe()}")
        names = [c.name for c in channels]
        if contract.CHANNEL_VALIDATION not in names:
            problems.append(f"channels must include {contract.CHANNEL_VALIDATION!r} (quality "
                            f"is compared on it), got {names}")
        if self.quality_metric not in contract.QUALITY_METRICS:
            problems.append(f"quality_metric must be one of "
                            f"{', '.join(contract.QUALITY_METRICS)}, got {self.quality_metric!r}")
        for field, value, (low, high) in (
                ("speedup_threshold", speedup_threshold, SPEEDUP_THRESHOLD_LIMITS),
                ("quality_tolerance", quality_tolerance, QUALITY_TOLERANCE_LIMITS)):
            if value is not None and not low <= value <= high:
                problems.append(f"{field} must be between {low:g} and {high:g}, got {value!r}")
        if large_batch_size is not None:
            base = hyperparameters.get("batch_size")
            if not isinstance(base, int) or isinstance(base, bool):
                problems.append(f"large_batch_size needs an integer hyperparameters"
                                f"['batch_size'] to scale the learning rate from, got {base!r}")
            elif not isinstance(large_batch_size, int) or large_batch_size <= base:
                problems.append(f"large_batch_size must be an integer above batch_size {base}, "
                                f"got {large_batch_size!r}")
            if "base_batch_size" in hyperparameters:
                problems.append("hyperparameters['base_batch_size'] is set by the large-batch "
                                "arm; leave it out")
        findings = [validation.Finding("Benchmark", p) for p in problems]
        validation.Findings(findings, []).raise_errors(self._subject)

    def _comparison_image(self, instance_type: str) -> DlcImage:
        """The PyTorch CPU training image of the framework's PyTorch: Python 3, no GPU."""
        if Token.is_unresolved(instance_type) or instance_type not in validation.api_shape(
                "ProcessingInstanceType").enum:
            raise ValueError(f"{self._subject}: comparison_instance_type must be a SageMaker "
                             f"instance type, got {instance_type!r} (one of the API's "
                             "ProcessingInstanceType values)")
        version = self.framework.pytorch_version or ""
        try:
            return resolve_dlc(Framework.pytorch(version), False, instance_type)
        except ValueError as error:
            raise ValueError(f"{self._subject}: no image for the comparison step: {error}"
                             ) from None

    def _decision_function(self) -> lambda_.Function:
        policy = InlinePolicy()
        policy.allow(["ssm:PutParameter"], [self.decision_parameter.parameter_arn])
        return step_function(
            self, "Decision", module="decision", policy=policy,
            description=f"Records the verdict of compiler benchmark {self.pipeline_name}",
            purpose="It writes the verdict to one SSM parameter from the pipeline's Lambda step",
            timeout=Duration.seconds(30),
            environment={
                "DECISION_PARAMETER": self.decision_parameter.parameter_name,
                "THRESHOLD_RANGES": json.dumps({VERDICT_FIELDS[name]: list(bounds) for
                                                name, bounds in self.threshold_ranges.items()},
                                               sort_keys=True),
            })

