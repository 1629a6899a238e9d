"""Suspected (issue 19, point 7): a FIFO record parked again within SQS's 5-minute deduplication window
is dropped silently. Disproved: the parking's deduplication id is the record's SQS message id, and
a redriven message is a new message with a new id (SQS's move task assigns one, "all redriven
messages are treated as new messages"; the CLI's redrive sends a new message), so a second park
of a redriven copy is never deduplicated against the first. Only a retry of the same receive (the
same message id, after an invocation that parked it but did not report) is: one copy, as meant.
"""

from __future__ import annotations

from collections.abc import Callable

from tests.consumer.harness import World, sqs_record

INVALID = {"amount": 1}  # no order_id: parked as INVALID_MESSAGE, every time


def test_a_redriven_fifo_message_parked_again_within_five_minutes_is_kept(make_world: Callable[..., World]) -> None:
    # GIVEN a FIFO pipeline and an invalid message the consumer parked
    world = make_world(fifo=True)
    first = sqs_record(INVALID, message_id="m-first", group="g-1")
    assert world.invoke([first]) == {"batchItemFailures": []}
    [parked] = world.dead_letters()  # the redrive takes it out of the DLQ
    assert parked["MessageAttributes"]["source_message_id"]["StringValue"] == "m-first"

    # WHEN it is redriven at once (a new message id, as SQS and the CLI give it) and fails again
    again = sqs_record(parked["Body"], message_id="m-redriven", group="g-1")
    assert world.invoke([again]) == {"batchItemFailures": []}

    # THEN the second park is in the DLQ (not deduplicated against the first, 5 minutes or not)
    [parked_again] = world.dead_letters()
    assert parked_again["MessageAttributes"]["source_message_id"]["StringValue"] == "m-redriven"
    assert parked_again["Body"] == parked["Body"]


def test_a_retry_of_the_same_receive_is_parked_once(make_world: Callable[..., World]) -> None:
    # GIVEN a FIFO pipeline that parked a message
    world = make_world(fifo=True)
    record = sqs_record(INVALID, message_id="m-1", group="g-1")
    world.invoke([record])

    # WHEN the same receive is processed again (the invocation parked it but its answer was lost)
    world.invoke([record])

    # THEN SQS's deduplication keeps one copy in the DLQ
    assert [m["MessageAttributes"]["source_message_id"]["StringValue"] for m in world.dead_letters()] == ["m-1"]
