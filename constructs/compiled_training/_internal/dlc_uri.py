"""A DLC image's URI in a stack: literal in a region, a per-region mapping without one."""

from __future__ import annotations

import re

from aws_cdk import Aws, CfnMapping, Stack, Token

from compiled_training._internal.dlc import DlcImage
from constructs import Construct


def dlc_image_uri(scope: Construct, dlc: DlcImage) -> tuple[str, str]:
    """The image URI and its registry account, for the scope's stack.

    A stack with a region gets literals (and an error naming the supported regions when the
    image is not there); an environment-agnostic stack gets a ``CfnMapping`` of every region
    the SDK lists for the image, shared by all users of that image in the stack.
    """
    stack = Stack.of(scope)
    if not Token.is_unresolved(stack.region):
        region = stack.region
        account = dlc.account(region)
        domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
        return f"{account}.dkr.ecr.{region}.{domain}/{dlc.path}", account
    mapping_id = "DlcRegistries" + re.sub(r"[^A-Za-z0-9]", "", dlc.path.title())
    mapping = stack.node.try_find_child(mapping_id)
    if not isinstance(mapping, CfnMapping):
        mapping = CfnMapping(stack, mapping_id, mapping={
            region: {"account": account} for region, account in dlc.registries})
    account = mapping.find_in_map(Aws.REGION, "account")
    return f"{account}.dkr.ecr.{Aws.REGION}.{Aws.URL_SUFFIX}/{dlc.path}", account
