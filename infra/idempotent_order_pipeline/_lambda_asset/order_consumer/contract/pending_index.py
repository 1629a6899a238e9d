"""The index of recorded events by age: what the consumer writes and the reconciler reads.

The consumer's transaction writes :data:`PENDING_SHARD_ATTRIBUTE` and :data:`PENDING_SINCE_ATTRIBUTE`
with every record, and nothing changes either afterwards: the ``sent`` mark sets only attributes
the index does not project, so the global secondary index :data:`PENDING_INDEX_NAME` (partition key
:data:`PENDING_SHARD_ATTRIBUTE`, sort key :data:`PENDING_SINCE_ATTRIBUTE`, keys only) gets one write
per order (its entry) and keeps it until DynamoDB's TTL deletes the record. The reconciler reads
each shard's entries once, in creation order, behind a stored checkpoint per shard (the item
:data:`CHECKPOINT_EVENT_ID` of ``processed_events``), and reads each entry's ``status``
(:mod:`order_consumer.pending_records`, :mod:`order_consumer.reconciliation`). The shard spreads the
index over :data:`PENDING_SHARDS` partitions, so a burst of orders has no hot partition.
Records of 0.2.0 carry a shard only while pending (its mark removed it); records of 0.1.0 none.

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
#: 1,000 write units a second: with one index write per order, 32 shards carry 32,000 orders a
#: second, more than the processed_events table's default quota lets through, so the index is not
#: the pipeline's first limit (docs/capacity.md). The reconciler queries every shard each run.
PENDING_SHARDS = 32

#: The shards of the releases whose reconciler queried fewer (0.2.0: 16, ``"0"`` to ``"15"``). Today's
#: reads query every shard, so a record on one of theirs is found; theirs never look past their own.
SHARDS_OF_RELEASE = {"0.2.0": 16}
#: The releases whose index held only pending records (their mark removed the shard): their
#: reconciler reads every entry older than its threshold on every run, so before a rollback to one
#: the sent records leave the index (``order-pipeline migrate --for-rollback-to``).
SPARSE_INDEX_RELEASES = ("0.2.0",)

# What each of the reconciler's reads projects (``order_consumer.pending_records``): its role may
# read these attributes and no others (``dynamodb:Attributes`` in the construct's reconciliation
# module; every read names them, so ``dynamodb:Select`` is SPECIFIC_ATTRIBUTES). Key attributes
# included, as IAM requires.
#: An index entry: the table's key and the index's keys.
INDEX_ENTRY_ATTRIBUTES = ("event_id", PENDING_SHARD_ATTRIBUTE, PENDING_SINCE_ATTRIBUTE)
#: A processed-events record, as a reconciliation needs it (the ``ttl``: a record marked ``sent``
#: without one was marked by 0.1.0 after a rollback, and is given one).
PENDING_RECORD_ATTRIBUTES = (
    "event_id",
    "status",
    "order_id",
    "payload_sha256",
    PENDING_SINCE_ATTRIBUTE,
    "ttl",
)

# --- the reconciler's checkpoints (one item of processed_events) ------------------------------------
#: The key of the item that holds the reconciler's checkpoints. Never an order's: the consumer and
#: the producer refuse it as an idempotency key (``contract.keys``), a derived key is 64 hex digits,
#: and the item has no ``status`` and no shard (never in the index, never a record to the CLI).
CHECKPOINT_EVENT_ID = "order-pipeline:reconciler-checkpoint"
#: Map attribute: shard -> a ``created_at`` (number) such that every entry of the shard created
#: before it is handled (sent, or gone). The next run reads the shard from there.
CHECKPOINTS_ATTRIBUTE = "checkpoints"
#: Number attribute: how many times the checkpoints were written; each write is conditional on the
#: revision it read, so of two racing runs only one writes, and the checkpoints only move forward.
CHECKPOINT_REVISION_ATTRIBUTE = "revision"
#: The checkpoint item's attributes: what the reconciler reads and writes of it, and nothing else.
CHECKPOINT_ATTRIBUTES = ("event_id", CHECKPOINTS_ATTRIBUTE, CHECKPOINT_REVISION_ATTRIBUTE)
#: Seconds past ``reconcile_after`` before an entry is read: a record's ``created_at`` is taken
#: before its transaction, which commits within the consumer's timeout (at most the visibility
#: timeout, at most ``reconcile_after``: the construct's rules), and its index entry appears a
#: moment later (a GSI is eventually consistent); the checkpoint passes only entries at least this
#: much older than ``reconcile_after``, so none of them can still be on its way into the index.
INDEX_PROPAGATION_MARGIN_SECONDS = 60
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
