"""The redrive actor: a move task puts the DLQ's messages back on the orders queue, and the consumer
receives them again, racing with the other actors.

What a redrive does in AWS (``docs/redrive.md``): ``StartMessageMoveTask`` moves the messages of the
DLQ to the source queue as they are, body and message attributes unchanged. A message the consumer
parked therefore comes back with its envelope (``order_pipeline_parked``) and its earlier reason
(``error_code``, ``error_message``, ``source_message_id``), and with the producer's attributes beside
them or packed inside the envelope (``order_consumer/contract/parked.py``); the consumer reads the
producer's attributes through the envelope (a packed ``idempotency_key`` is the message's key) and,
if it parks the message again, packs the producer's originals and writes its new reason, never the
old one. A message SQS's redrive policy dead-lettered after ``maxReceiveCount`` receives is in the
DLQ as the producer sent it (same id, same attributes, marked by SQS with the system attribute
``DeadLetterQueueSourceArn``) and comes back as it is too.

The actor, ``RD``, makes two kinds of moves:

1. **the move task** (one scheduling point, not a crash point: SQS runs it, not a Lambda): it takes
   every message the DLQ holds *at that moment* and puts a copy of each on the orders queue. Its
   footprint writes the DLQ, so it conflicts with every park and every dead-lettering: the sleep
   sets place it before and after each of them, and the schedules cover a redrive of an empty DLQ,
   of the loser of a conflict parked a moment ago while the winner is still unmarked, and so on.
2. **the delivery** of the copies SQS hands over at once (one invocation of
   ``order_consumer.handler.handler`` with all of them; on a FIFO queue a copy waits while an earlier
   message of its group is still in flight, and the drain delivers it after): the same delivery as
   the others, with a crash point at every write and at its return, and the check at its
   acknowledgement. What it does not acknowledge is delivered again by the drain.

Why an actor that moves whatever the DLQ holds, rather than one enabled only when the DLQ has
something: an enabling condition would need the scheduler to know it and the sleep sets to treat
each park as enabling the redrive, which is exactly the dependency the DLQ footprint already gives;
and a move task started before anything was parked is a real schedule too (it moves nothing, and
the later park stays in the DLQ). It costs the schedules in which it moves nothing, which the state
caching cuts short.

Each copy is a new message on the orders queue with its own message id (the consumer keys nothing
on message ids; a distinct one keeps a copy's parks apart from its original's in the checks), and
the model of a copy carries its original's event, order and content: what the producer meant, not
what the consumer reads from the envelope. An original whose every park was moved back hands its
fate to its copy (:func:`tests.verify.checks.final`). One move task per schedule.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

from tests.reliability.invariants import Message
from tests.verify.scenarios import Delivery, Scenario
from tests.verify.scheduler import Point
from tests.verify.world import DeadLetter, LoggedCall, World

ACTOR = "RD"
#: The suffix of a copy's message id.
COPY_SUFFIX = "~moved"


def lambda_attributes(attributes: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Message attributes in SQS's shape (``DataType``/``StringValue``) in the Lambda event's shape."""
    return {
        name: {
            "dataType": value["DataType"],
            "stringValue": value.get("StringValue", ""),
            "stringListValues": [],
            "binaryListValues": [],
        }
        for name, value in attributes.items()
    }


def moved_record(entry: DeadLetter, message_id: str, queue_arn: str) -> dict[str, Any]:
    """The Lambda event record of a DLQ message a move task put back: body and attributes as in the DLQ."""
    attributes = {"ApproximateReceiveCount": "1"}
    if entry.group is not None:
        attributes["MessageGroupId"] = entry.group
    return {
        "messageId": message_id,
        "receiptHandle": "handle",
        "body": entry.body,
        "attributes": attributes,
        "messageAttributes": lambda_attributes(entry.attributes),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
    }


def origin_of(entry: DeadLetter, messages: Sequence[Message]) -> Message:
    """The message a DLQ entry came from: the one the consumer parked (by ``source_message_id``), or the
    one SQS dead-lettered (same id)."""
    wanted = entry.message_id if entry.moved_by_sqs else entry.attribute("source_message_id")
    return next(m for m in messages if m.message_id == wanted)


def copy_of(entry: DeadLetter, origin: Message, message_id: str, queue_arn: str) -> Message:
    """The model of a copy: its record as moved, its original's event, order and content."""
    moved = Message(record=moved_record(entry, message_id, queue_arn), valid=origin.valid)
    moved.event_id, moved.order_id, moved.sha = origin.event_id, origin.order_id, origin.sha
    return moved


def handed_over_now(message: Message, messages: Sequence[Message]) -> bool:
    """Whether SQS hands ``message`` over now: always on a standard queue; on a FIFO queue only when
    no earlier message of its group is still on the queue (in flight or waiting)."""
    group = message.record["attributes"].get("MessageGroupId")
    if group is None:
        return True
    for earlier in messages[: messages.index(message)]:
        if earlier.record["attributes"].get("MessageGroupId") == group and not (
            earlier.acknowledged or earlier.redriven
        ):
            return False
    return True


def actor(
    scenario: Scenario,
    world: World,
    messages: list[Message],
    deliver: Callable[[Delivery], None],
) -> Callable[[], None]:
    """The redrive actor's body for one execution (``messages`` grows by the copies it makes)."""
    # What the move reads: the DLQ (written by parks and dead-letterings), and on FIFO the
    # acknowledgements that decide which copies SQS hands over at once.
    footprint = {("queue:" + world.dlq_name, "w")}
    if scenario.fifo:
        footprint |= {(f"msg:{m.message_id}", "r") for m in messages}

    def redrive() -> None:
        assert world.execution is not None
        world.execution.point(Point("move task", frozenset(footprint), crashable=False))
        copies = []
        for entry in world.move_back():
            origin = origin_of(entry, messages)
            # Named after its original (SQS's ids are random; a schedule must replay, and state caching
            # must recognise a state reached again): m-2~moved, m-2~moved-2 when a park and a
            # dead-lettering of m-2 were both moved.
            same = sum(1 for moved_from in world.origins.values() if moved_from == origin.message_id)
            message_id = origin.message_id + COPY_SUFFIX + (f"-{same + 1}" if same else "")
            moved = copy_of(entry, origin, message_id, scenario.queue_arn)
            world.origins[moved.message_id] = origin.message_id
            copies.append(moved)
        messages.extend(copies)
        ready = [m for m in copies if handed_over_now(m, messages)]
        world.log.append(
            LoggedCall(
                ACTOR,
                "move task: the DLQ's messages back to the queue",
                f"moved {[m.message_id for m in copies]}, handed over {[m.message_id for m in ready]}",
            )
        )
        if ready:
            deliver(Delivery(ACTOR, tuple(messages.index(m) for m in ready)))

    return redrive


def producer_view(attributes: dict[str, dict[str, Any]]) -> dict[str, tuple[str, str]]:
    """Lambda-shaped attributes reduced to (type, value) per name: what a comparison needs."""
    return {name: (str(value["dataType"]), str(value.get("stringValue", ""))) for name, value in attributes.items()}


def original_record(message_id: str, messages: Sequence[Message], origins: dict[str, str]) -> dict[str, Any]:
    """The record the producer sent, for a message or a copy of it."""
    wanted = origins.get(message_id, message_id)
    return copy.deepcopy(next(m for m in messages if m.message_id == wanted).record)
