"""FIFO deduplication drops duplicates, never conflicts: the queue's deduplication id is the event and its content.

SQS drops a FIFO message whose ``MessageDeduplicationId`` it saw in the last five minutes, and tells
the sender it was sent. Under an id of the event alone (0.2.0), an order that reuses an event id with
other content vanished there, never parked as ``IDEMPOTENCY_CONFLICT``. Under the event and its
fingerprint (``order_consumer.contract.sns_ids.queue_deduplication_id``) SQS still drops an exact
duplicate and delivers the conflict, which the consumer parks.

moto 5.2.5 (``moto/sqs/models.py``, ``Queue.add_message``) drops a FIFO message whose explicit (or
content-based) deduplication id equals that of a message *still in the queue* and sent less than 300 s
before; once a message is deleted it forgets its id, where SQS remembers it for the five minutes. So
these tests send everything before anything is consumed (what moto checks is what SQS checks), and
a redrive, which comes after the consumer deleted the original, runs through
:class:`~tests.ops.test_cli_redrive.DeduplicatingSqs`, which remembers as SQS does.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.sns_ids import (
    is_valid_fifo_id,
    queue_deduplication_id,
    sns_deduplication_id,
)
from idempotent_order_pipeline.keys import derive_event_id, payload_sha256
from idempotent_order_pipeline.producer import OrderPublisher
from tests.consumer.harness import ArmedFault, client_error
from tests.ops.conftest import OpsWorld
from tests.ops.test_cli_redrive import DeduplicatingSqs

ORDER = {"order_id": "o-1", "amount": 3, "customer_id": "c-1"}
#: The same order, written otherwise: the keys in another order, the number spelled 3.0.
SAME_ORDER = {"customer_id": "c-1", "amount": 3.0, "order_id": "o-1"}
#: The same event (its key derives from order_id), other content.
CONFLICT = {"order_id": "o-1", "amount": 4, "customer_id": "c-1"}
EVENT_ID = derive_event_id(ORDER)


def _queued(ops: OpsWorld) -> list[dict[str, Any]]:
    """The orders queue's messages, left in it (hidden, then visible again at once)."""
    messages = ops.receive_all(ops.queue_url, delete=False)
    for message in messages:
        ops.sqs.change_message_visibility(
            QueueUrl=ops.queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )
    return messages


def _parked_codes(ops: OpsWorld) -> list[tuple[str, str]]:
    return [
        (json.loads(m["Body"])["amount"], m["MessageAttributes"]["error_code"]["StringValue"])
        for m in ops.dead_letters()
    ]


def test_within_five_minutes_a_duplicate_is_dropped_by_the_queue_and_a_conflict_is_parked(
    make_ops_world: Callable[..., OpsWorld],
) -> None:
    # GIVEN a FIFO pipeline
    ops = make_ops_world(fifo=True)
    publisher = OrderPublisher(ops.queue_url, client=ops.sqs)
    # WHEN an order is sent, sent again as an exact duplicate (written otherwise), and a conflicting
    # version of it (same event, other content) is sent, all within five minutes
    sent = [publisher.send(ORDER), publisher.send(SAME_ORDER), publisher.send(CONFLICT)]
    # THEN all three were reported sent, under the same event id
    assert sent == [EVENT_ID] * 3
    # AND the queue dropped the duplicate and kept the conflict
    queued = _queued(ops)
    assert [json.loads(m["Body"])["amount"] for m in queued] == [3, 4]
    assert [m["Attributes"]["MessageDeduplicationId"] for m in queued] == [
        queue_deduplication_id(EVENT_ID, payload_sha256(ORDER)),
        queue_deduplication_id(EVENT_ID, payload_sha256(CONFLICT)),
    ]
    # AND once consumed, the order is recorded and notified once, and the conflict is parked as such
    assert ops.consume() == 2
    assert ops.order_rows()["o-1"]["amount"] == 3
    assert ops.notified_events() == {EVENT_ID: 1}
    assert _parked_codes(ops) == [(4, "IDEMPOTENCY_CONFLICT")]


def test_the_cli_send_drops_duplicates_and_delivers_conflicts(make_ops_world: Callable[..., OpsWorld]) -> None:
    # GIVEN a FIFO pipeline and a file with an order, its exact duplicate and a conflicting version
    ops = make_ops_world(fifo=True)
    lines = "\n".join(json.dumps(order) for order in (ORDER, SAME_ORDER, CONFLICT)) + "\n"
    # WHEN the file is sent with the CLI
    result = ops.run("send", "-", "--json", input=lines)
    # THEN all three lines were sent
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["sent"] for line in result.stdout.splitlines()] == [True] * 3
    # AND the queue holds the order and the conflict; the consumer parks the conflict
    assert [json.loads(m["Body"])["amount"] for m in _queued(ops)] == [3, 4]
    assert ops.consume() == 2
    assert _parked_codes(ops) == [(4, "IDEMPOTENCY_CONFLICT")]


