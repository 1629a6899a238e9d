"""Entry point ``order_subscriber.handler.handler``: one shipment per order, whatever the copies.

The effect here is a row in the team's own ``shipments`` table, written in the same transaction as
the ``done`` mark, so it happens exactly once. Replace :func:`shipment_writes` with your own effect;
for an external call, pass ``notification.event_id`` as its idempotency key (see ``dedup.py``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import boto3
from botocore.exceptions import ClientError

from order_subscriber.dedup import Busy, Claim, Deduplicator, Done
from order_subscriber.notification import NotANotification, OrderNotification, parse

Effect = Callable[[OrderNotification], Sequence[Mapping[str, Any]]]


def shipment_writes(table: str) -> Effect:
    """The effect: request one shipment for the order (a Put, part of the ``done`` transaction)."""

    def effect(notification: OrderNotification) -> list[dict[str, Any]]:
        return [
            {
                "Put": {
                    "TableName": table,
                    "Item": {
                        "order_id": {"S": notification.order_id},
                        "event_id": {"S": notification.event_id},
                        "payload_sha256": {"S": notification.payload_sha256},
                    },
                }
            }
        ]

    return effect


class Subscriber:
    """Handles a batch of SQS records; returns the ids SQS must redeliver."""

    def __init__(self, *, dedup: Deduplicator, effect: Effect) -> None:
        self._dedup = dedup
        self._effect = effect

    def handle(self, records: Sequence[Mapping[str, Any]]) -> list[str]:
        failures = []
        for record in records:
            if not self._handle_one(record):
                failures.append(str(record["messageId"]))
        return failures

    def _handle_one(self, record: Mapping[str, Any]) -> bool:
        """True when the record can be acknowledged."""
        try:
            notification = parse(record)
        except NotANotification:
            return False  # the queue's redrive policy moves it to the subscriber's DLQ
        try:
            outcome = self._dedup.claim(notification.event_id)
        except ClientError:
            return False  # DynamoDB did not answer: SQS redelivers
        if isinstance(outcome, Done):
            return True
        if isinstance(outcome, Busy):
            return False
        return self._act(notification, outcome)

    def _act(self, notification: OrderNotification, claim: Claim) -> bool:
        try:
            writes = self._effect(notification)
        except Exception:
            # The effect failed halfway (a dependency was down, ...): nothing of it was written,
            # so give the claim back at once and let SQS redeliver.
            self._dedup.release(claim)
            return False
        try:
            # False: our lease ran out and another copy took over; it does the effect, we are done.
            self._dedup.complete(claim, writes)
        except ClientError:
            return False  # nothing was written; the lease runs out and a redelivery claims it again
        return True


def _from_environment() -> Subscriber:
    client = boto3.client("dynamodb")
    return Subscriber(
        dedup=Deduplicator(
            client=client, table=os.environ["DEDUP_TABLE"], lease_seconds=float(os.environ["LEASE_SECONDS"])
        ),
        effect=shipment_writes(os.environ["SHIPMENTS_TABLE"]),
    )


def handler(event: Mapping[str, Any], context: Any) -> dict[str, list[dict[str, str]]]:
    """Process an SQS batch (``ReportBatchItemFailures`` on the event source)."""
    failures = _from_environment().handle(event.get("Records") or [])
    return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in failures]}
