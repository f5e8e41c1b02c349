"""Where a pipeline's jobs run in a VPC: the subnets selected and the security groups."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from aws_cdk import Annotations

from compiled_training.catalog.aws_names import SECURITY_GROUP_DESCRIPTION_MAX, held_to
from compiled_training.pipelines.named_pipeline import NamedPipeline, subject

if TYPE_CHECKING:
    from aws_cdk import aws_ec2 as ec2  # loaded by the maker of a VPC given


def vpc_config(
    pipeline: NamedPipeline,
    vpc: ec2.IVpc | None,
    subnets: ec2.SubnetSelection | None,
    groups: Sequence[ec2.ISecurityGroup] | None,
) -> tuple[list[str], list[str]]:
    """The subnets and security groups of the pipeline's jobs: the vpc's private subnets, and
    a group of its own, when not given."""
    if vpc is None:
        if subnets is not None or groups:
            raise ValueError(f"{subject(pipeline)}: vpc_subnets and security_groups need a vpc")
        return [], []
    from aws_cdk import aws_ec2 as ec2

    selection = subnets or ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
    try:
        selected = vpc.select_subnets(
            subnet_type=selection.subnet_type,
            subnet_group_name=selection.subnet_group_name,
            subnets=selection.subnets,
            availability_zones=selection.availability_zones,
            one_per_az=selection.one_per_az,
        )
    except RuntimeError as error:  # the CDK's own refusal, from across jsii
        reason = str(error).splitlines()[0].removeprefix("Error: ")
        raise ValueError(
            f"{subject(pipeline)}: vpc_subnets selects no subnets in the vpc ({reason}); when "
            "omitted, the vpc's PRIVATE_WITH_EGRESS subnets") from None
    isolated = {subnet.subnet_id for subnet in vpc.isolated_subnets}
    if isolated & set(selected.subnet_ids):
        Annotations.of(pipeline).add_warning_v2(
            f"compiled-training:{type(pipeline).__name__}:IsolatedSubnets",
            "the jobs run in isolated subnets: they need VPC endpoints for s3, ecr.api, "
            "ecr.dkr, logs, sts and sagemaker.api; acknowledge this once the vpc has them")
    if not groups:
        group = ec2.SecurityGroup(pipeline, "SecurityGroup", vpc=vpc,
                                  description=held_to(f"Training jobs of {pipeline.pipeline_name}",
                                                      SECURITY_GROUP_DESCRIPTION_MAX))
        # Nodes of a multi-instance job talk to each other.
        group.add_ingress_rule(group, ec2.Port.all_traffic(), "between training nodes")
        groups = [group]
    return list(selected.subnet_ids), [g.security_group_id for g in groups]
