"""A rollback to 0.1.0, then forward again: what 0.1.0 did to today's records is repaired.

0.1.0's sent mark (``tests/compat/v0_1_0/lambdas/order_consumer/store.py``, ``mark_sent``) is
``SET #status = :sent, sent_at = :now`` on a pending record: on a record today's consumer wrote
(``pending_shard``, no ``ttl``) it leaves the shard, as today's mark does, and sets no ``ttl``, so it
would never expire. The reconciler gives such a record a ``ttl`` when it reads its entry (its entry
stays, as every sent record's does, until TTL deletes it); it never publishes it (it was notified).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from idempotent_order_pipeline._lambda_asset.order_consumer import reconciler as reconciler_entry
from idempotent_order_pipeline._lambda_asset.order_consumer.runtime import Clients
from tests.reconciler.harness import ReconcilerWorld, order

#: 0.1.0's sent mark, as released (see the module docstring).
V0_1_0_MARK_SENT = "SET #status = :sent, sent_at = :now"


@pytest.fixture
def world() -> Iterator[ReconcilerWorld]:
    with mock_aws():
        aws = Clients(dynamodb=boto3.client("dynamodb"), sns=boto3.client("sns"), sqs=boto3.client("sqs"))
        yield ReconcilerWorld(prefix="rollback-", aws=aws)
    reconciler_entry.configure()


def mark_sent_as_0_1_0(world: ReconcilerWorld, event_ids: list[str]) -> None:
    for event_id in event_ids:
        world.dynamodb.update_item(
            TableName=world.events_table,
            Key={"event_id": {"S": event_id}},
            UpdateExpression=V0_1_0_MARK_SENT,
            ConditionExpression="#status = :pending",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={
                ":sent": {"S": "sent"},
                ":pending": {"S": "pending"},
                ":now": {"N": str(int(time.time()))},
            },
        )


def test_records_0_1_0_marked_sent_get_a_ttl_and_are_not_read_again(world: ReconcilerWorld) -> None:
    # GIVEN records today's consumer left pending, which 0.1.0 (rolled back to) then notified and marked
    now = time.time()
    event_ids = world.pend([order(i) for i in range(3)], created_at=now - 3600)
    mark_sent_as_0_1_0(world, event_ids)
    assert world.pending_in_index() == set(event_ids)
    assert all("ttl" not in world.records()[e] for e in event_ids)  # the rollback's trace

    # WHEN today's reconciler runs
    report = world.reconciler(reconcile_after_seconds=900).run()

    # THEN nothing is published again, and the records expire like any sent record
    assert world.notified() == {}
    assert (report.reconciled, report.already_sent, report.expired) == (0, 3, 3)
    records = world.records()
    assert all(records[e]["status"] == "sent" and int(records[e]["ttl"]) > now for e in event_ids)
    # AND the next run finds nothing to look at (they are behind its checkpoints)
    assert world.reconciler(reconcile_after_seconds=900).run().found == 0


def test_the_expiry_never_touches_a_pending_record(world: ReconcilerWorld) -> None:
    # GIVEN one record 0.1.0 marked sent and one still pending
    sent, pending = world.pend([order(1), order(2)], created_at=time.time() - 3600)
    mark_sent_as_0_1_0(world, [sent])

    # WHEN the reconciler runs
    report = world.reconciler(reconcile_after_seconds=900).run()

    # THEN the pending one is published and marked the usual way, the sent one only given a ttl
    assert world.notified() == {pending: 1}
    assert (report.reconciled, report.expired) == (1, 1)
