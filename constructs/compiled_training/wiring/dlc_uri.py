"""A DLC image's URI in a stack: literal in a region, a per-region mapping without one."""

from __future__ import annotations

import re

from aws_cdk import Aws, CfnMapping

from compiled_training.catalog.api_shapes import is_token
from compiled_training.catalog.dlc import DlcImage
from compiled_training.wiring.stack_reads import child, once, region, stack_of
from constructs import Construct


def dlc_image_uri(scope: Construct, dlc: DlcImage) -> tuple[str, str]:
    """The image URI and its registry account, for the scope's stack.

    A stack with a region gets literals (and an error naming the supported regions when the
    image is not there); an environment-agnostic stack gets a ``CfnMapping`` of every region
    the SDK lists for the image, shared by all users of that image in the stack.
    """
    stack = stack_of(scope)
    stack_region = region(stack)
    if not is_token(stack_region):
        return dlc.uri(stack_region), dlc.account(stack_region)
    mapping_id = "DlcRegistries" + re.sub(r"[^A-Za-z0-9]", "", dlc.path.title())

    def uri() -> tuple[str, str]:
        mapping = child(stack, mapping_id, CfnMapping, lambda construct_id: CfnMapping(
            stack, construct_id, mapping={r: {"account": a} for r, a in dlc.registries}))
        account = mapping.find_in_map(Aws.REGION, "account")
        return f"{account}.dkr.ecr.{Aws.REGION}.{Aws.URL_SUFFIX}/{dlc.path}", account

    return once(stack, ("dlc uri", dlc.path), uri)
