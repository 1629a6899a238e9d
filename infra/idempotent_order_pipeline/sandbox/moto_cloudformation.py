"""The stand-in's CloudFormation fixes for moto 5.2.5: what real apps need of ``cdk deploy``.

Each fix names moto's behaviour and real CloudFormation's; ``docs/sandbox.md`` says which belong
upstream. :func:`apply` installs them (through :func:`idempotent_order_pipeline.sandbox.moto_patches.apply`),
:func:`revert` restores moto. Everything the stand-in's CloudFormation does on its own (a rollback,
a skipped resource, a refused one) is logged to :data:`LOGGER`, which the server writes to its log file.

1. **Change sets belong to a stack.** moto looks a change set up by name across every stack
   (``cdk deploy`` names them all ``cdk-deploy-change-set``), so ``DescribeChangeSet`` after
   ``DeleteChangeSet`` finds another stack's and the CLI waits for the deletion forever; and a
   missing change set is a ``ValidationError`` where CloudFormation answers ``ChangeSetNotFound``
   (which the CLI waits for). Here a name is looked up within ``StackName``, and deleting one that
   does not exist is no error (the CLI deletes its name "if it exists" before creating one).
2. **A failed deploy rolls back.** moto lets an error of ``ExecuteChangeSet`` escape (a 500 page, or
   another service's error) and leaves the stack half-created in ``REVIEW_IN_PROGRESS``, so the next
   ``cdk deploy`` cannot replace it. Here, as in CloudFormation, the execution succeeds, the failing
   resource gets a ``CREATE_FAILED``/``UPDATE_FAILED`` event naming its type and the reason, the
   resources created so far are deleted, and the stack ends in ``ROLLBACK_COMPLETE`` (a create; the
   next ``cdk deploy`` deletes it and starts again) or ``UPDATE_ROLLBACK_COMPLETE`` (an update, the
   previous template re-applied).
3. **Exports of a stack created by a change set.** moto registers exports only in ``CreateStack``
   and resolves ``Fn::ImportValue`` only against a stack created that way, so ``ListExports`` is empty
   after ``cdk deploy``, an importing stack fails, and deleting the exporting stack fails on the
   missing export (a 500 page). Here exports are published after every change set, an export name
   two stacks claim fails the second deploy, and an export another stack imports can be neither
   removed, nor changed by an update, nor deleted with its stack (CloudFormation's rules, which keep
   the importer working: the update rolls back, the deletion is refused).
4. **Generated names of FIFO queues.** CloudFormation names a ``FifoQueue`` without ``QueueName``
   ``<stack>-<logical id>-<suffix>.fifo`` within SQS's 80 characters; moto's generated name lacks
   ``.fifo`` (SQS refuses it) and may be cut to 80 characters. A FIFO topic without ``TopicName`` gets
   ``.fifo`` the same way, within SNS's 256.
5. **AWS::SNS::Subscription.** moto has no CloudFormation model for it and skips it silently: a
   subscriber stack deploys and never receives a message. Here it subscribes (with its
   ``RawMessageDelivery``, ``FilterPolicy``, ``FilterPolicyScope`` and ``RedrivePolicy``) and
   unsubscribes on deletion.
6. **Unsupported resource types and intrinsics fail the deploy.** moto skips a type it does not
   implement with a warning nobody sees, and passes a template function it does not evaluate (such
   as ``Fn::Cidr``) on as the property's value. Here only the types in :data:`SKIPPABLE_TYPES`
   (monitoring and resource policies, which change nothing the stand-in runs) are skipped, logged;
   any other type, and any function outside :data:`SUPPORTED_INTRINSICS`, fails the deploy as
   CloudFormation fails a resource, naming the logical id, the type and the function.
7. **``UsePreviousValue`` of an SSM-typed parameter.** For an update by change set (``cdk deploy`` of
   a deployed stack passes ``UsePreviousValue`` for parameters such as ``PowertoolsLayerArn`` and
   ``BootstrapVersion``) moto takes the *resolved* value (the layer ARN) as the new input and then
   looks it up as a parameter name: the update fails with ``'NoneType' object has no attribute
   'value'``. Here the previous input (the parameter's name) is kept, as CloudFormation does.
8. **Event source mappings leave the queue.** moto's ``DeleteEventSourceMapping`` (which stack
   deletion calls) forgets the mapping but the queue keeps invoking it on every ``SendMessage``:
   "Function not found" for a function nobody deployed. Here the queue (or table stream) forgets it too.
9. **A stack's own layer versions.** moto's ``AWS::Lambda::LayerVersion`` has no physical id: the
   stack lists the resource with an empty ``PhysicalResourceId`` and a ``Ref`` to it (a function's
   ``Layers``, an output) evaluates to the model object's repr. And ``GetLayerVersion`` names no
   ``Content.Location`` (``s3://``), so nothing can read the layer's zip back. Here, as in
   CloudFormation, the physical id (and so ``Ref``) is the layer version's ARN, and a layer version
   whose content came from S3 (a CDK asset) names that object as its location.
10. **The read APIs in AWS's shape.** ``DescribeStackResources``, ``DescribeStackResource``,
    ``ListStackResources`` and ``DescribeStackEvents`` answer from a record of each stack's resources
    (:mod:`.moto_stack_resources`), with their logical and physical ids, types, statuses and the
    deployment's timestamps, and one event per resource; an update keeps a resource whose model moto
    cannot update in place (moto dropped it from the stack).
11. **A VPC endpoint's attributes.** moto's ``AWS::EC2::VPCEndpoint`` answers no ``Fn::GetAtt``
    (its model has no ``get_cfn_attribute``: the whole deploy fails), while the construct reads
    ``DnsEntries`` for the functions' endpoint variables. Here ``DnsEntries`` is CloudFormation's list
    of ``<hosted zone id>:<DNS name>`` (moto's entry for an interface endpoint; empty for a gateway),
    ``NetworkInterfaceIds`` the endpoint's interfaces, and ``Id`` its id. The stand-in then drops the
    variables for its one endpoint (``lambda_runtime.lambda_environment``).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from moto.awslambda.models import LambdaBackend, LayerVersion
from moto.cloudformation import parsing
from moto.cloudformation import responses as cloudformation_responses
from moto.cloudformation.exceptions import CloudFormationError, ValidationError
from moto.cloudformation.models import ChangeSet, CloudFormationBackend, Event, Stack
from moto.cloudformation.utils import random_suffix
from moto.core.responses import ActionResult, EmptyResult
from moto.dynamodb.models import dynamodb_backends
from moto.ec2.models.vpcs import VPCEndPoint
from moto.sns.models import sns_backends
from moto.sqs.models import sqs_backends

from idempotent_order_pipeline.sandbox import moto_stack_resources

#: Where the stand-in says what its CloudFormation did beyond moto (rollbacks, skipped and refused
#: resources). The server sends it to its log file.
LOGGER = logging.getLogger("idempotent_order_pipeline.sandbox.cloudformation")

#: Types moto does not implement and the stand-in skips: none changes what the stand-in runs (it
#: raises no alarm, keeps no metric, enforces no resource policy, invokes nothing asynchronously).
#: Any other unimplemented type fails the deploy.
SKIPPABLE_TYPES = frozenset(
    {
        "AWS::CDK::Metadata",
        # monitoring
        "AWS::CloudWatch::Alarm",
        "AWS::CloudWatch::AnomalyDetector",
        "AWS::CloudWatch::CompositeAlarm",
        "AWS::CloudWatch::InsightRule",
        "AWS::Logs::MetricFilter",
        # resource policies (moto enforces none)
        "AWS::S3::BucketPolicy",
        "AWS::SNS::TopicPolicy",
        "AWS::SQS::QueuePolicy",
        # asynchronous invocation settings (the stand-in invokes functions synchronously)
        "AWS::Lambda::EventInvokeConfig",
    }
)
#: The template functions moto's ``clean_json`` evaluates in resource properties (with ``Ref``).
SUPPORTED_INTRINSICS = frozenset(
    {
        "Fn::Base64",
        "Fn::FindInMap",
        "Fn::GetAZs",
        "Fn::GetAtt",
        "Fn::If",
        "Fn::ImportValue",
        "Fn::Join",
        "Fn::Select",
        "Fn::Split",
        "Fn::Sub",
        "Fn::ToJsonString",
    }
)
#: Name limits of the generated names (SQS ``CreateQueue``, SNS ``CreateTopic``).
MAX_QUEUE_NAME = 80
MAX_TOPIC_NAME = 256
FIFO_SUFFIX = ".fifo"
SUBSCRIPTION_TYPE = "AWS::SNS::Subscription"
#: The subscription properties that are subscription attributes in SNS's API.
SUBSCRIPTION_ATTRIBUTES = ("RawMessageDelivery", "FilterPolicy", "FilterPolicyScope", "RedrivePolicy", "DeliveryPolicy")

_ORIGINAL: dict[str, Callable[..., Any]] = {
    "create_change_set": CloudFormationBackend.create_change_set,
    "delete_stack": CloudFormationBackend.delete_stack,
    "parse_resource": parsing.parse_resource,
    "parse_resource_and_generate_name": parsing.parse_resource_and_generate_name,
    "parse_and_create_resource": parsing.parse_and_create_resource,
    "parse_and_update_resource": parsing.parse_and_update_resource,
    "resource_class_from_type": parsing.resource_class_from_type,
    "delete_event_source_mapping": LambdaBackend.delete_event_source_mapping,
    "get_layer_version": LayerVersion.get_layer_version,
    "add_stack_event": Stack._add_stack_event,
}
_lock = threading.Lock()


class ChangeSetNotFound(CloudFormationError):
    """CloudFormation's answer for a change set that does not exist (the CLI waits for it after a delete)."""

    code = "ChangeSetNotFoundException"

    def __init__(self, name: str) -> None:
        super().__init__(f"ChangeSet [{name}] does not exist")


