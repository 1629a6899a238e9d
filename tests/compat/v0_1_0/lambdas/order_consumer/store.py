"""DynamoDB persistence: the atomic first write, the ``sent`` mark, and the state found on a collision.

The two tables:

* ``processed_events`` (key ``event_id``): ``status`` (``pending`` | ``sent``), ``order_id``,
  ``payload_sha256``, ``ttl``, ``created_at`` and, once notified, ``sent_at``.
* ``order_records`` (key ``order_id``): the order's fields plus ``event_id`` and ``payload_sha256``.

One ``TransactWriteItems`` puts both items, each conditional on being new, with
``ReturnValuesOnConditionCheckFailure=ALL_OLD``: when it is cancelled, the items that already exist
come back in the cancellation reasons, so the duplicate path needs no extra read (and no read that
could be eventually consistent). Only the ``ConditionalCheckFailed`` code means "exists"; every
other cancellation code is transient or a validation failure, never a duplicate.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import BotoCoreError, ClientError

from order_events.errors import ItemTooLargeError, RejectedByStoreError, StoreUnavailableError
from order_events.message import OrderMessage

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

STATUS_PENDING = "pending"
STATUS_SENT = "sent"

# --- Conditions (named, so that a reader sees the invariant each one protects) -------------------
# First delivery of this event: no state record under its key yet.
EVENT_IS_NEW = "attribute_not_exists(event_id)"
# The order has never been recorded: its row is written once and never overwritten.
ORDER_IS_NEW = "attribute_not_exists(order_id)"
# Only a pending record moves to sent; a failure means another delivery already marked it.
EVENT_IS_PENDING = "#status = :pending"

# Cancellation reason codes (TransactWriteItems), per item.
_NO_FAILURE = "None"
_EXISTS = "ConditionalCheckFailed"
_INVALID = "ValidationError"
# ClientError codes that mean the request was invalid and will always be.
_VALIDATION_ERRORS = frozenset({"ValidationException", "SerializationException"})

_deserializer = TypeDeserializer()


@dataclass(frozen=True)
class ExistingEvent:
    """The ``processed_events`` record that was already there."""

    status: Literal["pending", "sent"]
    payload_sha256: str


@dataclass(frozen=True)
class ExistingOrder:
    """The ``order_records`` row that was already there (its state record is gone or another key's)."""

    event_id: str
    payload_sha256: str


Collision = ExistingEvent | ExistingOrder


def _value(item: Mapping[str, Any], name: str) -> Any:
    attribute = item.get(name)
    return None if attribute is None else _deserializer.deserialize(attribute)


def _translate(exc: ClientError, action: str) -> Exception:
    """A domain error for a DynamoDB ClientError that is not a transaction cancellation."""
    code = exc.response.get("Error", {}).get("Code", "")
    message = exc.response.get("Error", {}).get("Message", "")
    if code in _VALIDATION_ERRORS:
        if "size" in message.lower():
            return ItemTooLargeError(f"DynamoDB rejected {action}: {message}")
        return RejectedByStoreError(f"DynamoDB rejected {action}: {code}: {message}")
    # Throttling, 5xx, access or missing-table errors: retrying later may succeed, and parking
    # every message in the DLQ because of a deployment mistake would be worse.
    return StoreUnavailableError(f"DynamoDB failed {action}: {code}: {message}")


class OrderStore:
    """Reads and writes the two tables for one order message at a time. Thread-safe."""

    def __init__(
        self,
        *,
        client: DynamoDBClient,
        processed_events_table: str,
        order_records_table: str,
        record_ttl_seconds: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._events_table = processed_events_table
        self._orders_table = order_records_table
        self._ttl_seconds = record_ttl_seconds
        self._clock = clock

    def record(self, message: OrderMessage) -> Collision | None:
        """Write the ``pending`` record and the order row atomically.

        Returns:
            None when both were written (first delivery), else what was already there.

        Raises:
            StoreUnavailableError: nothing was written and a retry may succeed.
            ItemTooLargeError, RejectedByStoreError: DynamoDB will never accept this write.
        """
        now = int(self._clock())
        event_record = {
            "event_id": {"S": message.event_id},
            "status": {"S": STATUS_PENDING},
            "order_id": {"S": message.order_id},
            "payload_sha256": {"S": message.payload_sha256},
            "ttl": {"N": str(now + self._ttl_seconds)},
            "created_at": {"N": str(now)},
        }
        try:
            self._client.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": self._events_table,
                            "Item": event_record,
                            "ConditionExpression": EVENT_IS_NEW,
                            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                        }
                    },
                    {
                        "Put": {
                            "TableName": self._orders_table,
                            "Item": message.order_item,
                            "ConditionExpression": ORDER_IS_NEW,
                            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                        }
                    },
                ]
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "TransactionCanceledException":
                return self._collision(exc, exc.response.get("CancellationReasons", []))
            raise _translate(exc, "the order transaction") from exc
        except BotoCoreError as exc:
            raise StoreUnavailableError(f"DynamoDB unreachable: {exc}") from exc
        return None

    @staticmethod
    def _collision(exc: ClientError, reasons: Sequence[Mapping[str, Any]]) -> Collision:
        codes = [reason.get("Code", _NO_FAILURE) for reason in reasons]
        if len(codes) != 2:
            raise StoreUnavailableError(f"transaction cancelled without per-item reasons: {codes}") from exc
        if _INVALID in codes:
            raise RejectedByStoreError(f"DynamoDB rejected the order transaction: {reasons}") from exc
        if any(code not in (_NO_FAILURE, _EXISTS) for code in codes):
            # TransactionConflict, ThrottlingError, ProvisionedThroughputExceeded, ...: nothing was
            # written and nothing is known to exist. Never a duplicate.
            raise StoreUnavailableError(f"order transaction cancelled: {codes}") from exc
        event_reason, order_reason = reasons
        if event_reason.get("Code") == _EXISTS:
            item = event_reason.get("Item")
            status = _value(item or {}, "status")
            if status not in (STATUS_PENDING, STATUS_SENT):
                raise StoreUnavailableError(f"existing event record without ALL_OLD status: {item}") from exc
            return ExistingEvent(status=status, payload_sha256=str(_value(item or {}, "payload_sha256")))
        if order_reason.get("Code") == _EXISTS:
            item = order_reason.get("Item")
            if not item:
                raise StoreUnavailableError("existing order row came back without its ALL_OLD item") from exc
            return ExistingOrder(
                event_id=str(_value(item, "event_id")), payload_sha256=str(_value(item, "payload_sha256"))
            )
        raise StoreUnavailableError(f"order transaction cancelled without a reason: {codes}") from exc

    def mark_sent(self, event_id: str) -> bool:
        """Move the record from ``pending`` to ``sent``; call only after the notification was accepted.

        Returns:
            True if this call marked it, False if it was no longer pending (another delivery won).
        """
        try:
            self._client.update_item(
                TableName=self._events_table,
                Key={"event_id": {"S": event_id}},
                UpdateExpression="SET #status = :sent, sent_at = :now",
                ConditionExpression=EVENT_IS_PENDING,
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={
                    ":sent": {"S": STATUS_SENT},
                    ":pending": {"S": STATUS_PENDING},
                    ":now": {"N": str(int(self._clock()))},
                },
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise _translate(exc, "the sent mark") from exc
        except BotoCoreError as exc:
            raise StoreUnavailableError(f"DynamoDB unreachable: {exc}") from exc
        return True
