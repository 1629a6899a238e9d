"""What 0.2.0 left behind, processed by the current consumer, reconciler and CLI: every promise kept.

0.2.0 runs as released (``tests/compat/v0_2_0/``, tag ``v0.2.0``) in a child process on this test's
moto (``tests/compat/released.py``). Its records differ from today's in one way: its pending index
had 16 shards, so a pending record carries a shard from ``"0"`` to ``"15"`` that is today's for only
about half of them. Its parked messages carry the same envelope (version 1).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer import reconciler as reconciler_entry
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import pending_shard
from idempotent_order_pipeline.keys import derive_event_id
from tests.compat.released import V0_2_0, ReleasedFunctions, released_functions
from tests.compat.shapes import shard_0_2_0, wait_past_their_creation_second
from tests.consumer.harness import FakeContext, sqs_record
from tests.ops.conftest import OpsWorld

#: Starts processes (the test tiers' rule).
pytestmark = pytest.mark.slow

ORDERS = [{"order_id": f"o-{i}", "amount": i + 1} for i in range(8)]
EVENT_IDS = {derive_event_id(order) for order in ORDERS}


def missing_topic(ops: OpsWorld) -> dict[str, str]:
    """The functions' environment with a topic that does not exist: every publish fails (SNS down)."""
    return {**ops.env, "TOPIC_ARN": ops.topic_arn + "-gone", "RECONCILE_AFTER_SECONDS": "0"}


def left_pending_by_0_2_0(ops: OpsWorld) -> list[dict[str, Any]]:
    """0.2.0 receives the orders while SNS is down: it records them and leaves them pending."""
    records = [sqs_record(order) for order in ORDERS]
    with released_functions(V0_2_0, missing_topic(ops)) as old:
        response = old.invoke(records)
    assert len(response["batchItemFailures"]) == len(ORDERS)
    stored = ops.event_records()
    assert {e: r["status"] for e, r in stored.items()} == dict.fromkeys(EVENT_IDS, "pending")
    assert all(r["pending_shard"] == shard_0_2_0(e) for e, r in stored.items())  # 0.2.0's 16 shards
    return records


def current_reconciler(ops: OpsWorld) -> Mapping[str, Any]:
    reconciler_entry.configure(
        reconciler_entry.ReconcilerClients(dynamodb=ops.dynamodb, sns=ops.sns),
        {**ops.env, "RECONCILE_AFTER_SECONDS": "0"},
    )
    return reconciler_entry.handler({}, FakeContext())


def test_records_0_2_0_left_pending_are_notified_once_when_their_messages_come_back(ops: OpsWorld) -> None:
    # GIVEN orders 0.2.0 recorded and left pending (SNS was down), their messages still in the queue
    records = left_pending_by_0_2_0(ops)
    rows = ops.order_rows()

    # WHEN the current consumer receives them again
    response = ops.invoke(records)

    # THEN each is notified once and marked sent (with a ttl; its index entry, 0.2.0's, left as it was);
    # no row written again
    assert response == {"batchItemFailures": []}
    assert ops.notified_events() == dict.fromkeys(EVENT_IDS, 1)
    stored = ops.event_records()
    assert all(r["status"] == "sent" and r["pending_shard"] == shard_0_2_0(e) and "ttl" in r for e, r in stored.items())
    assert ops.order_rows() == rows


def test_records_0_2_0_left_pending_without_a_message_are_listed_and_reconciled(ops: OpsWorld) -> None:
    # GIVEN orders 0.2.0 left pending, and no copy of their messages anywhere
    left_pending_by_0_2_0(ops)

    # WHEN the operator lists pending records, and the current reconciler runs
    wait_past_their_creation_second(ops.event_records().values())
    listed = ops.run("pending", "--older-than", "0s", "--json")
    report = current_reconciler(ops)

    # THEN the CLI lists every one (today's reads query every shard, 0.2.0's 0-15 included)
    assert listed.exit_code == 0, listed.output
    assert {json.loads(line)["event_id"] for line in listed.stdout.splitlines()} == EVENT_IDS
    # AND the reconciler notifies each once and marks it sent
    assert (report["found"], report["reconciled"], report["complete"]) == (8, 8, True)
    assert ops.notified_events() == dict.fromkeys(EVENT_IDS, 1)
    assert {r["status"] for r in ops.event_records().values()} == {"sent"}


def test_migrate_moves_0_2_0_pending_records_onto_todays_shards(ops: OpsWorld) -> None:
    # GIVEN orders 0.2.0 left pending on its 16 shards
    left_pending_by_0_2_0(ops)
    moved = {e for e in EVENT_IDS if shard_0_2_0(e) != pending_shard(e)}
    assert moved  # about half: the shard differs for these

    # WHEN migrate runs
    result = ops.run("migrate", "--yes", "--json")

    # THEN exactly those moved, each to today's shard, still pending (the reconciler notifies them)
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    assert (figures["by_kind"]["pending_other_shard"], figures["already_current"]) == (len(moved), 8 - len(moved))
    assert all(r["pending_shard"] == pending_shard(e) for e, r in ops.event_records().items())
    assert current_reconciler(ops)["reconciled"] == 8


def test_records_0_2_0_sent_stay_duplicates(ops: OpsWorld, v0_2_0: ReleasedFunctions) -> None:
    # GIVEN orders 0.2.0 recorded and notified
    records = [sqs_record(order) for order in ORDERS]
    assert v0_2_0.invoke(records) == {"batchItemFailures": []}
    assert ops.notified_events() == dict.fromkeys(EVENT_IDS, 1)
    before = ops.event_records()

    # WHEN their messages reach the current consumer again
    assert ops.invoke(records) == {"batchItemFailures": []}

    # THEN nothing is published again and nothing changes
    assert ops.notified_events() == dict.fromkeys(EVENT_IDS, 1)
    assert ops.event_records() == before


def test_a_message_0_2_0_parked_is_listed_and_redriven_as_the_producer_sent_it(
    ops: OpsWorld, v0_2_0: ReleasedFunctions
) -> None:
    # GIVEN an invalid order with 8 attributes (idempotency_key among them) that 0.2.0 parked: the
    # originals did not fit beside its reason attributes, so it packed them into its envelope
    attributes = {f"trace{i}": {"dataType": "String", "stringValue": f"t{i}"} for i in range(7)}
    record = sqs_record('{"order_id": ""}', key="evt-x", attributes=attributes)
    assert v0_2_0.invoke([record]) == {"batchItemFailures": []}

    # WHEN the current CLI lists the DLQ and redrives it
    listed = ops.run("dlq", "list", "--json", "--wait-seconds", "0")
    redriven = ops.run("redrive", "--yes", "--method", "loop", "--wait-seconds", "0")

    # THEN it shows 0.2.0's reason and the packed key, and returns the message as the producer sent it
    assert listed.exit_code == 0, listed.output
    [letter] = [json.loads(line) for line in listed.stdout.splitlines()]
    assert (letter["error_code"], letter["event_id"]) == ("INVALID_MESSAGE", "evt-x")
    assert redriven.exit_code == 0, redriven.output
    [back] = ops.receive_all(ops.queue_url)
    assert back["Body"] == '{"order_id": ""}'
    expected = {name: {"DataType": "String", "StringValue": value["stringValue"]} for name, value in attributes.items()}
    assert back["MessageAttributes"] == expected | {"idempotency_key": {"DataType": "String", "StringValue": "evt-x"}}
