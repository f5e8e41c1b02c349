"""Custom resource that builds a runtime image in CodeBuild at deploy time.

``on_event`` starts the build (only when CloudFormation creates or updates the resource,
that is, when the image tag, a content hash, changed) unless the repository already holds the
tag: a rollback or a retry asks again for a tag that was pushed before, and the tag is
immutable, so a second build could only fail to push. ``is_complete`` polls the build and
fails the deployment with the build's log link when the build fails.
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
    data = {"ImageUri": image_uri}
    if not image_exists(props["RepositoryUri"], props["ImageTag"]):
        data["BuildId"] = boto3.client("codebuild").start_build(
            projectName=props["ProjectName"],
            environmentVariablesOverride=[
                {"name": "IMAGE_TAG", "value": props["ImageTag"], "type": "PLAINTEXT"},
            ],
        )["build"]["id"]
    return {"PhysicalResourceId": image_uri, "Data": data}


def image_exists(repository_uri: str, tag: str) -> bool:
    """Whether the repository (``ACCOUNT.dkr.ecr.REGION.amazonaws.com/NAME``) holds the tag."""
    registry, _, name = repository_uri.partition("/")
    ecr = boto3.client("ecr")
    try:
        ecr.describe_images(registryId=registry.split(".", 1)[0], repositoryName=name,
                            imageIds=[{"imageTag": tag}])
    except ecr.exceptions.ImageNotFoundException:
        return False
    return True


def is_complete(event: dict[str, Any], _context: Any) -> dict[str, Any]:
    build_id = event.get("Data", {}).get("BuildId")
    if event["RequestType"] == "Delete" or build_id is None:  # nothing was built
        return {"IsComplete": True}
    (build,) = boto3.client("codebuild").batch_get_builds(ids=[build_id])["builds"]
    status = build["buildStatus"]
    if status == IN_PROGRESS:
        return {"IsComplete": False}
    if status == "SUCCEEDED":
        return {"IsComplete": True, "Data": {"ImageUri": event["Data"]["ImageUri"]}}
    link = build.get("logs", {}).get("deepLink", "no log link")
    raise RuntimeError(f"image build {build_id} ended {status}; build log: {link}")
