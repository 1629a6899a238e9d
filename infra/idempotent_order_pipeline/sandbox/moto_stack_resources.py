"""CloudFormation's read APIs in AWS's shape on the stand-in: each stack's resources, their statuses and events.

moto 5.2.5 answers ``DescribeStackResources``, ``DescribeStackResource`` and ``ListStackResources``
from its resource map (``moto/cloudformation/responses.py``, ``StackResourceDTO`` and
``list_stack_resources``): a resource it skipped is an entry with no ``LogicalResourceId``,
``PhysicalResourceId`` or ``ResourceType`` (19 of the 36 resources of a pipeline stack); a model
without ``physical_resource_id`` (``AWS::Lambda::Permission``) has no physical id; every
``Timestamp`` is 2010-07-27T22:27:28Z and every status the stack's; ``DescribeStackResource`` fails
(a 500 page) on a stack with a skipped resource; and reading the map creates any declared resource
it lacks (a deleted one comes back). ``DescribeStackEvents`` lists the stack's own events only. An
update drops from the map a resource whose model moto cannot update in place (it stays in its
service, out of the stack).

Here the stand-in keeps its own record of each stack's resources (:func:`sync`), brought up to date
whenever the stack reaches a status (every stack event that ends an operation, and the start of a
rollback): each resource the template declares, whose condition holds, and that exists:

* created: its model's physical id (for a model without one, the name CloudFormation generated);
* skipped (:data:`.moto_cloudformation.SKIPPABLE_TYPES`): the physical id
  ``arn:aws:cloudformation:<region>:<account>:sandbox-skipped/<logical id>`` (what ``Fn::GetAtt`` of it
  gives too, with ``/<attribute>``) and a ``ResourceStatusReason`` saying that nothing was created.

A resource is ``CREATE_COMPLETE`` when it first appears and ``UPDATE_COMPLETE`` when its declaration
or its model changed, stamped with the time of that change; one resource event is added per change
(``CREATE_COMPLETE``, ``UPDATE_COMPLETE``, ``DELETE_COMPLETE``, and ``DELETE_SKIPPED`` for one a stack
deletion retains). The read APIs answer from that record, in botocore's output shapes, with
``DriftInformation`` ``NOT_CHECKED`` (CloudFormation's value before any drift detection), the
template resource's ``Metadata``, and ``DescribeStackResources``' limit of 100 resources;
``GetTemplate`` names its ``StagesAvailable``; ``DescribeStacks`` gives a stack its
``LastUpdatedTime`` once updated and its ``DriftInformation``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from moto.cloudformation.exceptions import ValidationError
from moto.cloudformation.models import Event, Stack
from moto.core.responses import ActionResult
from moto.core.utils import utcnow

#: DescribeStackResources returns the first 100 resources (ListStackResources pages them).
DESCRIBE_LIMIT = 100
LIST_PAGE_SIZE = 100
#: What CloudFormation reports before any drift detection ran.
NOT_CHECKED = "NOT_CHECKED"
#: The template stages ``GetTemplate`` offers (the stand-in keeps no transforms: both are the same).
TEMPLATE_STAGES = ["Original", "Processed"]
CREATE_COMPLETE = "CREATE_COMPLETE"
UPDATE_COMPLETE = "UPDATE_COMPLETE"
DELETE_COMPLETE = "DELETE_COMPLETE"
DELETE_SKIPPED = "DELETE_SKIPPED"
#: The stack statuses after which the record is brought up to date (a rollback's start records
#: what was created before the failure, so that its deletion is an event too).
_SYNC_STATUSES_SUFFIXES = ("_COMPLETE", "_FAILED")
_SYNC_STATUSES = frozenset({"ROLLBACK_IN_PROGRESS", "UPDATE_ROLLBACK_IN_PROGRESS"})
_RECORDS = "stand_in_resources"
_NAMES = "stand_in_generated_names"
_SKIPPED_PATH = "sandbox-skipped"


def skipped_physical_id(region: str, account: str, logical_id: str) -> str:
    """The physical id of a skipped resource: ``arn:aws:cloudformation:<region>:<account>:sandbox-skipped/<id>``."""
    return f"arn:aws:cloudformation:{region}:{account}:{_SKIPPED_PATH}/{logical_id}"


def is_skipped_physical_id(physical_id: str) -> bool:
    """Whether ``physical_id`` names a resource the stand-in skipped (nothing was created)."""
    return physical_id.startswith("arn:aws:cloudformation:") and f":{_SKIPPED_PATH}/" in physical_id


def skipped_reason(resource_type: str) -> str:
    """The ``ResourceStatusReason`` of a skipped resource."""
    return (
        f"Skipped by the local stand-in: moto does not implement {resource_type}, and it changes nothing "
        "the stand-in runs; nothing was created"
    )


@dataclass(frozen=True)
class ResourceRecord:
    """One resource of a stack as CloudFormation would report it."""

    logical_id: str
    resource_type: str
    physical_id: str
    status: str
    timestamp: datetime
    reason: str | None
    #: The template's declaration it was made from (to see an update) and the model (None: skipped).
    declaration: Any
    model: Any
    metadata: str | None = None


def records(stack: Stack) -> dict[str, ResourceRecord]:
    """The stack's resources as recorded (logical id -> record), in template order."""
    found: dict[str, ResourceRecord] = vars(stack).setdefault(_RECORDS, {})
    return found