def test_a_message_0_2_0_sent_is_still_consumed_and_its_resend_recorded_once(
    make_ops_world: Callable[..., OpsWorld],
) -> None:
    # GIVEN a FIFO queue holding an order as 0.2.0's producer sent it, under the deduplication id
    # of its event alone (tests/compat/v0_2_0/lambdas/order_events/sns_ids.py: the SHA-256 hex)
    ops = make_ops_world(fifo=True)
    old_id = sns_deduplication_id(EVENT_ID)
    publisher = OrderPublisher(ops.queue_url, client=ops.sqs)
    prepared = publisher.prepare(ORDER)
    ops.sqs.send_message(
        QueueUrl=ops.queue_url,
        MessageBody=prepared.body,
        MessageAttributes=prepared.attributes,
        MessageGroupId="o-1",
        MessageDeduplicationId=old_id,
    )
    # WHEN, within five minutes, the upgraded producer sends the same order again and a conflicting version
    publisher.send(SAME_ORDER)
    publisher.send(CONFLICT)
    # THEN SQS keeps all three: no new id equals the old one, so nothing is dropped against it
    queued = _queued(ops)
    assert [m["Attributes"]["MessageDeduplicationId"] == old_id for m in queued] == [True, False, False]
    # AND the consumer records the order once (the resend is a duplicate it skips), notifies it once,
    # and parks the conflict
    assert ops.consume() == 3
    assert ops.event_records()[EVENT_ID]["status"] == "sent"
    assert ops.notified_events() == {EVENT_ID: 1}
    assert _parked_codes(ops) == [(4, "IDEMPOTENCY_CONFLICT")]


def test_a_redriven_conflict_is_not_dropped_as_a_duplicate_of_its_first_send(
    make_ops_world: Callable[..., OpsWorld],
) -> None:
    # GIVEN a FIFO pipeline whose consumer parked a conflict, all within five minutes of its send
    # (an SQS that remembers deduplication ids after a message is deleted, as SQS does)
    ops = make_ops_world(fifo=True)
    sqs = DeduplicatingSqs(ops.sqs)
    publisher = OrderPublisher(ops.queue_url, client=sqs)  # type: ignore[arg-type]
    publisher.send(ORDER)
    publisher.send(CONFLICT)
    assert ops.consume() == 2
    # AND the operator decided the conflicting content is right and removed the old row and record
    ops.dynamodb.delete_item(TableName="order-records", Key={"order_id": {"S": "o-1"}})
    ops.dynamodb.delete_item(TableName="processed-events", Key={"event_id": {"S": EVENT_ID}})
    # WHEN the DLQ is redriven at once
    result = ops.run("redrive", "--yes", "--wait-seconds", "0", "--json", sqs=sqs)
    # THEN the copy reached the queue (SQS dropped nothing) and the consumer recorded it
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["moved_by_code"] == {"IDEMPOTENCY_CONFLICT": 1}
    assert sqs.dropped == 0
    assert ops.consume() == 1
    assert ops.order_rows()["o-1"]["amount"] == 4
    assert ops.dead_letters() == []


def test_a_second_redrive_of_a_message_whose_delete_failed_is_dropped_by_the_queue(
    make_ops_world: Callable[..., OpsWorld],
) -> None:
    # GIVEN a FIFO pipeline where an order failed until SQS moved it to the DLQ (SQS remembers ids)
    ops = make_ops_world(fifo=True)
    sqs = DeduplicatingSqs(ops.sqs)
    OrderPublisher(ops.queue_url, client=sqs).send(ORDER)  # type: ignore[arg-type]
    ops.board.arm(
        ArmedFault(client_error("TransactWriteItems", "InternalServerError"), operation="transact_write_items")
    )
    ops.fail_until_dead_lettered()
    ops.board.disarm()
    # AND a redrive whose delete from the DLQ failed: its copy is in the queue, the message still in the DLQ
    failing_delete = _FailingDelete(sqs)
    first = ops.run("redrive", "--yes", "--wait-seconds", "0", "--json", sqs=failing_delete)
    assert first.exit_code == 0, first.output
    assert len(json.loads(first.stdout)["not_deleted"]) == 1
    # WHEN the DLQ is redriven again within five minutes
    second = ops.run("redrive", "--yes", "--wait-seconds", "0", "--json", sqs=sqs)
    # THEN the second copy has the first copy's deduplication id: SQS dropped it, the DLQ is empty
    assert second.exit_code == 0, second.output
    assert json.loads(second.stdout)["moved"] == 1
    assert sqs.dropped == 1
    [copy] = _queued(ops)
    assert ops.visible_count(ops.dlq_url) == 0
    # AND the copy's id is a valid FIFO id, other than the first send's
    assert is_valid_fifo_id(copy["Attributes"]["MessageDeduplicationId"])
    assert copy["Attributes"]["MessageDeduplicationId"] != queue_deduplication_id(EVENT_ID, payload_sha256(ORDER))
    # AND the order is recorded once
    assert ops.consume() == 1
    assert ops.event_records()[EVENT_ID]["status"] == "sent"


class _FailingDelete:
    """An SQS client whose DeleteMessageBatch on the DLQ fails every entry."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def delete_message_batch(self, *, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        if "dlq" not in QueueUrl:
            return dict(self._client.delete_message_batch(QueueUrl=QueueUrl, Entries=Entries))
        return {
            "Successful": [],
            "Failed": [{"Id": e["Id"], "SenderFault": False, "Code": "InternalError"} for e in Entries],
        }
