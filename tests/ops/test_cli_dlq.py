"""``order-pipeline dlq list``: the parked messages and their reasons, left in the queue."""

from __future__ import annotations

import json

import pytest

from idempotent_order_pipeline.keys import derive_event_id
from idempotent_order_pipeline.producer import OrderPublisher
from tests.ops.conftest import OpsWorld


def park_three_kinds(ops: OpsWorld) -> None:
    """An invalid message and a conflict parked by the consumer, and one SQS moved after maxReceiveCount."""
    publisher = OrderPublisher(ops.queue_url, client=ops.sqs)
    publisher.send({"order_id": "o-1", "amount": 5})
    ops.consume()
    publisher.send({"order_id": "o-1", "amount": 6})  # same key (order_id), other content
    ops.sqs.send_message(QueueUrl=ops.queue_url, MessageBody="not json")
    ops.consume()
    ops.dead_letter({"order_id": "o-2", "event_id": "evt-2"})


def test_list_shows_each_message_with_its_reason_and_leaves_them_visible(ops: OpsWorld) -> None:
    # GIVEN three dead letters of three kinds
    park_three_kinds(ops)
    # WHEN they are listed as JSON
    result = ops.run("dlq", "list", "--json", "--wait-seconds", "0")
    # THEN each shows its error code, key and order
    assert result.exit_code == 0, result.output
    listed = {m["error_code"]: m for m in map(json.loads, result.stdout.splitlines())}
    assert set(listed) == {"IDEMPOTENCY_CONFLICT", "INVALID_MESSAGE", "MAX_RECEIVES"}
    conflict = listed["IDEMPOTENCY_CONFLICT"]
    assert (conflict["order_id"], conflict["event_id"]) == ("o-1", derive_event_id({"order_id": "o-1"}))
    assert "already recorded with another payload" in conflict["error_message"]
    assert conflict["source_message_id"]
    assert "not valid JSON" in listed["INVALID_MESSAGE"]["error_message"]
    assert (listed["MAX_RECEIVES"]["order_id"], listed["MAX_RECEIVES"]["event_id"]) == ("o-2", "evt-2")
    assert "1 IDEMPOTENCY_CONFLICT, 1 INVALID_MESSAGE, 1 MAX_RECEIVES" in result.stderr
    # AND nothing was consumed: all three are visible again at once
    assert ops.visible_count(ops.dlq_url) == 3


def test_text_listing_and_filters(ops: OpsWorld) -> None:
    # GIVEN three dead letters
    park_three_kinds(ops)
    # WHEN listed as text, THEN a header and one line per message
    text = ops.run("dlq", "list", "--wait-seconds", "0").stdout.splitlines()
    assert text[0].startswith("ERROR_CODE")
    assert sorted(line.split()[0] for line in text[1:]) == ["IDEMPOTENCY_CONFLICT", "INVALID_MESSAGE", "MAX_RECEIVES"]
    # AND filters select by code, order and event
    by_code = ops.run("dlq", "list", "--json", "--wait-seconds", "0", "--error-code", "max_receives").stdout
    assert [json.loads(line)["order_id"] for line in by_code.splitlines()] == ["o-2"]
    by_order = ops.run("dlq", "list", "--json", "--wait-seconds", "0", "--order-id", "o-1").stdout
    assert [json.loads(line)["error_code"] for line in by_order.splitlines()] == ["IDEMPOTENCY_CONFLICT"]
    by_event = ops.run("dlq", "list", "--json", "--wait-seconds", "0", "--event-id", "evt-2", "--body").stdout
    [message] = map(json.loads, by_event.splitlines())
    assert json.loads(message["body"]) == {"order_id": "o-2", "event_id": "evt-2"}


def test_list_pages_past_ten_messages_without_repeating_any(ops: OpsWorld) -> None:
    # GIVEN 25 dead letters
    for i in range(25):
        ops.dead_letter({"order_id": f"o-{i:02d}"})
    # WHEN listed (and then listed with a limit)
    everything = ops.run("dlq", "list", "--json", "--wait-seconds", "0").stdout.splitlines()
    limited = ops.run("dlq", "list", "--json", "--wait-seconds", "0", "--max-messages", "12").stdout.splitlines()
    # THEN each appears exactly once, the limit holds, and all are still there
    assert sorted(json.loads(line)["order_id"] for line in everything) == [f"o-{i:02d}" for i in range(25)]
    assert len(limited) == 12
    assert ops.visible_count(ops.dlq_url) == 25


def test_an_empty_dlq(ops: OpsWorld) -> None:
    result = ops.run("dlq", "list", "--wait-seconds", "0")
    assert result.exit_code == 0
    assert "0 shown of 0 read" in result.stderr


def test_drop_deletes_only_the_selected_messages_and_prints_them(ops: OpsWorld) -> None:
    # GIVEN three dead letters
    park_three_kinds(ops)
    # WHEN the invalid ones are dropped, printed as JSON
    result = ops.run("dlq", "drop", "--error-code", "INVALID_MESSAGE", "--yes", "--json", "--wait-seconds", "0")
    # THEN that message is printed as a record, with its body, and is gone; the others are visible
    assert result.exit_code == 0, result.output
    [dropped] = [json.loads(line) for line in result.stdout.splitlines()]
    assert (dropped["error_code"], dropped["body"]) == ("INVALID_MESSAGE", "not json")
    assert "dropped 1 message(s)" in result.stderr
    left = ops.run("dlq", "list", "--json", "--wait-seconds", "0").stdout.splitlines()
    assert sorted(json.loads(line)["error_code"] for line in left) == ["IDEMPOTENCY_CONFLICT", "MAX_RECEIVES"]


def test_drop_asks_first_and_needs_a_selection(ops: OpsWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN dead letters, and an operator at a terminal
    park_three_kinds(ops)
    monkeypatch.setattr("idempotent_order_pipeline.cli.context.on_terminal", lambda: True)
    # WHEN the prompt is declined, THEN nothing is deleted
    declined = ops.run("dlq", "drop", "--all", "--wait-seconds", "0", input="n\n")
    assert declined.exit_code == 1
    assert ops.visible_count(ops.dlq_url) == 3
    # AND without a selection or --all, or with both, it is a usage error
    assert ops.run("dlq", "drop", "--yes").exit_code == 2
    assert ops.run("dlq", "drop", "--yes", "--all", "--order-id", "o-1").exit_code == 2
    # AND --all --yes empties it
    assert ops.run("dlq", "drop", "--all", "--yes", "--wait-seconds", "0").exit_code == 0
    assert ops.visible_count(ops.dlq_url) == 0
