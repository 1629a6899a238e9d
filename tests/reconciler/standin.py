"""The consumer tests' stand-in endpoint (:mod:`tests.consumer.standin`), taught the reconciler's reads.

On top of what the consumer's stand-in answers (``PublishBatch``, the sent marks), it answers the
pending index's ``Query`` (kind ``query``: shard :data:`BUSY_SHARD` lists :data:`PENDING_PER_SHARD`
records created an hour ago, every other shard none) and ``BatchGetItem`` (kind ``read``: every
listed record is still ``pending`` and its order row is its own, same fingerprint). So a run finds a
full chunk of 25 and more in one shard, and each kind of call can be made to hang or trickle.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.consumer import standin as base

KINDS = (*base.KINDS, "query", "read")
#: The shard whose first page lists pending records, and how many (a chunk of 25 makes 3 PublishBatch calls).
BUSY_SHARD = "0"
PENDING_PER_SHARD = 30
#: How long ago the listed records were created (well past any threshold the tests use).
PENDING_AGE_S = 3600
SHA = "0" * 64
JSON_1_0 = "application/x-amz-json-1.0"


class _Handler(base._Handler):
    @staticmethod
    def _answer(target: str, body: bytes) -> tuple[str, list[str], bytes, str]:
        if target.endswith(".Query"):
            request = json.loads(body)
            shard = request["ExpressionAttributeValues"][":shard"]["S"]
            created = int(time.time()) - PENDING_AGE_S
            count = PENDING_PER_SHARD if shard == BUSY_SHARD else 0
            items = [
                {"event_id": {"S": f"e-{i}"}, "created_at": {"N": str(created)}, "pending_shard": {"S": shard}}
                for i in range(count)
            ]
            answer = {"Items": items, "Count": len(items), "ScannedCount": len(items)}
            return "query", [], json.dumps(answer).encode(), JSON_1_0
        if target.endswith(".BatchGetItem"):
            request = json.loads(body)
            responses: dict[str, list[dict[str, Any]]] = {}
            for table, wanted in request["RequestItems"].items():
                items = []
                for key in wanted["Keys"]:
                    if "event_id" in key:
                        event_id = key["event_id"]["S"]
                        items.append(
                            {
                                "event_id": {"S": event_id},
                                "status": {"S": "pending"},
                                "order_id": {"S": "o-" + event_id},
                                "payload_sha256": {"S": SHA},
                                "created_at": {"N": str(int(time.time()) - PENDING_AGE_S)},
                            }
                        )
                    else:
                        order_id = key["order_id"]["S"]
                        items.append(
                            {
                                "order_id": {"S": order_id},
                                "event_id": {"S": order_id.removeprefix("o-")},
                                "payload_sha256": {"S": SHA},
                            }
                        )
                responses[table] = items
            answer = {"Responses": responses, "UnprocessedKeys": {}}
            return "read", [], json.dumps(answer).encode(), JSON_1_0
        return base._Handler._answer(target, body)


@contextmanager
def running() -> Iterator[base.StandIn]:
    """The consumer's stand-in, answering the reconciler's reads too; stopped on exit."""
    with base.running() as server:
        server.RequestHandlerClass = _Handler
        for kind in KINDS:
            server.behaviour.setdefault(kind, base.ANSWER)
            server.received.setdefault(kind, 0)
            server.accepted.setdefault(kind, [])
        yield server
