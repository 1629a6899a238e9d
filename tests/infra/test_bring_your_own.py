"""Bring your own: existing resources are used as they are, overrides merge over the defaults, and
whatever the exactly-once design depends on is checked after the merge (error naming prop, value, requirement)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_dynamodb, aws_ec2, aws_kms, aws_lambda, aws_sns, aws_sqs
from aws_cdk.assertions import Annotations, Match, Template

from idempotent_order_pipeline import IdempotentOrderPipeline
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.batching import MAX_MESSAGE_BYTES
from tests.infra.synth import REPO, Synthesized, logical_id, resources_of_type

seconds = cdk.Duration.seconds
days = cdk.Duration.days
STRING, NUMBER = aws_dynamodb.AttributeType.STRING, aws_dynamodb.AttributeType.NUMBER

Build = Callable[[cdk.Stack], dict[str, Any]]


def dlq(stack: cdk.Stack, **kwargs: Any) -> aws_sqs.Queue:
    return aws_sqs.Queue(stack, "ExistingDlq", retention_period=days(14), **kwargs)


def queue(stack: cdk.Stack, dead_letter_queue: aws_sqs.IQueue | None = None, **kwargs: Any) -> aws_sqs.Queue:
    redrive = (
        None if dead_letter_queue is None else aws_sqs.DeadLetterQueue(queue=dead_letter_queue, max_receive_count=5)
    )
    kwargs.setdefault("visibility_timeout", cdk.Duration.minutes(3))
    kwargs.setdefault("max_message_size_bytes", MAX_MESSAGE_BYTES)
    return aws_sqs.Queue(stack, "ExistingQueue", dead_letter_queue=redrive, **kwargs)


def table(
    stack: cdk.Stack,
    construct_id: str,
    name: str,
    *,
    attribute_type: aws_dynamodb.AttributeType = STRING,
    ttl: str | None = None,
    **kwargs: Any,
) -> aws_dynamodb.Table:
    return aws_dynamodb.Table(
        stack,
        construct_id,
        partition_key=aws_dynamodb.Attribute(name=name, type=attribute_type),
        time_to_live_attribute=ttl,
        **kwargs,
    )


def existing_queues(stack: cdk.Stack) -> dict[str, Any]:
    dead_letter_queue = dlq(stack)
    return {"existing_queue": queue(stack, dead_letter_queue), "existing_dead_letter_queue": dead_letter_queue}


def everything_existing(stack: cdk.Stack) -> dict[str, Any]:
    return {
        **existing_queues(stack),
        "existing_topic": aws_sns.Topic(stack, "ExistingTopic", enforce_ssl=True),
        "existing_processed_events_table": table(stack, "Events", "event_id", ttl="ttl"),
        "existing_order_records_table": table(stack, "Orders", "order_id"),
    }


# ---- existing resources created in the same app: used as they are ----------------------------------


@pytest.fixture(scope="module")
def existing() -> tuple[cdk.Stack, IdempotentOrderPipeline, dict[str, Any]]:
    stack = cdk.Stack(cdk.App(), "TestStack")
    given = everything_existing(stack)
    pipeline = IdempotentOrderPipeline(stack, "Pipeline", **given)
    return stack, pipeline, given


def test_existing_resources_are_used_and_not_created(
    existing: tuple[cdk.Stack, IdempotentOrderPipeline, dict[str, Any]],
) -> None:
    # GIVEN a queue, DLQ, topic and tables created beside the pipeline
    stack, pipeline, given = existing
    template = Template.from_stack(stack)
    # WHEN the template is read
    # THEN the pipeline's attributes are those resources, and it creates none of its own
    assert pipeline.queue is given["existing_queue"]
    assert pipeline.dead_letter_queue is given["existing_dead_letter_queue"]
    assert pipeline.topic is given["existing_topic"]
    assert pipeline.processed_events_table is given["existing_processed_events_table"]
    assert pipeline.order_records_table is given["existing_order_records_table"]
    template.resource_count_is("AWS::SQS::Queue", 2)
    template.resource_count_is("AWS::DynamoDB::Table", 2)
    template.resource_count_is("AWS::SNS::Topic", 1)
    assert pipeline.node.try_find_child("Queue") is None
    assert pipeline.node.try_find_child("ProcessedEventsTable") is None
    # AND the function consumes the existing queue and writes to the existing tables and DLQ
    template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "EventSourceArn": {"Fn::GetAtt": [logical_id(stack, given["existing_queue"]), "Arn"]},
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
        },
    )
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Environment": {
                "Variables": Match.object_like(
                    {
                        "PROCESSED_EVENTS_TABLE": {"Ref": logical_id(stack, given["existing_processed_events_table"])},
                        "ORDER_RECORDS_TABLE": {"Ref": logical_id(stack, given["existing_order_records_table"])},
                        "TOPIC_ARN": {"Ref": logical_id(stack, given["existing_topic"])},
                        "DEAD_LETTER_QUEUE_URL": {"Ref": logical_id(stack, given["existing_dead_letter_queue"])},
                    }
                )
            }
        },
    )


def test_verified_existing_resources_add_no_warning(
    existing: tuple[cdk.Stack, IdempotentOrderPipeline, dict[str, Any]],
) -> None:
    # GIVEN existing resources the construct could inspect (created in the same app)
    stack, _, _ = existing
    # WHEN the annotations are read
    # THEN none says a resource is unverified
    Annotations.from_stack(stack).has_no_warning("*", Match.string_like_regexp("cannot be checked at synth"))


def test_existing_dead_letter_queue_alone_receives_the_created_queues_redrive(fresh_stack: cdk.Stack) -> None:
    # GIVEN only an existing dead-letter queue
    dead_letter_queue = dlq(fresh_stack)
    pipeline = IdempotentOrderPipeline(
        fresh_stack, "Pipeline", existing_dead_letter_queue=dead_letter_queue, max_receive_count=7
    )
    # WHEN the created queue is read
    queue_properties = Template.from_stack(fresh_stack).to_json()["Resources"][logical_id(fresh_stack, pipeline.queue)]
    # THEN it redrives to the existing DLQ after max_receive_count receives
    assert queue_properties["Properties"]["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [logical_id(fresh_stack, dead_letter_queue), "Arn"]},
        "maxReceiveCount": 7,
    }


# ---- imported resources: a warning that says what the caller guarantees, acknowledgeable ------------


def imported(stack: cdk.Stack) -> dict[str, Any]:
    arn = "arn:aws:sqs:us-east-1:111111111111:"
    return {
        "existing_queue": aws_sqs.Queue.from_queue_arn(stack, "ImportedQueue", f"{arn}orders"),
        "existing_dead_letter_queue": aws_sqs.Queue.from_queue_arn(stack, "ImportedDlq", f"{arn}orders-dlq"),
        "existing_topic": aws_sns.Topic.from_topic_arn(stack, "ImportedTopic", "arn:aws:sns:us-east-1:111111111111:t"),
        "existing_processed_events_table": aws_dynamodb.Table.from_table_name(stack, "ImportedEvents", "events"),
        "existing_order_records_table": aws_dynamodb.Table.from_table_name(stack, "ImportedOrders", "orders"),
    }


IMPORTED_WARNINGS = [
    ("existing-queue-unverified", r"existing_queue is imported.*redrive policy targets existing_dead_letter_queue"),
    ("existing-dead-letter-queue-unverified", r"existing_dead_letter_queue is imported.*keeps messages longer"),
    ("existing-topic-unverified", r"existing_topic is imported.*standard"),
    ("existing-processed-events-table-unverified", r"partition key is 'event_id' \(S\).*TTL enabled on 'ttl'"),
    ("existing-order-records-table-unverified", r"partition key is 'order_id' \(S\) with no sort key"),
    ("existing-processed-events-table-index", r"must have the global secondary index 'pending-by-age'"),
]


@pytest.mark.parametrize(("warning_id", "message"), IMPORTED_WARNINGS, ids=[w for w, _ in IMPORTED_WARNINGS])
def test_imported_resources_add_a_warning_saying_what_the_caller_guarantees(warning_id: str, message: str) -> None:
    # GIVEN imported queue, DLQ, topic and tables (nothing can be inspected at synth)
    stack = cdk.Stack(cdk.App(), "TestStack")
    IdempotentOrderPipeline(stack, "Pipeline", **imported(stack))
    # WHEN the annotations are read
    # THEN each carries a warning with its id and the guarantees
    Annotations.from_stack(stack).has_warning(
        "/TestStack/Pipeline",
        Match.string_like_regexp(rf"{message}.*\[ack: idempotent-order-pipeline:{warning_id}\]"),
    )


def test_an_imported_queue_s_message_size_is_a_guarantee_unless_acknowledged() -> None:
    # GIVEN imported resources, with and without acknowledge_existing_queue_message_size
    guarantee = rf"its MaximumMessageSize is at most max_message_size \({MAX_MESSAGE_BYTES} bytes\)"
    for acknowledged in (False, True):
        stack = cdk.Stack(cdk.App(), "TestStack")
        IdempotentOrderPipeline(
            stack, "Pipeline", acknowledge_existing_queue_message_size=acknowledged, **imported(stack)
        )
        # WHEN the queue's warning is read
        [warning] = [
            str(m.entry.data)
            for m in Annotations.from_stack(stack).find_warning("/TestStack/Pipeline", Match.any_value())
            if "existing-queue-unverified" in str(m.entry.data)
        ]
        # THEN the caller guarantees the size, unless acknowledged (the rest of the guarantees stay)
        assert "redrive policy targets existing_dead_letter_queue" in warning
        assert bool(re.search(guarantee, warning)) is not acknowledged


def _queue_of_size(size: int | None) -> Build:
    def build(stack: cdk.Stack) -> dict[str, Any]:
        dead_letter_queue = dlq(stack)
        return {
            "existing_queue": queue(stack, dead_letter_queue, max_message_size_bytes=size),
            "existing_dead_letter_queue": dead_letter_queue,
        }

    return build


@pytest.mark.parametrize(
    ("size", "got"),
    [
        (None, r"has no MaximumMessageSize, so SQS accepts messages up to its default \(1 MiB since 2025\)"),
        (MAX_MESSAGE_BYTES + 1, rf"accepts messages up to {MAX_MESSAGE_BYTES + 1} bytes \(MaximumMessageSize\)"),
    ],
    ids=["unset", "over"],
)
def test_an_existing_queue_accepting_larger_messages_is_refused_unless_acknowledged(size: int | None, got: str) -> None:
    # GIVEN an existing queue created in the app whose MaximumMessageSize is unset or above max_message_size
    stack = cdk.Stack(cdk.App(), "TestStack")
    # WHEN the pipeline is given it
    # THEN synthesis fails naming the prop, what the queue accepts and what is allowed
    with pytest.raises(ValueError, match=rf"existing_queue {got}: allowed at most max_message_size ") as raised:
        IdempotentOrderPipeline(stack, "Pipeline", **_queue_of_size(size)(stack))
    assert "acknowledge_existing_queue_message_size=True" in str(raised.value)
    # AND acknowledged, it is used as it is
    other = cdk.Stack(cdk.App(), "TestStack")
    given = _queue_of_size(size)(other)
    pipeline = IdempotentOrderPipeline(other, "Pipeline", acknowledge_existing_queue_message_size=True, **given)
    assert pipeline.queue is given["existing_queue"]


def test_an_existing_queue_within_max_message_size_is_accepted(fresh_stack: cdk.Stack) -> None:
    # GIVEN an existing queue accepting 100 000 bytes, and max_message_size at 100 000
    given = _queue_of_size(100_000)(fresh_stack)
    # WHEN the pipeline is given it / THEN it is used as it is
    pipeline = IdempotentOrderPipeline(fresh_stack, "Pipeline", max_message_size=100_000, **given)
    assert pipeline.queue is given["existing_queue"]


def test_acknowledging_the_message_size_without_an_existing_queue_is_refused(fresh_stack: cdk.Stack) -> None:
    # GIVEN no existing_queue / WHEN the size is acknowledged / THEN the prop is named with what it needs
    with pytest.raises(
        ValueError, match=r"acknowledge_existing_queue_message_size=True: allowed only with existing_queue="
    ):
        IdempotentOrderPipeline(fresh_stack, "Pipeline", acknowledge_existing_queue_message_size=True)


def test_fifo_of_a_topic_imported_by_a_token_arn_is_left_to_the_caller(fresh_stack: cdk.Stack) -> None:
    # GIVEN a FIFO pipeline and a topic imported by an ARN known only at deploy time
    arn = cdk.CfnParameter(fresh_stack, "TopicArn").value_as_string
    topic = aws_sns.Topic.from_topic_arn(fresh_stack, "ImportedTopic", arn)
    # WHEN the construct is created
    IdempotentOrderPipeline(fresh_stack, "Pipeline", fifo=True, existing_topic=topic)
    # THEN its FIFO-ness is not guessed: the warning asks the caller to guarantee it
    Annotations.from_stack(fresh_stack).has_warning(
        "/TestStack/Pipeline", Match.string_like_regexp(r"existing_topic is imported.*guarantees it is FIFO")
    )


def test_fifo_high_throughput_on_existing_queue_and_topic_warns(fresh_stack: cdk.Stack) -> None:
    # GIVEN a FIFO high-throughput pipeline on an existing FIFO DLQ and topic
    IdempotentOrderPipeline(
        fresh_stack,
        "Pipeline",
        fifo=True,
        fifo_high_throughput=True,
        existing_dead_letter_queue=dlq(fresh_stack, fifo=True),
        existing_topic=aws_sns.Topic(fresh_stack, "T", fifo=True),
    )
    # WHEN the annotations are read
    # THEN each says the setting must be made on the resource itself
    annotations = Annotations.from_stack(fresh_stack)
    annotations.has_warning(
        "/TestStack/Pipeline", Match.string_like_regexp("cannot set DeduplicationScope and FifoThroughputLimit")
    )
    annotations.has_warning("/TestStack/Pipeline", Match.string_like_regexp("cannot set FifoThroughputScope"))


def test_imported_resource_warnings_can_be_acknowledged() -> None:
    # GIVEN imported resources, and the caller acknowledging every warning by its id
    stack = cdk.Stack(cdk.App(), "TestStack")
    pipeline = IdempotentOrderPipeline(stack, "Pipeline", **imported(stack))
    for warning_id, _ in IMPORTED_WARNINGS:
        cdk.Annotations.of(pipeline).acknowledge_warning(f"idempotent-order-pipeline:{warning_id}")
    # WHEN the annotations are read
    # THEN no warning is left
    Annotations.from_stack(stack).has_no_warning("*", Match.any_value())


# ---- overrides: merged over the defaults --------------------------------------------------------------


@pytest.fixture(scope="module")
def overridden() -> Synthesized:
    stack = cdk.Stack(cdk.App(), "TestStack")
    pipeline = IdempotentOrderPipeline(
        stack,
        "Pipeline",
        queue_props=aws_sqs.QueueProps(receive_message_wait_time=seconds(20)),
        dead_letter_queue_props={"receive_message_wait_time": seconds(10)},
        table_props={
            "billing_mode": aws_dynamodb.BillingMode.PROVISIONED,
            "read_capacity": 5,
            "write_capacity": 7,
            "table_class": aws_dynamodb.TableClass.STANDARD_INFREQUENT_ACCESS,
        },
        topic_props={"display_name": "Orders"},
        function_props={"description": "Consumer", "ephemeral_storage_size": cdk.Size.mebibytes(1024)},
    )
    template = Template.from_stack(stack)
    return Synthesized(
        stack=stack,
        pipeline=pipeline,
        template=template,
        template_json=template.to_json(),
        template_path=None,  # type: ignore[arg-type]  # not written by these tests
        nag_findings=[],
        nag_acknowledged=[],
    )


def test_queue_props_merge_over_the_defaults_and_keep_the_redrive(overridden: Synthesized) -> None:
    # GIVEN queue_props as a QueueProps struct with a long-polling wait
    queue_properties = overridden.template_json["Resources"][logical_id(overridden.stack, overridden.pipeline.queue)]
    # WHEN the queue is read
    # THEN the override is there, next to every default the design needs
    properties = queue_properties["Properties"]
    assert properties["ReceiveMessageWaitTimeSeconds"] == 20
    assert properties["VisibilityTimeout"] == 180
    assert properties["SqsManagedSseEnabled"] is True
    assert properties["RedrivePolicy"]["maxReceiveCount"] == 5


def test_dead_letter_queue_props_merge_over_the_defaults(overridden: Synthesized) -> None:
    # GIVEN dead_letter_queue_props with a long-polling wait (its maximum message size is the design's)
    dead_letter_queue = logical_id(overridden.stack, overridden.pipeline.dead_letter_queue)
    properties = overridden.template_json["Resources"][dead_letter_queue]["Properties"]
    # WHEN the DLQ is read
    # THEN it has the override and keeps its 14 days
    assert properties["ReceiveMessageWaitTimeSeconds"] == 10
    assert properties["MessageRetentionPeriod"] == 14 * 86_400
    assert properties["MaximumMessageSize"] == 1024 * 1024


@pytest.mark.parametrize(
    ("table_attribute", "key"), [("processed_events_table", "event_id"), ("order_records_table", "order_id")]
)
def test_table_props_apply_to_both_tables_and_keep_their_keys(
    overridden: Synthesized, table_attribute: str, key: str
) -> None:
    # GIVEN table_props with provisioned capacity and the infrequent-access class
    table_id = logical_id(overridden.stack, getattr(overridden.pipeline, table_attribute))
    properties = overridden.template_json["Resources"][table_id]["Properties"]
    # WHEN each table is read
    # THEN both carry the overrides, their own key, PITR and deletion protection
    assert properties["ProvisionedThroughput"] == {"ReadCapacityUnits": 5, "WriteCapacityUnits": 7}
    assert properties["TableClass"] == "STANDARD_INFREQUENT_ACCESS"
    assert properties["KeySchema"] == [{"AttributeName": key, "KeyType": "HASH"}]
    assert properties["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert properties["DeletionProtectionEnabled"] is True


def test_topic_and_function_props_merge_over_the_defaults(overridden: Synthesized) -> None:
    # GIVEN topic_props and function_props
    # WHEN the topic and the function are read
    # THEN they carry the overrides and the defaults the design needs
    overridden.template.has_resource_properties(
        "AWS::SNS::Topic", {"DisplayName": "Orders", "KmsMasterKeyId": "alias/aws/sns"}
    )
    overridden.template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Description": "Consumer",
            "EphemeralStorage": {"Size": 1024},
            "Handler": "order_consumer.handler.handler",
            "MemorySize": 1769,
        },
    )


def test_table_props_turning_point_in_time_recovery_off_warns(fresh_stack: cdk.Stack) -> None:
    # GIVEN table_props switching point-in-time recovery off
    IdempotentOrderPipeline(
        fresh_stack,
        "Pipeline",
        table_props={
            "point_in_time_recovery_specification": aws_dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=False
            )
        },
    )
    # WHEN the annotations are read
    # THEN a warning says what is lost
    Annotations.from_stack(fresh_stack).has_warning(
        "/TestStack/Pipeline", Match.string_like_regexp("table_props turns point-in-time recovery off")
    )


# ---- every check, with its message ------------------------------------------------------------------


def _queue_without_redrive(stack: cdk.Stack) -> dict[str, Any]:
    return {"existing_queue": queue(stack), "existing_dead_letter_queue": dlq(stack)}


def _queue_redriving_elsewhere(stack: cdk.Stack) -> dict[str, Any]:
    other = aws_sqs.Queue(stack, "OtherDlq")
    return {"existing_queue": queue(stack, other), "existing_dead_letter_queue": dlq(stack)}


def _queue_with_short_visibility(stack: cdk.Stack) -> dict[str, Any]:
    dead_letter_queue = dlq(stack)
    return {
        "existing_queue": queue(stack, dead_letter_queue, visibility_timeout=seconds(10)),
        "existing_dead_letter_queue": dead_letter_queue,
    }


def _fifo_queue_for_standard_pipeline(stack: cdk.Stack) -> dict[str, Any]:
    dead_letter_queue = dlq(stack, fifo=True)
    return {
        "existing_queue": queue(stack, dead_letter_queue, fifo=True),
        "existing_dead_letter_queue": dead_letter_queue,
    }


def _dlq_keeping_less_than_the_queue(stack: cdk.Stack) -> dict[str, Any]:
    dead_letter_queue = aws_sqs.Queue(stack, "ShortDlq", retention_period=days(2))
    return {"existing_dead_letter_queue": dead_letter_queue}


def _queue_with_its_own_key(stack: cdk.Stack) -> dict[str, Any]:
    key = aws_kms.Key(stack, "OtherKey", enable_key_rotation=True)
    dead_letter_queue = dlq(stack)
    return {
        "existing_queue": queue(stack, dead_letter_queue, encryption_master_key=key),
        "existing_dead_letter_queue": dead_letter_queue,
    }


CHECKS: list[tuple[str, Build, str]] = [
    (
        "existing_queue with queue_props",
        lambda s: {**existing_queues(s), "queue_props": {"delivery_delay": seconds(1)}},
        r"existing_queue and queue_props=\{'delivery_delay': .*\}: give one or the other",
    ),
    (
        "existing_topic with topic_props",
        lambda s: {"existing_topic": aws_sns.Topic(s, "T"), "topic_props": {"display_name": "x"}},
        r"existing_topic and topic_props=\{'display_name': 'x'\}: give one or the other",
    ),
    (
        "existing_dead_letter_queue with dead_letter_queue_props",
        lambda s: {"existing_dead_letter_queue": dlq(s), "dead_letter_queue_props": {"delivery_delay": seconds(1)}},
        r"existing_dead_letter_queue and dead_letter_queue_props=.*: give one or the other",
    ),
    (
        "both tables existing with table_props",
        lambda s: {
            "existing_processed_events_table": table(s, "E", "event_id", ttl="ttl"),
            "existing_order_records_table": table(s, "O", "order_id"),
            "table_props": {"table_class": aws_dynamodb.TableClass.STANDARD},
        },
        r"table_props=.* with existing_processed_events_table and existing_order_records_table: give one",
    ),
    (
        "existing_queue without existing_dead_letter_queue",
        lambda s: {"existing_queue": queue(s, dlq(s))},
        r"existing_queue without existing_dead_letter_queue: required",
    ),
    ("existing queue without redrive", _queue_without_redrive, r"existing_queue has no redrive policy: required"),
    (
        "existing queue redriving elsewhere",
        _queue_redriving_elsewhere,
        r"existing_queue redrives to TestStack/OtherDlq: must redrive to existing_dead_letter_queue "
        r"\(TestStack/ExistingDlq\)",
    ),
    (
        "existing queue visibility below the function timeout",
        _queue_with_short_visibility,
        r"existing_queue has visibility timeout 10s: must be at least function_timeout \(30s\)",
    ),
    (
        "FIFO queue for a standard pipeline",
        _fifo_queue_for_standard_pipeline,
        r"existing_queue is a FIFO queue but fifo=False: the queue, the dead-letter queue and the topic must all",
    ),
    (
        "standard topic for a FIFO pipeline",
        lambda s: {"fifo": True, "existing_topic": aws_sns.Topic(s, "T")},
        r"existing_topic is a standard topic but fifo=True",
    ),
    (
        "DLQ keeping messages shorter than the queue",
        _dlq_keeping_less_than_the_queue,
        r"existing_dead_letter_queue keeps messages 2 days: must be longer than the queue's retention \(4 days\)",
    ),
    (
        "queue encrypted with another key",
        _queue_with_its_own_key,
        r"existing_queue is encrypted with the customer managed key TestStack/OtherKey: pass that key as "
        r"encryption_key",
    ),
    (
        "processed_events with another partition key",
        lambda s: {"existing_processed_events_table": table(s, "E", "id", ttl="ttl")},
        r"existing_processed_events_table has partition key 'id' \(STRING\): required 'event_id' \(STRING\)",
    ),
    (
        "order_records keyed on a number",
        lambda s: {"existing_order_records_table": table(s, "O", "order_id", attribute_type=NUMBER)},
        r"existing_order_records_table has partition key 'order_id' \(NUMBER\): required 'order_id' \(STRING\)",
    ),
    (
        "a table with a sort key",
        lambda s: {
            "existing_order_records_table": table(
                s, "O", "order_id", sort_key=aws_dynamodb.Attribute(name="at", type=STRING)
            )
        },
        r"existing_order_records_table has sort key 'at': required none",
    ),
    (
        "processed_events without the ttl attribute",
        lambda s: {"existing_processed_events_table": table(s, "E", "event_id", ttl="expires")},
        r"existing_processed_events_table has TTL attribute 'expires': required 'ttl'",
    ),
    (
        "queue_props setting a key another prop owns",
        lambda s: {"queue_props": {"visibility_timeout": seconds(60)}},
        r"queue_props\['visibility_timeout'\]=.*: not overridable, use visibility_timeout=",
    ),
    (
        "queue_props turning encryption off",
        lambda s: {"queue_props": {"encryption": aws_sqs.QueueEncryption.UNENCRYPTED}},
        r"queue_props\['encryption'\]=UNENCRYPTED: the queues are always encrypted",
    ),
    (
        "dead_letter_queue_props turning TLS-only off",
        lambda s: {"dead_letter_queue_props": {"enforce_ssl": False}},
        r"dead_letter_queue_props\['enforce_ssl'\]=False: allowed True \(TLS only\)",
    ),
    (
        "dead_letter_queue_props shortening the DLQ's retention",
        lambda s: {"dead_letter_queue_props": {"retention_period": days(1)}},
        r"dead_letter_queue_props\['retention_period'\]=1 day: must be longer than retention_period \(4 days\)",
    ),
    (
        "queue_props setting the redrive policy",
        lambda s: {"queue_props": {"dead_letter_queue": aws_sqs.DeadLetterQueue(queue=dlq(s), max_receive_count=1)}},
        r"queue_props\['dead_letter_queue'\]=.*: not overridable, use existing_dead_letter_queue= and "
        r"max_receive_count=",
    ),
    (
        "table_props changing a key",
        lambda s: {"table_props": {"partition_key": aws_dynamodb.Attribute(name="id", type=STRING)}},
        r"table_props\['partition_key'\]=.*: not overridable, fixed by the design \(event_id \(S\)",
    ),
    (
        "table_props changing the TTL attribute",
        lambda s: {"table_props": {"time_to_live_attribute": "expires"}},
        r"table_props\['time_to_live_attribute'\]='expires': not overridable",
    ),
    (
        "table_props setting deletion protection",
        lambda s: {"table_props": {"deletion_protection": False}},
        r"table_props\['deletion_protection'\]=False: not overridable, follows removal_policy=",
    ),
    (
        "topic_props setting FIFO",
        lambda s: {"topic_props": {"fifo": True}},
        r"topic_props\['fifo'\]=True: not overridable, use fifo=",
    ),
    (
        "topic_props turning TLS-only off",
        lambda s: {"topic_props": {"enforce_ssl": False}},
        r"topic_props\['enforce_ssl'\]=False: allowed True \(TLS only\)",
    ),
    (
        "function_props replacing the environment",
        lambda s: {"function_props": {"environment": {"A": "b"}}},
        r"function_props\['environment'\]=\{'A': 'b'\}: not overridable, fixed by the design \(the handler's contract",
    ),
    (
        "function_props setting the runtime (shown by its name, never a jsii object's address)",
        lambda s: {"function_props": {"runtime": aws_lambda.Runtime.PYTHON_3_13}},
        r"function_props\['runtime'\]=python3.13: not overridable, fixed by the design \(the asset is built and "
        r"tested for python3.14\)",
    ),
    (
        "function_props setting the memory",
        lambda s: {"function_props": {"memory_size": 1024}},
        r"function_props\['memory_size'\]=1024: not overridable, use memory_size=",
    ),
    (
        "function_props setting the reserved concurrency",
        lambda s: {"function_props": {"reserved_concurrent_executions": 3}},
        r"function_props\['reserved_concurrent_executions'\]=3: not overridable, use reserved_concurrency=",
    ),
    (
        "queue_props of the wrong type",
        lambda s: {"queue_props": 5},
        r"queue_props=5 \(int\): allowed a mapping of keyword arguments or aws_sqs.QueueProps or None",
    ),
]


@pytest.mark.parametrize(("build", "message"), [(b, m) for _, b, m in CHECKS], ids=[name for name, _, _ in CHECKS])
def test_requirement_broken_raises_naming_prop_value_and_requirement(
    fresh_stack: cdk.Stack, build: Build, message: str
) -> None:
    # GIVEN resources or overrides that would break the design
    props = build(fresh_stack)
    # WHEN the construct is created
    # THEN a ValueError names the prop, the value and what is required
    with pytest.raises(ValueError, match=message):
        IdempotentOrderPipeline(fresh_stack, "Pipeline", **props)


def test_override_errors_are_reported_with_the_other_prop_errors(fresh_stack: cdk.Stack) -> None:
    # GIVEN a bad scalar prop, an owned override key and an existing queue without its DLQ
    # WHEN the construct is created
    with pytest.raises(ValueError, match="invalid props") as raised:
        IdempotentOrderPipeline(
            fresh_stack,
            "Pipeline",
            memory_size=1,
            topic_props={"master_key": None},
            existing_queue=aws_sqs.Queue(fresh_stack, "Q"),
        )
    # THEN one error lists all three
    message = str(raised.value)
    assert "memory_size=1" in message
    assert "topic_props['master_key']" in message
    assert "existing_queue without existing_dead_letter_queue" in message


def test_existing_resource_errors_are_reported_with_the_other_prop_errors(fresh_stack: cdk.Stack) -> None:
    # GIVEN a bad scalar prop, an owned override key and an existing table with the wrong key
    # WHEN the construct is created
    with pytest.raises(ValueError, match="invalid props") as raised:
        IdempotentOrderPipeline(
            fresh_stack,
            "Pipeline",
            memory_size=1,
            queue_props={"fifo": True},
            existing_order_records_table=table(fresh_stack, "O", "id"),
        )
    # THEN one error lists all three
    message = str(raised.value)
    assert "memory_size=1" in message
    assert "queue_props['fifo']=True: not overridable" in message
    assert "existing_order_records_table has partition key 'id'" in message


def test_existing_queue_with_visibility_below_six_times_the_timeout_warns(fresh_stack: cdk.Stack) -> None:
    # GIVEN an existing queue whose visibility timeout is 60 s for a 30 s function
    dead_letter_queue = dlq(fresh_stack)
    IdempotentOrderPipeline(
        fresh_stack,
        "Pipeline",
        existing_queue=queue(fresh_stack, dead_letter_queue, visibility_timeout=seconds(60)),
        existing_dead_letter_queue=dead_letter_queue,
    )
    # WHEN the annotations are read
    # THEN a warning names the value and the recommendation
    Annotations.from_stack(fresh_stack).has_warning(
        "/TestStack/Pipeline",
        Match.string_like_regexp(
            r"existing_queue has visibility timeout 1 minute, below 6x function_timeout \(3 minutes\)"
        ),
    )


def test_brownfield_configuration_uses_every_imported_resource(brownfield_pipeline: Synthesized) -> None:
    # GIVEN the brownfield app (existing queue, DLQ, tables, key imported)
    template = brownfield_pipeline.template_json
    # WHEN its resources are listed
    # THEN it creates no queue and no table of its own, and consumes the imported queue
    assert resources_of_type(template, "AWS::SQS::Queue") == {}
    assert resources_of_type(template, "AWS::DynamoDB::Table") == {}
    brownfield_pipeline.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "EventSourceArn": "arn:aws:sqs:us-east-1:111111111111:orders",
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
        },
    )


def _construct_page_snippet() -> str:
    """The bring-your-own example of docs/construct.md, as written."""
    page = (REPO / "docs" / "construct.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    [snippet] = [block for block in blocks if "existing_queue=" in block]
    return snippet


def test_the_docs_bring_your_own_example_synthesizes_strictly_with_real_values() -> None:
    # GIVEN the docs' example in a stack with real values: imported ARNs, an imported customer managed
    # key, a VPC of the app
    app = cdk.App()
    stack = cdk.Stack(app, "Shop", env=cdk.Environment(account="111122223333", region="eu-west-1"))
    namespace: dict[str, Any] = {
        "self": stack,
        "IdempotentOrderPipeline": IdempotentOrderPipeline,
        "Annotations": cdk.Annotations,
        "sqs": aws_sqs,
        "dynamodb": aws_dynamodb,
        "orders_arn": "arn:aws:sqs:eu-west-1:111122223333:orders",
        "orders_dlq_arn": "arn:aws:sqs:eu-west-1:111122223333:orders-dlq",
        "key": aws_kms.Key.from_key_arn(
            stack, "Key", "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
        ),
        "vpc": aws_ec2.Vpc(stack, "Vpc", max_azs=2),
    }
    # WHEN it runs as written and the app is synthesized
    exec(compile(_construct_page_snippet(), "docs/construct.md", "exec"), namespace)  # noqa: S102  (our own docs)
    assembly = app.synth()
    # THEN nothing is left for `cdk synth --strict` to fail on: no warning, no error
    messages = assembly.get_stack_artifact(stack.artifact_id).messages
    assert namespace["pipeline"].function is not None
    left = [(message.level.value, str(message.entry.data)) for message in messages if message.level.value != "info"]
    assert left == []