class ResourceFailed(Exception):
    """A template resource that could not be created, updated or accepted by the stand-in."""

    def __init__(self, logical_id: str, resource_type: str, reason: str) -> None:
        super().__init__(f"{logical_id} ({resource_type}): {reason}")
        self.logical_id = logical_id
        self.resource_type = resource_type
        self.reason = reason


class UnsupportedResourceType(ValueError):
    """A resource type moto does not implement and the stand-in cannot skip."""


class UnsupportedIntrinsic(ValueError):
    """A template function moto's CloudFormation does not evaluate."""


# --- 1. change sets belong to a stack -------------------------------------------------------------


def _stack_matches(change_set: ChangeSet, stack_name: str | None) -> bool:
    return stack_name is None or stack_name in (change_set.stack_name, change_set.stack_id)


def find_change_set(backend: CloudFormationBackend, name: str, stack_name: str | None = None) -> ChangeSet:
    """The change set with this ARN, or with this name on ``stack_name`` (the newest)."""
    if name in backend.change_sets:
        return backend.change_sets[name]
    matches = [
        change_set
        for change_set in backend.change_sets.values()
        if change_set.change_set_name == name and _stack_matches(change_set, stack_name)
    ]
    if not matches:
        raise ChangeSetNotFound(name)
    return matches[-1]


