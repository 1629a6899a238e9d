"""A moto world for the operator tooling: the consumer's harness world plus the source queue and a stack.

:class:`OpsWorld` extends the consumer tests' :class:`~tests.consumer.harness.World` (tables, topic,
DLQ, subscriber queue, the handler wired to them) with what operators touch: the pipeline's source
queue (created by a CloudFormation stack, with the DLQ as its redrive target) and the stack's
outputs, so that the CLI finds everything by ``--stack`` as it does against a real deployment.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from click.testing import CliRunner, Result
from moto import mock_aws
from moto.sqs.models import SQSBackend

from idempotent_order_pipeline._lambda_asset.order_consumer import handler as handler_module
from idempotent_order_pipeline.cli import cli
from idempotent_order_pipeline.cli.aws import AwsClients
from tests.consumer.harness import World
from tests.reconciler.harness import add_pending_index

STACK = "dev-OrderPipeline"
MAX_RECEIVE_COUNT = 3


def lambda_attribute(value: Mapping[str, Any]) -> dict[str, Any]:
    """A ReceiveMessage attribute in the Lambda event shape."""
    if str(value["DataType"]).startswith("Binary"):
        return {"dataType": value["DataType"], "binaryValue": base64.b64encode(value["BinaryValue"]).decode()}
    return {"dataType": value["DataType"], "stringValue": value["StringValue"]}


def lambda_record(message: Mapping[str, Any], queue_arn: str) -> dict[str, Any]:
    """A received SQS message in the Lambda event shape."""
    system = message.get("Attributes", {})
    attributes = {"ApproximateReceiveCount": system.get("ApproximateReceiveCount", "1")}
    if "MessageGroupId" in system:
        attributes["MessageGroupId"] = system["MessageGroupId"]
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": attributes,
        "messageAttributes": {
            name: lambda_attribute(value) for name, value in message.get("MessageAttributes", {}).items()
        },
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
    }


@dataclass
class OpsWorld(World):
    """The consumer's world plus the source queue, created by a stack whose outputs name everything."""

    stack_outputs: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        # The construct's pending index (the CLI's `pending` reads it).
        add_pending_index(self.dynamodb, self.events_table)
        suffix = ".fifo" if self.fifo else ""
        self.cloudformation = boto3.client("cloudformation")
        dlq_arn = self.queue_arn(self.dlq_url)
        queue_properties: dict[str, Any] = {
            "QueueName": "orders" + suffix,
            "RedrivePolicy": {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": MAX_RECEIVE_COUNT},
        }
        if self.fifo:
            queue_properties["FifoQueue"] = True
        template = {
            "Resources": {"Queue": {"Type": "AWS::SQS::Queue", "Properties": queue_properties}},
            "Outputs": {
                "QueueUrl": {"Value": {"Ref": "Queue"}},
                "DeadLetterQueueUrl": {"Value": self.dlq_url},
                "ProcessedEventsTableName": {"Value": "processed-events"},
                "OrderRecordsTableName": {"Value": "order-records"},
                "TopicArn": {"Value": self.topic_arn},
                "FunctionName": {"Value": "order-consumer"},
                **{key: {"Value": value} for key, value in self.stack_outputs.items()},
            },
        }
        self.cloudformation.create_stack(StackName=STACK, TemplateBody=json.dumps(template))
        outputs = self.cloudformation.describe_stacks(StackName=STACK)["Stacks"][0]["Outputs"]
        self.queue_url = next(o["OutputValue"] for o in outputs if o["OutputKey"] == "QueueUrl")

    def queue_arn(self, queue_url: str) -> str:
        attributes = self.sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])
        return attributes["Attributes"]["QueueArn"]

    # --- the CLI ----------------------------------------------------------------------------------

    def run(self, *args: str, input: str | None = None, sqs: Any = None, dynamodb: Any = None) -> Result:
        """Run ``order-pipeline --stack dev-OrderPipeline ARGS``; ``sqs``/``dynamodb`` replace clients."""
        overrides = {name: client for name, client in (("sqs", sqs), ("dynamodb", dynamodb)) if client is not None}
        return CliRunner().invoke(cli, ["--stack", STACK, *args], input=input, obj=AwsClients(overrides=overrides))

    # --- queues -----------------------------------------------------------------------------------

    def receive_all(self, queue_url: str, *, delete: bool = True) -> list[dict[str, Any]]:
        """Every visible message (with attributes); deleted unless ``delete`` is False (then hidden)."""
        messages: list[dict[str, Any]] = []
        while True:
            batch = self.sqs.receive_message(
                QueueUrl=queue_url,
                MaxNumberOfMessages=10,
                MessageAttributeNames=["All"],
                MessageSystemAttributeNames=["All"],
                VisibilityTimeout=60,
            ).get("Messages", [])
            if not batch:
                return messages
            messages.extend(batch)
            if delete:
                self.sqs.delete_message_batch(
                    QueueUrl=queue_url,
                    Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)],
                )

    def visible_count(self, queue_url: str) -> int:
        """Messages a receive gets right now (they are hidden for a moment and released again)."""
        messages = self.receive_all(queue_url, delete=False)
        for start in range(0, len(messages), 10):
            self.sqs.change_message_visibility_batch(
                QueueUrl=queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
                    for i, m in enumerate(messages[start : start + 10])
                ],
            )
        return len(messages)

    def lambda_records(self, queue_url: str | None = None, *, delete: bool = True) -> list[dict[str, Any]]:
        """Take the queue's messages as the SQS event source hands them to the handler.

        ``delete=False`` leaves them in the queue, in flight, as a delivery does before the handler answers.
        """
        queue_url = queue_url or self.queue_url
        arn = self.queue_arn(queue_url)
        return [lambda_record(message, arn) for message in self.receive_all(queue_url, delete=delete)]

    def fail_until_dead_lettered(self) -> None:
        """Deliver the source queue's messages (to a consumer set up to fail) until SQS moves them to the DLQ."""
        for _ in range(MAX_RECEIVE_COUNT):
            records = self.lambda_records(delete=False)
            assert records, "the messages left the queue too early"
            assert self.failures(self.invoke(records)) == {record["messageId"] for record in records}
            for record in records:  # their visibility timeout runs out: visible again
                self.sqs.change_message_visibility(
                    QueueUrl=self.queue_url, ReceiptHandle=record["receiptHandle"], VisibilityTimeout=0
                )
        # The next receive finds them over maxReceiveCount: SQS's redrive policy moves them to the DLQ.
        assert self.receive_all(self.queue_url, delete=False) == []

    def consume(self) -> int:
        """Run the handler over everything in the source queue until it is all acknowledged."""
        records = self.lambda_records()
        if records:
            self.deliver_until_done(records)
        return len(records)

    def dead_letter(self, body: str | Mapping[str, Any], attributes: Mapping[str, Any] | None = None) -> None:
        """Put a message into the DLQ as SQS's redrive policy would: the original, no reason."""
        kwargs: dict[str, Any] = {}
        if self.fifo:
            kwargs = {"MessageGroupId": "g", "MessageDeduplicationId": uuid.uuid4().hex}
        self.sqs.send_message(
            QueueUrl=self.dlq_url,
            MessageBody=body if isinstance(body, str) else json.dumps(body),
            MessageAttributes=dict(attributes or {}),
            **kwargs,
        )


