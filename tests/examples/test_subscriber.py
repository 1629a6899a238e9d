"""The subscriber kit: every notification delivered two and three times, a crash at every call,
effects that fail halfway, copies handled at once - and one effect per ``event_id``."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from moto import mock_aws
from order_subscriber.dedup import Deduplicator
from order_subscriber.handler import Subscriber, shipment_writes
from order_subscriber.notification import OrderNotification

from idempotent_order_pipeline._lambda_asset.order_consumer.notifier import Notification, Notifier
from tests.consumer.harness import ArmedFault, Crash, FaultBoard, GuardedClient, client_error

LEASE_SECONDS = 30.0
VISIBILITY_TIMEOUT_SECONDS = 180.0  # > the lease: a redelivery after a crash finds the claim expired


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def table(dynamodb: Any, name: str, key: str) -> str:
    dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


def counting_effect(effects_table: str) -> Callable[[OrderNotification], list[dict[str, Any]]]:
    """An effect whose every application is counted (a duplicate effect would show as 2)."""

    def effect(notification: OrderNotification) -> list[dict[str, Any]]:
        return [
            {
                "Update": {
                    "TableName": effects_table,
                    "Key": {"order_id": {"S": notification.order_id}},
                    "UpdateExpression": "ADD applied :one SET event_id = :event",
                    "ExpressionAttributeValues": {":one": {"N": "1"}, ":event": {"S": notification.event_id}},
                }
            }
        ]

    return effect


@dataclass
class SubscriberWorld:
    """Tables of one subscriber, its handler on guarded clients, and a fake clock."""

    dynamodb: Any
    prefix: str
    board: FaultBoard = field(default_factory=FaultBoard)
    clock: Clock = field(default_factory=Clock)

    def __post_init__(self) -> None:
        self.dedup_table = table(self.dynamodb, self.prefix + "dedup", "event_id")
        self.effects_table = table(self.dynamodb, self.prefix + "effects", "order_id")
        client: Any = GuardedClient(self.dynamodb, self.board)
        self.dedup = Deduplicator(client=client, table=self.dedup_table, lease_seconds=LEASE_SECONDS, clock=self.clock)

    def subscriber(
        self, effect: Callable[[OrderNotification], Sequence[Mapping[str, Any]]] | None = None
    ) -> Subscriber:
        return Subscriber(dedup=self.dedup, effect=effect or counting_effect(self.effects_table))

    def deliver_until_done(
        self, records: list[dict[str, Any]], subscriber: Subscriber, *, seed: int = 0, max_rounds: int = 60
    ) -> int:
        """Deliver like SQS: shuffled batches of 10; a crash or failure redelivers after the visibility timeout."""
        rng = random.Random(seed)
        pending, crashes = list(records), 0
        for _ in range(max_rounds):
            if not pending:
                return crashes
            rng.shuffle(pending)
            redeliver: list[dict[str, Any]] = []
            for start in range(0, len(pending), 10):
                batch = pending[start : start + 10]
                try:
                    failed = set(subscriber.handle(batch))
                except Crash:
                    crashes += 1
                    redeliver.extend(batch)
                    continue
                redeliver.extend(record for record in batch if record["messageId"] in failed)
            pending = redeliver
            self.clock.now += VISIBILITY_TIMEOUT_SECONDS
        raise AssertionError(f"{len(pending)} records still not acknowledged")

    def effects(self) -> Counter[str]:
        items = self.dynamodb.scan(TableName=self.effects_table, ConsistentRead=True)["Items"]
        return Counter({item["event_id"]["S"]: int(item["applied"]["N"]) for item in items})

    def statuses(self) -> Counter[str]:
        items = self.dynamodb.scan(TableName=self.dedup_table, ConsistentRead=True)["Items"]
        return Counter(item["status"]["S"] for item in items)


@pytest.fixture
def aws() -> Iterator[dict[str, Any]]:
    with mock_aws():
        yield {"dynamodb": boto3.client("dynamodb"), "sns": boto3.client("sns"), "sqs": boto3.client("sqs")}


def delivered_copies(aws: Mapping[str, Any], events: int, *, raw: bool = False) -> list[dict[str, Any]]:
    """Real notifications: published by the pipeline's notifier to SNS, 2 or 3 times each, read from a
    subscribed SQS queue and shaped as Lambda SQS records (each copy its own message id)."""
    sns, sqs = aws["sns"], aws["sqs"]
    topic = sns.create_topic(Name=f"orders-{raw}")["TopicArn"]
    queue = sqs.create_queue(QueueName=f"subscriber-{raw}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(
        TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true" if raw else "false"}
    )
    notifier = Notifier(client=sns, topic_arn=topic)
    notifications = [Notification(f"event-{i}", f"order-{i}", f"sha-{i}") for i in range(events)]
    for copy in range(3):
        again = notifications if copy < 2 else notifications[::2]  # every one twice, every other three times
        assert all(result.ok for result in notifier.publish_batch(again))
    records = []
    while batch := sqs.receive_message(
        QueueUrl=queue, MaxNumberOfMessages=10, MessageAttributeNames=["All"], AttributeNames=["All"]
    ).get("Messages", []):
        for message in batch:
            records.append(
                {
                    "messageId": message["MessageId"],
                    "body": message["Body"],
                    "messageAttributes": {
                        name: {"stringValue": value["StringValue"], "dataType": value["DataType"]}
                        for name, value in message.get("MessageAttributes", {}).items()
                    },
                    "attributes": message.get("Attributes", {}),
                }
            )
            sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
    assert len(records) == events * 2 + (events + 1) // 2
    return records


@pytest.mark.parametrize("raw", [False, True], ids=["sns-envelope", "raw-delivery"])
def test_two_and_three_copies_give_one_effect_each(aws: dict[str, Any], raw: bool) -> None:
    # GIVEN 6 notifications, each delivered two or three times
    records = delivered_copies(aws, 6, raw=raw)
    world = SubscriberWorld(aws["dynamodb"], prefix=f"copies-{raw}-")
    # WHEN they are all delivered (copies of one event may share a batch)
    crashes = world.deliver_until_done(records, world.subscriber())
    # THEN each event had exactly one effect and is marked done
    assert crashes == 0
    assert world.effects() == Counter({f"event-{i}": 1 for i in range(6)})
    assert world.statuses() == Counter({"done": 6})


@pytest.mark.slow
@pytest.mark.parametrize("after_success", [False, True], ids=["crash-before-call", "crash-after-call"])
def test_a_crash_at_every_call_still_gives_one_effect_per_event(aws: dict[str, Any], after_success: bool) -> None:
    # GIVEN 3 notifications delivered two or three times, and the calls a clean delivery makes
    records = delivered_copies(aws, 3)
    probe = SubscriberWorld(aws["dynamodb"], prefix=f"probe-{after_success}-")
    probe.deliver_until_done(records, probe.subscriber())
    calls = probe.board.total
    assert calls >= 8
    crashed = 0

    for at in range(1, calls + 1):
        # GIVEN fresh tables and a crash at the at-th call (before it is sent, or after it succeeded)
        world = SubscriberWorld(aws["dynamodb"], prefix=f"crash-{after_success}-{at}-")
        fault = world.board.arm(ArmedFault(Crash(), at=at, after_success=after_success))
        # WHEN every copy is delivered until acknowledged
        crashes = world.deliver_until_done(records, world.subscriber())
        # THEN the at-th call was reached and crashed (unless, crashing after success, that call
        # itself failed: a lost claim answers with an error), and still each event had one effect
        assert world.board.total >= at, at
        assert crashes == fault.fired == (fault.fired if after_success else 1), at
        crashed += crashes
        assert world.effects() == Counter({f"event-{i}": 1 for i in range(3)}), at
        assert world.statuses() == Counter({"done": 3}), at
    # (crashing after success: every call but the lost claims, which fail with an error, crashed)
    assert crashed == calls if not after_success else calls / 2 < crashed < calls


def test_an_effect_that_fails_halfway_is_retried_and_applied_once(aws: dict[str, Any]) -> None:
    # GIVEN an effect whose dependency fails on its first two attempts for every event
    records = delivered_copies(aws, 4)
    world = SubscriberWorld(aws["dynamodb"], prefix="halfway-")
    attempts: Counter[str] = Counter()
    inner = counting_effect(world.effects_table)

    def flaky(notification: OrderNotification) -> list[dict[str, Any]]:
        attempts[notification.event_id] += 1
        if attempts[notification.event_id] <= 2:
            raise ConnectionError("warehouse API down")
        return inner(notification)

    # WHEN every copy is delivered until acknowledged
    world.deliver_until_done(records, world.subscriber(flaky))
    # THEN each event's effect was tried 3 times and applied once; the claims were released, not leaked
    assert attempts == Counter({f"event-{i}": 3 for i in range(4)})
    assert world.effects() == Counter({f"event-{i}": 1 for i in range(4)})
    assert world.statuses() == Counter({"done": 4})


def test_a_copy_arriving_while_another_holds_the_claim_waits_then_is_skipped(aws: dict[str, Any]) -> None:
    # GIVEN a claim held by a copy that crashed halfway, its lease not yet expired
    [first, second, *_] = [r for r in delivered_copies(aws, 1)]
    world = SubscriberWorld(aws["dynamodb"], prefix="busy-")
    world.board.arm(ArmedFault(Crash(), operation="transact_write_items"))
    with pytest.raises(Crash):
        world.subscriber().handle([first])
    world.board.disarm()
    # WHEN another copy arrives before the lease ends
    # THEN it is not acknowledged (SQS redelivers it) and nothing was applied
    assert world.subscriber().handle([second]) == [second["messageId"]]
    assert world.effects() == Counter()
    # WHEN it comes back after the lease / THEN it claims it, applies it once; the crashed one's copy is skipped
    world.clock.now += LEASE_SECONDS + 1
    assert world.subscriber().handle([second]) == []
    assert world.subscriber().handle([first]) == []
    assert world.effects() == Counter({"event-0": 1})


def test_a_throttled_claim_is_redelivered_not_lost(aws: dict[str, Any]) -> None:
    # GIVEN DynamoDB throttling the claim of one copy
    [record, *_] = delivered_copies(aws, 1)
    world = SubscriberWorld(aws["dynamodb"], prefix="throttle-")
    world.board.arm(
        ArmedFault(client_error("PutItem", "ProvisionedThroughputExceededException"), operation="put_item", times=1)
    )
    # WHEN it is delivered twice / THEN the first is reported for redelivery, the second applies it
    assert world.subscriber().handle([record]) == [record["messageId"]]
    assert world.subscriber().handle([record]) == []
    assert world.effects() == Counter({"event-0": 1})


def test_a_message_that_is_not_a_notification_is_left_to_the_queues_dlq(aws: dict[str, Any]) -> None:
    # GIVEN / WHEN a record that is not the pipeline's notification / THEN it is never acknowledged
    world = SubscriberWorld(aws["dynamodb"], prefix="junk-")
    junk = {"messageId": "m-1", "body": json.dumps({"hello": "world"}), "messageAttributes": {}}
    assert world.subscriber().handle([junk]) == ["m-1"]
    assert world.statuses() == Counter()


def test_the_examples_effect_writes_one_shipment_row_in_the_done_transaction(aws: dict[str, Any]) -> None:
    # GIVEN the example's own effect (one shipment row per order)
    records = delivered_copies(aws, 2)
    world = SubscriberWorld(aws["dynamodb"], prefix="shipments-")
    shipments = table(aws["dynamodb"], "shipments-rows", "order_id")
    # WHEN all copies are delivered
    world.deliver_until_done(records, world.subscriber(shipment_writes(shipments)))
    # THEN there is one shipment per order, carrying its event id
    rows = aws["dynamodb"].scan(TableName=shipments)["Items"]
    assert sorted((r["order_id"]["S"], r["event_id"]["S"]) for r in rows) == [
        ("order-0", "event-0"),
        ("order-1", "event-1"),
    ]