def describe_change_set(self: CloudFormationBackend, change_set_name: str, stack_name: str | None = None) -> ChangeSet:
    """moto's ``describe_change_set``, within the stack."""
    return find_change_set(self, change_set_name, stack_name)


def delete_change_set(self: CloudFormationBackend, change_set_name: str, stack_name: str | None = None) -> None:
    """moto's ``delete_change_set``, within the stack; a change set that does not exist is no error
    (the CLI deletes its change set name "if it exists" before creating one)."""
    try:
        change_set = find_change_set(self, change_set_name, stack_name)
    except ChangeSetNotFound:
        return
    del self.change_sets[change_set.change_set_id]


def create_change_set(self: CloudFormationBackend, stack_name: str, *args: Any, **kwargs: Any) -> Any:
    """moto's ``create_change_set``; an SSM-typed parameter's previous value is its name, not its value."""
    if kwargs.get("change_set_type") == "UPDATE":
        stack = next((s for s in self.stacks.values() if stack_name in (s.name, s.stack_id)), None)
        if stack is not None:
            kwargs["parameters"] = _previous_ssm_inputs(stack, dict(kwargs.get("parameters") or {}))
    return _ORIGINAL["create_change_set"](self, stack_name, *args, **kwargs)


def _previous_ssm_inputs(stack: Stack, parameters: dict[str, Any]) -> dict[str, Any]:
    """``parameters`` where moto put the resolved value of an SSM-typed parameter back as its input."""
    declared = stack.template_dict.get("Parameters") or {}
    resolved = stack.resource_map.resolved_parameters
    for key, value in list(parameters.items()):
        ssm_typed = str(declared.get(key, {}).get("Type", "")).startswith("AWS::SSM::Parameter::")
        if ssm_typed and key in resolved and value == resolved[key]:
            if key in stack.parameters:
                parameters[key] = stack.parameters[key]
            else:
                del parameters[key]  # the template's default (the parameter's name) applies again
    return parameters


