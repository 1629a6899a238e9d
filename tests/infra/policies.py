"""Every IAM policy document of a synthesized template, with its intrinsics resolved for a linter.

A linter reads strings: ``{"Fn::GetAtt": ["OrdersTable", "Arn"]}`` becomes the ARN such a resource
has (``arn:aws:dynamodb:eu-west-1:123456789012:table/OrdersTable``), pseudo parameters become one
account and region, ``Fn::Join`` and ``Fn::Sub`` are applied. The shapes are AWS's, so a linter can
match each action against the resource types it takes.
"""

from __future__ import annotations

import re
from typing import Any

PSEUDO = {
    "AWS::Partition": "aws",
    "AWS::Region": "eu-west-1",
    "AWS::AccountId": "123456789012",
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::StackName": "TestStack",
}
_PREFIX = "arn:aws:{service}:eu-west-1:123456789012:"
#: The ARN of a resource by its CloudFormation type (``{id}``: its logical id).
ARNS = {
    "AWS::DynamoDB::Table": _PREFIX.format(service="dynamodb") + "table/{id}",
    "AWS::SQS::Queue": _PREFIX.format(service="sqs") + "{id}",
    "AWS::SNS::Topic": _PREFIX.format(service="sns") + "{id}",
    "AWS::KMS::Key": _PREFIX.format(service="kms") + "key/{id}",
    "AWS::Logs::LogGroup": _PREFIX.format(service="logs") + "log-group:{id}:*",
    "AWS::Lambda::Function": _PREFIX.format(service="lambda") + "function:{id}",
    "AWS::Events::Rule": _PREFIX.format(service="events") + "rule/{id}",
    "AWS::IAM::Role": "arn:aws:iam::123456789012:role/{id}",
}
#: Where each policy-bearing resource type keeps its documents.
DOCUMENT_KEYS = {
    "AWS::IAM::Policy": ("PolicyDocument",),
    "AWS::IAM::ManagedPolicy": ("PolicyDocument",),
    "AWS::IAM::Role": ("AssumeRolePolicyDocument",),
    "AWS::SQS::QueuePolicy": ("PolicyDocument",),
    "AWS::SNS::TopicPolicy": ("PolicyDocument",),
    "AWS::KMS::Key": ("KeyPolicy",),
    "AWS::EC2::VPCEndpoint": ("PolicyDocument",),
}


def _ref(name: str, resources: dict[str, Any]) -> str:
    if name in PSEUDO:
        return PSEUDO[name]
    resource_type = resources.get(name, {}).get("Type")
    if resource_type == "AWS::SQS::Queue":
        return f"https://sqs.eu-west-1.amazonaws.com/123456789012/{name}"
    if resource_type == "AWS::SNS::Topic":
        return ARNS[resource_type].format(id=name)
    return name


def _get_att(name: str, attribute: str, resources: dict[str, Any]) -> str:
    resource_type = resources.get(name, {}).get("Type", "")
    if attribute in ("Arn", "TopicArn") and resource_type in ARNS:
        return ARNS[resource_type].format(id=name)
    return f"{name}.{attribute}"


def resolve(value: Any, resources: dict[str, Any]) -> Any:
    """``value`` with every intrinsic function replaced by the string it stands for."""
    if isinstance(value, list):
        return [resolve(item, resources) for item in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"Ref"}:
        return _ref(value["Ref"], resources)
    if set(value) == {"Fn::GetAtt"}:
        name, attribute = value["Fn::GetAtt"]
        return _get_att(name, attribute, resources)
    if set(value) == {"Fn::Join"}:
        separator, parts = value["Fn::Join"]
        return separator.join(str(resolve(part, resources)) for part in parts)
    if set(value) == {"Fn::Sub"}:
        template = value["Fn::Sub"] if isinstance(value["Fn::Sub"], str) else value["Fn::Sub"][0]
        return re.sub(r"\$\{([^}]+)\}", lambda match: _ref(match[1], resources), template)
    if set(value) == {"Fn::ImportValue"}:
        return f"imported-{resolve(value['Fn::ImportValue'], resources)}"
    return {key: resolve(item, resources) for key, item in value.items()}


def policy_documents(template_json: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every policy document of the template, resolved, by ``<logical id>.<property>``."""
    resources: dict[str, Any] = template_json["Resources"]
    documents: dict[str, dict[str, Any]] = {}
    for logical_id, resource in resources.items():
        for key in DOCUMENT_KEYS.get(resource["Type"], ()):
            document = resource.get("Properties", {}).get(key)
            if document is not None:
                documents[f"{logical_id}.{key}"] = resolve(document, resources)
    return documents
