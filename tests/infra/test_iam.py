"""Least privilege: the function's policy, written out, and the grant methods."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam, aws_sns_subscriptions, aws_sqs
from aws_cdk.assertions import Match, Template

from idempotent_order_pipeline import IdempotentOrderPipeline, permissions
from idempotent_order_pipeline.permissions import VPC_DESCRIBE_ACTIONS
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


@pytest.mark.parametrize("configuration", ["default", "fifo", "cmk", "brownfield"])
def test_only_xray_uses_a_wildcard_resource(all_configurations: dict[str, Synthesized], configuration: str) -> None:
    # GIVEN a synthesized configuration
    synthesized = all_configurations[configuration]
    statements = function_statements(synthesized)
    # WHEN the statements on resource "*" are collected
    wildcard = [statement for statement in statements if "*" in as_list(statement["Resource"])]
    # THEN only X-Ray's (with tracing) and the EC2 Describe calls' (with a VPC), which support no
    # resource-level permissions
    function_id = ref(synthesized, synthesized.pipeline.function)
    function_properties = synthesized.template_json["Resources"][function_id]["Properties"]
    expected = []
    if "VpcConfig" in function_properties:
        expected.append(sorted(VPC_DESCRIBE_ACTIONS))
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
    # THEN each handler call is allowed on exactly its resource, PutItem only inside a transaction,
    # PartiQLUpdate (the marks) and UpdateItem only on the attributes they name (contract/names.py) and the keys
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
            "Action": "dynamodb:PartiQLUpdate",
            "Resource": {"Fn::GetAtt": [processed, "Arn"]},
            "Condition": {
                "ForAllValues:StringEquals": {
                    "dynamodb:Attributes": [
                        "event_id",
                        "status",
                        "payload_sha256",
                        "sent_at",
                        "ttl",
                        "pending_shard",
                        "created_at",
                    ]
                },
                "StringEqualsIfExists": {"dynamodb:ReturnValues": ["NONE", "ALL_OLD"]},
            },
        },
        "AdoptEarlierPendingRecords": {
            "Sid": "AdoptEarlierPendingRecords",
            "Effect": "Allow",
            "Action": "dynamodb:UpdateItem",
            "Resource": {"Fn::GetAtt": [processed, "Arn"]},
            "Condition": {
                "ForAllValues:StringEquals": {
                    "dynamodb:Attributes": [
                        "event_id",
                        "status",
                        "payload_sha256",
                        "ttl",
                        "pending_shard",
                        "created_at",
                    ]
                },
                "StringEqualsIfExists": {"dynamodb:ReturnValues": ["NONE", "ALL_OLD"]},
            },
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
    # THEN there are none among the function's statements: those keys need no grant
    assert statements
    assert not [s for s in statements if any(a.startswith("kms:") for a in as_list(s["Action"]))]


def test_customer_managed_key_is_usable_only_through_the_pipeline_services(cmk_pipeline: Synthesized) -> None:
    # GIVEN a pipeline with a customer managed key
    key = logical_id(cmk_pipeline.stack, cmk_pipeline.stack.node.find_child("PipelineKey"))
    statements = by_sid(function_statements(cmk_pipeline))
    # WHEN the DynamoDB and SNS key statement is read (SQS's, scoped to the queues, is in test_trust_boundaries)
    statement = statements["UseTheCustomerManagedKeyThroughDynamoDBAndSNS"]
    # THEN it names explicit operations on that key, via DynamoDB and SNS in this region only
    assert statement["Action"] == ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"]
    assert statement["Resource"] == {"Fn::GetAtt": [key, "Arn"]}
    services = statement["Condition"]["StringEquals"]["kms:ViaService"]
    assert [part["Fn::Join"][1][0] for part in services] == ["dynamodb.", "sns."]


def test_event_source_adds_no_key_statement(cmk_pipeline: Synthesized) -> None:
    # GIVEN a pipeline with a customer managed key
    # WHEN the unnamed (event source) statements are read
    unnamed = [statement for statement in function_statements(cmk_pipeline) if "Sid" not in statement]
    # THEN they hold the SQS consume actions and no KMS action: the poller decrypts through the role's
    # statement scoped to the queue (UseTheCustomerManagedKeyForThePipelineQueues), not an open kms:Decrypt
    assert unnamed
    assert [s for s in unnamed if any(action.startswith("kms:") for action in as_list(s["Action"]))] == []


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
    # THEN it may send to the queue (only) and use the key through SQS for that queue, and the grant
    # reports success
    assert isinstance(grants["send"], aws_iam.Grant)
    assert grants["send"].success
    queue = {"Fn::GetAtt": [logical_id(stack, pipeline.queue), "Arn"]}
    template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "Roles": [{"Ref": logical_id(stack, stack.node.find_child("Producer"))}],
            "PolicyDocument": {
                "Statement": [
                    {"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": queue},
                    {
                        "Effect": "Allow",
                        "Action": ["kms:GenerateDataKey", "kms:Decrypt"],
                        "Resource": {"Fn::GetAtt": [Match.string_like_regexp("^PipelineKey"), "Arn"]},
                        "Condition": {
                            "StringEquals": {
                                "kms:ViaService": Match.any_value(),
                                "kms:EncryptionContext:aws:sqs:arn": [queue],
                            }
                        },
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
    # THEN it may subscribe to the notifications topic, nothing else, and the grant reports success
    assert isinstance(grants["subscribe"], aws_iam.Grant)
    assert grants["subscribe"].success
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
                        "Condition": {"StringEquals": {"sns:Protocol": ["sqs", "lambda", "https"]}},
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


OTHER_ACCOUNT = "999999999999"
OTHER_ACCOUNT_ROOT = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":iam::{OTHER_ACCOUNT}:root"]]}
OTHER_ACCOUNT_ROLE = f"arn:aws:iam::{OTHER_ACCOUNT}:role/producer"


@pytest.fixture(scope="module")
def cross_account() -> tuple[Template, dict[str, Any]]:
    """A CMK pipeline granting send and subscribe to another account's root and to one of its roles."""
    stack = cdk.Stack(cdk.App(), "CrossAccountStack")
    pipeline = IdempotentOrderPipeline(stack, "Pipeline", **customer_managed_key_and_alarm_topic(stack))
    account = aws_iam.AccountPrincipal(OTHER_ACCOUNT)
    role = aws_iam.ArnPrincipal(OTHER_ACCOUNT_ROLE)
    grants = {
        "send": pipeline.grant_send_orders(account),
        "subscribe": pipeline.grant_subscribe(account),
        "send_role": pipeline.grant_send_orders(role),
        "stack": stack,
        "pipeline": pipeline,
    }
    return Template.from_stack(stack), grants


