"""Partitions and endpoint domains as botocore's endpoint data (the AWS SDKs' own) has them."""

from __future__ import annotations

import re

import botocore.loaders
import pytest

from compiled_training.catalog.aws_names import arn_prefix, partition, url_suffix

PARTITIONS = botocore.loaders.Loader().load_data("endpoints")["partitions"]


@pytest.mark.parametrize("data", PARTITIONS, ids=lambda data: data["partition"])
def test_every_region_of_every_partition_has_its_partition_and_domain(data):
    regions = list(data["regions"])
    assert regions, data["partition"]
    for region in regions:
        assert re.fullmatch(data["regionRegex"], region), region
        assert (partition(region), url_suffix(region)) == (data["partition"], data["dnsSuffix"])


def test_a_region_of_another_partition_is_told_apart():
    assert arn_prefix("s3", "eusc-de-east-1", "1") == "arn:aws-eusc:s3:eusc-de-east-1:1"
    assert (partition("us-isof-south-1"), url_suffix("us-isof-south-1")) == \
        ("aws-iso-f", "csp.hci.ic.gov")
    assert (partition("eu-west-1"), url_suffix("eu-west-1")) == ("aws", "amazonaws.com")
