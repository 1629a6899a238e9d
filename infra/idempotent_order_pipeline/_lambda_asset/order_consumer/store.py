"""DynamoDB persistence: the atomic first write, the ``sent`` mark, and the state found on a collision.

The two tables:

* ``processed_events`` (key ``event_id``): ``status`` (``pending`` | ``sent``), ``order_id``,
  ``payload_sha256``, ``created_at`` and ``pending_shard`` (the index of
  :mod:`order_consumer.contract.pending_index`: written with the record, never changed, so the index
  is written once per order); once notified ``sent_at`` and ``ttl`` (sent time plus
  ``RECORD_TTL_SECONDS``), so a pending record never expires. Records stored by earlier versions
  with a ``ttl`` while pending are marked the same way (the mark sets a new ``ttl``).
* ``order_records`` (key ``order_id``): the order's fields plus ``event_id`` and ``payload_sha256``.

One ``TransactWriteItems`` puts both items of each record, each conditional on being new, with
``ReturnValuesOnConditionCheckFailure=ALL_OLD``, for up to :data:`MAX_RECORDS_PER_TRANSACTION`
records at once (:meth:`OrderStore.record_batch`; one call for a batch of 10). When it is cancelled,
nothing is written, and the reasons come per item, in order: the items that already exist come back
in them, so the duplicate path needs no extra read (and no read that could be eventually
consistent). Only the ``ConditionalCheckFailed`` code means "exists"; every other code is
transient or a validation failure, never a duplicate; a record whose two reasons are ``None`` was
cancelled only by the others (:data:`CANCELLED_BY_OTHERS`: ask again without them). A record's
outcome depends on its own reasons alone, as when it had a transaction of its own.

Each ``sent`` mark is one conditional PartiQL ``UPDATE``, up to 25 in one ``BatchExecuteStatement``
(one call per batch of 10; 1 write unit each: a mark inside a ``TransactWriteItems`` costs 2). Marks
need no atomicity with each other: each statement carries its own record's condition, so a mark only
ever moves a pending record of the notified content to ``sent``, and a failed one (its statement's
error, or the whole call's) leaves that record alone (still pending: redelivered, or found by the
reconciler).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from botocore.exceptions import BotoCoreError, ClientError

from .contract.errors import ItemTooLargeError, RejectedByStoreError, StoreUnavailableError
from .contract.message import OrderMessage, from_attribute_value
from .contract.names import (
    EVENT_ID_ATTRIBUTE,
    PAYLOAD_SHA256_ATTRIBUTE,
    SENT_AT_ATTRIBUTE,
    STATUS_ATTRIBUTE,
    STATUS_PENDING,
    STATUS_SENT,
    TTL_ATTRIBUTE,
)
from .contract.notification import Notification
from .contract.pending_index import PENDING_SHARD_ATTRIBUTE, PENDING_SINCE_ATTRIBUTE, pending_shard

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

# --- Conditions (named, so that a reader sees the invariant each one protects) -------------------
# First delivery of this event: no state record under its key yet.
EVENT_IS_NEW = "attribute_not_exists(event_id)"
# The order has never been recorded: its row is written once and never overwritten.
ORDER_IS_NEW = "attribute_not_exists(order_id)"
# Only a pending record of the notified content moves to sent; a failure means another delivery
# already marked it (or the record is gone), never that a notification is lost.
EVENT_IS_PENDING_WITH_THIS_CONTENT = f"#status = :pending AND {PAYLOAD_SHA256_ATTRIBUTE} = :sha"
# The sent mark, one PartiQL statement per record (``{table}``: the processed_events table): status,
# sent time and expiry set, nothing else. It names neither of the index's keys (nor could the keys-only
# index project what it sets), so it never writes the index: the entry stays until TTL deletes the
# record, and the reconciler passes it behind its checkpoint. Its WHERE is
# EVENT_IS_PENDING_WITH_THIS_CONTENT on the record's key (an UPDATE whose WHERE fails is that
# statement's ConditionalCheckFailed; it never creates an item, and a missing one is never pending).
# Every value is a parameter; the only text put in is the table's name, from the function's own
# configuration (DynamoDB table names are [A-Za-z0-9_.-], nothing a double quote could end).
MARK_SENT_STATEMENT = (
    f'UPDATE "{{table}}" SET "{STATUS_ATTRIBUTE}" = ?, {SENT_AT_ATTRIBUTE} = ?, "{TTL_ATTRIBUTE}" = ? '  # noqa: S608
    f'WHERE {EVENT_ID_ATTRIBUTE} = ? AND "{STATUS_ATTRIBUTE}" = ? AND {PAYLOAD_SHA256_ATTRIBUTE} = ?'
)
# A record an earlier version left pending under another key than today's (0.1.0 derived keys
# without escaping): put it in the pending index as created now (a ``created_at`` of its own time
# could be behind the reconciler's checkpoint for its shard, where no run reads again) and drop the
# ttl 0.1.0 gave it, so it is found by the reconciler and never expires while pending.
ADOPT_PENDING = f"SET {PENDING_SHARD_ATTRIBUTE} = :shard, {PENDING_SINCE_ATTRIBUTE} = :now REMOVE #ttl"
# A record marked sent without an expiry (by 0.1.0 after a rollback): given one (from now: later
# than its true sent time, never earlier). Only the ttl changes: no index write.
SENT_WITHOUT_TTL = "#status = :sent AND attribute_not_exists(#ttl)"
EXPIRE_SENT = "SET #ttl = :ttl"

# The placeholders of the updates' reserved words. The attributes each update names are listed in
# ``contract/names.py`` (``MARK_SENT_ATTRIBUTES``, ...), which the functions' IAM conditions allow.
_RESERVED = {"#status": STATUS_ATTRIBUTE, "#ttl": TTL_ATTRIBUTE}

# Cancellation reason codes (TransactWriteItems), per item.
_NO_FAILURE = "None"
_EXISTS = "ConditionalCheckFailed"
_INVALID = "ValidationError"
# The ClientError code of a conditional write whose condition failed (outside a transaction).
_CONDITION_FAILED = "ConditionalCheckFailedException"
# The error codes of one statement of a BatchExecuteStatement (BatchStatementError).
_STATEMENT_CONDITION_FAILED = "ConditionalCheckFailed"
_STATEMENT_INVALID = "ValidationError"
#: DynamoDB's limit on statements per BatchExecuteStatement.
MAX_BATCH_STATEMENTS = 25
#: Records per ``TransactWriteItems``: two puts each, so 50 of DynamoDB's 100 actions per transaction.
MAX_RECORDS_PER_TRANSACTION = 25
#: Bytes of items per ``TransactWriteItems``: DynamoDB's 4 MB aggregate limit, counted as the order
#: rows' sizes (:attr:`OrderMessage.item_bytes`) plus :data:`EVENT_RECORD_BYTES` per record.
MAX_TRANSACTION_BYTES = 4_000_000
#: An upper bound of a ``processed_events`` record's size (its ids: at most 1,024 bytes of event id and
#: 256 characters of order id; the rest is under 200 bytes).
EVENT_RECORD_BYTES = 2_048
#: Why a mark left its record pending when the record is pending with another content.
STILL_PENDING_OTHER_CONTENT = "the sent mark did not apply: the record is pending with another content"
# ClientError codes that mean the request was invalid and will always be.
_VALIDATION_ERRORS = frozenset({"ValidationException", "SerializationException"})


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


class _CancelledByOthers:
    """The answer for a record of a cancelled transaction whose own items had no failure."""

    def __repr__(self) -> str:
        return "CANCELLED_BY_OTHERS"


#: A record of a cancelled transaction whose own two items had no failure: nothing was written for
#: it, only because of another record's items. Asking again without the others decides it.
CANCELLED_BY_OTHERS = _CancelledByOthers()

#: One record's answer from :meth:`OrderStore.record_batch`: None (both items written), what was
#: already there, :data:`CANCELLED_BY_OTHERS`, or why it failed (never raised: it is this record's).
RecordAnswer = Collision | _CancelledByOthers | StoreUnavailableError | RejectedByStoreError | None


@dataclass(frozen=True)
class MarkResult:
    """One ``sent`` mark's answer."""

    notification: Notification
    #: None: the record is sent (by this mark, or already); else why it is still pending.
    error: str | None


