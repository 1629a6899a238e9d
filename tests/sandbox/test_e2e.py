"""End to end: the real ``cdk deploy`` of the dev stage onto the local endpoint, chaos traffic, invariants.

Everything asserted here is read from the endpoint (tables, a queue subscribed to the topic, the
DLQ, the source queue), not from the demo's report. A wiring mistake in the construct or the app
(an environment variable name the handler does not read, a handler string that does not resolve,
a module missing from the asset) makes this test fail: the function runs from the deployed asset
with the deployed configuration.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from boto3.dynamodb.types import TypeDeserializer

from idempotent_order_pipeline.sandbox.demo import ChaosOptions, Sandbox, SandboxOptions, describe, run_chaos
from idempotent_order_pipeline.sandbox.outage import run_sns_outage
from idempotent_order_pipeline.sandbox.traffic import ACCEPTED_KINDS

pytestmark = pytest.mark.e2e

_deserialize = TypeDeserializer().deserialize


def _scan(endpoint: Any, table: str) -> list[dict[str, Any]]:
    items = endpoint.client("dynamodb").scan(TableName=table, ConsistentRead=True)["Items"]
    return [{name: _deserialize(value) for name, value in item.items()} for item in items]


def _peek(endpoint: Any, queue_url: str) -> list[dict[str, Any]]:
    """Every message of the queue, left in place (visible again once read)."""
    sqs = endpoint.client("sqs")
    seen: dict[str, dict[str, Any]] = {}
    while batch := sqs.receive_message(
        QueueUrl=queue_url,
        MaxNumberOfMessages=10,
        VisibilityTimeout=60,
        WaitTimeSeconds=0,
        MessageAttributeNames=["All"],
    ).get("Messages", []):
        seen.update((message["MessageId"], message) for message in batch)
    for message in seen.values():
        sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
    return list(seen.values())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_chaos_run_on_the_deployed_stack_keeps_every_invariant(tmp_path: Path) -> None:
    # GIVEN the stand-in started (with crashes) and the dev stage deployed onto it with the real CDK CLI
    options = SandboxOptions(work_dir=tmp_path, concurrency=2, crash_rate=0.3, crash_seed=7, visibility_timeout=2)
    with Sandbox(options) as sandbox:
        endpoint, outputs = sandbox.endpoint, sandbox.deployment.outputs
        witness = sandbox.subscribe_queue("e2e-witness")  # a second subscriber, for this test's own reads
        # WHEN 40 orders, re-sends, conflicts and invalid messages go through the queue with crashes
        run = run_chaos(sandbox, ChaosOptions(orders=40, seed=7))
        pids = [sandbox.stand_in.pid, *(environment["pid"] for environment in run.stats.environments)]

        # THEN the function failed in no other way than the crashes injected into it
        assert run.stats.unexpected_errors == []
        assert run.stats.crashes_injected >= 2
        # AND the stand-in says which Python ran each deployed function (the consumer, the fulfilment
        # subscriber, the reconciler: all python3.14): python3.14 where this machine has one, else its
        # own interpreter and why
        interpreters = describe(sandbox)["interpreters"]
        assert len(interpreters) == 3
        assert {found["runtime"] for found in interpreters} == {"python3.14"}
        [consumer] = [found for found in interpreters if f"function {sandbox.function.name} " in found["line"]]
        assert consumer["line"].startswith(f"function {sandbox.function.name} (python3.14) runs on python")
        assert consumer["matches"] == (consumer["python"] == "3.14")
        # AND it ran from the deployed asset, not from the repository
        sources = {Path(str(environment["handler_from"])) for environment in run.stats.environments}
        assert sources
        assert all(tmp_path in source.parents and source.parents[1].name == "task" for source in sources)
        # AND the source queue is empty
        sqs = endpoint.client("sqs")
        depth = sqs.get_queue_attributes(QueueUrl=outputs["QueueUrl"], AttributeNames=["All"])["Attributes"]
        assert (depth["ApproximateNumberOfMessages"], depth["ApproximateNumberOfMessagesNotVisible"]) == ("0", "0")

        accepted = [m for m in run.plan.messages if m.kind in ACCEPTED_KINDS]
        payloads = defaultdict(set)
        for message in accepted:
            payloads[message.event_id].add(message.payload_sha256)
        rows = _scan(endpoint, outputs["OrderRecordsTableName"])
        records = {item["event_id"]: item for item in _scan(endpoint, outputs["ProcessedEventsTableName"])}
        notes = [json.loads(message["Body"]) for message in _peek(endpoint, witness)]
        parked = _peek(endpoint, outputs["DeadLetterQueueUrl"])

        # AND exactly one order row per accepted event, holding one of the payloads sent under its key
        assert Counter(row["event_id"] for row in rows) == Counter(set(payloads))
        recorded = {row["event_id"]: row["payload_sha256"] for row in rows}
        assert all(recorded[event_id] in sent for event_id, sent in payloads.items())
        # AND every event is marked sent, with the row's payload
        assert {event_id: (item.get("status"), item.get("payload_sha256")) for event_id, item in records.items()} == {
            event_id: ("sent", payload) for event_id, payload in recorded.items()
        }
        # AND at least one notification per event, all naming the recorded payload
        assert {note["event_id"] for note in notes} == set(recorded)
        assert all(note["payload_sha256"] == recorded[note["event_id"]] for note in notes)
        # AND the DLQ holds exactly the invalid messages and the conflicting payloads that lost, each
        # with its reason (possibly twice: a crash after parking redelivers it)
        reasons = {
            m["MessageAttributes"]["source_message_id"]["StringValue"]: m["MessageAttributes"]["error_code"][
                "StringValue"
            ]
            for m in parked
        }
        expected = {m.message_id: "INVALID_MESSAGE" for m in run.plan.messages if m.kind == "invalid"}
        expected |= {m.message_id: "IDEMPOTENCY_CONFLICT" for m in accepted if m.payload_sha256 != recorded[m.event_id]}
        violations = [m for m in run.plan.messages if m.kind == "schema_violation"]
        assert violations  # the app's pipeline has an order_schema: the run sends orders that break it
        expected |= {m.message_id: "SCHEMA_VIOLATION" for m in violations}
        assert reasons == expected
        # AND the producer refused the first of them, with the message the consumer parked it with
        refusal = run.worked_app.refusal
        assert refusal is not None
        assert refusal.refused
        assert {
            m["MessageAttributes"]["error_message"]["StringValue"]
            for m in parked
            if m["MessageAttributes"]["error_code"]["StringValue"] == "SCHEMA_VIOLATION"
            and refusal.order_id in m["Body"]
        } == {refusal.message}
        assert run.result.violations == []
        assert all(pid is not None for pid in pids)
        # AND the fulfilment subscriber (its runtime helper a layer of the stack) acted on every German
        # order exactly once and on no other order, read from its own counter table
        shipments = {row["order_id"]: row["shipments"] for row in _scan(endpoint, outputs["ShipmentCountersTableName"])}
        german = {row["order_id"] for row in rows if row["country"] == "DE"}
        assert german
        assert shipments == dict.fromkeys(german, 1)
        assert run.worked_app.fulfilment is not None
        assert run.worked_app.fulfilment.figures["orders shipped once"] == len(german)

        # WHEN SNS is down long enough for new orders to reach the DLQ, the DLQ is dropped without a
        # redrive, SNS comes back and the deployed reconciler runs on a local schedule
        outage = run_sns_outage(sandbox, orders=8, seed=3)
        # THEN every one of those orders is recorded once, sent, and notified by the reconciler
        assert outage.violations == []
        assert (outage.dead_lettered, outage.pending_after_drop) == (8, 8)
        assert (outage.sent, outage.notified, outage.reconciled_metric) == (8, 8, 8)
        rows_after = _scan(endpoint, outputs["OrderRecordsTableName"])
        assert len(rows_after) == len(rows) + 8
        assert Counter(row["event_id"] for row in rows_after).most_common(1)[0][1] == 1

    # AND leaving the sandbox stopped the stand-in and every process it started
    assert [pid for pid in pids if pid is not None and _alive(pid)] == []
