"""The pipeline's invariants, checked against the endpoint's state after a run.

State is read from the endpoint only: both tables (scans), the notifications a queue subscribed to
the topic received, the messages in the DLQ, the source queue's depth. It is held against the
ledger of what the producer sent (:class:`~.traffic.TrafficPlan`). The invariants hold whatever
order the messages were processed in, so a conflicting message that won the race against its
original is fine as long as exactly one of the two payloads is recorded and the other is parked.

Per idempotency key of the accepted messages (orders, re-sends, conflicts):

* exactly one order row, carrying that key and one of the payloads sent under it;
* its ``processed_events`` record has the same payload and status ``sent``;
* at least one notification for it, and every notification names the recorded payload;
* every message sent under it with another payload is in the DLQ as ``IDEMPOTENCY_CONFLICT``; no
  message with the recorded payload is parked by the handler;
* unless every message of the key went to the DLQ through the queue's redrive (received
  ``maxReceiveCount`` times without success): then the key may have no row; that is reported.

And: every invalid message is in the DLQ as ``INVALID_MESSAGE``, every schema violation (an order
that breaks the pipeline's ``order_schema``, sent past the producer) as ``SCHEMA_VIOLATION`` with
no order row; the DLQ holds nothing else; no row exists for an order that was not sent; the source
queue is empty. What the worked app adds (the producer's refusal, the fulfilment subscriber) is
checked by :mod:`.worked_app`.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.types import TypeDeserializer

from idempotent_order_pipeline._lambda_asset.order_consumer.contract import names
from idempotent_order_pipeline.sandbox.traffic import ACCEPTED_KINDS, PlannedMessage, TrafficPlan

if TYPE_CHECKING:
    # Annotations only: app.py imports this module (through worked_app) at every synth, and the server
    # module brings moto's CloudFormation and every backend it loads (sandbox/worked_app.py).
    from idempotent_order_pipeline.sandbox.server import Endpoint

#: The ``error_code`` shown for messages the queue's redrive policy moved (they carry none).
REDRIVEN = "(redrive: maxReceiveCount)"
INVALID_MESSAGE = "INVALID_MESSAGE"
IDEMPOTENCY_CONFLICT = "IDEMPOTENCY_CONFLICT"
SCHEMA_VIOLATION = "SCHEMA_VIOLATION"
#: Long enough that a message read once is not read again while a queue is peeked.
_READ_VISIBILITY_SECONDS = 600

_deserializer = TypeDeserializer()


@dataclass(frozen=True)
class ParkedMessage:
    """A message found in the DLQ."""

    message_id: str
    source_message_id: str
    error_code: str
    #: The reason the handler gave (None for a message the queue's redrive moved).
    error_message: str | None = None


@dataclass(frozen=True)
class EndpointState:
    """What the endpoint holds after a run."""

    order_rows: list[dict[str, Any]]
    processed_events: dict[str, dict[str, Any]]
    notifications: list[dict[str, Any]]
    dead_letters: list[ParkedMessage]
    queue_visible: int
    queue_in_flight: int


@dataclass
class CheckResult:
    """The figures of a run and every invariant violation found (empty: all held)."""

    figures: dict[str, int] = field(default_factory=dict)
    dead_letters_by_code: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations


def _scan(dynamodb: Any, table_name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for page in dynamodb.get_paginator("scan").paginate(TableName=table_name, ConsistentRead=True):
        items.extend({name: _deserializer.deserialize(value) for name, value in item.items()} for item in page["Items"])
    return items


def queue_depth(sqs: Any, queue_url: str) -> tuple[int, int]:
    """(visible, in flight) messages of ``queue_url``, as SQS approximates them."""
    attributes = sqs.get_queue_attributes(
        QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]), int(attributes["ApproximateNumberOfMessagesNotVisible"])


def peek_queue(sqs: Any, queue_url: str) -> list[dict[str, Any]]:
    """Every message of ``queue_url``, left in place: each is received once, then made visible again."""
    messages: list[dict[str, Any]] = []
    empty_receives = 0
    while empty_receives < 2:
        received = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=_READ_VISIBILITY_SECONDS,
            WaitTimeSeconds=0,
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        empty_receives = 0 if received else empty_receives + 1
        messages.extend(received)
    for start in range(0, len(messages), 10):
        sqs.change_message_visibility_batch(
            QueueUrl=queue_url,
            Entries=[
                {"Id": str(index), "ReceiptHandle": message["ReceiptHandle"], "VisibilityTimeout": 0}
                for index, message in enumerate(messages[start : start + 10])
            ],
        )
    return messages


def _attribute(message: Mapping[str, Any], name: str) -> str | None:
    value = message.get("MessageAttributes", {}).get(name)
    return None if value is None else str(value.get("StringValue"))


def read_state(endpoint: Endpoint, outputs: Mapping[str, str], notification_queue_url: str) -> EndpointState:
    """Read the tables, the notifications, the DLQ and the source queue's depth from the endpoint."""
    dynamodb = endpoint.client("dynamodb")
    sqs = endpoint.client("sqs")
    processed = {item["event_id"]: item for item in _scan(dynamodb, outputs[names.PROCESSED_EVENTS_TABLE_OUTPUT])}
    notifications = [json.loads(message["Body"]) for message in peek_queue(sqs, notification_queue_url)]
    dead_letters = [
        ParkedMessage(
            message_id=message["MessageId"],
            source_message_id=_attribute(message, "source_message_id") or message["MessageId"],
            error_code=_attribute(message, "error_code") or REDRIVEN,
            error_message=_attribute(message, "error_message"),
        )
        for message in peek_queue(sqs, outputs[names.DEAD_LETTER_QUEUE_URL_OUTPUT])
    ]
    visible, in_flight = queue_depth(sqs, outputs[names.QUEUE_URL_OUTPUT])
    return EndpointState(
        order_rows=_scan(dynamodb, outputs[names.ORDER_RECORDS_TABLE_OUTPUT]),
        processed_events=processed,
        notifications=notifications,
        dead_letters=dead_letters,
        queue_visible=visible,
        queue_in_flight=in_flight,
    )