def response_describe_change_set(self: Any) -> Any:
    """moto's ``DescribeChangeSet`` handler, passing ``StackName`` on."""
    change_set = self.cloudformation_backend.describe_change_set(
        change_set_name=self._get_param("ChangeSetName"), stack_name=self._get_param("StackName")
    )
    return ActionResult(change_set)


def response_delete_change_set(self: Any) -> Any:
    """moto's ``DeleteChangeSet`` handler, passing ``StackName`` on."""
    self.cloudformation_backend.delete_change_set(
        change_set_name=self._get_param("ChangeSetName"), stack_name=self._get_param("StackName")
    )
    return EmptyResult()


# --- 2. a failed deploy rolls back; 3. exports -----------------------------------------------------


def execute_change_set(self: CloudFormationBackend, change_set_name: str, stack_name: str | None = None) -> None:
    """Execute as CloudFormation does: complete, or fail one resource and roll back (never raise)."""
    change_set = find_change_set(self, change_set_name, stack_name)
    stack = self.stacks[change_set.stack_id]
    creating = change_set.change_set_type == "CREATE"
    previous = (stack.template, dict(stack.parameters)) if not creating else None
    stack.status = "CREATE_IN_PROGRESS" if creating else "UPDATE_IN_PROGRESS"
    stack._add_stack_event(stack.status, resource_status_reason="User Initiated")
    # Imports resolve against this region's exports (moto gave a change set's stack none).
    stack.cross_stack_resources = self.exports
    stack.resource_map.cross_stack_resources = self.exports
    try:
        change_set.apply()
        _publish_exports(self, stack)
    except Exception as exc:  # any failure of any resource: CloudFormation reports it and rolls back
        _roll_back(self, stack, change_set, _as_resource_failure(exc), previous)
        return
    stack.status = "CREATE_COMPLETE" if creating else "UPDATE_COMPLETE"
    stack._add_stack_event(stack.status)
    change_set.execution_status = "EXECUTE_COMPLETE"


def _as_resource_failure(exc: Exception) -> ResourceFailed:
    if isinstance(exc, ResourceFailed):
        return exc
    failure = ResourceFailed("(stack)", Stack.cloudformation_type(), _reason(exc))
    failure.__cause__ = exc  # the server log shows where it failed
    return failure


def _reason(exc: BaseException) -> str:
    """``Code: message`` of a moto service error, the stand-in's own message, ``Type: text`` of anything else."""
    code, message = getattr(exc, "code", None), getattr(exc, "message", None)
    if isinstance(code, str) and isinstance(message, str):
        return message if message.startswith(code) else f"{code}: {message}"
    if type(exc).__module__ == __name__:  # the stand-in's own refusals say it all
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _roll_back(
    backend: CloudFormationBackend,
    stack: Stack,
    change_set: ChangeSet,
    failure: ResourceFailed,
    previous: tuple[Any, dict[str, Any]] | None,
) -> None:
    creating = previous is None
    verb = "create" if creating else "update"
    LOGGER.warning("stack %s: %s failed at %s; rolling back", stack.name, verb, failure, exc_info=failure)
    # What was created or updated before the failure is recorded (and its events come) first.
    moto_stack_resources.sync(stack, stack.status, is_skipped_type)
    _add_resource_event(stack, failure, f"{verb.upper()}_FAILED")
    reason = f"The following resource(s) failed to {verb}: [{failure.logical_id}]. Rollback requested by user."
    in_progress = "ROLLBACK_IN_PROGRESS" if creating else "UPDATE_ROLLBACK_IN_PROGRESS"
    stack.status = in_progress
    stack._add_stack_event(in_progress, resource_status_reason=reason)
    final = "ROLLBACK_COMPLETE" if creating else "UPDATE_ROLLBACK_COMPLETE"
    try:
        if creating:
            # No outputs: evaluating them would re-create the deleted resources they reference.
            stack.output_map = parsing.OutputMap(stack.resource_map, {}, stack.stack_id)
            resource_map = stack.resource_map
            resource_map.delete()
            # moto's map creates a declared resource when it is read (ListStackResources would bring
            # the deleted ones back): it declares only what is left (retained resources).
            resource_map._resource_json_map = {
                logical_id: declared
                for logical_id, declared in resource_map._resource_json_map.items()
                if logical_id in resource_map._parsed_resources
            }
        else:
            template, parameters = previous  # type: ignore[misc]
            stack.template = template
            stack._parse_template()
            stack.resource_map.update(stack.template_dict, parameters)
            stack.output_map = stack._create_output_map()
    except Exception as exc:  # the rollback itself failed: say so, as CloudFormation does
        LOGGER.warning("stack %s: rollback failed: %s", stack.name, _reason(exc))
        final = "ROLLBACK_FAILED" if creating else "UPDATE_ROLLBACK_FAILED"
    stack.status = final
    stack._add_stack_event(final)
    change_set.execution_status = "EXECUTE_FAILED"
    change_set.status_reason = str(failure)


