"""AWS access for the CLI: one lazily built set of clients, and the pipeline stack's outputs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from idempotent_order_pipeline.cli.errors import StackNotFoundError, StackOutputMissingError
from idempotent_order_pipeline.keys import DEFAULT_IDENTITY_FIELDS, parse_identity_fields

if TYPE_CHECKING:
    from mypy_boto3_cloudformation.client import CloudFormationClient
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_lambda.client import LambdaClient
    from mypy_boto3_sqs.client import SQSClient

#: The stack ``cdk deploy 'dev/*'`` creates (stage ``dev``, stack ``OrderPipeline``).
DEFAULT_STACK = "dev-OrderPipeline"
STACK_ENVIRONMENT_VARIABLE = "ORDER_PIPELINE_STACK"
# Stack output keys: a contract with app.py (and the sandbox).
QUEUE_URL = "QueueUrl"
DEAD_LETTER_QUEUE_URL = "DeadLetterQueueUrl"
PROCESSED_EVENTS_TABLE = "ProcessedEventsTableName"
ORDER_RECORDS_TABLE = "OrderRecordsTableName"
FUNCTION_NAME = "FunctionName"
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
    def dynamodb(self) -> DynamoDBClient:
        return cast("DynamoDBClient", self._client("dynamodb"))

    @property
    def cloudformation(self) -> CloudFormationClient:
        return cast("CloudFormationClient", self._client("cloudformation"))

    @property
    def lambda_(self) -> LambdaClient:
        return cast("LambdaClient", self._client("lambda"))

    def where(self) -> str:
        """Where the calls go, for error messages."""
        return f"endpoint {self.endpoint_url or 'AWS'}, region {self.region or 'from the environment'}"


class Stack:
    """A deployed pipeline stack. Reads its outputs once, at first use."""

    def __init__(self, name: str, clients: AwsClients) -> None:
        self.name = name
        self._clients = clients
        self._outputs: dict[str, str] | None = None
        self._status = ""

    @property
    def outputs(self) -> dict[str, str]:
        """Every output of the stack by key.

        Raises:
            StackNotFoundError: no stack of that name here.
        """
        if self._outputs is None:
            try:
                stacks = self._clients.cloudformation.describe_stacks(StackName=self.name)["Stacks"]
            except ClientError as exc:
                message = exc.response.get("Error", {}).get("Message", "")
                if "does not exist" not in message:
                    raise
                raise StackNotFoundError(
                    f"stack {self.name!r} not found ({self._clients.where()}): deploy it, or pass "
                    f"--stack NAME (or set {STACK_ENVIRONMENT_VARIABLE})"
                ) from exc
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

    def identity_fields(self) -> tuple[tuple[str, ...], str]:
        """The consumer function's ``IDENTITY_FIELDS`` and where they came from.

        Falls back to the default (``order_id``) when the function cannot be read (no output, no
        permission, an endpoint without Lambda): orders sent by the CLI carry their ``event_id``
        in the body, which the consumer uses first, so the fields only decide how a key is derived.
        """
        try:
            function = self.output(FUNCTION_NAME)
            configuration = self._clients.lambda_.get_function_configuration(FunctionName=function)
            value = configuration.get("Environment", {}).get("Variables", {}).get("IDENTITY_FIELDS")
            return parse_identity_fields(value), f"function {function}"
        except (StackOutputMissingError, ClientError, BotoCoreError, ValueError):
            return DEFAULT_IDENTITY_FIELDS, "default"


def queue_arn(sqs: SQSClient, queue_url: str) -> str:
    """The ARN of a queue."""
    return sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def approximate_depth(sqs: SQSClient, queue_url: str) -> int:
    """SQS's approximate count of visible messages in a queue."""
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(attributes["Attributes"].get("ApproximateNumberOfMessages", 0))
