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
#: Partitions of the index.
PENDING_SHARDS = 16


def every_shard() -> tuple[str, ...]:
    """Every partition of the index, ``"0"`` to ``"15"``."""
    return tuple(str(shard) for shard in range(PENDING_SHARDS))


def pending_shard(event_id: str) -> str:
    """The index partition of an event: stable, evenly spread, ``"0"`` to ``"15"``."""
    digest = hashlib.sha256(event_id.encode("utf-8", "surrogatepass")).digest()
    return str(int.from_bytes(digest[:4], "big") % PENDING_SHARDS)