def _add_resource_event(stack: Stack, failure: ResourceFailed, status: str) -> None:
    """A resource's event (moto's ``_add_stack_event`` only writes the stack's own)."""
    stack.events.append(
        Event(
            stack_id=stack.stack_id,
            stack_name=stack.name,
            logical_resource_id=failure.logical_id,
            physical_resource_id="",
            resource_type=failure.resource_type,
            resource_status=status,
            resource_status_reason=failure.reason,
            resource_properties=None,
        )
    )


def _publish_exports(backend: CloudFormationBackend, stack: Stack) -> None:
    """Register the stack's exports in the region (replacing its own earlier ones)."""
    exports = stack.exports
    for export in exports:
        owner = backend.exports.get(export.name)
        if owner is not None and owner.exporting_stack_id != stack.stack_id:
            raise ValidationError(
                stack.stack_id,
                message=f"Export with name {export.name} is already exported by stack "
                f"{owner.exporting_stack_id.split('/')[1]}",
            )
    new_values = {export.name: export.value for export in exports}
    own = [name for name, export in backend.exports.items() if export.exporting_stack_id == stack.stack_id]
    for name in own:
        change = "delete" if name not in new_values else "update"
        if change == "update" and new_values[name] == backend.exports[name].value:
            continue
        importers = _importers(backend, name, stack)
        if importers:  # CloudFormation's rule: the importer would be left pointing at nothing
            raise ValidationError(
                stack.stack_id, message=f"Cannot {change} export {name} as it is in use by {', '.join(importers)}"
            )
    for name in own:
        del backend.exports[name]
    for export in exports:
        backend.exports[export.name] = export


def _importers(backend: CloudFormationBackend, export_name: str, exporter: Stack) -> list[str]:
    """Names of the other live stacks whose template imports ``export_name``."""
    return [
        stack.name
        for stack in backend.stacks.values()
        if stack is not exporter and export_name in _imported_names(stack.template_dict)
    ]


def _imported_names(node: Any) -> Iterator[Any]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "Fn::ImportValue":
                yield value
            else:
                yield from _imported_names(value)
    elif isinstance(node, list):
        for value in node:
            yield from _imported_names(value)


def delete_stack(self: CloudFormationBackend, name_or_stack_id: str) -> None:
    """moto's ``delete_stack``; refuses a stack whose export is imported, tolerates unregistered exports."""
    for stack in [s for s in self.stacks.values() if name_or_stack_id in (s.name, s.stack_id)]:
        own = [name for name, export in self.exports.items() if export.exporting_stack_id == stack.stack_id]
        for name in own:
            importers = _importers(self, name, stack)
            if importers:
                raise ValidationError(
                    stack.stack_id,
                    message=f"Export {name} cannot be deleted as it is in use by {', '.join(importers)}",
                )
        for name in own:
            del self.exports[name]
        # moto pops every export the template declares; an unregistered one would raise KeyError.
        for export in stack.exports:
            self.exports.setdefault(export.name, export)
    _ORIGINAL["delete_stack"](self, name_or_stack_id)


# --- 4. generated FIFO names; 6. unsupported types; resource failures named ------------------------


def _is_true(value: Any) -> bool:
    return value is True or str(value).lower() == "true"


