"""The sparse index of pending records: what the consumer writes and the reconciler reads.

Only a ``pending`` record carries :data:`PENDING_SHARD_ATTRIBUTE`: the consumer's transaction writes
it with the record and the ``sent`` mark removes it, so the global secondary index
:data:`PENDING_INDEX_NAME` (partition key :data:`PENDING_SHARD_ATTRIBUTE`, sort key
:data:`PENDING_SINCE_ATTRIBUTE`, keys only) holds exactly the records still waiting for their
notification. The shard spreads the index over :data:`PENDING_SHARDS` partitions, so a burst of
pending records (an SNS outage) has no hot partition; the reconciler queries every shard for
records older than its threshold.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import BotoCoreError, ClientError

from order_events.errors import StoreUnavailableError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.client import DynamoDBClient

#: The index's name (the construct defines it on ``processed_events``).
PENDING_INDEX_NAME = "pending-by-age"
#: String attribute, only on pending records: the index's partition key.
PENDING_SHARD_ATTRIBUTE = "pending_shard"
#: Number attribute (epoch seconds, the record's creation time): the index's sort key.
PENDING_SINCE_ATTRIBUTE = "created_at"
#: Partitions of the index.
PENDING_SHARDS = 16
#: The one status an index entry may have (the store's ``STATUS_PENDING``; repeated so the consumer's
#: store can import this module without a cycle).
STATUS_PENDING = "pending"
#: BatchGetItem's limit, and how often its unprocessed keys are tried again within one call.
MAX_BATCH_GET_KEYS = 100
BATCH_GET_ATTEMPTS = 3

# --- Conditions ------------------------------------------------------------------------------------
# The shard's entries created before the cutoff: pending for longer than the threshold.
PENDING_IN_SHARD_BEFORE = "#shard = :shard AND #since < :before"


def every_shard() -> tuple[str, ...]:
    """Every partition of the index, ``"0"`` to ``"15"``."""
    return tuple(str(shard) for shard in range(PENDING_SHARDS))


def pending_shard(event_id: str) -> str:
    """The index partition of an event: stable, evenly spread, ``"0"`` to ``"15"``."""
    digest = hashlib.sha256(event_id.encode("utf-8", "surrogatepass")).digest()
    return str(int.from_bytes(digest[:4], "big") % PENDING_SHARDS)


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
class PendingRecord:
    """A record read with a consistent read and found ``pending``: what its notification needs."""

    event_id: str
    order_id: str
    payload_sha256: str
    created_at: int


@dataclass(frozen=True)
class OrderRow:
    """The identity part of an order row: which event wrote it and its fingerprint."""

    event_id: str
    payload_sha256: str


def _text(item: Mapping[str, Any], name: str) -> str:
    return str(item.get(name, {}).get("S", ""))


def _number(item: Mapping[str, Any], name: str) -> int:
    return int(Decimal(item.get(name, {}).get("N", "0")))


class PendingIndex:
    """Reads the index and confirms what it lists with consistent reads. Thread-safe.

    The index is only a finder: an entry may lag the table (a GSI is eventually consistent), so
    every entry is read again from the table, consistently, before anything is done with it.
    """

    def __init__(self, *, client: DynamoDBClient, processed_events_table: str, order_records_table: str) -> None:
        self._client = client
        self._events_table = processed_events_table
        self._orders_table = order_records_table

    def page(
        self, shard: str, *, created_before: float, start_key: Mapping[str, Any] | None = None, limit: int = 100
    ) -> IndexPage:
        """One page of the shard's entries created before ``created_before`` (epoch seconds), oldest first.

        Raises:
            StoreUnavailableError: the query failed; nothing was read.
        """
        request: dict[str, Any] = {
            "TableName": self._events_table,
            "IndexName": PENDING_INDEX_NAME,
            "KeyConditionExpression": PENDING_IN_SHARD_BEFORE,
            "ExpressionAttributeNames": {"#shard": PENDING_SHARD_ATTRIBUTE, "#since": PENDING_SINCE_ATTRIBUTE},
            "ExpressionAttributeValues": {":shard": {"S": shard}, ":before": {"N": f"{created_before:.3f}"}},
            "ScanIndexForward": True,
            "Limit": limit,
        }
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
        items, unread = self._batch_get(
            self._events_table,
            "event_id",
            event_ids,
            projection="event_id, #status, order_id, payload_sha256, created_at",
            names={"#status": "status"},
        )
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
        return records, unread

    def read_order_rows(self, order_ids: Sequence[str]) -> tuple[dict[str, OrderRow], set[str]]:
        """The rows of ``order_ids`` that exist (consistent reads), by order id, and the ids left unread.

        Raises:
            StoreUnavailableError: a call failed.
        """
        items, unread = self._batch_get(
            self._orders_table, "order_id", order_ids, projection="order_id, event_id, payload_sha256", names=None
        )
        rows = {
            _text(item, "order_id"): OrderRow(
                event_id=_text(item, "event_id"), payload_sha256=_text(item, "payload_sha256")
            )
            for item in items
        }
        return rows, unread

    def _batch_get(
        self,
        table: str,
        key_name: str,
        keys: Sequence[str],
        *,
        projection: str,
        names: Mapping[str, str] | None,
    ) -> tuple[list[Mapping[str, Any]], set[str]]:
        items: list[Mapping[str, Any]] = []
        unread: set[str] = set()
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), MAX_BATCH_GET_KEYS):
            request: dict[str, Any] = {
                "Keys": [{key_name: {"S": key}} for key in unique[start : start + MAX_BATCH_GET_KEYS]],
                "ConsistentRead": True,
                "ProjectionExpression": projection,
            }
            if names:
                request["ExpressionAttributeNames"] = dict(names)
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
