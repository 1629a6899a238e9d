"""What was deployed, read back from the endpoint: the function, its SQS mapping, its code and layers.

Nothing here comes from the repository's source: the handler string, timeout and environment are
the function's configuration as the endpoint holds it, the code is the zip ``cdk deploy`` uploaded
(checked against the function's ``CodeSha256``), and the layers are the ones the deployed template
names. So a wrong environment variable name, a wrong handler string or a missing module in the
asset shows up when the sandbox runs the function, as it would in AWS.

Two moto gaps are bridged here, both visible in the report:

* moto's CloudFormation drops a function's ``Layers`` (``GetFunction`` lists none), so the layers
  are read from the deployed template (``GetTemplate``), a ``{"Ref": ...}`` resolved from the
  stack's parameters (the construct's ``PowertoolsLayerArn``) or from its own
  ``AWS::Lambda::LayerVersion`` resources (an ``IdempotentSubscriber``'s runtime layer, whose
  physical id is its ARN with :mod:`.moto_cloudformation`), and must be layer versions the endpoint
  holds. A layer the sandbox published is the zip it built; any other is read from the S3 object
  ``GetLayerVersion`` names as its location (a CDK asset in the bootstrap bucket). Either is
  checked against the endpoint's ``CodeSha256``;
* moto would run the mapping itself, in Docker, inside every ``SendMessage``: the endpoint
  (:func:`.server.prepare_moto`) leaves that out, and :mod:`.poller` does the mapping's job.
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
from idempotent_order_pipeline.sandbox.deploy import Deployment, Layer
from idempotent_order_pipeline.sandbox.server import Endpoint

#: The function response type that makes the handler's ``batchItemFailures`` count.
REPORT_BATCH_ITEM_FAILURES = "ReportBatchItemFailures"


class DeployedFunctionError(RuntimeError):
    """The deployed function or its mapping cannot be run as deployed (the message says why)."""


@dataclass(frozen=True)
class FunctionLayer:
    """One of the function's layer versions, and its zip (checked against the endpoint's ``CodeSha256``)."""

    arn: str
    zip: bytes = field(repr=False)


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
    layers: Sequence[FunctionLayer] = ()

    def unpack(self, directory: Path) -> tuple[Path, list[Path]]:
        """Unpack the code (as ``/var/task``) and each layer (as ``/opt``) under ``directory``.

        Returns the code directory and the layers' ``python`` directories, in layer order.
        """
        code_dir = directory / "task"
        _extract(self.code_zip, code_dir)
        layer_dirs = []
        for index, layer in enumerate(self.layers):
            layer_dir = directory / f"layer-{index}"
            _extract(layer.zip, layer_dir)
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
    #: ``MaximumBatchingWindowInSeconds``: how long a batch may gather before the function is invoked.
    batching_window_seconds: int = 0

    @property
    def fifo(self) -> bool:
        return self.queue_arn.endswith(".fifo")

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
    """The zip (code or layer), from the bucket that holds the key moto names in its location."""
    key = urlparse(location).path.lstrip("/")
    s3 = endpoint.client("s3")
    for bucket in s3.list_buckets().get("Buckets", []):
        try:
            body: bytes = s3.get_object(Bucket=bucket["Name"], Key=key)["Body"].read()
        except s3.exceptions.NoSuchKey:
            continue
        if _b64_sha256(body) == code_sha256:
            return body
    raise DeployedFunctionError(
        f"no bucket on the endpoint holds {key!r} with its CodeSha256 (the function's code or layer)"
    )


def _template_layers(endpoint: Endpoint, stack_name: str, template: Mapping[str, Any], logical_id: str) -> list[str]:
    """The ``Layers`` of the function's resource in the deployed template, ``Ref``s resolved."""
    layers = template["Resources"][logical_id].get("Properties", {}).get("Layers", [])
    references = {**_stack_layer_versions(endpoint, stack_name), **_stack_parameters(endpoint, stack_name)}
    return [_resolve(layer, references) for layer in layers]


def _stack_layer_versions(endpoint: Endpoint, stack_name: str) -> dict[str, str]:
    """The stack's own layer versions: logical id -> physical id (the version ARN)."""
    cloudformation = endpoint.client("cloudformation")
    return {
        summary["LogicalResourceId"]: str(summary.get("PhysicalResourceId", ""))
        for page in cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack_name)
        for summary in page["StackResourceSummaries"]
        if summary.get("ResourceType") == "AWS::Lambda::LayerVersion"
    }


def _function_resource(endpoint: Endpoint, function_name: str) -> tuple[str, str] | None:
    """(stack name, logical id) of the stack resource that created the function, or None."""
    cloudformation = endpoint.client("cloudformation")
    for stacks in cloudformation.get_paginator("describe_stacks").paginate():
        for stack in stacks["Stacks"]:
            for page in cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack["StackName"]):
                for summary in page["StackResourceSummaries"]:
                    if (
                        summary.get("ResourceType") == "AWS::Lambda::Function"
                        and summary.get("PhysicalResourceId") == function_name
                    ):
                        return stack["StackName"], summary["LogicalResourceId"]
    return None


