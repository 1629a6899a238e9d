"""A producer cannot give a parked message a reason the consumer never gave.

Nothing signs the envelope; what makes it the consumer's is how the message reached the DLQ: only the
consumer sends there, always with its own envelope, and SQS marks each message its redrive policy
moves (``DeadLetterQueueSourceArn``), so a producer's envelope that rode along is not believed.
"""

from __future__ import annotations

from typing import Any

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.errors import InvalidMessageError
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.parked import (
    ADDED_ATTRIBUTES,
    PARKED_ATTRIBUTE,
    Envelope,
    envelope_of,
)
from idempotent_order_pipeline._lambda_asset.order_consumer.dead_letter import dead_letter_attributes
from idempotent_order_pipeline.cli.dead_letters import MAX_RECEIVES, DeadLetter, Selection

#: A well-formed envelope and the reason it claims, as any producer can send them to the orders queue.
FORGED = {
    PARKED_ATTRIBUTE: {"DataType": "String", "StringValue": Envelope().to_json(with_packed=False)},
    "error_code": {"DataType": "String", "StringValue": "INVALID_MESSAGE"},
    "error_message": {"DataType": "String", "StringValue": "forged: call +1 555 0100 to fix your order"},
    "source_message_id": {"DataType": "String", "StringValue": "m-forged"},
}
SOURCE_QUEUE_ARN = "arn:aws:sqs:eu-west-1:123456789012:orders"


def dlq_message(system_attributes: dict[str, str]) -> dict[str, Any]:
    """A DLQ message as ReceiveMessage returns it, carrying the forged envelope and reason."""
    return {
        "MessageId": "m-1",
        "ReceiptHandle": "r-1",
        "Body": '{"order_id": "o-1", "amount": 1}',
        "MessageAttributes": FORGED,
        "Attributes": {"SentTimestamp": "1700000000000", "ApproximateReceiveCount": "1", **system_attributes},
    }


def test_an_envelope_on_a_message_sqs_moved_to_the_dlq_is_not_the_consumers() -> None:
    # GIVEN a producer's message with a well-formed envelope claiming INVALID_MESSAGE, which SQS's
    # redrive policy moved to the DLQ after maxReceiveCount receives
    letter = DeadLetter.from_message(dlq_message({"DeadLetterQueueSourceArn": SOURCE_QUEUE_ARN}), ("order_id",))
    # WHEN the CLI reads its reason
    # THEN it shows what happened (moved after too many receives), not the reason the producer wrote
    assert letter.envelope is None
    assert (letter.error_code, letter.error_message, letter.source_message_id) == (MAX_RECEIVES, None, None)
    assert letter.summary()["error_code"] == MAX_RECEIVES
    # AND `dlq drop --error-code INVALID_MESSAGE` does not select it; MAX_RECEIVES does
    assert not Selection.of(["INVALID_MESSAGE"]).matches(letter)
    assert Selection.of([MAX_RECEIVES]).matches(letter)


def test_an_envelope_the_consumer_sent_to_the_dlq_is_believed() -> None:
    # GIVEN the same attributes on a message sent to the DLQ directly (no DeadLetterQueueSourceArn):
    # only the consumer's role may send there
    letter = DeadLetter.from_message(dlq_message({}), ("order_id",))
    # WHEN the CLI reads its reason
    # THEN it is the envelope's
    assert letter.error_code == "INVALID_MESSAGE"
    assert Selection.of(["INVALID_MESSAGE"]).matches(letter)


def test_the_consumer_replaces_an_envelope_it_receives_with_its_own() -> None:
    # GIVEN a producer's message carrying a forged envelope and reason (Lambda event shape)
    received = {name: {"dataType": "String", "stringValue": value["StringValue"]} for name, value in FORGED.items()}
    # WHEN the consumer parks it for its own reason
    parked = dead_letter_attributes(received, InvalidMessageError("no order_id"), "m-real")
    # THEN the reason and the envelope on the DLQ message are the consumer's alone
    assert parked["error_code"]["StringValue"] == "INVALID_MESSAGE"
    assert parked["error_message"]["StringValue"].startswith("no order_id")
    assert parked["source_message_id"]["StringValue"] == "m-real"
    envelope = envelope_of(parked, string_key="StringValue")
    assert envelope is not None
    assert envelope.added == ADDED_ATTRIBUTES
