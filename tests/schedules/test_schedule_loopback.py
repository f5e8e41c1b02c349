"""Loopback: the synthesized schedule and rule, created through moto's server on 127.0.0.1
and read back unchanged. moto stands in for AWS, which cannot be reached here."""

from __future__ import annotations

import json
import socket

import boto3
import pytest
from moto.server import ThreadedMotoServer

from tests.helpers import render_tree


@pytest.fixture(scope="module")
def endpoint():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


def _client(service: str, endpoint: str):
    return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def _resources(template: dict, kind: str) -> list[dict]:
    return [render_tree(r["Properties"], template) for r in template["Resources"].values()
            if r["Type"] == kind]


def test_schedules_round_trip_through_the_scheduler_api(reference_assembly, endpoint):
    client = _client("scheduler", endpoint)
    created = 0
    for stack in reference_assembly.stacks:
        (group,) = _resources(stack.template, "AWS::Scheduler::ScheduleGroup")
        client.create_schedule_group(Name=group["Name"])
        for i, props in enumerate(_resources(stack.template, "AWS::Scheduler::Schedule")):
            name = f"{stack.stack_name}-{i}"
            request = {k: v for k, v in props.items() if k != "GroupName"}
            client.create_schedule(Name=name, GroupName=props["GroupName"], **request)
            stored = client.get_schedule(Name=name, GroupName=props["GroupName"])
            for key, value in request.items():
                assert stored[key] == value, key
            created += 1
    assert created == 3


def test_notification_rules_round_trip_through_the_events_api(reference_assembly, endpoint):
    client = _client("events", endpoint)
    created = 0
    for stack in reference_assembly.stacks:
        # Each team's status rule, where the team registers models its model rule, and where
        # it builds a runtime image in the cloud the image builder's build-ended rule.
        for i, rule in enumerate(_resources(stack.template, "AWS::Events::Rule")):
            name = f"{stack.stack_name}-{i}"
            client.put_rule(Name=name, EventPattern=json.dumps(rule["EventPattern"]),
                            Description=rule["Description"], State=rule["State"])
            client.put_targets(Rule=name, Targets=rule["Targets"])
            stored = client.describe_rule(Name=name)
            assert json.loads(stored["EventPattern"]) == rule["EventPattern"]
            assert stored["Description"] == rule["Description"]
            (target,) = client.list_targets_by_rule(Rule=name)["Targets"]
            assert target == rule["Targets"][0]
            created += 1
    # Three status rules, two model rules (DocumentClassification, Tabular), one image build
    # rule (DocumentClassification).
    assert created == 6