def policy_statements(template: Template, resource_type: str, document_key: str) -> list[dict[str, Any]]:
    """Every statement of every policy document of one resource type."""
    return [
        statement
        for resource in template.find_resources(resource_type).values()
        for statement in resource["Properties"][document_key]["Statement"]
    ]


def test_cross_account_send_grant_adds_a_queue_policy_statement(cross_account: tuple[Template, dict[str, Any]]) -> None:
    # GIVEN another account granted send on a CMK pipeline
    template, grants = cross_account
    queue = logical_id(grants["stack"], grants["pipeline"].queue)
    # WHEN the queue policy is read
    statements = policy_statements(template, "AWS::SQS::QueuePolicy", "PolicyDocument")
    # THEN the grant took effect through the resource policy: the queue policy names that account
    assert grants["send"].success
    grants["send"].assert_success()
    assert {
        "Effect": "Allow",
        "Action": "sqs:SendMessage",
        "Principal": {"AWS": OTHER_ACCOUNT_ROOT},
        "Resource": {"Fn::GetAtt": [queue, "Arn"]},
    } in statements


def test_cross_account_send_grant_adds_a_key_policy_statement(cross_account: tuple[Template, dict[str, Any]]) -> None:
    # GIVEN another account and a role of it granted send on a CMK pipeline
    template, _ = cross_account
    # WHEN the key policy is read
    statements = policy_statements(template, "AWS::KMS::Key", "KeyPolicy")
    # THEN the key lets each encrypt (GenerateDataKey) and decrypt, named in the key policy, only
    # through SQS (the exact conditions: test_trust_boundaries)
    for principal in (OTHER_ACCOUNT_ROOT, OTHER_ACCOUNT_ROLE):
        [statement] = [s for s in statements if s.get("Principal") == {"AWS": principal}]
        assert statement["Action"] == ["kms:GenerateDataKey", "kms:Decrypt"]
        assert set(statement["Condition"]) == {"StringEquals", "ArnLike"}


