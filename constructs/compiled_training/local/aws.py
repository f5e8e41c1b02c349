"""The run's stand-in AWS: moto in this process, with stand-in credentials, holding the one S3
every step and handler sees (and the SSM parameters and model registry the handlers use); how
files go in and out of it; and this process's environment while it stands in."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from compiled_training.catalog.aws_names import split_s3
from compiled_training.local.expressions import StepFailed
from compiled_training.local.roles import Roles, guard


@contextmanager
def environment(variables: Mapping[str, str]) -> Iterator[None]:
    """This process's environment with ``variables`` set, restored afterwards."""
    saved = {key: os.environ.get(key) for key in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextmanager
def local_aws(account: str, region: str) -> Iterator[Any]:
    """The run's AWS: moto's in-process S3, SSM, SageMaker, ..., with stand-in credentials, in
    the stack's account and region (so the ARNs it makes match the template's)."""
    from moto import mock_aws

    with environment({**_CREDENTIALS, "AWS_DEFAULT_REGION": region,
                      "MOTO_ACCOUNT_ID": account}), mock_aws():
        import boto3

        yield boto3.client("s3")


@contextmanager
def endpoint(roles: Roles | None = None) -> Iterator[str]:
    """The run's AWS over HTTP for the jobs' own processes (S3, SSM, SageMaker, ... through
    ``AWS_ENDPOINT_URL``): moto's server in a thread of this process, on the in-process mock's
    state, with ``roles`` deciding each role's S3 calls in front of it."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # its access log is not the run's
    app = DomainDispatcherApplication(create_backend_app)
    server = make_server("127.0.0.1", 0, guard(app, roles) if roles else app, threaded=True,
                         request_handler=MotoRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join()


def carry(s3: Any, previous: Path, folders: tuple[str, ...]) -> tuple[int, int]:
    """Puts an earlier run's S3 (``<previous>/<bucket>/<key>``, as `dump` wrote it) into this
    run's, as S3 keeps objects from one execution to the next; returns how many objects, and
    how many of them under folders named ``folders`` (the compile caches)."""
    files = [path for path in sorted(previous.rglob("*")) if path.is_file()] \
        if previous.is_dir() else []
    seed(s3, {f"s3://{path.relative_to(previous).as_posix()}": path for path in files})
    caches = sum(1 for path in files if set(path.relative_to(previous).parts[:-1]) & set(folders))
    return len(files), caches


REGISTRY_FILE = "registry.json"
"""The stand-in registry's groups and versions, as the run left them, for the next run."""
SSM_FILE = "ssm.json"


def restore(workdir: Path) -> int:
    """Puts an earlier run's model registry and SSM parameters (`dump`'s files) into this run's
    AWS, as AWS keeps them between executions: each version again under its number. Returns
    how many versions."""
    import boto3

    ssm, sagemaker = boto3.client("ssm"), boto3.client("sagemaker")
    parameters = workdir / SSM_FILE
    for name, value in (json.loads(parameters.read_text()) if parameters.is_file() else {}
                        ).items():
        ssm.put_parameter(Name=name, Value=value, Type="String", Overwrite=True)
    registry = workdir / REGISTRY_FILE
    saved = json.loads(registry.read_text()) if registry.is_file() else {}
    for group in saved.get("groups", []):
        sagemaker.create_model_package_group(**group)
    for package in saved.get("packages", []):
        sagemaker.create_model_package(**package)
    return len(saved.get("packages", []))


def _registry() -> dict[str, list[dict[str, Any]]]:
    """The stand-in registry: its groups, and its versions in the order they were created,
    each as the ``CreateModelPackage`` request that makes it again."""
    import boto3

    client = boto3.client("sagemaker")
    takes = set(client.meta.service_model.operation_model("CreateModelPackage").input_shape
                .members)
    groups = [{key: group[key] for key in ("ModelPackageGroupName",
                                           "ModelPackageGroupDescription") if key in group}
              for page in client.get_paginator("list_model_package_groups").paginate()
              for group in page["ModelPackageGroupSummaryList"]]
    summaries = [summary for page in client.get_paginator("list_model_packages").paginate(
        ModelPackageType="Both") for summary in page["ModelPackageSummaryList"]]
    summaries.sort(key=lambda s: (s.get("ModelPackageGroupName", ""),
                                  s.get("ModelPackageVersion", 0), s["CreationTime"]))
    packages = []
    for summary in summaries:
        described = client.describe_model_package(ModelPackageName=summary["ModelPackageArn"])
        packages.append({key: value for key, value in described.items() if key in takes})
    return {"groups": groups, "packages": packages}


_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local",
                "AWS_SESSION_TOKEN": "local", "AWS_DEFAULT_REGION": "us-east-1"}


