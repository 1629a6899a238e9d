"""What was deployed, read back from the endpoint: the function, its SQS mapping, its code and layers.

Nothing here comes from the repository's source: the handler string, timeout and environment are
the function's configuration as the endpoint holds it, the code is the zip ``cdk deploy`` uploaded
(checked against the function's ``CodeSha256``), and the layers are the ones the deployed template
names. So a wrong environment variable name, a wrong handler string or a missing module in the
asset shows up when the sandbox runs the function, as it would in AWS.

Two moto gaps are bridged here, both visible in the report:

* moto's CloudFormation drops a function's ``Layers`` (``GetFunction`` lists none), so the layers
  are read from the deployed template (``GetTemplate``), a ``{"Ref": ...}`` resolved from the
  stack's parameters (the construct's ``PowertoolsLayerArn``), and must be layer versions the endpoint
  holds; their content is the zip the sandbox published, checked against the endpoint's
  ``CodeSha256`` (moto returns no download location for layers);
* moto would run the mapping itself, in Docker, on every ``SendMessage``: :func:`disable_mapping`
  turns it off, and :mod:`.poller` does its job.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from idempotent_order_pipeline._lambda_asset.order_consumer.contract import names
from order_pipeline_sandbox.deploy import Deployment, Layer
from order_pipeline_sandbox.server import Endpoint

#: The function response type that makes the handler's ``batchItemFailures`` count.
REPORT_BATCH_ITEM_FAILURES = "ReportBatchItemFailures"


class DeployedFunctionError(RuntimeError):
    """The deployed function or its mapping cannot be run as deployed (the message says why)."""


@dataclass(frozen=True)
class DeployedFunction:
    """The function's configuration and code as the endpoint holds them."""

    name: str
    arn: str
    handler: str
    runtime: str
    timeout_seconds: int
    memory_mb: int
    environment: Mapping[str, str]
    code_sha256: str
    code_zip: bytes = field(repr=False)
    layers: Sequence[Layer] = ()

    def unpack(self, directory: Path) -> tuple[Path, list[Path]]:
        """Unpack the code (as ``/var/task``) and each layer (as ``/opt``) under ``directory``.

        Returns the code directory and the layers' ``python`` directories, in layer order.
        """
        code_dir = directory / "task"
        _extract(self.code_zip, code_dir)
        layer_dirs = []
        for index, layer in enumerate(self.layers):
            layer_dir = directory / f"layer-{index}"
            _extract(layer.zip_path.read_bytes(), layer_dir)
            layer_dirs.append(layer_dir / "python")
        return code_dir, layer_dirs


@dataclass(frozen=True)
class QueueMapping:
    """The function's SQS event source mapping, and the redrive policy of its queue."""

    uuid: str
    queue_arn: str
    queue_url: str
    batch_size: int
    function_response_types: Sequence[str]
    max_receive_count: int | None
    dead_letter_queue_arn: str | None

    @property
    def reports_batch_item_failures(self) -> bool:
        return REPORT_BATCH_ITEM_FAILURES in self.function_response_types