def fifo_name(stack_name: str, logical_id: str, limit: int) -> str:
    """CloudFormation's generated name ``<stack>-<logical id>-<suffix>.fifo`` within ``limit``."""
    suffix = f"-{random_suffix()}{FIFO_SUFFIX}"
    prefix = f"{stack_name}-{logical_id}"[: limit - len(suffix)].rstrip("-")
    return prefix + suffix


def parse_resource_and_generate_name(logical_id: str, resource_json: dict[str, Any], resources_map: Any) -> Any:
    """moto's name generation, with ``.fifo`` on the generated name of a FIFO queue or topic."""
    parsed = _ORIGINAL["parse_resource_and_generate_name"](logical_id, resource_json, resources_map)
    if not parsed:
        return parsed
    resource_class, cleaned, name = parsed
    moto_stack_resources.remember_generated_name(resources_map, logical_id, name)
    properties = cleaned.get("Properties") or {}
    resource_type = cleaned.get("Type")
    stack_name = str(resources_map["AWS::StackName"])
    if resource_type == "AWS::SQS::Queue" and _is_true(properties.get("FifoQueue")) and "QueueName" not in properties:
        name = fifo_name(stack_name, logical_id, MAX_QUEUE_NAME)
    elif resource_type == "AWS::SNS::Topic" and _is_true(properties.get("FifoTopic")) and "TopicName" not in properties:
        name = fifo_name(stack_name, logical_id, MAX_TOPIC_NAME)
    return resource_class, cleaned, name


def parse_resource(resource_json: dict[str, Any], resources_map: Any) -> Any:
    """moto's ``parse_resource``; an unimplemented type outside :data:`SKIPPABLE_TYPES`, or a function
    outside :data:`SUPPORTED_INTRINSICS`, is refused."""
    resource_type = resource_json["Type"]
    if resource_class_from_type(resource_type) is None and resource_type not in parsing.NULL_MODELS:
        if resource_type not in SKIPPABLE_TYPES:
            raise UnsupportedResourceType(
                f"Resource type {resource_type} is not supported by the local stand-in (moto's CloudFormation "
                "does not implement it, and it is not one of the monitoring or policy types the stand-in skips)"
            )
        LOGGER.info(
            "stack %s: skipped a %s (nothing the stand-in runs)", resources_map["AWS::StackName"], resource_type
        )
        return None
    unsupported = sorted(set(_functions(resource_json.get("Properties"))) - SUPPORTED_INTRINSICS)
    if unsupported:
        raise UnsupportedIntrinsic(
            f"Template function(s) {', '.join(unsupported)} not supported by the local stand-in (moto's "
            f"CloudFormation evaluates only Ref and {', '.join(sorted(SUPPORTED_INTRINSICS))})"
        )
    return _ORIGINAL["parse_resource"](resource_json, resources_map)


def _functions(node: Any) -> Iterator[str]:
    """Every ``Fn::`` key in a template fragment."""
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(key, str) and key.startswith("Fn::"):
                yield key
            yield from _functions(value)
    elif isinstance(node, list):
        for value in node:
            yield from _functions(value)


