"""Every per-record outcome of the consumer contract, asserted on tables, notifications, DLQ and response."""

from __future__ import annotations

import io
import json
import time
from decimal import Decimal
from typing import Any

import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.keys import derive_event_id, payload_sha256
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import pending_shard
from tests.consumer.harness import ArmedFault, Crash, World, seed, sqs_record

ORDER = {"order_id": "o-1", "customer_id": "c-9", "amount": 12.5, "items": [{"sku": "A", "qty": 2}]}


def test_new_event_is_recorded_notified_and_marked_sent(world: World) -> None:
    # GIVEN a first delivery of an order without event_id
    record = sqs_record(ORDER)
    before = int(time.time())
    event_id = derive_event_id(ORDER)
    # AND a probe that reads the state record when the notification is published
    while_publishing: dict[str, Any] = {}

    def snapshot(request: dict[str, Any]) -> bool:
        while_publishing.update(world.event_records()[event_id])
        return False  # never fires

    world.board.arm(ArmedFault(Crash("never"), "publish_batch", when=snapshot))
    # WHEN the handler processes it
    response = world.invoke([record])
    # THEN it is acknowledged
    assert response == {"batchItemFailures": []}
    # AND the order row holds the body's fields exactly, plus the key and the fingerprint
    row = world.order_rows()["o-1"]
    assert row["amount"] == Decimal("12.5")
    assert row["items"] == [{"sku": "A", "qty": Decimal(2)}]
    assert row["event_id"] == event_id
    assert row["payload_sha256"] == payload_sha256(ORDER)
    # AND while it was pending the record had no ttl (it cannot expire) and sat in the pending index
    assert while_publishing["status"] == "pending"
    assert "ttl" not in while_publishing
    assert while_publishing["pending_shard"] == pending_shard(event_id)
    # AND now it is sent, its index entry left as written (the mark writes no index key: no index
    # write), with its TTL 30 days after the sent time
    state = world.event_records()[event_id]
    assert state["status"] == "sent"
    assert state["order_id"] == "o-1"
    assert state["payload_sha256"] == payload_sha256(ORDER)
    assert before <= state["created_at"] <= state["sent_at"] <= time.time()
    assert state["ttl"] - state["sent_at"] == 2592000
    assert (state["pending_shard"], state["created_at"]) == (
        while_publishing["pending_shard"],
        while_publishing["created_at"],
    )
    # AND exactly one notification names the event and the order, in the body and as attributes
    [notification] = world.new_notifications()
    assert json.loads(notification["Message"])["event_id"] == event_id
    assert json.loads(notification["Message"])["order_id"] == "o-1"
    assert notification["MessageAttributes"]["event_id"]["Value"] == event_id
    assert notification["MessageAttributes"]["order_id"]["Value"] == "o-1"
    # AND nothing went to the DLQ; the calls were: transaction, PublishBatch, the sent mark (BatchExecuteStatement)
    assert world.dead_letters() == []
    assert world.board.calls == {"transact_write_items": 1, "publish_batch": 1, "batch_execute_statement": 1}


def test_record_stored_with_a_ttl_by_an_earlier_version_is_marked_with_a_new_one(world: World) -> None:
    # GIVEN a pending record an earlier version wrote with a ttl and without a pending shard
    event_id = seed(world, ORDER, status="pending")
    old_ttl = world.event_records()[event_id]["ttl"]
    # WHEN it is redelivered
    response = world.invoke([sqs_record(ORDER, receive_count=2)])
    # THEN it is published and marked sent with the ttl counted from the sent time
    assert response == {"batchItemFailures": []}
    state = world.event_records()[event_id]
    assert state["status"] == "sent"
    assert state["ttl"] == state["sent_at"] + 2592000
    assert state["ttl"] > old_ttl
    assert "pending_shard" not in state
    assert len(world.new_notifications()) == 1


def test_sent_event_with_same_payload_is_skipped_with_one_call(world: World) -> None:
    # GIVEN an event already recorded and notified
    event_id = seed(world, ORDER, status="sent")
    # WHEN SQS delivers it again (new message id), with the keys in another order
    reordered = dict(reversed(list(ORDER.items())))
    response = world.invoke([sqs_record(reordered)])
    # THEN it is acknowledged without any write or publish: one API call in all
    assert response == {"batchItemFailures": []}
    assert world.board.calls == {"transact_write_items": 1}
    assert world.new_notifications() == []
    assert world.event_records()[event_id]["status"] == "sent"
    assert world.dead_letters() == []


def test_pending_event_with_same_payload_is_republished_and_marked_sent(world: World) -> None:
    # GIVEN an earlier delivery committed the order but died before publishing
    event_id = seed(world, ORDER, status="pending")
    # WHEN SQS redelivers it
    response = world.invoke([sqs_record(ORDER, receive_count=2)])
    # THEN it is published and marked sent; the row is not rewritten
    assert response == {"batchItemFailures": []}
    assert [json.loads(n["Message"])["event_id"] for n in world.new_notifications()] == [event_id]
    assert world.event_records()[event_id]["status"] == "sent"
    assert "amount" not in world.order_rows()["o-1"]  # the seeded row, untouched
    assert world.board.calls == {"transact_write_items": 1, "publish_batch": 1, "batch_execute_statement": 1}


