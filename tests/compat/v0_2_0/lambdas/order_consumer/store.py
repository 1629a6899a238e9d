"""DynamoDB persistence: the atomic first write, the ``sent`` mark, and the state found on a collision.

The two tables:

* ``processed_events`` (key ``event_id``): ``status`` (``pending`` | ``sent``), ``order_id``,
  ``payload_sha256``, ``created_at``; while pending ``pending_shard`` (the sparse index of
  :mod:`order_consumer.pending_index`); once notified ``sent_at`` and ``ttl`` (sent time plus
  ``RECORD_TTL_SECONDS``), so a pending record never expires. Records stored by earlier versions
  with a ``ttl`` while pending are marked the same way (the mark sets a new ``ttl``).
* ``order_records`` (key ``order_id``): the order's fields plus ``event_id`` and ``payload_sha256``.

One ``TransactWriteItems`` puts both items, each conditional on being new, with
``ReturnValuesOnConditionCheckFailure=ALL_OLD``: when it is cancelled, the items that already exist
come back in the cancellation reasons, so the duplicate path needs no extra read (and no read that
could be eventually consistent). Only the ``ConditionalCheckFailed`` code means "exists"; every
other cancellation code is transient or a validation failure, never a duplicate.

The ``sent`` marks of a batch go in one ``TransactWriteItems`` of conditional updates (up to 100);
if it is cancelled, its cancellation reasons say which records were no longer pending, and the
others are retried in one second call: at most two calls per 100 marks. The condition is kept, so
a mark only ever moves a pending record of the notified content to ``sent``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import BotoCoreError, ClientError

from order_consumer.notifier import Notification
from order_consumer.pending_index import PENDING_SHARD_ATTRIBUTE, PENDING_SINCE_ATTRIBUTE, pending_shard
from order_events.errors import ItemTooLargeError, RejectedByStoreError, StoreUnavailableError
from order_events.message import OrderMessage

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

STATUS_PENDING = "pending"
STATUS_SENT = "sent"

# --- Conditions (named, so that a reader sees the invariant each one protects) -------------------
# First delivery of this event: no state record under its key yet.
EVENT_IS_NEW = "attribute_not_exists(event_id)"
# The order has never been recorded: its row is written once and never overwritten.
ORDER_IS_NEW = "attribute_not_exists(order_id)"
# Only a pending record of the notified content moves to sent; a failure means another delivery
# already marked it (or the record is gone), never that a notification is lost.
EVENT_IS_PENDING_WITH_THIS_CONTENT = "#status = :pending AND payload_sha256 = :sha"
# The sent mark: status, sent time and expiry set, the record leaves the pending index.
MARK_SENT = f"SET #status = :sent, sent_at = :now, #ttl = :ttl REMOVE {PENDING_SHARD_ATTRIBUTE}"
#: TransactWriteItems' limit of items per call.
MAX_TRANSACTION_ITEMS = 100

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
            PENDING_SINCE_ATTRIBUTE: {"N": str(now)},
            PENDING_SHARD_ATTRIBUTE: {"S": pending_shard(message.event_id)},
        }  # no ttl: a pending record never expires (the sent mark sets it)
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

    def mark_sent_batch(self, notifications: Sequence[Notification]) -> list[bool]:
        """Mark each notified record ``sent`` (``ttl`` set, ``pending_shard`` removed); call only after SNS
        accepted the notifications.

        Returns:
            One flag per input, in order: True when this call marked the record or it was not
            pending any more (already sent by another delivery, or gone); False when it is still
            pending (a transient cancellation twice, or another content under the key).

        Raises:
            StoreUnavailableError: the first call itself failed; nothing is known to be marked.
        """
        flags: dict[tuple[str, str], bool] = {}
        keys = list(dict.fromkeys((n.event_id, n.payload_sha256) for n in notifications))
        for start in range(0, len(keys), MAX_TRANSACTION_ITEMS):
            flags.update(self._mark_chunk(keys[start : start + MAX_TRANSACTION_ITEMS]))
        return [flags.get((n.event_id, n.payload_sha256), False) for n in notifications]

    def _mark_chunk(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], bool]:
        """At most two calls: the transaction, then once more for those cancelled only by the others."""
        flags: dict[tuple[str, str], bool] = {}
        # One update per event id (a transaction may touch an item once); a second content under
        # the same key cannot be the recorded one, so it stays unmarked.
        todo: list[tuple[str, str]] = []
        seen: set[str] = set()
        for key in keys:
            if key[0] not in seen:
                seen.add(key[0])
                todo.append(key)
        for attempt in range(2):
            try:
                self._client.transact_write_items(TransactItems=[self._mark_item(*key) for key in todo])
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                    if attempt == 0:
                        raise _translate(exc, "the sent marks") from exc
                    break
                retry = []
                reasons = list(exc.response.get("CancellationReasons", []))
                if len(reasons) != len(todo):
                    reasons = [{}] * len(todo)  # no per-item reasons: retry them all
                for key, reason in zip(todo, reasons, strict=True):
                    code = reason.get("Code", _NO_FAILURE)
                    if code == _EXISTS:  # no longer pending with this content: sent, gone or other content
                        flags[key] = _value(reason.get("Item") or {}, "payload_sha256") in (None, key[1])
                    else:
                        retry.append(key)  # cancelled by another item, or a transient reason
                todo = retry
                if not todo:
                    break
                continue
            except BotoCoreError as exc:
                if attempt == 0:
                    raise StoreUnavailableError(f"DynamoDB unreachable: {exc}") from exc
                break
            flags.update(dict.fromkeys(todo, True))
            todo = []
            break
        flags.update(dict.fromkeys(todo, False))
        return flags

    def _mark_item(self, event_id: str, sha: str) -> TransactWriteItemTypeDef:
        now = int(self._clock())
        return {
            "Update": {
                "TableName": self._events_table,
                "Key": {"event_id": {"S": event_id}},
                "UpdateExpression": MARK_SENT,
                "ConditionExpression": EVENT_IS_PENDING_WITH_THIS_CONTENT,
                "ExpressionAttributeNames": {"#status": "status", "#ttl": "ttl"},
                "ExpressionAttributeValues": {
                    ":sent": {"S": STATUS_SENT},
                    ":pending": {"S": STATUS_PENDING},
                    ":sha": {"S": sha},
                    ":now": {"N": str(now)},
                    ":ttl": {"N": str(now + self._ttl_seconds)},
                },
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
