"""``order-pipeline pending``: records stuck in pending, and re-enqueueing their orders when no copy is left."""

from __future__ import annotations

import json
import time
from decimal import Decimal
from typing import Any

import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import every_shard, pending_shard
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
    result = ops.run("pending", "--resend", "--yes")
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
    event_id = derive_event_id({"order_id": "o-odd"})
    ops.dynamodb.update_item(
        TableName="processed-events",
        Key={"event_id": {"S": event_id}},
        UpdateExpression="SET created_at = :t, pending_shard = :shard",  # in the index, as the consumer writes it
        ExpressionAttributeValues={":t": {"N": str(int(time.time()) - 3600)}, ":shard": {"S": pending_shard(event_id)}},
    )
    # WHEN resending is asked for
    result = ops.run("pending", "--resend", "--yes")
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


class RecordingClient:
    """A DynamoDB client proxy that records the operations asked of it (paginated ones included)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.operations: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if name == "get_paginator":

            def paginator(operation: str) -> Any:
                real = attribute(operation)
                outer = self

                class Recorded:
                    def paginate(self, **request: Any) -> Any:
                        outer.operations.append((operation, request))
                        return real.paginate(**request)

                return Recorded()

            return paginator
        if callable(attribute) and not name.startswith("_") and name not in ("meta", "exceptions"):

            def call(**request: Any) -> Any:
                self.operations.append((name, request))
                return attribute(**request)

            return call
        return attribute


def test_pending_queries_every_shard_of_the_index_and_never_scans(ops: OpsWorld) -> None:
    # GIVEN two old pending records
    record_pending(ops, {"o-old": 3600, "o-older": 7200})
    recording = RecordingClient(ops.dynamodb)
    # WHEN they are listed
    result = ops.run("pending", "--json", dynamodb=recording)
    # THEN the CLI queried the pending index once per shard, read the hits consistently, and scanned nothing
    assert result.exit_code == 0, result.output
    assert len(result.stdout.splitlines()) == 2
    names = [name for name, _ in recording.operations]
    assert "scan" not in names
    queries = [request for name, request in recording.operations if name == "query"]
    assert sorted(q["ExpressionAttributeValues"][":shard"]["S"] for q in queries) == sorted(every_shard())
    assert {q["IndexName"] for q in queries} == {"pending-by-age"}
    [read] = [request for name, request in recording.operations if name == "batch_get_item"]
    assert read["RequestItems"]["processed-events"]["ConsistentRead"] is True


def test_a_record_the_lagging_index_still_lists_but_is_sent_is_left_out(ops: OpsWorld) -> None:
    # GIVEN an old pending record, and a sent one that still carries pending_shard (as if the index lagged)
    record_pending(ops, {"o-old": 3600})
    OrderPublisher(ops.queue_url, client=ops.sqs).send({"order_id": "o-sent"})
    ops.consume()
    sent = derive_event_id({"order_id": "o-sent"})
    ops.dynamodb.update_item(
        TableName="processed-events",
        Key={"event_id": {"S": sent}},
        UpdateExpression="SET created_at = :t, pending_shard = :shard",
        ExpressionAttributeValues={":t": {"N": str(int(time.time()) - 3600)}, ":shard": {"S": pending_shard(sent)}},
    )
    # WHEN pending records are listed
    result = ops.run("pending", "--json")
    # THEN only the one the consistent read confirms as pending is listed
    assert [json.loads(line)["order_id"] for line in result.stdout.splitlines()] == ["o-old"]


def test_a_record_the_consumer_marked_sent_is_never_listed(ops: OpsWorld) -> None:
    # GIVEN an order delivered normally (recorded, published, marked sent)
    OrderPublisher(ops.queue_url, client=ops.sqs).send({"order_id": "o-sent"})
    ops.consume()
    # WHEN its record is read / THEN it keeps its index entry (the mark writes no index key), yet the
    # listing, which reads each entry's record, leaves it out
    record = ops.event_records()[derive_event_id({"order_id": "o-sent"})]
    assert record["status"] == "sent"
    assert "pending_shard" in record
    assert ops.run("pending", "--older-than", "0s", "--json").stdout == ""


class AlwaysUnprocessed(RecordingClient):
    """A DynamoDB client whose BatchGetItem never processes a key (throttled, forever)."""

    def batch_get_item(self, **request: Any) -> Any:
        self.operations.append(("batch_get_item", request))
        return {"Responses": {}, "UnprocessedKeys": request["RequestItems"]}


def test_pending_tries_unprocessed_keys_a_bounded_number_of_times_then_fails_naming_them(ops: OpsWorld) -> None:
    # GIVEN two old pending records, and a DynamoDB that never processes a BatchGetItem key
    record_pending(ops, {"o-old": 3600, "o-older": 7200})
    throttled = AlwaysUnprocessed(ops.dynamodb)
    # WHEN they are listed
    result = ops.run("pending", "--json", dynamodb=throttled)
    # THEN the CLI gave up after the reconciler's 3 attempts instead of asking forever
    assert [name for name, _ in throttled.operations].count("batch_get_item") == 3
    # AND it failed naming what it could not read, without listing a partial result as complete
    assert result.exit_code == 1
    assert "2 record(s) the pending index lists were still unprocessed after 3 BatchGetItem attempts" in result.stderr
    assert result.stdout == ""


class QueryFails(RecordingClient):
    """A DynamoDB client whose Query is refused (no permission on the index, say)."""

    def query(self, **request: Any) -> Any:
        raise client_error("Query", "AccessDeniedException", "not allowed on the index")


def test_a_failed_index_query_ends_pending_with_one_line_naming_the_shard_and_the_cause(ops: OpsWorld) -> None:
    # GIVEN an old pending record, and a DynamoDB that refuses every Query
    record_pending(ops, {"o-old": 3600})
    # WHEN pending records are listed
    result = ops.run("pending", "--json", dynamodb=QueryFails(ops.dynamodb))
    # THEN the command fails with one line naming the query, its shard and DynamoDB's reason, no traceback
    assert result.exit_code == 1
    assert "DynamoDB failed the pending-index query of shard 0" in result.stderr
    assert "AccessDeniedException" in result.stderr
    assert "Traceback" not in result.output
