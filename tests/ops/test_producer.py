"""OrderPublisher: the key the consumer resolves, exact numbers, the contract checked, partial batch failures."""

from __future__ import annotations

import datetime
import json
from collections import Counter
from decimal import Decimal
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.sns_ids import queue_deduplication_id
from idempotent_order_pipeline.errors import InvalidMessageError, ItemTooLargeError, OrderSendError
from idempotent_order_pipeline.keys import derive_event_id, payload_sha256
from idempotent_order_pipeline.producer import OrderPublisher
from tests.consumer.harness import ArmedFault, FaultBoard, GuardedClient, client_error
from tests.ops.conftest import FakeSleep, OpsWorld, PartialBatchSqs


def enqueued_event_ids(ops: OpsWorld) -> Counter[str]:
    """How many messages of each event_id the source queue holds (drains it)."""
    return Counter(json.loads(m["Body"])["event_id"] for m in ops.receive_all(ops.queue_url))


def test_send_carries_the_consumers_key_in_body_and_attribute_and_is_recorded_exactly(ops: OpsWorld) -> None:
    # GIVEN an order with exact decimal amounts and no event_id
    order = {"order_id": "o-1", "amount": Decimal("10.10"), "rate": 0.1, "qty": 3}
    publisher = OrderPublisher(ops.queue_url, client=ops.sqs)
    # WHEN it is sent
    event_id = publisher.send(order)
    # THEN the key is the one the consumer derives, in the body and as the idempotency_key attribute
    assert event_id == derive_event_id(order)
    [message] = ops.receive_all(ops.queue_url, delete=False)
    body = json.loads(message["Body"], parse_float=Decimal)
    assert body["event_id"] == event_id
    assert message["MessageAttributes"]["idempotency_key"] == {"StringValue": event_id, "DataType": "String"}
    # AND numbers travel exactly (no binary float on the way)
    assert body["amount"] == Decimal("10.1")
    assert '"rate":0.1' in message["Body"]
    ops.sqs.change_message_visibility(
        QueueUrl=ops.queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
    )
    # AND the consumer records it under that key with the same numbers
    assert ops.consume() == 1
    row = ops.order_rows()["o-1"]
    assert (row["event_id"], row["amount"], row["rate"], row["qty"]) == (event_id, Decimal("10.1"), Decimal("0.1"), 3)
    assert ops.event_records()[event_id]["status"] == "sent"


def test_key_uses_the_identity_fields_or_the_orders_own_event_id(ops: OpsWorld) -> None:
    # GIVEN a publisher keyed on order and customer
    publisher = OrderPublisher(ops.queue_url, identity_fields=("order_id", "customer_id"), client=ops.sqs)
    # WHEN an order without and one with its own event_id are sent
    derived = publisher.send({"order_id": "o-1", "customer_id": "c-1"})
    own = publisher.send({"order_id": "o-2", "customer_id": "c-1", "event_id": "evt-42"})
    # THEN the first key hashes both fields, the second is the order's own
    assert derived == derive_event_id({"order_id": "o-1", "customer_id": "c-1"}, ("order_id", "customer_id"))
    assert own == "evt-42"
    assert enqueued_event_ids(ops) == {derived: 1, "evt-42": 1}


@pytest.mark.parametrize(
    ("order", "error", "reason"),
    [
        pytest.param({"amount": 1}, InvalidMessageError, "order_id", id="missing-order-id"),
        pytest.param({"order_id": 7}, InvalidMessageError, "order_id", id="numeric-order-id"),
        pytest.param({"order_id": "o", "payload_sha256": "x"}, InvalidMessageError, "reserved", id="reserved-field"),
        pytest.param({"order_id": "o", "event_id": ""}, InvalidMessageError, "event_id", id="empty-event-id"),
        pytest.param({"order_id": "o", "x": float("nan")}, InvalidMessageError, "JSON", id="nan"),
        pytest.param({"order_id": "o", "at": datetime.date(2026, 1, 1)}, InvalidMessageError, "JSON", id="date"),
        pytest.param({"order_id": "o", "blob": "x" * 410_000}, ItemTooLargeError, "400 KB", id="too-large"),
    ],
)
def test_orders_the_consumer_would_park_are_refused_before_sending(
    ops: OpsWorld, order: dict[str, Any], error: type[Exception], reason: str
) -> None:
    # GIVEN an order that breaks the consumer's contract
    publisher = OrderPublisher(ops.queue_url, client=ops.sqs)
    # WHEN it is sent alone, THEN it is refused with the consumer's reason
    with pytest.raises(error, match=reason):
        publisher.send(order)
    # AND in a batch it gets a failed result with the code the consumer would have parked it with
    [result] = publisher.send_batch([order])
    assert not result.ok
    assert result.error_code == error.error_code  # type: ignore[attr-defined]
    # AND nothing reached the queue
    assert ops.receive_all(ops.queue_url) == []


