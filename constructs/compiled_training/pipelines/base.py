"""What every SageMaker pipeline this library makes shares: the training job's common wiring
(code, bucket, VPC, roles) and the pipeline resource itself; ``IPipeline``, grants and metrics
come from `NamedPipeline`.

`TrainingPipeline` (one training step) and `CompilerBenchmark` (A/B arms, a comparison and
a decision) differ only in the jobs they put into their definitions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aws_cdk import Annotations, Names, Tags, Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_sagemaker as sagemaker

from compiled_training.catalog.aws_names import split_s3
from compiled_training.definition import compile_cache, validation
from compiled_training.definition.entry_point import runtime_to_ship
from compiled_training.definition.registration import metric_definitions_for
from compiled_training.definition.training import execution_scoped
from compiled_training.pipelines.governance import (
    PIPELINE_TAG,
    JobTagSet,
    attach_to_given_role,
    check_role_accounts,
    job_tag_keys,
    watch_job_tags,
    with_job_tags,
)
from compiled_training.pipelines.limits import watch_stack
from compiled_training.pipelines.named_pipeline import ImportedPipeline, NamedPipeline, subject
from compiled_training.pipelines.network import vpc_config
from compiled_training.pipelines.options import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_RUNTIME_HOURS,
    DEFAULT_VOLUME_SIZE_GIB,
    TrainingJobOptions,
)
from compiled_training.pipelines.output_bucket import TrainingOutputBucket, expire_compile_cache
from compiled_training.pipelines.reach import TEAM_ROLES, Reach, give_once
from compiled_training.values.compiler import Compiler
from compiled_training.values.framework import Framework
from compiled_training.values.job import (
    Distribution,
    Parameter,
    ParameterValue,
    TrainingJob,
)
from compiled_training.wiring.assets import asset_location, bucket_name, shared_archive_asset
from compiled_training.wiring.functions import RoleMaker
from compiled_training.wiring.policy import InlinePolicy
from compiled_training.wiring.stack_reads import (
    account,
    app_root,
    aws_partition,
    made_in,
    once,
    path,
    pipeline_names,
    region,
    role_arn,
)
from constructs import Construct

SCHEDULES_METADATA = "compiled-training:schedules"
"""The pipeline resource's metadata naming the schedules that start it (the rule pack's)."""


class PipelineBase(NamedPipeline):
    """A SageMaker pipeline that runs training jobs; subclasses build its definition.

    Wires what a training job's options (`TrainingJobOptions`) ask for: the code asset, the
    output bucket and prefix, the VPC; subclasses add their steps' compilers and images.
    """

    framework: Framework
    compiler: Compiler
    """The compiler (in a `CompilerBenchmark`, the one on trial)."""
    instance_type: str
    instance_count: int
    parameters: dict[str, Parameter]
    """The pipeline parameters an execution (or a schedule) may override, by name."""
    code: s3_assets.Asset | None
    """The ``sourcedir.tar.gz`` asset; None for a built-in algorithm."""
    kms_key: kms.IKey | None
    bucket: s3.IBucket
    """Where models, outputs and checkpoints go, under ``prefix``."""
    prefix: str
    """This pipeline's S3 prefix (``s3://<bucket>/<pipeline name>``), its roles' only one."""
    role: iam.IRole
    """The execution role its jobs run as (the ``role`` prop's, or one it created)."""
    pipeline_role: iam.IRole
    """The role SageMaker Pipelines runs the pipeline as (``pipeline_role``, or its own)."""

    def __init__(self, scope: Construct, construct_id: str, *, options: TrainingJobOptions,
                 compiler: Compiler, arm_compilers: Sequence[Compiler] = ()) -> None:
        super().__init__(scope, construct_id)
        self._stack = made_in(self, scope)
        pipeline_name = options.get("pipeline_name")
        self._named_by_path = pipeline_name is None
        self._pipeline_name = pipeline_name or Names.unique_resource_name(
            self, max_length=80, separator="-")
        self.framework = options["framework"]
        self.compiler = compiler
        self.instance_type = options["instance_type"]
        count = options.get("instance_count")
        self.instance_count = 1 if count is None else count
        self.parameters = {}
        source_dir = options.get("source_dir")
        self.code = None if source_dir is None else self._code_asset(
            Path(source_dir), options.get("entry_point"), (compiler, *arm_compilers))
        if self.code is None and self.framework.runs_script:
            raise ValueError(
                f"{self._subject}: source_dir is required for {self.framework.describe()} (it "
                f"holds entry_point {options.get('entry_point')!r})")
        self.kms_key = options.get("kms_key")
        given_bucket = options.get("output_bucket")
        self.bucket = given_bucket or TrainingOutputBucket.of_stack(self, self.kms_key)
        self._own_bucket = given_bucket is None
        self.prefix = f"s3://{bucket_name(self.bucket)}/{self.pipeline_name}"
        tags = options.get("tags") or {}
        for key, value in sorted(tags.items()):
            Tags.of(self).add(key, value)
        self._job_tags = JobTagSet(self, tags)
        watch_stack(self._stack)
        self._encryption_given = options.get("inter_container_encryption")
        self._given_roles: dict[str, iam.IRole | None] = {
            "role": options.get("role"), "pipeline_role": options.get("pipeline_role"),
            "handler_role": options.get("handler_role")}
        check_role_accounts(self, self._subject, self._given_roles)
        self._reach = Reach(self._subject, self.pipeline_name, options.get("team_scope"),
                            self._given_roles, app_root(self._stack),
                            named_by_path=self._named_by_path)
        self._description = options.get("description")
        self._common = self._common_job(options)

    @staticmethod
    def from_pipeline_name(scope: Construct, construct_id: str,
                           pipeline_name: str) -> sagemaker.IPipeline:
        """A pipeline made elsewhere (by the SageMaker SDK's ``upsert``, the console, another
        stack), by name in this stack's account and region: enough for a `RetrainingSchedule`
        to start it, alarm on it and report its executions."""
        return ImportedPipeline(scope, construct_id, pipeline_name=pipeline_name)

    @property
    def resource(self) -> sagemaker.CfnPipeline:
        """The ``AWS::SageMaker::Pipeline`` resource, for escape hatches and acknowledgements."""
        return self._resource

    @property
    def pipeline_ref(self) -> Any:
        return self._resource.pipeline_ref

    def override_problem(self, name: str, value: ParameterValue) -> str | None:
        """Why an execution could not run with ``value`` for parameter ``name`` (a type-checked
        value), or None: a channel's data URI must stay where the execution role may read."""
        for channel in (c for job in self._jobs() for c in job.channels):
            uri = channel.s3_uri
            if (isinstance(uri, Parameter) and uri.name == name
                    and not Token.is_unresolved(uri.default)
                    and not str(value).startswith(str(uri.default))):
                return (f"parameter {name!r} is channel {channel.name!r}'s data URI: the "
                        f"execution role may read under {uri.default} only, got {value!r}")
        return None

    # --- for subclasses ------------------------------------------------------------------

    def _build(self) -> None:
        """Builds the pipeline in one order; a subclass answers the hooks, then calls this:

        1. `_bind_jobs`: its steps' jobs, their images pulled through the execution policy;
        2. the execution role, allowed what the jobs and code read and write (`_execution_policy`);
        3. `_run_jobs_as`: the jobs, now run as that role;
        4. `_definition`: the steps, and the policy of the role Pipelines runs them as;
        5. the pipeline, described (`_default_description`) and summarized (`summary`), and
           the warning where its name follows its path (`_name_moves`).
        """
        policy = InlinePolicy()
        jobs, code = self._bind_jobs(policy)
        self._execution_policy(policy, jobs, code)
        self.role = self._execution_role(policy)
        self._run_jobs_as(role_arn(self.role))
        definition, pipeline_policy = self._definition()
        self.pipeline_role = self._create_pipeline(
            definition=definition, pipeline_policy=pipeline_policy, summary=self.summary(),
            description=self._description or self._default_description())
        self._warn_if_named_by_path(*self._name_moves())

    def _bind_jobs(self, policy: InlinePolicy
                   ) -> tuple[Sequence[TrainingJob], Sequence[s3_assets.Asset]]:
        """Its jobs, their images' pulls added to ``policy``; and the code they read."""
        raise NotImplementedError

    def _run_jobs_as(self, arn: str) -> None:
        raise NotImplementedError

    def _definition(self) -> tuple[dict[str, Any], InlinePolicy]:
        raise NotImplementedError

    def _default_description(self) -> str:
        raise NotImplementedError

    def _name_moves(self) -> list[str]:
        """What a name that follows the construct's path moves when the path changes."""
        raise NotImplementedError

    def summary(self) -> dict[str, Any]:
        """What the synth summary shows; also written as the pipeline's template metadata."""
        raise NotImplementedError

    def _jobs(self) -> Sequence[TrainingJob]:
        """The pipeline's training jobs, once built."""
        raise NotImplementedError

    def _common_job(self, options: TrainingJobOptions) -> TrainingJob:
        """The job every step of this pipeline starts from: no compiler and no image yet."""
        max_runtime, max_wait = options.get("max_runtime"), options.get("max_wait")
        runtime_seconds = (int(max_runtime.to_seconds()) if max_runtime
                           else DEFAULT_MAX_RUNTIME_HOURS * 3600)
        spot, source_dir = options.get("spot"), options.get("source_dir")
        volume_size_gib, max_attempts = options.get("volume_size_gib"), options.get("max_attempts")
        subnet_ids, group_ids = vpc_config(self, options.get("vpc"), options.get("vpc_subnets"),
                                           options.get("security_groups"))
        return TrainingJob(
            pipeline_name=self.pipeline_name,
            framework=self.framework,
            compiler=Compiler.none(),
            distribution=Distribution.NONE,
            instance_type=self.instance_type,
            instance_count=self.instance_count,
            volume_size_gib=(DEFAULT_VOLUME_SIZE_GIB if volume_size_gib is None
                             else volume_size_gib),
            max_runtime_seconds=runtime_seconds,
            image_uri="",
            role_arn="",  # the execution role's, once its policy can be written from the jobs
            region=region(self._stack),
            output_s3_uri=f"{self.prefix}/output",
            entry_point=options.get("entry_point"),
            source_s3_uri=asset_location(self.code).url if self.code else None,
            source_dir=Path(source_dir) if source_dir is not None else None,
            hyperparameters=dict(options.get("hyperparameters") or {}),
            channels=list(options.get("channels") or []),
            metric_definitions=metric_definitions_for(self.framework,
                                                      options.get("metric_definitions")),
            spot=bool(spot),
            max_wait_seconds=(2 * runtime_seconds if max_wait is None
                              else int(max_wait.to_seconds())) if spot else None,
            checkpoint_s3_uri=execution_scoped(f"{self.prefix}/checkpoints"),
            kms_key_id=self.kms_key.key_arn if self.kms_key else None,
            subnet_ids=subnet_ids,
            security_group_ids=group_ids,
            network_isolation=bool(options.get("network_isolation")),
            inter_container_encryption=self._encrypts_between(self.instance_count),
            max_attempts=DEFAULT_MAX_ATTEMPTS if max_attempts is None else max_attempts,
            tags={PIPELINE_TAG: self.pipeline_name},
            compile_cache_s3_uri=f"{self.prefix}/{compile_cache.NEURON_COMPILE_CACHE}/",
            torch_compile_cache_s3_uri=(None if options.get("compile_cache") is False
                                        else f"{self.prefix}/{compile_cache.COMPILE_CACHE}/"),
        )

    def _encrypts_between(self, instance_count: int) -> bool:
        """Inter-container encryption for a job on ``instance_count`` instances: as given,
        or on wherever there is more than one."""
        given = self._encryption_given
        return instance_count > 1 if given is None else given

    @property
    def _subject(self) -> str:
        return subject(self)

    def _warn_if_named_by_path(self, *moves: str) -> None:
        """A name derived from the construct path changes with the construct's id or place, and
        so does everything the name carries (``moves`` says what)."""
        if self._named_by_path:
            Annotations.of(self).add_warning_v2(
                f"compiled-training:{type(self).__name__}:NamedByPath",
                f"pipeline_name is omitted, so the pipeline is named {self.pipeline_name!r} "
                f"after this construct's id and path: renaming or moving the construct renames "
                f"the pipeline, {' and '.join(moves)}; pass pipeline_name="
                f"{self.pipeline_name!r} to keep them")

    def _prefix_moves(self, holding: str) -> str:
        return (f"moves its S3 prefix {self.pipeline_name}/ in the output bucket and leaves "
                f"{holding} under the old one")

    def _check(self, jobs: Mapping[str, TrainingJob]) -> None:
        """Raises every rule a job breaks in one message; warns (acknowledgeably) about the
        rest, each warning once with the arms it concerns. Keys name arms; "" a lone job."""
        warnings: dict[tuple[str, str], list[str]] = {}
        for arm, job in jobs.items():
            findings = validation.check(job)
            if findings.errors:
                findings.raise_errors(f"{self._subject} ({arm} arm)" if arm else self._subject)
            for warning in findings.warnings:
                warnings.setdefault((warning.rule, warning.message), []).append(arm)
        for (rule, message), arms in warnings.items():
            named = [arm for arm in arms if arm]
            concerns = f"{', '.join(named)} arm{'s' if len(named) > 1 else ''}: " if named else ""
            Annotations.of(self).add_warning_v2(
                f"compiled-training:{type(self).__name__}:{rule}", concerns + message)

    def _check_pipeline(self, definition: dict[str, Any], description: str) -> None:
        """Raises every problem of the pipeline as SageMaker receives it
        (`validation.check_pipeline`); then claims its name in the app."""
        stack = self._stack
        names = pipeline_names(app_root(stack))
        key = (account(stack), region(stack), self.pipeline_name.lower())
        taken_by = names.get(key)
        findings = validation.check_pipeline(definition, description, self.pipeline_name,
                                             path(taken_by) if taken_by else None)
        if findings.errors:
            findings.raise_errors(self._subject)
        names[key] = self

    def _execution_policy(self, policy: InlinePolicy, jobs: Sequence[TrainingJob],
                          code: Sequence[s3_assets.Asset]) -> InlinePolicy:
        """Reads its code and input prefixes, writes its own prefix; ``policy`` already pulls
        its own images (`TrainingImage.bind`)."""
        for asset in code:
            location = asset_location(asset)
            policy.allow(["s3:GetObject"], [
                f"arn:{aws_partition()}:s3:::{location.bucket}/{location.key}"])
        channels = {c.name: c for job in jobs for c in job.channels}
        wildcards = [f"channel {c.name!r} URI must not contain '*' or '?' (the execution role's "
                     f"S3 grant is built from it and IAM reads them as wildcards: "
                     f"'s3://bucket/*' would grant the whole bucket), got {c.default_uri!r}"
                     for c in channels.values() if {"*", "?"} & set(c.default_uri)]
        if wildcards:
            raise ValueError(f"{self._subject}: " + "; ".join(wildcards))
        for channel in channels.values():
            bucket, key_prefix = split_s3(self._reach.channel_prefix(channel, self._subject))
            policy.allow_prefix(bucket, key_prefix, ["s3:GetObject"],
                                why="Training reads every object under its channels' prefixes "
                                    "(in a team scope, the team's data URIs), and only there.")
        # The compile caches are under this prefix too: Neuron needs it "readable and
        # writeable" (its caching guide), the warm start gets and puts one archive.
        if self._own_bucket and any(compile_cache.plan(job).uri for job in jobs):
            expire_compile_cache(self.bucket, self.pipeline_name)
        policy.allow_prefix(bucket_name(self.bucket), self._reach.output_prefix,
                            ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"],
                            why="The job writes model, output and checkpoints (and reads "
                                "checkpoints back to resume) under this pipeline's own prefix "
                                "only (in a team scope, its team's pipelines' prefixes).")
        policy.allow_job_logs(self._stack, "TrainingJobs")
        if any(job.subnet_ids for job in jobs):
            policy.allow_network_interfaces()
        return policy

    def mark_scheduled(self, schedule: str) -> None:
        """Records that a schedule (its path) starts this pipeline, for the rule pack's CT15."""
        schedules = {*(self._resource.get_metadata(SCHEDULES_METADATA) or []), schedule}
        self._resource.add_metadata(SCHEDULES_METADATA, sorted(schedules))

    def _execution_role(self, policy: InlinePolicy) -> iam.IRole:
        bucket_key = once(self.bucket, "encryption_key", lambda: self.bucket.encryption_key)
        keys = list(dict.fromkeys(k for k in (bucket_key, self.kms_key) if k is not None))
        description = f"Runs the jobs of SageMaker pipeline {self.pipeline_name}"
        if self._given_roles["role"] is not None:
            # A given role's key permissions go with its other statements (an immutable one
            # takes a key grant silently: the warning must list them too).
            for key in keys:
                policy.allow(["kms:Decrypt", "kms:Encrypt", "kms:ReEncrypt*",
                              "kms:GenerateDataKey*"], [key.key_arn])
            if self.kms_key is not None:
                policy.allow(["kms:CreateGrant", "kms:DescribeKey"], [self.kms_key.key_arn])
            return self._role("role", policy, "ExecutionRole", description)
        role = policy.role(self, "ExecutionRole", description)
        for key in keys:
            key.grant_encrypt_decrypt(role)
        if self.kms_key is not None:
            # SageMaker encrypts the job volumes through a grant on the key.
            self.kms_key.grant(role, "kms:CreateGrant", "kms:DescribeKey")
        return role

    def _pipeline_policy(self, execution_role: iam.IRole,
                         job_kinds: Sequence[str] = ("training-job",)) -> InlinePolicy:
        """Creates, describes and stops only its own jobs; passes only their role."""
        # Its own role's policy is written again if the tag aspects change the keys
        # (`_create_pipeline`); a given role's is not the pipeline's to rewrite: read there.
        tag_keys = (self._job_tags.tag_keys if self._given_roles["pipeline_role"] is None
                    else job_tag_keys(self._given_roles["pipeline_role"], self._job_tags,
                                      self._reach.team))
        return self._reach.pipeline_policy(self._stack, role_arn(execution_role), tag_keys,
                                           job_kinds)

    def _role(self, prop: str, policy: InlinePolicy, construct_id: str,
              description: str) -> iam.IRole:
        """The role given as ``prop`` with the policy's statements attached, or a role of its
        own; an imported, immutable role gets a warning listing the statements to grant."""
        given = self._given_roles[prop]
        if given is None:
            return policy.role(self, construct_id, description)
        if self._reach.team is not None and prop in TEAM_ROLES:
            return give_once(given, policy, lambda fresh: attach_to_given_role(
                self, prop, given, fresh, self.pipeline_name))
        return attach_to_given_role(self, prop, given, policy, self.pipeline_name)

    def _handler_role(self) -> RoleMaker | None:
        """How a Lambda step's function gets ``handler_role``; None: a role of its own."""
        if self._given_roles["handler_role"] is None:
            return None
        return lambda policy, construct_id, text: self._role("handler_role", policy,
                                                             construct_id, text)

    def _create_pipeline(self, *, definition: dict[str, Any], description: str,
                         pipeline_policy: InlinePolicy, summary: dict[str, Any]) -> iam.IRole:
        """Creates the pipeline resource; returns the role it runs as."""
        self._check_pipeline(definition, description)
        pipeline_role = self._role("pipeline_role", pipeline_policy, "PipelineRole",
                                   f"Runs SageMaker pipeline {self.pipeline_name}")
        stack, tag_set = self._stack, self._job_tags

        def definition_body() -> dict[str, str]:
            return {"PipelineDefinitionBody": stack.to_json_string(
                with_job_tags(definition, tag_set.job_tags))}

        self._resource = sagemaker.CfnPipeline(
            self, "Resource", pipeline_name=self.pipeline_name,
            pipeline_description=description, role_arn=pipeline_role.role_arn,
            pipeline_definition=definition_body())
        self._resource.add_metadata("compiled-training", summary)
        # Where the tag aspects change the tags, the definition is written again, and so is
        # the policy of a role of its own where they change the keys (`JobTagSet`). An edit
        # of these two properties through the escape hatch is overwritten then: use
        # add_property_override.
        tag_set.write_with(lambda: setattr(self._resource, "pipeline_definition",
                                           definition_body()))
        if self._given_roles["pipeline_role"] is None:
            tag_set.write_with(lambda: pipeline_policy.write_again(pipeline_role),
                               keys_only=True)
        watch_job_tags(stack, tag_set)
        return pipeline_role

    def _code_asset(self, source_dir: Path, entry_point: str | None,
                    compilers: Sequence[Compiler]) -> s3_assets.Asset:
        """The code archive; with the runtime where any step's compiler runs its launcher."""
        if not source_dir.is_dir():
            raise ValueError(f"{self._subject}: source_dir must be an existing folder, got "
                             f"{str(source_dir)!r}")
        launcher = any(compile_cache.ships_launcher(c, entry_point, source_dir) for c in compilers)
        return shared_archive_asset(self, source_dir,
                                    runtime_to_ship(entry_point, source_dir, launcher))
