"""The reconciler in the template: the pending index, the second function, its schedule, grants, alarm, props.

The last test runs the reconciler's entry point on moto against tables created from the
synthesized template's key schemas, with pending records made by a consumer that crashed between
its transaction and its publish (the way production makes them).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import boto3
import pytest
from aws_cdk.assertions import Match
from moto import mock_aws

from idempotent_order_pipeline import IdempotentOrderPipeline
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import CHECKPOINT_EVENT_ID
from idempotent_order_pipeline.monitoring import AlarmThreshold
from idempotent_order_pipeline.reconciliation import RECONCILER_HANDLER, alarm_threshold_seconds
from tests.infra.synth import Synthesized, logical_id, resources_of_type, synth_pipeline

PENDING_INDEX = {
    "IndexName": "pending-by-age",
    "KeySchema": [
        {"AttributeName": "pending_shard", "KeyType": "HASH"},
        {"AttributeName": "created_at", "KeyType": "RANGE"},
    ],
    "Projection": {"ProjectionType": "KEYS_ONLY"},
}


@pytest.fixture(scope="module")
def without_reconciler(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """``reconcile_every=None``."""
    return synth_pipeline(tmp_path_factory.mktemp("no-reconciler"), reconcile_every=None)


def reconciler_function(synthesized: Synthesized) -> dict[str, Any]:
    assert synthesized.pipeline.reconciliation is not None
    resource: dict[str, Any] = synthesized.template_json["Resources"][
        logical_id(synthesized.stack, synthesized.pipeline.reconciliation.function)
    ]
    return resource


def reconciler_policy(synthesized: Synthesized) -> list[dict[str, Any]]:
    policies = resources_of_type(synthesized.template_json, "AWS::IAM::Policy")
    [policy] = [p for key, p in policies.items() if "Reconciliation" in key]
    statements: list[dict[str, Any]] = policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def test_processed_events_has_the_keys_only_pending_index(
    default_pipeline: Synthesized, without_reconciler: Synthesized
) -> None:
    # GIVEN the default pipeline and one without the reconciler
    for synthesized in (default_pipeline, without_reconciler):
        # WHEN the processed_events table is read
        table = synthesized.template_json["Resources"][
            logical_id(synthesized.stack, synthesized.pipeline.processed_events_table)
        ]["Properties"]
        # THEN it has the index (the CLI's pending listing reads it even without the reconciler)
        assert table["GlobalSecondaryIndexes"] == [PENDING_INDEX]
        assert {"AttributeName": "pending_shard", "AttributeType": "S"} in table["AttributeDefinitions"]
        assert {"AttributeName": "created_at", "AttributeType": "N"} in table["AttributeDefinitions"]
        assert table["KeySchema"] == [{"AttributeName": "event_id", "KeyType": "HASH"}]


def test_the_reconciler_is_a_second_function_from_the_same_asset(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline's two functions
    reconciler = reconciler_function(default_pipeline)["Properties"]
    consumer = default_pipeline.template_json["Resources"][
        logical_id(default_pipeline.stack, default_pipeline.pipeline.function)
    ]["Properties"]
    # WHEN they are compared
    # THEN the reconciler runs the reconciler's entry point from the consumer's code, layer and runtime
    assert reconciler["Handler"] == RECONCILER_HANDLER == "order_consumer.reconciler.handler"
    assert reconciler["Code"] == consumer["Code"]
    assert reconciler["Layers"] == consumer["Layers"]
    assert (reconciler["Runtime"], reconciler["Architectures"]) == (consumer["Runtime"], consumer["Architectures"])
    # AND tracing follows the pipeline's opt-in tracing prop (off by default, as the consumer's)
    assert "TracingConfig" not in reconciler
    assert "TracingConfig" not in consumer
    # AND it reads the consumer's variables plus RECONCILE_AFTER_SECONDS (15 minutes by default)
    variables = reconciler["Environment"]["Variables"]
    assert {k: v for k, v in variables.items() if k != "RECONCILE_AFTER_SECONDS"} == consumer["Environment"][
        "Variables"
    ]
    assert variables["RECONCILE_AFTER_SECONDS"] == "900"


@pytest.mark.parametrize("configuration", ["default_pipeline", "cmk_pipeline"])
def test_the_threshold_is_at_least_the_consumers_timeout(configuration: str, request: pytest.FixtureRequest) -> None:
    # GIVEN a synthesized pipeline (the default one, and one with a longer redelivery window)
    synthesized: Synthesized = request.getfixturevalue(configuration)
    consumer = synthesized.template_json["Resources"][logical_id(synthesized.stack, synthesized.pipeline.function)]
    after = int(reconciler_function(synthesized)["Properties"]["Environment"]["Variables"]["RECONCILE_AFTER_SECONDS"])
    # WHEN the reconciler's threshold is compared with the consumer's timeout
    # THEN a transaction (which commits within the consumer's invocation) is over before the threshold
    # passes: the reconciler's checkpoints rest on it (no entry appears older than a checkpoint)
    assert after >= consumer["Properties"]["Timeout"] > 0


def test_a_schedule_runs_it_every_five_minutes_without_retries(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline
    function = logical_id(default_pipeline.stack, default_pipeline.pipeline.reconciliation.function)  # type: ignore[union-attr]
    # WHEN the rule and the function's async settings are read
    # THEN a rate rule targets it, and failed runs are not retried (the next run is the retry)
    default_pipeline.template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "ScheduleExpression": "rate(5 minutes)",
            "State": "ENABLED",
            "Targets": [
                Match.object_like(
                    {"Arn": {"Fn::GetAtt": [function, "Arn"]}, "RetryPolicy": {"MaximumRetryAttempts": 0}}
                )
            ],
        },
    )
    default_pipeline.template.has_resource_properties(
        "AWS::Lambda::EventInvokeConfig", {"FunctionName": {"Ref": function}, "MaximumRetryAttempts": 0}
    )


def test_reconcile_every_none_turns_it_off(without_reconciler: Synthesized) -> None:
    # GIVEN reconcile_every=None
    # WHEN the template is read
    # THEN there is one function, no rule and no pending_too_old alarm
    assert without_reconciler.pipeline.reconciliation is None
    assert len(resources_of_type(without_reconciler.template_json, "AWS::Lambda::Function")) == 1
    assert resources_of_type(without_reconciler.template_json, "AWS::Events::Rule") == {}
    assert "pending_too_old" not in without_reconciler.pipeline.alarms
    assert "reconciler_errors" not in without_reconciler.pipeline.alarms


def test_the_reconciler_role_has_exactly_its_calls(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline
    stack, pipeline = default_pipeline.stack, default_pipeline.pipeline
    events = logical_id(stack, pipeline.processed_events_table)
    orders = logical_id(stack, pipeline.order_records_table)
    # WHEN the reconciler role's statements are read
    statements = {s.get("Sid", "xray"): s for s in reconciler_policy(default_pipeline)}
    # THEN it may query the index only, read both tables, mark records, publish; nothing writes an order row
    assert statements["FindPendingRecords"]["Action"] == "dynamodb:Query"
    assert statements["FindPendingRecords"]["Resource"] == {
        "Fn::Join": ["", [{"Fn::GetAtt": [events, "Arn"]}, "/index/pending-by-age"]]
    }
    assert statements["ConfirmPendingRecords"]["Action"] == "dynamodb:BatchGetItem"
    assert statements["ConfirmPendingRecords"]["Resource"] == {"Fn::GetAtt": [events, "Arn"]}
    assert statements["ReadOrderRowIdentities"]["Action"] == "dynamodb:BatchGetItem"
    assert statements["ReadOrderRowIdentities"]["Resource"] == {"Fn::GetAtt": [orders, "Arn"]}
    assert statements["MarkEventsSent"] == {
        "Sid": "MarkEventsSent",
        "Action": "dynamodb:PartiQLUpdate",
        "Effect": "Allow",
        "Resource": {"Fn::GetAtt": [events, "Arn"]},
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
    }
    assert statements["ExpireSentRecordsWithoutTtl"] == {
        "Sid": "ExpireSentRecordsWithoutTtl",
        "Action": "dynamodb:UpdateItem",
        "Effect": "Allow",
        "Resource": {"Fn::GetAtt": [events, "Arn"]},
        "Condition": {
            "ForAllValues:StringEquals": {
                "dynamodb:Attributes": ["event_id", "status", "ttl", "pending_shard", "created_at"]
            },
            "StringEqualsIfExists": {"dynamodb:ReturnValues": ["NONE", "ALL_OLD"]},
        },
    }
    # AND its checkpoints: one item of processed_events, under the key no order can have, its three attributes
    for sid, action, only in (
        ("ReadCheckpoints", "dynamodb:GetItem", {"dynamodb:Select": "SPECIFIC_ATTRIBUTES"}),
        ("WriteCheckpoints", "dynamodb:PutItem", {"dynamodb:ReturnValues": "NONE"}),
    ):
        assert statements[sid] == {
            "Sid": sid,
            "Action": action,
            "Effect": "Allow",
            "Resource": {"Fn::GetAtt": [events, "Arn"]},
            "Condition": {
                "ForAllValues:StringEquals": {
                    "dynamodb:LeadingKeys": ["order-pipeline:reconciler-checkpoint"],
                    "dynamodb:Attributes": ["event_id", "checkpoints", "revision"],
                },
                "StringEqualsIfExists": only,
            },
        }
    assert statements["PublishNotifications"]["Resource"] == {"Ref": logical_id(stack, pipeline.topic)}
    actions = {a for s in statements.values() for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert actions == {
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "dynamodb:Query",
        "dynamodb:BatchGetItem",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:PartiQLUpdate",
        "dynamodb:UpdateItem",
        "sns:Publish",
    }
    assert not any("*" in action for action in actions)


def test_with_a_customer_managed_key_it_may_use_the_key_through_dynamodb_and_sns(cmk_pipeline: Synthesized) -> None:
    # GIVEN the CMK pipeline
    # WHEN the reconciler role's key statement is read
    [statement] = [
        s for s in reconciler_policy(cmk_pipeline) if s.get("Sid", "").startswith("UseTheCustomerManagedKey")
    ]
    # THEN it names the key, explicit actions, and only via DynamoDB and SNS
    assert sorted(statement["Action"]) == ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"]
    via = statement["Condition"]["StringEquals"]["kms:ViaService"]
    assert [part["Fn::Join"][1][0] for part in via] == ["dynamodb.", "sns."]


def test_pending_too_old_alarm_fires_above_reconcile_after_plus_two_runs(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline (reconcile_after 15 minutes, every 5 minutes)
    alarm = default_pipeline.pipeline.alarms["pending_too_old"]
    properties = default_pipeline.template_json["Resources"][logical_id(default_pipeline.stack, alarm)]["Properties"]
    # WHEN the alarm is read
    # THEN it watches the reconciler's OldestPendingAgeSeconds (service dimension) above 15 + 2 x 5 minutes
    assert properties["MetricName"] == "OldestPendingAgeSeconds"
    assert properties["Namespace"] == "IdempotentOrderPipeline"
    assert properties["Dimensions"][0]["Name"] == "service"
    assert properties["Statistic"] == "Maximum"
    assert (
        properties["Threshold"] == 25 * 60 == alarm_threshold_seconds(cdk.Duration.minutes(15), cdk.Duration.minutes(5))
    )
    assert properties["ComparisonOperator"] == "GreaterThanThreshold"
    assert properties["AlarmName"].endswith("-pending_too_old")
    assert "Runbook (pending_too_old):" in properties["AlarmDescription"]


def test_pending_too_old_fires_when_the_reconciler_stops_reporting(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline (a run every 5 minutes)
    alarm = default_pipeline.pipeline.alarms["pending_too_old"]
    properties = default_pipeline.template_json["Resources"][logical_id(default_pipeline.stack, alarm)]["Properties"]
    # WHEN the alarm is read
    # THEN a window without any age (no run finished, or none could read the index) is breaching,
    # and a window is two runs long, so one run drifting across a period boundary is never missing data
    assert properties["TreatMissingData"] == "breaching"
    assert properties["Period"] == 2 * 300
    assert properties["EvaluationPeriods"] == 1
    assert "reported no age for two runs" in properties["AlarmDescription"]


def test_reconciler_errors_alarm_fires_on_one_failed_run(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline
    pipeline = default_pipeline.pipeline
    assert pipeline.reconciliation is not None
    alarm = pipeline.alarms["reconciler_errors"]
    properties = default_pipeline.template_json["Resources"][logical_id(default_pipeline.stack, alarm)]["Properties"]
    function = logical_id(default_pipeline.stack, pipeline.reconciliation.function)
    # WHEN the alarm is read
    # THEN it watches the reconciler function's Errors (crashes, timeouts, failed runs), one is enough
    assert properties["Namespace"] == "AWS/Lambda"
    assert properties["MetricName"] == "Errors"
    assert properties["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": function}}]
    assert properties["Statistic"] == "Sum"
    assert properties["Period"] == 300
    assert properties["Threshold"] == 1
    assert properties["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert properties["EvaluationPeriods"] == 1
    assert properties["AlarmName"].endswith("-reconciler_errors")


def test_the_dashboard_shows_the_reconciler(default_pipeline: Synthesized) -> None:
    # GIVEN the default pipeline's dashboard
    [dashboard] = resources_of_type(default_pipeline.template_json, "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    # WHEN its body is read / THEN it graphs both reconciler metrics and the alarm's threshold
    assert "PendingReconciled" in body
    assert "OldestPendingAgeSeconds" in body
    assert "pending_too_old" in body


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"reconcile_every": cdk.Duration.seconds(30)},
            r"reconcile_every=30s: allowed None .* whole number of minutes",
        ),
        ({"reconcile_every": cdk.Duration.seconds(90)}, r"reconcile_every=90s"),
        (
            {"reconcile_after": cdk.Duration.minutes(10)},
            r"reconcile_after=10 minutes: must be at least visibility_timeout x max_receive_count "
            r"\(3 minutes x 5 = 15 minutes\)",
        ),
        (
            {"reconcile_after": cdk.Duration.minutes(20), "max_receive_count": 10},
            r"reconcile_after=20 minutes: .*\(3 minutes x 10 = 30 minutes\)",
        ),
        (
            {"reconcile_after": cdk.Duration.minutes(15), "visibility_timeout": cdk.Duration.minutes(4)},
            r"reconcile_after=15 minutes: .*\(4 minutes x 5 = 20 minutes\)",
        ),
    ],
)
def test_reconcile_props_are_validated(fresh_stack: cdk.Stack, props: dict[str, Any], message: str) -> None:
    # GIVEN / WHEN a pipeline whose reconciler could race a normal redelivery / THEN the error says why
    with pytest.raises(ValueError, match=message):
        IdempotentOrderPipeline(fresh_stack, "Pipeline", **props)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            # pending_too_old looks at two runs per period: 8 days > CloudWatch's 7-day evaluation range
            {"reconcile_every": cdk.Duration.days(4)},
            r"reconcile_every=4 days: allowed 1 minute to 84 hours with alarm pending_too_old \("
            r"2 run\(s\) per period x 1 evaluation period\(s\); CloudWatch evaluates an alarm over at most 7 days",
        ),
        (
            # 48 periods of 4 hours: 8 days
            {
                "reconcile_every": cdk.Duration.hours(2),
                "alarm_overrides": {"pending_too_old": AlarmThreshold(evaluation_periods=48)},
            },
            r"reconcile_every=2 hours: allowed 1 minute to 15 minutes or 30 minutes to 105 minutes with alarm "
            r"pending_too_old \(2 run\(s\) per period x 48 evaluation period",
        ),
        (
            # 30 periods of 50 minutes (under an hour: at most 1 day) = 25 hours
            {
                "reconcile_every": cdk.Duration.minutes(50),
                "alarm_overrides": {"reconciler_errors": AlarmThreshold(evaluation_periods=30)},
            },
            r"reconcile_every=50 minutes: allowed 1 minute to 48 minutes or 1 hour to 336 minutes with alarm "
            r"reconciler_errors \(1 run",
        ),
    ],
)
def test_reconcile_every_beyond_cloudwatchs_evaluation_range_is_refused(
    fresh_stack: cdk.Stack, props: dict[str, Any], message: str
) -> None:
    # GIVEN / WHEN a schedule so long that an alarm's period x evaluation periods exceeds what
    # CloudWatch accepts (the deploy would fail) / THEN a ValueError names the prop, value and range
    with pytest.raises(ValueError, match=message):
        IdempotentOrderPipeline(fresh_stack, "Pipeline", **props)


def test_reconcile_every_up_to_the_range_is_accepted(fresh_stack: cdk.Stack) -> None:
    # GIVEN / WHEN the longest schedule the default alarms allow
    pipeline = IdempotentOrderPipeline(fresh_stack, "Pipeline", reconcile_every=cdk.Duration.hours(84))
    # THEN the pipeline is built, and pending_too_old spans exactly CloudWatch's 7 days
    definition = pipeline.alarm_definitions["pending_too_old"]
    assert definition.metric.period.to_seconds() * definition.evaluation_periods == 7 * 86400  # type: ignore[attr-defined]


def test_reconcile_every_is_not_bounded_by_alarms_turned_off(fresh_stack: cdk.Stack) -> None:
    # GIVEN / WHEN a monthly reconciler without its two alarms
    pipeline = IdempotentOrderPipeline(
        fresh_stack,
        "Pipeline",
        reconcile_every=cdk.Duration.days(30),
        alarm_overrides={"pending_too_old": False, "reconciler_errors": False},
    )
    # THEN no alarm's range to respect: built
    assert pipeline.reconciliation is not None
    assert "pending_too_old" not in pipeline.alarm_definitions


def test_the_default_threshold_follows_a_longer_redelivery_window(cmk_pipeline: Synthesized) -> None:
    # GIVEN a pipeline whose visibility timeout is 185 s (30 s x 6 + a 5 s batching window), 5 receives
    # WHEN reconcile_after is left to its default
    variables = reconciler_function(cmk_pipeline)["Properties"]["Environment"]["Variables"]
    # THEN the reconciler waits the redelivery window (925 s), not 15 minutes, so it never races one
    assert variables["RECONCILE_AFTER_SECONDS"] == "925"


def test_reconcile_after_is_not_checked_without_a_reconciler(fresh_stack: cdk.Stack) -> None:
    # GIVEN / WHEN no reconciler and a short reconcile_after / THEN nothing to race, no error
    pipeline = IdempotentOrderPipeline(
        fresh_stack, "Pipeline", reconcile_every=None, reconcile_after=cdk.Duration.minutes(1)
    )
    assert pipeline.reconciliation is None


# --- the entry point on tables made from the template ---------------------------------------------


def tables_from_template(synthesized: Synthesized) -> Iterator[tuple[str, dict[str, Any]]]:
    """(logical id, CreateTable kwargs) for each table of the template: key schemas and indexes as synthesized."""
    for logical, resource in resources_of_type(synthesized.template_json, "AWS::DynamoDB::Table").items():
        properties = resource["Properties"]
        kwargs: dict[str, Any] = {
            "TableName": logical,
            "KeySchema": properties["KeySchema"],
            "AttributeDefinitions": properties["AttributeDefinitions"],
            "BillingMode": "PAY_PER_REQUEST",
        }
        if "GlobalSecondaryIndexes" in properties:
            kwargs["GlobalSecondaryIndexes"] = properties["GlobalSecondaryIndexes"]
        yield logical, kwargs


def test_the_entry_point_notifies_what_a_crashed_consumer_left_pending(
    default_pipeline: Synthesized, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from idempotent_order_pipeline._lambda_asset.order_consumer import handler as consumer_entry
    from idempotent_order_pipeline._lambda_asset.order_consumer import reconciler as reconciler_entry
    from idempotent_order_pipeline._lambda_asset.order_consumer.runtime import Clients
    from tests.consumer.harness import ArmedFault, Crash, FakeContext, FaultBoard, GuardedClient, sqs_record

    with mock_aws():
        # GIVEN the template's tables (with the pending index), a topic with a subscriber queue
        dynamodb, sns, sqs = boto3.client("dynamodb"), boto3.client("sns"), boto3.client("sqs")
        for _, kwargs in tables_from_template(default_pipeline):
            dynamodb.create_table(**kwargs)
        stack, pipeline = default_pipeline.stack, default_pipeline.pipeline
        events_table = logical_id(stack, pipeline.processed_events_table)
        orders_table = logical_id(stack, pipeline.order_records_table)
        topic_arn = sns.create_topic(Name="orders")["TopicArn"]
        subscriber = sqs.create_queue(QueueName="subscriber")["QueueUrl"]
        subscriber_arn = sqs.get_queue_attributes(QueueUrl=subscriber, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=subscriber_arn)
        env = {
            "PROCESSED_EVENTS_TABLE": events_table,
            "ORDER_RECORDS_TABLE": orders_table,
            "TOPIC_ARN": topic_arn,
            "DEAD_LETTER_QUEUE_URL": sqs.create_queue(QueueName="dlq")["QueueUrl"],
            "RECORD_TTL_SECONDS": "2592000",
        }
        # AND three orders the consumer recorded but crashed on before publishing (killed at its SNS call)
        board = FaultBoard()
        board.arm(ArmedFault(Crash()))
        consumer_entry.configure(Clients(dynamodb=dynamodb, sns=GuardedClient(sns, board), sqs=sqs), env)  # type: ignore[arg-type]
        for number in range(3):
            with pytest.raises(Crash):
                consumer_entry.handler(
                    {"Records": [sqs_record({"order_id": f"o-{number}", "n": number})]}, FakeContext()
                )
        consumer_entry.configure()
        records = {
            item["event_id"]["S"]: item for item in dynamodb.scan(TableName=events_table, ConsistentRead=True)["Items"]
        }
        assert [item["status"]["S"] for item in records.values()] == ["pending"] * 3

        # WHEN RECONCILE_AFTER_SECONDS=1, a little over a second passes, and the entry point is invoked
        for name, value in {**env, "RECONCILE_AFTER_SECONDS": "1"}.items():
            monkeypatch.setenv(name, value)
        reconciler_entry.configure()
        time.sleep(1.2)
        answer = reconciler_entry.handler({"source": "aws.events"}, FakeContext())

        # THEN the subscriber got one notification per order with the record's content
        messages = sqs.receive_message(QueueUrl=subscriber, MaxNumberOfMessages=10, MessageAttributeNames=["All"])[
            "Messages"
        ]
        bodies = sorted((json.loads(json.loads(m["Body"])["Message"]) for m in messages), key=lambda b: b["order_id"])
        assert bodies == sorted(
            (
                {
                    "event_id": event_id,
                    "order_id": item["order_id"]["S"],
                    "payload_sha256": item["payload_sha256"]["S"],
                }
                for event_id, item in records.items()
            ),
            key=lambda b: b["order_id"],
        )
        # AND every record is sent with a ttl, its index entry kept; beside them the reconciler's checkpoint
        # item; the order rows are as the consumer wrote them
        after = dynamodb.scan(TableName=events_table, ConsistentRead=True)["Items"]
        assert sorted(item["event_id"]["S"] for item in after) == sorted([*records, CHECKPOINT_EVENT_ID])
        after = [item for item in after if item["event_id"]["S"] in records]
        assert all(item["status"]["S"] == "sent" and "pending_shard" in item and "ttl" in item for item in after)
        assert len(dynamodb.scan(TableName=orders_table)["Items"]) == 3
        assert answer["reconciled"] == 3
