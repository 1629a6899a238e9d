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


def nested(depth: int) -> dict[str, Any]:
    """A schema ``depth`` objects deep, a string at the bottom."""
    schema: dict[str, Any] = {"type": "string", "maxLength": 3}
    for level in range(depth):
        schema = {"type": "object", "properties": {f"l{level}": schema}}
    return schema


#: What the CDK's bridge to Node used to change: nulls, integers over 2**53, a __proto__ key; plus
#: unicode and deep nesting.
TRICKY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["order_id"],
    "properties": {
        "order_id": {"type": "string"},
        "note": {"enum": ["gift", None]},
        "cleared": {"const": None},
        "big": {"type": "integer", "maximum": 2**53 + 1},
        "__proto__": {"type": "string"},
        "caf\u00e9": {"enum": ["cr\u00e8me", "\U0001f600"]},
        "deep": nested(40),
    },
}


@pytest.fixture(scope="module")
def tricky_mark() -> dict[str, Any]:
    """The function's discovery mark, as the construct synthesizes it for TRICKY_SCHEMA (through jsii)."""
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    from idempotent_order_pipeline import IdempotentOrderPipeline

    stack = cdk.Stack(cdk.App(), "Shop")
    IdempotentOrderPipeline(stack, "Orders", order_schema=TRICKY_SCHEMA)
    [mark] = [
        r["Metadata"][METADATA_KEY]
        for r in Template.from_stack(stack).to_json()["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
        and r.get("Metadata", {}).get(METADATA_KEY, {}).get("role") == "function"
    ]
    return dict(mark)


def deploy_mark(mark: dict[str, Any]) -> str:
    """A moto stack whose pipeline function carries ``mark``; returns its queue URL."""
    boto3.client("iam").create_role(
        RoleName="consumer", AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []})
    )
    resources: dict[str, Any] = pipeline_resources("Orders", "Orders")
    resources["OrdersFunction"]["Metadata"][METADATA_KEY] = mark
    cloudformation = boto3.client("cloudformation")
    cloudformation.create_stack(StackName=STACK, TemplateBody=json.dumps({"Resources": resources}))
    summaries = cloudformation.list_stack_resources(StackName=STACK)["StackResourceSummaries"]
    return next(s["PhysicalResourceId"] for s in summaries if s["LogicalResourceId"] == "OrdersQueue")


def test_the_producer_reads_back_the_consumers_schema_byte_for_byte(tricky_mark: dict[str, Any]) -> None:
    # GIVEN a stack deployed with a schema holding nulls, an integer over 2**53, a __proto__ key,
    # unicode and 40 levels of nesting (the construct synthesized it: the mark went through jsii)
    from idempotent_order_pipeline.order_schema import validator_code

    with mock_aws():
        queue_url = deploy_mark(tricky_mark)
        # WHEN the producer reads the schema back from the deployed template
        schema = deployed_order_schema(STACK, pipeline="Orders")
        # THEN it is the construct's schema, every null and digit kept, and compiles to the consumer's code
        assert schema == TRICKY_SCHEMA
        assert schema is not None
        assert tricky_mark[ORDER_SCHEMA_KEY] == schema_text(TRICKY_SCHEMA)
        assert validator_code(schema) == validator_code(TRICKY_SCHEMA)
        # AND the producer's verdicts are the consumer's: null allowed where the schema allows it, 2**53+2 refused
        publisher = OrderPublisher(queue_url, client=boto3.client("sqs"), order_schema=schema)
        results = publisher.send_batch(
            [
                {"order_id": "o-1", "note": None, "cleared": None, "big": 2**53 + 1, "caf\u00e9": "\U0001f600"},
                {"order_id": "o-2", "big": 2**53 + 2},
                {"order_id": "o-3", "cleared": {}},
            ]
        )
        assert [(r.ok, r.error_code) for r in results] == [
            (True, None),
            (False, "SCHEMA_VIOLATION"),
            (False, "SCHEMA_VIOLATION"),
        ]
        assert results[1].error is not None
        assert "$.big must be smaller than or equal to 9007199254740993" in results[1].error


def test_a_schema_that_does_not_match_its_hash_is_refused(tricky_mark: dict[str, Any]) -> None:
    # GIVEN a deployed mark whose schema text was changed after synth (its hash no longer matches)
    changed = {**tricky_mark, ORDER_SCHEMA_KEY: tricky_mark[ORDER_SCHEMA_KEY].replace("null", "1", 1)}
    with mock_aws():
        deploy_mark(changed)
        # WHEN the producer or the CLI reads it / THEN it is refused, saying why
        with pytest.raises(ValueError, match=r"does not match its order_schema_sha256"):
            deployed_order_schema(STACK, pipeline="Orders")
        result = CliRunner().invoke(
            cli, ["--stack", STACK, "send", "-"], input=json.dumps(good_order()) + "\n", obj=AwsClients()
        )
        assert result.exit_code == 1
        assert "does not match its order_schema_sha256" in result.stderr


def test_the_producer_checks_numbers_exactly_as_the_consumer_stores_them(queue_url: str) -> None:
    # GIVEN a publisher with a schema whose amount is at most 100 and whose quantity is an integer
    publisher = OrderPublisher(
        queue_url,
        client=boto3.client("sqs"),
        order_schema={"properties": {"amount": {"maximum": 100}, "quantity": {"type": "integer"}}},
    )
    # WHEN orders past a bound in their 20th digit are sent, beside ones at DynamoDB's 38 digits
    from decimal import Decimal

    results = publisher.send_batch(
        [
            {"order_id": "o-1", "amount": Decimal("100.0000000000000000001")},
            {"order_id": "o-2", "quantity": Decimal("1.0000000000000000001")},
            {"order_id": "o-3", "amount": Decimal("99.999999999999999999999999999999999999")},
            {"order_id": "o-4", "quantity": Decimal("12345678901234567890123456789012345678")},
        ]
    )
    # THEN the first two are refused, the others sent
    assert [r.ok for r in results] == [False, False, True, True]
    assert [body["order_id"] for body in queued(queue_url)] == ["o-3", "o-4"]
