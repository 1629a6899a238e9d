"""The producer client and ``order-pipeline send`` refuse an order that breaks the deployed pipeline's schema."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from click.testing import CliRunner
from moto import mock_aws

from idempotent_order_pipeline.cli import cli
from idempotent_order_pipeline.cli.aws import AwsClients
from idempotent_order_pipeline.discovery import METADATA_KEY, ORDER_SCHEMA_KEY, ORDER_SCHEMA_SHA256_KEY
from idempotent_order_pipeline.errors import SchemaViolationError
from idempotent_order_pipeline.order_schema import schema_sha256, schema_text
from idempotent_order_pipeline.producer import OrderPublisher, deployed_order_schema
from tests.consumer.test_order_schema import ORDER_SCHEMA, good_order
from tests.ops.test_cli_discovery import STACK, pipeline_resources

#: What the consumer parks the same order with (tests/consumer/test_order_schema.py asserts it there).
CONSUMERS_MESSAGE = "the order does not match order_schema: $.amount must be bigger than or equal to 0 (rule: minimum)"


@pytest.fixture
def queue_url() -> Iterator[str]:
    """A stack with one pipeline whose function's discovery mark carries ORDER_SCHEMA (as the construct writes it)."""
    with mock_aws():
        boto3.client("iam").create_role(
            RoleName="consumer", AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []})
        )
        resources: dict[str, Any] = pipeline_resources("Orders", "Shop/Orders")
        text = schema_text(ORDER_SCHEMA)
        resources["OrdersFunction"]["Metadata"][METADATA_KEY].update(
            {ORDER_SCHEMA_KEY: text, ORDER_SCHEMA_SHA256_KEY: schema_sha256(text)}
        )
        cloudformation = boto3.client("cloudformation")
        cloudformation.create_stack(StackName=STACK, TemplateBody=json.dumps({"Resources": resources}))
        summaries = cloudformation.list_stack_resources(StackName=STACK)["StackResourceSummaries"]
        yield next(s["PhysicalResourceId"] for s in summaries if s["LogicalResourceId"] == "OrdersQueue")


def queued(queue_url: str) -> list[dict[str, Any]]:
    messages = boto3.client("sqs").receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get("Messages", [])
    return [json.loads(message["Body"]) for message in messages]


def test_send_refuses_a_violation_with_the_consumers_message_and_sends_nothing(queue_url: str) -> None:
    # GIVEN a file with a good order and one whose amount is negative, for the pipeline with the schema
    lines = json.dumps(good_order("o-1")) + "\n" + json.dumps(good_order("o-2", amount=-5)) + "\n"
    # WHEN it is sent with the CLI
    result = CliRunner().invoke(cli, ["--stack", STACK, "send", "-"], input=lines, obj=AwsClients())
    # THEN line 2 is refused with the consumer's code and message (path and rule), and nothing is sent
    assert result.exit_code == 1
    assert f"line 2: invalid: SCHEMA_VIOLATION: {CONSUMERS_MESSAGE}" in result.stderr
    assert queued(queue_url) == []


def test_send_with_on_invalid_skip_sends_the_orders_that_match(queue_url: str) -> None:
    # GIVEN the same file / WHEN sent with --on-invalid skip
    lines = json.dumps(good_order("o-1")) + "\n" + json.dumps(good_order("o-2", amount=-5)) + "\n"
    result = CliRunner().invoke(
        cli, ["--stack", STACK, "send", "-", "--on-invalid", "skip"], input=lines, obj=AwsClients()
    )
    # THEN only the order that matches the schema is queued
    assert result.exit_code == 0, result.output
    assert [body["order_id"] for body in queued(queue_url)] == ["o-1"]


def test_the_producer_client_refuses_a_violation_before_sending(queue_url: str) -> None:
    # GIVEN a publisher with the schema of the deployed pipeline, found in its stack
    schema = deployed_order_schema(STACK, pipeline="Orders")
    assert schema == ORDER_SCHEMA
    publisher = OrderPublisher(queue_url, client=boto3.client("sqs"), order_schema=schema)
    # WHEN a bad order is sent alone, and in a batch with a good one
    with pytest.raises(SchemaViolationError, match=r"^the order does not match order_schema: \$\.amount "):
        publisher.send(good_order("o-2", amount=-5))
    results = publisher.send_batch([good_order("o-1"), good_order("o-2", amount=-5)])
    # THEN the bad one is refused with SCHEMA_VIOLATION and the consumer's message; the good one is sent
    assert [(r.ok, r.error_code) for r in results] == [(True, None), (False, "SCHEMA_VIOLATION")]
    assert results[1].error == CONSUMERS_MESSAGE
    assert [body["order_id"] for body in queued(queue_url)] == ["o-1"]
