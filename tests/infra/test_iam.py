"""Least privilege: the function's policy, written out, and the grant methods."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam, aws_sns_subscriptions, aws_sqs
from aws_cdk.assertions import Match, Template

from idempotent_order_pipeline import IdempotentOrderPipeline
from idempotent_order_pipeline.construct import VPC_NETWORK_INTERFACE_ACTIONS
from tests.infra.synth import Synthesized, customer_managed_key_and_alarm_topic, logical_id, resources_of_type


def ref(synthesized: Synthesized, construct: Any) -> str:
    return logical_id(synthesized.stack, construct)


def function_statements(synthesized: Synthesized) -> list[dict[str, Any]]:
    """Every statement of every policy attached to the function's role."""
    role_id = ref(synthesized, synthesized.pipeline.function.role)
    statements: list[dict[str, Any]] = []
    for policy in resources_of_type(synthesized.template_json, "AWS::IAM::Policy").values():
        if {"Ref": role_id} in policy["Properties"]["Roles"]:
            statements.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return statements


def by_sid(statements: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {statement["Sid"]: statement for statement in statements if "Sid" in statement}


def as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else value


@pytest.mark.parametrize("configuration", ["default", "fifo", "cmk", "app-dev", "app-prod"])
def test_no_statement_has_a_wildcard_action(all_configurations: dict[str, Synthesized], configuration: str) -> None:
    # GIVEN a synthesized configuration
    statements = function_statements(all_configurations[configuration])
    # WHEN every action of the function's policies is listed
    actions = [action for statement in statements for action in as_list(statement["Action"])]
    # THEN none is a wildcard, and every statement allows
    assert actions
    assert not [action for action in actions if "*" in action]
    assert {statement["Effect"] for statement in statements} == {"Allow"}


@pytest.mark.parametrize("configuration", ["default", "fifo", "cmk"])
def test_only_xray_uses_a_wildcard_resource(all_configurations: dict[str, Synthesized], configuration: str) -> None:
    # GIVEN a synthesized configuration
    synthesized = all_configurations[configuration]
    statements = function_statements(synthesized)
    # WHEN the statements on resource "*" are collected
    wildcard = [statement for statement in statements if "*" in as_list(statement["Resource"])]
    # THEN only X-Ray's (with tracing) and the VPC network interfaces' (with a VPC), which support
    # no resource-level permissions
    function = resources_of_type(synthesized.template_json, "AWS::Lambda::Function")
    (function_properties,) = (resource["Properties"] for resource in function.values())
    expected = []
    if "VpcConfig" in function_properties:
        expected.append(sorted(VPC_NETWORK_INTERFACE_ACTIONS))
    if function_properties.get("TracingConfig") == {"Mode": "Active"}:
        expected.append(["xray:PutTelemetryRecords", "xray:PutTraceSegments"])
    assert sorted(sorted(as_list(statement["Action"])) for statement in wildcard) == sorted(expected)


def test_handler_statements_name_exact_actions_and_resources(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline
    pipeline = default_pipeline.pipeline
    processed = ref(default_pipeline, pipeline.processed_events_table)
    orders = ref(default_pipeline, pipeline.order_records_table)
    topic = ref(default_pipeline, pipeline.topic)
    dlq = ref(default_pipeline, pipeline.dead_letter_queue)
    log_group = ref(default_pipeline, pipeline.node.find_child("FunctionLogGroup"))
    # WHEN the named statements are read
    statements = by_sid(function_statements(default_pipeline))
    # THEN each handler call is allowed on exactly its resource, PutItem only inside a transaction
    assert statements == {
        "WriteOwnLogs": {
            "Sid": "WriteOwnLogs",
            "Effect": "Allow",
            "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
            "Resource": {"Fn::GetAtt": [log_group, "Arn"]},
        },
        "RecordEachOrderOnceInATransaction": {
            "Sid": "RecordEachOrderOnceInATransaction",
            "Effect": "Allow",
            "Action": "dynamodb:PutItem",
            "Resource": [{"Fn::GetAtt": [processed, "Arn"]}, {"Fn::GetAtt": [orders, "Arn"]}],
            "Condition": {"ForAnyValue:StringEquals": {"dynamodb:EnclosingOperation": ["TransactWriteItems"]}},
        },
        "MarkEventsSent": {
            "Sid": "MarkEventsSent",
            "Effect": "Allow",
            "Action": "dynamodb:UpdateItem",
            "Resource": {"Fn::GetAtt": [processed, "Arn"]},
        },
        "PublishNotifications": {
            "Sid": "PublishNotifications",
            "Effect": "Allow",
            "Action": "sns:Publish",
            "Resource": {"Ref": topic},
        },
        "ParkPermanentFailures": {
            "Sid": "ParkPermanentFailures",
            "Effect": "Allow",
            "Action": "sqs:SendMessage",
            "Resource": {"Fn::GetAtt": [dlq, "Arn"]},
        },
    }


def test_event_source_may_only_consume_the_source_queue(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline
    queue = ref(default_pipeline, default_pipeline.pipeline.queue)
    # WHEN the SQS statements are collected
    sqs_statements = [
        statement
        for statement in function_statements(default_pipeline)
        if any(action.startswith("sqs:") for action in as_list(statement["Action"]))
        and statement.get("Sid") != "ParkPermanentFailures"
    ]
    # THEN the event source's consume actions apply to the source queue only
    assert sqs_statements == [
        {
            "Effect": "Allow",
            "Action": [
                "sqs:ReceiveMessage",
                "sqs:ChangeMessageVisibility",
                "sqs:GetQueueUrl",
                "sqs:DeleteMessage",
                "sqs:GetQueueAttributes",
            ],
            "Resource": {"Fn::GetAtt": [queue, "Arn"]},
        }
    ]


def test_no_kms_permission_without_a_customer_managed_key(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline (SQS-managed and AWS managed keys)
    statements = function_statements(default_pipeline)
    # WHEN KMS actions are looked for
    # THEN there are none: those keys need no grant
    assert not [s for s in statements if any(a.startswith("kms:") for a in as_list(s["Action"]))]


def test_customer_managed_key_is_usable_only_through_the_pipeline_services(cmk_pipeline: Synthesized) -> None:
    # GIVEN a pipeline with a customer managed key
    key = logical_id(cmk_pipeline.stack, cmk_pipeline.stack.node.find_child("PipelineKey"))
    statements = by_sid(function_statements(cmk_pipeline))
    # WHEN the key statement is read
    statement = statements["UseTheCustomerManagedKeyThroughThePipelineServices"]
    # THEN it names explicit operations on that key, via DynamoDB, SNS and SQS in this region only
    assert statement["Action"] == ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"]
    assert statement["Resource"] == {"Fn::GetAtt": [key, "Arn"]}
    services = statement["Condition"]["StringEquals"]["kms:ViaService"]
    assert [part["Fn::Join"][1][0] for part in services] == ["dynamodb.", "sns.", "sqs."]


def test_event_source_may_decrypt_the_encrypted_source_queue(cmk_pipeline: Synthesized) -> None:
    # GIVEN a pipeline with a customer managed key
    key = logical_id(cmk_pipeline.stack, cmk_pipeline.stack.node.find_child("PipelineKey"))
    # WHEN the unnamed (event source) statements are read
    # THEN one lets the poller decrypt messages with that key
    assert {"Effect": "Allow", "Action": "kms:Decrypt", "Resource": {"Fn::GetAtt": [key, "Arn"]}} in (
        function_statements(cmk_pipeline)
    )


@pytest.fixture(scope="module")
def granted() -> tuple[Template, dict[str, Any]]:
    """A CMK pipeline, a producer role granted send, and a subscriber role granted subscribe."""
    stack = cdk.Stack(cdk.App(), "GrantStack")
    pipeline = IdempotentOrderPipeline(stack, "Pipeline", **customer_managed_key_and_alarm_topic(stack))
    producer = aws_iam.Role(stack, "Producer", assumed_by=aws_iam.AccountRootPrincipal())
    subscriber = aws_iam.Role(stack, "Subscriber", assumed_by=aws_iam.AccountRootPrincipal())
    grants = {
        "send": pipeline.grant_send_orders(producer),
        "subscribe": pipeline.grant_subscribe(subscriber),
        "subscription": pipeline.add_subscription(
            aws_sns_subscriptions.SqsSubscription(aws_sqs.Queue(stack, "Inbox", enforce_ssl=True))
        ),
        "stack": stack,
        "pipeline": pipeline,
    }
    return Template.from_stack(stack), grants


def test_grant_send_orders_allows_sending_and_the_key(granted: tuple[Template, dict[str, Any]]) -> None:
    # GIVEN a producer granted send on a CMK pipeline
    template, grants = granted
    stack, pipeline = grants["stack"], grants["pipeline"]
    # WHEN the producer's policy is read
    # THEN it may send to the queue (only) and use the key to encrypt, and the grant reports success
    assert isinstance(grants["send"], aws_iam.Grant)
    assert grants["send"].success
    template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "Roles": [{"Ref": logical_id(stack, stack.node.find_child("Producer"))}],
            "PolicyDocument": {
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Action": ["sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"],
                        "Resource": {"Fn::GetAtt": [logical_id(stack, pipeline.queue), "Arn"]},
                    },
                    {
                        "Effect": "Allow",
                        "Action": ["kms:GenerateDataKey", "kms:Decrypt"],
                        "Resource": {"Fn::GetAtt": [Match.string_like_regexp("^PipelineKey"), "Arn"]},
                    },
                ]
            },
        },
    )


