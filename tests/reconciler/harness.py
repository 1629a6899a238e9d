"""A moto world for the reconciler: the consumer's tables (with the pending index), topic and subscriber.

Pending records are made the way production makes them: by the consumer's own transaction
(:meth:`ReconcilerWorld.pend` writes through ``OrderStore.record`` with a chosen creation time;
:meth:`ReconcilerWorld.crash_consumer_before_publish` runs the consumer's handler and kills it at
its first SNS call). The reconciler's clients go through the consumer tests' ``GuardedClient``, so
every call is counted and can be made to fail or crash.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import boto3

from idempotent_order_pipeline._lambda_asset.order_consumer import handler as consumer_handler
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.keys import DEFAULT_IDENTITY_FIELDS
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.message import parse_order_message
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import (
    CHECKPOINT_EVENT_ID,
    PENDING_INDEX_NAME,
    PENDING_SHARD_ATTRIBUTE,
    PENDING_SINCE_ATTRIBUTE,
    every_shard,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.notifier import Notifier
from idempotent_order_pipeline._lambda_asset.order_consumer.pending_records import PendingIndex
from idempotent_order_pipeline._lambda_asset.order_consumer.reconciliation import Reconciler
from idempotent_order_pipeline._lambda_asset.order_consumer.runtime import Clients
from idempotent_order_pipeline._lambda_asset.order_consumer.store import OrderStore
from tests.consumer.harness import ArmedFault, Crash, FakeContext, FaultBoard, GuardedClient, plain, sqs_record

__all__ = ["ArmedFault", "Crash", "FakeContext", "ReconcilerWorld", "order"]

TTL_SECONDS = 2_592_000


def order(number: int, **fields: Any) -> dict[str, Any]:
    """A valid order body with a distinct order id (and so a distinct derived event id)."""
    return {"order_id": f"order-{number:05d}", "amount": number, **fields}


def events_table_definition(name: str) -> dict[str, Any]:
    """``processed_events`` as the construct defines it: key ``event_id``, the pending index on it."""
    return {
        "TableName": name,
        "KeySchema": [{"AttributeName": "event_id", "KeyType": "HASH"}],
        "AttributeDefinitions": [
            {"AttributeName": "event_id", "AttributeType": "S"},
            {"AttributeName": PENDING_SHARD_ATTRIBUTE, "AttributeType": "S"},
            {"AttributeName": PENDING_SINCE_ATTRIBUTE, "AttributeType": "N"},
        ],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": PENDING_INDEX_NAME,
                "KeySchema": [
                    {"AttributeName": PENDING_SHARD_ATTRIBUTE, "KeyType": "HASH"},
                    {"AttributeName": PENDING_SINCE_ATTRIBUTE, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ],
        "BillingMode": "PAY_PER_REQUEST",
    }


def add_pending_index(dynamodb: Any, table: str) -> None:
    """Add the construct's pending index to a table created without it (existing items are indexed)."""
    definition = events_table_definition(table)
    dynamodb.update_table(
        TableName=table,
        AttributeDefinitions=definition["AttributeDefinitions"],
        GlobalSecondaryIndexUpdates=[{"Create": definition["GlobalSecondaryIndexes"][0]}],
    )


