"""What the explorer explores: the messages of a scenario and the actors that race over them.

Actors are the real entry points, unchanged: ``order_consumer.handler.handler`` for a delivery (one
SQS batch) and ``order_consumer.reconciler.handler`` for a reconciler run; plus DynamoDB's TTL
deleting a sent record, and a redrive (a move task moving the DLQ's messages back, then the
consumer's delivery of them: :mod:`tests.verify.redrive`). Every scenario's events share one index
shard, so the reconciler's other 31 shard queries are not scheduling points (see
:mod:`tests.verify.world`).
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.keys import IDEMPOTENCY_KEY_ATTRIBUTE
from idempotent_order_pipeline._lambda_asset.order_consumer.contract.pending_index import pending_shard
from tests.reliability.invariants import Message, describe

EVENT = "evt-1"
#: A second event in the same index shard as :data:`EVENT`.
SECOND_EVENT = next(f"evt-2-{n}" for n in range(1000) if pending_shard(f"evt-2-{n}") == pending_shard(EVENT))


@dataclass(frozen=True)
class Body:
    """One message the producer sent: its order, its message id and FIFO group, its string attributes."""

    order: tuple[tuple[str, Any], ...]
    message_id: str
    group: str | None = None
    attributes: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, message_id: str, group: str | None = None, **order: Any) -> Body:
        return cls(tuple(order.items()), message_id, group)

    def text(self) -> str:
        return json.dumps(dict(self.order))

    def key(self) -> str | None:
        """The ``idempotency_key`` attribute, if the producer set one."""
        return dict(self.attributes).get(IDEMPOTENCY_KEY_ATTRIBUTE)


@dataclass(frozen=True)
class Delivery:
    """One invocation of the consumer with a batch of the scenario's messages (by index)."""

    name: str
    messages: tuple[int, ...]
    #: The invocation's time (ms); each AWS call costs ``World.call_ms`` of it.
    budget_ms: int = 60_000


@dataclass(frozen=True)
class Scenario:
    name: str
    fifo: bool
    bodies: tuple[Body, ...]
    deliveries: tuple[Delivery, ...]
    reconciler: bool = True
    #: An event whose record DynamoDB's TTL deletes once it is sent (an actor of its own).
    ttl_expiry: str | None = None
    #: Whether a message its delivery did not acknowledge is redelivered by the drain; when False
    #: every delivery is its message's last receive (SQS's redrive policy then moves the message to
    #: the DLQ: with a redrive actor, into the world's DLQ; else to one that is dropped).
    messages_redeliver: bool = True
    #: A redrive actor: a move task moving the DLQ's messages back, and a delivery of them.
    redrive: bool = False

    @property
    def queue_arn(self) -> str:
        return "arn:aws:sqs:eu-west-1:123456789012:orders" + (".fifo" if self.fifo else "")

    def messages(self) -> list[Message]:
        """Fresh message models (one per body) for one execution."""
        made = []
        for body in self.bodies:
            attributes = {"ApproximateReceiveCount": "1"}
            if body.group is not None:
                attributes["MessageGroupId"] = body.group
            made.append(
                message_of(
                    {
                        "messageId": body.message_id,
                        "receiptHandle": "handle",
                        "body": body.text(),
                        "attributes": attributes,
                        "messageAttributes": {name: string_attribute(value) for name, value in body.attributes},
                        "eventSource": "aws:sqs",
                        "eventSourceARN": self.queue_arn,
                    },
                    body.key(),
                )
            )
        return made

    def event_ids(self) -> set[str]:
        return {str(described[0]) for body in self.bodies if (described := describe(body.text(), body.key()))}

    def batch(self, messages: list[Message], delivery: Delivery) -> list[dict[str, Any]]:
        return [copy.deepcopy(messages[index].record) for index in delivery.messages]


def string_attribute(value: str) -> dict[str, Any]:
    """A string message attribute in the Lambda event's shape."""
    return {"dataType": "String", "stringValue": value, "stringListValues": [], "binaryListValues": []}


def message_of(record: dict[str, Any], key: str | None) -> Message:
    """The model of one message on the orders queue (its event, order and content, as the producer meant them)."""
    described = describe(record["body"], key)
    message = Message(record=record, valid=described is not None)
    if described:
        message.event_id, message.order_id, message.sha = described
    return message


def _two(fifo: bool, second_amount: int = 1) -> tuple[Body, ...]:
    """One event sent twice (two message ids), the second with ``second_amount``: on FIFO in two
    groups, since two messages of one group are never in flight at once."""
    return (
        Body.of("m-1", "g-a" if fifo else None, order_id="o-1", event_id=EVENT, amount=1),
        Body.of("m-2", "g-b" if fifo else None, order_id="o-1", event_id=EVENT, amount=second_amount),
    )