def _value(item: Mapping[str, Any], name: str) -> Any:
    attribute = item.get(name)
    return None if attribute is None else from_attribute_value(attribute)


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


def _answers(exc: ClientError, count: int, reasons: Sequence[Mapping[str, Any]]) -> list[RecordAnswer]:
    """Each record's answer from a cancelled transaction's reasons (two per record, in order)."""
    if len(reasons) != 2 * count:
        codes = [reason.get("Code", _NO_FAILURE) for reason in reasons]
        raise StoreUnavailableError(f"transaction cancelled without per-item reasons: {codes}") from exc
    pairs = [(reasons[2 * n], reasons[2 * n + 1]) for n in range(count)]
    if all(_code(a) == _NO_FAILURE and _code(b) == _NO_FAILURE for a, b in pairs):
        raise StoreUnavailableError(
            f"order transaction cancelled without a reason: {[_code(r) for r in reasons]}"
        ) from exc
    answers: list[RecordAnswer] = []
    for event_reason, order_reason in pairs:
        try:
            answers.append(_collision(exc, event_reason, order_reason))
        except (StoreUnavailableError, RejectedByStoreError) as error:
            answers.append(error)
    return answers


def _code(reason: Mapping[str, Any]) -> str:
    return str(reason.get("Code", _NO_FAILURE))


