"""The reconciler reads only what its role may read: each Query and BatchGetItem projects exactly
the attributes the construct's ``dynamodb:Attributes`` conditions list (the same ``READS`` the
template test checks the role against)."""

from __future__ import annotations

import re
from typing import Any

from tests.reconciler.harness import ReconcilerWorld, order

NOW = 1_800_000_000.0

#: The reconciler's reads and the attributes each may return: keys of the table and of the index, the
#: record's status and identity, an order row's identity (never the order itself).
#: (tests/infra/test_trust_boundaries.py checks the reconciler's role against the same.)
READS = {
    "FindPendingRecords": ["event_id", "pending_shard", "created_at"],
    # the ttl too: a record marked sent without one (0.1.0 after a rollback) is given one
    "ConfirmPendingRecords": ["event_id", "status", "order_id", "payload_sha256", "created_at", "ttl"],
    "ReadOrderRowIdentities": ["order_id", "event_id", "payload_sha256"],
    # its checkpoints, one item under a reserved key
    "ReadCheckpoints": ["event_id", "checkpoints", "revision"],
}


class _RecordingReads:
    """The guarded DynamoDB client, recording every read request."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.reads: list[tuple[str, str, dict[str, Any]]] = []

    def query(self, **request: Any) -> Any:
        self.reads.append(("Query", request["TableName"], request))
        return self._client.query(**request)

    def get_item(self, **request: Any) -> Any:
        self.reads.append(("GetItem", request["TableName"], request))
        return self._client.get_item(**request)

    def batch_get_item(self, **request: Any) -> Any:
        for table, keys_and_projection in request["RequestItems"].items():
            self.reads.append(("BatchGetItem", table, keys_and_projection))
        return self._client.batch_get_item(**request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def projected(request: dict[str, Any]) -> list[str]:
    """The attribute names a read's ProjectionExpression names (placeholders resolved); [] without one."""
    names = request.get("ExpressionAttributeNames", {})
    return [names.get(part, part) for part in re.split(r"\s*,\s*", request.get("ProjectionExpression", "")) if part]


def test_every_read_projects_exactly_the_attributes_its_role_may_read(world: ReconcilerWorld) -> None:
    # GIVEN pending records old enough to reconcile, and the reconciler's reads recorded
    pending = world.pend([order(i) for i in range(5)], created_at=NOW - 7200)
    recording = _RecordingReads(world.guarded_dynamodb)
    world.guarded_dynamodb = recording

    # WHEN the reconciler runs
    report = world.reconciler(reconcile_after_seconds=900, clock=lambda: NOW).run()

    # THEN it reconciled them (the projections carry everything it needs)
    assert report.reconciled == len(pending)
    assert world.notified() == dict.fromkeys(pending, 1)
    # AND every read named its attributes: the index query its keys (Select SPECIFIC_ATTRIBUTES),
    # the record reads the record's, the order-row reads the identity part of a row, the checkpoint
    # read the checkpoint item's, nothing else
    expected = {
        ("Query", world.events_table): READS["FindPendingRecords"],
        ("BatchGetItem", world.events_table): READS["ConfirmPendingRecords"],
        ("BatchGetItem", world.orders_table): READS["ReadOrderRowIdentities"],
        ("GetItem", world.events_table): READS["ReadCheckpoints"],
    }
    seen = {(operation, table) for operation, table, _ in recording.reads}
    assert seen == set(expected)
    for operation, table, request in recording.reads:
        assert projected(request) == expected[(operation, table)], (operation, table)
        if operation == "Query":
            assert request["Select"] == "SPECIFIC_ATTRIBUTES"