def remember_generated_name(resources_map: Any, logical_id: str, name: str) -> None:
    """Note the name generated for a resource (its physical id when its model has none)."""
    vars(resources_map).setdefault(_NAMES, {})[logical_id] = name


def _declaration(resource_json: Any) -> Any:
    """A copy to compare: moto adds an empty ``Properties`` to the template's own dict when it parses it."""
    declared = copy.deepcopy(resource_json)
    if isinstance(declared, dict):
        declared["Properties"] = declared.get("Properties") or {}
    return declared


def _physical_id(model: Any, resources_map: Any, logical_id: str) -> str:
    physical = getattr(model, "physical_resource_id", None)
    if physical:
        return str(physical)
    return str(vars(resources_map).get(_NAMES, {}).get(logical_id, logical_id))


def _metadata(declaration: Any) -> str | None:
    metadata = declaration.get("Metadata") if isinstance(declaration, dict) else None
    return None if metadata is None else json.dumps(metadata)


def _condition_holds(resources_map: Any, declaration: Any) -> bool:
    condition = declaration.get("Condition") if isinstance(declaration, dict) else None
    return condition is None or bool(resources_map.lazy_condition_map[condition])


def _add_event(stack: Stack, record: ResourceRecord) -> None:
    event = Event(
        stack_id=stack.stack_id,
        stack_name=stack.name,
        logical_resource_id=record.logical_id,
        physical_resource_id=record.physical_id,
        resource_type=record.resource_type,
        resource_status=record.status,
        resource_status_reason=record.reason,
        resource_properties=None,
    )
    event.timestamp = record.timestamp
    stack.events.append(event)


def sync(stack: Stack, stack_status: str, is_skipped: Callable[[str], bool]) -> None:
    """Bring the stack's record up to date with its resource map; one event per resource that changed.

    ``stack_status``: the status the stack reaches now (``DELETE_COMPLETE`` ends every resource);
    ``is_skipped``: whether a type is one the stand-in skips.
    """
    recorded = records(stack)
    resources_map = stack.resource_map
    parsed = resources_map._parsed_resources  # never resources_map[...]: that creates what is missing
    now = utcnow()
    if stack_status == DELETE_COMPLETE:
        for logical_id, record in list(recorded.items()):
            if record.status in (DELETE_COMPLETE, DELETE_SKIPPED):
                continue
            retained = record.model is not None and parsed.get(logical_id) is record.model
            ended = _replace(record, DELETE_SKIPPED if retained else DELETE_COMPLETE, now)
            recorded[logical_id] = ended
            _add_event(stack, ended)
        return
    present: set[str] = set()
    for logical_id, resource_json in resources_map._resource_json_map.items():
        if not isinstance(resource_json, dict) or not _condition_holds(resources_map, resource_json):
            continue
        resource_type = str(resource_json.get("Type", ""))
        model = parsed.get(logical_id)
        if model is None and not is_skipped(resource_type):
            continue  # not created (yet, or it failed): CloudFormation does not list it either
        present.add(logical_id)
        declaration = _declaration(resource_json)
        old = recorded.get(logical_id)
        if old is not None and old.declaration == declaration and old.model is model:
            continue
        if model is None:
            physical = skipped_physical_id(stack.region_name, stack.account_id, logical_id)
            reason: str | None = skipped_reason(resource_type)
        else:
            physical, reason = _physical_id(model, resources_map, logical_id), None
        record = ResourceRecord(
            logical_id=logical_id,
            resource_type=resource_type,
            physical_id=physical,
            status=CREATE_COMPLETE if old is None else UPDATE_COMPLETE,
            timestamp=now,
            reason=reason,
            declaration=declaration,
            model=model,
            metadata=_metadata(resource_json),
        )
        recorded[logical_id] = record
        _add_event(stack, record)
    for logical_id in [logical_id for logical_id in recorded if logical_id not in present]:
        _add_event(stack, _replace(recorded.pop(logical_id), DELETE_COMPLETE, now))
    if stack_status.startswith("UPDATE_") and stack_status.endswith("_COMPLETE"):
        vars(stack)["last_updated_time"] = now  # DescribeStacks' LastUpdatedTime (moto's Stack has none)


def _replace(record: ResourceRecord, status: str, timestamp: datetime) -> ResourceRecord:
    return ResourceRecord(
        logical_id=record.logical_id,
        resource_type=record.resource_type,
        physical_id=record.physical_id,
        status=status,
        timestamp=timestamp,
        reason=record.reason,
        declaration=record.declaration,
        model=record.model,
        metadata=record.metadata,
    )