def test_cross_account_role_is_named_in_the_queue_policy(cross_account: tuple[Template, dict[str, Any]]) -> None:
    # GIVEN a role of another account (by ARN) granted send
    template, grants = cross_account
    # WHEN the queue policy is read
    statements = policy_statements(template, "AWS::SQS::QueuePolicy", "PolicyDocument")
    # THEN the queue policy names exactly that role, and the grant reports success
    assert grants["send_role"].success
    assert [s["Principal"] for s in statements if s["Effect"] == "Allow"] == [
        {"AWS": OTHER_ACCOUNT_ROOT},
        {"AWS": OTHER_ACCOUNT_ROLE},
    ]


def test_cross_account_subscribe_grant_adds_a_topic_policy_statement(
    cross_account: tuple[Template, dict[str, Any]],
) -> None:
    # GIVEN another account granted subscribe
    template, grants = cross_account
    topic = logical_id(grants["stack"], grants["pipeline"].topic)
    # WHEN the topic policy is read
    statements = policy_statements(template, "AWS::SNS::TopicPolicy", "PolicyDocument")
    # THEN the topic policy lets that account subscribe, and the grant reports success
    assert grants["subscribe"].success
    allows = [s for s in statements if s["Effect"] == "Allow"]
    assert [{key: value for key, value in s.items() if key != "Sid"} for s in allows] == [
        {
            "Effect": "Allow",
            "Action": "sns:Subscribe",
            "Principal": {"AWS": OTHER_ACCOUNT_ROOT},
            "Resource": {"Ref": topic},
            "Condition": {"StringEquals": {"sns:Protocol": ["sqs", "lambda", "https"]}},
        }
    ]


def test_cross_account_grants_add_no_identity_policy(cross_account: tuple[Template, dict[str, Any]]) -> None:
    # GIVEN grants to principals of another account only
    template, grants = cross_account
    pipeline = grants["pipeline"]
    role_ids = [logical_id(grants["stack"], pipeline.function.role)]
    if pipeline.reconciliation is not None:
        role_ids.append(logical_id(grants["stack"], pipeline.reconciliation.function.role))
    # WHEN the identity policies are listed
    policies = template.find_resources("AWS::IAM::Policy")
    # THEN the only ones are the pipeline's own functions': nothing was written into this account for the grantee
    assert sorted(policy["Properties"]["Roles"][0]["Ref"] for policy in policies.values()) == sorted(role_ids)


def test_same_account_grants_add_no_resource_policy(granted: tuple[Template, dict[str, Any]]) -> None:
    # GIVEN roles of the pipeline's own account granted send and subscribe
    template, grants = granted
    queue = {"Fn::GetAtt": [logical_id(grants["stack"], grants["pipeline"].queue), "Arn"]}
    # WHEN the queue, topic and key policies are read
    queue_effects = [
        s["Effect"]
        for s in policy_statements(template, "AWS::SQS::QueuePolicy", "PolicyDocument")
        if s["Resource"] == queue
    ]
    topic_effects = [s["Effect"] for s in policy_statements(template, "AWS::SNS::TopicPolicy", "PolicyDocument")]
    key_principals = [s["Principal"] for s in policy_statements(template, "AWS::KMS::Key", "KeyPolicy")]
    # THEN the identity policies suffice: the queue's and the topic's policies hold denials only (TLS),
    # and the key policy keeps only the account root and the CloudWatch service statement
    assert set(queue_effects) == {"Deny"}
    assert set(topic_effects) == {"Deny"}
    assert all("999999999999" not in str(principal) for principal in key_principals)
    assert {"Service": "cloudwatch.amazonaws.com"} in key_principals


def test_cross_account_grant_on_an_imported_queue_adds_no_policy() -> None:
    # GIVEN an imported queue of another account, whose policy this stack may not change
    stack = cdk.Stack(cdk.App(), "ImportStack")
    queue = aws_sqs.Queue.from_queue_arn(stack, "Imported", "arn:aws:sqs:eu-west-1:111111111111:orders")
    # WHEN a third account is granted send on it
    permissions.grant_send_orders(aws_iam.AccountPrincipal(OTHER_ACCOUNT), queue=queue, encryption_key=None)
    # THEN nothing is written (the queue's owner must add the statement, as the docstring says)
    template = Template.from_stack(stack)
    assert template.find_resources("AWS::SQS::QueuePolicy") == {}
    assert template.find_resources("AWS::IAM::Policy") == {}
