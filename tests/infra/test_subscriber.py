"""``IdempotentSubscriber``'s template: queues, subscription, table, function with the layer, least privilege,
alarms, validation, cdk-nag and checkov with nothing unexplained, snapshots."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_dynamodb, aws_lambda, aws_sns
from aws_cdk.assertions import Match, Template
from cfnlint.api import ManualArgs, lint_file

from idempotent_order_pipeline import IdempotentOrderPipeline, IdempotentSubscriber
from idempotent_order_pipeline.core.props import describe_default
from idempotent_order_pipeline.powertools import LAYER_ARN_PARAMETER_ID
from idempotent_order_pipeline.subscriber import findings
from idempotent_order_pipeline.subscriber.construct import DEDUP_ACTIONS
from idempotent_order_pipeline.subscriber.layer import LAYER_ROOT
from idempotent_order_pipeline.subscriber.props import DEFAULTS, PROP_NAMES, SubscriberProps
from tests.infra.synth import REPO, Synthesized, synth_pipeline
from tests.infra.test_compliance import ACCEPTED_CFN_LINT_RULES, CHECKOV, LINT_REGIONS

CODE = aws_lambda.Code.from_inline("def handler(event, context):\n    return {}\n")
TOPIC_ARN = "arn:aws:sns:eu-west-1:123456789012:orders"
TEAM_LAYER_ARN = "arn:aws:lambda:eu-west-1:123456789012:layer:shipping-tools:3"
SUBSCRIBER_DOCS = REPO / "docs" / "subscriber.md"


def subscriber(stack: cdk.Stack, pipeline: IdempotentOrderPipeline) -> None:
    IdempotentSubscriber(
        stack,
        "Shipping",
        pipeline=pipeline,
        code=CODE,
        handler="shipping.handler",
        filter_policy={"country": aws_sns.SubscriptionFilter.string_filter(allowlist=["DE"])},
    )


@pytest.fixture(scope="module")
def with_pipeline(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """A pipeline sending ``country`` and a subscriber filtered on it, synthesized with cdk-nag as app.py runs it."""
    return synth_pipeline(tmp_path_factory.mktemp("subscriber"), after=subscriber, notification_attributes=["country"])


@pytest.fixture(scope="module")
def template(with_pipeline: Synthesized) -> Template:
    return with_pipeline.template


def on_topic(**props: Any) -> tuple[cdk.Stack, IdempotentSubscriber]:
    """A subscriber "Shipping" of an imported topic (``topic_arn``), with ``props`` over the required ones."""
    stack = cdk.Stack(cdk.App(), "Subscribers", env=cdk.Environment(account="123456789012", region="eu-west-1"))
    topic = aws_sns.Topic.from_topic_arn(stack, "Orders", props.pop("topic_arn", TOPIC_ARN))
    arguments = {"topic": topic, "code": CODE, "handler": "shipping.handler", **props}
    return stack, IdempotentSubscriber(stack, "Shipping", **arguments)


def test_the_queue_is_subscribed_raw_with_the_filter_and_a_redrive(template: Template) -> None:
    # GIVEN / WHEN a subscriber with a filter policy on a pipeline / THEN SNS delivers raw, filtered, with a DLQ
    template.has_resource_properties(
        "AWS::SNS::Subscription",
        {
            "Protocol": "sqs",
            "TopicArn": {"Ref": Match.string_like_regexp("PipelineTopic")},
            "RawMessageDelivery": True,
            "FilterPolicy": {"country": ["DE"]},
            "RedrivePolicy": {
                "deadLetterTargetArn": {"Fn::GetAtt": [Match.string_like_regexp("ShippingDeadLetter"), "Arn"]}
            },
        },
    )


def test_the_queues_are_encrypted_tls_only_and_redrive(template: Template) -> None:
    # GIVEN / WHEN synthesized / THEN SSE, a 14-day DLQ, a redrive after 5 receives, a visibility above the lease
    template.has_resource_properties(
        "AWS::SQS::Queue",
        {
            "SqsManagedSseEnabled": True,
            "VisibilityTimeout": 180,
            "RedrivePolicy": {"maxReceiveCount": 5, "deadLetterTargetArn": Match.any_value()},
        },
    )
    template.has_resource_properties(
        "AWS::SQS::Queue", {"SqsManagedSseEnabled": True, "MessageRetentionPeriod": 14 * 86400}
    )
    policies = [
        policy
        for name, policy in template.find_resources("AWS::SQS::QueuePolicy").items()
        if name.startswith("Shipping")
    ]
    assert len(policies) == 2
    for policy in policies:
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        assert {"Bool": {"aws:SecureTransport": "false"}} in [
            s.get("Condition") for s in statements if s["Effect"] == "Deny"
        ]


def test_the_dedup_table_is_on_demand_with_pitr_ttl_and_no_name(with_pipeline: Synthesized) -> None:
    # GIVEN the subscriber's table
    [table] = [
        r["Properties"]
        for n, r in with_pipeline.template_json["Resources"].items()
        if n.startswith("ShippingDedupTable")
    ]
    # WHEN its properties are read / THEN keyed on event_id, on demand, PITR, TTL, protected, no physical name
    assert table["KeySchema"] == [{"AttributeName": "event_id", "KeyType": "HASH"}]
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert table["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert table["TimeToLiveSpecification"] == {"AttributeName": "ttl", "Enabled": True}
    assert table["DeletionProtectionEnabled"] is True
    assert "TableName" not in table


def test_the_function_runs_the_teams_handler_with_the_layer_and_partial_batches(template: Template) -> None:
    # GIVEN / WHEN synthesized / THEN the team's handler, the helper's layer, its variables, partial batch responses
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Handler": "shipping.handler",
            "Runtime": "python3.14",
            "Layers": [
                {"Ref": Match.string_like_regexp("IdempotentSubscriberRuntimeLayer")},
                {"Ref": LAYER_ARN_PARAMETER_ID},
            ],
            "Environment": {
                "Variables": {
                    "POWERTOOLS_SERVICE_NAME": "TestStack-Shipping",
                    "ORDER_SUBSCRIBER_DEDUP_TABLE": {"Ref": Match.string_like_regexp("ShippingDedupTable")},
                    "ORDER_SUBSCRIBER_LEASE_SECONDS": "30",
                    "ORDER_SUBSCRIBER_RECORD_TTL_SECONDS": str(30 * 86400),
                }
            },
        },
    )
    template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "BatchSize": 10,
            "FunctionName": {"Ref": Match.string_like_regexp("ShippingFunction")},
        },
    )
    template.has_resource_properties(
        "AWS::Lambda::LayerVersion",
        {"CompatibleRuntimes": ["python3.11", "python3.12", "python3.13", "python3.14"]},
    )


def test_the_layer_holds_the_helper_package_under_python() -> None:
    # GIVEN the layer's asset root / WHEN listed / THEN python/idempotent_subscriber/, as Lambda's /opt/python expects
    assert (LAYER_ROOT / "python" / "idempotent_subscriber" / "__init__.py").is_file()
    assert sorted(p.name for p in LAYER_ROOT.iterdir() if p.name != "__pycache__") == ["python"]


def test_the_role_may_write_its_logs_and_its_dedup_table_only(with_pipeline: Synthesized) -> None:
    # GIVEN the subscriber's role policy
    resources = with_pipeline.template_json["Resources"]
    [policy] = [r for n, r in resources.items() if n.startswith("ShippingFunctionRoleDefaultPolicy")]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    [role] = [r for n, r in resources.items() if n.startswith("ShippingFunctionRole") and r["Type"] == "AWS::IAM::Role"]
    # WHEN its statements are read
    by_sid = {s.get("Sid"): s for s in statements}
    # THEN its log group, the helper's three calls on its table, and consuming its queue; nothing on '*'
    assert by_sid["ClaimAndMarkEvents"]["Action"] == list(DEDUP_ACTIONS)
    assert by_sid["ClaimAndMarkEvents"]["Resource"]["Fn::GetAtt"][0].startswith("ShippingDedupTable")
    assert by_sid["WriteOwnLogs"]["Resource"]["Fn::GetAtt"][0].startswith("ShippingFunctionLogGroup")
    assert statements
    assert all(s["Resource"] != "*" for s in statements)
    assert "ManagedPolicyArns" not in role["Properties"]


def test_grant_effect_writes_grants_the_transaction_actions_on_that_table() -> None:
    # GIVEN a subscriber and the team's own table
    stack, shipping = on_topic()
    counters = aws_dynamodb.Table(
        stack, "Counters", partition_key=aws_dynamodb.Attribute(name="order_id", type=aws_dynamodb.AttributeType.STRING)
    )
    # WHEN the effect's writes are granted
    grant = shipping.grant_effect_writes(counters)
    # THEN the grant succeeded on the function's role, for that table's write actions
    assert grant.success
    Template.from_stack(stack).has_resource_properties(
        "AWS::IAM::Policy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Action": [
                                    "dynamodb:PutItem",
                                    "dynamodb:UpdateItem",
                                    "dynamodb:DeleteItem",
                                    "dynamodb:ConditionCheckItem",
                                ],
                                "Resource": Match.array_with(
                                    [{"Fn::GetAtt": [Match.string_like_regexp("Counters"), "Arn"]}]
                                ),
                            }
                        )
                    ]
                )
            }
        },
    )


def test_three_alarms_link_the_subscriber_runbook(template: Template) -> None:
    # GIVEN / WHEN synthesized / THEN the DLQ, age and error alarms, named by the stack and path, with the runbook
    alarms = {
        props["Properties"]["AlarmName"]: props["Properties"]["AlarmDescription"]
        for props in template.find_resources("AWS::CloudWatch::Alarm").values()
        if props["Properties"]["AlarmName"].startswith("TestStack-Shipping-")
    }
    assert sorted(alarms) == [
        "TestStack-Shipping-dead_letter_queue_not_empty",
        "TestStack-Shipping-function_errors",
        "TestStack-Shipping-oldest_message_too_old",
    ]
    assert all("docs/subscriber.md" in description for description in alarms.values())


def test_a_body_filter_sets_the_message_body_scope() -> None:
    # GIVEN a filter on the body (e.g. the stored order with notification_body="order")
    stack, _ = on_topic(
        filter_policy_with_message_body={
            "total": aws_sns.FilterOrPolicy.filter(aws_sns.SubscriptionFilter.numeric_filter(greater_than=1000))
        }
    )
    # WHEN synthesized / THEN the subscription filters the body
    Template.from_stack(stack).has_resource_properties(
        "AWS::SNS::Subscription",
        {"FilterPolicyScope": "MessageBody", "FilterPolicy": {"total": [{"numeric": [">", 1000]}]}},
    )


def test_a_fifo_topic_gets_fifo_queues() -> None:
    # GIVEN a FIFO topic / WHEN a subscriber is built on it / THEN both queues are FIFO
    stack, _ = on_topic(topic_arn=TOPIC_ARN + ".fifo")
    queues = Template.from_stack(stack).find_resources("AWS::SQS::Queue")
    assert len(queues) == 2
    assert all(queue["Properties"]["FifoQueue"] is True for queue in queues.values())


def test_subscribers_of_a_stack_share_one_layer() -> None:
    # GIVEN two subscribers in one stack
    stack, first = on_topic()
    topic = aws_sns.Topic.from_topic_arn(stack, "Again", TOPIC_ARN)
    second = IdempotentSubscriber(stack, "Billing", topic=topic, code=CODE, handler="billing.handler")
    # WHEN synthesized / THEN one layer, used by both
    Template.from_stack(stack).resource_count_is("AWS::Lambda::LayerVersion", 1)
    assert first.runtime_layer is second.runtime_layer


def test_the_stateful_logical_ids_are_pinned() -> None:
    # GIVEN a subscriber "Shipping" at the top of a stack
    stack, shipping = on_topic()
    # WHEN its stateful resources' logical ids are read / THEN they are these (a change replaces them)
    ids = {
        name: stack.get_logical_id(getattr(shipping, name).node.default_child)
        for name in ("queue", "dead_letter_queue", "dedup_table")
    }
    assert ids == {
        "queue": "ShippingQueue6957D966",
        "dead_letter_queue": "ShippingDeadLetterQueue2C4BAF0C",
        "dedup_table": "ShippingDedupTable0C778071",
    }


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"topic": None}, r"pipeline=None, topic=None: allowed exactly one"),
        (
            {
                "filter_policy": {"a": aws_sns.SubscriptionFilter.exists_filter()},
                "filter_policy_with_message_body": {
                    "a": aws_sns.FilterOrPolicy.filter(aws_sns.SubscriptionFilter.exists_filter())
                },
            },
            r"filter_policy and filter_policy_with_message_body: allowed one of them",
        ),
        ({"lease": cdk.Duration.seconds(10)}, r"lease=10s: must be at least function_timeout \(30s\)"),
        (
            {"visibility_timeout": cdk.Duration.seconds(30)},
            r"visibility_timeout=30s: must be longer than the lease \(30s\)",
        ),
        ({"runtime": aws_lambda.Runtime.NODEJS_22_X}, r"runtime=nodejs22.x: allowed python3.11"),
        (
            {"runtime": aws_lambda.Architecture.ARM_64},
            r"runtime=arm64 \(Architecture\): allowed an aws_lambda.Runtime, one of python3.11, python3.12, "
            r"python3.13, python3.14",
        ),
        (
            {"architecture": aws_lambda.Runtime.PYTHON_3_13},
            r"architecture=python3.13 \(Runtime\): allowed Architecture.ARM_64 or Architecture.X86_64",
        ),
        (
            {"environment": {"POWERTOOLS_SERVICE_NAME": "mine"}},
            r"environment keys \['POWERTOOLS_SERVICE_NAME'\]: set by the construct \(the helper's, and service_name=\)",
        ),
        ({"service_name": ""}, r"service_name='': allowed a non-empty name, or None for the default"),
        (
            {"layers": [aws_lambda.LayerVersion.from_layer_version_arn(cdk.Stack(), "L", TEAM_LAYER_ARN)] * 4},
            r"layers: 4 given, allowed at most 3 \(Lambda allows 5 layers per function",
        ),
        (
            {"environment": {"ORDER_SUBSCRIBER_LEASE_SECONDS": "1"}},
            r"environment keys \['ORDER_SUBSCRIBER_LEASE_SECONDS'\]",
        ),
        ({"memory_size": "512"}, r"memory_size='512' \(str\): allowed an int \(MB\)"),
        ({"handler": " "}, r"handler=' ': allowed a non-empty"),
        ({"record_retention": cdk.Duration.days(10)}, r"record_retention=10 days: must be longer than"),
        ({"batch_size": 0}, r"batch_size=0: allowed 1..10000"),
        ({"max_receive_count": 0}, r"max_receive_count=0: allowed 1..1000"),
        ({"oldest_message_age_threshold": cdk.Duration.days(5)}, r"oldest_message_age_threshold=5 days: must be less"),
    ],
)
def test_invalid_props_are_refused_naming_the_prop_value_and_allowed(props: dict[str, Any], expected: str) -> None:
    # GIVEN an invalid prop / WHEN the subscriber is built / THEN a ValueError names it, its value and what is allowed
    with pytest.raises(ValueError, match=expected) as raised:
        on_topic(**props)
    # AND a CDK object shows by its name, never as a jsii object's address
    assert "object at 0x" not in str(raised.value)


def test_the_function_gets_the_powertools_layer_of_its_runtime_then_the_teams_layers() -> None:
    # GIVEN a subscriber on Python 3.13, x86_64, with a layer of the team's and a service name
    team_layer = aws_lambda.LayerVersion.from_layer_version_arn(cdk.Stack(), "Tools", TEAM_LAYER_ARN)
    stack, shipping = on_topic(
        runtime=aws_lambda.Runtime.PYTHON_3_13,
        architecture=aws_lambda.Architecture.X86_64,
        layers=[team_layer],
        service_name="fulfilment",
    )
    # WHEN synthesized
    template = Template.from_stack(stack).to_json()
    [function] = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    # THEN its layers are the helper's, Powertools' for python3.13 on x86_64 (not the pipeline's 3.14 on arm64),
    # then the team's
    parameter_id = "PowertoolsLayerArnPython313X8664"
    assert function["Layers"] == [
        {"Ref": stack.get_logical_id(shipping.runtime_layer.node.default_child)},
        {"Ref": parameter_id},
        TEAM_LAYER_ARN,
    ]
    assert template["Parameters"][parameter_id]["Default"] == "/aws/service/powertools/python/x86_64/python3.13/3.37.0"
    assert LAYER_ARN_PARAMETER_ID not in template["Parameters"]
    # AND Powertools names the team's service
    assert function["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"] == "fulfilment"


def test_a_subscriber_and_its_pipeline_share_the_stacks_powertools_parameter(with_pipeline: Synthesized) -> None:
    # GIVEN a pipeline and a subscriber on the default runtime and architecture, in one stack
    template = with_pipeline.template_json
    # WHEN the stack's parameters and the subscriber's layers are read
    [layers] = [
        r["Properties"]["Layers"]
        for n, r in template["Resources"].items()
        if n.startswith("ShippingFunction") and r["Type"] == "AWS::Lambda::Function"
    ]
    # THEN one parameter serves both (python3.14, arm64)
    assert [name for name in template["Parameters"] if name.startswith("PowertoolsLayerArn")] == [
        LAYER_ARN_PARAMETER_ID
    ]
    assert {"Ref": LAYER_ARN_PARAMETER_ID} in layers


def test_the_default_powertools_layer_is_refused_where_powertools_publishes_no_parameter() -> None:
    # GIVEN a subscriber's stack in China, where Powertools publishes no SSM parameter
    stack = cdk.Stack(cdk.App(), "Subscribers", env=cdk.Environment(account="123456789012", region="cn-north-1"))
    topic = aws_sns.Topic.from_topic_arn(stack, "Orders", "arn:aws-cn:sns:cn-north-1:123456789012:orders")
    # WHEN it is built without powertools_layer / THEN the error says to pass one
    with pytest.raises(ValueError, match=r"powertools_layer=None: Powertools publishes no SSM parameter"):
        IdempotentSubscriber(stack, "Shipping", topic=topic, code=CODE, handler="shipping.handler")
    # AND with one, it is built with it
    given = aws_lambda.LayerVersion.from_layer_version_arn(stack, "Powertools", TEAM_LAYER_ARN)
    shipping = IdempotentSubscriber(
        stack, "Billing", topic=topic, code=CODE, handler="billing.handler", powertools_layer=given
    )
    assert shipping.powertools_layer is given


def test_a_pipeline_of_another_account_is_refused_saying_what_to_pass() -> None:
    # GIVEN a pipeline in one account and a subscriber's stack in another (one app)
    app = cdk.App()
    shop = cdk.Stack(app, "Shop", env=cdk.Environment(account="111111111111", region="eu-west-1"))
    pipeline = IdempotentOrderPipeline(shop, "Orders")
    fulfilment = cdk.Stack(app, "Fulfilment", env=cdk.Environment(account="222222222222", region="eu-west-1"))
    # WHEN the subscriber is given the pipeline
    # THEN the collected ValueError names the prop, both environments and what to pass instead (not CDK's
    # CannotUseCrossEnvironment, nor a physical topic name)
    with pytest.raises(
        ValueError, match=r"pipeline=Shop/Orders is in account 111111111111, region eu-west-1, this "
    ) as e:
        IdempotentSubscriber(fulfilment, "Shipping", pipeline=pipeline, code=CODE, handler="shipping.handler")
    message = str(e.value)
    assert "this subscriber in account 222222222222, region eu-west-1" in message
    assert "topic=aws_sns.Topic.from_topic_arn(" in message
    assert "pipeline.grant_subscribe(aws_iam.AccountPrincipal(" in message
    # AND the same for the pipeline's topic given as topic=
    with pytest.raises(ValueError, match=r"topic=Shop/Orders/Topic is in account 111111111111"):
        IdempotentSubscriber(fulfilment, "Billing", topic=pipeline.topic, code=CODE, handler="billing.handler")


def test_a_topic_of_another_account_and_region_by_its_arn_is_subscribed_there() -> None:
    # GIVEN the pipeline's topic by its ARN (account 111111111111, eu-west-1), the subscriber in another
    # account and region
    stack = cdk.Stack(cdk.App(), "Fulfilment", env=cdk.Environment(account="222222222222", region="us-east-1"))
    arn = "arn:aws:sns:eu-west-1:111111111111:orders"
    topic = aws_sns.Topic.from_topic_arn(stack, "Orders", arn)
    # WHEN the subscriber is built
    IdempotentSubscriber(stack, "Shipping", topic=topic, code=CODE, handler="shipping.handler")
    # THEN the subscription names the topic's ARN and region, and the queue lets that topic send to it
    template = Template.from_stack(stack)
    template.has_resource_properties(
        "AWS::SNS::Subscription", {"TopicArn": arn, "Region": "eu-west-1", "Protocol": "sqs"}
    )
    template.has_resource_properties(
        "AWS::SQS::QueuePolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Action": "sqs:SendMessage",
                                "Principal": {"Service": "sns.amazonaws.com"},
                                "Condition": {"ArnEquals": {"aws:SourceArn": arn}},
                            }
                        )
                    ]
                )
            }
        },
    )


def on_pipeline(**props: Any) -> IdempotentSubscriber:
    """A subscriber "Shipping" of a pipeline sending ``country`` as an attribute (thin body), with ``props``."""
    stack = cdk.Stack(cdk.App(), "Shop")
    pipeline = IdempotentOrderPipeline(stack, "Orders", notification_attributes=["country"])
    return IdempotentSubscriber(stack, "Shipping", pipeline=pipeline, code=CODE, handler="shipping.handler", **props)


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        (
            {"filter_policy": {"total": aws_sns.SubscriptionFilter.numeric_filter(greater_than=1000)}},
            r"filter_policy on \['total'\]: no notification carries such an attribute \(allowed "
            r"\['country', 'event_id', 'order_id'\]; add the field to notification_attributes\)",
        ),
        (
            {
                "filter_policy_with_message_body": {
                    "country": aws_sns.FilterOrPolicy.filter(aws_sns.SubscriptionFilter.string_filter(allowlist=["DE"]))
                }
            },
            r"filter_policy_with_message_body on the body's \['country'\]: the thin body has only",
        ),
    ],
)
def test_a_filter_on_a_field_the_pipeline_never_sends_is_refused(props: dict[str, Any], expected: str) -> None:
    # GIVEN a pipeline whose notifications carry the attribute "country" and the thin body
    # WHEN a subscriber filters on something those notifications never carry
    # THEN a ValueError names the prop, the fields and what the pipeline sends (the queue would stay empty)
    with pytest.raises(ValueError, match=expected):
        on_pipeline(**props)


def test_a_filter_on_what_the_pipeline_sends_is_accepted() -> None:
    # GIVEN a pipeline sending "country" / WHEN a subscriber filters on it and on the built-in order_id
    subscriber = on_pipeline(
        filter_policy={
            "country": aws_sns.SubscriptionFilter.string_filter(allowlist=["DE"]),
            "order_id": aws_sns.SubscriptionFilter.exists_filter(),
        }
    )
    # THEN the subscription carries that filter
    Template.from_stack(cdk.Stack.of(subscriber)).has_resource_properties(
        "AWS::SNS::Subscription", {"FilterPolicy": {"country": ["DE"], "order_id": [{"exists": True}]}}
    )


def test_every_problem_is_reported_at_once() -> None:
    # GIVEN two invalid props / WHEN built / THEN one error lists both
    with pytest.raises(ValueError, match="invalid props") as raised:
        on_topic(lease=cdk.Duration.seconds(1), memory_size=1)
    assert "\n  - memory_size=1: allowed 128..10240 MB" in str(raised.value)
    assert "\n  - lease=1s: must be at least function_timeout" in str(raised.value)


def test_the_signature_takes_its_defaults_from_the_props() -> None:
    # GIVEN the constructor's keyword-only parameters
    parameters = inspect.signature(IdempotentSubscriber.__init__).parameters
    keywords = [name for name, p in parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    # WHEN compared with SubscriberProps / THEN the same names in order, with the fields' annotations, each
    # optional one defaulting to its field
    assert keywords == list(PROP_NAMES)
    declared = {field.name: field.type for field in dataclasses.fields(SubscriberProps)}
    for name in PROP_NAMES:
        assert parameters[name].annotation == declared[name], name
        if name in ("code", "handler"):
            assert parameters[name].default is inspect.Parameter.empty
        else:
            assert parameters[name].default is getattr(DEFAULTS, name), name


def _stated(value: object) -> str:
    """A default as the docstring states it (a Runtime or Architecture by its constant's name)."""
    for kind in (aws_lambda.Runtime, aws_lambda.Architecture):
        if isinstance(value, kind):
            [constant] = [n for n in dir(kind) if n.isupper() and getattr(getattr(kind, n), "name", None) == value.name]
            return f"{kind.__name__}.{constant}"
    return describe_default(value)


def test_the_docstring_states_every_default_as_the_props_define_it() -> None:
    # GIVEN the class docstring's :param entries
    docstring = IdempotentSubscriber.__doc__ or ""
    params = {
        name: " ".join(text.split())
        for name, text in re.findall(r":param (\w+):(.*?)(?=\n    :param |\Z)", docstring, re.S)
    }
    # WHEN each optional prop's entry is read / THEN it states the default SubscriberProps defines
    assert set(PROP_NAMES) <= set(params)
    for name in PROP_NAMES:
        if name not in ("code", "handler"):
            assert f"Default: {_stated(getattr(DEFAULTS, name))}" in params[name], name


def test_cdk_nag_finds_nothing_unacknowledged_and_the_docs_list_every_reason(with_pipeline: Synthesized) -> None:
    # GIVEN the pipeline and subscriber synthesized with cdk-nag's AwsSolutions and Serverless packs
    acknowledged = dict(with_pipeline.nag_acknowledged)
    # WHEN the findings are read / THEN none is left, the subscriber's carry its reasons, which the docs list
    assert with_pipeline.nag_findings == []
    assert set(findings.NAG_REASONS.values()) <= set(acknowledged.values())
    page = SUBSCRIBER_DOCS.read_text()
    for rule in findings.NAG_REASONS:
        assert f"`{rule}`" in page, rule
    for suppression in findings.CHECKOV_SUPPRESSIONS:
        assert f"`{suppression.check_id}`" in page, suppression.check_id


@pytest.mark.slow
def test_checkov_finds_nothing_without_a_shipped_reason(with_pipeline: Synthesized, tmp_path: Path) -> None:
    # GIVEN checkov and the template of a pipeline with a filtered subscriber
    assert CHECKOV.exists(), "run `make venv` (it creates .venv-checkov)"
    shutil.copy(with_pipeline.template_path, tmp_path / "subscriber.json")
    # WHEN checkov checks it
    completed = subprocess.run(  # noqa: S603  (the repository's checkov)
        [str(CHECKOV), "--directory", str(tmp_path), "--framework", "cloudformation", "--output", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    report = json.loads(completed.stdout)["results"]
    # THEN nothing failed, and each skip on the subscriber's resources is one it ships, with its reason
    assert [c["check_id"] + " " + c["resource"] for c in report["failed_checks"]] == []
    reasons = {(s.check_id, s.reason) for s in findings.CHECKOV_SUPPRESSIONS}
    skipped = [c for c in report["skipped_checks"] if re.search(r"\.Shipping", c["resource"])]
    assert skipped
    for check in skipped:
        assert (check["check_id"], check["check_result"]["suppress_comment"]) in reasons, check["resource"]


@pytest.mark.slow
def test_cfn_lint_passes(with_pipeline: Synthesized) -> None:
    # GIVEN the template of a pipeline with a filtered subscriber
    # WHEN cfn-lint checks it in several regions
    matches = lint_file(with_pipeline.template_path, config=ManualArgs(regions=LINT_REGIONS))
    # THEN it finds nothing but the accepted, justified warnings (the pipeline's list)
    unexpected = [f"{m.rule.id} {m.message} ({m.path})" for m in matches if m.rule.id not in ACCEPTED_CFN_LINT_RULES]
    assert unexpected == []
