"""Live prices from the AWS Price List API, only when asked: parsed, cached, never blocking."""

from __future__ import annotations

import json

import botocore.session
import pytest
from botocore.stub import Stubber

from compiled_training.catalog import prices
from compiled_training.catalog.prices import live_prices
from compiled_training.tools.cli import main


def _product(usagetype: str, usd: str) -> str:
    """One PriceList entry as the API returns it: a JSON document in a string."""
    return json.dumps({
        "product": {"productFamily": "ML Instance", "sku": "SKU",
                    "attributes": {"usagetype": usagetype, "regionCode": "us-east-1"}},
        "serviceCode": "AmazonSageMaker",
        "terms": {"OnDemand": {"SKU.TERM": {"priceDimensions": {
            "SKU.TERM.RATE": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}}}}},
    })


def _request(instance_type: str, region: str = "us-east-1") -> dict:
    return {"ServiceCode": "AmazonSageMaker", "FormatVersion": "aws_v1", "Filters": [
        {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
        {"Type": "TERM_MATCH", "Field": "instanceName", "Value": instance_type}]}


@pytest.fixture
def pricing(monkeypatch):
    """A Price List client that answers only what a test queues, and an empty cache."""
    client = botocore.session.get_session().create_client(
        "pricing", region_name="us-east-1", aws_access_key_id="test",
        aws_secret_access_key="test")
    monkeypatch.setattr(prices, "_LIVE_PRICES", {})
    monkeypatch.setattr(prices, "_pricing_client", lambda: client)
    with Stubber(client) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


def test_the_training_price_is_read_past_hosting_and_spot_and_cached(pricing):
    pricing.add_response("get_products", {"PriceList": [
        _product("USE1-Host:ml.p5en.48xlarge", "70.0"),
        _product("USE1-Train-Spot:ml.p5en.48xlarge", "20.0"),
    ], "NextToken": "page-2"}, _request("ml.p5en.48xlarge"))
    pricing.add_response("get_products", {"PriceList": [
        _product("USE1-Train:ml.p5en.48xlarge", "63.296"),
    ]}, {**_request("ml.p5en.48xlarge"), "NextToken": "page-2"})
    assert live_prices(["ml.p5en.48xlarge"], "us-east-1") == ({"ml.p5en.48xlarge": 63.296}, [])
    # Asked again, the cache answers: the stubber has no response left to give.
    assert live_prices(["ml.p5en.48xlarge"], "us-east-1") == ({"ml.p5en.48xlarge": 63.296}, [])


def test_an_unpriced_or_refused_instance_is_a_problem_not_a_failure(pricing):
    pricing.add_response("get_products", {"PriceList": []}, _request("ml.p5e.48xlarge"))
    pricing.add_client_error("get_products", "AccessDeniedException", "not authorized",
                             expected_params=_request("ml.trn2.48xlarge"))
    found, problems = live_prices(["ml.trn2.48xlarge", "ml.p5e.48xlarge"], "us-east-1")
    assert found == {}
    assert problems[0] == "ml.p5e.48xlarge in us-east-1: no on-demand training price listed"
    assert problems[1].startswith("ml.trn2.48xlarge in us-east-1: An error occurred "
                                  "(AccessDeniedException)")


def test_advise_uses_live_prices_only_when_asked(pricing, tmp_path, capsys):
    workloads = tmp_path / "w.yaml"
    workloads.write_text(
        "- {name: llm, framework: pytorch, framework_version: '2.5', model_family: llama,"
        " instance_type: ml.p5en.48xlarge, instance_count: 2, hours_per_run: 10,"
        " runs_per_week: 2, static_shapes: true, precision: bf16, region: eu-west-1}\n")
    assert main(["advise", str(workloads), "--json"]) == 0  # no call: nothing queued
    assert json.loads(capsys.readouterr().out)[0]["dollars_per_run"] is None
    pricing.add_response("get_products", {"PriceList": [
        _product("EU-Train:ml.p5en.48xlarge", "70.0")]},
        _request("ml.p5en.48xlarge", "eu-west-1"))
    assert main(["advise", str(workloads), "--json", "--live-prices"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["dollars_per_run"] == 70.0 * 2 * 10


def test_advise_falls_back_to_the_table_and_says_so_once(pricing, tmp_path, capsys):
    workloads = tmp_path / "w.yaml"
    workloads.write_text(
        "- {name: bert, framework: pytorch, model_family: bert, instance_type: ml.g5.48xlarge,"
        " instance_count: 1, hours_per_run: 6, runs_per_week: 3, static_shapes: true,"
        " precision: fp16}\n")
    pricing.add_client_error("get_products", "ThrottlingException", "slow down",
                             expected_params=_request("ml.g5.48xlarge"))
    assert main(["advise", str(workloads), "--json", "--live-prices"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)[0]["dollars_per_run"] == pytest.approx(
        prices.ON_DEMAND_PRICES_USD["ml.g5.48xlarge"] * 6, abs=0.01)
    (warning,) = captured.err.strip().splitlines()
    assert warning.startswith("compiled-training advise: no live price for ml.g5.48xlarge in "
                              "us-east-1: An error occurred (ThrottlingException)")
    assert warning.endswith("; using the table")