def test_characters_sqs_refuses_are_escaped_and_arrive_unchanged(ops: OpsWorld) -> None:
    # GIVEN an order whose text holds characters SQS does not accept in a body
    order = {"order_id": "o-odd", "note": "a\ufffeb\uffffc"}
    # WHEN it is sent and consumed
    OrderPublisher(ops.queue_url, client=ops.sqs).send(order)
    ops.consume()
    # THEN the order row holds the original text
    assert ops.order_rows()["o-odd"]["note"] == "a\ufffeb\uffffc"


def test_send_batch_sends_ten_per_call_and_reports_each_order_in_order(ops: OpsWorld) -> None:
    # GIVEN 25 orders and a client that counts the calls
    orders = [{"order_id": f"o-{i:02d}", "n": i} for i in range(25)]
    board = FaultBoard()
    publisher = OrderPublisher(ops.queue_url, client=GuardedClient(ops.sqs, board))  # type: ignore[arg-type]
    # WHEN they are sent as a batch
    results = publisher.send_batch(orders)
    # THEN three SendMessageBatch calls carried them (10, 10, 5)
    assert board.calls == {"send_message_batch": 3}
    # AND every order has a result, in order, with its key and message id
    assert [r.index for r in results] == list(range(25))
    assert [r.order_id for r in results] == [o["order_id"] for o in orders]
    assert all(r.ok and r.attempts == 1 and r.message_id for r in results)
    assert enqueued_event_ids(ops) == {derive_event_id(order): 1 for order in orders}


def test_send_batch_retries_only_failed_entries_until_every_order_is_enqueued_once(ops: OpsWorld) -> None:
    # GIVEN SQS answers the first call with every third entry failed and the second with the first
    # remaining entry failed again (service faults, not the sender's)
    def fail(call: int, entry: Any) -> tuple[str, bool] | None:
        if call == 1 and int(entry["Id"]) % 3 == 0:
            return ("InternalError", False)
        if call == 2 and entry["Id"] == "0":
            return ("ServiceUnavailable", False)
        return None

    sqs = PartialBatchSqs(ops.sqs, fail)
    sleep = FakeSleep()
    orders = [{"order_id": f"o-{i}"} for i in range(10)]
    publisher = OrderPublisher(ops.queue_url, client=sqs, sleep=sleep)  # type: ignore[arg-type]
    # WHEN the batch is sent
    results = publisher.send_batch(orders)
    # THEN every order was accepted
    assert all(result.ok for result in results)
    # AND only the failed entries were sent again: 10, then 4 (ids 0, 3, 6, 9), then 1 (id 0)
    assert sqs.batch_calls == [[str(i) for i in range(10)], ["0", "3", "6", "9"], ["0"]]
    assert [r.attempts for r in results] == [3, 1, 1, 2, 1, 1, 2, 1, 1, 2]
    # AND there was a backoff before each retry, within the cap
    assert len(sleep.delays) == 2
    assert all(0 <= delay <= 5 for delay in sleep.delays)
    # AND the queue holds every order exactly once
    assert enqueued_event_ids(ops) == {derive_event_id(order): 1 for order in orders}


def test_entries_sqs_rejects_are_not_retried_and_do_not_hold_back_the_others(ops: OpsWorld) -> None:
    # GIVEN SQS rejects one entry as the sender's fault
    sqs = PartialBatchSqs(ops.sqs, lambda call, entry: ("InvalidParameterValue", True) if entry["Id"] == "1" else None)
    orders = [{"order_id": f"o-{i}"} for i in range(3)]
    # WHEN the batch is sent
    results = OrderPublisher(ops.queue_url, client=sqs, sleep=FakeSleep()).send_batch(orders)  # type: ignore[arg-type]
    # THEN that entry is reported as rejected after one attempt, the others are sent
    assert [(r.ok, r.error_code) for r in results] == [(True, None), (False, "REJECTED"), (True, None)]
    assert results[1].attempts == 1
    assert "InvalidParameterValue" in str(results[1].error)
    assert len(sqs.batch_calls) == 1
    assert enqueued_event_ids(ops) == {derive_event_id(orders[0]): 1, derive_event_id(orders[2]): 1}


def test_entries_that_keep_failing_are_given_up_after_max_attempts(ops: OpsWorld) -> None:
    # GIVEN one entry fails on every call
    sqs = PartialBatchSqs(ops.sqs, lambda call, entry: ("InternalError", False) if entry["Id"] == "0" else None)
    sleep = FakeSleep()
    publisher = OrderPublisher(ops.queue_url, client=sqs, max_attempts=4, sleep=sleep)  # type: ignore[arg-type]
    # WHEN a batch with it is sent
    results = publisher.send_batch([{"order_id": "stuck"}, {"order_id": "fine"}])
    # THEN it is reported as given up after 4 calls, with the last reason; the other was sent once
    assert (results[0].ok, results[0].error_code, results[0].attempts) == (False, "GAVE_UP", 4)
    assert "InternalError" in str(results[0].error)
    assert results[1].ok
    assert len(sqs.batch_calls) == 4
    assert len(sleep.delays) == 3
    assert enqueued_event_ids(ops) == {derive_event_id({"order_id": "fine"}): 1}