def _extract(data: bytes, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for member in archive.namelist():
            target = (directory / member).resolve()
            if not target.is_relative_to(directory.resolve()):
                raise DeployedFunctionError(f"zip member {member!r} would land outside {directory}")
        archive.extractall(directory)


def _b64_sha256(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode("ascii")


def _code_zip(endpoint: Endpoint, location: str, code_sha256: str) -> bytes:
    """The code zip, from the bucket that holds the key moto names in the code location."""
    key = urlparse(location).path.lstrip("/")
    s3 = endpoint.client("s3")
    for bucket in s3.list_buckets().get("Buckets", []):
        try:
            body: bytes = s3.get_object(Bucket=bucket["Name"], Key=key)["Body"].read()
        except s3.exceptions.NoSuchKey:
            continue
        if _b64_sha256(body) == code_sha256:
            return body
    raise DeployedFunctionError(f"no bucket on the endpoint holds the function's code {key!r} with its CodeSha256")


def _template_layers(endpoint: Endpoint, deployment: Deployment, function_name: str) -> list[str]:
    """The ``Layers`` of the function's resource in the deployed template, stack parameters resolved."""
    cloudformation = endpoint.client("cloudformation")
    for page in cloudformation.get_paginator("list_stack_resources").paginate(StackName=deployment.stack_name):
        for summary in page["StackResourceSummaries"]:
            if summary.get("PhysicalResourceId") == function_name:
                resource = deployment.template["Resources"][summary["LogicalResourceId"]]
                layers = resource.get("Properties", {}).get("Layers", [])
                parameters = _stack_parameters(endpoint, deployment.stack_name)
                return [_resolve(layer, parameters) for layer in layers]
    raise DeployedFunctionError(f"function {function_name} is not a resource of stack {deployment.stack_name}")


def _stack_parameters(endpoint: Endpoint, stack_name: str) -> dict[str, str]:
    """The stack's parameter values as deployed (an SSM parameter type: the value read from SSM)."""
    stack = endpoint.client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"][0]
    # AWS puts an SSM parameter's value in ResolvedValue; moto puts it in ParameterValue.
    return {
        parameter["ParameterKey"]: str(parameter.get("ResolvedValue", parameter.get("ParameterValue", "")))
        for parameter in stack.get("Parameters", [])
    }


def _resolve(layer: Any, parameters: Mapping[str, str]) -> str:
    """A layer entry of the template: an ARN, or ``{"Ref": <stack parameter>}``."""
    if isinstance(layer, dict) and set(layer) == {"Ref"} and layer["Ref"] in parameters:
        return parameters[layer["Ref"]]
    if isinstance(layer, str):
        return layer
    raise DeployedFunctionError(f"the function's layer {layer!r} is neither an ARN nor a stack parameter")


def _layers(endpoint: Endpoint, arns: Sequence[str], published: Mapping[str, Layer]) -> list[Layer]:
    client = endpoint.client("lambda")
    layers = []
    for arn in arns:
        layer = published.get(arn)
        if layer is None:
            raise DeployedFunctionError(
                f"the function uses layer {arn}, which the sandbox did not publish; the construct's default "
                "layer must come from the Powertools SSM parameter the sandbox publishes"
            )
        name, version = arn.split(":")[-2:]
        content = client.get_layer_version(LayerName=name, VersionNumber=int(version))["Content"]
        if content.get("CodeSha256") != _b64_sha256(layer.zip_path.read_bytes()):
            raise DeployedFunctionError(f"layer {arn} on the endpoint is not the zip {layer.zip_path}")
        layers.append(layer)
    return layers


#: The reconciler's entry point (contract with ``lambdas/order_consumer/reconciler.py``).
RECONCILER_HANDLER = "order_consumer.reconciler.handler"


def find_function_by_handler(endpoint: Endpoint, deployment: Deployment, handler: str) -> str | None:
    """The physical name of the stack's function with this handler, or None."""
    cloudformation = endpoint.client("cloudformation")
    client = endpoint.client("lambda")
    for page in cloudformation.get_paginator("list_stack_resources").paginate(StackName=deployment.stack_name):
        for summary in page["StackResourceSummaries"]:
            if summary.get("ResourceType") != "AWS::Lambda::Function":
                continue
            name = str(summary.get("PhysicalResourceId"))
            if client.get_function_configuration(FunctionName=name).get("Handler") == handler:
                return name
    return None


def describe_function(endpoint: Endpoint, deployment: Deployment, name: str | None = None) -> DeployedFunction:
    """Read the function named ``name`` (default: the stack's ``FunctionName`` output), with its code and layers."""
    name = name or deployment.output(names.FUNCTION_NAME_OUTPUT)
    response = endpoint.client("lambda").get_function(FunctionName=name)
    config: dict[str, Any] = response["Configuration"]
    published = {} if deployment.layer is None else {deployment.layer.arn: deployment.layer}
    return DeployedFunction(
        name=name,
        arn=config["FunctionArn"],
        handler=config["Handler"],
        runtime=config.get("Runtime", ""),
        timeout_seconds=int(config.get("Timeout", 3)),
        memory_mb=int(config.get("MemorySize", 128)),
        environment=dict(config.get("Environment", {}).get("Variables", {})),
        code_sha256=config["CodeSha256"],
        code_zip=_code_zip(endpoint, response["Code"]["Location"], config["CodeSha256"]),
        layers=_layers(endpoint, _template_layers(endpoint, deployment, name), published),
    )


def describe_mapping(endpoint: Endpoint, function: DeployedFunction, queue_url: str) -> QueueMapping:
    """The function's mapping on ``queue_url`` (there must be exactly one) and the queue's redrive."""
    sqs = endpoint.client("sqs")
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn", "RedrivePolicy"])[
        "Attributes"
    ]
    queue_arn = attributes["QueueArn"]
    mappings = [
        mapping
        for mapping in endpoint.client("lambda").list_event_source_mappings(FunctionName=function.name)[
            "EventSourceMappings"
        ]
        if mapping["EventSourceArn"] == queue_arn
    ]
    if len(mappings) != 1:
        raise DeployedFunctionError(f"expected one mapping from {queue_arn} to {function.name}, found {len(mappings)}")
    mapping = mappings[0]
    redrive: dict[str, Any] = json.loads(attributes["RedrivePolicy"]) if attributes.get("RedrivePolicy") else {}
    return QueueMapping(
        uuid=mapping["UUID"],
        queue_arn=queue_arn,
        queue_url=queue_url,
        batch_size=int(mapping.get("BatchSize") or 10),
        function_response_types=tuple(mapping.get("FunctionResponseTypes") or ()),
        max_receive_count=int(redrive["maxReceiveCount"]) if "maxReceiveCount" in redrive else None,
        dead_letter_queue_arn=redrive.get("deadLetterTargetArn"),
    )


def disable_mapping(endpoint: Endpoint, mapping: QueueMapping) -> None:
    """Turn moto's own mapping off (it would invoke the function in Docker on every send)."""
    client = endpoint.client("lambda")
    client.update_event_source_mapping(UUID=mapping.uuid, Enabled=False)
    state = client.get_event_source_mapping(UUID=mapping.uuid).get("State")
    if state != "Disabled":
        raise DeployedFunctionError(f"could not disable mapping {mapping.uuid} (state {state})")
