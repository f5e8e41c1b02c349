"""Custom resource that builds a runtime image in CodeBuild at deploy time.

``on_event`` starts the build (only when CloudFormation creates or updates the resource,
that is, when the image tag, a content hash, changed); ``is_complete`` polls it and fails
the deployment with the build's log link when the build fails.
"""

from __future__ import annotations

from typing import Any

import boto3

IN_PROGRESS = "IN_PROGRESS"


def on_event(event: dict[str, Any], _context: Any) -> dict[str, Any]:
    props = event["ResourceProperties"]
    image_uri = f"{props['RepositoryUri']}:{props['ImageTag']}"
    if event["RequestType"] == "Delete":
        # The image stays: repositories are retained, and a rollback may still need it.
        return {"PhysicalResourceId": event["PhysicalResourceId"]}
    build = boto3.client("codebuild").start_build(
        projectName=props["ProjectName"],
        environmentVariablesOverride=[
            {"name": "IMAGE_TAG", "value": props["ImageTag"], "type": "PLAINTEXT"},
        ],
    )["build"]
    return {"PhysicalResourceId": image_uri, "Data": {"BuildId": build["id"],
                                                     "ImageUri": image_uri}}


def is_complete(event: dict[str, Any], _context: Any) -> dict[str, Any]:
    if event["RequestType"] == "Delete":
        return {"IsComplete": True}
    build_id = event["Data"]["BuildId"]
    (build,) = boto3.client("codebuild").batch_get_builds(ids=[build_id])["builds"]
    status = build["buildStatus"]
    if status == IN_PROGRESS:
        return {"IsComplete": False}
    if status == "SUCCEEDED":
        return {"IsComplete": True, "Data": {"ImageUri": event["Data"]["ImageUri"]}}
    link = build.get("logs", {}).get("deepLink", "no log link")
    raise RuntimeError(f"image build {build_id} ended {status}; build log: {link}")