def test_a_throttled_call_is_retried_whole(ops: OpsWorld) -> None:
    # GIVEN the first SendMessageBatch call is throttled
    board = FaultBoard()
    board.arm(ArmedFault(client_error("SendMessageBatch", "Throttling"), operation="send_message_batch", times=1))
    publisher = OrderPublisher(ops.queue_url, client=GuardedClient(ops.sqs, board), sleep=FakeSleep())  # type: ignore[arg-type]
    orders = [{"order_id": f"o-{i}"} for i in range(3)]
    # WHEN the batch is sent
    results = publisher.send_batch(orders)
    # THEN the second call sent all three, once
    assert all(r.ok and r.attempts == 2 for r in results)
    assert enqueued_event_ids(ops) == {derive_event_id(order): 1 for order in orders}


def test_a_call_refused_as_invalid_fails_every_entry_without_retry(ops: OpsWorld) -> None:
    # GIVEN SendMessageBatch answers with a client error that retrying cannot fix
    board = FaultBoard()
    board.arm(
        ArmedFault(
            client_error("SendMessageBatch", "AWS.SimpleQueueService.NonExistentQueue"), operation="send_message_batch"
        )
    )
    publisher = OrderPublisher(ops.queue_url, client=GuardedClient(ops.sqs, board), sleep=FakeSleep())  # type: ignore[arg-type]
    # WHEN a batch is sent
    results = publisher.send_batch([{"order_id": "a"}, {"order_id": "b"}])
    # THEN both are rejected after a single call
    assert [(r.ok, r.error_code, r.attempts) for r in results] == [(False, "REJECTED", 1)] * 2
    assert board.calls == {"send_message_batch": 1}


def test_a_lost_answer_may_enqueue_twice_and_the_consumer_records_once(ops: OpsWorld) -> None:
    # GIVEN the connection drops after SQS accepted the first batch call
    board = FaultBoard()
    board.arm(
        ArmedFault(
            EndpointConnectionError(endpoint_url=ops.queue_url),
            operation="send_message_batch",
            after_success=True,
            times=1,
        )
    )
    publisher = OrderPublisher(ops.queue_url, client=GuardedClient(ops.sqs, board), sleep=FakeSleep())  # type: ignore[arg-type]
    orders = [{"order_id": "o-1", "amount": 5}, {"order_id": "o-2", "amount": 7}]
    # WHEN the batch is sent
    results = publisher.send_batch(orders)
    # THEN the retry reports success, and the queue holds two copies of each (at least once)
    assert all(r.ok and r.attempts == 2 for r in results)
    # AND the consumer records each order once, under its one key, and notifies each event (at
    # least once: two copies processed at the same moment may both publish)
    assert ops.consume() == 4
    rows = ops.order_rows()
    assert {order_id: row["event_id"] for order_id, row in rows.items()} == {
        order["order_id"]: derive_event_id(order) for order in orders
    }
    assert set(ops.notified_events()) == {derive_event_id(order) for order in orders}
    assert {record["status"] for record in ops.event_records().values()} == {"sent"}


def test_send_raises_a_domain_error_when_sqs_fails(ops: OpsWorld) -> None:
    # GIVEN SQS refuses the call
    board = FaultBoard()
    board.arm(ArmedFault(client_error("SendMessage", "AccessDenied"), operation="send_message"))
    publisher = OrderPublisher(ops.queue_url, client=GuardedClient(ops.sqs, board))  # type: ignore[arg-type]
    # WHEN an order is sent, THEN the error names the order and its key
    with pytest.raises(OrderSendError, match=r"'o-1'.*not sent.*AccessDenied"):
        publisher.send({"order_id": "o-1"})


def test_fifo_queue_gets_the_order_as_group_and_the_event_and_content_as_deduplication_id(
    make_ops_world: Any,
) -> None:
    # GIVEN a FIFO pipeline
    ops: OpsWorld = make_ops_world(fifo=True)
    publisher = OrderPublisher(ops.queue_url, client=ops.sqs)
    order = {"order_id": "o-1", "amount": 3}
    # WHEN the same order is sent twice, and another once
    first = publisher.send(order)
    publisher.send_batch([order, {"order_id": "o-2"}])
    # THEN SQS kept one message per order: group = order, deduplication id = the event and the content
    messages = ops.receive_all(ops.queue_url)
    assert sorted(m["Attributes"]["MessageGroupId"] for m in messages) == ["o-1", "o-2"]
    dedup = {m["Attributes"]["MessageGroupId"]: m["Attributes"]["MessageDeduplicationId"] for m in messages}
    assert dedup["o-1"] == queue_deduplication_id(first, payload_sha256(order))


def test_default_client_is_created_at_first_use(ops: OpsWorld) -> None:
    # GIVEN a publisher without a client (inside the moto mock)
    publisher = OrderPublisher(ops.queue_url)
    # WHEN it sends, THEN its lazily created client reaches the queue
    event_id = publisher.send({"order_id": "o-lazy"})
    assert enqueued_event_ids(ops) == {event_id: 1}


def test_invalid_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        OrderPublisher("https://sqs/q", max_attempts=0)
    with pytest.raises(ValueError, match="identity_fields"):
        OrderPublisher("https://sqs/q", identity_fields=())
