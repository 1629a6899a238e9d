"""Reading the pending index: one shard's page of entries, consistent reads of what it lists, and the
reconciler's checkpoints.

The index (:mod:`order_consumer.contract.pending_index`) is only a finder: it lists every record
(pending or sent) by creation time, and a GSI is eventually consistent, so an entry may lag the
table. Every entry is read again from the table, consistently, before anything is done with it; the
order rows are read the same way. The checkpoints (one item, :data:`CHECKPOINT_EVENT_ID`) say where
each shard's next read starts; a write of them is conditional on the revision read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import BotoCoreError, ClientError

from .contract.errors import StoreUnavailableError
from .contract.names import STATUS_PENDING, STATUS_SENT, TTL_ATTRIBUTE
from .contract.pending_index import (
    CHECKPOINT_ATTRIBUTES,
    CHECKPOINT_EVENT_ID,
    CHECKPOINT_REVISION_ATTRIBUTE,
    CHECKPOINTS_ATTRIBUTE,
    INDEX_ENTRY_ATTRIBUTES,
    ORDER_ROW_ATTRIBUTES,
    PENDING_INDEX_NAME,
    PENDING_RECORD_ATTRIBUTES,
    PENDING_SHARD_ATTRIBUTE,
    PENDING_SINCE_ATTRIBUTE,
    SELECT_SPECIFIC_ATTRIBUTES,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

#: BatchGetItem's limit, and how often its unprocessed keys are tried again within one call.
MAX_BATCH_GET_KEYS = 100
BATCH_GET_ATTEMPTS = 3

# --- Conditions ------------------------------------------------------------------------------------
# The shard's entries created from its checkpoint up to the cutoff (both included: a key condition
# takes one range): the ones not handled yet that are older than the threshold.
SHARD_ENTRIES_BETWEEN = "#shard = :shard AND #since BETWEEN :from AND :to"
# The checkpoints are written over the revision this run read: of two racing runs one writes.
CHECKPOINTS_UNCHANGED = "attribute_not_exists(#revision) OR #revision = :revision"


@dataclass(frozen=True)
class IndexEntry:
    """One record the index lists (keys only): possibly stale, since a GSI is eventually consistent."""

    event_id: str
    created_at: int


@dataclass(frozen=True)
class IndexPage:
    """Up to ``limit`` entries of one shard, oldest first, and where the next page starts (None: last)."""

    entries: tuple[IndexEntry, ...]
    next_key: Mapping[str, Any] | None


@dataclass(frozen=True)
class Checkpoints:
    """Where each shard's next read starts (a ``created_at``; a shard absent: from the start), and the
    revision they were read at (0: never written)."""

    starts: Mapping[str, Decimal]
    revision: int

    def start(self, shard: str) -> Decimal:
        return self.starts.get(shard, Decimal(0))


@dataclass(frozen=True)
class PendingRecord:
    """A record read with a consistent read and found ``pending``: what its notification needs."""

    event_id: str
    order_id: str
    payload_sha256: str
    created_at: int


@dataclass(frozen=True)
class OrderRow:
    """An order row as read: which event wrote it, its fingerprint, and the attributes read (for the notification)."""

    event_id: str
    payload_sha256: str
    item: Mapping[str, Any] = field(default_factory=dict, repr=False)


def _text(item: Mapping[str, Any], name: str) -> str:
    return str(item.get(name, {}).get("S", ""))


def _number(item: Mapping[str, Any], name: str) -> int:
    return int(Decimal(item.get(name, {}).get("N", "0")))


def _projection(attributes: Sequence[str]) -> dict[str, Any]:
    """A ProjectionExpression of exactly ``attributes``, every name as a placeholder (``status`` is reserved)."""
    names = {f"#a{position}": name for position, name in enumerate(attributes)}
    return {"ProjectionExpression": ", ".join(names), "ExpressionAttributeNames": names}


class PendingIndex:
    """Reads the index and confirms what it lists with consistent reads. Thread-safe."""

    def __init__(
        self,
        *,
        client: DynamoDBClient,
        processed_events_table: str,
        order_records_table: str,
        order_row_attributes: Sequence[str] | None = ORDER_ROW_ATTRIBUTES,
    ) -> None:
        self._client = client
        self._events_table = processed_events_table
        self._orders_table = order_records_table
        #: What an order row read projects (the reconciler's role may read no more); None: the whole row.
        self._row_attributes = order_row_attributes

    def page(
        self,
        shard: str,
        *,
        created_from: Decimal,
        created_to: Decimal,
        start_key: Mapping[str, Any] | None = None,
        limit: int = 100,
    ) -> IndexPage:
        """One page of the shard's entries created from ``created_from`` to ``created_to`` (epoch
        seconds, both included), oldest first.

        Raises:
            StoreUnavailableError: the query failed; nothing was read.
        """
        request: dict[str, Any] = {
            "TableName": self._events_table,
            "IndexName": PENDING_INDEX_NAME,
            "KeyConditionExpression": SHARD_ENTRIES_BETWEEN,
            "ExpressionAttributeValues": {
                ":shard": {"S": shard},
                ":from": {"N": str(created_from)},
                ":to": {"N": str(created_to)},
            },
            "ScanIndexForward": True,
            "Limit": limit,
            **_projection(INDEX_ENTRY_ATTRIBUTES),
            "Select": SELECT_SPECIFIC_ATTRIBUTES,
        }
        request["ExpressionAttributeNames"] |= {"#shard": PENDING_SHARD_ATTRIBUTE, "#since": PENDING_SINCE_ATTRIBUTE}
        if start_key is not None:
            request["ExclusiveStartKey"] = start_key
        try:
            response = self._client.query(**request)
        except (ClientError, BotoCoreError) as exc:
            raise StoreUnavailableError(f"DynamoDB failed the pending-index query of shard {shard}: {exc}") from exc
        entries = tuple(
            IndexEntry(event_id=_text(item, "event_id"), created_at=_number(item, PENDING_SINCE_ATTRIBUTE))
            for item in response.get("Items", [])
        )
        return IndexPage(entries=entries, next_key=response.get("LastEvaluatedKey"))

    def read_pending(self, event_ids: Sequence[str]) -> tuple[list[PendingRecord], set[str]]:
        """The records of ``event_ids`` still ``pending`` (consistent reads), and the ids left unread.

        An id in neither is no longer pending (a delivery marked it sent) or gone.

        Raises:
            StoreUnavailableError: a call failed.
        """
        records, _, unread = self.read_listed(event_ids)
        return records, unread

    def read_listed(self, event_ids: Sequence[str]) -> tuple[list[PendingRecord], list[str], set[str]]:
        """Like :meth:`read_pending`, plus the ids of records ``sent`` without a ``ttl``.

        Those would stay in the table for ever unless given one: a rollback to 0.1.0 marks records
        sent without setting ``ttl``.

        Raises:
            StoreUnavailableError: a call failed.
        """
        items, unread = self._batch_get(self._events_table, "event_id", event_ids, PENDING_RECORD_ATTRIBUTES)
        stale = [
            _text(item, "event_id")
            for item in items
            if _text(item, "status") == STATUS_SENT and TTL_ATTRIBUTE not in item
        ]
        records = [
            PendingRecord(
                event_id=_text(item, "event_id"),
                order_id=_text(item, "order_id"),
                payload_sha256=_text(item, "payload_sha256"),
                created_at=_number(item, PENDING_SINCE_ATTRIBUTE),
            )
            for item in items
            if _text(item, "status") == STATUS_PENDING
        ]
        return records, stale, unread

    def read_order_rows(self, order_ids: Sequence[str]) -> tuple[dict[str, OrderRow], set[str]]:
        """The rows of ``order_ids`` that exist (consistent reads), by order id, and the ids left unread.

        Raises:
            StoreUnavailableError: a call failed.
        """
        items, unread = self._batch_get(self._orders_table, "order_id", order_ids, self._row_attributes)
        rows = {
            _text(item, "order_id"): OrderRow(
                event_id=_text(item, "event_id"), payload_sha256=_text(item, "payload_sha256"), item=item
            )
            for item in items
        }
        return rows, unread

    def checkpoints(self) -> Checkpoints:
        """The stored checkpoints (consistent read); none stored: every shard from the start.

        Raises:
            StoreUnavailableError: the read failed.
        """
        try:
            response = self._client.get_item(
                TableName=self._events_table,
                Key={"event_id": {"S": CHECKPOINT_EVENT_ID}},
                ConsistentRead=True,
                **_projection(CHECKPOINT_ATTRIBUTES),
            )
        except (ClientError, BotoCoreError) as exc:
            raise StoreUnavailableError(f"DynamoDB failed the read of the reconciler's checkpoints: {exc}") from exc
        item = response.get("Item") or {}
        starts = item.get(CHECKPOINTS_ATTRIBUTE, {}).get("M", {})
        return Checkpoints(
            starts={shard: Decimal(value["N"]) for shard, value in starts.items() if "N" in value},
            revision=_number(item, CHECKPOINT_REVISION_ATTRIBUTE),
        )

    def advance(self, read: Checkpoints, starts: Mapping[str, Decimal]) -> bool:
        """Write ``starts`` (every shard's, read's where not given) over ``read`` if nobody wrote since.

        Only forward: a start below the one read is kept at the one read. Returns False when another
        run wrote first (its checkpoints stand; each run's are safe on their own).

        Raises:
            StoreUnavailableError: the write failed; nothing is known of it.
        """
        merged = {**read.starts}
        for shard, start in starts.items():
            merged[shard] = max(start, read.start(shard))
        try:
            self._client.put_item(
                TableName=self._events_table,
                Item={
                    "event_id": {"S": CHECKPOINT_EVENT_ID},
                    CHECKPOINTS_ATTRIBUTE: {"M": {shard: {"N": str(start)} for shard, start in sorted(merged.items())}},
                    CHECKPOINT_REVISION_ATTRIBUTE: {"N": str(read.revision + 1)},
                },
                ConditionExpression=CHECKPOINTS_UNCHANGED,
                ExpressionAttributeNames={"#revision": CHECKPOINT_REVISION_ATTRIBUTE},
                ExpressionAttributeValues={":revision": {"N": str(read.revision)}},
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise StoreUnavailableError(f"DynamoDB failed the write of the reconciler's checkpoints: {exc}") from exc
        except BotoCoreError as exc:
            raise StoreUnavailableError(f"DynamoDB failed the write of the reconciler's checkpoints: {exc}") from exc
        return True

    def _batch_get(
        self,
        table: str,
        key_name: str,
        keys: Sequence[str],
        attributes: Sequence[str] | None,
    ) -> tuple[list[Mapping[str, Any]], set[str]]:
        items: list[Mapping[str, Any]] = []
        unread: set[str] = set()
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), MAX_BATCH_GET_KEYS):
            request: dict[str, Any] = {
                "Keys": [{key_name: {"S": key}} for key in unique[start : start + MAX_BATCH_GET_KEYS]],
                "ConsistentRead": True,
                **(_projection(attributes) if attributes is not None else {}),
            }
            for _attempt in range(BATCH_GET_ATTEMPTS):
                try:
                    response = self._client.batch_get_item(RequestItems={table: cast(Any, request)})
                except (ClientError, BotoCoreError) as exc:
                    raise StoreUnavailableError(f"DynamoDB failed BatchGetItem on {table}: {exc}") from exc
                items.extend(response.get("Responses", {}).get(table, []))
                left = response.get("UnprocessedKeys", {}).get(table)
                if not left or not left.get("Keys"):
                    break
                request = {**request, "Keys": left["Keys"]}
            else:
                unread.update(_text(key, key_name) for key in request["Keys"])
        return items, unread