def test_grant_subscribe_allows_subscribing_to_the_topic(granted: tuple[Template, dict[str, Any]]) -> None:
    # GIVEN a subscriber role granted subscribe
    template, grants = granted
    stack, pipeline = grants["stack"], grants["pipeline"]
    # WHEN its policy is read
    # THEN it may subscribe to the notifications topic, nothing else
    assert isinstance(grants["subscribe"], aws_iam.Grant)
    template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "Roles": [{"Ref": logical_id(stack, stack.node.find_child("Subscriber"))}],
            "PolicyDocument": {
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Action": "sns:Subscribe",
                        "Resource": {"Ref": logical_id(stack, pipeline.topic)},
                    }
                ]
            },
        },
    )


def test_add_subscription_subscribes_the_endpoint(granted: tuple[Template, dict[str, Any]]) -> None:
    # GIVEN a queue subscribed through add_subscription
    template, grants = granted
    stack, pipeline = grants["stack"], grants["pipeline"]
    # WHEN the subscriptions are read
    # THEN the queue receives the topic's notifications
    template.has_resource_properties(
        "AWS::SNS::Subscription",
        {
            "Protocol": "sqs",
            "TopicArn": {"Ref": logical_id(stack, pipeline.topic)},
            "Endpoint": {"Fn::GetAtt": [Match.string_like_regexp("^Inbox"), "Arn"]},
        },
    )
