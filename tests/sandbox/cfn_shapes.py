"""CloudFormation's read responses checked against botocore's service model (the API's own description).

:func:`shape_problems` walks a parsed response with the operation's output shape: every member the
model marks required is there, with its type (a string, a timestamp, a list, a structure...) and,
for an enum, one of its values; no member the shape lacks. :data:`ALWAYS_PRESENT` adds the members
the model leaves optional but CloudFormation always returns for a stack and its live resources
(the API reference's "Response Elements", e.g. the lists themselves, a resource's physical id,
``DriftInformation`` as ``NOT_CHECKED`` before any drift detection, ``StagesAvailable``).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Mapping
from typing import Any

import botocore.session
from botocore.model import Shape

MODEL = botocore.session.get_session().get_service_model("cloudformation")

#: Optional in the model, always in CloudFormation's answer (for a stack that exists and its
#: resources in a ``*_COMPLETE`` status).
ALWAYS_PRESENT: Mapping[str, frozenset[str]] = {
    "DescribeStackResourcesOutput": frozenset({"StackResources"}),
    "DescribeStackResourceOutput": frozenset({"StackResourceDetail"}),
    "ListStackResourcesOutput": frozenset({"StackResourceSummaries"}),
    "DescribeStacksOutput": frozenset({"Stacks"}),
    "DescribeStackEventsOutput": frozenset({"StackEvents"}),
    "GetTemplateOutput": frozenset({"TemplateBody", "StagesAvailable"}),
    "StackResource": frozenset({"StackName", "StackId", "PhysicalResourceId", "DriftInformation"}),
    "StackResourceDetail": frozenset({"StackName", "StackId", "PhysicalResourceId", "DriftInformation"}),
    "StackResourceSummary": frozenset({"PhysicalResourceId", "DriftInformation"}),
    "Stack": frozenset({"StackId", "DriftInformation"}),
    "StackEvent": frozenset({"LogicalResourceId", "PhysicalResourceId", "ResourceType", "ResourceStatus"}),
    "Output": frozenset({"OutputKey", "OutputValue"}),
}
STACK_TYPE = "AWS::CloudFormation::Stack"
#: The statuses a resource of a deployed stack has (CloudFormation's, after a create or an update).
DEPLOYED_RESOURCE_STATUSES = frozenset({"CREATE_COMPLETE", "UPDATE_COMPLETE"})


def shape_problems(operation: str, response: Mapping[str, Any]) -> list[str]:
    """What in ``response`` (a boto3 answer to ``operation``) is not as the service model describes it."""
    return list(_check(MODEL.operation_model(operation).output_shape, dict(response), operation))


def _member_shape(shape: Shape, name: str, value: Mapping[str, Any]) -> Shape:
    """The member's shape; a stack's own event has a stack status (``REVIEW_IN_PROGRESS``, which the
    model's ``ResourceStatus`` lacks, is the first event of a stack created by a change set)."""
    if shape.name == "StackEvent" and name == "ResourceStatus" and value.get("ResourceType") == STACK_TYPE:
        return MODEL.shape_for("StackStatus")
    member: Shape = shape.members[name]  # type: ignore[attr-defined]
    return member


def _check(shape: Shape, value: Any, path: str) -> Iterator[str]:
    kind = shape.type_name
    if kind == "structure":
        if not isinstance(value, dict):
            yield f"{path}: {type(value).__name__}, not a {shape.name} structure"
            return
        members = shape.members  # type: ignore[attr-defined]
        for name in sorted({*shape.required_members, *ALWAYS_PRESENT.get(shape.name, ())}):  # type: ignore[attr-defined]
            if name not in value:
                yield f"{path}.{name}: missing ({shape.name})"
        for name, member in value.items():
            if name == "ResponseMetadata":
                continue
            if name not in members:
                yield f"{path}.{name}: not a member of {shape.name}"
                continue
            yield from _check(_member_shape(shape, name, value), member, f"{path}.{name}")
    elif kind == "list":
        if not isinstance(value, list):
            yield f"{path}: {type(value).__name__}, not a list"
            return
        for index, item in enumerate(value):
            yield from _check(shape.member, item, f"{path}[{index}]")  # type: ignore[attr-defined]
    elif kind == "map":
        if not isinstance(value, dict):
            yield f"{path}: {type(value).__name__}, not a map"
    elif kind == "string":
        # boto3 hands a JSON template body over parsed (botocore's json_decode_template_body handler)
        parsed_template = path.endswith(".TemplateBody") and isinstance(value, dict)
        if not isinstance(value, str) and not parsed_template:
            yield f"{path}: {type(value).__name__}, not a string"
        elif shape.enum and value not in shape.enum:
            yield f"{path}: {value!r} is not one of {shape.name}'s values"
    elif kind == "timestamp":
        if not isinstance(value, datetime.datetime):
            yield f"{path}: {type(value).__name__}, not a timestamp"
    elif kind in ("integer", "long"):
        if not isinstance(value, int) or isinstance(value, bool):
            yield f"{path}: {type(value).__name__}, not an integer"
    elif kind == "boolean" and not isinstance(value, bool):
        yield f"{path}: {type(value).__name__}, not a boolean"