def _answer_empty_long_polls_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process moto answers a long poll of an empty queue at once instead of after its wait.

    A long poll waits for a message to arrive (moto waits on a condition its sends notify). In an ops
    world nothing can arrive while the CLI waits: the CLI and the test run in one thread, and every
    send is theirs. So the wait is only the clock (2 s per empty receive by default): answering at once
    gives the same answers. The wait time the CLI asks for is still what the request says.
    """
    receive = SQSBackend.receive_message

    def receive_without_waiting(
        self: SQSBackend, queue_name: str, count: int, wait_seconds_timeout: int, *args: Any, **kwargs: Any
    ) -> Any:
        return receive(self, queue_name, count, 0, *args, **kwargs)

    monkeypatch.setattr(SQSBackend, "receive_message", receive_without_waiting)


@pytest.fixture
def make_ops_world(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., OpsWorld]]:
    _answer_empty_long_polls_at_once(monkeypatch)
    with mock_aws():
        yield OpsWorld
    handler_module.configure()


@pytest.fixture
def ops(make_ops_world: Callable[..., OpsWorld]) -> OpsWorld:
    return make_ops_world()


class FakeSleep:
    """Records the delays a retry loop asks for instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


class PartialBatchSqs:
    """An SQS client whose SendMessageBatch fails chosen entries, as SQS reports partial failures.

    ``fail(call_number, entry)`` returns None to let the entry through to the real client, or
    ``(code, sender_fault)`` to answer it as failed without sending it.
    """

    def __init__(self, client: Any, fail: Callable[[int, Mapping[str, Any]], tuple[str, bool] | None]) -> None:
        self._client = client
        self._fail = fail
        self.batch_calls: list[list[str]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def send_message_batch(self, *, QueueUrl: str, Entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        self.batch_calls.append([entry["Id"] for entry in Entries])
        call = len(self.batch_calls)
        passing, failed = [], []
        for entry in Entries:
            verdict = self._fail(call, entry)
            if verdict is None:
                passing.append(entry)
            else:
                code, sender_fault = verdict
                failed.append({"Id": entry["Id"], "SenderFault": sender_fault, "Code": code, "Message": "injected"})
        response: dict[str, Any] = {"Successful": [], "Failed": failed}
        if passing:
            real = self._client.send_message_batch(QueueUrl=QueueUrl, Entries=passing)
            response["Successful"] = real.get("Successful", [])
            response["Failed"] += real.get("Failed", [])
        return response
