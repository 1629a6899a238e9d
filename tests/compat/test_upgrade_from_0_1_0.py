"""Records 0.1.0 left behind, processed by the current consumer: no notification is lost.

0.1.0 derived keys without escaping ``|`` and ``\\``, gave a pending record a ``ttl`` and no
``pending_shard``. A record it left ``pending`` for such an order id is redelivered under today's
(escaped) key: the order row exists with the same content, so the delivery is a duplicate of the
row, but the row's own record still waits for its notification.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.keys import derive_event_id
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.message import parse_order_message
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import pending_shard
from tests.compat.released import v0_1_0_keys
from tests.consumer.harness import ArmedFault, World, client_error, sqs_record

TTL_SECONDS = 2_592_000
#: Starts processes (the test tiers' rule).
pytestmark = pytest.mark.slow


def seed_as_0_1_0(world: World, order: dict[str, Any], *, status: str) -> str:
    """The record and the order row exactly as 0.1.0's transaction (and, if sent, its mark) left them."""
    [(event_id, sha)] = v0_1_0_keys([order])
    now = int(time.time()) - 3600
    record = {
        "event_id": {"S": event_id},
        "status": {"S": status},
        "order_id": {"S": order["order_id"]},
        "payload_sha256": {"S": sha},
        "ttl": {"N": str(now + TTL_SECONDS)},
        "created_at": {"N": str(now)},
        **({"sent_at": {"N": str(now + 1)}} if status == "sent" else {}),
    }
    row = {key: {"S": value} if isinstance(value, str) else {"N": str(value)} for key, value in order.items()}
    row.update({"event_id": {"S": event_id}, "payload_sha256": {"S": sha}})
    world.dynamodb.put_item(TableName=world.events_table, Item=record)
    world.dynamodb.put_item(TableName=world.orders_table, Item=row)
    return event_id


@pytest.mark.parametrize("order_id", ["acme|2026|0001", "C:\\orders\\7", "plain-0001"])
def test_a_record_0_1_0_left_pending_is_notified_when_its_message_comes_back(world: World, order_id: str) -> None:
    # GIVEN an order 0.1.0 recorded and left pending (crashed before its notification), and its
    # message still in the queue (no idempotency key: the key is derived)
    order = {"order_id": order_id, "amount": 5, "customer": "c-1"}
    old_key = seed_as_0_1_0(world, order, status="pending")
    message = parse_order_message(json.dumps(order))
    assert message.payload_sha256 == world.order_rows()[order_id]["payload_sha256"]  # same content, same print
    escaped = old_key != derive_event_id(order)
    assert escaped == (order_id != "plain-0001")

    # WHEN the current consumer receives the message again
    response = world.invoke([sqs_record(order)])

    # THEN the order is notified once, under the event id its record and row carry
    assert response == {"batchItemFailures": []}
    assert world.notified_events() == {old_key: 1}
    # AND that record is sent, with a ttl from its mark; no second record. Under an escaped key it was
    # found through its row and adopted into the index first (its entry stays, as every sent record's)
    records = world.event_records()
    assert set(records) == {old_key}
    assert records[old_key]["status"] == "sent"
    assert ("pending_shard" in records[old_key]) == escaped
    assert int(records[old_key]["ttl"]) > time.time() + TTL_SECONDS - 60


def test_a_record_0_1_0_sent_stays_a_duplicate(world: World) -> None:
    # GIVEN an order 0.1.0 recorded and notified, under an unescaped key
    order = {"order_id": "acme|2026|0002", "amount": 5}
    old_key = seed_as_0_1_0(world, order, status="sent")
    before = world.event_records()[old_key]

    # WHEN its message is delivered again to the current consumer
    response = world.invoke([sqs_record(order)])

    # THEN it is acknowledged as a duplicate: nothing published, nothing changed
    assert response == {"batchItemFailures": []}
    assert world.notified_events() == {}
    assert world.event_records() == {old_key: before}


def test_the_pending_check_puts_the_old_record_in_the_index_before_publishing(world: World) -> None:
    # GIVEN an order 0.1.0 left pending under an unescaped key, and SNS failing
    order = {"order_id": "acme|2026|0003", "amount": 5}
    old_key = seed_as_0_1_0(world, order, status="pending")
    world.board.arm(ArmedFault(client_error("PublishBatch", "InternalError"), operation="publish_batch"))

    # WHEN its message comes back and the notification fails
    response = world.invoke([sqs_record(order)])

    # THEN the message is left to SQS, and the record is now where the reconciler and `pending` look:
    # in the pending index, without the ttl that could have expired it while pending
    assert len(response["batchItemFailures"]) == 1
    record = world.event_records()[old_key]
    assert record["status"] == "pending"
    assert record["pending_shard"] == pending_shard(old_key)
    assert "ttl" not in record
