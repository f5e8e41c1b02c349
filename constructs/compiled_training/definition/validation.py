"""What SageMaker accepts for a training job and its pipeline, checked before CloudFormation
sees it: the job's rules (`rules.JOB_RULES`), then its CreateTrainingJob request as SageMaker
receives it, and the pipeline's definition, description and name."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from compiled_training.catalog.api_shapes import definition_problems, request_problems, shown
from compiled_training.definition.rules import (
    JOB_RULES,
    PROP_RULES,
    Finding,
    check_api_string,
    known_instance_type,
)
from compiled_training.definition.training import training_job_arguments
from compiled_training.values.job import TrainingJob

__all__ = ["Finding", "Findings", "check", "check_api_string", "check_pipeline",
           "known_instance_type"]


@dataclass(frozen=True)
class Findings:
    errors: list[Finding]
    warnings: list[Finding]

    def raise_errors(self, subject: str) -> None:
        """Raises every error in one ValueError about ``subject``; nothing when there is none."""
        if len(self.errors) == 1:
            raise ValueError(f"{subject}: {self.errors[0].message}")
        if self.errors:
            lines = "\n".join(f"  - {e.message}" for e in self.errors)
            raise ValueError(f"{subject} has {len(self.errors)} problems:\n{lines}")


# The props that members of a CreateTrainingJob request come from, for the messages.
_PROPS = (
    ("ResourceConfig.InstanceCount", "instance_count"),
    ("ResourceConfig.VolumeSizeInGB", "volume_size_gib"),
    ("ResourceConfig.InstanceType", "instance_type"),
    ("StoppingCondition.MaxRuntimeInSeconds", "max_runtime"),
    ("StoppingCondition.MaxWaitTimeInSeconds", "max_wait"),
    ("HyperParameters", "hyperparameters"),
    ("InputDataConfig", "channels"),
    ("AlgorithmSpecification.TrainingImage", "image_uri"),
    ("Tags", "pipeline_name"),  # the pipeline tag's value
)


def check(job: TrainingJob) -> Findings:
    """Every rule this library knows, as errors (raise) and warnings (acknowledgeable)."""
    findings = [finding for rule in PROP_RULES for finding in rule(job)]
    findings += request(job, {f.prop for f in findings if f.prop and not f.warning})
    findings += [finding for rule in JOB_RULES[len(PROP_RULES):] for finding in rule(job)]
    return Findings([f for f in findings if not f.warning], [f for f in findings if f.warning])


def request(job: TrainingJob, reported: set[str]) -> list[Finding]:
    """The job's CreateTrainingJob request as SageMaker receives it: the generated
    ``sagemaker_*`` hyperparameters included, values encoded, parameters at their defaults.
    A prop in ``reported`` (a rule already failed on it) is not reported twice."""
    try:
        defaults = {p.name: p.default for p in job.parameters}
    except ValueError as conflict:
        return [Finding("Parameters", str(conflict))]
    # The role is created after these checks (its ARN is a token); a missing image is
    # reported by the image rules.
    pending = {"RoleArn": not job.role_arn,
               "AlgorithmSpecification.TrainingImage": not job.image_uri}
    encoded = " (as sent: with the sagemaker_* entries compiled-training adds, values " \
              "JSON-encoded)" if job.framework.runs_script else ""
    found = []
    for problem in request_problems("CreateTrainingJob", training_job_arguments(job), defaults):
        prop = next((p for prefix, p in _PROPS if problem.path.startswith(prefix)), None)
        if pending.get(problem.path) or prop in reported:
            continue
        found.append(Finding("Request", f"CreateTrainingJob {problem}") if prop is None else
                     Finding("Request", f"{prop}: {problem}"
                                        f"{encoded if prop == 'hyperparameters' else ''}",
                             prop=prop))
    return found


def check_pipeline(definition: Mapping[str, Any], description: str, pipeline_name: str,
                   taken_by: str | None) -> Findings:
    """The pipeline as SageMaker receives it: every job step's request (the benchmark's
    comparison too), its description, and its name, which ``taken_by`` (a construct path)
    may already use in the same app (`stack_reads.pipeline_names`)."""
    errors = [Finding("Request", problem) for problem in definition_problems(definition)]
    errors.append(Finding("Description", check_api_string("description", description,
                                                          "PipelineDescription") or ""))
    errors += [Finding("Template", problem) for problem in _unprintable(
        {"description": description, "definition": definition}, "")]
    if taken_by:
        errors.append(Finding("PipelineName", f"pipeline_name {pipeline_name!r} is already used "
                                              f"by {taken_by} in this app (same account and "
                                              "region); pipeline names must be unique"))
    return Findings([e for e in errors if e.message], [])


# What JSON.stringify leaves unescaped in a template but YAML readers refuse (cfn-lint does):
# DEL, the C1 controls but NEL, and the noncharacters U+FFFE and U+FFFF.
_UNPRINTABLE = re.compile("[\x7f-\x84\x86-\x9f\ufffe\uffff]")


def _unprintable(value: Any, path: str) -> list[str]:
    """Strings (a definition's included) with a character a template cannot carry."""
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in _unprintable(item, f"{path}.{key}")]
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in _unprintable(item, f"{path}[{i}]")]
    found = _UNPRINTABLE.search(value) if isinstance(value, str) else None
    return [f"{path.lstrip('.')} must not contain the control character "
            f"U+{ord(found[0]):04X}, which a template cannot carry; got {shown(value)}"
            ] if found else []
