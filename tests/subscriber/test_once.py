"""The helper's guarantees on moto: one effect per order whatever fails, races or runs late.

Example (a), a counter incremented in the done transaction, ends at exactly 1 per order; example
(b), an external call keyed by the claim's token, is made for every order and at most once per
lease. ``test_weakened_helper.py`` shows each scenario failing against a weakened helper.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import boto3
import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer.notifier import Notification, Notifier
from idempotent_order_pipeline._subscriber_layer.python.idempotent_subscriber import (
    Claim,
    EffectRefused,
    NotANotification,
    OncePerEvent,
    OrderNotification,
    TooManyWrites,
    parse,
)
from tests.consumer.harness import ArmedFault, client_error
from tests.subscriber import scenarios
from tests.subscriber.harness import SubscriberWorld, copies, notification_record

EFFECTS = ("counting", "paying")


@pytest.mark.parametrize("kind", scenarios.FAULTS)
@pytest.mark.parametrize("effect", EFFECTS)
def test_a_failure_at_every_call_still_gives_one_effect(dynamodb: Any, effect: str, kind: str) -> None:
    # GIVEN 3 notifications delivered 2 or 3 times, and the calls a clean delivery makes
    # WHEN each call in turn fails (crash before it, crash after it, an error answer) and SQS redelivers
    # THEN the counter ends at exactly 1 per order / every order is charged, each lease's key once
    scenarios.every_call_fails_once(dynamodb, effect, kind)


@pytest.mark.parametrize("effect", EFFECTS)
def test_three_copies_at_once_give_one_effect(dynamodb: Any, effect: str) -> None:
    # GIVEN three copies of each notification, handled by three threads at the same moment
    # WHEN they race for the claim and the losers are redelivered
    # THEN one effect per order (the counter at 1; the external call once per lease)
    scenarios.three_copies_at_once(dynamodb, effect)


def test_a_lease_that_runs_out_mid_effect_is_taken_over_and_applied_once(dynamodb: Any) -> None:
    # GIVEN a copy whose lease runs out while its effect runs, and a second copy that takes the claim over
    # WHEN the first copy's transaction comes after the takeover
    # THEN it fails its condition, the second copy's effect is the one applied, exactly once
    scenarios.lease_runs_out_mid_effect(dynamodb)


@pytest.mark.parametrize("raw", [True, False], ids=["raw-delivery", "sns-envelope"])
def test_notifications_published_by_the_pipeline_are_read_raw_or_enveloped(dynamodb: Any, raw: bool) -> None:
    # GIVEN notifications published by the pipeline's notifier, delivered through SNS to SQS (raw or not)
    sns, sqs = boto3.client("sns"), boto3.client("sqs")
    topic = sns.create_topic(Name=f"orders-{raw}")["TopicArn"]
    queue = sqs.create_queue(QueueName=f"subscriber-{raw}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": str(raw).lower()})
    notifications = [Notification(f"event-{i}", f"order-{i}", f"sha-{i}") for i in range(3)]
    for _ in range(2):
        assert all(result.ok for result in Notifier(client=sns, topic_arn=topic).publish_batch(notifications))
    records = [
        {
            "messageId": message["MessageId"],
            "body": message["Body"],
            "messageAttributes": {
                name: {"stringValue": value["StringValue"], "dataType": value["DataType"]}
                for name, value in message.get("MessageAttributes", {}).items()
            },
        }
        for message in sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, MessageAttributeNames=["All"])[
            "Messages"
        ]
    ]
    assert len(records) == 6
    # WHEN the subscriber handles every copy
    world = SubscriberWorld(dynamodb, prefix=f"sns-{raw}-")
    world.deliver_until_done(records, world.counting())
    # THEN each order was counted once, and the body and attributes were read
    assert world.counters() == Counter({f"order-{i}": 1 for i in range(3)})
    first = parse(records[0])
    assert first.body["payload_sha256"] == f"sha-{first.order_id[len('order-') :]}"
    assert first.attributes["event_id"] == first.event_id


def test_an_effect_that_raises_releases_its_claim_for_the_next_copy(dynamodb: Any) -> None:
    # GIVEN an effect whose dependency fails twice per order
    world = SubscriberWorld(dynamodb, prefix="flaky-")
    attempts: Counter[str] = Counter()
    counted = world.counting()

    def flaky(notification: OrderNotification, claim: Claim) -> Any:
        attempts[notification.order_id] += 1
        if attempts[notification.order_id] <= 2:
            raise ConnectionError("warehouse API down")
        return counted._effect(notification, claim)

    handler = OncePerEvent(flaky, dedup=world.dedup)
    record = notification_record("event-0", "order-0")
    # WHEN the same copy is redelivered at once (no lease to wait for: the claim was released)
    outcomes = [handler.handle([record]) for _ in range(3)]
    # THEN the first two are reported for redelivery, the third applies the effect once
    assert outcomes == [["m-event-0-0"], ["m-event-0-0"], []]
    assert [r["ConditionExpression"] for r in world.board.requests["delete_item"]] == [
        "#status = :in_progress AND claim_token = :token"
    ] * 2
    assert world.counters() == Counter({"order-0": 1})


def test_a_copy_arriving_while_another_holds_the_claim_is_redelivered(dynamodb: Any) -> None:
    # GIVEN a live claim on event-0
    world = SubscriberWorld(dynamodb, prefix="busy-")
    assert isinstance(world.dedup.claim("event-0"), Claim)
    # WHEN a copy arrives / THEN it is reported for redelivery and nothing is applied
    assert world.counting().handle([notification_record("event-0", "order-0")]) == ["m-event-0-0"]
    assert world.counters() == Counter()


def test_a_refused_effect_write_commits_nothing_and_is_retried(dynamodb: Any) -> None:
    # GIVEN an effect whose own write carries a condition that fails
    world = SubscriberWorld(dynamodb, prefix="refused-")

    def refused(notification: OrderNotification, claim: Claim) -> list[dict[str, Any]]:
        return [
            {
                "Put": {
                    "TableName": world.counters_table,
                    "Item": {"order_id": {"S": notification.order_id}},
                    "ConditionExpression": "attribute_exists(order_id)",
                }
            }
        ]

    record = notification_record("event-0", "order-0")
    claim = world.dedup.claim("event-0")
    assert isinstance(claim, Claim)
    # WHEN its transaction is sent / THEN EffectRefused, and not even the done mark was written
    with pytest.raises(EffectRefused):
        world.dedup.complete(claim, refused(parse(record), claim))
    assert world.statuses() == Counter({"in_progress": 1})
    # WHEN the handler meets it / THEN the record is redelivered and the claim released
    world.dedup.release(claim)
    assert OncePerEvent(refused, dedup=world.dedup).handle([record]) == ["m-event-0-0"]
    assert world.statuses() == Counter()


def test_more_writes_than_a_transaction_holds_are_refused_before_any_call(dynamodb: Any) -> None:
    # GIVEN a claim and 100 writes (the done mark takes the 100th place)
    world = SubscriberWorld(dynamodb, prefix="many-")
    claim = world.dedup.claim("event-0")
    assert isinstance(claim, Claim)
    writes = [{"Put": {"TableName": world.counters_table, "Item": {"order_id": {"S": f"o-{i}"}}}} for i in range(100)]
    # WHEN it completes / THEN TooManyWrites names the limit, and no transaction was sent
    with pytest.raises(TooManyWrites, match="at most 99"):
        world.dedup.complete(claim, writes)
    assert "transact_write_items" not in world.board.calls


def test_a_throttled_claim_is_redelivered(dynamodb: Any) -> None:
    # GIVEN DynamoDB throttling the first claim
    world = SubscriberWorld(dynamodb, prefix="throttle-")
    world.board.arm(
        ArmedFault(client_error("PutItem", "ProvisionedThroughputExceededException"), operation="put_item", times=1)
    )
    record = notification_record("event-0", "order-0")
    # WHEN the copy is delivered twice / THEN redelivered once, then applied once
    assert world.counting().handle([record]) == ["m-event-0-0"]
    assert world.counting().handle([record]) == []
    assert world.counters() == Counter({"order-0": 1})


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        '["a list"]',
        '{"order_id": "o-1"}',
        '{"event_id": "", "order_id": "o-1"}',
        '{"event_id": "e-1", "order_id": 7}',
    ],
)
def test_a_record_that_is_not_a_notification_is_left_to_the_dead_letter_queue(dynamodb: Any, body: str) -> None:
    # GIVEN a record whose body is not a notification
    world = SubscriberWorld(dynamodb, prefix="junk-")
    record = {"messageId": "m-1", "body": body, "messageAttributes": {}}
    # WHEN it is parsed and handled / THEN NotANotification, never acknowledged, no claim made
    with pytest.raises(NotANotification):
        parse(record)
    assert world.counting()({"Records": [record]}) == {"batchItemFailures": [{"itemIdentifier": "m-1"}]}
    assert "put_item" not in world.board.calls


def test_an_event_id_attribute_that_disagrees_with_the_body_is_refused() -> None:
    # GIVEN a raw record whose event_id attribute differs from its body's
    record = notification_record("event-0", "order-0")
    record["messageAttributes"]["event_id"]["stringValue"] = "event-other"
    # WHEN / THEN it is not a notification
    with pytest.raises(NotANotification, match="differ"):
        parse(record)


def test_a_full_order_body_is_read_whole() -> None:
    # GIVEN a raw notification whose body is the stored order (notification_body="order"), with a Type field
    record = {
        "messageId": "m-1",
        "body": '{"event_id": "e-1", "order_id": "o-1", "Type": "Notification", "amount": 12.5}',
        "messageAttributes": {"country": {"stringValue": "DE", "dataType": "String"}},
    }
    # WHEN it is parsed / THEN it is read as the body itself (not an envelope), fields and attributes kept
    notification = parse(record)
    assert (notification.event_id, notification.order_id) == ("e-1", "o-1")
    assert notification.body["amount"] == 12.5
    assert notification.attributes == {"country": "DE"}


def test_copies_in_one_batch_are_a_claim_and_duplicates(dynamodb: Any) -> None:
    # GIVEN two copies of each of 3 notifications in one batch
    world = SubscriberWorld(dynamodb, prefix="batch-")
    # WHEN the batch is handled / THEN nothing is redelivered, one effect each, the duplicates only claimed
    assert world.counting()({"Records": copies(3)}) == {"batchItemFailures": []}
    assert world.counters() == Counter({f"order-{i}": 1 for i in range(3)})
    assert world.board.calls == Counter({"put_item": 6, "transact_write_items": 3})


def test_a_fifo_group_stops_at_its_first_failure(dynamodb: Any) -> None:
    # GIVEN a FIFO batch: group A's first record is busy (another copy holds its claim), then A's and B's next
    world = SubscriberWorld(dynamodb, prefix="fifo-")
    assert isinstance(world.dedup.claim("event-0"), Claim)
    records = [
        notification_record("event-0", "order-0"),
        notification_record("event-1", "order-0"),
        notification_record("event-2", "order-2"),
    ]
    for record, group in zip(records, ("order-0", "order-0", "order-2"), strict=True):
        record["attributes"] = {"MessageGroupId": group}
    # WHEN the batch is handled
    failed = world.counting().handle(records)
    # THEN group A's later record is redelivered unhandled (its order kept), group B's is handled
    assert failed == ["m-event-0-0", "m-event-1-0"]
    assert world.counters() == Counter({"order-2": 1})