def should_sync(stack_status: str) -> bool:
    """Whether a stack event of this status brings the record up to date."""
    return stack_status.endswith(_SYNC_STATUSES_SUFFIXES) or stack_status in _SYNC_STATUSES


# --- the read APIs ---------------------------------------------------------------------------------


def _drift() -> dict[str, str]:
    return {"StackResourceDriftStatus": NOT_CHECKED}


def _resource(stack: Stack, record: ResourceRecord) -> dict[str, Any]:
    """A ``StackResource`` (DescribeStackResources)."""
    resource: dict[str, Any] = {
        "StackName": stack.name,
        "StackId": stack.stack_id,
        "LogicalResourceId": record.logical_id,
        "PhysicalResourceId": record.physical_id,
        "ResourceType": record.resource_type,
        "Timestamp": record.timestamp,
        "ResourceStatus": record.status,
        "DriftInformation": _drift(),
    }
    if record.reason is not None:
        resource["ResourceStatusReason"] = record.reason
    return resource


def _detail(stack: Stack, record: ResourceRecord) -> dict[str, Any]:
    """A ``StackResourceDetail`` (DescribeStackResource)."""
    detail = _resource(stack, record)
    detail["LastUpdatedTimestamp"] = detail.pop("Timestamp")
    if record.metadata is not None:
        detail["Metadata"] = record.metadata
    return detail


def _summary(record: ResourceRecord) -> dict[str, Any]:
    """A ``StackResourceSummary`` (ListStackResources)."""
    summary: dict[str, Any] = {
        "LogicalResourceId": record.logical_id,
        "PhysicalResourceId": record.physical_id,
        "ResourceType": record.resource_type,
        "LastUpdatedTimestamp": record.timestamp,
        "ResourceStatus": record.status,
        "DriftInformation": _drift(),
    }
    if record.reason is not None:
        summary["ResourceStatusReason"] = record.reason
    return summary


def _stack_holding(backend: Any, physical_id: str) -> Stack:
    stack: Stack
    for stack in backend.stacks.values():
        if any(record.physical_id == physical_id for record in records(stack).values()):
            return stack
    raise ValidationError(message=f"Stack for {physical_id} does not exist")


def response_describe_stack_resources(self: Any) -> ActionResult:
    """DescribeStackResources from the record: by ``StackName`` or by a resource's ``PhysicalResourceId``."""
    stack_name = self._get_param("StackName")
    physical_id = self._get_param("PhysicalResourceId")
    logical_id = self._get_param("LogicalResourceId")
    if stack_name and physical_id:
        raise ValidationError(message="Cannot specify both StackName and PhysicalResourceId")
    backend = self.cloudformation_backend
    if stack_name:
        stack = backend.get_stack(stack_name)
    elif physical_id:
        stack = _stack_holding(backend, physical_id)
    else:
        raise ValidationError(message="Either StackName or PhysicalResourceId must be specified")
    found = [record for record in records(stack).values() if logical_id in (None, record.logical_id)]
    return ActionResult({"StackResources": [_resource(stack, record) for record in found[:DESCRIBE_LIMIT]]})


def response_describe_stack_resource(self: Any) -> ActionResult:
    """DescribeStackResource from the record."""
    stack_name = self._get_param("StackName")
    logical_id = self._get_param("LogicalResourceId")
    stack = self.cloudformation_backend.get_stack(stack_name)
    record = records(stack).get(logical_id)
    if record is None:
        raise ValidationError(stack_name, message=f"Resource {logical_id} does not exist for stack {stack_name}")
    return ActionResult({"StackResourceDetail": _detail(stack, record)})


def response_list_stack_resources(self: Any) -> ActionResult:
    """ListStackResources from the record, in pages of 100."""
    stack = self.cloudformation_backend.get_stack(self._get_param("StackName"))
    summaries = [_summary(record) for record in records(stack).values()]
    token = self._get_param("NextToken")
    start = int(token) if token and str(token).isdigit() else 0
    page = summaries[start : start + LIST_PAGE_SIZE]
    result: dict[str, Any] = {"StackResourceSummaries": page}
    if start + LIST_PAGE_SIZE < len(summaries):
        result["NextToken"] = str(start + LIST_PAGE_SIZE)
    return ActionResult(result)


def response_get_template(self: Any) -> ActionResult:
    """GetTemplate, with the stages CloudFormation offers."""
    template = self.cloudformation_backend.get_template(self._get_param("StackName"))
    return ActionResult({"TemplateBody": template, "StagesAvailable": TEMPLATE_STAGES})


def stack_drift_information(self: Stack) -> dict[str, str]:
    """A stack's ``DriftInformation`` in DescribeStacks."""
    return {"StackDriftStatus": NOT_CHECKED}