def seed(s3: Any, objects: Mapping[str, Path]) -> None:
    """Puts files (a folder's, recursively) at S3 URIs of the run's S3."""
    for uri, source in objects.items():
        bucket, key = split_s3(uri)
        ensure_bucket(s3, bucket)
        if source.is_dir():
            for path in sorted(source.rglob("*")):
                if path.is_file():
                    relative = path.relative_to(source).as_posix()
                    s3.upload_file(str(path), bucket, f"{key.rstrip('/')}/{relative}".lstrip("/"))
        else:
            s3.upload_file(str(source), bucket, key)


def dump(s3: Any, target: Path) -> None:
    """The run's S3 as a folder tree, ``<target>/s3/<bucket>/<key>``, its SSM parameters (a
    benchmark's recorded verdict) as ``<target>/ssm.json`` and its model registry as
    ``<target>/registry.json``: for people to read, and for the next run in the folder."""
    import boto3

    ssm = boto3.client("ssm")
    parameters = {p["Name"]: p["Value"] for page in ssm.get_paginator(
        "describe_parameters").paginate() for p in [
        ssm.get_parameter(Name=d["Name"])["Parameter"] for d in page["Parameters"]]}
    (target / SSM_FILE).write_text(json.dumps(parameters, indent=2, sort_keys=True) + "\n")
    (target / REGISTRY_FILE).write_text(json.dumps(_registry(), indent=2, sort_keys=True,
                                                   default=str) + "\n")
    target = target / "s3"
    for bucket in s3.list_buckets().get("Buckets", []):
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket["Name"]):
            for item in page.get("Contents", []):
                path = target / bucket["Name"] / item["Key"]
                path.parent.mkdir(parents=True, exist_ok=True)
                s3.download_file(bucket["Name"], item["Key"], str(path))


def download(s3: Any, uri: str, target: Path) -> None:
    bucket, key = split_s3(uri)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        s3.download_file(bucket, key, str(target))
    except Exception as error:
        if access_denied(error):
            raise  # the role's refusal, which the step reports (`Run.transfers`)
        raise StepFailed(f"no object at {uri}{not_given(uri)}") from None


def access_denied(error: Exception) -> bool:
    """Whether S3 refused a transfer (AccessDenied; a HEAD's bare 403)."""
    return "AccessDenied" in str(error) or "(403)" in str(error)


def not_given(uri: str) -> str:
    """The way past a missing object: the run's S3 holds what ``--data`` puts there."""
    return f"; put it in the run's S3 with --data {uri}=LOCAL_PATH"


def download_prefix(s3: Any, uri: str, target: Path) -> int:
    bucket, prefix = split_s3(uri)
    count = 0
    if bucket not in {b["Name"] for b in s3.list_buckets().get("Buckets", [])}:
        return 0  # as SageMaker says it: no object under the URI
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            relative = item["Key"][len(prefix):].lstrip("/") or Path(item["Key"]).name
            destination = target / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            s3.download_file(bucket, item["Key"], str(destination))
            count += 1
    return count


def upload(s3: Any, path: Path, uri: str) -> None:
    bucket, key = split_s3(uri)
    ensure_bucket(s3, bucket)
    s3.upload_file(str(path), bucket, key)


def ensure_bucket(s3: Any, bucket: str) -> None:
    existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
    if bucket not in existing:
        region = s3.meta.region_name
        # As S3 wants it: us-east-1 takes no location constraint, every other region its own.
        s3.create_bucket(Bucket=bucket, **({} if region == "us-east-1" else {
            "CreateBucketConfiguration": {"LocationConstraint": region}}))


def delete(s3: Any, uri: str, *, whole: bool) -> int:
    """Deletes the object at ``uri``, or (``whole``) every object under it; how many."""
    bucket, key = split_s3(uri)
    if bucket not in {b["Name"] for b in s3.list_buckets().get("Buckets", [])}:
        return 0
    listed = [item["Key"] for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=key) for item in page.get("Contents", [])]
    keys = listed if whole else [name for name in listed if name == key]
    for name in keys:
        s3.delete_object(Bucket=bucket, Key=name)
    return len(keys)


def upload_tree(s3: Any, folder: Path, uri: str) -> int:
    """Every file under ``folder`` to the same place under ``uri``; how many."""
    paths = [path for path in sorted(folder.rglob("*")) if path.is_file()]
    for path in paths:
        upload(s3, path, f"{uri.rstrip('/')}/{path.relative_to(folder).as_posix()}")
    return len(paths)