def _named_failures(original: Callable[..., Any], verb: str) -> Callable[..., Any]:
    def wrapper(logical_id: str, resource_json: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return original(logical_id, resource_json, *args, **kwargs)
        except ResourceFailed:
            raise  # a resource this one references failed first: that one is the cause
        except Exception as exc:
            raise ResourceFailed(logical_id, str(resource_json.get("Type")), _reason(exc)) from exc

    wrapper.__name__ = f"{verb}_named"
    wrapper.__doc__ = f"moto's {original.__name__}; a failure names the resource (logical id, type)."
    return wrapper


def _update_keeping_the_unsupported(
    logical_id: str, resource_json: dict[str, Any], resources_map: Any, *args: Any, **kwargs: Any
) -> Any:
    """moto's ``parse_and_update_resource``; a model moto cannot update in place is kept, not dropped.

    moto returns None for it, and its map then forgets a resource that still exists in its service
    (no longer listed, never deleted with the stack). The stand-in keeps the model as it was created
    and says so in the log (the update of that resource's properties is not applied).
    """
    updated = _ORIGINAL["parse_and_update_resource"](logical_id, resource_json, resources_map, *args, **kwargs)
    if updated is None and resource_class_from_type(str(resource_json.get("Type"))) is not None:
        kept = resources_map._parsed_resources.get(logical_id)
        if kept is not None:
            LOGGER.warning(
                "stack %s: moto cannot update a %s in place; %s is kept as it was created",
                resources_map["AWS::StackName"],
                resource_json.get("Type"),
                logical_id,
            )
        return kept
    return updated


parse_and_create_resource = _named_failures(_ORIGINAL["parse_and_create_resource"], "create")
parse_and_update_resource = _named_failures(_update_keeping_the_unsupported, "update")


# --- 10. the read APIs ----------------------------------------------------------------------------


def is_skipped_type(resource_type: str) -> bool:
    """Whether the stand-in skips this type (a skippable type, or one moto models as nothing)."""
    return resource_type in SKIPPABLE_TYPES or resource_type in parsing.NULL_MODELS


def add_stack_event(
    self: Stack,
    resource_status: str,
    resource_status_reason: str | None = None,
    resource_properties: str | None = None,
) -> None:
    """moto's ``_add_stack_event``; a status that ends an operation first brings the resource record up to date."""
    if moto_stack_resources.should_sync(resource_status):
        moto_stack_resources.sync(self, resource_status, is_skipped_type)
    _ORIGINAL["add_stack_event"](self, resource_status, resource_status_reason, resource_properties)


# --- 5. AWS::SNS::Subscription --------------------------------------------------------------------


class SnsSubscription:
    """The CloudFormation model of ``AWS::SNS::Subscription`` (moto has none)."""

    def __init__(self, arn: str, account_id: str, region_name: str) -> None:
        self.arn = arn
        self._account_id = account_id
        self._region_name = region_name

    @property
    def physical_resource_id(self) -> str:
        return self.arn

    def is_created(self) -> bool:
        return True

    @staticmethod
    def cloudformation_type() -> str:
        return SUBSCRIPTION_TYPE

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return attr == "Arn"

    def get_cfn_attribute(self, attribute_name: str) -> str:
        if attribute_name == "Arn":
            return self.arn
        raise ValueError(f"AWS::SNS::Subscription has no attribute {attribute_name}")

    @classmethod
    def create_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str, **kwargs: Any
    ) -> SnsSubscription:
        properties = cloudformation_json["Properties"]
        backend = sns_backends[account_id][region_name]
        subscription = backend.subscribe(properties["TopicArn"], properties["Endpoint"], properties["Protocol"])
        for name in SUBSCRIPTION_ATTRIBUTES:
            if name in properties:
                value = properties[name]
                if isinstance(value, dict | list):
                    value = json.dumps(value)
                elif isinstance(value, bool):
                    value = str(value).lower()
                backend.set_subscription_attributes(subscription.arn, name, str(value))
        return cls(subscription.arn, account_id, region_name)

    @classmethod
    def update_from_cloudformation_json(
        cls,
        original_resource: SnsSubscription,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> SnsSubscription:
        original_resource.delete(account_id, region_name)
        return cls.create_from_cloudformation_json(new_resource_name, cloudformation_json, account_id, region_name)

    @classmethod
    def delete_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        sns_backends[account_id][region_name].unsubscribe(resource_name)

    def delete(self, account_id: str, region_name: str) -> None:
        sns_backends[account_id][region_name].unsubscribe(self.arn)


def resource_class_from_type(resource_type: str) -> Any:
    """moto's model lookup, plus :class:`SnsSubscription`."""
    if resource_type == SUBSCRIPTION_TYPE:
        return SnsSubscription
    return _ORIGINAL["resource_class_from_type"](resource_type)


# --- 8. event source mappings leave their source ----------------------------------------------------


def delete_event_source_mapping(self: LambdaBackend, uuid: str) -> Any:
    """moto's ``delete_event_source_mapping``; the queue or table stream forgets the mapping too."""
    mapping = _ORIGINAL["delete_event_source_mapping"](self, uuid)
    if mapping is not None:
        sources: list[Any] = [
            *sqs_backends[self.account_id][self.region_name].queues.values(),
            *dynamodb_backends[self.account_id][self.region_name].tables.values(),
        ]
        for source in sources:
            registered = getattr(source, "lambda_event_source_mappings", {})
            for key in [key for key, value in registered.items() if value is mapping]:
                del registered[key]
    return mapping


# --- 9. a stack's own layer versions ----------------------------------------------------------------


def vpc_endpoint_attribute(self: VPCEndPoint, attribute_name: str) -> Any:
    """``Fn::GetAtt`` of an ``AWS::EC2::VPCEndpoint``: ``DnsEntries``, ``NetworkInterfaceIds`` or ``Id``."""
    from moto.cloudformation.exceptions import UnformattedGetAttTemplateException

    if attribute_name == "DnsEntries":
        return [f"{entry['hosted_zone_id']}:{entry['dns_name']}" for entry in self.dns_entries or []]
    if attribute_name == "NetworkInterfaceIds":
        return list(self.network_interface_ids or [])
    if attribute_name == "Id":
        return self.id
    raise UnformattedGetAttTemplateException()


def layer_version_physical_id(self: LayerVersion) -> str:
    """The physical id (and ``Ref``) of an ``AWS::Lambda::LayerVersion``: its version ARN, as in CloudFormation."""
    return self.arn


def layer_s3_location(region: str, bucket: str, key: str) -> str:
    """The ``Content.Location`` of a layer version whose zip is the S3 object ``bucket``/``key``."""
    return f"https://{bucket}.s3.{region}.amazonaws.com/{key}"


def get_layer_version(self: LayerVersion) -> dict[str, Any]:
    """moto's ``get_layer_version``; content from S3 names its object as the location."""
    version: dict[str, Any] = _ORIGINAL["get_layer_version"](self)
    bucket, key = self.content.get("S3Bucket"), self.content.get("S3Key")
    if bucket and key:
        version["Content"]["Location"] = layer_s3_location(self.region, str(bucket), str(key))
    return version


# --- install --------------------------------------------------------------------------------------

_PATCHES: list[tuple[Any, str, Any]] = [
    (CloudFormationBackend, "create_change_set", create_change_set),
    (CloudFormationBackend, "describe_change_set", describe_change_set),
    (CloudFormationBackend, "delete_change_set", delete_change_set),
    (CloudFormationBackend, "execute_change_set", execute_change_set),
    (CloudFormationBackend, "delete_stack", delete_stack),
    (cloudformation_responses.CloudFormationResponse, "describe_change_set", response_describe_change_set),
    (cloudformation_responses.CloudFormationResponse, "delete_change_set", response_delete_change_set),
    (parsing, "parse_resource", parse_resource),
    (parsing, "parse_resource_and_generate_name", parse_resource_and_generate_name),
    (parsing, "parse_and_create_resource", parse_and_create_resource),
    (parsing, "parse_and_update_resource", parse_and_update_resource),
    (parsing, "resource_class_from_type", resource_class_from_type),
    (LambdaBackend, "delete_event_source_mapping", delete_event_source_mapping),
    (VPCEndPoint, "get_cfn_attribute", vpc_endpoint_attribute),
    (LayerVersion, "physical_resource_id", property(layer_version_physical_id)),
    (LayerVersion, "get_layer_version", get_layer_version),
    (Stack, "_add_stack_event", add_stack_event),
    (Stack, "drift_information", property(moto_stack_resources.stack_drift_information)),
    (
        cloudformation_responses.CloudFormationResponse,
        "describe_stack_resources",
        moto_stack_resources.response_describe_stack_resources,
    ),
    (
        cloudformation_responses.CloudFormationResponse,
        "describe_stack_resource",
        moto_stack_resources.response_describe_stack_resource,
    ),
    (
        cloudformation_responses.CloudFormationResponse,
        "list_stack_resources",
        moto_stack_resources.response_list_stack_resources,
    ),
    (cloudformation_responses.CloudFormationResponse, "get_template", moto_stack_resources.response_get_template),
]

# moto's LayerVersion has no physical_resource_id at all: revert removes what apply added.
_ABSENT = object()
_SAVED = {(owner, name): getattr(owner, name, _ABSENT) for owner, name, _ in _PATCHES}


def apply() -> None:
    """Install the fixes (idempotent)."""
    with _lock:
        for owner, name, replacement in _PATCHES:
            setattr(owner, name, replacement)


def revert() -> None:
    """Put moto's own functions back."""
    with _lock:
        for owner, name, _ in _PATCHES:
            saved = _SAVED[owner, name]
            if saved is _ABSENT:
                if name in vars(owner):
                    delattr(owner, name)
            else:
                setattr(owner, name, saved)


def is_applied() -> bool:
    """Whether :func:`apply` is in effect."""
    return all(getattr(owner, name) is replacement for owner, name, replacement in _PATCHES)