def _collision(
    exc: ClientError, event_reason: Mapping[str, Any], order_reason: Mapping[str, Any]
) -> Collision | _CancelledByOthers:
    """One record's answer from its two cancellation reasons (its record's, then its row's)."""
    codes = [_code(event_reason), _code(order_reason)]
    if codes == [_NO_FAILURE, _NO_FAILURE]:
        return CANCELLED_BY_OTHERS
    if _INVALID in codes:
        raise RejectedByStoreError(
            f"DynamoDB rejected the order transaction: {[dict(event_reason), dict(order_reason)]}"
        ) from exc
    if any(code not in (_NO_FAILURE, _EXISTS) for code in codes):
        # TransactionConflict, ThrottlingError, ProvisionedThroughputExceeded, ...: nothing was
        # written and nothing is known to exist. Never a duplicate.
        raise StoreUnavailableError(f"order transaction cancelled: {codes}") from exc
    if event_reason.get("Code") == _EXISTS:
        item = event_reason.get("Item")
        status = _value(item or {}, "status")
        if status not in (STATUS_PENDING, STATUS_SENT):
            raise StoreUnavailableError(f"existing event record without ALL_OLD status: {item}") from exc
        return ExistingEvent(status=status, payload_sha256=str(_value(item or {}, "payload_sha256")))
    item = order_reason.get("Item")
    if not item:
        raise StoreUnavailableError("existing order row came back without its ALL_OLD item") from exc
    return ExistingOrder(event_id=str(_value(item, "event_id")), payload_sha256=str(_value(item, "payload_sha256")))


