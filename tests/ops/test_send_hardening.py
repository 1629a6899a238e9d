"""The producer and ``order-pipeline send`` on hostile inputs: exact numbers, every order reported, FIFO ids.

Never a crash: every order gets a result, every line of a file a verdict; numbers DynamoDB stores
are sent exactly, whatever their size; FIFO ids are valid and deduplication ids injective.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.sns_ids import (
    is_valid_fifo_id,
    queue_deduplication_id,
)
from idempotent_order_pipeline.keys import derive_event_id, payload_sha256
from idempotent_order_pipeline.producer import OrderPublisher
from tests.consumer.harness import ArmedFault, FaultBoard, GuardedClient, client_error
from tests.ops.conftest import OpsWorld

BIG = Decimal(1234567890123456789012345678901)


def raw_rows(ops: OpsWorld) -> dict[str, dict[str, Any]]:
    """Order rows exactly as DynamoDB (moto) holds them, by order id."""
    items = ops.dynamodb.scan(TableName="order-records", ConsistentRead=True)["Items"]
    return {item["order_id"]["S"]: item for item in items}


def test_numbers_are_sent_exactly_whatever_their_size(ops: OpsWorld) -> None:
    # GIVEN orders with a 31-digit Decimal and numbers of 1E+38 and more, which DynamoDB stores
    orders = [
        {"order_id": "o-31", "amount": BIG},
        {"order_id": "o-int", "amount": 10**40},
        {"order_id": "o-e40", "amount": Decimal("1E+40")},
        {"order_id": "o-max", "amount": Decimal("9.9999999999999999999999999999999999999E+125")},
        {"order_id": "o-min", "amount": Decimal("-1E-130")},
        {"order_id": "o-38", "amount": Decimal("0.12345678901234567890123456789012345678")},
    ]
    # WHEN they are sent in one batch
    results = OrderPublisher(ops.queue_url, client=ops.sqs).send_batch(orders)
    # THEN every one is accepted
    assert [(r.order_id, r.ok, r.error_code) for r in results] == [(o["order_id"], True, None) for o in orders]
    # AND the bodies carry every digit (the 31-digit amount is not rounded to 28 digits)
    messages = ops.receive_all(ops.queue_url, delete=False)
    bodies = {json.loads(m["Body"])["order_id"]: m["Body"] for m in messages}
    assert '"amount":1234567890123456789012345678901,' in bodies["o-31"]
    assert '"amount":1' + "0" * 40 + "," in bodies["o-int"]
    # AND the consumer stores each exactly, under the key the producer derived
    for message in messages:
        ops.sqs.change_message_visibility(
            QueueUrl=ops.queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )
    assert ops.consume() == len(orders)
    assert ops.dead_letters() == []
    rows = raw_rows(ops)
    assert {order_id: row["amount"]["N"] for order_id, row in rows.items()} == {
        "o-31": "1234567890123456789012345678901",
        "o-int": "1" + "0" * 40,
        "o-e40": "1" + "0" * 40,
        "o-max": "99999999999999999999999999999999999999" + "0" * 88,
        "o-min": "-0." + "0" * 129 + "1",
        "o-38": "0.12345678901234567890123456789012345678",
    }
    assert {order_id: row["event_id"]["S"] for order_id, row in rows.items()} == {
        o["order_id"]: derive_event_id(o) for o in orders
    }


class _Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr either")


def _cycle() -> dict[str, Any]:
    order: dict[str, Any] = {"order_id": "o-cycle"}
    order["self"] = order
    return order


def _deep() -> dict[str, Any]:
    value: Any = []
    for _ in range(5_000):
        value = [value]
    return {"order_id": "o-deep", "x": value}


def test_send_batch_reports_every_order_and_sends_the_valid_ones(ops: OpsWorld) -> None:
    # GIVEN valid orders mixed with every kind of order that can never be sent
    invalid: list[Any] = [
        {"order_id": "o-s1", "note": "\ud800"},
        {"order_id": "o-s2", "\udfff": 1},
        {"order_id": "o-\ud800"},
        {"order_id": "o-s3", "event_id": "e-\udc00"},
        {"order_id": "o-n1", "amount": Decimal("1E+126")},
        {"order_id": "o-n2", "amount": Decimal("1e-131")},
        {"order_id": "o-n3", "amount": Decimal("1234567890123456789012345678901234567891")},
        {"order_id": "o-n4", "amount": 10**5000},
        {"order_id": "o-n5", "amount": float("inf")},
        {"order_id": "o-n6", "amount": Decimal("NaN")},
        {"order_id": "o-n7", "amount": Decimal("1e999999999999")},
        ["o-list"],
        "o-string",
        None,
        7,
        {"order_id": "o-t1", "at": datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)},
        {"order_id": "o-t2", "tags": {"a", "b"}},
        {"order_id": "o-t3", "x": _Unprintable()},
        {"order_id": "o-t4", 1: "int key"},
        _cycle(),
        _deep(),
    ]
    orders = [{"order_id": "ok-1", "amount": 1}, *invalid, {"order_id": "ok-2"}]
    # WHEN they are sent in one batch
    results = OrderPublisher(ops.queue_url, client=ops.sqs).send_batch(orders)
    # THEN there is one result per order, in order, and no exception
    assert [r.index for r in results] == list(range(len(orders)))
    assert [r.ok for r in results] == [True] + [False] * len(invalid) + [True]
    # AND each invalid order is named by its error code and not sent
    assert {r.error_code for r in results[1:-1]} == {"INVALID_MESSAGE"}
    assert all(r.error and r.message_id is None and r.event_id is None for r in results[1:-1])
    assert "note" in (results[1].error or "")
    assert "out of range" in (results[5].error or "")
    # AND exactly the valid orders reached the queue
    assert sorted(json.loads(m["Body"])["order_id"] for m in ops.receive_all(ops.queue_url)) == ["ok-1", "ok-2"]


def test_fifo_ids_are_valid_and_distinct_events_never_share_a_deduplication_id(make_ops_world: Any) -> None:
    # GIVEN a FIFO pipeline, order ids SQS refuses as group ids, and an event whose raw id is
    # another event's SHA-256 hex (the old mapping gave both one deduplication id)
    ops: OpsWorld = make_ops_world(fifo=True)
    board = FaultBoard()
    client = GuardedClient(ops.sqs, board)
    sent: list[dict[str, Any]] = []
    original = ops.sqs.send_message_batch

    def recording(**kwargs: Any) -> Any:
        sent.extend(kwargs["Entries"])
        return original(**kwargs)

    ops.sqs.send_message_batch = recording  # type: ignore[method-assign]
    collide = "event with spaces"
    orders = [
        {"order_id": "an order id with spaces", "event_id": collide},
        {"order_id": "ordre-é", "event_id": hashlib.sha256(collide.encode()).hexdigest()},
        {"order_id": "x" * 200, "event_id": "evt-long"},
        {"order_id": "o-plain", "event_id": "evt-plain"},
    ]
    # WHEN they are sent
    results = OrderPublisher(ops.queue_url, client=client).send_batch(orders)  # type: ignore[arg-type]
    # THEN all are accepted, with group and deduplication ids SQS's documented rule accepts
    assert [r.ok for r in results] == [True] * len(orders)
    assert len(sent) == len(orders)
    assert all(is_valid_fifo_id(e["MessageGroupId"]) and is_valid_fifo_id(e["MessageDeduplicationId"]) for e in sent)
    # AND a valid order id is its own group, an invalid one a prefixed hash; dedup ids are distinct hashes
    groups = [e["MessageGroupId"] for e in sent]
    assert groups[3] == "o-plain"
    assert groups[0] == "sha256:" + hashlib.sha256(b"an order id with spaces").hexdigest()
    assert [e["MessageDeduplicationId"] for e in sent] == [
        queue_deduplication_id(o["event_id"], payload_sha256(o)) for o in orders
    ]
    # AND every event is in the queue: none was dropped as another's duplicate
    assert sorted(json.loads(m["Body"])["event_id"] for m in ops.receive_all(ops.queue_url)) == sorted(
        o["event_id"] for o in orders
    )


def test_send_skips_every_kind_of_invalid_line_and_sends_the_others(ops: OpsWorld, tmp_path: Path) -> None:
    # GIVEN a file with valid lines and lines that can never be sent, one of them not even UTF-8
    lines = [
        b'{"order_id": "ok-1", "amount": 1234567890123456789012345678901}',
        b'{"order_id": "bad-1", "note": "\\ud800"}',
        b'{"order_id": "bad-2", "n": 1e1000000}',
        b'{"order_id": "bad-3", "n": 1' + b"0" * 5000 + b".5}",
        b'{"order_id": "bad-4", "x": "\xff\xfe"}',
        b'{"order_id": "ok-2", "n": 1' + b"0" * 41 + b"}",
        b"[1, 2]",
    ]
    source = tmp_path / "orders.jsonl"
    source.write_bytes(b"\n".join(lines) + b"\n")
    # WHEN it is sent with --on-invalid skip
    result = ops.run("send", str(source), "--on-invalid", "skip", "--json")
    # THEN the command completes (no traceback) and reports every line
    assert result.exit_code == 0, result.output
    assert result.exception is None
    verdicts = {r["line"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert {line: verdict["sent"] for line, verdict in verdicts.items()} == {
        1: True,
        2: False,
        3: False,
        4: False,
        5: False,
        6: True,
        7: False,
    }
    # AND the invalid ones are listed with their line numbers and reasons
    assert "line 2: invalid: INVALID_MESSAGE: note is not valid Unicode" in result.stderr
    assert "line 3: invalid: INVALID_MESSAGE: n: 1e1000000 is out of range" in result.stderr
    assert "line 4: invalid: INVALID_MESSAGE" in result.stderr
    assert "line 5: invalid: INVALID_MESSAGE: the line is not valid UTF-8" in result.stderr
    assert "line 7: invalid: INVALID_MESSAGE: body must be a JSON object" in result.stderr
    assert "sent 2 of 7 order(s)" in result.stderr
    # AND the valid lines were sent with every digit, and the consumer records them exactly
    assert ops.consume() == 2
    rows = raw_rows(ops)
    assert rows["ok-1"]["amount"] == {"N": "1234567890123456789012345678901"}
    assert rows["ok-2"]["n"] == {"N": "1" + "0" * 41}


def test_pending_resend_recovers_an_order_with_more_than_28_digits(ops: OpsWorld) -> None:
    # GIVEN an order with a 31-digit amount and one of 1E+41, recorded while SNS failed, its message lost
    order = {"order_id": "o-31", "amount": BIG, "huge": 10**41}
    OrderPublisher(ops.queue_url, client=ops.sqs).send(order)
    ops.board.arm(ArmedFault(client_error("Publish", "InternalError"), operation="publish_batch"))
    ops.invoke(ops.lambda_records())
    ops.board.disarm()
    event_id = derive_event_id(order)
    assert ops.event_records()[event_id]["status"] == "pending"
    ops.dynamodb.update_item(
        TableName="processed-events",
        Key={"event_id": {"S": event_id}},
        UpdateExpression="SET created_at = :t",
        ExpressionAttributeValues={":t": {"N": str(int(time.time()) - 3600)}},
    )
    # WHEN the operator resends pending records
    result = ops.run("pending", "--resend", "--yes")
    # THEN the order is rebuilt from its row and re-enqueued with every digit
    assert result.exit_code == 0, result.output
    assert "-> resent" in result.stdout
    # AND the consumer finds the same payload: it publishes and marks it sent, no conflict is parked
    assert ops.consume() == 1
    assert ops.event_records()[event_id]["status"] == "sent"
    assert ops.notified_events() == {event_id: 1}
    assert ops.dead_letters() == []
    assert raw_rows(ops)["o-31"]["amount"] == {"N": "1234567890123456789012345678901"}
