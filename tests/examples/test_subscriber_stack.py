"""The subscriber example's CDK stack: subscribed with the pipeline's add_subscription, wired for once-per-event."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template

from tests.examples.conftest import SUBSCRIBER_EXAMPLE


@pytest.fixture(scope="module")
def template() -> Template:
    spec = importlib.util.spec_from_file_location("subscriber_example_stack", SUBSCRIBER_EXAMPLE / "stack.py")
    assert spec is not None
    assert spec.loader is not None
    module: Any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    stack = module.SubscriberStack(cdk.App(), "OrderSubscriberExample")
    return Template.from_stack(stack)


def test_the_queue_is_subscribed_to_the_pipelines_topic(template: Template) -> None:
    # GIVEN / WHEN the example stack is synthesized / THEN an SQS subscription on the pipeline's topic exists
    template.has_resource_properties(
        "AWS::SNS::Subscription",
        {"Protocol": "sqs", "TopicArn": {"Ref": Match.string_like_regexp("PipelineTopic")}},
    )


def test_the_function_reports_item_failures_and_knows_its_tables(template: Template) -> None:
    # GIVEN / WHEN the example stack is synthesized
    # THEN the subscriber's function reports partial batch failures and reads its dedup table and lease
    template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping", {"FunctionResponseTypes": ["ReportBatchItemFailures"], "BatchSize": 10}
    )
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Handler": "order_subscriber.handler.handler",
            "Timeout": 30,
            "Environment": {
                "Variables": {
                    "DEDUP_TABLE": Match.any_value(),
                    "SHIPMENTS_TABLE": Match.any_value(),
                    "LEASE_SECONDS": "30",
                }
            },
        },
    )
    template.has_resource_properties(
        "AWS::DynamoDB::Table", {"KeySchema": [{"AttributeName": "event_id", "KeyType": "HASH"}]}
    )


def test_the_visibility_timeout_outlasts_the_lease(template: Template) -> None:
    # GIVEN the example's own queue and function (not the pipeline's)
    [queue] = [
        found["Properties"]
        for logical, found in template.find_resources("AWS::SQS::Queue").items()
        if logical.startswith("SubscriberQueue")
    ]
    [function] = [
        found["Properties"]
        for logical, found in template.find_resources("AWS::Lambda::Function").items()
        if logical.startswith("SubscriberFunction")
    ]
    # WHEN the queue's visibility timeout is compared with the lease the function claims an event for
    lease_seconds = int(function["Environment"]["Variables"]["LEASE_SECONDS"])
    # THEN a message redelivered after a crash arrives when the crashed invocation's claim has expired
    assert queue["VisibilityTimeout"] > lease_seconds > 0
