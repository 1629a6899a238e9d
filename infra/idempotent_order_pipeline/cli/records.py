"""The two tables, read for operators: one event's story, and the records stuck in ``pending`` (via the index).

``processed_events`` (key ``event_id``) holds the state record: ``status`` ``pending`` (recorded,
notification not confirmed) or ``sent`` (SNS accepted it), ``order_id``, ``payload_sha256``,
``created_at``, ``sent_at`` and ``ttl``. ``order_records`` (key ``order_id``) holds the order row:
the body's fields plus ``event_id`` and ``payload_sha256``. Every read is strongly consistent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.errors import StoreUnavailableError
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.message import PAYLOAD_SHA256_FIELD
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.names import STATUS_PENDING, STATUS_SENT
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import every_shard
from idempotent_order_pipeline._lambda_asset.order_consumer.pending_records import (
    BATCH_GET_ATTEMPTS,
    PendingIndex,
    PendingRecord,
)
from idempotent_order_pipeline.cli.errors import CannotResendError, OperationsError
from idempotent_order_pipeline.cli.render import item, timestamp
from idempotent_order_pipeline.keys import EVENT_ID_FIELD, payload_sha256

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

#: Default age of ``pending --older-than``: well past a delivery in flight (visibility timeout).
DEFAULT_PENDING_AGE = "15m"


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


def pending_summary(record: PendingRecord, now: float) -> dict[str, Any]:
    """What ``pending`` shows of a record (its ``--json`` object, before any resend outcome)."""
    return {
        "event_id": record.event_id,
        "order_id": record.order_id,
        "created_at": timestamp(record.created_at),
        "age_seconds": int(now - record.created_at),
        "payload_sha256": record.payload_sha256,
    }


def find_pending(
    dynamodb: DynamoDBClient, table: str, *, older_than_seconds: int, now: float, limit: int | None = None
) -> list[PendingRecord]:
    """Records in ``pending`` created more than ``older_than_seconds`` before ``now``, oldest first.

    Read as the reconciler reads them (:class:`~order_consumer.pending_records.PendingIndex`): the
    index ``pending-by-age`` from each shard's reconciler checkpoint on (every entry before it is
    sent or gone; every page of every shard, no scan), then each listed record with a consistent
    read, since the index lists sent records too and a GSI lags the table: what is not pending is
    left out. Unprocessed keys are tried again a bounded number of
    times, as the reconciler does; a record still unread then fails the listing rather than
    being left out of it silently.

    Raises:
        OperationsError: a DynamoDB call failed, or some listed records could not be read.
    """
    index = PendingIndex(client=dynamodb, processed_events_table=table, order_records_table="")
    # Whole seconds, as the record's created_at: a record exactly at the cutoff is not yet old enough.
    cutoff = Decimal(int(now - older_than_seconds)) - Decimal("0.001")
    try:
        checkpoints = index.checkpoints()
        candidates: list[str] = []
        for shard in every_shard():
            if checkpoints.start(shard) > cutoff:
                continue
            start_key: Mapping[str, Any] | None = None
            while True:
                page = index.page(shard, created_from=checkpoints.start(shard), created_to=cutoff, start_key=start_key)
                candidates.extend(entry.event_id for entry in page.entries)
                if page.next_key is None:
                    break
                start_key = page.next_key
        records, unread = index.read_pending(candidates)
    except StoreUnavailableError as exc:
        raise OperationsError(str(exc)) from exc
    if unread:
        raise OperationsError(
            f"{len(unread)} record(s) the pending index lists were still unprocessed after "
            f"{BATCH_GET_ATTEMPTS} BatchGetItem attempts (DynamoDB throttled them?): try again"
        )
    records.sort(key=lambda record: (record.created_at, record.event_id))
    return records if limit is None else records[:limit]


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
