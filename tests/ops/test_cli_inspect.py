"""``order-pipeline inspect``: what happened to event X (or order Y)."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from idempotent_order_pipeline.keys import derive_event_id, payload_sha256
from idempotent_order_pipeline.producer import OrderPublisher
from tests.consumer.harness import ArmedFault, client_error
from tests.ops.conftest import OpsWorld

ORDER = {"order_id": "o-1", "amount": Decimal("12.50"), "customer_id": "c-9"}
EVENT_ID = derive_event_id(ORDER)


def record_order(ops: OpsWorld, *, publish_fails: bool = False) -> None:
    """Send ORDER and run the consumer once (publish failing: the record stays pending)."""
    OrderPublisher(ops.queue_url, client=ops.sqs).send(ORDER)
    if publish_fails:
        ops.board.arm(ArmedFault(client_error("PublishBatch", "InternalError"), operation="publish_batch"))
    ops.invoke(ops.lambda_records())
    ops.board.disarm()


def test_a_recorded_and_notified_event(ops: OpsWorld) -> None:
    # GIVEN an order recorded and notified
    record_order(ops)
    # WHEN it is inspected by event id
    result = ops.run("inspect", EVENT_ID, "--json")
    # THEN state, row and "notified" come from the tables
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["notified"] is True
    assert report["order_id"] == "o-1"
    assert report["state"]["status"] == "sent"
    assert report["state"]["sent_at"] >= report["state"]["created_at"]
    assert report["order_row"] == {
        "order_id": "o-1",
        "amount": 12.5,
        "customer_id": "c-9",
        "event_id": EVENT_ID,
        "payload_sha256": payload_sha256(ORDER),
    }
    assert report["findings"] == []
    # AND the text form says the same
    text = ops.run("inspect", EVENT_ID).stdout
    assert "notified   yes (status sent)" in text
    assert "state      sent: created 20" in text
    # AND it expires record_retention after it was sent (the sent mark set the ttl)
    assert report["state"]["ttl"] > report["state"]["sent_at"]
    assert ", expires 20" in text
    assert "  amount: 12.5" in text


def test_lookup_by_order_id(ops: OpsWorld) -> None:
    # GIVEN a recorded order, WHEN inspected by --order
    record_order(ops)
    report = json.loads(ops.run("inspect", "--order", "o-1", "--json").stdout)
    # THEN the event is found through the row
    assert (report["event_id"], report["notified"]) == (EVENT_ID, True)


def test_a_pending_event_is_not_notified_and_says_what_to_do(ops: OpsWorld) -> None:
    # GIVEN an order recorded whose notification failed
    record_order(ops, publish_fails=True)
    # WHEN inspected
    result = ops.run("inspect", EVENT_ID)
    # THEN it is shown as recorded, not notified, with the way out
    assert result.exit_code == 0
    assert "notified   no (status pending)" in result.stdout
    assert "pending --resend" in result.stdout
    report = json.loads(ops.run("inspect", EVENT_ID, "--json").stdout)
    assert report["state"]["status"] == "pending"
    # AND a pending record has no ttl: it never expires until it is marked sent
    assert "ttl" not in report["state"]
    assert "expires never while pending (the sent mark sets the ttl)" in result.stdout


def test_an_order_whose_record_expired(ops: OpsWorld) -> None:
    # GIVEN a recorded order whose state record expired (TTL)
    record_order(ops)
    ops.dynamodb.delete_item(TableName="processed-events", Key={"event_id": {"S": EVENT_ID}})
    # WHEN inspected by order
    report = json.loads(ops.run("inspect", "--order", "o-1", "--json").stdout)
    # THEN the row is shown, notification unknown, and the finding explains it
    assert report["found"] is True
    assert report["notified"] is None
    assert report["state"] is None
    assert "expired" in report["findings"][0]


def test_an_unknown_event_exits_with_3(ops: OpsWorld) -> None:
    # GIVEN nothing recorded, WHEN an event is inspected
    result = ops.run("inspect", "evt-unknown")
    # THEN exit code 3 and a hint where to look
    assert result.exit_code == 3
    assert "not recorded" in result.stdout
    assert "dlq list" in result.stdout


@pytest.mark.parametrize("args", [[], ["evt-1", "--order", "o-1"]], ids=["neither", "both"])
def test_inspect_needs_exactly_one_of_event_and_order(ops: OpsWorld, args: list[str]) -> None:
    result = ops.run("inspect", *args)
    assert result.exit_code == 2
    assert "give an EVENT_ID or --order ORDER_ID" in result.stderr
