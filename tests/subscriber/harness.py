"""A moto-backed world for the subscriber helper: its tables, the two worked examples' effects, faults.

Every AWS call of the protocol goes through the consumer harness's :class:`GuardedClient` (one lock:
moto's ``transact_write_items`` is not thread-safe; counted; faults armed at the call boundary),
and so does the external provider of the second example, so a crash can be injected at each call.
"""

from __future__ import annotations

import json
import random
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from idempotent_order_pipeline._subscriber_layer.python.idempotent_subscriber import (
    Claim,
    Deduplicator,
    OncePerEvent,
    OrderNotification,
)
from tests.consumer.harness import Crash, FaultBoard, GuardedClient

LEASE_SECONDS = 30.0
#: Longer than the lease, as the construct requires: a redelivery after a crash finds the claim expired.
VISIBILITY_TIMEOUT_SECONDS = 180.0
RECORD_TTL_SECONDS = 30 * 86_400


class Clock:
    """A settable clock (epoch seconds), shared by the deduplicator and the test."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds


def create_table(dynamodb: Any, name: str, key: str) -> str:
    dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


def notification_record(event_id: str, order_id: str, *, copy: int = 0, raw: bool = True) -> dict[str, Any]:
    """One copy of a thin notification as a Lambda SQS record (raw delivery, or in the SNS envelope)."""
    message = json.dumps({"event_id": event_id, "order_id": order_id, "payload_sha256": f"sha-{order_id}"})
    attributes = {"event_id": event_id, "order_id": order_id}
    if raw:
        body = message
        message_attributes = {k: {"stringValue": v, "dataType": "String"} for k, v in attributes.items()}
    else:
        body = json.dumps(
            {
                "Type": "Notification",
                "MessageId": f"sns-{event_id}-{copy}",
                "TopicArn": "arn:aws:sns:eu-west-1:123456789012:orders",
                "Message": message,
                "MessageAttributes": {k: {"Type": "String", "Value": v} for k, v in attributes.items()},
            }
        )
        message_attributes = {}
    return {"messageId": f"m-{event_id}-{copy}", "body": body, "messageAttributes": message_attributes}


def copies(events: int, per_event: int = 2, *, raw: bool = True) -> list[dict[str, Any]]:
    """``per_event`` copies of ``events`` notifications (``event-i`` for ``order-i``)."""
    return [
        notification_record(f"event-{i}", f"order-{i}", copy=c, raw=raw)
        for i in range(events)
        for c in range(per_event)
    ]


# ---- the worked examples' effects (docs/subscriber.md shows the same code) -------------------------


def counter_effect(counters_table: str) -> Callable[[OrderNotification, Claim], list[dict[str, Any]]]:
    """Example (a): a counter incremented once per order, committed with the done mark."""

    def effect(notification: OrderNotification, claim: Claim) -> list[dict[str, Any]]:
        return [
            {
                "Update": {
                    "TableName": counters_table,
                    "Key": {"order_id": {"S": notification.order_id}},
                    "UpdateExpression": "ADD shipments :one SET applied_by = :token",
                    "ExpressionAttributeValues": {":one": {"N": "1"}, ":token": {"S": claim.token}},
                }
            }
        ]

    return effect


class PaymentProvider:
    """A stand-in for an external API that takes an idempotency key (its calls go through a GuardedClient)."""

    def __init__(self) -> None:
        self.charges: list[tuple[str, str]] = []  # (order_id, idempotency key), in call order

    def charge(self, *, OrderId: str, IdempotencyKey: str) -> dict[str, str]:
        self.charges.append((OrderId, IdempotencyKey))
        return {"ChargeId": f"ch-{IdempotencyKey}"}


def payment_effect(provider: Any) -> Callable[[OrderNotification, Claim], list[dict[str, Any]]]:
    """Example (b): an external call, at most once per lease, keyed by the claim's token."""

    def effect(notification: OrderNotification, claim: Claim) -> list[dict[str, Any]]:
        provider.charge(OrderId=notification.order_id, IdempotencyKey=claim.token)
        return []  # nothing of ours to write: the done mark alone

    return effect


@dataclass
class SubscriberWorld:
    """One subscriber's tables in moto, its helper on guarded clients, a fake clock and a payment provider."""

    dynamodb: Any
    prefix: str = ""
    board: FaultBoard = field(default_factory=FaultBoard)
    clock: Clock = field(default_factory=Clock)

    def __post_init__(self) -> None:
        self.dedup_table = create_table(self.dynamodb, self.prefix + "dedup", "event_id")
        self.counters_table = create_table(self.dynamodb, self.prefix + "counters", "order_id")
        self.client: Any = GuardedClient(self.dynamodb, self.board)
        self.provider = PaymentProvider()
        self.guarded_provider: Any = GuardedClient(self.provider, self.board)
        self.dedup = Deduplicator(
            client=self.client,
            table=self.dedup_table,
            lease_seconds=LEASE_SECONDS,
            record_ttl_seconds=RECORD_TTL_SECONDS,
            clock=self.clock,
        )

    def handler(self, effect: Callable[[OrderNotification, Claim], Sequence[Mapping[str, Any]] | None]) -> OncePerEvent:
        return OncePerEvent(effect, dedup=self.dedup)

    def counting(self) -> OncePerEvent:
        return self.handler(counter_effect(self.counters_table))

    def paying(self) -> OncePerEvent:
        return self.handler(payment_effect(self.guarded_provider))

    def deliver_until_done(
        self, records: list[dict[str, Any]], handler: OncePerEvent, *, seed: int = 0, max_rounds: int = 40
    ) -> int:
        """Deliver like SQS: shuffled batches of 10; a crash or a failed record is redelivered after the
        visibility timeout. Returns the crashes seen."""
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
                    failed = set(handler.handle(batch))
                except Crash:
                    crashes += 1
                    redeliver.extend(batch)
                    continue
                redeliver.extend(record for record in batch if record["messageId"] in failed)
            pending = redeliver
            self.clock.advance(VISIBILITY_TIMEOUT_SECONDS)
        raise AssertionError(f"{len(pending)} records still not acknowledged")

    # ---- reading the world ------------------------------------------------------------------------

    def counters(self) -> Counter[str]:
        items = self.dynamodb.scan(TableName=self.counters_table, ConsistentRead=True)["Items"]
        return Counter({item["order_id"]["S"]: int(item["shipments"]["N"]) for item in items})

    def counter_row(self, order_id: str) -> dict[str, Any]:
        return dict(self.dynamodb.get_item(TableName=self.counters_table, Key={"order_id": {"S": order_id}})["Item"])

    def statuses(self) -> Counter[str]:
        items = self.dynamodb.scan(TableName=self.dedup_table, ConsistentRead=True)["Items"]
        return Counter(item["status"]["S"] for item in items)

    def claimed_tokens(self) -> list[str]:
        """Every claim token a PutItem offered (each lease's; a refused claim's token was never used)."""
        return [request["Item"]["claim_token"]["S"] for request in self.board.requests.get("put_item", [])]
