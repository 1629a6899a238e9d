"""Parking's batching and results, at the SQS client: what one ``SendMessageBatch`` may carry, what a
partial answer means, and how an attribute without a type is packed."""

from __future__ import annotations

import json
from typing import Any

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.batching import MAX_BATCH_BYTES, message_bytes
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.errors import InvalidMessageError
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.parked import PARKED_ATTRIBUTE
from idempotent_order_pipeline._lambda_asset.order_consumer.dead_letter import (
    DeadLetterQueue,
    ParkRequest,
    dead_letter_attributes,
)


class RecordingSqs:
    """An SQS client that records each call and accepts the entries ``accept`` picks (default: all)."""

    def __init__(self, accept: Any = None) -> None:
        self.batches: list[list[dict[str, Any]]] = []
        self.accept = accept or (lambda entry: True)

    def send_message(self, **request: Any) -> dict[str, Any]:
        self.batches.append([request])
        return {"MessageId": "m"}

    def send_message_batch(self, **request: Any) -> dict[str, Any]:
        entries = request["Entries"]
        self.batches.append(entries)
        return {"Successful": [{"Id": entry["Id"]} for entry in entries if self.accept(entry)], "Failed": []}


def request(
    number: int, body: str = "not json", attributes: dict[str, Any] | None = None, group: str | None = None
) -> ParkRequest:
    return ParkRequest(
        body=body,
        attributes=attributes or {},
        message_id=f"m-{number}",
        error=InvalidMessageError("bad"),
        message_group_id=group,
    )


def test_a_batch_is_split_by_the_size_of_bodies_and_attributes_together() -> None:
    # GIVEN two messages whose bodies fit one SendMessageBatch together, but not with their attributes
    big = "a" * (MAX_BATCH_BYTES // 3)
    requests = [request(i, body=big, attributes={"note": {"dataType": "String", "stringValue": big}}) for i in (1, 2)]
    sqs = RecordingSqs()
    # WHEN they are parked
    results = DeadLetterQueue(queue_url="https://sqs/dlq", client=sqs).park_batch(requests)  # type: ignore[arg-type]
    # THEN each went in a call of its own, none over SQS's batch limit, and both were accepted
    assert results == [None, None]
    assert [len(batch) for batch in sqs.batches] == [1, 1]
    for batch in sqs.batches:
        assert sum(message_bytes(e["MessageBody"], e["MessageAttributes"]) for e in batch) <= MAX_BATCH_BYTES


def test_an_entry_sqs_neither_accepted_nor_refused_is_not_sent() -> None:
    # GIVEN SQS answers a batch of two with only the first entry among the successful ones
    sqs = RecordingSqs(accept=lambda entry: entry["Id"] == "0")
    # WHEN both are parked
    results = DeadLetterQueue(queue_url="https://sqs/dlq", client=sqs).park_batch([request(1), request(2)])  # type: ignore[arg-type]
    # THEN the first is parked and the second reported "not sent" (its record must not be acknowledged)
    assert results == [None, "not sent"]


def test_an_attribute_without_a_type_is_packed_as_a_string() -> None:
    # GIVEN a hand-built event's attribute with a reserved name and no dataType (so it is packed)
    attributes = {"error_code": {"stringValue": "mine"}}
    # WHEN the dead-letter attributes are built
    result = dead_letter_attributes(attributes, InvalidMessageError("bad"), "m-1")
    # THEN the envelope packs it as a String with its value, and the reason is the consumer's
    envelope = json.loads(result[PARKED_ATTRIBUTE]["StringValue"])
    assert envelope["packed"] == {"error_code": {"dataType": "String", "stringValue": "mine"}}
    assert result["error_code"]["StringValue"] == "INVALID_MESSAGE"


def test_a_client_made_on_first_park_is_made_once_and_used() -> None:
    # GIVEN a DLQ given a client factory, not a client
    made: list[RecordingSqs] = []

    def factory() -> RecordingSqs:
        made.append(RecordingSqs())
        return made[-1]

    dlq = DeadLetterQueue(queue_url="https://sqs/dlq", client_factory=factory)  # type: ignore[arg-type]
    # WHEN two parks are made
    first = dlq.park_batch([request(1)])
    second = dlq.park_batch([request(2)])
    # THEN the client was made once, at the first park, and carried both messages
    assert (first, second) == ([None], [None])
    assert len(made) == 1
    assert [batch[0]["MessageBody"] for batch in made[0].batches] == ["not json", "not json"]


class AnsweringSqs(RecordingSqs):
    """An SQS client whose SendMessageBatch gives one fixed answer, whatever the entries."""

    def __init__(self, answer: dict[str, Any]) -> None:
        super().__init__()
        self.answer = answer

    def send_message_batch(self, **request: Any) -> dict[str, Any]:
        self.batches.append(request["Entries"])
        return self.answer


def test_entry_ids_sqs_did_not_send_are_ignored_in_its_answer() -> None:
    # GIVEN SQS answers a batch of three (ids "0", "1", "2") accepting "0" and an id it was not sent,
    # and refusing "2" and another id it was not sent
    sqs = AnsweringSqs(
        {
            "Successful": [{"Id": "0"}, {"Id": "7"}],
            "Failed": [{"Id": "2", "Code": "InvalidMessageContents", "Message": "bad"}, {"Id": "9", "Code": "X"}],
        }
    )
    # WHEN the three are parked
    results = DeadLetterQueue(queue_url="https://sqs/dlq", client=sqs).park_batch(  # type: ignore[arg-type]
        [request(1), request(2), request(3)]
    )
    # THEN the first is parked, the third refused with SQS's reason, and the second, which SQS did not
    # report, is not sent: the unknown ids changed nothing
    assert results == [None, "not sent", "SQS refused to park the message: InvalidMessageContents: bad"]


def test_a_fifo_dead_letter_queue_keeps_the_message_group_and_deduplicates_on_the_message() -> None:
    # GIVEN a FIFO DLQ, a message of group g-1 and a message without a group (a hand-built event)
    sqs = RecordingSqs()
    dlq = DeadLetterQueue(queue_url="https://sqs/dlq.fifo", client=sqs)  # type: ignore[arg-type]
    # WHEN both are parked
    results = dlq.park_batch([request(1, group="g-1"), request(2)])
    # THEN the first keeps its group (the group's order is kept in the DLQ), the second is a group of its
    # own, and each is deduplicated on its message id
    assert results == [None, None]
    [entries] = sqs.batches
    assert [(e["MessageGroupId"], e["MessageDeduplicationId"]) for e in entries] == [("g-1", "m-1"), ("m-2", "m-2")]
