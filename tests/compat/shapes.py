"""The state records each release wrote, as items: what ``order-pipeline migrate`` meets in a table.

Written out from the released stores (``tests/compat/v0_1_0/lambdas/order_consumer/store.py`` and
``tests/compat/v0_2_0/.../order_consumer/store.py``); ``tests/compat/test_shapes.py`` checks them
against what the frozen releases really write, so the CLI's tests can seed them without starting
a process.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Mapping
from typing import Any

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import PENDING_SINCE_ATTRIBUTE

#: 0.1.0's and 0.2.0's ``RECORD_TTL_SECONDS`` default (30 days).
TTL_SECONDS = 2_592_000
#: 0.2.0's pending index had 16 shards (today's has 32).
SHARDS_0_2_0 = 16


def shard_0_2_0(event_id: str) -> str:
    """0.2.0's ``pending_index.pending_shard`` (16 shards)."""
    digest = hashlib.sha256(event_id.encode("utf-8", "surrogatepass")).digest()
    return str(int.from_bytes(digest[:4], "big") % SHARDS_0_2_0)


def record_0_1_0(event_id: str, order_id: str, sha: str, *, created_at: int, sent: bool) -> dict[str, Any]:
    """0.1.0's record: a ``ttl`` from creation, no ``pending_shard``; its mark sets ``status`` and ``sent_at``."""
    item = {
        "event_id": {"S": event_id},
        "status": {"S": "sent" if sent else "pending"},
        "order_id": {"S": order_id},
        "payload_sha256": {"S": sha},
        "ttl": {"N": str(created_at + TTL_SECONDS)},
        "created_at": {"N": str(created_at)},
    }
    if sent:
        item["sent_at"] = {"N": str(created_at + 1)}
    return item


def record_0_2_0(event_id: str, order_id: str, sha: str, *, created_at: int, sent: bool) -> dict[str, Any]:
    """0.2.0's record: pending with its 16-shard ``pending_shard`` and no ``ttl``; the mark sets ``sent_at``
    and ``ttl`` and removes the shard."""
    item = {
        "event_id": {"S": event_id},
        "status": {"S": "sent" if sent else "pending"},
        "order_id": {"S": order_id},
        "payload_sha256": {"S": sha},
        "created_at": {"N": str(created_at)},
    }
    if sent:
        item["sent_at"] = {"N": str(created_at + 1)}
        item["ttl"] = {"N": str(created_at + 1 + TTL_SECONDS)}
    else:
        item["pending_shard"] = {"S": shard_0_2_0(event_id)}
    return item


def wait_past_their_creation_second(records: Iterable[Mapping[str, Any]]) -> None:
    """Return once every record is older than the second it was created in.

    ``pending --older-than 0s`` lists what was created *before* the current whole second (a record
    exactly at the cutoff is not yet old enough), so a test that lists records it has just written
    must let that second pass, or it races the clock.
    """
    newest = max(float(record[PENDING_SINCE_ATTRIBUTE]) for record in records)
    while time.time() < int(newest) + 1:
        time.sleep(0.05)
