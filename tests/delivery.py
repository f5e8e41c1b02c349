"""Would AWS let each notification's sender publish? Read from a synthesized template.

Every path from a sender to an SNS topic: CloudWatch alarm actions (the sender is
``cloudwatch.amazonaws.com`` with the alarm's ARN as ``aws:SourceArn``) and EventBridge rule
targets (``events.amazonaws.com``, the rule's ARN). For each, the topic's policy is evaluated
as SNS does once a topic has an ``AWS::SNS::TopicPolicy`` (only its statements apply; an
explicit deny wins), and on an encrypted topic the key's policy must let the sender use the
key (``kms:GenerateDataKey*`` and ``kms:Decrypt``). Requests are taken as TLS requests from
the stack's own account, as AWS's services send them.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

# Condition keys this evaluator knows, with the value each sender's request carries. A
# condition on any other key is treated as not met: a statement whose condition this
# reader cannot judge does not count as allowing.
_SECURE_TRANSPORT = "true"


@dataclass(frozen=True)
class Sender:
    service: str
    source: Any  # the CloudFormation expression of the sender's ARN
    path: str  # where it is, for the message


def senders(template: dict[str, Any]) -> Iterator[tuple[Sender, str]]:
    """Each (sender, topic logical id) the template wires up."""
    for name, resource in template["Resources"].items():
        properties = resource.get("Properties", {})
        if resource["Type"] == "AWS::CloudWatch::Alarm":
            for action in properties.get("AlarmActions", []) + properties.get("OKActions", []):
                if _is_ref(action):
                    yield (Sender("cloudwatch.amazonaws.com", {"Fn::GetAtt": [name, "Arn"]},
                                  f"alarm {name}"), action["Ref"])
        if resource["Type"] == "AWS::Events::Rule":
            for target in properties.get("Targets", []):
                if _is_ref(target["Arn"]) and _type(template, target["Arn"]["Ref"]) == \
                        "AWS::SNS::Topic":
                    yield (Sender("events.amazonaws.com", {"Fn::GetAtt": [name, "Arn"]},
                                  f"rule {name}"), target["Arn"]["Ref"])


def refusals(template: dict[str, Any]) -> list[str]:
    """Why AWS would refuse a sender, one line each; empty when every path delivers."""
    problems = []
    for sender, topic in senders(template):
        if _type(template, topic) != "AWS::SNS::Topic":
            continue
        why = _topic_refuses(template, topic, sender) or _key_refuses(template, topic, sender)
        if why:
            problems.append(f"{sender.path} -> topic {topic}: {why}")
    return problems


def _topic_refuses(template: dict[str, Any], topic: str, sender: Sender) -> str | None:
    policies = [r["Properties"]["PolicyDocument"] for r in template["Resources"].values()
                if r["Type"] == "AWS::SNS::TopicPolicy"
                and {"Ref": topic} in r["Properties"]["Topics"]]
    if not policies:
        # SNS's default policy admits principals of the owning account only, not services.
        return f"no topic policy, so SNS's default policy refuses {sender.service}"
    statements = [s for policy in policies for s in policy["Statement"]]
    request = {"aws:SourceArn": sender.source, "aws:SecureTransport": _SECURE_TRANSPORT}
    matching = [s for s in statements
                if _principal_matches(s, sender.service) and _action_matches(s, "sns:Publish")
                and _resource_matches(s, {"Ref": topic}) and _conditions_met(s, request)]
    if any(s["Effect"] == "Deny" for s in matching):
        return f"the topic policy denies sns:Publish to {sender.service}"
    if not any(s["Effect"] == "Allow" for s in matching):
        return (f"not authorized to perform: SNS:Publish: no statement of the topic policy "
                f"allows {sender.service} with aws:SourceArn of {sender.path}")
    return None


def _key_refuses(template: dict[str, Any], topic: str, sender: Sender) -> str | None:
    key_id = template["Resources"][topic].get("Properties", {}).get("KmsMasterKeyId")
    if key_id is None:
        return None
    if not (isinstance(key_id, dict) and "Fn::GetAtt" in key_id):
        return f"key {key_id!r} is not in this template; its policy cannot be read here"
    key = template["Resources"][key_id["Fn::GetAtt"][0]]
    statements = key["Properties"]["KeyPolicy"]["Statement"]
    for action in ("kms:GenerateDataKey", "kms:Decrypt"):
        if not any(s["Effect"] == "Allow" and _principal_matches(s, sender.service)
                   and _action_matches(s, action) and not s.get("Condition")
                   for s in statements):
            return f"the topic's key policy does not let {sender.service} use {action}"
    return None


def _principal_matches(statement: dict[str, Any], service: str) -> bool:
    principal = statement.get("Principal", {})
    if principal == "*" or (isinstance(principal, dict) and principal.get("AWS") == "*"):
        return True  # everyone, services included
    services = principal.get("Service", []) if isinstance(principal, dict) else []
    return service in (services if isinstance(services, list) else [services])


def _action_matches(statement: dict[str, Any], action: str) -> bool:
    actions = statement.get("Action", [])
    actions = actions if isinstance(actions, list) else [actions]
    return any(fnmatch.fnmatchcase(action.lower(), a.lower()) for a in actions)


def _resource_matches(statement: dict[str, Any], topic: Any) -> bool:
    resources = statement.get("Resource", [])
    resources = resources if isinstance(resources, list) else [resources]
    return topic in resources or "*" in resources


def _conditions_met(statement: dict[str, Any], request: dict[str, Any]) -> bool:
    for operator, tests in statement.get("Condition", {}).items():
        for key, wanted in tests.items():
            if key not in request:
                return False
            values = wanted if isinstance(wanted, list) else [wanted]
            if operator in ("ArnEquals", "ArnLike", "StringEquals"):
                if request[key] not in values:
                    return False
            elif operator == "Bool":
                if str(request[key]).lower() not in [str(v).lower() for v in values]:
                    return False
            else:
                return False  # an operator this reader cannot judge
    return True


def _is_ref(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"Ref"}


def _type(template: dict[str, Any], name: str) -> str | None:
    resource = template["Resources"].get(name)
    return resource["Type"] if resource else None
