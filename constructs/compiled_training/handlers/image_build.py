"""The custom resource behind every cloud-built runtime image of a stack: one function.

CloudFormation invokes it for each ``Custom::RuntimeImageBuild`` (asynchronously, with a
pre-signed ``ResponseURL``). On create or update it starts the stack's one CodeBuild project
with the image's settings as environment-variable overrides, the CloudFormation request among
them, and answers nothing yet: when the build ends, EventBridge's "CodeBuild Build State
Change" invokes this same function, which reads the build back and answers CloudFormation with
its outcome. No state machine polls.

A tag the repository already holds is answered at once, without a build: a rollback or a
retry asks again for a tag that was pushed before, and the tag is immutable, so a second build
could only fail to push. A delete answers at once too: repositories are retained, and a
rollback may still need the image.
"""

from __future__ import annotations

import json
import os
import urllib.request
from typing import Any

import boto3

BUILD_STATE_CHANGE = "CodeBuild Build State Change"
# The build's environment carries the CloudFormation request it answers: the response goes
# out when the build has ended, from a later invocation that has only the build to read.
REQUEST_FIELDS = {"ResponseURL": "CFN_RESPONSE_URL", "StackId": "CFN_STACK_ID",
                  "RequestId": "CFN_REQUEST_ID", "LogicalResourceId": "CFN_LOGICAL_RESOURCE_ID"}
# The image's own settings, from the resource's properties to the shared build.
IMAGE_FIELDS = {"RepositoryUri": "REPOSITORY_URI", "ImageTag": "IMAGE_TAG",
                "BaseImage": "BASE_IMAGE", "DlcRegistry": "DLC_REGISTRY",
                "ContextUrl": "CONTEXT_URL"}
_REASON_CHARS = 1000  # CloudFormation takes a response of 4,096 bytes at most


def handler(event: dict[str, Any], _context: Any) -> None:
    if event.get("detail-type") == BUILD_STATE_CHANGE:
        report_build(event["detail"]["build-id"])
    else:
        on_request(event)


def on_request(event: dict[str, Any]) -> None:
    """A CloudFormation request: answered now, or by the build it starts."""
    try:
        if event["RequestType"] == "Delete":
            respond(event, "SUCCESS", event["PhysicalResourceId"], "The image is retained.")
            return
        props = event["ResourceProperties"]
        image_uri = f"{props['RepositoryUri']}:{props['ImageTag']}"
        if image_exists(props["RepositoryUri"], props["ImageTag"]):
            respond(event, "SUCCESS", image_uri, f"{image_uri} is already in the repository.",
                    {"ImageUri": image_uri})
            return
        start_build(event)
    except Exception as error:  # an answer now beats CloudFormation's one-hour wait
        respond(event, "FAILED", event.get("PhysicalResourceId", "not-created"),
                f"{type(error).__name__}: {error}")


def start_build(event: dict[str, Any]) -> str:
    """Starts the stack's image build for this request; its end answers CloudFormation."""
    props = event["ResourceProperties"]
    variables = {name: props[field] for field, name in IMAGE_FIELDS.items()}
    variables |= {name: event[field] for field, name in REQUEST_FIELDS.items()}
    build = boto3.client("codebuild").start_build(
        projectName=os.environ["PROJECT_NAME"],
        environmentVariablesOverride=[{"name": name, "value": value, "type": "PLAINTEXT"}
                                      for name, value in variables.items()],
        # Lambda retries an invocation that failed: the same request starts one build.
        idempotencyToken=event["RequestId"],
    )["build"]
    return str(build["id"])


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


def report_build(build_id: str) -> None:
    """Answers the CloudFormation request that started this build, with the build's outcome.

    The build is read back rather than the event trusted: only builds of the stack's own
    project can be read (the role's one resource), and the status is the build's own.
    """
    (build,) = boto3.client("codebuild").batch_get_builds(ids=[build_id])["builds"]
    variables = {v["name"]: v["value"] for v in build["environment"]["environmentVariables"]}
    status = build["buildStatus"]
    if status == "IN_PROGRESS" or REQUEST_FIELDS["ResponseURL"] not in variables:
        return  # not ended, or started by hand: no request waits for it
    request = {field: variables[name] for field, name in REQUEST_FIELDS.items()}
    image_uri = f"{variables['REPOSITORY_URI']}:{variables['IMAGE_TAG']}"
    if status == "SUCCEEDED":
        respond(request, "SUCCESS", image_uri, f"Built by {build_id}.", {"ImageUri": image_uri})
    else:
        link = build.get("logs", {}).get("deepLink", "no log link")
        respond(request, "FAILED", image_uri,
                f"image build {build_id} ended {status}; build log: {link}")


def respond(request: dict[str, Any], status: str, physical_id: str, reason: str,
            data: dict[str, str] | None = None) -> None:
    """PUTs the answer to the request's pre-signed URL, as CloudFormation reads it."""
    url = request["ResponseURL"]
    if not url.startswith(("https://", "http://")):
        raise ValueError(f"ResponseURL must be an HTTP(S) URL, got {url[:40]!r}")
    body = json.dumps({
        "Status": status, "Reason": reason[:_REASON_CHARS], "PhysicalResourceId": physical_id,
        "StackId": request["StackId"], "RequestId": request["RequestId"],
        "LogicalResourceId": request["LogicalResourceId"], "Data": data or {},
    }).encode()
    # The URL is signed for no content type: sending one would break the signature.
    answer = urllib.request.Request(url, data=body, method="PUT", headers={"Content-Type": ""})
    with urllib.request.urlopen(answer, timeout=30):  # the scheme is checked above
        pass