def _keyed(fifo: bool, second_amount: int = 1) -> tuple[Body, ...]:
    """As :func:`_two`, but the key travels in the ``idempotency_key`` attribute, beside a producer's own
    ``error_code`` attribute: a name the consumer adds when it parks, so a park packs both into its
    envelope, and a redelivery after a redrive finds the message's key only there."""
    attributes = ((IDEMPOTENCY_KEY_ATTRIBUTE, EVENT), ("error_code", "the producer's own"))
    return tuple(
        Body(tuple((k, v) for k, v in body.order if k != "event_id"), body.message_id, body.group, attributes)
        for body in _two(fifo, second_amount)
    )


TWO = (Delivery("D1", (0,)), Delivery("D2", (1,)))
#: One message delivered twice at once (its visibility timeout ran out while the first was in flight).
SAME_MESSAGE_TWICE = (Delivery("D1", (0,)), Delivery("D2", (0,)))


def published() -> list[Scenario]:
    """The published bounds: two deliveries of one event (same and conflicting content; two message ids,
    and one message delivered twice; redelivered or on their last receive) plus a reconciler run, on a
    standard and a FIFO queue; and a FIFO batch of two messages of one group."""
    scenarios = []
    for fifo in (False, True):
        kind = "fifo" if fifo else "standard"
        scenarios += [
            Scenario(f"{kind}/same-content", fifo, _two(fifo), TWO),
            Scenario(f"{kind}/conflicting-content", fifo, _two(fifo, second_amount=2), TWO),
            Scenario(f"{kind}/one-message-twice", fifo, _two(fifo)[:1], SAME_MESSAGE_TWICE),
            Scenario(f"{kind}/last-receive", fifo, _two(fifo), TWO, messages_redeliver=False),
        ]
    scenarios.append(
        Scenario(
            "fifo/group-of-two",
            True,
            (
                Body.of("m-1", "g-1", order_id="o-1", event_id=EVENT, amount=1),
                Body.of("m-2", "g-1", order_id="o-2", event_id=SECOND_EVENT, amount=1),
            ),
            (Delivery("D1", (0, 1)),),
        )
    )
    return scenarios


def redrives() -> list[Scenario]:
    """The redrive's scenarios, on a standard and a FIFO queue: one event sent twice with conflicting
    content, the loser parked and moved back while the other delivery and the reconciler run; and two
    messages of one event on their last receive, dead-lettered by SQS when a delivery fails, moved
    back and delivered again while the other delivery runs."""
    scenarios = []
    for fifo in (False, True):
        kind = "fifo" if fifo else "standard"
        scenarios += [
            Scenario(f"{kind}/conflict-redriven", fifo, _keyed(fifo, second_amount=2), TWO, redrive=True),
            Scenario(
                f"{kind}/last-receive-redriven",
                fifo,
                _keyed(fifo),
                TWO,
                reconciler=False,  # the drain's reconciler still runs
                messages_redeliver=False,
                redrive=True,
            ),
        ]
    return scenarios


def late_mark_after_expiry() -> Scenario:
    """Two deliveries of one event and the record's TTL expiry: a late mark must not bring it back."""
    return Scenario("standard/ttl-expiry", False, _two(False), TWO, reconciler=False, ttl_expiry=EVENT)


def short_invocation() -> Scenario:
    """A delivery given less time than a record needs to start, and one with time."""
    return Scenario(
        "standard/short-invocation",
        False,
        _two(False),
        (Delivery("D1", (0,), budget_ms=2_900), Delivery("D2", (1,))),
        reconciler=False,
    )


def two_deliveries() -> Scenario:
    """Two deliveries of one event with one content, no reconciler: the slice ``make test`` explores."""
    return Scenario("standard/two-deliveries", False, _two(False), TWO, reconciler=False)


def conflict_redriven_slice() -> Scenario:
    """The conflict's loser parked and redriven while the winner is in flight, no reconciler: the
    redrive's slice ``make test`` explores."""
    return Scenario(
        "standard/conflict-redriven-slice", False, _keyed(False, second_amount=2), TWO, reconciler=False, redrive=True
    )


def _same(scenario: Scenario) -> Scenario:
    return scenario


def by_name() -> dict[str, Callable[[], Scenario]]:
    found: dict[str, Callable[[], Scenario]] = {
        s.name: functools.partial(_same, s) for s in (*published(), *redrives())
    }
    found[late_mark_after_expiry().name] = late_mark_after_expiry
    found[short_invocation().name] = short_invocation
    found[two_deliveries().name] = two_deliveries
    found[conflict_redriven_slice().name] = conflict_redriven_slice
    return found