@dataclass
class ReconcilerWorld:
    """Tables, topic, subscriber queue and DLQ of one test, inside ``mock_aws``."""

    prefix: str = ""
    fifo: bool = False
    board: FaultBoard = field(default_factory=FaultBoard)
    #: Plain boto3 clients to reuse across the worlds of one test (creating clients is the slow part).
    aws: Clients | None = None

    def __post_init__(self) -> None:
        aws = self.aws or Clients(dynamodb=boto3.client("dynamodb"), sns=boto3.client("sns"), sqs=boto3.client("sqs"))
        self.dynamodb, self.sns, self.sqs = aws.dynamodb, aws.sns, aws.sqs
        suffix = ".fifo" if self.fifo else ""
        self.events_table = self.prefix + "processed-events"
        self.orders_table = self.prefix + "order-records"
        self.dynamodb.create_table(**events_table_definition(self.events_table))
        self.dynamodb.create_table(
            TableName=self.orders_table,
            KeySchema=[{"AttributeName": "order_id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "order_id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        fifo_queue = {"FifoQueue": "true"} if self.fifo else {}
        self.dlq_url = self.sqs.create_queue(QueueName=self.prefix + "dlq" + suffix, Attributes=fifo_queue)["QueueUrl"]
        self.topic_arn = self.sns.create_topic(
            Name=self.prefix + "orders" + suffix, Attributes={"FifoTopic": "true"} if self.fifo else {}
        )["TopicArn"]
        self.subscriber_url = self.sqs.create_queue(
            QueueName=self.prefix + "subscriber" + suffix, Attributes=fifo_queue
        )["QueueUrl"]
        arn = self.sqs.get_queue_attributes(QueueUrl=self.subscriber_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        self.sns.subscribe(
            TopicArn=self.topic_arn, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "false"}
        )
        self.env = {
            "PROCESSED_EVENTS_TABLE": self.events_table,
            "ORDER_RECORDS_TABLE": self.orders_table,
            "TOPIC_ARN": self.topic_arn,
            "DEAD_LETTER_QUEUE_URL": self.dlq_url,
            "RECORD_TTL_SECONDS": str(TTL_SECONDS),
        }
        self.guarded_dynamodb: Any = GuardedClient(self.dynamodb, self.board)
        self.guarded_sns: Any = GuardedClient(self.sns, self.board)
        self.notifications: list[dict[str, Any]] = []

    # --- making pending records ------------------------------------------------------------------

    def pend(self, orders: Iterable[dict[str, Any]], *, created_at: float) -> list[str]:
        """Record each order through the consumer's own transaction, as if at ``created_at``; no publish."""
        store = OrderStore(
            client=self.dynamodb,
            processed_events_table=self.events_table,
            order_records_table=self.orders_table,
            record_ttl_seconds=TTL_SECONDS,
            clock=lambda: created_at,
        )
        event_ids = []
        for body in orders:
            message = parse_order_message(json.dumps(body), {}, DEFAULT_IDENTITY_FIELDS)
            assert store.record(message) is None
            event_ids.append(message.event_id)
        return event_ids

    def pend_many(self, orders: Iterable[dict[str, Any]], *, created_at: float) -> list[str]:
        """Like :meth:`pend` for a big backlog: the consumer's transaction items, written with BatchWriteItem.

        ``OrderStore.record`` builds its transaction against a capturing client; the items it would
        put are then written in batches (moto's transactions copy whole tables, too slow for
        hundreds of records). The items are exactly the consumer's, pending index attribute included.
        """
        capture = _CapturingClient()
        store = OrderStore(
            client=capture,  # type: ignore[arg-type]
            processed_events_table=self.events_table,
            order_records_table=self.orders_table,
            record_ttl_seconds=TTL_SECONDS,
            clock=lambda: created_at,
        )
        event_ids = []
        for body in orders:
            message = parse_order_message(json.dumps(body), {}, DEFAULT_IDENTITY_FIELDS)
            assert store.record(message) is None
            event_ids.append(message.event_id)
        for start in range(0, len(capture.puts), 25):
            requests: dict[str, list[dict[str, Any]]] = {}
            for table, item in capture.puts[start : start + 25]:
                requests.setdefault(table, []).append({"PutRequest": {"Item": item}})
            assert not self.dynamodb.batch_write_item(RequestItems=requests).get("UnprocessedItems")  # type: ignore[arg-type]
        return event_ids

    def crash_consumer_before_publish(self, orders: Sequence[dict[str, Any]]) -> None:
        """Run the consumer's handler on the orders and kill it at its first SNS call (after the transaction)."""
        board = FaultBoard()
        board.arm(ArmedFault(Crash()))
        # DynamoDB behind a lock of its own (no fault armed there), so the consumer's threads never
        # call moto's DynamoDB at the same time.
        dynamodb = GuardedClient(self.dynamodb, FaultBoard())
        clients = Clients(dynamodb=dynamodb, sns=GuardedClient(self.sns, board), sqs=self.sqs)  # type: ignore[arg-type]
        consumer_handler.configure(clients, self.env)
        try:
            for body in orders:
                try:
                    consumer_handler.handler({"Records": [sqs_record(body)]}, FakeContext())
                except Crash:
                    continue
                raise AssertionError("the consumer was expected to crash at its SNS call")
        finally:
            consumer_handler.configure()

    def _guarded(self, board: FaultBoard) -> Clients:
        """The world's clients, each call passing ``board`` (its lock keeps the consumer's threads off
        moto's DynamoDB at the same time: see tests.consumer.harness)."""
        return Clients(
            dynamodb=GuardedClient(self.dynamodb, board),  # type: ignore[arg-type]
            sns=GuardedClient(self.sns, board),  # type: ignore[arg-type]
            sqs=GuardedClient(self.sqs, board),  # type: ignore[arg-type]
        )

    def deliver_expecting_a_park(self, body: dict[str, Any]) -> None:
        """Run the consumer's handler on one message it must park in the DLQ (and acknowledge)."""
        board = FaultBoard()
        consumer_handler.configure(self._guarded(board), self.env)
        try:
            response = consumer_handler.handler({"Records": [sqs_record(body)]}, FakeContext())
        finally:
            consumer_handler.configure()
        assert response["batchItemFailures"] == []
        assert "send_message" in board.requests or "send_message_batch" in board.requests, "not parked"
        assert "transact_write_items" not in board.requests

    def deliver_normally(self, orders: Sequence[dict[str, Any]]) -> None:
        """Run the consumer's handler on the orders with nothing failing (recorded, published, sent)."""
        # Guarded (with no fault armed) for the board's lock: the consumer's threads must not call
        # moto's DynamoDB at the same time (see tests.consumer.harness).
        board = FaultBoard()
        consumer_handler.configure(self._guarded(board), self.env)
        try:
            response = consumer_handler.handler({"Records": [sqs_record(body) for body in orders]}, FakeContext())
        finally:
            consumer_handler.configure()
        assert response["batchItemFailures"] == []

    # --- the reconciler --------------------------------------------------------------------------

    def reconciler(
        self,
        *,
        reconcile_after_seconds: float = 900,
        clock: Callable[[], float] = time.time,
        **options: Any,
    ) -> Reconciler:
        """The reconciler wired as ``build_reconciler`` wires it, on the guarded clients.

        Without the index's propagation margin unless ``index_margin_seconds`` is given (moto's index
        has no lag): a record is found once it is older than ``reconcile_after_seconds``.
        """
        options.setdefault("index_margin_seconds", 0)
        return Reconciler(
            index=PendingIndex(
                client=self.guarded_dynamodb,
                processed_events_table=self.events_table,
                order_records_table=self.orders_table,
            ),
            notifier=Notifier(client=self.guarded_sns, topic_arn=self.topic_arn),
            store=OrderStore(
                client=self.guarded_dynamodb,
                processed_events_table=self.events_table,
                order_records_table=self.orders_table,
                record_ttl_seconds=TTL_SECONDS,
            ),
            reconcile_after_seconds=reconcile_after_seconds,
            clock=clock,
            **options,
        )

    # --- reading the world -----------------------------------------------------------------------

    def records(self) -> dict[str, dict[str, Any]]:
        """The state records (the reconciler's checkpoint item left out: :meth:`checkpoints`)."""
        items = self.dynamodb.scan(TableName=self.events_table, ConsistentRead=True)["Items"]
        return {
            str(plain(item)["event_id"]): plain(item) for item in items if item["event_id"]["S"] != CHECKPOINT_EVENT_ID
        }

    def checkpoints(self) -> dict[str, Any]:
        """The reconciler's stored checkpoints (shard -> created_at) and revision; empty when never written."""
        item = self.dynamodb.get_item(
            TableName=self.events_table, Key={"event_id": {"S": CHECKPOINT_EVENT_ID}}, ConsistentRead=True
        ).get("Item")
        return {} if item is None else plain(item)

    def order_rows(self) -> dict[str, dict[str, Any]]:
        items = self.dynamodb.scan(TableName=self.orders_table, ConsistentRead=True)["Items"]
        return {str(plain(item)["order_id"]): plain(item) for item in items}

    def pending_records(self) -> set[str]:
        """The event ids of the records still ``pending``."""
        return {event_id for event_id, record in self.records().items() if record.get("status") == "pending"}

    def pending_in_index(self) -> set[str]:
        """Every event id the index lists (pending or sent: the mark leaves the entry)."""
        found: set[str] = set()
        for shard in every_shard():
            items = self.dynamodb.query(
                TableName=self.events_table,
                IndexName=PENDING_INDEX_NAME,
                KeyConditionExpression="#shard = :shard",
                ExpressionAttributeNames={"#shard": PENDING_SHARD_ATTRIBUTE},
                ExpressionAttributeValues={":shard": {"S": str(shard)}},
            )["Items"]
            found.update(item["event_id"]["S"] for item in items)
        return found

    def new_notifications(self) -> list[dict[str, Any]]:
        """Messages that reached the subscriber queue since the last call, SNS envelope parsed."""
        fresh: list[dict[str, Any]] = []
        while True:
            batch = self.sqs.receive_message(
                QueueUrl=self.subscriber_url,
                MaxNumberOfMessages=10,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
                WaitTimeSeconds=0,
            ).get("Messages", [])
            if not batch:
                break
            for message in batch:
                envelope = json.loads(message["Body"])
                envelope["_sqs_attributes"] = message.get("Attributes", {})
                fresh.append(envelope)
            self.sqs.delete_message_batch(
                QueueUrl=self.subscriber_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)],
            )
        self.notifications.extend(fresh)
        return fresh

    def forget_notifications(self) -> None:
        """Drain the subscriber queue and start counting from zero."""
        self.new_notifications()
        self.notifications.clear()

    def notified(self) -> Counter[str]:
        """How many notifications each event id got, over the whole test."""
        self.new_notifications()
        return Counter(json.loads(n["Message"])["event_id"] for n in self.notifications)


class _CapturingClient:
    """Stands in for DynamoDB under ``OrderStore.record``: keeps the transaction's Put items, succeeds."""

    def __init__(self) -> None:
        self.puts: list[tuple[str, dict[str, Any]]] = []

    def transact_write_items(self, **request: Any) -> dict[str, Any]:
        for entry in request["TransactItems"]:
            put = entry["Put"]
            self.puts.append((put["TableName"], put["Item"]))
        return {}
