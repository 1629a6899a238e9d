"""The sparse index of pending records: what the consumer writes and the reconciler reads.

Only a ``pending`` record carries :data:`PENDING_SHARD_ATTRIBUTE`: the consumer's transaction writes
it with the record and the ``sent`` mark removes it, so the global secondary index
:data:`PENDING_INDEX_NAME` (partition key :data:`PENDING_SHARD_ATTRIBUTE`, sort key
:data:`PENDING_SINCE_ATTRIBUTE`, keys only) holds exactly the records still waiting for their
notification. The shard spreads the index over :data:`PENDING_SHARDS` partitions, so a burst of
pending records (an SNS outage) has no hot partition; the reconciler queries every shard for
records older than its threshold (:mod:`order_consumer.pending_records`).

Standard library only: the construct and the CLI import this module from the distribution too.
"""

from __future__ import annotations

import hashlib

#: The index's name (the construct defines it on ``processed_events``).
PENDING_INDEX_NAME = "pending-by-age"
#: String attribute, only on pending records: the index's partition key.
PENDING_SHARD_ATTRIBUTE = "pending_shard"
#: Number attribute (epoch seconds, the record's creation time): the index's sort key.
PENDING_SINCE_ATTRIBUTE = "created_at"
#: Partitions of the index. Each index write lands on its shard's partition, which takes at most
#: 1,000 write units a second: with two index writes per order, 32 shards carry 16,000 orders a
#: second, more than the processed_events table's default quota lets through, so the index is not
#: the pipeline's first limit (docs/capacity.md). The reconciler queries every shard each run.
PENDING_SHARDS = 32

#: The shards of the releases whose reconciler queried fewer (0.2.0: 16, ``"0"`` to ``"15"``). Today's
#: reads query every shard, so a record on one of theirs is found; theirs never look past their own.
SHARDS_OF_RELEASE = {"0.2.0": 16}

# What each of the reconciler's reads projects (``order_consumer.pending_records``): its role may
# read these attributes and no others (``dynamodb:Attributes`` in the construct's reconciliation
# module; every read names them, so ``dynamodb:Select`` is SPECIFIC_ATTRIBUTES). Key attributes
# included, as IAM requires.
#: An index entry: the table's key and the index's keys.
INDEX_ENTRY_ATTRIBUTES = ("event_id", PENDING_SHARD_ATTRIBUTE, PENDING_SINCE_ATTRIBUTE)
#: A processed-events record, as a reconciliation needs it (the shard: a record marked ``sent`` that
#: still has one was marked by 0.1.0 after a rollback, and is released from the index).
PENDING_RECORD_ATTRIBUTES = (
    "event_id",
    "status",
    "order_id",
    "payload_sha256",
    PENDING_SINCE_ATTRIBUTE,
    PENDING_SHARD_ATTRIBUTE,
)
#: An order row's identity part (never the order itself).
ORDER_ROW_ATTRIBUTES = ("order_id", "event_id", "payload_sha256")
#: The only ``Select`` the reads use (implied by a ProjectionExpression, and written out on Query).
SELECT_SPECIFIC_ATTRIBUTES = "SPECIFIC_ATTRIBUTES"


def every_shard() -> tuple[str, ...]:
    """Every partition of the index, ``"0"`` to ``"31"``."""
    return tuple(str(shard) for shard in range(PENDING_SHARDS))


def pending_shard(event_id: str, shards: int = PENDING_SHARDS) -> str:
    """The index partition of an event: stable, evenly spread, ``"0"`` to ``"31"``.

    ``shards``: another release's count (:data:`SHARDS_OF_RELEASE`), for ``order-pipeline migrate``.
    """
    digest = hashlib.sha256(event_id.encode("utf-8", "surrogatepass")).digest()
    return str(int.from_bytes(digest[:4], "big") % shards)