def _stack_parameters(endpoint: Endpoint, stack_name: str) -> dict[str, str]:
    """The stack's parameter values as deployed (an SSM parameter type: the value read from SSM)."""
    stack = endpoint.client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"][0]
    # AWS puts an SSM parameter's value in ResolvedValue; moto puts it in ParameterValue.
    return {
        parameter["ParameterKey"]: str(parameter.get("ResolvedValue", parameter.get("ParameterValue", "")))
        for parameter in stack.get("Parameters", [])
    }


def _resolve(layer: Any, references: Mapping[str, str]) -> str:
    """A layer entry of the template: an ARN, or ``{"Ref": <stack parameter or layer version of the stack>}``."""
    if isinstance(layer, dict) and set(layer) == {"Ref"} and references.get(layer["Ref"]):
        return references[layer["Ref"]]
    if isinstance(layer, str):
        return layer
    raise DeployedFunctionError(
        f"the function's layer {layer!r} is neither an ARN, nor a stack parameter, nor a layer version of its stack"
    )


def _layers(endpoint: Endpoint, arns: Sequence[str], published: Mapping[str, Layer]) -> list[FunctionLayer]:
    client = endpoint.client("lambda")
    layers = []
    for arn in arns:
        name, version = arn.split(":")[-2:]
        content = client.get_layer_version(LayerName=name, VersionNumber=int(version))["Content"]
        code_sha256 = str(content.get("CodeSha256", ""))
        layer = published.get(arn)
        if layer is not None:
            data = layer.zip_path.read_bytes()
            if code_sha256 != _b64_sha256(data):
                raise DeployedFunctionError(f"layer {arn} on the endpoint is not the zip {layer.zip_path}")
        elif urlparse(str(content.get("Location", ""))).path.lstrip("/"):
            data = _code_zip(endpoint, str(content["Location"]), code_sha256)
        else:
            raise DeployedFunctionError(
                f"the function uses layer {arn}, which the sandbox did not publish and whose content the "
                "endpoint has no S3 location for"
            )
        layers.append(FunctionLayer(arn=arn, zip=data))
    return layers


#: The consumer's and the reconciler's entry points (contract with ``lambdas/order_consumer/``;
#: ``idempotent_order_pipeline.asset.HANDLER`` is the consumer's too, but imports the CDK).
CONSUMER_HANDLER = names.CONSUMER_HANDLER
RECONCILER_HANDLER = names.RECONCILER_HANDLER


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


def read_function(endpoint: Endpoint, name: str, published: Mapping[str, Layer]) -> DeployedFunction:
    """Read the function ``name`` as the endpoint holds it, with its code and layers.

    The layers are the ones its stack's template names (moto's CloudFormation drops them from the
    function), or the function's own for a function created outside CloudFormation; each must be
    one of ``published`` (ARN -> layer), the layers whose zips the stand-in holds.
    """
    response = endpoint.client("lambda").get_function(FunctionName=name)
    config: dict[str, Any] = response["Configuration"]
    name = config["FunctionName"]
    resource = _function_resource(endpoint, name)
    if resource is None:
        layer_arns = [str(layer["Arn"]) for layer in config.get("Layers", [])]
    else:
        stack_name, logical_id = resource
        body = endpoint.client("cloudformation").get_template(StackName=stack_name)["TemplateBody"]
        template = body if isinstance(body, Mapping) else json.loads(body)
        layer_arns = _template_layers(endpoint, stack_name, template, logical_id)
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
        layers=_layers(endpoint, layer_arns, published),
    )


def describe_function(endpoint: Endpoint, deployment: Deployment, name: str | None = None) -> DeployedFunction:
    """Read the function named ``name`` (default: the stack's ``FunctionName`` output), with its code and layers."""
    published = {} if deployment.layer is None else {deployment.layer.arn: deployment.layer}
    return read_function(endpoint, name or deployment.output(names.FUNCTION_NAME_OUTPUT), published)


def queue_mapping(endpoint: Endpoint, mapping: Mapping[str, Any]) -> QueueMapping:
    """An SQS event source mapping as ``ListEventSourceMappings`` returns it, with its queue's redrive."""
    queue_arn = str(mapping["EventSourceArn"])
    sqs = endpoint.client("sqs")
    account, queue_name = queue_arn.split(":")[4:6]
    queue_url = sqs.get_queue_url(QueueName=queue_name, QueueOwnerAWSAccountId=account)["QueueUrl"]
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["RedrivePolicy"]).get("Attributes", {})
    redrive: dict[str, Any] = json.loads(attributes["RedrivePolicy"]) if attributes.get("RedrivePolicy") else {}
    return QueueMapping(
        uuid=str(mapping["UUID"]),
        queue_arn=queue_arn,
        queue_url=queue_url,
        batch_size=int(mapping.get("BatchSize") or 10),
        function_response_types=tuple(mapping.get("FunctionResponseTypes") or ()),
        max_receive_count=int(redrive["maxReceiveCount"]) if "maxReceiveCount" in redrive else None,
        dead_letter_queue_arn=redrive.get("deadLetterTargetArn"),
        batching_window_seconds=int(mapping.get("MaximumBatchingWindowInSeconds") or 0),
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
