"""The demo's producer: orders, re-sends, conflicts and invalid messages, and the ledger of what was sent.

Every message is planned first (:func:`plan_traffic`, reproducible from a seed), then sent in a
shuffled order with ``SendMessageBatch``; each planned message records what the pipeline must do
with it, so :mod:`.checks` can hold the endpoint's state against it:

* ``order`` - a new order with a unique ``order_id``. Its idempotency key comes, in turn, from the
  body's ``event_id``, from the ``idempotency_key`` message attribute, or is derived from the
  identity fields with :func:`order_consumer.contract.keys.derive_event_id` (the producer uses the same
  function as the consumer, as the contract requires);
* ``resend`` - the producer sends an order again: same body and attributes, a new SQS message;
* ``conflict`` - the same key and ``order_id`` as an order, another payload (the amount changed);
* ``invalid`` - breaks the message contract (not JSON, not an object, no ``order_id``, body and
  attribute keys that disagree, a reserved field);
* ``schema_violation`` - a well-formed message whose order breaks the app's ``order_schema`` (an
  amount that is a string or negative, no customer tier, no items, a country that is not a code),
  sent raw to the queue, past the producer's check: the consumer parks it as ``SCHEMA_VIOLATION``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from idempotent_order_pipeline._lambda_asset.order_consumer.contract.message import parse_body
from idempotent_order_pipeline.keys import (
    DEFAULT_IDENTITY_FIELDS,
    EVENT_ID_FIELD,
    IDEMPOTENCY_KEY_ATTRIBUTE,
    derive_event_id,
    payload_sha256,
)

#: Defaults of the traffic mix, as shares of the number of orders.
DEFAULT_RESEND_SHARE = 0.2
DEFAULT_CONFLICT_SHARE = 0.05
DEFAULT_INVALID_SHARE = 0.05
#: For a pipeline with an ``order_schema`` (app.py's): orders that break it, sent raw.
DEFAULT_SCHEMA_VIOLATION_SHARE = 0.02
#: SendMessageBatch's limit.
SEND_BATCH = 10

Kind = Literal["order", "resend", "conflict", "invalid", "schema_violation"]
_INVALID_BODIES: tuple[tuple[str, Callable[[str], tuple[str, str | None]]], ...] = (
    ("truncated JSON", lambda tag: (f'{{"order_id": "{tag}", "amount": ', None)),
    ("not an object", lambda tag: (json.dumps([tag, 1]), None)),
    ("no order_id", lambda tag: (json.dumps({"customer_id": tag, "amount": 1}), None)),
    ("keys disagree", lambda tag: (json.dumps({"order_id": tag, EVENT_ID_FIELD: f"{tag}-body"}), f"{tag}-attr")),
    ("reserved field", lambda tag: (json.dumps({"order_id": tag, "payload_sha256": "0" * 64}), None)),
)

#: Each breaks one rule of app.py's ``order_schema`` in an otherwise valid order.
_SCHEMA_VIOLATIONS: tuple[tuple[str, Callable[[dict[str, Any]], dict[str, Any]]], ...] = (
    ("amount is a string", lambda order: {**order, "amount": f"{order['amount']:.2f}"}),
    ("negative amount", lambda order: {**order, "amount": -order["amount"]}),
    ("no customer tier", lambda order: {**order, "customer": {"id": order["customer"]["id"]}}),
    ("no items", lambda order: {**order, "items": []}),
    ("country is not a code", lambda order: {**order, "country": "Germany"}),
)


@dataclass
class PlannedMessage:
    """One message of the demo, what the pipeline must do with it, and its SQS id once sent."""

    kind: Kind
    body: str
    idempotency_key: str | None = None
    event_id: str | None = None
    order_id: str | None = None
    payload_sha256: str | None = None
    invalid_reason: str | None = None
    message_id: str | None = None

    def send_entry(self, entry_id: str) -> dict[str, Any]:
        entry: dict[str, Any] = {"Id": entry_id, "MessageBody": self.body}
        if self.idempotency_key is not None:
            entry["MessageAttributes"] = {
                IDEMPOTENCY_KEY_ATTRIBUTE: {"DataType": "String", "StringValue": self.idempotency_key}
            }
        return entry


@dataclass
class TrafficPlan:
    """The planned messages, in sending order."""

    run_id: str
    messages: list[PlannedMessage] = field(default_factory=list)

    def count(self, kind: Kind) -> int:
        return sum(message.kind == kind for message in self.messages)

    @property
    def unique_events(self) -> int:
        """Distinct idempotency keys among the messages the pipeline may accept."""
        return len({message.event_id for message in self.messages if message.kind in ACCEPTED_KINDS})


#: The kinds of message the pipeline records (the others it parks: ``invalid``, ``schema_violation``).
ACCEPTED_KINDS: frozenset[Kind] = frozenset({"order", "resend", "conflict"})


#: Where the demo's orders go; the app's fulfilment subscriber acts on the German ones only.
COUNTRIES = ("DE", "FR", "NL", "AT", "US")
TIERS = ("standard", "silver", "gold")


def _order_body(rng: random.Random, order_id: str) -> dict[str, Any]:
    """An order of the shape app.py's ``order_schema`` describes."""
    return {
        "order_id": order_id,
        "customer": {"id": f"customer-{rng.randint(1, 40):03d}", "tier": rng.choice(TIERS)},
        "country": rng.choice(COUNTRIES),
        "amount": round(rng.randint(100, 99_999) / 100, 2),
        "currency": rng.choice(["EUR", "USD", "GBP"]),
        "items": [
            {"sku": f"sku-{rng.randint(1, 500):04d}", "quantity": rng.randint(1, 5)} for _ in range(rng.randint(1, 3))
        ],
    }


