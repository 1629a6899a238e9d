"""``order-pipeline pending``: records stuck in pending, and re-enqueueing their orders when no copy is left."""

from __future__ import annotations

import json
import time
from decimal import Decimal

import pytest

from idempotent_order_pipeline.keys import derive_event_id
from idempotent_order_pipeline.producer import OrderPublisher
from tests.consumer.harness import ArmedFault, client_error, seed
from tests.ops.conftest import OpsWorld

ORDERS = [
    {"order_id": "o-old", "amount": Decimal("19.99"), "items": [{"sku": "A", "qty": 2}], "gift": True, "note": None},
    {"order_id": "o-older", "amount": 3},
    {"order_id": "o-new", "amount": 1},
]


def record_pending(ops: OpsWorld, ages: dict[str, int]) -> None:
    """Record ORDERS while SNS fails (their records stay pending), lose the messages, then age the records."""
    OrderPublisher(ops.queue_url, client=ops.sqs).send_batch(ORDERS)
    ops.board.arm(ArmedFault(client_error("PublishBatch", "InternalError"), operation="publish_batch"))
    ops.invoke(ops.lambda_records())  # the messages are gone (expired in the DLQ, say)
    ops.board.disarm()
    for order_id, age in ages.items():
        ops.dynamodb.update_item(
            TableName="processed-events",
            Key={"event_id": {"S": derive_event_id({"order_id": order_id})}},
            UpdateExpression="SET created_at = :t",
            ExpressionAttributeValues={":t": {"N": str(int(time.time()) - age)}},
        )


def test_pending_lists_only_records_older_than_the_threshold_oldest_first(ops: OpsWorld) -> None:
    # GIVEN three pending records, 1 h, 2 h and 1 minute old, and one sent record 2 h old
    record_pending(ops, {"o-old": 3600, "o-older": 7200, "o-new": 60})
    OrderPublisher(ops.queue_url, client=ops.sqs).send({"order_id": "o-sent"})
    ops.consume()
    # WHEN pending records older than 15 minutes are listed
    result = ops.run("pending", "--json")
    # THEN the two old pending ones are listed, oldest first, with their ages
    assert result.exit_code == 0, result.output
    listed = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["order_id"] for r in listed] == ["o-older", "o-old"]
    assert listed[0]["event_id"] == derive_event_id({"order_id": "o-older"})
    assert 7200 <= listed[0]["age_seconds"] < 7300
    assert "2 record(s) pending for more than 15m" in result.stderr
    # AND a shorter threshold and a limit change the selection
    assert len(ops.run("pending", "--older-than", "30s", "--json").stdout.splitlines()) == 3
    assert [json.loads(x)["order_id"] for x in ops.run("pending", "--limit", "1", "--json").stdout.splitlines()] == [
        "o-older"
    ]
    # AND nothing was changed or sent
    assert ops.receive_all(ops.queue_url) == []


def test_resend_rebuilds_each_order_and_the_consumer_publishes_it_without_rewriting_the_row(ops: OpsWorld) -> None:
    # GIVEN two old pending records whose messages are gone, and a recent one still in flight
    record_pending(ops, {"o-old": 3600, "o-older": 7200, "o-new": 60})
    rows_before = ops.order_rows()
    # WHEN they are resent
    result = ops.run("pending", "--resend")
    # THEN both were re-enqueued (the recent one was not)
    assert result.exit_code == 0, result.output
    assert result.stdout.count("-> resent") == 2
    assert "resent 2" in result.stderr
    # AND once consumed, each is published once and marked sent, and the rows are untouched
    assert ops.consume() == 2
    old, older = (derive_event_id({"order_id": o}) for o in ("o-old", "o-older"))
    records = ops.event_records()
    assert (records[old]["status"], records[older]["status"]) == ("sent", "sent")
    assert ops.notified_events() == {old: 1, older: 1}
    assert ops.order_rows() == rows_before
    assert ops.dead_letters() == []
    # AND nothing is pending any more but the recent one
    assert ops.run("pending", "--older-than", "0s", "--json").stdout.count("o-new") == 1


def test_a_record_whose_row_does_not_match_is_not_resent(ops: OpsWorld) -> None:
    # GIVEN a pending record whose order row does not hash to its payload_sha256 (seeded by hand)
    seed(ops, {"order_id": "o-odd", "amount": 5}, status="pending")
    ops.dynamodb.update_item(
        TableName="processed-events",
        Key={"event_id": {"S": derive_event_id({"order_id": "o-odd"})}},
        UpdateExpression="SET created_at = :t",
        ExpressionAttributeValues={":t": {"N": str(int(time.time()) - 3600)}},
    )
    # WHEN resending is asked for
    result = ops.run("pending", "--resend")
    # THEN it is refused with the reason, the command fails, and nothing is sent
    assert result.exit_code == 1
    assert "NOT resent: the order rebuilt from its row does not hash" in result.stdout
    assert ops.receive_all(ops.queue_url) == []


@pytest.mark.parametrize(("value", "listed"), [("1h30m", 0), ("5400", 0), ("59m", 1)])
def test_older_than_takes_durations(ops: OpsWorld, value: str, listed: int) -> None:
    # GIVEN a record pending for an hour, WHEN listed with a threshold, THEN it is included or not
    record_pending(ops, {"o-old": 3600})
    result = ops.run("pending", "--older-than", value, "--json")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("o-old") == listed


def test_a_malformed_duration_is_a_usage_error(ops: OpsWorld) -> None:
    result = ops.run("pending", "--older-than", "soon")
    assert result.exit_code == 2
    assert "not a duration such as 90s, 15m" in result.stderr
