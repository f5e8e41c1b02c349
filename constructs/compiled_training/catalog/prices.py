"""SageMaker training prices: the recorded on-demand list, and the Price List API when asked.

Data and look-ups only: the advisor's money and the CLI's tables read them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

# SageMaker training, on-demand, US East (N. Virginia), USD per instance-hour: approximate
# list prices as recorded for this library in November 2026 from the Amazon SageMaker AI
# pricing page. Not read live by default (synth is offline); pass ``prices=`` for your own.
PRICES_SOURCE = "Amazon SageMaker AI pricing page, on-demand training, us-east-1, 2026-11"
_RECORDED_PRICES_USD = {
    "ml.g4dn.xlarge": 0.736, "ml.g4dn.2xlarge": 0.94, "ml.g4dn.4xlarge": 1.505,
    "ml.g4dn.8xlarge": 2.72, "ml.g4dn.12xlarge": 4.89, "ml.g4dn.16xlarge": 5.44,
    "ml.g5.xlarge": 1.408, "ml.g5.2xlarge": 1.515, "ml.g5.4xlarge": 2.03,
    "ml.g5.8xlarge": 3.06, "ml.g5.12xlarge": 7.09, "ml.g5.16xlarge": 5.12,
    "ml.g5.24xlarge": 10.18, "ml.g5.48xlarge": 20.36,
    "ml.p3.2xlarge": 3.825, "ml.p3.8xlarge": 14.688, "ml.p3.16xlarge": 28.152,
    "ml.p3dn.24xlarge": 35.894, "ml.p4d.24xlarge": 37.688,
    "ml.m5.xlarge": 0.23, "ml.m5.4xlarge": 0.922, "ml.m6i.12xlarge": 2.765,
    "ml.c5.xlarge": 0.204, "ml.c5.9xlarge": 1.836,
}
# Families the recorded list lacks, estimated (approximately; give or take 20 %): the EC2
# On-Demand Linux list price in us-east-1 (Amazon EC2 pricing page, as of 2024-2025) times
# SageMaker's training premium over EC2 that the recorded list shows for the nearest family
# (p4d 37.688 over EC2 32.77: about 1.15; g5 20.36 over 16.288: 1.25). AWS cut EC2 prices of
# P4 and P5 in mid-2025; SageMaker's may be lower too: decide p-family money on live prices.
# p5e, p5en and trn2 have no list price to estimate from: they are "price unknown" until given.
ESTIMATES_SOURCE = ("approximate: EC2 on-demand list price (us-east-1, 2024-2025) x SageMaker's "
                    "training premium on the nearest recorded family")
_ESTIMATED_FROM_EC2_USD = {
    1.15: {"p4de.24xlarge": 40.966, "p5.48xlarge": 98.32,  # premium as on p4d (trn1 alike)
           "trn1.2xlarge": 1.344, "trn1.32xlarge": 21.50, "trn1n.32xlarge": 24.78},
    1.25: {"g6.xlarge": 0.805, "g6.2xlarge": 0.978, "g6.4xlarge": 1.323,  # as on g5
           "g6.8xlarge": 2.014, "g6.12xlarge": 4.602, "g6.16xlarge": 3.397,
           "g6.24xlarge": 6.675, "g6.48xlarge": 13.35,
           "g6e.xlarge": 1.861, "g6e.2xlarge": 2.242, "g6e.4xlarge": 3.004,
           "g6e.8xlarge": 4.529, "g6e.12xlarge": 10.493, "g6e.16xlarge": 7.577,
           "g6e.24xlarge": 15.066, "g6e.48xlarge": 30.131},
}
# CPU families: AWS prices the sizes of a family linearly (the recorded list shows it:
# m5.4xlarge is 4 x m5.xlarge, c5.9xlarge 9 x c5.xlarge), so each size is its xlarge price
# times its multiple; c6i is listed at c5's price on EC2.
_CPU_FAMILIES = {
    "m5": (0.23, "large xlarge 2xlarge 4xlarge 12xlarge 24xlarge"),
    "m6i": (2.765 / 12, "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge"),
    "c5": (0.204, "large xlarge 2xlarge 4xlarge 9xlarge 18xlarge"),
    "c6i": (0.204, "large xlarge 2xlarge 4xlarge 8xlarge 12xlarge 16xlarge 24xlarge 32xlarge"),
}


def _xlarges(size: str) -> float:
    """How many xlarges a size is: large 0.5, xlarge 1, 12xlarge 12."""
    return 0.5 if size == "large" else float(size.removesuffix("xlarge") or 1)


ON_DEMAND_PRICES_USD: Mapping[str, float] = {
    **{f"ml.{family}.{size}": round(per_xlarge * _xlarges(size), 3)
       for family, (per_xlarge, sizes) in _CPU_FAMILIES.items() for size in sizes.split()},
    **{f"ml.{name}": round(usd * premium, 3)
       for premium, ec2 in _ESTIMATED_FROM_EC2_USD.items() for name, usd in ec2.items()},
    **_RECORDED_PRICES_USD,
}
# The Price List API answers from us-east-1 whatever region it prices.
PRICE_LIST_REGION = "us-east-1"


def price_per_hour(instance_type: str, prices: Mapping[str, float] | None = None) -> float | None:
    """USD per instance-hour: ``prices`` first, then the table; None when neither knows it."""
    return {**ON_DEMAND_PRICES_USD, **(prices or {})}.get(instance_type)


_LIVE_PRICES: dict[tuple[str, str], float] = {}


def live_prices(instance_types: Iterable[str], region: str, *,
                client: Any = None) -> tuple[dict[str, float], list[str]]:
    """On-demand SageMaker training prices from the AWS Price List API, cached for the process.

    Only when asked (``advise --live-prices``): it needs credentials and the network, and synth
    never calls it. Returns the prices found and one line per instance type it could not price.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    found: dict[str, float] = {}
    problems: list[str] = []
    for instance_type in sorted(set(instance_types)):
        key = (region, instance_type)
        if key not in _LIVE_PRICES:
            try:
                client = client or _pricing_client()
                price = _price_list_price(client, instance_type, region)
            except (BotoCoreError, ClientError) as error:
                problems.append(f"{instance_type} in {region}: {error}")
                continue
            if price is None:
                problems.append(f"{instance_type} in {region}: no on-demand training price listed")
                continue
            _LIVE_PRICES[key] = price
        found[instance_type] = _LIVE_PRICES[key]
    return found, problems


def _pricing_client() -> Any:
    import botocore.session

    return botocore.session.get_session().create_client("pricing", region_name=PRICE_LIST_REGION)


def _price_list_price(client: Any, instance_type: str, region: str) -> float | None:
    """The first positive on-demand USD price of a training usage type (``USE1-Train:ml...``,
    not hosting, notebooks or spot) for the instance type in the region."""
    arguments: dict[str, Any] = {
        "ServiceCode": "AmazonSageMaker", "FormatVersion": "aws_v1", "Filters": [
            {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
            {"Type": "TERM_MATCH", "Field": "instanceName", "Value": instance_type}]}
    while True:
        page = client.get_products(**arguments)
        for item in page.get("PriceList", []):
            product = json.loads(item)
            attributes = product.get("product", {}).get("attributes", {})
            if not attributes.get("usagetype", "").partition(":")[0].endswith("Train"):
                continue
            for term in product.get("terms", {}).get("OnDemand", {}).values():
                for dimension in term.get("priceDimensions", {}).values():
                    usd = float(dimension.get("pricePerUnit", {}).get("USD", 0))
                    if usd > 0:
                        return usd
        if not page.get("NextToken"):
            return None
        arguments["NextToken"] = page["NextToken"]