def _short(messages: Iterable[str], limit: int = 5) -> str:
    items = sorted(messages)
    return ", ".join(items[:limit]) + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


def check(plan: TrafficPlan, state: EndpointState) -> CheckResult:
    """Hold ``state`` against ``plan``; every violation is described in the result."""
    result = CheckResult()
    problems: dict[str, list[str]] = defaultdict(list)
    parked = {letter.source_message_id: letter for letter in state.dead_letters}
    result.dead_letters_by_code.update(letter.error_code for letter in state.dead_letters)

    by_event: dict[str, list[PlannedMessage]] = defaultdict(list)
    for message in plan.messages:
        if message.kind in ACCEPTED_KINDS:
            by_event[str(message.event_id)].append(message)
    rows_by_event: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in state.order_rows:
        rows_by_event[str(row.get("event_id"))].append(row)
    notified: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for note in state.notifications:
        notified[str(note.get("event_id"))].append(note)

    duplicate_rows = sum(len(rows) - 1 for rows in rows_by_event.values() if len(rows) > 1)
    unknown_rows = [str(row.get("order_id")) for row in state.order_rows if str(row.get("event_id")) not in by_event]
    without_notification: list[str] = []
    redriven_events = 0
    losing_conflicts = 0
    for event_id, messages in by_event.items():
        rows = rows_by_event.get(event_id, [])
        if not rows:
            if all(
                parked.get(str(m.message_id)) and parked[str(m.message_id)].error_code == REDRIVEN for m in messages
            ):
                redriven_events += 1
            else:
                problems["accepted events with no order row (lost)"].append(event_id)
            continue
        recorded = rows[0].get("payload_sha256")
        if recorded not in {m.payload_sha256 for m in messages}:
            problems["order rows with a payload nobody sent under their key"].append(event_id)
        record = state.processed_events.get(event_id)
        if record is None:
            problems["order rows without a processed_events record"].append(event_id)
        elif record.get(names.STATUS_ATTRIBUTE) != names.Status.SENT:
            problems["events left pending (status not 'sent')"].append(event_id)
        elif record.get("payload_sha256") != recorded:
            problems["processed_events and order row disagree on the payload"].append(event_id)
        notes = notified.get(event_id, [])
        if not notes:
            without_notification.append(event_id)
        elif any(note.get("payload_sha256") != recorded for note in notes):
            problems["notifications naming a payload that was not recorded"].append(event_id)
        for message in messages:
            letter = parked.get(str(message.message_id))
            if message.payload_sha256 != recorded:
                losing_conflicts += 1
                if letter is None or letter.error_code not in (IDEMPOTENCY_CONFLICT, REDRIVEN):
                    problems["conflicting messages not parked as IDEMPOTENCY_CONFLICT"].append(str(message.message_id))
            elif letter is not None and letter.error_code != REDRIVEN:
                problems["messages with the recorded payload parked in the DLQ"].append(str(message.message_id))

    invalid = [message for message in plan.messages if message.kind == "invalid"]
    for message in invalid:
        letter = parked.get(str(message.message_id))
        if letter is None or letter.error_code not in (INVALID_MESSAGE, REDRIVEN):
            problems["invalid messages not parked as INVALID_MESSAGE"].append(f"{message.invalid_reason}")
    violations = [message for message in plan.messages if message.kind == "schema_violation"]
    for message in violations:
        letter = parked.get(str(message.message_id))
        if letter is None or letter.error_code not in (SCHEMA_VIOLATION, REDRIVEN):
            problems["schema violations not parked as SCHEMA_VIOLATION"].append(f"{message.invalid_reason}")
        if str(message.event_id) in rows_by_event:
            problems["schema violations recorded as orders"].append(str(message.order_id))
    sent_ids = {str(message.message_id) for message in plan.messages}
    strangers = [letter.source_message_id for letter in state.dead_letters if letter.source_message_id not in sent_ids]
    if strangers:
        problems["DLQ messages that were never sent"].extend(strangers)
    if unknown_rows:
        problems["order rows for orders nobody sent"].extend(unknown_rows)
    if duplicate_rows:
        problems["duplicate order rows"].append(str(duplicate_rows))
    if without_notification:
        problems["events without a notification"].extend(without_notification)
    if state.queue_visible or state.queue_in_flight:
        problems["messages left in the source queue"].append(
            f"{state.queue_visible} visible, {state.queue_in_flight} in flight"
        )

    result.figures = {
        "messages sent": len(plan.messages),
        "orders": plan.count("order"),
        "re-sent by the producer": plan.count("resend"),
        "conflicting": plan.count("conflict"),
        "invalid": len(invalid),
        "schema violations": len(violations),
        "unique events": len(by_event),
        "order rows": len(state.order_rows),
        "duplicate rows": duplicate_rows,
        "events without a notification": len(without_notification),
        "notifications received": len(state.notifications),
        "events parked by redrive": redriven_events,
        "dead letters": len(state.dead_letters),
        "distinct messages in the DLQ": len(parked),
        "distinct messages parked by the handler": sum(letter.error_code != REDRIVEN for letter in parked.values()),
        "expected in the DLQ": len(invalid) + len(violations) + losing_conflicts,
    }
    result.violations = [f"{name}: {len(items)} ({_short(items)})" for name, items in problems.items()]
    return result