def _planned(kind: Kind, body: dict[str, Any], attribute_key: str | None, identity: Sequence[str]) -> PlannedMessage:
    text = json.dumps(body, separators=(",", ":"))
    parsed = parse_body(text)  # numbers as the consumer parses them, for the same fingerprint
    event_id = parsed.get(EVENT_ID_FIELD) or attribute_key or derive_event_id(parsed, identity)
    return PlannedMessage(
        kind=kind,
        body=text,
        idempotency_key=attribute_key,
        event_id=str(event_id),
        order_id=str(parsed["order_id"]),
        payload_sha256=payload_sha256(parsed),
    )


def plan_traffic(
    orders: int,
    *,
    seed: int,
    identity_fields: Sequence[str] = DEFAULT_IDENTITY_FIELDS,
    resend_share: float = DEFAULT_RESEND_SHARE,
    conflict_share: float = DEFAULT_CONFLICT_SHARE,
    invalid_share: float = DEFAULT_INVALID_SHARE,
    schema_violation_share: float = 0.0,
) -> TrafficPlan:
    """Plan ``orders`` orders and the shares of re-sends, conflicts, invalid messages, schema violations, shuffled."""
    rng = random.Random(seed)  # noqa: S311 - reproducible test data, not secrets
    run_id = f"{rng.getrandbits(32):08x}"
    if identity_fields != DEFAULT_IDENTITY_FIELDS:
        raise ValueError(f"the demo's orders are keyed by order_id only; the function has {identity_fields}")
    plan = TrafficPlan(run_id=run_id)
    originals: list[tuple[dict[str, Any], str | None]] = []
    for index in range(orders):
        order_id = f"order-{run_id}-{index:06d}"
        body = _order_body(rng, order_id)
        attribute_key = None
        if index % 3 == 0:
            body = {EVENT_ID_FIELD: f"event-{run_id}-{index:06d}", **body}
        elif index % 3 == 1:
            attribute_key = f"key-{run_id}-{index:06d}"
        originals.append((body, attribute_key))
        plan.messages.append(_planned("order", body, attribute_key, identity_fields))

    picks = list(range(orders))
    rng.shuffle(picks)
    resend_count = round(orders * resend_share)
    conflict_count = round(orders * conflict_share)
    for index in picks[:resend_count]:
        body, attribute_key = originals[index]
        plan.messages.append(_planned("resend", body, attribute_key, identity_fields))
    for index in picks[resend_count : resend_count + conflict_count]:
        body, attribute_key = originals[index]
        changed = {**body, "amount": round(body["amount"] + 1, 2)}
        plan.messages.append(_planned("conflict", changed, attribute_key, identity_fields))
    for index in range(round(orders * invalid_share)):
        reason, build = _INVALID_BODIES[index % len(_INVALID_BODIES)]
        text, attribute_key = build(f"invalid-{run_id}-{index:06d}")
        plan.messages.append(
            PlannedMessage(kind="invalid", body=text, idempotency_key=attribute_key, invalid_reason=reason)
        )
    for index in range(round(orders * schema_violation_share)):
        reason, breaks = _SCHEMA_VIOLATIONS[index % len(_SCHEMA_VIOLATIONS)]
        body = breaks(_order_body(rng, f"violation-{run_id}-{index:06d}"))
        violation = _planned("schema_violation", body, None, identity_fields)
        violation.invalid_reason = reason
        plan.messages.append(violation)
    rng.shuffle(plan.messages)
    return plan


def schema_violations(plan: TrafficPlan) -> list[PlannedMessage]:
    """The plan's schema violations, in the order they were planned (by ``order_id``)."""
    return sorted(
        (message for message in plan.messages if message.kind == "schema_violation"),
        key=lambda message: str(message.order_id),
    )


def send(
    sqs: Any, queue_url: str, messages: Sequence[PlannedMessage], on_sent: Callable[[int], None] | None = None
) -> None:
    """Send ``messages`` in batches of 10, recording each SQS message id; raise if any send failed."""
    for start in range(0, len(messages), SEND_BATCH):
        chunk = messages[start : start + SEND_BATCH]
        response = sqs.send_message_batch(
            QueueUrl=queue_url, Entries=[message.send_entry(str(index)) for index, message in enumerate(chunk)]
        )
        if response.get("Failed"):
            raise RuntimeError(f"SendMessageBatch failed for {response['Failed']}")
        for result in response["Successful"]:
            chunk[int(result["Id"])].message_id = result["MessageId"]
        if on_sent is not None:
            on_sent(len(chunk))