class OrderStore:
    """Reads and writes the two tables for the order messages of a batch. Thread-safe."""

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
        """Write the ``pending`` record and the order row of one message atomically.

        Returns:
            None when both were written (first delivery), else what was already there.

        Raises:
            StoreUnavailableError: nothing was written and a retry may succeed.
            ItemTooLargeError, RejectedByStoreError: DynamoDB will never accept this write.
        """
        (answer,) = self.record_batch([message])
        if isinstance(answer, StoreUnavailableError | RejectedByStoreError):
            raise answer
        if isinstance(answer, _CancelledByOthers):  # alone, it cannot be cancelled by others
            raise StoreUnavailableError("order transaction cancelled without a reason")
        return answer

    def record_batch(self, messages: Sequence[OrderMessage]) -> list[RecordAnswer]:
        """Write each message's ``pending`` record and order row, all in one ``TransactWriteItems``.

        At most :data:`MAX_RECORDS_PER_TRANSACTION` messages of :data:`MAX_TRANSACTION_BYTES`, no two
        with the same event id or order id (a transaction names an item once).

        Returns:
            One answer per message, in order (:data:`RecordAnswer`). All None when the transaction
            committed; when it was cancelled nothing was written and each answer comes from the
            message's own cancellation reasons.

        Raises:
            StoreUnavailableError: the call failed as a whole (throttled, 5xx, unreachable, or a
                cancellation without usable reasons); nothing was written and a retry may succeed.
            ItemTooLargeError, RejectedByStoreError: DynamoDB refused the request as a whole.
        """
        now = int(self._clock())
        items: list[TransactWriteItemTypeDef] = []
        for message in messages:
            event_record = {
                "event_id": {"S": message.event_id},
                "status": {"S": STATUS_PENDING.value},
                "order_id": {"S": message.order_id},
                "payload_sha256": {"S": message.payload_sha256},
                PENDING_SINCE_ATTRIBUTE: {"N": str(now)},
                PENDING_SHARD_ATTRIBUTE: {"S": pending_shard(message.event_id)},
            }  # no ttl: a pending record never expires (the sent mark sets it)
            items.append(
                {
                    "Put": {
                        "TableName": self._events_table,
                        "Item": event_record,
                        "ConditionExpression": EVENT_IS_NEW,
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                }
            )
            items.append(
                {
                    "Put": {
                        "TableName": self._orders_table,
                        "Item": message.order_item,
                        "ConditionExpression": ORDER_IS_NEW,
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                }
            )
        try:
            self._client.transact_write_items(TransactItems=items)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "TransactionCanceledException":
                return _answers(exc, len(messages), exc.response.get("CancellationReasons", []))
            raise _translate(exc, "the order transaction") from exc
        except BotoCoreError as exc:
            raise StoreUnavailableError(f"DynamoDB unreachable: {exc}") from exc
        return [None] * len(messages)

    def adopt_pending(self, event_id: str, payload_sha256: str) -> bool:
        """Whether the record ``event_id`` is ``pending`` with this content; if so it is now in the
        pending index as created now and carries no ``ttl`` (a record another key's delivery found
        through its order row).

        Raises:
            StoreUnavailableError: the call failed; nothing is known.
        """
        try:
            self._client.update_item(
                TableName=self._events_table,
                Key={EVENT_ID_ATTRIBUTE: {"S": event_id}},
                UpdateExpression=ADOPT_PENDING,
                ConditionExpression=EVENT_IS_PENDING_WITH_THIS_CONTENT,
                ExpressionAttributeNames=_RESERVED,
                ExpressionAttributeValues={
                    ":pending": {"S": STATUS_PENDING},
                    ":sha": {"S": payload_sha256},
                    ":shard": {"S": pending_shard(event_id)},
                    ":now": {"N": str(int(self._clock()))},
                },
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False  # sent, gone, or another content: nothing left to notify for it
            raise _translate(exc, "the pending check of the order row's event") from exc
        except BotoCoreError as exc:
            raise StoreUnavailableError(f"DynamoDB unreachable: {exc}") from exc
        return True

    def expire_sent(self, event_id: str) -> bool:
        """Give a ``sent`` record without a ``ttl`` one (from now).

        Returns False when it was not such a record any more (nothing changed).

        Raises:
            StoreUnavailableError: the call failed.
        """
        try:
            self._client.update_item(
                TableName=self._events_table,
                Key={EVENT_ID_ATTRIBUTE: {"S": event_id}},
                UpdateExpression=EXPIRE_SENT,
                ConditionExpression=SENT_WITHOUT_TTL,
                ExpressionAttributeNames=_RESERVED,
                ExpressionAttributeValues={
                    ":sent": {"S": STATUS_SENT},
                    ":ttl": {"N": str(int(self._clock()) + self._ttl_seconds)},
                },
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise _translate(exc, "the expiry of a sent record without a ttl") from exc
        except BotoCoreError as exc:
            raise StoreUnavailableError(f"DynamoDB unreachable: {exc}") from exc
        return True

    def mark_sent(self, notification: Notification) -> bool:
        """Mark one notified record ``sent``: :meth:`mark_sent_batch` of one.

        Returns:
            True when it is sent (by this call, or already); False when it is still pending.

        Raises:
            StoreUnavailableError, RejectedByStoreError: the call failed; the record is still pending.
        """
        return self.mark_sent_batch([notification])[0].error is None

    def mark_sent_batch(self, notifications: Sequence[Notification]) -> list[MarkResult]:
        """Mark notified records ``sent``: one PartiQL ``UPDATE`` each, :data:`MAX_BATCH_STATEMENTS` per
        ``BatchExecuteStatement``, each conditional on its own record (``pending``, with the notified
        content). Call only after SNS accepted the notifications.

        Returns:
            One result per input, in order: no error when the record is sent (by this mark, or it
            was not pending any more: another delivery marked it, or it is gone), else why it is still
            pending (pending with another content; the statement throttled, refused, or its call failed).

        Raises:
            StoreUnavailableError, RejectedByStoreError: the first call failed (nothing is marked); a
            later call that fails gives its records an error instead.
        """
        results: list[MarkResult] = []
        for start in range(0, len(notifications), MAX_BATCH_STATEMENTS):
            chunk = notifications[start : start + MAX_BATCH_STATEMENTS]
            try:
                results.extend(self._mark_chunk(chunk))
            except (StoreUnavailableError, RejectedByStoreError) as exc:
                if start == 0:
                    raise
                results.extend(MarkResult(notification, f"{type(exc).__name__}: {exc}") for notification in chunk)
        return results

    def _mark_chunk(self, notifications: Sequence[Notification]) -> list[MarkResult]:
        now = int(self._clock())
        statement = MARK_SENT_STATEMENT.format(table=self._events_table)
        sent, pending, at, expires = (
            {"S": STATUS_SENT},
            {"S": STATUS_PENDING},
            {"N": str(now)},
            {"N": str(now + self._ttl_seconds)},
        )
        try:
            response = self._client.batch_execute_statement(
                Statements=[
                    {
                        "Statement": statement,
                        # In the statement's order: SET status, sent_at, ttl; WHERE event_id, status, payload_sha256.
                        "Parameters": [
                            sent,
                            at,
                            expires,
                            {"S": notification.event_id},
                            pending,
                            {"S": notification.payload_sha256},
                        ],
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                    for notification in notifications
                ]
            )
        except ClientError as exc:
            raise _translate(exc, "the sent marks") from exc
        except BotoCoreError as exc:
            raise StoreUnavailableError(f"DynamoDB unreachable: {exc}") from exc
        answers = response.get("Responses", [])
        if len(answers) != len(notifications):
            raise StoreUnavailableError(f"BatchExecuteStatement answered {len(answers)} of {len(notifications)} marks")
        return [_mark_result(notification, answer) for notification, answer in zip(notifications, answers, strict=True)]


def _mark_result(notification: Notification, answer: Mapping[str, Any]) -> MarkResult:
    """One statement's answer as the mark's result (see :meth:`OrderStore.mark_sent_batch`)."""
    error = answer.get("Error")
    if not error:
        return MarkResult(notification, None)
    code, message = str(error.get("Code", "")), str(error.get("Message", ""))
    if code == _STATEMENT_CONDITION_FAILED:
        # No longer pending with this content: sent by another delivery (same content), gone, or another content.
        existing: Mapping[str, Any] = error.get("Item") or {}
        if _value(existing, PAYLOAD_SHA256_ATTRIBUTE) in (None, notification.payload_sha256):
            return MarkResult(notification, None)
        return MarkResult(notification, STILL_PENDING_OTHER_CONTENT)
    if code == _STATEMENT_INVALID:
        return MarkResult(notification, f"RejectedByStoreError: DynamoDB rejected the sent mark: {code}: {message}")
    # ThrottlingError, ProvisionedThroughputExceeded, RequestLimitExceeded, InternalServerError,
    # TransactionConflict, AccessDenied, ResourceNotFound, ...: this record is still pending; a retry may succeed.
    return MarkResult(notification, f"StoreUnavailableError: DynamoDB failed the sent mark: {code}: {message}")
