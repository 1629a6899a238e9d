"""Invalid messages go to the DLQ with a reason; transient failures are retried, never skipped or lost."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from idempotent_order_pipeline._lambda_asset.order_consumer import pipeline
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.keys import derive_event_id
from tests.consumer.harness import (
    ArmedFault,
    World,
    cancelled,
    cancelled_for,
    client_error,
    is_mark,
    seed,
    sqs_record,
    written_order_ids,
)

ORDER = {"order_id": "o-1", "amount": 5}

DEEP = '{"order_id": "o-deep", "x": ' + "[" * 40 + "]" * 40 + "}"

INVALID_BODIES = [
    pytest.param("not json", "INVALID_MESSAGE", "not valid JSON", id="invalid-json"),
    pytest.param("[1, 2]", "INVALID_MESSAGE", "JSON object", id="array-body"),
    pytest.param('"o-1"', "INVALID_MESSAGE", "JSON object", id="string-body"),
    pytest.param("{}", "INVALID_MESSAGE", "order_id", id="missing-order-id"),
    pytest.param('{"order_id": ""}', "INVALID_MESSAGE", "order_id", id="empty-order-id"),
    pytest.param('{"order_id": 7}', "INVALID_MESSAGE", "order_id", id="numeric-order-id"),
    pytest.param(json.dumps({"order_id": "x" * 257}), "INVALID_MESSAGE", "at most 256", id="order-id-too-long"),
    pytest.param('{"order_id": "o", "event_id": ""}', "INVALID_MESSAGE", "event_id", id="empty-event-id"),
    pytest.param('{"order_id": "o", "event_id": 5}', "INVALID_MESSAGE", "event_id", id="numeric-event-id"),
    pytest.param('{"order_id": "o", "a": NaN}', "INVALID_MESSAGE", "NaN", id="nan"),
    pytest.param('{"order_id": "o", "a": 1e400}', "INVALID_MESSAGE", "cannot store", id="number-too-large"),
    pytest.param('{"order_id": "o", "a": 1, "a": 2}', "INVALID_MESSAGE", "twice", id="duplicate-key"),
    pytest.param('{"order_id": "o", "payload_sha256": "x"}', "INVALID_MESSAGE", "reserved", id="reserved-field"),
    pytest.param(DEEP, "INVALID_MESSAGE", "nested deeper", id="too-deep"),
    pytest.param(json.dumps({"order_id": "o", "blob": "x" * 410_000}), "ITEM_TOO_LARGE", "400", id="too-large"),
]


@pytest.mark.parametrize(("body", "error_code", "reason"), INVALID_BODIES)
def test_invalid_message_is_parked_with_its_reason(world: World, body: str, error_code: str, reason: str) -> None:
    # GIVEN a message that breaks the contract
    record = sqs_record(body, attributes={"trace": {"stringValue": "t-1", "dataType": "String"}})
    # WHEN the handler processes it
    response = world.invoke([record])
    # THEN it is acknowledged and parked in the DLQ as it came, with the reason
    assert response == {"batchItemFailures": []}
    [parked] = world.dead_letters()
    assert parked["Body"] == body
    attributes = parked["MessageAttributes"]
    assert attributes["error_code"]["StringValue"] == error_code
    assert reason in attributes["error_message"]["StringValue"]
    assert attributes["source_message_id"]["StringValue"] == record["messageId"]
    assert attributes["trace"]["StringValue"] == "t-1"
    # AND nothing was written or published
    assert world.order_rows() == {}
    assert world.event_records() == {}
    assert world.new_notifications() == []


def test_key_mismatch_between_body_and_attribute_is_invalid(world: World) -> None:
    # GIVEN a body event_id and an idempotency_key attribute that differ
    record = sqs_record({**ORDER, "event_id": "evt-a"}, key="evt-b")
    # WHEN processed
    assert world.invoke([record]) == {"batchItemFailures": []}
    # THEN it is parked as invalid, naming both keys
    [parked] = world.dead_letters()
    assert parked["MessageAttributes"]["error_code"]["StringValue"] == "INVALID_MESSAGE"
    message = parked["MessageAttributes"]["error_message"]["StringValue"]
    assert "evt-a" in message
    assert "evt-b" in message
    assert world.order_rows() == {}


def test_missing_identity_field_is_invalid(make_world: Any) -> None:
    # GIVEN identity fields order_id,customer_id and an order without customer_id or key
    world = make_world(identity_fields="order_id,customer_id")
    # WHEN processed
    assert world.invoke([sqs_record(ORDER)]) == {"batchItemFailures": []}
    # THEN it is parked as invalid naming the field
    [parked] = world.dead_letters()
    assert parked["MessageAttributes"]["error_code"]["StringValue"] == "INVALID_MESSAGE"
    assert "customer_id" in parked["MessageAttributes"]["error_message"]["StringValue"]


def test_attribute_key_is_used_when_the_body_has_none(world: World) -> None:
    # GIVEN a key only in the idempotency_key attribute
    # WHEN processed
    assert world.invoke([sqs_record(ORDER, key="evt-attr")]) == {"batchItemFailures": []}
    # THEN the records are stored under that key
    assert set(world.event_records()) == {"evt-attr"}
    assert world.order_rows()["o-1"]["event_id"] == "evt-attr"


def test_store_validation_error_is_parked(world: World) -> None:
    # GIVEN DynamoDB rejects the transaction as invalid (always will)
    world.board.arm(
        ArmedFault(client_error("TransactWriteItems", "ValidationException", "bad"), "transact_write_items")
    )
    # WHEN processed
    assert world.invoke([sqs_record(ORDER)]) == {"batchItemFailures": []}
    # THEN it is parked with VALIDATION_FAILED
    [parked] = world.dead_letters()
    assert parked["MessageAttributes"]["error_code"]["StringValue"] == "VALIDATION_FAILED"


@pytest.mark.parametrize(
    "reasons",
    [
        ("TransactionConflict", "None"),
        ("None", "TransactionConflict"),
        ("ThrottlingError", "None"),
        ("ProvisionedThroughputExceeded", "ConditionalCheckFailed"),
        ("ConditionalCheckFailed", "ThrottlingError"),
    ],
)
def test_transient_cancellation_is_retried_not_skipped(world: World, reasons: tuple[str, str]) -> None:
    # GIVEN the first transaction is cancelled for a transient reason
    world.board.arm(ArmedFault(cancelled(*reasons), "transact_write_items", times=1))
    record = sqs_record(ORDER)
    # WHEN delivered
    response = world.invoke([record])
    # THEN the record is reported for redelivery, nothing written or published
    assert world.failures(response) == {record["messageId"]}
    assert world.order_rows() == {}
    assert world.new_notifications() == []
    assert world.dead_letters() == []
    # AND the redelivery records and notifies it
    assert world.invoke([record]) == {"batchItemFailures": []}
    assert world.event_records()[derive_event_id(ORDER)]["status"] == "sent"
    assert len(world.new_notifications()) == 1


@pytest.mark.parametrize(
    ("operation", "error"),
    [
        ("transact_write_items", client_error("TransactWriteItems", "ProvisionedThroughputExceededException")),
        ("transact_write_items", client_error("TransactWriteItems", "InternalServerError")),
        ("transact_write_items", client_error("TransactWriteItems", "AccessDeniedException")),
        ("publish_batch", client_error("PublishBatch", "InternalError")),
        ("sent-mark", client_error("BatchExecuteStatement", "ThrottlingException")),
    ],
)
def test_transient_errors_leave_the_record_for_redelivery(world: World, operation: str, error: Exception) -> None:
    # GIVEN one call fails once ("sent-mark": the conditional UpdateItem of the sent mark)
    if operation == "sent-mark":
        world.board.arm(ArmedFault(error, "batch_execute_statement", times=1, when=is_mark))
    else:
        world.board.arm(ArmedFault(error, operation, times=1))
    record = sqs_record(ORDER)
    # WHEN delivered, then redelivered
    first = world.invoke([record])
    second = world.invoke([record])
    # THEN the first delivery is reported as failed, the second succeeds
    assert world.failures(first) == {record["messageId"]}
    assert second == {"batchItemFailures": []}
    # AND the order exists once, is sent, and was notified at least once
    assert list(world.order_rows()) == ["o-1"]
    assert world.event_records()[derive_event_id(ORDER)]["status"] == "sent"
    assert world.notified_events()[derive_event_id(ORDER)] >= 1
    assert world.dead_letters() == []


def test_sns_outage_keeps_record_pending_until_published(world: World) -> None:
    # GIVEN SNS fails on the first publish
    world.board.arm(ArmedFault(client_error("PublishBatch", "InternalError"), "publish_batch", times=1))
    record = sqs_record(ORDER)
    # WHEN delivered
    response = world.invoke([record])
    # THEN the order is durable but not marked sent (never sent before Publish returned)
    assert world.failures(response) == {record["messageId"]}
    assert world.event_records()[derive_event_id(ORDER)]["status"] == "pending"
    assert world.new_notifications() == []


def test_dlq_send_failure_does_not_acknowledge(world: World) -> None:
    # GIVEN the DLQ cannot be reached
    world.board.arm(ArmedFault(client_error("SendMessage", "InternalError"), "send_message"))
    record = sqs_record("not json")
    # WHEN an invalid message is processed
    response = world.invoke([record])
    # THEN it is neither recorded nor parked, so it must stay on the queue
    assert world.failures(response) == {record["messageId"]}
    world.board.disarm()
    assert world.dead_letters() == []


def test_unexpected_exception_is_reported_not_acknowledged(world: World, log_stream: io.StringIO) -> None:
    # GIVEN a bug-like error (not a domain error) in a call
    world.board.arm(ArmedFault(RuntimeError("boom"), "transact_write_items", times=1))
    record = sqs_record(ORDER)
    # WHEN processed
    response = world.invoke([record])
    # THEN the record is reported for redelivery
    assert world.failures(response) == {record["messageId"]}
    # AND the error is logged with its traceback and the message's id
    [line] = [json.loads(text) for text in log_stream.getvalue().splitlines() if '"unexpected error"' in text]
    assert (line["level"], line["message_id"]) == ("ERROR", record["messageId"])
    assert "RuntimeError: boom" in line["exception"]


def test_a_bug_in_a_parking_job_leaves_its_record_unacknowledged_and_is_logged(
    world: World, log_stream: io.StringIO
) -> None:
    # GIVEN an invalid message, and a bug-like error (not a botocore error) when it is sent to the DLQ
    world.board.arm(ArmedFault(RuntimeError("boom"), "send_message", times=1))
    record = sqs_record("{oops")
    # WHEN processed
    response = world.invoke([record])
    # THEN the record is reported for redelivery, not parked
    assert world.failures(response) == {record["messageId"]}
    assert world.dead_letters() == []
    # AND the job's error is logged with its traceback
    [line] = [
        json.loads(text) for text in log_stream.getvalue().splitlines() if "unexpected error in a batch job" in text
    ]
    assert line["level"] == "ERROR"
    assert "RuntimeError: boom" in line["exception"]


def test_a_batchs_deadlines_are_its_remaining_time_less_each_margin(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN an invocation with 10 s left, at monotonic instant 100 s
    monkeypatch.setattr(pipeline.time, "monotonic", lambda: 100.0)
    # WHEN the batch's deadlines are set with margins of 3 s (start), 2 s (notify) and 1 s (return)
    deadlines = pipeline.Deadlines.of(
        lambda: 10_000, min_remaining_ms=3_000, notify_reserve_ms=2_000, return_margin_ms=1_000
    )
    # THEN records start until 107 s, transactions run until 108 s, and the handler returns at 109 s
    assert (deadlines.start_until, deadlines.transactions_until, deadlines.return_at) == (107.0, 108.0, 109.0)
    # AND without a remaining time there is no bound
    assert pipeline.Deadlines.of(None, min_remaining_ms=3_000, notify_reserve_ms=2_000, return_margin_ms=1_000) == (
        pipeline.Deadlines(None, None, None)
    )


def test_record_not_started_when_invocation_time_runs_out(world: World) -> None:
    # GIVEN an invocation with 500 ms left
    record = sqs_record(ORDER)
    # WHEN the batch is processed
    response = world.invoke([record], remaining_ms=500)
    # THEN the record is left to SQS without any AWS call
    assert world.failures(response) == {record["messageId"]}
    assert world.board.total == 0


def test_mixed_batch_reports_exactly_the_transient_failures(world: World) -> None:
    # GIVEN a batch mixing every outcome
    seed(world, {"order_id": "o-sent"}, status="sent", event_id="evt-sent")
    seed(world, {"order_id": "o-pend"}, status="pending", event_id="evt-pend")
    records = {
        "new": sqs_record({"order_id": "o-new", "event_id": "evt-new"}),
        "duplicate": sqs_record({"order_id": "o-sent", "event_id": "evt-sent"}),
        "pending": sqs_record({"order_id": "o-pend", "event_id": "evt-pend"}),
        "conflict": sqs_record({"order_id": "o-sent", "event_id": "evt-sent", "amount": 3}),
        "invalid": sqs_record("{oops"),
        "transient": sqs_record({"order_id": "o-busy", "event_id": "evt-busy"}),
    }
    # AND the transient one meets a TransactionConflict every time
    world.board.arm(
        ArmedFault(
            cancelled_for(lambda event_id: event_id == "evt-busy", "TransactionConflict", "None"),
            "transact_write_items",
            when=lambda request: "o-busy" in written_order_ids(request),
        )
    )
    # WHEN the batch is processed
    response = world.invoke(records.values())
    # THEN exactly the transient record is reported
    assert world.failures(response) == {records["transient"]["messageId"]}
    # AND every other record reached its outcome
    assert world.event_records()["evt-new"]["status"] == "sent"
    assert world.event_records()["evt-pend"]["status"] == "sent"
    assert sorted(json.loads(n["Message"])["event_id"] for n in world.new_notifications()) == ["evt-new", "evt-pend"]
    codes = sorted(m["MessageAttributes"]["error_code"]["StringValue"] for m in world.dead_letters())
    assert codes == ["IDEMPOTENCY_CONFLICT", "INVALID_MESSAGE"]
    assert "o-busy" not in world.order_rows()
