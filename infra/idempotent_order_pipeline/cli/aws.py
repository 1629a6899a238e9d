"""AWS access for the CLI: one lazily built set of clients, the stack, and the pipeline in it.

Which resources a command works on (:class:`PipelineResources`), first found first:

1. an explicit option (``--queue-url``, ``--dead-letter-queue-url``, ``--processed-events-table``,
   ``--order-records-table``, ``--topic-arn``);
2. the pipeline discovered in the stack (:mod:`idempotent_order_pipeline.discovery`: the template's
   resource metadata, the stack's physical ids), picked by ``--pipeline`` when there are several;
3. for a stack deployed before the construct marked its resources: ``app.py``'s stack outputs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from idempotent_order_pipeline._lambda_asset.order_consumer.contract import names
from idempotent_order_pipeline.cli.errors import (
    AmbiguousPipelineError,
    OperationsError,
    PipelineNotFoundError,
    StackNotFoundError,
    StackOutputMissingError,
    describe,
)
from idempotent_order_pipeline.discovery import ROLES, DiscoveredPipeline, pipelines_in, select
from idempotent_order_pipeline.keys import DEFAULT_IDENTITY_FIELDS, parse_identity_fields

if TYPE_CHECKING:
    from mypy_boto3_cloudformation.client import CloudFormationClient
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_lambda.client import LambdaClient
    from mypy_boto3_sns.client import SNSClient
    from mypy_boto3_sqs.client import SQSClient

#: The stack ``cdk deploy 'dev/*'`` creates (stage ``dev``, stack ``OrderPipeline``).
DEFAULT_STACK = "dev-OrderPipeline"
STACK_ENVIRONMENT_VARIABLE = "ORDER_PIPELINE_STACK"
#: The outputs of a stack deployed before discovery, by role (the fallback of step 3 above); the
#: names are a contract with app.py and the sandbox.
LEGACY_OUTPUTS: Mapping[str, str] = {
    "queue": names.QUEUE_URL_OUTPUT,
    "dead_letter_queue": names.DEAD_LETTER_QUEUE_URL_OUTPUT,
    "processed_events_table": names.PROCESSED_EVENTS_TABLE_OUTPUT,
    "order_records_table": names.ORDER_RECORDS_TABLE_OUTPUT,
    "topic": names.TOPIC_ARN_OUTPUT,
    "function": names.FUNCTION_NAME_OUTPUT,
}
#: The function's environment variable that names each handed-in resource (the queue comes from
#: the function's event source mapping instead).
FUNCTION_VARIABLES: Mapping[str, str] = {
    "dead_letter_queue": names.DEAD_LETTER_QUEUE_URL_VARIABLE,
    "processed_events_table": names.PROCESSED_EVENTS_TABLE_VARIABLE,
    "order_records_table": names.ORDER_RECORDS_TABLE_VARIABLE,
    "topic": names.TOPIC_ARN_VARIABLE,
}

#: The option that overrides each role (``function`` has none: it is only read for IDENTITY_FIELDS).
OVERRIDE_OPTIONS: Mapping[str, str] = {
    "queue": "--queue-url",
    "dead_letter_queue": "--dead-letter-queue-url",
    "processed_events_table": "--processed-events-table",
    "order_records_table": "--order-records-table",
    "topic": "--topic-arn",
}
#: Throttling and 5xx errors are retried inside each call; long reads allowed for long polling.
CLIENT_CONFIG = Config(retries={"mode": "standard", "max_attempts": 3}, connect_timeout=5, read_timeout=30)


class AwsClients:
    """The boto3 clients of one CLI run, each created at first use from one session.

    ``overrides`` replaces a service's client (tests inject moto-backed or fault-injecting ones).
    Without ``endpoint_url``, ``region`` and ``profile``, boto3 reads the environment as usual
    (``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``AWS_PROFILE``, ...).
    """

    def __init__(
        self,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        profile: str | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> None:
        self.endpoint_url = endpoint_url
        self.region = region
        self.profile = profile
        self._clients: dict[str, Any] = dict(overrides or {})
        self._session: boto3.Session | None = None

    def _client(self, service: str) -> Any:
        if service not in self._clients:
            if self._session is None:
                self._session = boto3.Session(profile_name=self.profile, region_name=self.region)
            self._clients[service] = self._session.client(
                service,  # type: ignore[call-overload]
                endpoint_url=self.endpoint_url,
                config=CLIENT_CONFIG,
            )
        return self._clients[service]

    @property
    def sqs(self) -> SQSClient:
        return cast("SQSClient", self._client("sqs"))

    @property
    def sns(self) -> SNSClient:
        return cast("SNSClient", self._client("sns"))

    @property
    def dynamodb(self) -> DynamoDBClient:
        return cast("DynamoDBClient", self._client("dynamodb"))

    @property
    def cloudformation(self) -> CloudFormationClient:
        return cast("CloudFormationClient", self._client("cloudformation"))

    @property
    def lambda_(self) -> LambdaClient:
        return cast("LambdaClient", self._client("lambda"))

    def where(self) -> str:
        """Where the calls go, for error messages: the endpoint and region the client really uses
        (options, environment variables and profile resolved by boto3)."""
        meta = self.cloudformation.meta
        return f"endpoint {meta.endpoint_url}, region {meta.region_name}"


class Stack:
    """A deployed pipeline stack. Reads its outputs once, at first use."""

    def __init__(self, name: str, clients: AwsClients) -> None:
        self.name = name
        self.clients = clients
        self._outputs: dict[str, str] | None = None
        self._pipelines: list[DiscoveredPipeline] | None = None
        self._status = ""

    def _not_found(self, exc: ClientError) -> StackNotFoundError:
        message = exc.response.get("Error", {}).get("Message", "")
        if "does not exist" not in message:
            raise exc
        return StackNotFoundError(
            f"stack {self.name!r} not found ({self.clients.where()}): deploy it, or pass "
            f"--stack NAME (or set {STACK_ENVIRONMENT_VARIABLE})"
        )

    @property
    def outputs(self) -> dict[str, str]:
        """Every output of the stack by key.

        Raises:
            StackNotFoundError: no stack of that name here.
        """
        if self._outputs is None:
            try:
                stacks = self.clients.cloudformation.describe_stacks(StackName=self.name)["Stacks"]
            except ClientError as exc:
                raise self._not_found(exc) from exc
            self._status = stacks[0].get("StackStatus", "")
            self._outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
        return self._outputs

    def output(self, key: str) -> str:
        """The value of output ``key``.

        Raises:
            StackNotFoundError: no stack of that name here.
            StackOutputMissingError: the stack lacks the output (the message lists the ones it has).
        """
        outputs = self.outputs
        if key not in outputs:
            raise StackOutputMissingError(
                f"stack {self.name!r} ({self._status or 'status unknown'}) has no output {key!r}; it has "
                f"{', '.join(sorted(outputs)) or 'none'}. Is it an order pipeline stack, fully deployed?"
            )
        return outputs[key]

    def deployed_before_discovery(self) -> bool:
        """Whether the stack carries outputs of a pipeline stack deployed before 0.2.0 (``app.py``'s outputs)."""
        return bool(set(LEGACY_OUTPUTS.values()) & set(self.outputs))

    def no_pipeline(self) -> PipelineNotFoundError:
        """The error for a stack that holds no pipeline at all: neither marked resources nor 0.1.0's outputs."""
        from idempotent_order_pipeline.discovery import METADATA_KEY

        return PipelineNotFoundError(
            f"stack {self.name!r} holds no IdempotentOrderPipeline: none of its resources carries the construct's "
            f"'{METADATA_KEY}' metadata and it has none of the outputs a pipeline stack of 0.1.0 had; pass the "
            "stack that holds the pipeline as --stack NAME"
        )

    def pipelines(self) -> list[DiscoveredPipeline]:
        """Every ``IdempotentOrderPipeline`` of the stack: its template's marks, its physical ids.

        Raises:
            StackNotFoundError: no stack of that name here.
        """
        if self._pipelines is None:
            cloudformation = self.clients.cloudformation
            try:
                body: Any = cloudformation.get_template(StackName=self.name, TemplateStage="Original")["TemplateBody"]
                physical_ids: dict[str, str] = {}
                for page in cloudformation.get_paginator("list_stack_resources").paginate(StackName=self.name):
                    for summary in page["StackResourceSummaries"]:
                        if summary.get("PhysicalResourceId"):
                            physical_ids[summary["LogicalResourceId"]] = summary["PhysicalResourceId"]
            except ClientError as exc:
                raise self._not_found(exc) from exc
            # boto3 parses a JSON template body; a YAML one (not written by the CDK) stays text.
            template = json.loads(body) if isinstance(body, str) and body.lstrip().startswith("{") else body
            self._pipelines = pipelines_in(template if isinstance(template, Mapping) else {}, physical_ids)
        return self._pipelines


class PipelineResources:
    """The resources of the one pipeline a command works on (the module docstring says how it is found).

    Nothing is read from AWS until a command asks for a resource that no option gave.
    """

    def __init__(self, stack: Stack, *, selector: str | None = None, explicit: Mapping[str, str | None] | None = None):
        unknown = set(explicit or {}) - set(OVERRIDE_OPTIONS)
        if unknown:
            raise ValueError(f"explicit resources {sorted(unknown)}: allowed {sorted(OVERRIDE_OPTIONS)}")
        self.stack = stack
        self.selector = selector
        self.explicit = {role: value for role, value in (explicit or {}).items() if value}
        self._found: tuple[DiscoveredPipeline | None, str] | None = None

    def pipeline(self) -> DiscoveredPipeline | None:
        """The discovered pipeline, or None for a stack deployed before discovery (outputs used).

        Raises:
            StackNotFoundError: no stack of that name here.
            PipelineNotFoundError: ``--pipeline`` names none of the stack's pipelines.
            AmbiguousPipelineError: several pipelines and no (or no unique) ``--pipeline``.
        """
        if self._found is None:
            self._found = self._select()
        return self._found[0]

    def _select(self) -> tuple[DiscoveredPipeline | None, str]:
        pipelines = self.stack.pipelines()
        paths = ", ".join(p.path for p in pipelines) or "none"
        if self.selector is not None:
            chosen = select(pipelines, self.selector)
            if not chosen:
                raise PipelineNotFoundError(
                    f"stack {self.stack.name!r} has no pipeline {self.selector!r}; its pipelines: {paths}"
                )
        else:
            chosen = pipelines
            if not chosen:
                return None, "stack outputs"
        if len(chosen) > 1:
            raise AmbiguousPipelineError(
                f"stack {self.stack.name!r} holds {len(chosen)} pipelines"
                + (f" matching {self.selector!r}" if self.selector else "")
                + f": {', '.join(p.path for p in chosen)}; pick one with --pipeline PATH "
                "(its path in the stack, or its construct id when no other pipeline has it)"
            )
        return chosen[0], f"pipeline {chosen[0].path}"

    def get(self, role: str) -> str:
        """The physical id of ``role`` (a :data:`~idempotent_order_pipeline.discovery.ROLES` key).

        Raises:
            StackNotFoundError, PipelineNotFoundError, AmbiguousPipelineError: see :meth:`pipeline`.
            StackOutputMissingError: a stack without discovery metadata lacks the output.
        """
        if role not in ROLES:
            raise ValueError(f"role {role!r}: allowed {sorted(ROLES)}")
        if role in self.explicit:
            return self.explicit[role]
        pipeline = self.pipeline()
        if pipeline is None:
            if not self.stack.deployed_before_discovery():
                raise self.stack.no_pipeline()
            return self.stack.output(LEGACY_OUTPUTS[role])
        if role not in pipeline.logical_ids and role != "function":
            # Not created by the pipeline's stack (``existing_queue=...`` and the like): the
            # function's own configuration names it.
            return self._from_function(pipeline, role)
        if role not in pipeline.physical_ids:
            option = OVERRIDE_OPTIONS.get(role)
            raise PipelineNotFoundError(
                f"pipeline {pipeline.path} in stack {self.stack.name!r} has no deployed {role.replace('_', ' ')} "
                f"(logical id {pipeline.logical_ids.get(role, '?')}): is the stack fully deployed?"
                + (f" Or pass {option}." if option else "")
            )
        return pipeline.physical_ids[role]

    def _from_function(self, pipeline: DiscoveredPipeline, role: str) -> str:
        """A resource handed in to the pipeline, read from its function: the environment variable
        the handler reads, or the event source mapping for the queue."""
        function = self.get("function")
        lambda_ = self.stack.clients.lambda_
        option = OVERRIDE_OPTIONS.get(role, "")
        try:
            if role == "queue":
                mappings = lambda_.list_event_source_mappings(FunctionName=function)["EventSourceMappings"]
                arns = [m["EventSourceArn"] for m in mappings if ":sqs:" in m.get("EventSourceArn", "")]
                if len(arns) == 1:
                    *_, account, name = arns[0].split(":")
                    return self.stack.clients.sqs.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)[
                        "QueueUrl"
                    ]
            else:
                variables = lambda_.get_function_configuration(FunctionName=function).get("Environment", {})
                value = variables.get("Variables", {}).get(FUNCTION_VARIABLES[role])
                if value:
                    return value
        except (ClientError, BotoCoreError) as exc:
            raise PipelineNotFoundError(
                f"pipeline {pipeline.path}: its {role.replace('_', ' ')} was handed in, and reading it from "
                f"function {function} failed ({describe(exc)}); pass {option}"
            ) from exc
        raise PipelineNotFoundError(
            f"pipeline {pipeline.path}: its {role.replace('_', ' ')} was handed in and function {function} "
            f"does not name it; pass {option}"
        )

    @property
    def queue_url(self) -> str:
        return self.get("queue")

    @property
    def dead_letter_queue_url(self) -> str:
        return self.get("dead_letter_queue")

    @property
    def processed_events_table(self) -> str:
        return self.get("processed_events_table")

    @property
    def order_records_table(self) -> str:
        return self.get("order_records_table")

    @property
    def topic_arn(self) -> str:
        return self.get("topic")

    def order_schema(self) -> Mapping[str, Any] | None:
        """The pipeline's ``order_schema``, from its function's discovery mark in the deployed template.

        None when the pipeline has none, or when no pipeline is discovered (a stack deployed before
        discovery, or resources all given as options): the consumer still checks.
        """
        try:
            pipeline = self.pipeline()
        except OperationsError:
            if self.explicit:
                return None
            raise
        if pipeline is not None and pipeline.order_schema_problem is not None:
            raise PipelineNotFoundError(f"pipeline {pipeline.path}: {pipeline.order_schema_problem}")
        return None if pipeline is None else pipeline.order_schema

    def _function_variable(self, name: str) -> tuple[str | None, str]:
        """A variable of the consumer function's environment (None if unset) and the function's name.

        Raises:
            OperationsError, ClientError, BotoCoreError: the function cannot be found or read.
        """
        function = self.get("function")
        configuration = self.stack.clients.lambda_.get_function_configuration(FunctionName=function)
        return configuration.get("Environment", {}).get("Variables", {}).get(name), function

    def record_ttl_seconds(self) -> tuple[int, str]:
        """The consumer function's ``RECORD_TTL_SECONDS`` (the pipeline's ``record_retention``) and where it
        came from; the default when the function cannot be read or has none (the consumer's own default then)."""
        try:
            value, function = self._function_variable(names.RECORD_TTL_SECONDS_VARIABLE)
            if value is not None and value.isdigit() and int(value) > 0:
                return int(value), f"{names.RECORD_TTL_SECONDS_VARIABLE} of function {function}"
        except (OperationsError, ClientError, BotoCoreError):
            pass
        return (
            names.DEFAULT_RECORD_TTL_SECONDS,
            f"the default: the function's {names.RECORD_TTL_SECONDS_VARIABLE} unread",
        )

    def identity_fields(self) -> tuple[tuple[str, ...], str]:
        """The consumer function's ``IDENTITY_FIELDS`` and where they came from.

        Falls back to the default (``order_id``) when the function cannot be read (no stack or
        function, no permission, an endpoint without Lambda): orders sent by the CLI carry their
        ``event_id`` in the body, which the consumer uses first, so the fields only decide how a
        key is derived.
        """
        try:
            value, function = self._function_variable(names.IDENTITY_FIELDS_VARIABLE)
            return parse_identity_fields(value), f"function {function}"
        except (OperationsError, ClientError, BotoCoreError, ValueError):
            return DEFAULT_IDENTITY_FIELDS, "default"


def queue_arn(sqs: SQSClient, queue_url: str) -> str:
    """The ARN of a queue."""
    return sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def approximate_depth(sqs: SQSClient, queue_url: str) -> int:
    """SQS's approximate count of visible messages in a queue."""
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(attributes["Attributes"].get("ApproximateNumberOfMessages", 0))


def maximum_message_size(sqs: SQSClient, queue_url: str) -> int | None:
    """A queue's ``MaximumMessageSize`` in bytes (body and attributes, as SQS counts them); None if not said."""
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["MaximumMessageSize"])["Attributes"]
    value = attributes.get("MaximumMessageSize")
    return int(value) if value is not None else None
