"""The two tables, read for operators: one event's story, and the records stuck in ``pending`` (via the index).

``processed_events`` (key ``event_id``) holds the state record: ``status`` ``pending`` (recorded,
notification not confirmed) or ``sent`` (SNS accepted it), ``order_id``, ``payload_sha256``,
``created_at``, ``sent_at`` and ``ttl``. ``order_records`` (key ``order_id``) holds the order row:
the body's fields plus ``event_id`` and ``payload_sha256``. Every read is strongly consistent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.message import PAYLOAD_SHA256_FIELD
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.names import STATUS_PENDING, STATUS_SENT
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import (
    PENDING_INDEX_NAME,
    PENDING_SHARD_ATTRIBUTE,
    PENDING_SINCE_ATTRIBUTE,
    every_shard,
)
from idempotent_order_pipeline.cli.errors import CannotResendError
from idempotent_order_pipeline.cli.render import item, timestamp
from idempotent_order_pipeline.keys import EVENT_ID_FIELD, payload_sha256

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

#: Default age of ``pending --older-than``: well past a delivery in flight (visibility timeout).
DEFAULT_PENDING_AGE = "15m"

# An index entry (only pending records have one) of this shard, created before the cutoff.
PENDING_IN_SHARD_BEFORE_CUTOFF = "#shard = :shard AND #since < :cutoff"
#: BatchGetItem's limit per call.
MAX_BATCH_GET_KEYS = 100


def get(dynamodb: DynamoDBClient, table: str, key_name: str, key: str) -> dict[str, Any] | None:
    """One item by its partition key (consistent read), as plain values; None if absent."""
    response = dynamodb.get_item(TableName=table, Key={key_name: {"S": key}}, ConsistentRead=True)
    return item(response.get("Item"))


@dataclass(frozen=True)
class Inspection:
    """What the tables say about one event or order."""

    event_id: str | None
    order_id: str | None
    state: dict[str, Any] | None
    order_row: dict[str, Any] | None
    #: Sentences for the operator: what the state means and what to do.
    findings: tuple[str, ...]

    @property
    def found(self) -> bool:
        return self.state is not None or self.order_row is not None

    @property
    def notified(self) -> bool | None:
        """True: SNS accepted the notification (``sent``); False: not confirmed (``pending``); None: unknown."""
        if self.state is None:
            return None
        return bool(self.state.get("status") == STATUS_SENT)

    def as_dict(self) -> dict[str, Any]:
        return {
            "event_id": self.event_id,
            "order_id": self.order_id,
            "found": self.found,
            "notified": self.notified,
            "state": self.state,
            "order_row": self.order_row,
            "findings": list(self.findings),
        }


def inspect_records(
    dynamodb: DynamoDBClient,
    events_table: str,
    orders_table: str,
    *,
    event_id: str | None = None,
    order_id: str | None = None,
) -> Inspection:
    """Read the state record and the order row of an event, or of an order (exactly one of the two)."""
    if (event_id is None) == (order_id is None):
        raise ValueError("give exactly one of event_id and order_id")
    if event_id is not None:
        state = get(dynamodb, events_table, "event_id", event_id)
        order_id = state.get("order_id") if state else None
        row = get(dynamodb, orders_table, "order_id", order_id) if order_id else None
    else:
        row = get(dynamodb, orders_table, "order_id", str(order_id))
        event_id = row.get(EVENT_ID_FIELD) if row else None
        state = get(dynamodb, events_table, "event_id", event_id) if event_id else None
    return Inspection(
        event_id=event_id, order_id=order_id, state=state, order_row=row, findings=tuple(_findings(state, row))
    )


def _findings(state: Mapping[str, Any] | None, row: Mapping[str, Any] | None) -> list[str]:
    if state is None and row is None:
        return ["not recorded: the message is still in the queue, in the DLQ (dlq list), or was never sent"]
    if state is None:
        return [
            "the order row exists without its state record: the record expired (TTL) or never existed; "
            "the order is recorded, whether it was notified is unknown"
        ]
    findings = []
    if row is None:
        findings.append("ANOMALY: a state record without its order row (both are written in one transaction)")
    elif row.get(EVENT_ID_FIELD) != state.get("event_id"):
        findings.append(f"the order row was recorded by another event: {row.get(EVENT_ID_FIELD)}")
    elif row.get(PAYLOAD_SHA256_FIELD) != state.get(PAYLOAD_SHA256_FIELD):
        findings.append("ANOMALY: the state record and the order row have different payload_sha256")
    if state.get("status") == STATUS_PENDING:
        findings.append(
            "recorded, notification not confirmed: a redelivery publishes it (redrive the DLQ if it is "
            "there); if no copy of the message is left, 'pending --resend' re-enqueues it"
        )
    return findings


@dataclass(frozen=True)
class PendingRecord:
    """A state record stuck in ``pending``."""

    event_id: str
    order_id: str
    created_at: int
    payload_sha256: str

    def as_dict(self, now: float) -> dict[str, Any]:
        return {
            "event_id": self.event_id,
            "order_id": self.order_id,
            "created_at": timestamp(self.created_at),
            "age_seconds": int(now - self.created_at),
            "payload_sha256": self.payload_sha256,
        }


def find_pending(
    dynamodb: DynamoDBClient, table: str, *, older_than_seconds: int, now: float, limit: int | None = None
) -> list[PendingRecord]:
    """Records in ``pending`` created more than ``older_than_seconds`` before ``now``, oldest first.

    Reads the sparse index ``pending-by-age`` (only pending records are in it; one query per shard,
    no scan), then each listed record with a consistent read, since a GSI lags the table: a record
    marked ``sent`` meanwhile is left out.
    """
    candidates: list[str] = []
    for shard in every_shard():
        pages = dynamodb.get_paginator("query").paginate(
            TableName=table,
            IndexName=PENDING_INDEX_NAME,
            KeyConditionExpression=PENDING_IN_SHARD_BEFORE_CUTOFF,
            ExpressionAttributeNames={"#shard": PENDING_SHARD_ATTRIBUTE, "#since": PENDING_SINCE_ATTRIBUTE},
            ExpressionAttributeValues={":shard": {"S": shard}, ":cutoff": {"N": str(int(now - older_than_seconds))}},
        )
        candidates.extend(raw["event_id"]["S"] for page in pages for raw in page.get("Items", []))
    records = [
        PendingRecord(
            event_id=str(record["event_id"]),
            order_id=str(record.get("order_id", "")),
            created_at=int(record.get("created_at", 0)),
            payload_sha256=str(record.get(PAYLOAD_SHA256_FIELD, "")),
        )
        for record in _read_consistently(dynamodb, table, candidates)
        if record.get("status") == STATUS_PENDING
    ]
    records.sort(key=lambda record: (record.created_at, record.event_id))
    return records if limit is None else records[:limit]


def _read_consistently(dynamodb: DynamoDBClient, table: str, event_ids: list[str]) -> list[dict[str, Any]]:
    """The state records of ``event_ids`` (consistent BatchGetItem, unprocessed keys retried), as plain values."""
    found: list[dict[str, Any]] = []
    for start in range(0, len(event_ids), MAX_BATCH_GET_KEYS):
        keys: list[Any] = [{"event_id": {"S": event_id}} for event_id in event_ids[start : start + MAX_BATCH_GET_KEYS]]
        while keys:
            response = dynamodb.batch_get_item(RequestItems={table: {"Keys": keys, "ConsistentRead": True}})
            found.extend(item(raw) or {} for raw in response.get("Responses", {}).get(table, []))
            unprocessed: Any = response.get("UnprocessedKeys", {}).get(table) or {}
            keys = list(unprocessed.get("Keys", []))
    return found


def order_from_row(record: PendingRecord, row: Mapping[str, Any] | None) -> dict[str, Any]:
    """The order message that produced ``row``: its fields, ``event_id`` included, minus ``payload_sha256``.

    Sent again, it carries the same key and the same content, so the consumer finds the pending
    record, publishes and marks it sent - without touching the row.

    Raises:
        CannotResendError: the row is missing, belongs to another event, or does not hash to the
            record's ``payload_sha256`` (resending it would be a conflict, not a retry).
    """
    if row is None:
        raise CannotResendError("its order row is missing")
    if row.get(EVENT_ID_FIELD) != record.event_id:
        raise CannotResendError(f"its order row belongs to event {row.get(EVENT_ID_FIELD)}")
    order = {name: value for name, value in row.items() if name != PAYLOAD_SHA256_FIELD}
    if payload_sha256(order) != record.payload_sha256:
        raise CannotResendError("the order rebuilt from its row does not hash to the record's payload_sha256")
    return order
