"""`CompilerBenchmark`: the same training job with and without the compiler, compared and
decided in one SageMaker pipeline."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import jsii
from aws_cdk import Annotations, Duration, Stack, Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_ssm as ssm
from typing_extensions import Unpack  # typing's from Python 3.11

from compiled_training.catalog.api_shapes import api_shape, shown
from compiled_training.catalog.aws_names import ssm_parameter_name_problem
from compiled_training.catalog.dlc import DlcImage, resolve_dlc
from compiled_training.catalog.instances import gpus_per_instance
from compiled_training.catalog.neuron import is_trainium
from compiled_training.catalog.prices import PRICES_SOURCE, price_per_hour
from compiled_training.definition import launchers, validation
from compiled_training.definition.benchmark import (
    ComparisonJob,
    arm_name_problems,
    arm_step_name,
    benchmark_parameters,
    build_benchmark_definition,
    large_batch_problems,
)
from compiled_training.definition.training import execution_scoped
from compiled_training.image.runtime_wheel import PACKAGE_DIR as RUNTIME_PACKAGE_DIR
from compiled_training.pipelines.base import PipelineBase
from compiled_training.pipelines.options import (
    BENCHMARK_REQUIRED,
    DEFAULT_COMPARISON_INSTANCE_TYPE,
    CompilerBenchmarkProps,
)
from compiled_training.pipelines.training_image import TrainingImage, dlc_repository_arn
from compiled_training.typecheck import check_arguments
from compiled_training.values.compiler import Compiler
from compiled_training.values.framework import Framework
from compiled_training.values.job import (
    BenchmarkArm,
    Distribution,
    HyperparameterValue,
    InputChannel,
    Parameter,
    ParameterValue,
    TrainingJob,
)
from compiled_training.wiring.assets import asset_location, shared_archive_asset
from compiled_training.wiring.dlc_uri import dlc_image_uri
from compiled_training.wiring.functions import step_function
from compiled_training.wiring.policy import InlinePolicy
from compiled_training.wiring.stack_reads import aws_partition, role_arn
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
    compiler), ``compiler``, optionally ``compiler-large-batch`` (the compiler with a
    larger batch and the learning rate scaled to it), and any ``arms`` on instances of their
    own (a Trainium arm beside the GPU job). A comparison step reads each arm's run summary
    and SageMaker's timings and writes ``comparison.json`` and ``comparison.md`` to S3, with
    time and cost per epoch; an arm on the baseline's instances is judged by its wall-clock
    speedup, one on other instances by its cost per epoch, each at equal quality. The
    verdict ("ship" or "hold", with the arm, its instances, batch size and learning rate)
    goes to the SSM parameter ``decision_parameter``; a hold then fails the execution with
    the reason. Implements ``aws_sagemaker.IPipeline``, so a
    `RetrainingSchedule` can run it again after a framework or model change.
    Props: `CompilerBenchmarkProps` (a training job's `TrainingJobOptions`, with
    ``source_dir``, ``entry_point`` and ``channels`` required, and the benchmark's own).
    """

    quality_metric: str
    speedup_threshold: Parameter
    quality_tolerance: Parameter
    threshold_ranges: dict[str, tuple[float, float]]
    """What an execution may set each threshold parameter to: the bar set here or a stricter
    one."""
    arms: dict[str, TrainingJob]
    """Each arm's training job, by arm name (``baseline``, ``compiler``...)."""
    images: dict[str, DlcImage]
    """Each arm's Deep Learning Container, by arm name."""
    prices: dict[str, float | None]
    """Each arm's USD per instance-hour (None: unknown), by arm name."""
    comparison_image: DlcImage
    comparison_s3_prefix: str
    """Where each execution writes its comparison (``<prefix>/<execution id>/``)."""
    decision_parameter_name: str
    """Where the verdict goes: a JSON object with ``verdict`` ("ship", "hold" or
    "undecided"), ``arm``, ``speedup``, ``quality_drop``, ``global_batch_size``,
    ``learning_rate``, ``reason``, the thresholds it was judged by (``speedup_threshold``,
    ``quality_tolerance``), ``comparison`` (S3) and ``execution``."""
    decision_parameter: ssm.StringParameter
    decision_function: lambda_.Function

    def __init__(self, scope: Construct, construct_id: str,
                 **props: Unpack[CompilerBenchmarkProps]) -> None:
        check_arguments(CompilerBenchmark.__init__, locals(), required=BENCHMARK_REQUIRED)
        super().__init__(scope, construct_id, options=props,
                         compiler=props.get("compiler") or Compiler.training_compiler(),
                         arm_compilers=[arm.compiler for arm in props.get("arms") or []])
        self.quality_metric = props.get("quality_metric") or contract.DEFAULT_QUALITY_METRIC
        speedup_threshold = props.get("speedup_threshold")
        quality_tolerance = props.get("quality_tolerance")
        self._validate(self.compiler, props.get("channels") or [],
                       props.get("hyperparameters") or {}, props.get("large_batch_size"),
                       speedup_threshold, quality_tolerance, list(props.get("arms") or []))
        speedup = (contract.DEFAULT_SPEEDUP_THRESHOLD if speedup_threshold is None
                   else float(speedup_threshold))
        tolerance = (contract.DEFAULT_QUALITY_TOLERANCE if quality_tolerance is None
                     else float(quality_tolerance))
        self.speedup_threshold = Parameter.float(SPEEDUP_THRESHOLD_PARAMETER, speedup)
        self.quality_tolerance = Parameter.float(QUALITY_TOLERANCE_PARAMETER, tolerance)
        self.threshold_ranges = {
            SPEEDUP_THRESHOLD_PARAMETER: (speedup, SPEEDUP_THRESHOLD_LIMITS[1]),
            QUALITY_TOLERANCE_PARAMETER: (QUALITY_TOLERANCE_LIMITS[0], tolerance)}
        if props.get("spot"):
            Annotations.of(self).add_warning_v2(
                "compiled-training:CompilerBenchmark:Spot",
                "spot arms can be interrupted and resumed, which adds to their wall-clock "
                "time and distorts the comparison; benchmark on demand")
        self._props = props
        self._build()

    # --- the build's steps (`PipelineBase._build`) --------------------------------------------

    def _bind_jobs(self, policy: InlinePolicy) -> tuple[list[TrainingJob], list[s3_assets.Asset]]:
        props = self._props
        self.arms = {}
        self.images = {}
        self._add_arms(self._common, policy, props.get("distribution"),
                       props.get("baseline_distribution"), props.get("large_batch_size"),
                       list(props.get("arms") or []))
        self.prices = self._arm_prices(props.get("prices") or {})
        self._comparison_type = (props.get("comparison_instance_type")
                                 or DEFAULT_COMPARISON_INSTANCE_TYPE)
        self.comparison_image = self._comparison_image(self._comparison_type)
        self._comparison_uri, account = dlc_image_uri(self, self.comparison_image)
        policy.allow_pull(dlc_repository_arn(self, self.comparison_image, account))
        self._comparison_code = shared_archive_asset(self, RUNTIME_PACKAGE_DIR)
        self.comparison_s3_prefix = f"{self.prefix}/comparison"
        return (list(self.arms.values()),
                [c for c in (self.code, self._comparison_code) if c])

    def _execution_policy(self, policy: InlinePolicy, jobs: Sequence[TrainingJob],
                          code: Sequence[s3_assets.Asset]) -> InlinePolicy:
        super()._execution_policy(policy, jobs, code)
        policy.allow_job_logs(self._stack, "ProcessingJobs")  # the comparison's
        # A Processing input is an S3 prefix: SageMaker lists it (ListObjectsV2) before it
        # downloads, so the comparison's code needs its one key listed too.
        location = asset_location(self._comparison_code)
        policy.allow(["s3:ListBucket"], [f"arn:{aws_partition()}:s3:::{location.bucket}"],
                     conditions={"StringEquals": {"s3:prefix": [location.key]}})
        return policy

    def _run_jobs_as(self, arn: str) -> None:
        self.arms = {name: replace(job, role_arn=arn) for name, job in self.arms.items()}

    def _definition(self) -> tuple[dict[str, Any], InlinePolicy]:
        given_name = self._props.get("decision_parameter_name")
        self.decision_parameter_name = (f"/compiled-training/{self.pipeline_name}/decision"
                                        if given_name is None else given_name)
        problem = ssm_parameter_name_problem(self.decision_parameter_name)
        if problem:
            raise ValueError(f"{self._subject}: decision_parameter_name {problem}, got "
                             f"{shown(self.decision_parameter_name)}")
        self.decision_parameter = ssm.StringParameter(
            self, "DecisionParameter",
            parameter_name=self.decision_parameter_name,
            description=f"Verdict of compiler benchmark {self.pipeline_name}: ship or hold, "
                        "written by its RecordDecision step",
            string_value=Stack.of(self).to_json_string(UNDECIDED),
        )
        self.decision_function = self._decision_function()
        common = self._common
        comparison = ComparisonJob(
            image_uri=self._comparison_uri,
            instance_type=self._comparison_type,
            role_arn=role_arn(self.role),
            code_s3_uri=self._comparison_code.s3_object_url,
            output_s3_uri=execution_scoped(self.comparison_s3_prefix),
            quality_metric=self.quality_metric,
            speedup_threshold=self.speedup_threshold,
            quality_tolerance=self.quality_tolerance,
            decision_function_arn=self.decision_function.function_arn,
            prices=self.prices,
            kms_key_id=common.kms_key_id,
            max_attempts=common.max_attempts,
            tags=common.tags,
        )
        self.parameters = {p.name: p for p in benchmark_parameters(self.arms, comparison)}
        pipeline_policy = self._pipeline_policy(self.role, ("training-job", "processing-job"))
        pipeline_policy.allow(["lambda:InvokeFunction"], [self.decision_function.function_arn])
        return build_benchmark_definition(self.arms, comparison), pipeline_policy

    def _default_description(self) -> str:
        return (f"Benchmarks {self.compiler.describe()}{self._other_arms_text()} against no "
                f"compiler on {self.framework.describe()}; ships at "
                f"{self.speedup_threshold.default:.0%} faster (or more per dollar) within "
                f"{self.quality_tolerance.default:g} of {self.quality_metric}")[:3072]

    def _name_moves(self) -> list[str]:
        moves = [self._prefix_moves("its checkpoints and comparisons")]
        if self._props.get("decision_parameter_name") is None:
            moves.append(f"replaces its verdict parameter {self.decision_parameter_name}, "
                         "deleting the recorded verdict")
        return moves

    def override_problem(self, name: str, value: ParameterValue) -> str | None:
        if name in self.threshold_ranges:
            low, high = self.threshold_ranges[name]
            if not low <= float(value) <= high:
                return (f"parameter {name!r} must be within {low:g}-{high:g}, the bar set at "
                        f"synth or a stricter one (the decision function refuses to record a "
                        f"verdict judged by another), got {value!r}")
        return super().override_problem(name, value)

    @property
    def decision_parameter_arn(self) -> str:
        return self.decision_parameter.parameter_arn

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
            "compiler": f"A/B: {self.compiler.describe()} vs none"
                        + "".join(f"; {name}: {job.compiler.name}"
                                  for name, job in self._other_arms()),
            "distribution": " / ".join(sorted({j.distribution.value
                                               for j in self.arms.values()})),
            "instances": f"{self.instance_count} x {self.instance_type} per arm"
                         + self._other_arms_text(instances=True),
            "image": ", ".join(f"{name}: {dlc.path}" for name, dlc in self.images.items()),
            "benchmark": {"arms": list(self.arms), "qualityMetric": self.quality_metric,
                          "speedupThreshold": self.speedup_threshold.default,
                          "qualityTolerance": self.quality_tolerance.default,
                          "fleets": {name: {"instanceType": job.instance_type,
                                            "instanceCount": job.instance_count,
                                            "compiler": job.compiler.name,
                                            "usdPerInstanceHour": self.prices.get(name)}
                                     for name, job in self.arms.items()}},
        }

    # --- wiring --------------------------------------------------------------------------

    def _add_arms(self, common: TrainingJob, policy: InlinePolicy,
                  distribution: Distribution | None, baseline_distribution: Distribution | None,
                  large_batch_size: int | None, extra_arms: Sequence[BenchmarkArm]) -> None:
        """Fills ``arms`` (and ``images``); ``policy`` pulls their images."""
        compiler = self.compiler
        own = BenchmarkArm(contract.ARM_COMPILER, compiler, self.instance_type,
                           self.instance_count, distribution=distribution)
        # (arm, hyperparameter overrides); the baseline is the job without a compiler.
        settings: list[tuple[BenchmarkArm, dict[str, HyperparameterValue]]] = [
            (replace(own, name=contract.ARM_BASELINE, compiler=Compiler.none(),
                     distribution=baseline_distribution), {}),
            (own, {})]
        if large_batch_size is not None:
            settings.append((replace(own, name=contract.ARM_COMPILER_LARGE_BATCH),
                             {contract.HP_BATCH_SIZE: large_batch_size,
                              contract.HP_BASE_BATCH_SIZE:
                                  common.hyperparameters[contract.HP_BATCH_SIZE]}))
        settings += [(arm, dict(arm.hyperparameters or {})) for arm in extra_arms]
        for arm, overrides in settings:
            name, framework = arm.name, arm.framework or self.framework
            image = TrainingImage.dlc().bind(self, policy, framework=framework,
                                             compiler=arm.compiler,
                                             instance_type=arm.instance_type)
            job = replace(common, compiler=arm.compiler, framework=framework,
                          instance_type=arm.instance_type, instance_count=arm.instance_count,
                          # As a pipeline on the arm's own instances would set it.
                          inter_container_encryption=self._encrypts_between(arm.instance_count),
                          distribution=arm.distribution or self._arm_distribution(arm, framework),
                          image_uri=image.image_uri, step_name=arm_step_name(name),
                          hyperparameters={**common.hyperparameters, **overrides},
                          # Arms run at once: each resumes from its own checkpoints only.
                          checkpoint_s3_uri=execution_scoped(f"{self.prefix}/checkpoints/{name}"))
            if image.dlc is not None:
                self.images[name] = image.dlc
            self.arms[name] = job
        self._check(self.arms)

    @staticmethod
    def _arm_distribution(arm: BenchmarkArm, framework: Framework) -> Distribution:
        """Every arm uses every accelerator: torchrun without a compiler and under
        torch.compile, the compiler's own launcher for Training Compiler, torchrun (one
        process per NeuronCore) on Trainium."""
        if arm.compiler.module.sets_own_launcher or is_trainium(arm.instance_type):
            return launchers.default_distribution(arm.compiler, framework,
                                                   arm.instance_type, arm.instance_count)
        multi_gpu = arm.instance_count > 1 or (
            validation.known_instance_type(arm.instance_type)
            and gpus_per_instance(arm.instance_type) > 1)
        return Distribution.TORCH_DISTRIBUTED if multi_gpu else Distribution.NONE

    def _arm_prices(self, prices: Mapping[str, float]) -> dict[str, float | None]:
        """Each arm's price; an arm on other instances than the baseline's is compared by
        cost, so both prices must be known."""
        wrong = {t: usd for t, usd in prices.items() if not (0 < float(usd) < math.inf)}
        if wrong:
            raise ValueError(f"{self._subject}: prices must be positive, finite USD per "
                             f"instance-hour, got {wrong}")
        known = {name: price_per_hour(job.instance_type, prices)
                 for name, job in self.arms.items()}
        others = [name for name, _ in self._other_arms()]
        needed = [contract.ARM_BASELINE, *others] if others else []
        unpriced = sorted({self.arms[name].instance_type for name in needed
                           if known[name] is None})
        if unpriced:
            raise ValueError(
                f"{self._subject}: arms on other instances than the baseline's are compared by "
                f"cost per epoch, and {', '.join(unpriced)} has no recorded price "
                f"({PRICES_SOURCE}); give prices={{{unpriced[0]!r}: USD per instance-hour}}")
        return known

    def _other_arms(self) -> list[tuple[str, TrainingJob]]:
        """The arms on instances of their own."""
        baseline = self.arms[contract.ARM_BASELINE]
        return [(name, job) for name, job in self.arms.items()
                if (job.instance_type, job.instance_count)
                != (baseline.instance_type, baseline.instance_count)]

    def _other_arms_text(self, *, instances: bool = False) -> str:
        """The arms on instances of their own, for the description and the summary."""
        others = self._other_arms()
        if instances:
            return "".join(f"; {name}: {job.instance_count} x {job.instance_type}"
                           for name, job in others)
        return "".join(f", {name} ({job.compiler.describe()} on {job.instance_count} x "
                       f"{job.instance_type})" for name, job in others)

    def _validate(self, compiler: Compiler, channels: Sequence[InputChannel],
                  hyperparameters: Mapping[str, HyperparameterValue],
                  large_batch_size: int | None, speedup_threshold: float | None,
                  quality_tolerance: float | None, extra_arms: Sequence[BenchmarkArm]) -> None:
        problems = [*arm_name_problems(extra_arms),
                    *large_batch_problems(large_batch_size, hyperparameters)]
        if not compiler.is_enabled:
            problems.append("compiler must be Compiler.training_compiler() or "
                            "Compiler.torch_compile(): the benchmark compares it with no "
                            "compiler, got Compiler.none()")
        if is_trainium(self.instance_type):
            problems.append(f"instance_type {self.instance_type!r} is AWS Trainium, where the "
                            f"baseline arm cannot run eager; benchmark on the GPU job's "
                            f"instances and put Trainium in an arm of its own: arms=["
                            f"BenchmarkArm('trainium', Compiler.neuron_xla(), "
                            f"{self.instance_type!r}, ...)]")
        if not self.framework.runs_script:
            problems.append(f"framework must be a deep-learning framework that runs the "
                            f"compiled-training runtime, got {self.framework.describe()}")
        names = [c.name for c in channels]
        if contract.CHANNEL_VALIDATION not in names:
            problems.append(f"channels must include {contract.CHANNEL_VALIDATION!r} (quality "
                            f"is compared on it), got {names}")
        if self.quality_metric not in contract.QUALITY_METRICS:
            problems.append(contract.not_one_of("quality_metric", self.quality_metric,
                                                contract.QUALITY_METRICS))
        for field, value, (low, high) in (
                ("speedup_threshold", speedup_threshold, SPEEDUP_THRESHOLD_LIMITS),
                ("quality_tolerance", quality_tolerance, QUALITY_TOLERANCE_LIMITS)):
            if value is not None and not low <= value <= high:
                problems.append(f"{field} must be between {low:g} and {high:g}, got {value!r}")
        findings = [validation.Finding("Benchmark", p) for p in problems]
        validation.Findings(findings, []).raise_errors(self._subject)

    def _comparison_image(self, instance_type: str) -> DlcImage:
        """The PyTorch CPU training image of the framework's PyTorch: Python 3, no GPU."""
        if Token.is_unresolved(instance_type) or instance_type not in api_shape(
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
            role=self._handler_role(),
            environment={
                "DECISION_PARAMETER": self.decision_parameter.parameter_name,
                "THRESHOLD_RANGES": json.dumps({VERDICT_FIELDS[name]: list(bounds) for
                                                name, bounds in self.threshold_ranges.items()},
                                               sort_keys=True),
            })

    def _jobs(self) -> list[TrainingJob]:
        return list(self.arms.values())
