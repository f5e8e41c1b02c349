"""Code archives as assets, and where they land: one asset per distinct archive in a stack."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets

from compiled_training.definition.sourcedir import write_sourcedir
from compiled_training.wiring.stack_reads import child, once, stack_of
from constructs import Construct


def shared_archive_asset(scope: Construct, folder: Path,
                         packages: Sequence[Path] = ()) -> s3_assets.Asset:
    """A folder (and ``packages`` beside its files) as a deterministic ``sourcedir.tar.gz``
    asset, one per distinct archive in a stack: pipelines that share code share it."""
    archive = write_sourcedir(folder, packages=packages)
    stack = stack_of(scope)
    return child(stack, f"SourceDir{archive.parent.name[:16]}", s3_assets.Asset,
                 lambda construct_id: s3_assets.Asset(stack, construct_id, path=str(archive)))


class AssetLocation(NamedTuple):
    url: str
    bucket: str
    key: str


def asset_location(asset: s3_assets.Asset) -> AssetLocation:
    """Where a (shared) code asset lands in S3, read once."""
    return once(asset, "location", lambda: AssetLocation(
        asset.s3_object_url, asset.s3_bucket_name, asset.s3_object_key))


def bucket_name(bucket: s3.IBucket) -> str:
    return once(bucket, "bucket_name", lambda: bucket.bucket_name)