@pytest.mark.parametrize("status", ["pending", "sent"])
def test_same_event_id_with_other_payload_is_parked_as_conflict(
    world: World, status: str, log_stream: io.StringIO
) -> None:
    # GIVEN an event recorded with one payload
    event_id = seed(world, ORDER, status=status, event_id="evt-1")
    # WHEN a message reuses its event_id with another payload
    changed = {**ORDER, "amount": 99, "event_id": "evt-1"}
    record = sqs_record(changed, attributes={"source": {"stringValue": "shop", "dataType": "String"}})
    response = world.invoke([record])
    # THEN it is acknowledged, parked in the DLQ with the reason and the original body and attributes
    assert response == {"batchItemFailures": []}
    [parked] = world.dead_letters()
    assert parked["Body"] == record["body"]
    assert parked["MessageAttributes"]["error_code"]["StringValue"] == "IDEMPOTENCY_CONFLICT"
    assert "evt-1" in parked["MessageAttributes"]["error_message"]["StringValue"]
    assert parked["MessageAttributes"]["source_message_id"]["StringValue"] == record["messageId"]
    assert parked["MessageAttributes"]["source"]["StringValue"] == "shop"
    # AND nothing was changed or published
    assert world.event_records()[event_id]["status"] == status
    assert world.order_rows()["o-1"]["event_id"] == "evt-1"
    assert world.new_notifications() == []
    # AND the log line of the parked record names its event and order, for the operator
    [line] = [json.loads(text) for text in log_stream.getvalue().splitlines() if "order message parked" in text]
    assert (line["event_id"], line["order_id"], line["outcome"]) == ("evt-1", "o-1", "conflict")


def test_order_recorded_without_state_record_and_same_payload_is_a_duplicate(world: World) -> None:
    # GIVEN the order row exists but its state record expired (TTL)
    seed(world, ORDER, status="sent")
    world.dynamodb.delete_item(TableName="processed-events", Key={"event_id": {"S": derive_event_id(ORDER)}})
    # WHEN the order arrives again under another event_id
    response = world.invoke([sqs_record({**ORDER, "event_id": "evt-late"})])
    # THEN it is acknowledged with no write and no notification
    assert response == {"batchItemFailures": []}
    assert world.new_notifications() == []
    assert world.event_records() == {}
    assert world.dead_letters() == []
    # AND one conditional update asked whether the row's own record was still pending (it is gone)
    assert world.board.calls == {"transact_write_items": 1, "update_item": 1}


def test_order_recorded_without_state_record_and_other_payload_is_a_conflict(world: World) -> None:
    # GIVEN the order row exists under another event and its record is gone
    seed(world, ORDER, status="sent", event_id="evt-old")
    world.dynamodb.delete_item(TableName="processed-events", Key={"event_id": {"S": "evt-old"}})
    # WHEN a new event carries the same order_id with other content
    response = world.invoke([sqs_record({**ORDER, "amount": 1, "event_id": "evt-new"})])
    # THEN it is parked as a conflict naming the order and the event that holds it
    assert response == {"batchItemFailures": []}
    [parked] = world.dead_letters()
    assert parked["MessageAttributes"]["error_code"]["StringValue"] == "IDEMPOTENCY_CONFLICT"
    assert "evt-old" in parked["MessageAttributes"]["error_message"]["StringValue"]
    assert world.event_records() == {}
    assert world.new_notifications() == []


def test_an_order_row_whose_own_pending_record_has_another_key_is_finished_under_that_key(
    make_world: Any, log_stream: io.StringIO
) -> None:
    # GIVEN a pipeline sending the country as an attribute, and an order recorded under another event id (as a
    # version that keyed it otherwise left it) whose record is still pending, not notified
    world = make_world(env={"NOTIFICATION_ATTRIBUTES": '["country"]'})
    order = {**ORDER, "country": "DE"}
    seed(world, order, status="pending", event_id="evt-old-key")
    # WHEN the same order is delivered under today's key
    response = world.invoke([sqs_record(order)])
    # THEN it is acknowledged, and announced once under the row's own event id, with the configured attribute
    assert response == {"batchItemFailures": []}
    [notification] = world.new_notifications()
    assert json.loads(notification["Message"])["event_id"] == "evt-old-key"
    attributes = {name: a["Value"] for name, a in notification["MessageAttributes"].items()}
    assert attributes == {"event_id": "evt-old-key", "order_id": "o-1", "country": "DE"}
    # AND that record is marked sent, and no record is made under today's key
    assert world.event_records()["evt-old-key"]["status"] == "sent"
    assert set(world.event_records()) == {"evt-old-key"}
    # AND it counts as a republication (the order was recorded before), not a new notification
    [batch] = [json.loads(text) for text in log_stream.getvalue().splitlines() if "order batch processed" in text]
    assert batch["outcomes"] == {"republished": 1}


def test_numbers_are_stored_exactly(world: World) -> None:
    # GIVEN numbers a float would round
    body = '{"order_id": "o-n", "price": 0.1, "big": 12345678901234567890123456789012345678, "tiny": 1e-100}'
    # WHEN the order is recorded
    assert world.invoke([sqs_record(body)]) == {"batchItemFailures": []}
    # THEN DynamoDB holds the same decimal numbers
    raw = world.dynamodb.get_item(TableName="order-records", Key={"order_id": {"S": "o-n"}})["Item"]
    assert raw["price"] == {"N": "0.1"}
    assert Decimal(raw["big"]["N"]) == Decimal("12345678901234567890123456789012345678")
    assert Decimal(raw["tiny"]["N"]) == Decimal("1e-100")


def test_fifo_topic_gets_group_and_deduplication_ids(make_world: Any) -> None:
    # GIVEN a FIFO topic
    world = make_world(fifo=True)
    # WHEN an order is recorded
    response = world.invoke([sqs_record({**ORDER, "event_id": "evt-f"}, group="g1")])
    # THEN the notification went through the FIFO topic (which rejects publishes without these ids)
    assert response == {"batchItemFailures": []}
    [notification] = world.new_notifications()
    assert json.loads(notification["Message"])["event_id"] == "evt-f"
    assert world.event_records()["evt-f"]["status"] == "sent"
